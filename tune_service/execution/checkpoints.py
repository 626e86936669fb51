"""A warm trial's checkpoints in the experiment's storage: Tune's ``checkpoint_NNNNNN`` directories in
the trial's directory, each holding the shared loop's ``state.pt`` and the report that came with it
(``report.json``, written by rank 0 beside the state).

The newest complete one is what a resumed or retried trial starts from, even when the driver died
before Tune recorded it: the trial goes on from the last epoch whose state is safe in storage.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

#: The report that came with a checkpoint, beside its ``state.pt``.
CHECKPOINT_REPORT_FILE = "report.json"
_STATE_FILE = "state.pt"  # tune_service.training.checkpoint.STATE_FILE, without importing torch here
_CHECKPOINT_PREFIX = "checkpoint_"


@dataclass(frozen=True)
class StoredCheckpoint:
    """One complete checkpoint: its directory on ``filesystem`` (a pyarrow filesystem) and its report."""

    path: str
    filesystem: Any
    report: dict[str, Any]

    def as_ray_checkpoint(self):
        import ray.train

        return ray.train.Checkpoint(path=self.path, filesystem=self.filesystem)


def newest_checkpoint(trial_storage_path: str, filesystem: Any = None) -> StoredCheckpoint | None:
    """The newest complete checkpoint in the trial's directory (``trial_storage_path`` on ``filesystem``,
    the local one by default), or None. A directory whose state or report is missing or unreadable (a
    copy cut off by a crash) is passed over for the one before it."""
    from pyarrow import fs as pafs

    filesystem = filesystem or pafs.LocalFileSystem()
    try:
        entries = filesystem.get_file_info(pafs.FileSelector(trial_storage_path, allow_not_found=True))
    except OSError:
        return None
    # Tune numbers checkpoint directories in order, with leading zeros: the newest sorts last.
    names = sorted((e.base_name for e in entries if e.type == pafs.FileType.Directory
                    and e.base_name.startswith(_CHECKPOINT_PREFIX)), reverse=True)
    for name in names:
        path = f"{trial_storage_path}/{name}"
        try:
            if filesystem.get_file_info(f"{path}/{_STATE_FILE}").type != pafs.FileType.File:
                continue
            with filesystem.open_input_stream(f"{path}/{CHECKPOINT_REPORT_FILE}") as stream:
                report = json.loads(stream.readall())
        except (OSError, ValueError):
            continue
        if isinstance(report, dict):
            return StoredCheckpoint(path, filesystem, report)
    return None


def trial_storage() -> tuple[str, Any]:
    """The running trial's directory in the experiment's storage (a local path, or a path on the
    storage's pyarrow filesystem) and that filesystem; ``get_trial_dir()`` is a per-session staging
    directory. Call it in a trial."""
    from ray.train._internal.session import get_storage  # a DeveloperAPI of the pinned Ray 2.60

    storage = get_storage()
    return storage.trial_fs_path, storage.storage_filesystem
