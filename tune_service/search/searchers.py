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

from tune_service.search.priors import DEFAULT_BETA, PriorGuide, PriorLaw, loss_of
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
    from a generator seeded by the spec's ``seed``. With ``prior`` (the spec's priors), its draws follow a
    :class:`~tune_service.search.priors.PriorGuide`, which hears every report (``metric`` and ``mode``:
    the value and its direction; ``time_attr``: the report's clock) to test the beliefs against them."""

    def __init__(
        self,
        params: Sequence[ParameterSpec],
        seed: int,
        points: Sequence[dict[str, Any]] = (),
        prior: PriorLaw | None = None,
        beta: float = DEFAULT_BETA,
        metric: str | None = None,
        mode: str | None = None,
        time_attr: str = "training_iteration",
    ):
        import numpy as np

        super().__init__(points)
        self.params = tuple(params)
        self.rng = np.random.default_rng(seed)
        self.guide = PriorGuide(prior, beta) if prior is not None else None
        self.prior_metric, self.prior_mode, self.time_attr = metric, mode, time_attr
        self.live: dict[str, dict[str, Any]] = {}  # with a prior: each running trial's config

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:  # type: ignore[override]
        config = super().suggest(trial_id)
        if self.guide is not None and isinstance(config, dict):
            self.live[trial_id] = dict(config)
        return config

    def own_suggestion(self) -> dict[str, Any]:
        if self.guide is None:
            return sample_flat(self.params, self.rng)
        return self.guide.sample(self.rng, self.guide.next_weight())

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        if self.guide is None or trial_id not in self.live:
            return
        loss = loss_of(result, self.prior_metric, self.prior_mode)
        if loss is not None:
            time = result.get(self.time_attr, result.get("training_iteration", 0))
            self.guide.record(trial_id, self.live[trial_id], time, loss)

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        if result and not error:
            self.on_trial_result(trial_id, result)
        self.live.pop(trial_id, None)

    def own_state(self) -> Any:
        state = {"rng": self.rng.bit_generator.state}
        if self.guide is not None:
            state.update(guide=self.guide.state, live=self.live)
        return state

    def restore_own_state(self, state: Any) -> None:
        if "rng" not in state:  # saved before priors: the generator's state alone
            state = {"rng": state}
        self.rng.bit_generator.state = state["rng"]
        if self.guide is not None and "guide" in state:
            self.guide.restore(state["guide"])
            self.live = state["live"]


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
