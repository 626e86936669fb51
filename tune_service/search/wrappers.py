"""Wrappers around a Ray Tune ``Searcher``, in the shape of Ray's ``ConcurrencyLimiter`` and ``Repeater``:
each does one job and passes everything else on to the searcher it wraps.

:func:`trial_configs` stacks the four (five) every sweep's searcher runs under, outermost first:

- :class:`StopAtTarget`: once a result reaches ``metric.target`` (or an objective's), no new trial
  (running ones finish, as in W&B);
- :class:`RunningCap`: at most ``max_concurrent_trials`` *running* trials;
- :class:`Constrained` (with ``constraints:`` only): a finished trial's violations held for Optuna's
  constraints while it is told;
- :class:`FidelityCorrected`: what the model hears of a trial that a scheduler stopped short of its
  budget, or whose metric (an objective) was not finite;
- :class:`Decoded`: the model's suggestion decoded into the config a trial receives.

A stack saves and restores as one file (Tune asks the outermost searcher for one): each wrapper's own
state, and the wrapped model's file as bytes (:func:`saved_state`).
"""

from __future__ import annotations

import os
import pickle
import tempfile
from typing import Any, Iterator, Sequence, TypeVar

from ray.tune.search import Searcher

from tune_service.search.asha import non_finite
from tune_service.search.spaces import Decoder
from tune_service.search.constraints import telling
from tune_service.spec import MetricSpec
from tune_service.spec.sweep import ConstraintSpec

_STOPPED_HEARD = ("as_worst_completed", "as_pruned")
W = TypeVar("W", bound="SearcherWrapper")


class SearcherWrapper(Searcher):
    """Passes every call on to ``inner``; a subclass overrides the calls of its one job, and keeps its
    own state in :meth:`own_state` / :meth:`restore_own_state`."""

    def __init__(self, inner: Searcher, metric: str | None = None, mode: str | None = None):
        super().__init__(metric=metric, mode=mode)
        self.inner = inner

    def set_search_properties(self, metric, mode, config, **spec) -> bool:
        self.inner.set_search_properties(metric, mode, config, **spec)
        return super().set_search_properties(metric, mode, config, **spec)

    def set_max_concurrency(self, max_concurrent: int) -> bool:
        return self.inner.set_max_concurrency(max_concurrent)

    def suggest(self, trial_id: str):
        return self.inner.suggest(trial_id)

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        self.inner.on_trial_result(trial_id, result)

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        self.inner.on_trial_complete(trial_id, result=result, error=error)

    # Our HyperBand schedulers (tune_service.search.hyperband) report pauses and resumptions to the
    # searcher (Ray's HyperBandForBOHB calls them).
    def on_pause(self, trial_id: str) -> None:
        if hasattr(self.inner, "on_pause"):
            self.inner.on_pause(trial_id)

    def on_unpause(self, trial_id: str) -> None:
        if hasattr(self.inner, "on_unpause"):
            self.inner.on_unpause(trial_id)

    def own_state(self) -> Any:
        """This wrapper's own state (not the inner searcher's), to be pickled."""
        return None

    def restore_own_state(self, state: Any) -> None:
        pass

    def layers(self) -> Iterator[SearcherWrapper]:
        """This wrapper and the wrappers inside it, outermost first."""
        layer: Searcher = self
        while isinstance(layer, SearcherWrapper):
            yield layer
            layer = layer.inner

    def save(self, checkpoint_path: str) -> None:
        layers = list(self.layers())
        with open(checkpoint_path, "wb") as f:
            pickle.dump({"layers": [layer.own_state() for layer in layers], "model": saved_state(layers[-1].inner)}, f)

    def restore(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "rb") as f:
            state = pickle.load(f)
        layers = list(self.layers())
        for layer, own in zip(layers, state["layers"], strict=True):
            layer.restore_own_state(own)
        restore_state(layers[-1].inner, state["model"])


def innermost(searcher: Searcher) -> Searcher:
    """The searcher inside every wrapper: the model that suggests."""
    while isinstance(searcher, SearcherWrapper):
        searcher = searcher.inner
    return searcher


def layer_of(searcher: Searcher, kind: type[W]) -> W | None:
    """The wrapper of type ``kind`` in ``searcher``'s stack, or None."""
    while isinstance(searcher, SearcherWrapper):
        if isinstance(searcher, kind):
            return searcher
        searcher = searcher.inner
    return None


class Decoded(SearcherWrapper):
    """Each suggestion decoded (:class:`tune_service.search.spaces.Decoder`) into the config a trial
    receives: plain values, constants included, inactive parameters absent, dotted names nested."""

    def __init__(self, inner: Searcher, decoder: Decoder):
        super().__init__(inner)
        self.decoder = decoder

    def suggest(self, trial_id: str):
        suggested = self.inner.suggest(trial_id)
        if suggested is None or suggested == Searcher.FINISHED:
            return suggested
        return self.decoder(suggested)


