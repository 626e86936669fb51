"""Names in the spec -> Ray Tune searchers and schedulers, imported lazily.

Each searcher gets its space built natively by :mod:`tune_service.spaces`. Metric and mode are set once
on ``TuneConfig`` and reach the searcher and scheduler from there. The epoch (``time_attr``) is the
schedulers' clock, so ``max_t`` and ``grace_period`` are counted in epochs.
"""

from __future__ import annotations

from typing import Any, Callable

from tune_service import spaces
from tune_service.spec import SweepSpec

TIME_ATTR = "epoch"


def build_searcher(spec: SweepSpec, max_concurrent: int = 1) -> tuple[Any, dict[str, Any], int]:
    """The searcher, the ``param_space`` Tune should get, and the number of trials to run.

    Random and grid search use Ray's BasicVariantGenerator; hyperopt and BOHB get their native space
    through the searcher, so Tune's own ``param_space`` holds only the constants. ``max_concurrent``
    caps the trials running at once: Tune applies its ``max_concurrent_trials`` to Searchers only, and
    silently ignores it for the BasicVariantGenerator, so that one gets the cap itself.
    """
    try:
        builder = _SEARCHERS[spec.searcher]
    except KeyError:  # pragma: no cover - spec validation admits only known methods
        raise ValueError(f"unknown method {spec.method!r}; valid: {', '.join(sorted(_SEARCHERS))}") from None
    return builder(spec, max_concurrent)


def build_scheduler(spec: SweepSpec) -> Any:
    """The trial scheduler named by ``scheduler.type`` (HyperBand-for-BOHB when ``method`` is bohb)."""
    from ray.tune.schedulers import ASHAScheduler, FIFOScheduler, HyperBandForBOHB, HyperBandScheduler

    s = spec.scheduler
    if s.type == "fifo":
        return FIFOScheduler()
    if s.type == "asha":
        return ASHAScheduler(time_attr=TIME_ATTR, max_t=s.max_t, grace_period=s.grace_period,
                             reduction_factor=s.reduction_factor)
    hyperband = HyperBandForBOHB if spec.searcher == "bohb" else HyperBandScheduler
    return hyperband(time_attr=TIME_ATTR, max_t=s.max_t, reduction_factor=s.reduction_factor)


def rung_epochs(spec: SweepSpec) -> list[int]:
    """The epochs at which the scheduler compares trials (ASHA's rungs), smallest first; empty for FIFO."""
    s = spec.scheduler
    if s.type == "fifo":
        return []
    eta = s.reduction_factor
    start = s.grace_period if s.type == "asha" else 1
    rungs, t = [], float(start)
    while t < s.max_t:
        rungs.append(int(round(t)))
        t *= eta
    return sorted(set(rungs))


def trial_count(spec: SweepSpec) -> int:
    """How many trials the sweep will run."""
    if spec.searcher == "grid":
        return len(_capped_grid(spec))
    return spec.run_cap or 1


def _capped_grid(spec: SweepSpec) -> list[dict[str, Any]]:
    """The grid's points in order, cut at ``run_cap`` when one is given."""
    points = spaces.grid_points(spec.parameters)
    return points[: spec.run_cap] if spec.run_cap else points


def _constants(spec: SweepSpec) -> dict[str, Any]:
    return {p.name: p.value for p in spec.parameters if not p.is_searched}


def _random(spec: SweepSpec, max_concurrent: int):
    from ray.tune.search.basic_variant import BasicVariantGenerator

    searcher = BasicVariantGenerator(random_state=spec.seed, max_concurrent=max_concurrent)
    return searcher, spaces.tune_domains(spec.parameters), trial_count(spec)


def _grid(spec: SweepSpec, max_concurrent: int):
    from ray.tune.search.basic_variant import BasicVariantGenerator

    points = _capped_grid(spec)
    # Each point is handed over whole (Tune's own grid_search cannot be capped at run_cap). Points may
    # only set keys the param_space has, so the first point doubles as the space; each overrides it all.
    searcher = BasicVariantGenerator(points_to_evaluate=points, random_state=spec.seed, max_concurrent=max_concurrent)
    return searcher, dict(points[0]) if points else {}, len(points)


def _hyperopt(spec: SweepSpec, max_concurrent: int):
    from ray.tune.search.hyperopt import HyperOptSearch

    searched = [p for p in spec.parameters if p.is_searched]
    space = spaces.hyperopt_space(searched)
    # metric and mode go to the searcher itself: Tune does not pass them to a searcher built with a space.
    searcher = HyperOptSearch(space=space, metric=spec.metric.name, mode=spec.metric.mode,
                              random_state_seed=spec.seed, n_initial_points=_initial_points(spec))
    return searcher, _constants(spec), trial_count(spec)


def _initial_points(spec: SweepSpec) -> int:
    """Random configs before TPE takes over: hyperopt's default of 20 would make a short sweep random."""
    return max(2, min(20, (spec.run_cap or 10) // 3))


def _bohb(spec: SweepSpec, max_concurrent: int):
    from ray.tune.search.bohb import TuneBOHB

    searched = [p for p in spec.parameters if p.is_searched]
    searcher = TuneBOHB(space=spaces.config_space(searched, seed=spec.seed), metric=spec.metric.name,
                        mode=spec.metric.mode, seed=spec.seed)
    return searcher, _constants(spec), trial_count(spec)


_SEARCHERS: dict[str, Callable[[SweepSpec, int], tuple[Any, dict[str, Any], int]]] = {
    "random": _random,
    "grid": _grid,
    "hyperopt": _hyperopt,
    "bohb": _bohb,
}
