"""Names in the spec -> Ray Tune searchers and schedulers, imported lazily.

Each searcher gets its space built natively by :mod:`tune_service.search.spaces`. Metric and mode are set once
on ``TuneConfig`` and reach the searcher and scheduler from there. The epoch, or the optimizer step
(``scheduler.time_unit``), is the schedulers' clock (``time_attr``): ``max_t`` and ``grace_period`` count it.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, Mapping

from tune_service.errors import Problem, SpecError
from tune_service.search import priors, spaces, warm_start
from tune_service.search.constraints import violations_being_told
from tune_service.search.population_journal import PopulationHistory
from tune_service.search.warm_start import WarmStart
from tune_service.spec import SweepSpec


def build_searcher(spec: SweepSpec, warm: WarmStart | None = None) -> tuple[Any, int]:
    """The searcher Tune should use, and the number of trials to run (a grid: its points, cut at
    ``run_cap`` when one is given). Build it once per sweep: a grid is counted here. ``warm``: the
    earlier trials to tell it first (:mod:`~tune_service.search.warm_start`), as a new sweep's searcher
    hears them; a resumed sweep's searcher has them in its restored state.

    Every searcher gets its space built natively (:mod:`tune_service.search.spaces`) and is wrapped in
    the stack of :func:`~tune_service.search.wrappers.trial_configs`, so every trial receives the same
    kind of config (plain values, constants included, inactive parameters absent, dotted names nested),
    at most ``max_concurrent_trials`` run, what a stopped trial tells the model is corrected for its
    fidelity, and the sweep stops suggesting trials once ``metric.target`` is reached. Tune's
    ``param_space`` stays empty.
    """
    from tune_service.search.wrappers import trial_configs

    try:
        builder = _SEARCHERS[spec.searcher]
    except KeyError:  # pragma: no cover - spec validation admits only known methods
        raise ValueError(f"unknown method {spec.method!r}; valid: {', '.join(sorted(_SEARCHERS))}") from None
    told = (
        spaces.native_points(spec.searcher, spec.parameters, [t.config for t in warm.trials], "warm_start")
        if warm
        else []
    )
    known = spaces.native_points(spec.searcher, spec.parameters, spec.points_to_evaluate)
    drawn = spaces.native_points(
        spec.searcher, spec.parameters, _start_up_from_priors(spec, len(told) + len(known)), "priors"
    )
    inner = builder(spec, [*told, *known, *drawn])
    decoder = spaces.Decoder(spec.parameters)
    # The TPEs need telling a trial the scheduler stopped from one that ran its budget (BOHB models the
    # budgets itself), and only under a scheduler that stops trials (under FIFO a short trial ended by
    # itself).
    stopped = _STOPPED_TRIALS.get(spec.searcher) if spec.scheduler.type != "fifo" else None
    budget = (spec.scheduler.time_attr, spec.scheduler.max_t) if stopped else None
    searcher = trial_configs(
        inner,
        decoder,
        spec.metric.name,
        spec.metric.mode,
        spec.metric.target,
        budget,
        stopped or "as_worst_completed",
        more_objectives=spec.objectives[1:],
        constraints=spec.constraints,
    )
    if warm:
        warm_start.tell(searcher, warm)
    # A grid's size is its points, counted once by the searcher (cut at run_cap), never enumerated whole.
    num_trials = inner.size if spec.searcher == "grid" else spec.run_cap or 1
    return searcher, num_trials


def build_scheduler(
    spec: SweepSpec,
    recorded: Mapping[str, Any] | None = None,
    takes_turns: bool = False,
    population_history: PopulationHistory | None = None,
) -> Any:
    """The trial scheduler named by ``scheduler.type`` (HyperBand-for-BOHB when ``method`` is bohb). Over
    several objectives, ASHA is :class:`~tune_service.search.pareto_asha.ParetoASHA` and HyperBand's
    brackets halve by Pareto order (:class:`~tune_service.search.hyperband.ParetoBracket`).

    ``recorded``: for a resumed sweep, what its trials reported (:func:`tune_service.search.replay.read_recorded`);
    ASHA's rungs and HyperBand's brackets are rebuilt from it (:mod:`tune_service.search.hyperband`).
    ``takes_turns``: a population larger than the trials the cluster runs at once (its trials take turns).
    ``population_history``: a resumed population's decisions so far
    (:class:`~tune_service.search.population_journal.PopulationHistory`), which PBT and PB2 go on from.
    """
    from ray.tune.schedulers import FIFOScheduler

    s = spec.scheduler
    if s.type == "fifo":
        return FIFOScheduler()
    if s.population:
        from tune_service.search.population import build_population

        return build_population(spec, takes_turns, population_history)
    if s.type == "pbt_replay":
        from tune_service.search.population import build_replay

        return build_replay(spec)
    if s.type == "asha" and spec.multi_objective:
        from tune_service.search.pareto_asha import ParetoASHA

        return ParetoASHA(
            spec.objective_modes,
            time_attr=s.time_attr,
            max_t=s.max_t,
            grace_period=s.grace_period,
            reduction_factor=s.reduction_factor,
            recorded=recorded,
        )
    if s.type == "asha":
        from tune_service.search.asha import PromotingASHA

        return PromotingASHA(
            time_attr=s.time_attr,
            max_t=s.max_t,
            grace_period=s.grace_period,
            reduction_factor=s.reduction_factor,
            recorded=recorded,
        )
    from tune_service.search.hyperband import ResumedHyperBand, WaitingHyperBand

    hyperband_args: dict[str, Any] = dict(
        bohb=spec.searcher == "bohb",
        objectives=spec.objective_modes if spec.multi_objective else (),
        time_attr=s.time_attr,
        max_t=s.max_t,
        reduction_factor=s.reduction_factor,
    )
    if recorded is not None:
        return ResumedHyperBand(recorded, **hyperband_args)
    return WaitingHyperBand(**hyperband_args)


def _random(spec: SweepSpec, points: list[dict[str, Any]]):
    from tune_service.search.searchers import RandomSearch

    spaces.check_random(spec.parameters)
    return RandomSearch(
        spec.parameters,
        seed=spec.seed,
        points=points,
        metric=spec.metric.name,
        mode=spec.metric.mode,
        time_attr=spec.scheduler.time_attr,
        **_prior(spec),
    )


def _prior(spec: SweepSpec) -> dict[str, Any]:
    """The spec's priors as random search and BOHB take them (:mod:`~tune_service.search.priors`)."""
    if not spec.priors:
        return {}
    return {"prior": priors.PriorLaw(spec.parameters, spec.priors), "beta": priors.decay(spec.run_cap)}