class StopAtTarget(SearcherWrapper):
    """Once a finite result reaches ``target`` (by ``mode``), :data:`Searcher.FINISHED`: no new trial,
    while the running ones finish (W&B's ``metric.target``). ``more_targets``: the other objectives of a
    sweep with several, each ``(metric, mode, target)``; a result reaching any one target ends the sweep,
    as W&B words each objective's ``target`` ("the sweep will finish once any run reaches it")."""

    def __init__(
        self,
        inner: Searcher,
        metric: str | None,
        mode: str | None,
        target: float | None,
        more_targets: Sequence[tuple[str, str, float]] = (),
    ):
        super().__init__(inner, metric, mode)
        self.targets = (*([(metric, mode, target)] if metric is not None and target is not None else []), *more_targets)
        #: The trial whose result reached a target first (None: none yet).
        self.target_reached_by: str | None = None

    def suggest(self, trial_id: str):
        if self.target_reached_by is not None:
            return Searcher.FINISHED
        return self.inner.suggest(trial_id)

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        self._check(trial_id, result)
        self.inner.on_trial_result(trial_id, result)

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        if result and not error:
            self._check(trial_id, result)
        self.inner.on_trial_complete(trial_id, result=result, error=error)

    def _check(self, trial_id: str, result: dict) -> None:
        if self.target_reached_by is not None:
            return
        for metric, mode, target in self.targets:
            value = result.get(metric)
            if not isinstance(value, (int, float)) or non_finite(value):
                continue
            if (value >= target) if mode == "max" else (value <= target):
                self.target_reached_by = trial_id
                return

    def own_state(self) -> Any:
        return self.target_reached_by

    def restore_own_state(self, state: Any) -> None:
        self.target_reached_by = state


class Constrained(SearcherWrapper):
    """Holds a finished trial's violations of ``constraints`` while the searcher it wraps is told of it,
    for Optuna's ``constraints_func`` (:mod:`~tune_service.search.constraints`)."""

    def __init__(self, inner: Searcher, constraints: Sequence[ConstraintSpec]):
        super().__init__(inner)
        self.constraints = tuple(constraints)

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        with telling(self.constraints, result):
            self.inner.on_trial_complete(trial_id, result=result, error=error)


class RunningCap(SearcherWrapper):
    """At most ``max_concurrent`` trials running (``max_concurrent_trials`` reaches it through
    :meth:`set_max_concurrency`; 0: no cap), counting *running* trials only. Ray's ``ConcurrencyLimiter``
    counts a trial that HyperBand paused at a rung as live, so with a cap below a bracket's size the
    bracket never fills: HyperBand then judges each trial alone and stops none of them early."""

    def __init__(self, inner: Searcher):
        super().__init__(inner)
        self.max_concurrent = 0
        self.running: set[str] = set()

    def set_max_concurrency(self, max_concurrent: int) -> bool:
        self.max_concurrent = max_concurrent
        return True  # ours to enforce: Tune then wraps no ConcurrencyLimiter around the stack

    def suggest(self, trial_id: str):
        if self.max_concurrent and len(self.running) >= self.max_concurrent:
            return None
        suggested = self.inner.suggest(trial_id)
        if suggested is not None and suggested != Searcher.FINISHED:
            self.running.add(trial_id)
        return suggested

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        self.running.discard(trial_id)
        self.inner.on_trial_complete(trial_id, result=result, error=error)

    def on_pause(self, trial_id: str) -> None:
        self.running.discard(trial_id)
        super().on_pause(trial_id)

    def on_unpause(self, trial_id: str) -> None:
        self.running.add(trial_id)
        super().on_unpause(trial_id)

    def own_state(self) -> Any:
        return set(self.running)  # resumed with the sweep, they count against the cap

    def restore_own_state(self, state: Any) -> None:
        self.running = set(state)


