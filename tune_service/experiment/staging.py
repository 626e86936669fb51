"""A retired trial's directory moves from the driver's staging copy of the experiment into its storage.

Tune writes each trial's files (``params.json`` and ``.pkl``, ``result.json``, ``progress.csv``, its
TensorBoard events) in the driver's staging directory and, at every save of its state, copies that
whole directory into the experiment's storage (``pyarrow.fs.copy_files``: every file, changed or not).
So each save costs more with every trial the sweep has run. At 1,700 trials it took a fifth of the
driver's time and the sweep ran at half its early rate (docs/benchmarks.md, "Tune's copy of its staging
directory").

A trial that has left Tune's controller (:mod:`tune_service.execution.retiring`) is never written
again. :class:`StagedTrialDirs` copies its directory into storage once and removes it from staging, so
Tune's saves copy only the trials it still holds. It moves them :data:`MOVE_BATCH` at a time, after
waiting for Tune's copy in flight: that copy lists the staging directory first, and a directory removed
under it would fail it. A move that fails is warned of once (:class:`FailingSaves`) and leaves the
directory in staging, where Tune's saves go on copying it as before.
"""

from __future__ import annotations

import functools
import shutil
from pathlib import Path
from typing import Any, Iterable

from tune_service.experiment.saving import FailingSaves

#: How many retired trials' directories move together: each move first waits for Tune's copy in flight,
#: which at this size is done (or nearly) by the time the batch is full.
MOVE_BATCH = 10


class StagedTrialDirs:
    """The staging directories of the trials that have left Tune's controller, moved into storage
    :data:`MOVE_BATCH` (``batch``) at a time. ``moved``: how many have moved."""

    def __init__(self, batch: int = MOVE_BATCH):
        self.batch = batch
        self.moved = 0
        self._waiting: list[Any] = []
        self._tune_copies = FailingSaves("Tune's copy of the experiment's state into storage")
        self._moves = FailingSaves("a finished trial's directory into storage")

    def retired(self, trials: Iterable[Any]) -> None:
        """``trials`` (Tune's ``Trial`` objects) have left Tune's controller; move their directories once
        a batch is full."""
        self._waiting.extend(trials)
        if len(self._waiting) >= self.batch:
            self.move()

    def move(self) -> None:
        """Move every waiting trial's directory into storage now."""
        if not self._waiting:
            return
        waiting, self._waiting = self._waiting, []
        # Every trial's storage context is a copy of the experiment's and shares its syncer. The wait
        # consumes a failure of Tune's copy, which Tune would otherwise have warned of at its next one.
        self._tune_copies.attempt(waiting[0].storage.syncer.wait, errors=(Exception,))
        for trial in waiting:
            if self._moves.attempt(functools.partial(_move, trial)):
                self.moved += 1


def _move(trial: Any) -> None:
    """``trial``'s staging directory, copied whole into its directory in storage, then removed."""
    import pyarrow.fs

    staged = Path(trial.local_path)
    if not staged.is_dir():
        return  # Tune never wrote one (a trial that failed before it started)
    filesystem = trial.storage.storage_filesystem
    if filesystem.type_name == "local" and Path(trial.path).resolve() == staged.resolve():
        return  # staged where it is stored (never with Ray's layout): removing it would lose the trial
    filesystem.create_dir(trial.path, recursive=True)
    pyarrow.fs.copy_files(str(staged), trial.path, destination_filesystem=filesystem)
    shutil.rmtree(staged)
