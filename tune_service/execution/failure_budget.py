"""``failure.max_failed_trials``: the sweep stops once that many trials have failed, instead of running
its whole budget into the same error. The trials still running when it stops are left ``interrupted``:
after fixing the cause, ``resume`` continues them, with the budget counted anew (the failures of the
driver's own run count).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from ray.tune import Stopper

from tune_service.experiment.callbacks import DriverCallback
from tune_service.results.progress import SweepProgress
from tune_service.results.sweep_result import TrialRecord


class FailureBudget(DriverCallback, Stopper):
    """A Tune stopper (``RunConfig.stop``) that ends the experiment once ``limit`` trials have failed,
    as ``progress`` records them (it must come before this one among the callbacks). Registered as a driver callback so that a resumed experiment, whose
    stopper Ray unpickles, gets this one."""

    def __init__(self, experiment: str, limit: int, progress: SweepProgress):
        super().__init__(f"{experiment}/failure_budget")
        self.limit, self.progress = limit, progress
        self.failed_ids: list[str] = []

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self.failed_ids.append(trial.trial_id)

    @property
    def failed(self) -> list[TrialRecord]:
        """The trials that failed in this run of the driver (their records, from ``progress``)."""
        return [self.progress.trials[i] for i in self.failed_ids if i in self.progress.trials]

    @property
    def exhausted(self) -> bool:
        return len(self.failed_ids) >= self.limit

    def __call__(self, trial_id: str, result: dict) -> bool:
        return False  # no single trial is stopped by it

    def stop_all(self) -> bool:
        return self.exhausted

    def reason(self) -> str:
        """Why the sweep stopped: the count and the errors, the most common first, each once."""
        errors = Counter(t.error or "the trial failed" for t in self.failed)
        common = "; ".join(f"{n} x {error}" if n > 1 else error for error, n in errors.most_common(3))
        return (f"{len(self.failed)} trials failed (failure.max_failed_trials allows {self.limit}): {common}")
