"""Saves that a full disk (ENOSPC, or any other I/O error) must not turn into a lost sweep.

A sweep saves often: Tune's state and our copy of it, ``summary.json``, each trial's checkpoints. When
one of these saves fails with an I/O error, the sweep goes on: the file saved last stays as it was
(every save here writes a temporary file and renames it, or is a new checkpoint directory), the user is
told once, and the next save (the next state period, trial end, epoch) simply tries again. When a save
succeeds again, that is said once too.
"""

from __future__ import annotations

import logging
import time
from typing import Callable

logger = logging.getLogger(__name__)


class FailingSaves:
    """The saves of one kind (``what``, e.g. ``"summary.json"``), which may fail with an I/O error."""

    def __init__(self, what: str):
        self.what = what
        self.failing = False
        self.failures = 0
        self.last_error = ""

    def attempt(self, save: Callable[[], object], errors: tuple[type[Exception], ...] = (OSError,)) -> bool:
        """Run ``save``; an error of ``errors`` (an ``OSError`` unless told) is caught, warned of once per
        run of failures, and False returned."""
        try:
            save()
        except errors as error:
            self.failures += 1
            self.last_error = str(getattr(error, "strerror", None) or error)
            if not self.failing:
                logger.warning(
                    "could not save %s (%s); the last good copy is kept and later saves try again",
                    self.what,
                    self.last_error,
                )
            self.failing = True
            return False
        if self.failing:
            logger.warning("saved %s again, after %d failed attempt(s)", self.what, self.failures)
            self.failing, self.failures = False, 0
        return True


#: How long the sweep's last save (its summary) waits for space before the sweep ends with an error.
FINAL_SAVE_PATIENCE_S = 60.0
_FINAL_SAVE_RETRY_S = 2.0


def save_at_the_end(what: str, save: Callable[[], object], patience_s: float | None = None) -> None:
    """Run ``save``, the sweep's last save of ``what``, retrying every few seconds while it fails with an
    I/O error (warned once), for at most ``patience_s`` (default :data:`FINAL_SAVE_PATIENCE_S`).

    Raises:
        StorageFull: it still failed then; one line naming the file, the error, and what to do.
    """
    from tune_service.errors import StorageFull

    saves = FailingSaves(what)
    deadline = time.monotonic() + (FINAL_SAVE_PATIENCE_S if patience_s is None else patience_s)
    while not saves.attempt(save):
        if time.monotonic() >= deadline:
            raise StorageFull(
                f"{what}: could not be saved ({saves.last_error}) after {saves.failures} attempts; "
                f"the trials' results are kept in their directories: free space, then "
                f"`tune-run --resume` writes it"
            )
        time.sleep(_FINAL_SAVE_RETRY_S)


class TuneStateSaveErrors(logging.Filter):
    """Tune's own error, with its traceback, each time its copy of the experiment's state into storage
    fails (Ray 2.60 logs ``Saving experiment state to storage at ... failed`` at ERROR, and tries again at
    its next save): said once, as a warning, instead. Put on Tune's logger while the sweep runs."""

    LOGGER = "ray.tune.execution.experiment_state"
    _MESSAGE = "Saving experiment state to storage"

    def __init__(self):
        super().__init__()
        self.failures = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith(self._MESSAGE):
            return True
        self.failures += 1
        if self.failures == 1:
            error = record.exc_info[1] if record.exc_info else None
            logger.warning(
                "could not save Tune's experiment state into storage (%s); the last good copy is "
                "kept and later saves try again",
                getattr(error, "strerror", None) or error,
            )
        return False
