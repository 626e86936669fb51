"""A warm trial's checkpoints in the experiment's storage: Tune's ``checkpoint_NNNNNN`` directories in
the trial's directory, each holding the shared loop's ``state.pt`` and the report that came with it
(``report.json``, written by rank 0 beside the state).

The newest complete one is what a resumed or retried trial starts from, even when the driver died
before Tune recorded it: the trial goes on from the last epoch whose state is safe in storage.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from tune_service.experiment.layout import CHECKPOINT_REPORT_FILE, TIME_ATTR
from tune_service.ray_internals import private

_STATE_FILE = "state.pt"  # tune_service.training.checkpoint.STATE_FILE, without importing torch here
_CHECKPOINT_PREFIX = "checkpoint_"
#: Where Ray Train 2.60 records that run's checkpoints and the metrics reported with each.
TRAIN_SNAPSHOT_FILE = "checkpoint_manager_snapshot.json"
#: The Ray Train run of a trial, in the trial's directory of the experiment's storage; relaunching it
#: under the same name resumes it from its latest checkpoint.
TRAIN_RUN_NAME = "ddp"


def checkpoint_directories(trial_storage_path: str, filesystem: Any) -> list[str]:
    """The names of the checkpoint directories in the trial's directory (on ``filesystem``, a pyarrow
    filesystem), oldest first: Tune numbers them in order, with leading zeros (``checkpoint_000003``)."""
    from pyarrow import fs as pafs

    entries = filesystem.get_file_info(pafs.FileSelector(trial_storage_path, allow_not_found=True))
    return sorted(
        e.base_name for e in entries if e.type == pafs.FileType.Directory and e.base_name.startswith(_CHECKPOINT_PREFIX)
    )


@dataclass(frozen=True)
class StoredCheckpoint:
    """One complete checkpoint: its directory on ``filesystem`` (a pyarrow filesystem) and its report."""

    path: str
    filesystem: Any
    report: dict[str, Any]

    def as_ray_checkpoint(self):
        return ray_checkpoint(self.path, self.filesystem)


def ray_checkpoint(path: str, filesystem: Any = None) -> Any:
    """The ``ray.train.Checkpoint`` of the directory ``path`` (on ``filesystem``, a pyarrow filesystem)."""
    import ray.train

    return ray.train.Checkpoint(path=path, filesystem=filesystem)


def newest_checkpoint(
    trial_storage_path: str,
    filesystem: Any = None,
    with_state: bool = True,
    accept: Callable[[dict[str, Any]], bool] | None = None,
) -> StoredCheckpoint | None:
    """The newest complete checkpoint in the trial's directory (``trial_storage_path`` on ``filesystem``,
    the local one by default), or None. A directory whose state (unless ``with_state`` is False: a W&B
    program's last report has none) or report is missing or unreadable (a copy cut off by a crash) is
    passed over for the one before it, as is one whose report ``accept`` (if given) refuses."""
    from pyarrow import fs as pafs

    filesystem = filesystem or pafs.LocalFileSystem()
    try:
        names = checkpoint_directories(trial_storage_path, filesystem)
    except OSError:
        return None
    for name in reversed(names):
        stored = read_checkpoint(f"{trial_storage_path}/{name}", filesystem, with_state)
        if stored is not None and (accept is None or accept(stored.report)):
            return stored
    return None


def read_checkpoint(path: str, filesystem: Any = None, with_state: bool = True) -> StoredCheckpoint | None:
    """The checkpoint in directory ``path`` (on ``filesystem``, the local one by default) with its report,
    or None when it is incomplete: its state (unless ``with_state`` is False) or report missing or
    unreadable."""
    from pyarrow import fs as pafs

    filesystem = filesystem or pafs.LocalFileSystem()
    try:
        if with_state and filesystem.get_file_info(f"{path}/{_STATE_FILE}").type != pafs.FileType.File:
            return None
        with filesystem.open_input_stream(f"{path}/{CHECKPOINT_REPORT_FILE}") as stream:
            report = json.loads(stream.readall())
    except (OSError, ValueError):
        return None
    return StoredCheckpoint(path, filesystem, report) if isinstance(report, dict) else None


def latest_checkpoint_dir(trial_dir: str | os.PathLike) -> Path | None:
    """The newest complete checkpoint directory (one holding ``state.pt``) of the trial whose directory
    in a local experiment directory is ``trial_dir``, or None; both layouts are read: a warm trial's
    Tune checkpoints (:func:`newest_checkpoint`), else a fresh trial's Ray Train run (``ddp/``), whose
    snapshot names its latest checkpoint (the newest by name when the snapshot does not)."""
    trial_dir = Path(trial_dir)
    stored = newest_checkpoint(str(trial_dir))
    if stored is not None:
        return Path(stored.path)
    run_dir = trial_dir / TRAIN_RUN_NAME
    try:
        snapshot = json.loads((run_dir / TRAIN_SNAPSHOT_FILE).read_text(encoding="utf-8"))
        name = snapshot["latest_checkpoint_result"]["checkpoint_dir_name"]
    except (OSError, ValueError, KeyError, TypeError):
        name = None
    if isinstance(name, str) and (run_dir / name / _STATE_FILE).is_file():
        return run_dir / name
    # Ray Train names checkpoint directories by time: the newest sorts last.
    saved = sorted(run_dir.glob(f"{_CHECKPOINT_PREFIX}*/{_STATE_FILE}"))
    return saved[-1].parent if saved else None


def trial_storage() -> tuple[str, Any]:
    """The running trial's directory in the experiment's storage (a local path, or a path on the
    storage's pyarrow filesystem) and that filesystem; ``get_trial_dir()`` is a per-session staging
    directory. Call it in a trial."""
    from ray.train._internal import session

    storage = private(session, "get_storage")()
    return storage.trial_fs_path, storage.storage_filesystem


def number_after_existing_checkpoints() -> None:
    """In a trial: number its next checkpoint after every one already in its directory of storage.

    Tune numbers a trial's checkpoints from its own count of those it recorded, which a resumed driver
    takes from its last save of the experiment's state (and a restarted trial from what the driver had
    recorded): without this, the checkpoints written after that count would be written over, one of them
    perhaps a checkpoint PBT keeps for other trials to copy."""
    from ray.train._internal import session

    storage = private(session, "get_storage")()
    names = checkpoint_directories(storage.trial_fs_path, storage.storage_filesystem)
    if names:  # Tune adds one to the index before it writes a checkpoint
        newest = int(names[-1][len(_CHECKPOINT_PREFIX) :])
        storage.current_checkpoint_index = max(storage.current_checkpoint_index, newest)


def checkpointed_report(trial_storage_path: str, filesystem: Any = None) -> dict[str, Any] | None:
    """The report that came with the latest checkpoint of the trial whose directory in the
    experiment's storage is ``trial_storage_path`` (on ``filesystem``, a pyarrow filesystem; the local
    one by default): where a resumed attempt of the trial starts from. None before its first checkpoint.

    Both layouts are read: a fresh trial's Ray Train run (``ddp/``), and a warm trial's Tune checkpoints
    (:func:`newest_checkpoint`)."""
    if filesystem is None:
        from pyarrow.fs import LocalFileSystem

        filesystem = LocalFileSystem()
    snapshot_path = f"{trial_storage_path}/{TRAIN_RUN_NAME}/{TRAIN_SNAPSHOT_FILE}"
    try:
        with filesystem.open_input_stream(snapshot_path) as stream:
            metrics = json.loads(stream.readall())["latest_checkpoint_result"]["metrics"]
    except (OSError, ValueError, KeyError, TypeError):  # not a fresh trial, or no checkpoint yet
        stored = newest_checkpoint(trial_storage_path, filesystem)
        metrics = None if stored is None else stored.report
    return dict(metrics) if isinstance(metrics, dict) and TIME_ATTR in metrics else None