def _grid(spec: SweepSpec, points: list[dict[str, Any]]):
    from tune_service.search.searchers import GridSearch

    return GridSearch(spec.parameters, limit=spec.run_cap, points=points)


def _hyperopt(spec: SweepSpec, points: list[dict[str, Any]]):
    from ray.tune.search.hyperopt import HyperOptSearch

    space = spaces.hyperopt_space(spec.parameters)
    # metric and mode go to the searcher itself: Tune does not pass them to a searcher built with a space.
    return HyperOptSearch(
        space=space,
        metric=spec.metric.name,
        mode=spec.metric.mode,
        random_state_seed=spec.seed,
        n_initial_points=_initial_points(spec),
        points_to_evaluate=points or None,
    )


def describe_priors(spec: SweepSpec, given: int) -> str:
    """How the sweep's searcher uses its priors (the plan's line), ``given`` points told to it first."""
    if spec.searcher in _START_UP:
        count = len(_start_up_from_priors(spec, given))
        return (
            f"the TPE's {count} random start-up config(s) drawn half from them, half from the declared laws; it "
            f"learns from them as from the rest, so their share of what it has seen fades as 1/n"
        )
    rule = (
        f"half from them (to the power min(1, {priors.decay(spec.run_cap):g}/n) at the n-th), half from the "
        f"declared laws, until the best configs are likelier without them"
    )
    if spec.searcher == "bohb":
        return f"BOHB's random configs drawn {rule}; its model's picks weighed by them to the same power"
    return f"each config drawn {rule}"


def _start_up_from_priors(spec: SweepSpec, given: int) -> list[dict[str, Any]]:
    """A TPE's start-up configs with the spec's priors (flat; half from them, half from the declared laws):
    as many as its random start-up configs that the ``given`` points (earlier trials, known points) leave. None for the
    searchers that weigh each draw themselves (random, BOHB) or draw none (grid)."""
    start_up = _START_UP.get(spec.searcher)
    if not spec.priors or start_up is None:
        return []
    law = priors.PriorLaw(spec.parameters, spec.priors)
    return priors.start_up_draws(law, spec.seed, max(0, start_up(spec) - given))


