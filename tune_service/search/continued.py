"""A resumed sweep's search, which may go on past the run_cap it was started with.

Tune keeps how many trials a sweep creates in the state of its ``SearchGenerator`` (``total_samples``,
saved with the experiment), and a restored Tuner takes that number back: ``Tuner.restore`` has no
``num_samples``. :class:`ContinuedSearch` is the ``SearchGenerator`` a resumed sweep runs with. Its restored
state takes the sweep's ``run_cap`` now, so ``tune-run resume DIR --set run_cap=N`` goes on from where the
sweep stopped: its searcher's own state is restored as on any resume, and it suggests the trials still to
come.
"""

from __future__ import annotations

from typing import Any

from ray.tune.search import ConcurrencyLimiter, SearchGenerator, Searcher


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
