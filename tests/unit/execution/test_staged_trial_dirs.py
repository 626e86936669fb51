"""A retired trial's directory moves from the driver's staging copy into storage, a batch at a time, after
Tune's copy in flight; a move that fails leaves the directory to Tune's saves and is warned of once. The
sweep's own staging directory: tests/integration/test_retired_trials.py."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace

import pyarrow.fs

from tune_service.experiment.staging import StagedTrialDirs


class TuneCopies:
    """Stands in for the syncer of Tune's copies into storage, which the trials' storage contexts share:
    counts the waits for the copy in flight, and fails them with ``error`` if given."""

    def __init__(self, error: Exception | None = None):
        self.waits, self.error = 0, error

    def wait(self) -> None:
        self.waits += 1
        if self.error is not None:
            raise self.error


def staged_trial(tmp_path: Path, name: str, copies: TuneCopies, storage: Path | None = None) -> SimpleNamespace:
    """A trial Tune wrote a staging directory for (its files, as Tune's loggers leave them)."""
    staged = tmp_path / "staging" / name
    staged.mkdir(parents=True)
    for file in ("params.json", "result.json", "progress.csv"):
        (staged / file).write_text(f"{name}'s {file}")
    (staged / "checkpoint_000000").mkdir()
    (staged / "checkpoint_000000" / "model.pt").write_bytes(b"weights")
    local = pyarrow.fs.LocalFileSystem()
    place = storage if storage is not None else tmp_path / "storage" / name
    return SimpleNamespace(
        trial_id=name, local_path=str(staged), path=str(place),
        storage=SimpleNamespace(storage_filesystem=local, syncer=copies),
    )


def test_the_retired_trials_directories_move_whole_a_batch_at_a_time_after_tunes_copy(tmp_path):
    copies = TuneCopies()
    first, second, third = (staged_trial(tmp_path, name, copies) for name in ("a", "b", "c"))
    staged = StagedTrialDirs(batch=2)
    staged.retired([first])
    assert Path(first.local_path).is_dir() and copies.waits == 0 and staged.moved == 0
    staged.retired([second, third])
    assert copies.waits == 1 and staged.moved == 3
    for trial in (first, second, third):
        assert not Path(trial.local_path).exists()
        moved = Path(trial.path)
        assert (moved / "result.json").read_text() == f"{trial.trial_id}'s result.json"
        assert (moved / "checkpoint_000000" / "model.pt").read_bytes() == b"weights"
    staged.move()  # none waiting
    assert copies.waits == 1


def test_a_move_that_fails_leaves_the_directory_in_staging_and_is_warned_of_once(tmp_path, caplog):
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")
    copies = TuneCopies()
    unwritable = [staged_trial(tmp_path, name, copies, storage=blocked / name) for name in ("a", "b")]
    staged = StagedTrialDirs(batch=1)
    with caplog.at_level(logging.WARNING, logger="tune_service.experiment.saving"):
        staged.retired(unwritable[:1])
        staged.retired(unwritable[1:])
        staged.retired([staged_trial(tmp_path, "c", copies)])
    assert staged.moved == 1
    assert all((Path(t.local_path) / "result.json").is_file() for t in unwritable)  # for Tune's saves
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 2, warnings
    assert warnings[0].startswith("could not save a finished trial's directory into storage (")
    assert warnings[1] == "saved a finished trial's directory into storage again, after 2 failed attempt(s)"


def test_a_failed_copy_of_tunes_is_warned_of_and_the_trials_still_move(tmp_path, caplog):
    copies = TuneCopies(error=RuntimeError("the bucket said no"))
    trial = staged_trial(tmp_path, "a", copies)
    with caplog.at_level(logging.WARNING, logger="tune_service.experiment.saving"):
        StagedTrialDirs(batch=1).retired([trial])
    assert [r.getMessage() for r in caplog.records] == [
        "could not save Tune's copy of the experiment's state into storage (the bucket said no); the last good "
        "copy is kept and later saves try again"
    ]
    assert not Path(trial.local_path).exists() and (Path(trial.path) / "params.json").is_file()


def test_a_directory_staged_where_it_is_stored_stays(tmp_path):
    trial = staged_trial(tmp_path, "a", TuneCopies())
    trial.path = trial.local_path
    staged = StagedTrialDirs(batch=1)
    staged.retired([trial])
    assert (Path(trial.local_path) / "result.json").read_text() == "a's result.json"
