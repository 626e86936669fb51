"""The search of a sweep whose scheduler pauses trials and runs them again (PBT, PB2, a PBT replay):
:class:`PopulationSearch`, which Tune counts as finished only once every trial it made has ended.

Why: with ``reuse_actors``, Tune keeps a stopping trial's actor for the next trial to start, but ends it
instead once its search is finished and no trial is staged to start (Ray 2.60's ``TuneController``). A
paused trial, which will run again, does not count. A population is made whole at once, so its search is
finished before the first exploit, and each exploit (Tune pauses the trial, then starts it from the
donor's checkpoint) ended the trial's actor, and with it the warm gang, and started the trial on a new
actor and a cold gang: 3-11 s here where loading a checkpoint on the ranks already up takes a fraction of
one. While the search goes on, Tune keeps the actor of a paused trial in its cache (one at a time, its rule
when no trial waits to start), and the trial the scheduler runs next, usually that one, starts on it.
"""

from __future__ import annotations

from typing import Any

from ray.tune.search import Searcher

from tune_service.search.continued import ContinuedSearch


class PopulationSearch(ContinuedSearch):
    """``searcher`` as :class:`ContinuedSearch` runs it (``total`` trials, ``max_concurrent`` at once), and
    finished only once it has made its trials and each of them has ended (Tune tells a search of every trial
    that ends, completed, stopped or failed). The trials not yet ended are kept in its saved state, so a
    resumed sweep counts the trials it requeues."""

    def __init__(self, searcher: Searcher, total: int, max_concurrent: int | None):
        super().__init__(searcher, total, max_concurrent)
        #: The ids of the trials made and not yet ended.
        self.unended: set[str] = set()

    def made_all(self) -> bool:
        """Whether the search will make no more trials (Tune's own meaning of finished)."""
        return super().is_finished()

    def is_finished(self) -> bool:
        return self.made_all() and not self.unended

    def next_trial(self) -> Any:
        if self.made_all():
            return None
        trial = super().next_trial()
        if trial is not None:
            self.unended.add(trial.trial_id)
        return trial

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        self.unended.discard(trial_id)
        super().on_trial_complete(trial_id, result=result, error=error)

    def get_state(self) -> dict[str, Any]:
        return {**super().get_state(), "unended": sorted(self.unended)}

    def set_state(self, state: dict[str, Any]) -> None:
        self.unended = set(state.get("unended", ()))
        super().set_state(state)
