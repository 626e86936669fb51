"""A resumed sweep's search, which may go on past the run_cap it was started with, and whose running
trials are the ones Tune restored unfinished.

Tune keeps how many trials a sweep creates in the state of its ``SearchGenerator`` (``total_samples``,
saved with the experiment), and a restored Tuner takes that number back: ``Tuner.restore`` has no
``num_samples``. :class:`ContinuedSearch` is the ``SearchGenerator`` a resumed sweep runs with. Its restored
state takes the sweep's ``run_cap`` now, so ``tune-run resume DIR --set run_cap=N`` goes on from where the
sweep stopped: its searcher's own state is restored as on any resume, and it suggests the trials still to
come.

A driver killed outright loses what happened since Tune's last save of its state (every 2 s or more):
the trials created since are not in it, and the restored searcher would suggest them again. Trials that
ended in that time are in the service's own log (``ended_trials.jsonl``); under FIFO and ASHA, where an
ended trial needs nothing in Tune, ``ContinuedSearch`` rolls the restored search forward over them
(:meth:`ContinuedSearch.create_trial_if_possible`): they are not run again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Mapping

from ray.tune.experiment import Trial
from ray.tune.search import ConcurrencyLimiter, SearchGenerator, Searcher

from tune_service.experiment.callbacks import DriverCallback
from tune_service.search.wrappers import RunningCap, layer_of

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class EndedTrial:
    """A trial of the sweep that ended, by the service's records: its config, what it reported (in
    order), and whether it failed."""

    trial_id: str
    config: Mapping[str, Any]
    results: tuple[dict[str, Any], ...]
    failed: bool = False


class ContinuedSearch(SearchGenerator):
    """``searcher`` as Tune runs it (in a ``ConcurrencyLimiter`` of ``max_concurrent``, as
    ``tune.run`` wraps a searcher given ``max_concurrent_trials``), creating ``total`` trials in all:
    the ones a restored state counts, and then new ones up to ``total``.

    A total above the saved one also clears the state's ``finished`` (the searcher had said it was done):
    the searcher is asked again, and one that is done (a grid walked whole, a target reached) says so again.
    A total below the trials already created creates none (Tune's counter is never wound back).

    ``ended``: the sweep's ended trials by number (Tune's count of the trials it created, from 1). Those
    created after the restored state was saved are rolled forward instead of created again.
    """

    #: The keys of ``SearchGenerator.get_state()`` that this class reads and sets.
    STATE_KEYS = ("counter", "total_samples", "finished")

    def __init__(
        self,
        searcher: Searcher,
        total: int,
        max_concurrent: int | None,
        ended: Mapping[int, EndedTrial] | None = None,
    ):
        super().__init__(ConcurrencyLimiter(searcher, max_concurrent=max_concurrent) if max_concurrent else searcher)
        self.total = total
        self.ended = dict(ended or {})
        self._ended_by_id = {trial.trial_id: trial for trial in self.ended.values()}
        #: The numbers of the trials rolled forward, in order.
        self.rolled_forward: list[int] = []

    def set_state(self, state: dict[str, Any]) -> None:
        continued = {**state, "total_samples": max(self.total, state["counter"])}
        if self.total > state["total_samples"]:
            continued["finished"] = False
        super().set_state(continued)

    def create_trial_if_possible(self, experiment_spec: dict) -> Trial | None:
        """Tune's next trial; first, the trials that ended after the restored state was saved are rolled
        forward in the order they were created: the searcher suggests each again (its restored state
        suggests what it suggested before) and hears what it reported, as it did then, and Tune's count of
        trials counts it. None is created again. A suggestion that differs from the trial's config (a
        searcher that does not suggest the same twice) is told as failed: the trial keeps its results and
        the searcher goes on without them. The searcher hears them in the order they were created; with
        trials running side by side that was not the order it heard them end in."""
        while not self.is_finished() and (trial := self.ended.get(self._created() + 1)) is not None:
            if not self._roll_forward(trial):
                return None  # the searcher suggests nothing now (its cap is full): asked again next step
        return None if self.is_finished() else super().create_trial_if_possible(experiment_spec)

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        """As Tune's; a trial that Tune restored unfinished but that had ended (stopped before it starts
        again, :mod:`~tune_service.execution.retiring`, with no result) is told with what it reported."""
        ended = self._ended_by_id.get(trial_id)
        if result is None and not error and ended is not None:
            result, error = (ended.results[-1] if ended.results else None), ended.failed or not ended.results
        super().on_trial_complete(trial_id, result=result, error=error)

    def _created(self) -> int:
        return int(self.get_state()["counter"])

    def _roll_forward(self, trial: EndedTrial) -> bool:
        trial_id = Trial.generate_id()
        suggested = self.searcher.suggest(trial_id)
        if suggested == Searcher.FINISHED:
            super().set_state({**self.get_state(), "finished": True})
            return False
        if suggested is None:
            return False
        number = self._created() + 1
        same = all(trial.config.get(name) == value for name, value in suggested.items())
        if same:
            for result in trial.results:
                self.searcher.on_trial_result(trial_id, result)
        else:
            logger.warning(
                "resume: trial %d ended before the driver stopped, but the searcher now suggests %s for "
                "it; it keeps its results, and the searcher goes on without them",
                number,
                suggested,
            )
        last = trial.results[-1] if trial.results and same else None
        self.searcher.on_trial_complete(trial_id, result=last, error=trial.failed or not same or last is None)
        super().set_state({**self.get_state(), "counter": number})
        self.rolled_forward.append(number)
        return True


class RunningTrialsReconciled(DriverCallback):
    """At a resumed sweep's first step, the searcher's running trials (:class:`RunningCap`) become the
    ones Tune restored unfinished.

    Tune saves its trials and the searcher's state at the same moment, but on remote storage they are two
    uploads, and a driver killed between them leaves the two apart: the searcher may count as running a
    trial that Tune has as ended (or never had). It would never hear that trial end, and once the cap is
    full it would suggest nothing again while Tune waited on it: a resumed sweep that hangs with nothing
    running. A trial Tune restored unfinished goes on counting, as it resumes.
    """

    def __init__(self, key: str, searcher: Searcher):
        super().__init__(key)
        self.cap = layer_of(searcher, RunningCap)

    def on_step_begin(self, iteration: int, trials: list, **info: Any) -> None:
        if self.cap is None:
            return
        unfinished = {t.trial_id for t in trials if t.status not in (Trial.TERMINATED, Trial.ERROR)}
        gone = self.cap.running - unfinished
        if gone:
            logger.info("resume: the searcher counted %d ended trial(s) as running: %s", len(gone), sorted(gone))
            self.cap.running -= gone
        self.cap = None  # once: from here on the searcher hears every trial end
