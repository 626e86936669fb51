"""Saves on a full disk (:mod:`tune_service.experiment.saving`), on a real small file system: a tmpfs
mounted for the test (root, as CI and this project's machines run; skipped where it cannot be)."""

from __future__ import annotations

import inspect
import logging
import threading
import time

import pytest

from small_disk import mounted_tmpfs
from tune_service.errors import StorageFull
from tune_service.experiment import saving
from tune_service.experiment.layout import atomic_write


@pytest.fixture
def full_disk(tmp_path):
    """A 1 MiB tmpfs holding ``summary.json`` (its last good copy) and a ballast file that fills the rest."""
    with mounted_tmpfs(tmp_path / "disk", "1m") as mount:
        (mount / "summary.json").write_text('{"good": true}')
        try:
            with open(mount / "ballast", "wb") as f:
                while True:
                    f.write(b"\0" * 4096)
                    f.flush()
        except OSError:
            pass
        yield mount


def test_failed_saves_are_said_once_and_their_recovery_once(full_disk, caplog):
    saves = saving.FailingSaves("summary.json")

    def write():
        atomic_write(full_disk / "summary.json", '{"good": "newer"}' * 1000)

    with caplog.at_level(logging.WARNING, logger=saving.__name__):
        assert [saves.attempt(write) for _ in range(3)] == [False, False, False]
        assert (full_disk / "summary.json").read_text() == '{"good": true}'  # the last good copy
        (full_disk / "ballast").unlink()
        assert saves.attempt(write) and saves.attempt(write)
    assert [r.getMessage() for r in caplog.records] == [
        "could not save summary.json (No space left on device); the last good copy is kept and later saves try again",
        "saved summary.json again, after 3 failed attempt(s)"]


def test_the_last_save_waits_for_space(full_disk):
    def free_later():
        time.sleep(0.5)
        (full_disk / "ballast").unlink()

    threading.Thread(target=free_later).start()
    saving.save_at_the_end("summary.json", lambda: atomic_write(full_disk / "summary.json", "x" * 100_000),
                           patience_s=30)
    assert (full_disk / "summary.json").read_text() == "x" * 100_000


def test_the_last_save_gives_up_in_one_line_keeping_the_last_good_copy(full_disk, monkeypatch):
    monkeypatch.setattr(saving, "_FINAL_SAVE_RETRY_S", 0.05)
    with pytest.raises(StorageFull) as raised:
        saving.save_at_the_end("summary.json", lambda: atomic_write(full_disk / "summary.json", "x" * 100_000),
                               patience_s=0.3)
    message = str(raised.value)
    assert message.startswith("summary.json: could not be saved (No space left on device) after ")
    assert message.endswith("free space, then `tune-run --resume` writes it") and "\n" not in message
    assert raised.value.exit_code == 1
    assert (full_disk / "summary.json").read_text() == '{"good": true}'


def test_tunes_failed_state_saves_are_one_warning_and_other_records_pass(caplog):
    tune_logger = logging.getLogger(saving.TuneStateSaveErrors.LOGGER)
    errors = saving.TuneStateSaveErrors()
    tune_logger.addFilter(errors)
    try:
        with caplog.at_level(logging.WARNING):
            for _ in range(3):
                try:
                    raise OSError(28, "No space left on device")
                except OSError:
                    tune_logger.error("Saving experiment state to storage at '/x' failed with exception: ",
                                      exc_info=True)
            tune_logger.error("something else")
    finally:
        tune_logger.removeFilter(errors)
    messages = [r.getMessage() for r in caplog.records]
    assert messages == ["could not save Tune's experiment state into storage (No space left on device); the last "
                        "good copy is kept and later saves try again", "something else"]
    assert errors.failures == 3


def test_ray_still_logs_the_failed_state_save_that_the_filter_turns_into_a_warning():
    from ray.tune.execution import experiment_state

    source = inspect.getsource(experiment_state)
    assert experiment_state.__name__ == saving.TuneStateSaveErrors.LOGGER
    assert f'"{saving.TuneStateSaveErrors._MESSAGE} at "' in source  # else Ray's traceback shows again
