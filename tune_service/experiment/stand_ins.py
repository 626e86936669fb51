"""Stand-ins for trial checkpoints that Tune deleted but that its saved state may still name.

Tune records each trial's latest checkpoint in the experiment's state, saved every
:data:`~tune_service.experiment.state_saves.STATE_SAVE_PERIOD_S`. Between two saves a fast trial can write
several checkpoints, and ``CheckpointConfig(num_to_keep=2)`` deletes the older ones. If the driver is killed
then, its state names a checkpoint that is gone. On resume Tune's ``Trainable.restore`` checks that the
checkpoint exists and fails the trial when it does not ("Could not recover from checkpoint as it does not
exist on storage anymore"). That happens before the trial's function runs, although the function would
have started from the newest checkpoint in storage anyway (:meth:`SweepTrial.own_start`).

The checkpoint that Tune names lives in its cloudpickled checkpoint manager, which is private to Ray.
So before a resume, :func:`put_stand_ins` puts a stand-in at every missing index below each trial's
newest checkpoint directory, up to :data:`WINDOW` indices back. A stand-in is a directory that holds one
file, :data:`STAND_IN_FILE`. Tune's existence check passes on it. The trial's own start passes over it,
since it has no state or report, and uses the newest complete checkpoint instead.
:func:`remove_stand_ins` takes them away at the sweep's end.
"""

from __future__ import annotations

import re
from typing import Any

from tune_service.experiment.checkpoints import checkpoint_directories
from tune_service.experiment.layout import TRIAL_DIR_PREFIX

#: The one file a stand-in holds; no checkpoint of the shared loop has it.
STAND_IN_FILE = "stand_in_for_a_deleted_checkpoint"
#: How many indices below a trial's newest checkpoint get a stand-in where none is. Tune's state is at
#: most a save period behind the trials, a few checkpoints even for trials that checkpoint several times a
#: second.
WINDOW = 64
_CHECKPOINT = re.compile(r"^checkpoint_(?P<index>\d{6})$")


def put_stand_ins(experiment_path: str, filesystem: Any = None) -> int:
    """Put a stand-in at each missing checkpoint index, within :data:`WINDOW` below the newest, of every
    trial in ``experiment_path`` (a path on ``filesystem``, the local one by default). Returns how many."""
    filesystem = _filesystem(filesystem)
    put = 0
    for trial_path in _trial_paths(experiment_path, filesystem):
        indices = set(_checkpoint_indices(trial_path, filesystem))
        if not indices:
            continue
        newest = max(indices)
        for index in range(max(0, newest - WINDOW), newest):
            if index not in indices:
                path = f"{trial_path}/checkpoint_{index:06d}"
                filesystem.create_dir(path, recursive=True)
                with filesystem.open_output_stream(f"{path}/{STAND_IN_FILE}") as stream:
                    stream.write(f"checkpoint_{newest:06d}\n".encode())
                put += 1
    return put


def remove_stand_ins(experiment_path: str, filesystem: Any = None) -> int:
    """Remove every stand-in :func:`put_stand_ins` put in ``experiment_path``. Tune numbers a resumed
    trial's new checkpoints from its state, so it may have written one into a stand-in's directory: that
    directory is a checkpoint now, and only the stand-in's file goes. Returns how many stand-ins went."""
    from pyarrow import fs as pafs

    filesystem = _filesystem(filesystem)
    removed = 0
    for trial_path in _trial_paths(experiment_path, filesystem):
        for index in _checkpoint_indices(trial_path, filesystem):
            path = f"{trial_path}/checkpoint_{index:06d}"
            held = [entry.base_name for entry in filesystem.get_file_info(pafs.FileSelector(path, recursive=True))]
            if STAND_IN_FILE not in held:
                continue
            if held == [STAND_IN_FILE]:
                filesystem.delete_dir(path)
            else:
                filesystem.delete_file(f"{path}/{STAND_IN_FILE}")
            removed += 1
    return removed


def _filesystem(filesystem: Any) -> Any:
    from pyarrow import fs as pafs

    return filesystem or pafs.LocalFileSystem()


def _trial_paths(experiment_path: str, filesystem: Any) -> list[str]:
    from pyarrow import fs as pafs

    entries = filesystem.get_file_info(pafs.FileSelector(experiment_path, allow_not_found=True))
    return sorted(
        e.path for e in entries if e.type == pafs.FileType.Directory and e.base_name.startswith(TRIAL_DIR_PREFIX)
    )


def _checkpoint_indices(trial_path: str, filesystem: Any) -> list[int]:
    matches = (_CHECKPOINT.match(name) for name in checkpoint_directories(trial_path, filesystem))
    return [int(m["index"]) for m in matches if m]
