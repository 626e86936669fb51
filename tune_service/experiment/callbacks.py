"""Tune callbacks that live in the driver process, and survive a resume.

Ray pickles a Tuner's callbacks into the experiment's ``tuner.pkl`` and, on ``Tuner.restore``, uses the
unpickled ones: a resumed sweep would get stale copies (without their threads or open runs) instead of
the resuming driver's callbacks. So a :class:`DriverCallback` pickles as its key only, and unpickles as
the callback registered under that key in the process that resumes (a no-op callback if there is none).
"""

from __future__ import annotations

from typing import Any

from ray.tune import Callback
from ray.tune.experiment import Trial

from tune_service.experiment.layout import creation_number

_LIVE: dict[str, Callback] = {}
#: Tune's statuses of a trial that has ended, for good or with an error (as search.hyperband's _ENDED).
_FINISHED = (Trial.TERMINATED, Trial.ERROR)


def _live_callback(key: str) -> Callback:
    return _LIVE.get(key) or Callback()


class DriverCallback(Callback):
    """A callback registered under ``key`` (the experiment's name and the callback's kind) until
    :meth:`release`."""

    def __init__(self, key: str):
        self.live_key = key
        _LIVE[key] = self

    def __reduce__(self):
        return _live_callback, (self.live_key,)

    def release(self) -> None:
        if _LIVE.get(self.live_key) is self:
            del _LIVE[self.live_key]


class FinalStatuses(DriverCallback):
    """Records the trials left unfinished when the experiment ended: an interrupted sweep (Ctrl+C)
    leaves running and pending trials, which :func:`tune_service.resume` continues.

    Statuses are read at the end of each step of Tune's loop: when an interrupted experiment ends, Tune
    has already marked its running trials as terminated, though their saved state says running. Each
    step reads the trials not yet finished and the ones added since the last step, never the finished
    ones behind them, so a step costs the same at the ten-thousandth trial as at the first.
    """

    def __init__(self, experiment: str):
        super().__init__(f"{experiment}/statuses")
        self._open: dict[str, Any] = {}  # trial id -> trial, for trials not finished at the last step's end
        self._known: set[str] = set()  # every trial id the steps have read
        self._seen = 0  # the length of Tune's list of trials at the last step's end
        self.unfinished: set[str] = set()
        #: The unfinished trials' numbers (:func:`creation_number`), by id, once the experiment has ended.
        self.numbers: dict[str, int | None] = {}

    def on_step_end(self, iteration: int, trials: list, **info: Any) -> None:
        # Tune appends a new trial to its list and never removes one (the service's retiring removes
        # ended ones after this step, and says how many: left()), but a trial it requeues after a
        # failure moves to the end, behind any added before it: the new ones are the unknown ones among
        # the last, as many as the list grew by.
        added, index = len(trials) - self._seen, len(trials)
        while added > 0 and index > 0:
            index -= 1
            trial = trials[index]
            if trial.trial_id not in self._known:
                self._known.add(trial.trial_id)
                self._open[trial.trial_id] = trial
                added -= 1
        self._seen = len(trials)
        for trial_id, trial in list(self._open.items()):
            if trial.status in _FINISHED:
                del self._open[trial_id]

    def left(self, count: int) -> None:
        """``count`` ended trials, which the last step read, have left Tune's list
        (:mod:`~tune_service.execution.retiring`)."""
        self._seen -= count

    def on_experiment_end(self, trials: list, **info: Any) -> None:
        self.unfinished = set(self._open)
        self.numbers = {
            trial_id: creation_number(getattr(trial, "experiment_tag", None)) for trial_id, trial in self._open.items()
        }
