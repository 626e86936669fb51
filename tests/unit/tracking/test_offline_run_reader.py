"""The tests' reader of wandb's offline run files (``tests/wandb_files.py``), on a real offline run: a
file still being written when a test reads it is read again until it is whole."""

from __future__ import annotations

import threading
from pathlib import Path

import wandb

from wandb_files import read_run


def finished_run(tmp_path: Path) -> Path:
    run = wandb.init(project="reader", id="reader-run", dir=tmp_path, mode="offline",
                     settings=wandb.Settings(silent=True, x_save_requirements=False))
    run.log({"loss": 0.5})
    run.finish()
    (directory,) = (tmp_path / "wandb").glob("offline-run-*")
    return directory


def test_a_run_file_read_before_its_first_record_is_written_is_read_again_until_it_is(tmp_path):
    directory = finished_run(tmp_path)
    (run_file,) = directory.glob("run-*.wandb")
    whole = run_file.read_bytes()
    run_file.write_bytes(whole[:7])  # the header only, as CI once found a summary run's file
    writer = threading.Timer(0.5, run_file.write_bytes, args=(whole,))
    writer.start()
    try:
        run = read_run(directory)
    finally:
        writer.join()
    assert (run.run_id, run.project) == ("reader-run", "reader")
    assert [row["loss"] for row in run.history] == [0.5]
