"""A resumed sweep's search, which may go on past the run_cap it was started with, and whose running
trials are the ones Tune restored unfinished.

Tune keeps how many trials a sweep creates in the state of its ``SearchGenerator`` (``total_samples``,
saved with the experiment), and a restored Tuner takes that number back: ``Tuner.restore`` has no
``num_samples``. :class:`ContinuedSearch` is the ``SearchGenerator`` a resumed sweep runs with. Its restored
state takes the sweep's ``run_cap`` now, so ``tune-run resume DIR --set run_cap=N`` goes on from where the
sweep stopped: its searcher's own state is restored as on any resume, and it suggests the trials still to
come.
"""

from __future__ import annotations

import logging
from typing import Any

from ray.tune.experiment import Trial
from ray.tune.search import ConcurrencyLimiter, SearchGenerator, Searcher

from tune_service.experiment.callbacks import DriverCallback
from tune_service.search.wrappers import RunningCap, layer_of

logger = logging.getLogger(__name__)


class ContinuedSearch(SearchGenerator):
    """``searcher`` as Tune runs it (in a ``ConcurrencyLimiter`` of ``max_concurrent``, as
    ``tune.run`` wraps a searcher given ``max_concurrent_trials``), creating ``total`` trials in all:
    the ones a restored state counts, and then new ones up to ``total``.

    A total above the saved one also clears the state's ``finished`` (the searcher had said it was done):
    the searcher is asked again, and one that is done (a grid walked whole, a target reached) says so again.
    A total below the trials already created creates none (Tune's counter is never wound back).
    """

    #: The keys of ``SearchGenerator.get_state()`` that this class reads and sets.
    STATE_KEYS = ("counter", "total_samples", "finished")

    def __init__(self, searcher: Searcher, total: int, max_concurrent: int | None):
        super().__init__(ConcurrencyLimiter(searcher, max_concurrent=max_concurrent) if max_concurrent else searcher)
        self.total = total

    def set_state(self, state: dict[str, Any]) -> None:
        continued = {**state, "total_samples": max(self.total, state["counter"])}
        if self.total > state["total_samples"]:
            continued["finished"] = False
        super().set_state(continued)


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
