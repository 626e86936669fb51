"""Ray Tune ``Searcher`` s of our own: random and grid search over our spaces, and the wrapper every
searcher's suggestions pass through before a trial sees them.

Random and grid are Searchers rather than Ray's BasicVariantGenerator because a conditional parameter
must be *absent* from a trial's config, which Tune's variant generator cannot express, and because a
Searcher's state is saved with the experiment, so a resumed sweep continues the same sequence.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import pickle
import tempfile
from typing import Any, Iterator, Sequence

from ray.tune.search import Searcher

from tune_service.search.asha import non_finite
from tune_service.search.spaces import Decoder, grid_points, grid_size, sample_flat
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

    def suggest(self, trial_id: str) -> dict[str, Any] | str:
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


class TrialConfigs(Searcher):
    """Wraps any Searcher: each suggestion is decoded (:class:`tune_service.search.spaces.Decoder`) into the
    config a trial receives, and once a result reaches ``metric.target`` no new trial is suggested
    (running trials finish, as in W&B). Everything else is the inner searcher's business.

    With ``budget`` (the schedulers' clock and every trial's ``max_t``), a trial that a scheduler stopped
    short of the budget is not heard as if it had run it: its last value is measured at a lower
    fidelity, where every trial looks worse than it ends (or better), and a model searcher (a TPE) that
    took it as final would fit its good and bad groups to fidelities rather than to configurations.
    ``stopped`` says what the inner searcher hears instead:

    - ``as_worst_completed`` (hyperopt's TPE): the trial's value no better than the worst trial that ran
      its whole budget (its own value when that is worse);
    - ``as_pruned`` (Ray's ``OptunaSearch``): the last result as an intermediate value, then the trial
      told as pruned, as Optuna's own pruners end a trial: Optuna's TPE ranks pruned trials after every
      completed one, by how far they got and then by their last value.

    A searcher that models fidelities itself (BOHB) gets no budget here.

    It also caps the trials that run at once (``max_concurrent_trials`` reaches it through
    :meth:`set_max_concurrency`) counting *running* trials only. Ray's ``ConcurrencyLimiter`` counts a
    trial that HyperBand paused at a rung as live, so with a cap below a bracket's size the bracket
    never fills: HyperBand then judges each trial alone and stops none of them early.
    """

    def __init__(self, inner: Searcher, decoder: Decoder, metric: str, mode: str, target: float | None = None,
                 budget: tuple[str, float] | None = None, stopped: str = "as_worst_completed"):
        super().__init__(metric=metric, mode=mode)
        self.inner = inner
        self.decoder = decoder
        self.target = target
        self.target_reached_by: str | None = None
        self.max_concurrent = 0  # 0: no cap
        self.running: set[str] = set()
        self.budget = budget
        if stopped not in ("as_worst_completed", "as_pruned"):
            raise ValueError(f"stopped: {stopped!r}")
        self.stopped = stopped
        #: The worst value of the trials that ran their whole budget (None until one has).
        self.worst_completed: float | None = None

    def set_search_properties(self, metric, mode, config, **spec) -> bool:
        self.inner.set_search_properties(metric, mode, config, **spec)
        return super().set_search_properties(metric, mode, config, **spec)

    def set_max_concurrency(self, max_concurrent: int) -> bool:
        self.max_concurrent = max_concurrent
        return True  # ours to enforce: Ray's ConcurrencyLimiter then passes everything through

    def suggest(self, trial_id: str):
        if self.target_reached_by is not None:
            return Searcher.FINISHED
        if self.max_concurrent and len(self.running) >= self.max_concurrent:
            return None
        suggested = self.inner.suggest(trial_id)
        if suggested is None or suggested == Searcher.FINISHED:
            return suggested
        self.running.add(trial_id)
        return self.decoder(suggested)

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        self._check_target(trial_id, result)
        self.inner.on_trial_result(trial_id, result)

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        if result and non_finite(result.get(self.metric)):
            result, error = None, True  # a diverged trial: a failed point to the model, never a value
        if result and not error:
            self._check_target(trial_id, result)
        self.running.discard(trial_id)
        whole = self._ran_whole_budget(result) if result and not error else None
        if whole is False and self.stopped == "as_pruned":
            self.inner.on_trial_result(trial_id, result)  # Tune gave the stopping result to the scheduler only
            self.inner.on_trial_complete(trial_id, result=None)  # OptunaSearch: no value, no error: pruned
            return
        if whole is False:
            result = self._as_worst_completed(result)
        elif whole:
            value = result[self.metric]
            self.worst_completed = value if self.worst_completed is None else self._worse(self.worst_completed, value)
        # A failed trial's last result is not its outcome (Ray's OptunaSearch would tell it as complete).
        self.inner.on_trial_complete(trial_id, result=None if error else result, error=error)

    def _ran_whole_budget(self, result: dict) -> bool | None:
        """Whether a finished trial ran its whole budget (False: a scheduler stopped it short); None
        without a budget or without a value of the metric."""
        if self.budget is None or not isinstance(result.get(self.metric), (int, float)):
            return None
        time_attr, max_t = self.budget
        return result.get(time_attr, max_t) >= max_t

    def _as_worst_completed(self, result: dict) -> dict:
        """A stopped trial's result, its value no better than the worst trial that ran its whole budget."""
        if self.worst_completed is None:
            return result
        return {**result, self.metric: self._worse(result[self.metric], self.worst_completed)}

    def _worse(self, a: float, b: float) -> float:
        """The worse of two values of the metric, by the sweep's mode."""
        return max(a, b) if self.mode == "min" else min(a, b)

    # Our HyperBand schedulers (tune_service.search.hyperband) report pauses and resumptions here;
    # TuneBOHB keeps paused trials apart too.
    def on_pause(self, trial_id: str) -> None:
        self.running.discard(trial_id)
        if hasattr(self.inner, "on_pause"):
            self.inner.on_pause(trial_id)

    def on_unpause(self, trial_id: str) -> None:
        self.running.add(trial_id)
        if hasattr(self.inner, "on_unpause"):
            self.inner.on_unpause(trial_id)

    def _check_target(self, trial_id: str, result: dict) -> None:
        value = result.get(self.metric) if self.target is not None else None
        if not isinstance(value, (int, float)) or self.target_reached_by is not None:
            return
        if (value >= self.target) if self.mode == "max" else (value <= self.target):
            self.target_reached_by = trial_id

    def save(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "wb") as f:
            pickle.dump({"inner": saved_state(self.inner), "target_reached_by": self.target_reached_by,
                         "running": self.running, "worst_completed": self.worst_completed}, f)

    def restore(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "rb") as f:
            state = pickle.load(f)
        restore_state(self.inner, state["inner"])
        self.target_reached_by = state["target_reached_by"]
        self.running = set(state.get("running", ()))  # resumed with the sweep, they count against the cap
        self.worst_completed = state.get("worst_completed")


class OwnNumpyRandom(Searcher):
    """Wraps a searcher that draws from numpy's global random state, which no seed of Tune's reaches
    (hpbandster's BOHB samples from its model with ``np.random``): every call into it runs on a random
    state of its own, seeded by the spec's ``seed`` and saved with the searcher, and the global state is
    put back afterwards. A ``bohb`` sweep's suggestions then follow from its seed alone, whatever else in
    the driver drew from numpy, and a resumed sweep draws on where it stopped."""

    def __init__(self, inner: Searcher, seed: int | None):
        import numpy as np

        super().__init__(metric=inner.metric, mode=inner.mode)
        self.inner = inner
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
            self.inner.set_search_properties(metric, mode, config, **spec)
        return super().set_search_properties(metric, mode, config, **spec)

    def suggest(self, trial_id: str):
        with self._own_random_state():
            return self.inner.suggest(trial_id)

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        with self._own_random_state():
            self.inner.on_trial_result(trial_id, result)

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        with self._own_random_state():
            self.inner.on_trial_complete(trial_id, result=result, error=error)

    def on_pause(self, trial_id: str) -> None:
        with self._own_random_state():
            self.inner.on_pause(trial_id)

    def on_unpause(self, trial_id: str) -> None:
        with self._own_random_state():
            self.inner.on_unpause(trial_id)

    def save(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "wb") as f:
            pickle.dump({"inner": saved_state(self.inner), "numpy_state": self.numpy_state}, f)

    def restore(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "rb") as f:
            state = pickle.load(f)
        restore_state(self.inner, state["inner"])
        self.numpy_state = state["numpy_state"]


def saved_state(searcher: Searcher) -> bytes:
    """What ``searcher.save`` writes, as bytes, for a wrapper to keep inside its own file (Tune renames the
    one file it asked for). Written outside the experiment's directory: Tune copies that directory to
    storage as it goes, and a file that vanishes under the copy fails it with an error in the console."""
    with tempfile.TemporaryDirectory(prefix="tune-service-searcher-") as scratch:
        path = os.path.join(scratch, "inner")
        searcher.save(path)
        with open(path, "rb") as f:
            return f.read()


def restore_state(searcher: Searcher, state: bytes) -> None:
    """``searcher.restore`` from the bytes :func:`saved_state` returned."""
    with tempfile.TemporaryDirectory(prefix="tune-service-searcher-") as scratch:
        path = os.path.join(scratch, "inner")
        with open(path, "wb") as f:
            f.write(state)
        searcher.restore(path)
