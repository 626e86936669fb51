"""Asynchronous successive halving (ASHA), promoting as its paper does, as a Tune trial scheduler.

Li et al., "A System for Massively Parallel Hyperparameter Tuning" (MLSys 2020): a configuration at a
rung goes on to the next when it is among the top 1/eta of the configurations that reached that rung.
Run as a stopping rule (a trial is never paused to be promoted later): a trial reaching a rung goes on
only if it is among the ``floor(n / eta)`` best of the ``n`` trials recorded at that rung, itself
included, and at least the best of them; else it stops. Optuna's successive-halving pruner decides the
same way.

Ray's ``ASHAScheduler`` takes the cut-off as the ``1 - 1/eta`` quantile of the trials recorded *before*
this one, linearly interpolated: where a rung holds few trials it lets more go on (the second trial
whenever it beats the first, the third whenever it is two thirds of the way from the worse of the first
two to the better, ...), so a sweep spends its budget on fewer configurations. With this rule instead,
TPE + ASHA's median regret area over 20 seeds (``bench/search/search_quality.py``) improved on six of the eight
problem and concurrency pairs, and Optuna's TPE under it matches Optuna's own TPE + successive halving to
the digit.

Everything else is Ray's ASHA with one bracket: rungs at ``grace_period * eta**k`` (the times of the
``time_attr`` clock, epochs or optimizer steps), a trial stopped when it reaches ``max_t``, its final
result recorded in its rung. ``recorded``: for a sweep resumed after its driver died, what the trials
reported (:func:`tune_service.search.replay.read_recorded`), replayed into the rungs as Tune adds each
trial back (a trial that had ended and left Tune's controller, before the first decision), so the
decisions after the resume are those the sweep would have made without the crash.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from ray.tune.experiment import Trial
from ray.tune.schedulers import FIFOScheduler, TrialScheduler

from tune_service.search.replay import RecordedTrial
from tune_service.search.schedule import asha_milestones


def non_finite(value: Any) -> bool:
    """Whether a reported value of the metric is a number that is NaN or infinite. Such a value stops its
    trial and never enters a rung: sorted among others a NaN falls by its order of arrival, and every
    later cut at its rung would depend on it (Optuna's pruners prune NaN; Ray's ASHA skips it with
    ``nanpercentile``)."""
    return isinstance(value, (int, float)) and not math.isfinite(value)


class PromotingASHA(FIFOScheduler):
    """ASHA with the paper's promotion rule (see the module's docstring)."""

    _mode: str | None = None

    def __init__(
        self,
        time_attr: str,
        max_t: float,
        grace_period: float,
        reduction_factor: float,
        recorded: Mapping[str, RecordedTrial] | None = None,
    ):
        super().__init__()
        if not (0 < grace_period <= max_t) or reduction_factor <= 1:
            raise ValueError(
                f"ASHA needs 0 < grace_period <= max_t and reduction_factor > 1, got "
                f"{grace_period}, {max_t}, {reduction_factor}"
            )
        self.time_attr, self.max_t, self.eta = time_attr, max_t, reduction_factor
        self.milestones = asha_milestones(grace_period, max_t, reduction_factor)[::-1]  # highest first
        #: Per milestone, each trial's entry there (:meth:`_entry`).
        self.rungs: dict[float, dict[str, Any]] = {m: {} for m in self.milestones}
        self.stopped = 0
        self._recorded = dict(recorded or {})
        self._ended_replayed = False

    def set_search_properties(self, metric: str | None, mode: str | None, **spec) -> bool:
        """Tune's metric and mode, as a scheduler built without them is given them (once)."""
        if (self._metric and metric) or (self._mode and mode):
            return False
        self._metric = metric or self._metric
        self._mode = mode or self._mode
        return True

    @property
    def _sign(self) -> float:
        if self._mode not in ("min", "max"):
            raise ValueError("ASHA needs the sweep's metric and mode before its first trial")
        return 1.0 if self._mode == "max" else -1.0

    def _entry(self, result: dict[str, Any]) -> Any:
        """What ``result`` records at a rung, higher better: the metric's value, negated when minimised
        (NaN when it is not finite); None where the result lacks it, or before the metric is set."""
        value = result.get(self._metric) if self._metric is not None else None
        if value is None:
            return None
        return math.nan if non_finite(value) else self._sign * value

    def _finite(self, entry: Any) -> bool:
        return not non_finite(entry)

    def _promotes(self, rung: dict[str, Any], trial_id: str) -> bool:
        """Whether ``trial_id`` is among the ``floor(n / eta)`` best of the ``n`` trials at ``rung`` (at
        least the best); an equal value goes on with the one it equals."""
        ranked = sorted(rung.values(), reverse=True)
        return rung[trial_id] >= ranked[max(int(len(ranked) // self.eta), 1) - 1]

    def on_trial_add(self, tune_controller, trial: Trial) -> None:
        recorded = self._recorded.pop(trial.trial_id, None)
        if recorded is not None:
            # a trial the service's records have ended is stopped before it starts again (retiring)
            resumes = trial.status not in (Trial.TERMINATED, Trial.ERROR) and not recorded.ended
            self._replay(trial.trial_id, recorded, resumes=resumes)

    def _replay(self, trial_id: str, recorded: RecordedTrial, resumes: bool) -> None:
        for result in recorded.reported_once(resumes):
            time, entry = result.get(self.time_attr), self._entry(result)
            # As on_trial_result: a result at max_t ends the trial without a decision, a non-finite one unrecorded.
            if entry is not None and not self._finite(entry):
                break
            if isinstance(time, (int, float)) and entry is not None and time < self.max_t:
                self._judge(trial_id, time, entry)

    def _replay_ended(self) -> None:
        """The recorded trials that had ended and that Tune did not add back (they left its controller as
        they ended: :mod:`~tune_service.execution.retiring`), replayed whole before the first decision:
        by then Tune has added back every trial it restored."""
        if self._ended_replayed:
            return
        self._ended_replayed = True
        for trial_id in [i for i, recorded in self._recorded.items() if recorded.ended]:
            self._replay(trial_id, self._recorded.pop(trial_id), resumes=False)

    def on_trial_result(self, tune_controller, trial: Trial, result: dict[str, Any]) -> str:
        self._replay_ended()
        time, entry = result.get(self.time_attr), self._entry(result)
        if time is None or entry is None:
            return TrialScheduler.CONTINUE
        if not self._finite(entry):
            decision = TrialScheduler.STOP
        elif time >= self.max_t:
            decision = TrialScheduler.STOP
        else:
            decision = self._judge(trial.trial_id, time, entry)
        self.stopped += decision == TrialScheduler.STOP
        return decision

    def on_trial_complete(self, tune_controller, trial: Trial, result: dict[str, Any]) -> None:
        self._replay_ended()
        time, entry = result.get(self.time_attr), self._entry(result)
        if time is not None and entry is not None and self._finite(entry):
            self._judge(trial.trial_id, time, entry)  # recorded where it ended

    def _judge(self, trial_id: str, time: float, entry: Any) -> str:
        """Record ``entry`` at the highest milestone ``time`` reached where ``trial_id`` has none yet,
        and decide there; CONTINUE if there is none."""
        for milestone in self.milestones:
            recorded = self.rungs[milestone]
            if time < milestone or trial_id in recorded:
                continue
            recorded[trial_id] = entry
            return TrialScheduler.CONTINUE if self._promotes(recorded, trial_id) else TrialScheduler.STOP
        return TrialScheduler.CONTINUE

    def debug_string(self) -> str:
        return f"ASHA (promoting the top 1/{self.eta:g} of each rung): {self.stopped} trials stopped"
