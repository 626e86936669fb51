"""Names in the spec -> Ray Tune searchers and schedulers, imported lazily.

Each searcher gets its space built natively by :mod:`tune_service.spaces`. Metric and mode are set once
on ``TuneConfig`` and reach the searcher and scheduler from there. The epoch (``time_attr``) is the
schedulers' clock, so ``max_t`` and ``grace_period`` are counted in epochs.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from tune_service import spaces
from tune_service.spec import SweepSpec

TIME_ATTR = "epoch"


def build_searcher(spec: SweepSpec) -> tuple[Any, int]:
    """The searcher Tune should use, and the number of trials to run.

    Every searcher gets its space built natively (:mod:`tune_service.spaces`) and is wrapped in
    :class:`~tune_service.searchers.TrialConfigs`, so every trial receives the same kind of config
    (plain values, constants included, inactive parameters absent, dotted names nested) and the sweep
    stops suggesting trials once ``metric.target`` is reached. Tune's ``param_space`` stays empty.
    """
    from tune_service.searchers import TrialConfigs

    try:
        builder = _SEARCHERS[spec.searcher]
    except KeyError:  # pragma: no cover - spec validation admits only known methods
        raise ValueError(f"unknown method {spec.method!r}; valid: {', '.join(sorted(_SEARCHERS))}") from None
    inner = builder(spec)
    indexed = spaces.bohb_indexed(spec.parameters) if spec.searcher == "bohb" else ()
    decoder = spaces.Decoder(spec.parameters, indexed=indexed)
    searcher = TrialConfigs(inner, decoder, spec.metric.name, spec.metric.mode, spec.metric.target)
    return searcher, trial_count(spec)


def build_scheduler(spec: SweepSpec, recorded: Mapping[str, Any] | None = None) -> Any:
    """The trial scheduler named by ``scheduler.type`` (HyperBand-for-BOHB when ``method`` is bohb).

    ``recorded``: for a resumed sweep, what its trials reported (:func:`tune_service.replay.read_recorded`);
    ASHA's rungs are rebuilt from it; HyperBand's brackets are not (Ray refills them with the trials it adds back).
    """
    from ray.tune.schedulers import ASHAScheduler, FIFOScheduler

    s = spec.scheduler
    if s.type == "fifo":
        return FIFOScheduler()
    if s.type == "asha":
        asha_args = dict(time_attr=TIME_ATTR, max_t=s.max_t, grace_period=s.grace_period,
                         reduction_factor=s.reduction_factor)
        if recorded:
            from tune_service.replay import ResumedASHA

            return ResumedASHA(dict(recorded), **asha_args)
        return ASHAScheduler(**asha_args)
    return _hyperband(bohb=spec.searcher == "bohb")(time_attr=TIME_ATTR, max_t=s.max_t,
                                                    reduction_factor=s.reduction_factor)


def _hyperband(bohb: bool):
    """Synchronous HyperBand that works when trials start one or two at a time.

    Ray's HyperBand schedulers assume every trial is added up front. Here the concurrency that fits
    the cluster adds them a few at a time, and Ray's brackets then misbehave: a bracket counts as
    filled while its *live* trials number its size, so once trials end, new ones refill the first
    bracket (every trial goes to ``max_t``), and ``HyperBandScheduler`` halves a bracket as soon as the
    trials added so far reach the rung (each is judged alone). This subclass:

    - counts a bracket as filled once its planned number of trials has been added (ever);
    - waits for the bracket to fill before halving it, pausing the trials that reach the rung first, as
      ``HyperBandForBOHB`` does; the searcher hears of each pause (``TrialConfigs`` counts paused trials
      out of the concurrency cap, so the rest of the bracket can start) and Ray halves a bracket that
      can no longer fill once no trial is left running;
    - keeps the bracket order of the scheduler it stands for: HyperBand-for-BOHB the most aggressive
      bracket first, HyperBand the bracket without early stopping first.
    """
    from ray.tune.schedulers import HyperBandForBOHB, HyperBandScheduler
    from ray.tune.schedulers.hyperband import _Bracket

    class FillOnceBracket(_Bracket):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.added = 0

        def add_trial(self, trial):
            super().add_trial(trial)
            self.added += 1

        def filled(self) -> bool:
            return self.added >= self._n0

    class WaitingHyperBand(HyperBandForBOHB):
        def on_trial_add(self, tune_controller, trial):
            if bohb:
                super().on_trial_add(tune_controller, trial)
            else:
                HyperBandScheduler.on_trial_add(self, tune_controller, trial)

        def _create_bracket(self, s):
            return FillOnceBracket(time_attr=self._time_attr, max_trials=self._get_n0(s),
                                   init_t_attr=self._get_r0(s), max_t_attr=self._max_t_attr, eta=self._eta, s=s,
                                   stop_last_trials=self._stop_last_trials)

    return WaitingHyperBand


def trial_count(spec: SweepSpec) -> int:
    """How many trials the sweep will run (a grid: its points, cut at ``run_cap`` when one is given)."""
    if spec.searcher == "grid":
        points = len(spaces.grid_points(spec.parameters))
        return min(points, spec.run_cap) if spec.run_cap else points
    return spec.run_cap or 1


def _random(spec: SweepSpec):
    from tune_service.searchers import RandomSearch

    spaces.check_random(spec.parameters)
    return RandomSearch(spec.parameters, seed=spec.seed)


def _grid(spec: SweepSpec):
    from tune_service.searchers import GridSearch

    return GridSearch(spec.parameters, limit=spec.run_cap)


def _hyperopt(spec: SweepSpec):
    from ray.tune.search.hyperopt import HyperOptSearch

    space = spaces.hyperopt_space(spec.parameters)
    # metric and mode go to the searcher itself: Tune does not pass them to a searcher built with a space.
    return HyperOptSearch(space=space, metric=spec.metric.name, mode=spec.metric.mode,
                          random_state_seed=spec.seed, n_initial_points=_initial_points(spec))


def _initial_points(spec: SweepSpec) -> int:
    """Random configs before TPE takes over: hyperopt's default of 20 would make a short sweep random."""
    return max(2, min(20, (spec.run_cap or 10) // 3))


def _bohb(spec: SweepSpec):
    from ray.tune.search.bohb import TuneBOHB

    space = spaces.config_space(spec.parameters, seed=spec.seed)
    return TuneBOHB(space=space, metric=spec.metric.name, mode=spec.metric.mode, seed=spec.seed)


_SEARCHERS: dict[str, Callable[[SweepSpec], Any]] = {
    "random": _random,
    "grid": _grid,
    "hyperopt": _hyperopt,
    "bohb": _bohb,
}