def _initial_points(spec: SweepSpec) -> int:
    """Random configs before TPE takes over: hyperopt's default of 20 would make a short sweep random."""
    return max(2, min(20, (spec.run_cap or 10) // 3))


def _bohb(spec: SweepSpec, points: list[dict[str, Any]]):
    from tune_service.search.bohb import BOHBSearch

    spaces.check_random(spec.parameters)  # BOHB's random configs are random search's
    return BOHBSearch(
        spec.parameters,
        spec.metric.name,
        spec.metric.mode,
        seed=spec.seed,
        time_attr=spec.scheduler.time_attr,
        points=points,
        **_prior(spec),
    )


def _optuna_start_up(spec: SweepSpec) -> int:
    """Optuna's default of 10 random trials before TPE, fewer in a short sweep (as for hyperopt)."""
    return min(10, _initial_points(spec))


def _optuna(spec: SweepSpec, points: list[dict[str, Any]]):
    try:  # the `optuna` extra
        import optuna
    except ImportError:
        raise SpecError(
            [Problem("method", "optuna needs the package optuna (not installed): pip install 'tune-service[optuna]'")]
        ) from None
    from ray.tune.search.optuna import OptunaSearch

    space = spaces.OptunaSpace(spec.parameters)
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # not a line per trial on the console
    # Its TPE stated rather than left to the installed major (the extra allows 4 and 5): multivariate, with
    # the constant liar for trials still running (Optuna 5's defaults for one objective, and what the
    # search-quality benchmark measured; Optuna 4 defaults to neither).
    # The spec's constraints, as Optuna's samplers take them (search.constraints); None without.
    constraints_func = violations_being_told if spec.constraints else None
    sampler: Any
    with warnings.catch_warnings():
        # Optuna 5 deprecates constraints_func (to go in 7) for Trial.set_constraint, which needs Optuna's
        # trial object, and Ray's OptunaSearch keeps that private; Optuna 4 has no set_constraint.
        warnings.filterwarnings("ignore", message="`constraints_func` has been deprecated", category=FutureWarning)
        if spec.optuna.sampler == "nsga2":
            sampler = optuna.samplers.NSGAIISampler(
                seed=spec.seed, population_size=spec.optuna.population_size, constraints_func=constraints_func
            )
        else:
            sampler = optuna.samplers.TPESampler(
                seed=spec.seed,
                n_startup_trials=_optuna_start_up(spec),
                multivariate=True,
                constant_liar=True,
                constraints_func=constraints_func,
            )
    # Several objectives: Ray's OptunaSearch takes them as lists, and the same TPE is Optuna's
    # multi-objective TPE (its default for several objectives).
    metric: Any = [o.name for o in spec.objectives] if spec.multi_objective else spec.metric.name
    mode: Any = [o.mode for o in spec.objectives] if spec.multi_objective else spec.metric.mode
    return OptunaSearch(space=space, metric=metric, mode=mode, sampler=sampler, points_to_evaluate=points or None)


#: Each builder takes the spec and the points to suggest first, in the searcher's own terms (the warm
#: start's earlier trials, then ``points_to_evaluate``): it learns from them as from its own suggestions.
_SEARCHERS: dict[str, Callable[[SweepSpec, list[dict[str, Any]]], Any]] = {
    "random": _random,
    "grid": _grid,
    "hyperopt": _hyperopt,
    "bohb": _bohb,
    "optuna": _optuna,
}
#: The TPEs' number of random start-up configs: with priors, half drawn from them
#: (:func:`~tune_service.search.priors.start_up_draws`).
_START_UP: dict[str, Callable[[SweepSpec], int]] = {"hyperopt": _initial_points, "optuna": _optuna_start_up}
#: How a searcher hears of a trial that a stopping scheduler ended short of ``max_t``
#: (:class:`~tune_service.search.wrappers.FidelityCorrected`); the others hear its last result as it is.
_STOPPED_TRIALS = {"hyperopt": "as_worst_completed", "optuna": "as_pruned"}
