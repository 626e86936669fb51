"""Ray Tune ``Searcher`` s of our own: random and grid search over our spaces (the wrappers every
searcher runs under are :mod:`tune_service.search.wrappers`).

Random and grid are Searchers rather than Ray's BasicVariantGenerator because a conditional parameter
must be *absent* from a trial's config, which Tune's variant generator cannot express, and because a
Searcher's state is saved with the experiment, so a resumed sweep continues the same sequence.
"""

from __future__ import annotations

import itertools
import pickle
from typing import Any, Sequence

from ray.tune.search import Searcher

from tune_service.search.priors import DEFAULT_BETA, PriorLaw, prior_weight
from tune_service.search.spaces import grid_points, grid_size, sample_flat
from tune_service.spec.parameters import ParameterSpec


class _Unguided(Searcher):
    """A searcher whose suggestions do not depend on results: the known ``points`` first (the spec's
    ``points_to_evaluate``), then its own. Its state is how many points it has handed out, and its own."""

    def __init__(self, points: Sequence[dict[str, Any]] = ()):
        super().__init__()
        self.points = [dict(point) for point in points]
        self.points_given = 0

    # Ray annotates suggest as dict | None, though its docstring and Tune take Searcher.FINISHED (a str) too
    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:  # type: ignore[override]
        if self.points_given < len(self.points):
            self.points_given += 1
            return dict(self.points[self.points_given - 1])
        return self.own_suggestion()

    def own_suggestion(self) -> dict[str, Any] | str | None:
        raise NotImplementedError

    def save(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "wb") as f:
            pickle.dump({"points_given": self.points_given, "own": self.own_state()}, f)

    def restore(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "rb") as f:
            state = pickle.load(f)
        if not (isinstance(state, dict) and state.keys() == {"points_given", "own"}):
            state = {"points_given": 0, "own": state}  # saved before known points: the searcher's own state
        self.points_given = state["points_given"]
        self.restore_own_state(state["own"])

    def own_state(self) -> Any:
        raise NotImplementedError

    def restore_own_state(self, state: Any) -> None:
        raise NotImplementedError

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        pass


class RandomSearch(_Unguided):
    """Independent draws from the declared distributions (:func:`tune_service.search.spaces.sample_flat`),
    from a generator seeded by the spec's ``seed``. With ``prior`` (the spec's priors), the n-th draw is
    from the declared laws times the beliefs to the power ``min(1, beta / n)``
    (:mod:`tune_service.search.priors`)."""

    def __init__(
        self,
        params: Sequence[ParameterSpec],
        seed: int,
        points: Sequence[dict[str, Any]] = (),
        prior: PriorLaw | None = None,
        beta: float = DEFAULT_BETA,
    ):
        import numpy as np

        super().__init__(points)
        self.params = tuple(params)
        self.rng = np.random.default_rng(seed)
        self.prior, self.beta = prior, beta
        self.drawn = 0

    def own_suggestion(self) -> dict[str, Any]:
        self.drawn += 1
        if self.prior is None:
            return sample_flat(self.params, self.rng)
        return self.prior.sample(self.rng, prior_weight(self.drawn, self.beta))

    def own_state(self) -> Any:
        return {"rng": self.rng.bit_generator.state, "drawn": self.drawn}

    def restore_own_state(self, state: Any) -> None:
        if "drawn" not in state:  # saved before priors: the generator's state alone
            state = {"rng": state, "drawn": 0}
        self.rng.bit_generator.state = state["rng"]
        self.drawn = state["drawn"]


class GridSearch(_Unguided):
    """The known points, then the grid's points in order, drawn one at a time (``size`` in all: every
    one, or ``run_cap``), then ``FINISHED``. Its own state is how many grid points it has handed out; a
    restored one draws on from there."""

    def __init__(self, params: Sequence[ParameterSpec], limit: int | None = None, points: Sequence[dict] = ()):
        super().__init__(points)
        self.params = tuple(params)
        grid_cap = None if limit is None else limit - len(self.points)
        if grid_cap == 0:  # the known points fill run_cap; a grid it cannot enumerate is still refused
            grid_size(self.params, 1)
        self.size = len(self.points) + (grid_size(self.params, grid_cap) if grid_cap != 0 else 0)
        self.next_index = 0
        self._points = grid_points(self.params)

    def own_suggestion(self) -> dict[str, Any] | str:
        if self.points_given + self.next_index >= self.size:
            return Searcher.FINISHED
        self.next_index += 1
        return dict(next(self._points))

    def own_state(self) -> Any:
        return self.next_index

    def restore_own_state(self, state: Any) -> None:
        self.next_index = state
        self._points = itertools.islice(grid_points(self.params), self.next_index, None)

    def __getstate__(self) -> dict[str, Any]:
        # Tune pickles its searcher with the experiment: the generator is not picklable, and is redrawn.
        state = dict(self.__dict__)
        del state["_points"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._points = itertools.islice(grid_points(self.params), self.next_index, None)
