"""hpbandster's BOHB, through Ray Tune's ``TuneBOHB``, as ``method: bohb`` ran before the project built
BOHB's model itself (:mod:`tune_service.search.bohb`): the reference the new model is measured against
(:mod:`bench.search.bohb_reference`). It needs hpbandster and ConfigSpace (the ``peers`` extra).

Built as the service built it: a ConfigSpace of the spec's parameters (the benchmark's problems have
only uniform ranges), seeded by the spec's seed, on a numpy random state of its own (hpbandster draws
from numpy's global one), inside the same wrappers every sweep's searcher runs under.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

from ray.tune.search import Searcher

from tune_service.search.wrappers import SearcherWrapper


def installed() -> bool:
    try:
        import ConfigSpace  # noqa: F401
        import hpbandster  # noqa: F401
    except ImportError:
        return False
    return True


def hpbandster_bohb(spec) -> Searcher:
    """The searcher stack of ``spec`` (a bohb spec of uniform ranges) around hpbandster's BOHB."""
    import ConfigSpace as CS
    from ray.tune.search.bohb import TuneBOHB

    from tune_service.search import spaces
    from tune_service.search.wrappers import trial_configs

    space = CS.ConfigurationSpace(seed=spec.seed)
    for p in spec.parameters:
        if p.distribution != "uniform":
            raise ValueError(f"{p.name}: the reference BOHB takes uniform ranges only, got {p.distribution}")
        space.add(CS.UniformFloatHyperparameter(p.name, p.min, p.max))
    model = OwnNumpyRandom(TuneBOHB(space=space, metric=spec.metric.name, mode=spec.metric.mode, seed=spec.seed),
                           spec.seed)
    return trial_configs(model, spaces.Decoder(spec.parameters), spec.metric.name, spec.metric.mode,
                         spec.metric.target)


class OwnNumpyRandom(SearcherWrapper):
    """Every call into the wrapped searcher on a numpy random state of its own: for a searcher that draws
    from numpy's global random state, which no seed of Tune's reaches (hpbandster's BOHB samples from its
    model with ``np.random``). The state is seeded by the spec's ``seed`` and saved with the searcher, and
    the global state is put back after each call. A ``bohb`` sweep's suggestions then follow from its
    seed alone, whatever else in the driver drew from numpy, and a resumed sweep draws on where it stopped."""

    def __init__(self, inner: Searcher, seed: int | None):
        import numpy as np

        super().__init__(inner, inner.metric, inner.mode)
        self.numpy_state = np.random.RandomState(seed).get_state()

    @contextlib.contextmanager
    def _own_random_state(self) -> Iterator[None]:
        import numpy as np

        outside = np.random.get_state()
        np.random.set_state(self.numpy_state)
        try:
            yield
        finally:
            self.numpy_state = np.random.get_state()
            np.random.set_state(outside)

    def set_search_properties(self, metric, mode, config, **spec) -> bool:
        with self._own_random_state():
            return super().set_search_properties(metric, mode, config, **spec)

    def suggest(self, trial_id: str):
        with self._own_random_state():
            return super().suggest(trial_id)

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        with self._own_random_state():
            super().on_trial_result(trial_id, result)

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        with self._own_random_state():
            super().on_trial_complete(trial_id, result=result, error=error)

    def on_pause(self, trial_id: str) -> None:
        with self._own_random_state():
            super().on_pause(trial_id)

    def on_unpause(self, trial_id: str) -> None:
        with self._own_random_state():
            super().on_unpause(trial_id)

    def own_state(self) -> Any:
        return self.numpy_state

    def restore_own_state(self, state: Any) -> None:
        self.numpy_state = state

