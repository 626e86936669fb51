"""What ends trials, or the sweep, before their budget: the spec's limits, in Tune's loop.

- ``failure.max_failed_trials`` (:class:`FailureBudget`): the sweep ends once that many trials have
  failed in this run of its driver, instead of running its whole budget into the same error.
- ``limits.sweep_s`` (:class:`SweepTimeLimit`): the sweep ends once its driver has run that long.
- ``limits.trial_s`` (:class:`TrialTimeLimit`): a trial is stopped at its first report after that many
  seconds of training, keeping what it reported.

A sweep is ended as Ctrl+C ends it (:func:`end_sweep`): Tune finishes its step, saves the experiment,
and leaves the running trials ``interrupted``, and ``resume`` continues the sweep, new trials included.
(Tune's own ``stop_all`` and ``time_budget_s`` would mark its searcher finished in the saved state, so a
resumed sweep could start no new trial.) Tune handles SIGINT in the main thread only, so a sweep with
these limits must be driven from the main thread (:func:`check_main_thread`).
"""

from __future__ import annotations

import signal
import threading
import time
from collections import Counter
from typing import Any

from ray.tune import Stopper

from tune_service.errors import TuneServiceError
from tune_service.experiment.callbacks import DriverCallback
from tune_service.results.progress import SweepProgress
from tune_service.results.sweep_result import TrialRecord


def end_sweep() -> None:
    """End the running sweep as Ctrl+C would (Tune's handler of SIGINT, in the driver's main thread)."""
    signal.raise_signal(signal.SIGINT)


def check_main_thread(what: str) -> None:
    """Refuse ``what`` (a limit of the spec) when the sweep is not driven from the main thread."""
    if threading.current_thread() is not threading.main_thread():
        raise TuneServiceError(
            f"{what}: ends the sweep as Ctrl+C does, which needs the sweep run from the "
            f"main thread; run it there, or leave {what} out"
        )


class FailureBudget(DriverCallback):
    """Ends the sweep once ``limit`` trials have failed (as ``progress`` records them: it must come before
    this one among the callbacks)."""

    def __init__(self, experiment: str, limit: int, progress: SweepProgress):
        super().__init__(f"{experiment}/failure_budget")
        self.limit, self.progress = limit, progress
        self.failed_ids: list[str] = []
        #: The trials that failed in this run of the driver (their records, from ``progress``).
        self.failed: list[TrialRecord] = []

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self.failed_ids.append(trial.trial_id)
        ended = self.progress.last_ended
        if ended is not None and ended.trial_id == trial.trial_id:
            self.failed.append(ended)
        if len(self.failed_ids) == self.limit:
            end_sweep()

    @property
    def exhausted(self) -> bool:
        return len(self.failed_ids) >= self.limit

    def reason(self) -> str:
        """Why the sweep ended: the count and the errors, the most common first, each once."""
        errors = Counter(t.error or "the trial failed" for t in self.failed)
        common = "; ".join(f"{n} x {error}" if n > 1 else error for error, n in errors.most_common(3))
        return f"{len(self.failed_ids)} trials failed (failure.max_failed_trials allows {self.limit}): {common}"


class SweepTimeLimit(DriverCallback):
    """Ends the sweep once ``seconds`` have passed since it began (checked at each step of Tune's loop)."""

    def __init__(self, experiment: str, seconds: float):
        super().__init__(f"{experiment}/sweep_time_limit")
        self.seconds, self.started, self.reached = seconds, time.monotonic(), False

    def on_step_end(self, iteration: int, trials: list, **info: Any) -> None:
        if not self.reached and time.monotonic() - self.started >= self.seconds:
            self.reached = True
            end_sweep()


class TrialTimeLimit(Stopper):
    """Stops a trial whose report says it has trained ``seconds`` or more (Tune's ``time_total_s``)."""

    def __init__(self, seconds: float):
        self.seconds = seconds

    def __call__(self, trial_id: str, result: dict) -> bool:
        return float(result.get("time_total_s") or 0.0) >= self.seconds

    def stop_all(self) -> bool:
        return False
