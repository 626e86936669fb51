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

from tune_service.search.spaces import grid_points, grid_size, sample_flat
from tune_service.spec.parameters import ParameterSpec


class _Unguided(Searcher):
    """A searcher whose suggestions do not depend on results."""

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        pass


class RandomSearch(_Unguided):
    """Independent draws from the declared distributions (:func:`tune_service.search.spaces.sample_flat`),
    from a generator seeded by the spec's ``seed``."""

    def __init__(self, params: Sequence[ParameterSpec], seed: int):
        import numpy as np

        super().__init__()
        self.params = tuple(params)
        self.rng = np.random.default_rng(seed)

    def suggest(self, trial_id: str) -> dict[str, Any]:
        return sample_flat(self.params, self.rng)

    def save(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "wb") as f:
            pickle.dump(self.rng.bit_generator.state, f)

    def restore(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "rb") as f:
            self.rng.bit_generator.state = pickle.load(f)


class GridSearch(_Unguided):
    """The grid's points in order, drawn one at a time (``size`` of them: all, or ``run_cap``), then
    ``FINISHED``. Its state is how many it has handed out; a restored one draws on from there."""

    def __init__(self, params: Sequence[ParameterSpec], limit: int | None = None):
        super().__init__()
        self.params = tuple(params)
        self.size = grid_size(self.params, limit)
        self.next_index = 0
        self._points = grid_points(self.params)

    # Ray annotates suggest as dict | None, though its docstring and Tune take Searcher.FINISHED (a str) too
    def suggest(self, trial_id: str) -> dict[str, Any] | str:  # type: ignore[override]
        if self.next_index >= self.size:
            return Searcher.FINISHED
        self.next_index += 1
        return dict(next(self._points))

    def save(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "wb") as f:
            pickle.dump(self.next_index, f)

    def restore(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "rb") as f:
            self.next_index = pickle.load(f)
        self._points = itertools.islice(grid_points(self.params), self.next_index, None)

    def __getstate__(self) -> dict[str, Any]:
        # Tune pickles its searcher with the experiment: the generator is not picklable, and is redrawn.
        state = dict(self.__dict__)
        del state["_points"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._points = itertools.islice(grid_points(self.params), self.next_index, None)