class FidelityCorrected(SearcherWrapper):
    """What the model hears of a finished trial. A trial whose metric is not finite is a failed point,
    never a value. With ``budget`` (the schedulers' clock and every trial's ``max_t``), a trial that a
    scheduler stopped short of the budget is not heard as if it had run it: its last value is measured at
    a lower fidelity, where every trial looks worse than it ends (or better), and a model (a TPE) that
    took it as final would fit its good and bad groups to fidelities rather than to configurations.
    ``stopped`` says what the model hears instead:

    - ``as_worst_completed`` (hyperopt's TPE): the trial's value no better than the worst trial that ran
      its whole budget (its own value when that is worse);
    - ``as_pruned`` (Ray's ``OptunaSearch``): the last result as an intermediate value, then the trial
      told as pruned, as Optuna's own pruners end a trial: Optuna's TPE ranks pruned trials after every
      completed one, by how far they got and then by their last value.

    ``more_objectives``: ``(name, mode)`` of the other objectives of a sweep with several; a trial is a
    failed point unless each is finite too. Optuna takes no intermediate value in a study of several
    objectives (Ray's ``OptunaSearch`` drops them), and its TPE then ranks every pruned trial alike, so a
    stopped trial could fill its good group by chance: with several objectives a stopped trial is heard
    ``as_worst_completed`` whatever ``stopped`` says, objective by objective, which every trial that ran
    its budget then dominates (weakly). A searcher that models fidelities itself (BOHB), or one under
    FIFO, gets no budget.
    """

    def __init__(
        self,
        inner: Searcher,
        metric: str | None,
        mode: str | None,
        budget: tuple[str, float] | None = None,
        stopped: str = "as_worst_completed",
        more_objectives: Sequence[tuple[str, str]] = (),
    ):
        super().__init__(inner, metric, mode)
        if stopped not in _STOPPED_HEARD:
            raise ValueError(f"stopped: {stopped!r}, not one of {_STOPPED_HEARD}")
        self.budget = budget
        self.stopped = stopped
        self.more_objectives = tuple(more_objectives)
        #: Each objective's worst value among the trials that ran their whole budget (none until one has).
        self.worst_completed: dict[str, float] = {}

    @property
    def objectives(self) -> tuple[tuple[str, str], ...]:
        """``(name, mode)`` of every objective, the metric first (none while the metric is unknown)."""
        if self.metric is None or self.mode is None:
            return ()
        return ((self.metric, self.mode), *self.more_objectives)

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        if result and any(non_finite(result.get(name)) for name, _ in self.objectives):
            result, error = None, True  # a diverged trial: a failed point to the model, never a value
        if result and not error:
            whole = self._ran_whole_budget(result)
            if whole is False and self.stopped == "as_pruned" and not self.more_objectives:
                self.inner.on_trial_result(trial_id, result)  # Tune gave the stopping result to the scheduler only
                self.inner.on_trial_complete(trial_id, result=None)  # OptunaSearch: no value, no error: pruned
                return
            if whole is False:
                result = self._as_worst_completed(result)
            elif whole:
                for name, mode in self.objectives:
                    value = result[name]
                    worst = self.worst_completed.get(name)
                    self.worst_completed[name] = value if worst is None else _worse(worst, value, mode)
        # A failed trial's last result is not its outcome (Ray's OptunaSearch would tell it as complete).
        self.inner.on_trial_complete(trial_id, result=None if error else result, error=error)

    def _ran_whole_budget(self, result: dict) -> bool | None:
        """Whether a finished trial ran its whole budget (False: a scheduler stopped it short); None
        without a budget or without a value of every objective."""
        if self.budget is None or not self.objectives:
            return None
        if not all(isinstance(result.get(name), (int, float)) for name, _ in self.objectives):
            return None
        time_attr, max_t = self.budget
        return result.get(time_attr, max_t) >= max_t

    def _as_worst_completed(self, result: dict) -> dict:
        """A stopped trial's result, each objective's value no better than the worst trial that ran its
        whole budget (as it is, while none has)."""
        return {
            **result,
            **{
                name: _worse(result[name], self.worst_completed[name], mode)
                for name, mode in self.objectives
                if name in self.worst_completed
            },
        }

    def own_state(self) -> Any:
        return dict(self.worst_completed)

    def restore_own_state(self, state: Any) -> None:
        if state is None or isinstance(state, (int, float)):  # saved before several objectives: the metric's
            self.worst_completed = {} if state is None or self.metric is None else {self.metric: float(state)}
        else:
            self.worst_completed = dict(state)


def _worse(a: float, b: float, mode: str) -> float:
    """The worse of two values of an objective with ``mode``."""
    return max(a, b) if mode == "min" else min(a, b)


def trial_configs(
    model: Searcher,
    decoder: Decoder,
    metric: str | None,
    mode: str | None,
    target: float | None = None,
    budget: tuple[str, float] | None = None,
    stopped: str = "as_worst_completed",
    more_objectives: Sequence[MetricSpec] = (),
    constraints: Sequence[ConstraintSpec] = (),
) -> SearcherWrapper:
    """The stack every sweep's searcher runs under (the module's docstring), around ``model``.
    ``more_objectives``: a sweep's objectives after the first (``metric``), when it has several;
    ``constraints``: the spec's, held for Optuna's samplers while a trial is told (no layer without)."""
    more = [(o.name, o.mode) for o in more_objectives if o.name is not None and o.mode is not None]
    corrected: SearcherWrapper = FidelityCorrected(Decoded(model, decoder), metric, mode, budget, stopped, more)
    if constraints:
        corrected = Constrained(corrected, constraints)
    more_targets = [(o.name, o.mode, o.target) for o in more_objectives if o.name and o.mode and o.target is not None]
    return StopAtTarget(RunningCap(corrected), metric, mode, target, more_targets)


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
