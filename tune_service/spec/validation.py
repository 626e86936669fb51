"""Checking a raw spec document and building the frozen :class:`~tune_service.spec.sweep.SweepSpec`.

One function per section of the document, each reporting its problems through a
:class:`~tune_service.spec.rules.Checker` and returning its typed section (the section's defaults come
from its dataclass: a default is stated once). Every problem of a file is found in one pass.
"""

from __future__ import annotations

import copy
import math
from dataclasses import fields
from typing import Any

from tune_service.errors import SpecError
from tune_service.spec.configs import flatten
from tune_service.spec.known_points import KEY as KNOWN_POINTS_KEY
from tune_service.spec.known_points import read_known_points
from tune_service.spec.objectives import (
    OBJECTIVE_KEYS,
    check_method,
    check_scheduler,
    read_constraints,
    read_metric,
    read_objectives,
)
from tune_service.spec.parameter_reading import read_parameters
from tune_service.spec.parameters import ParameterSpec
from tune_service.spec.priors import KEY as PRIORS_KEY
from tune_service.spec.priors import read_priors
from tune_service.spec.rules import Checker
from tune_service.spec.sweep import (
    DEFAULT_RUN_CAP,
    GANG_MODES,
    METHODS,
    OPTUNA_SAMPLERS,
    PROGRAM_MAX_T,
    POPULATIONS,
    SCHEDULERS,
    TIME_UNITS,
    WANDB_AGENT_KEYS,
    WANDB_NOTED_KEYS,
    ExecutionSpec,
    FailureSpec,
    LimitsSpec,
    MetricSpec,
    OptunaSettings,
    ResourceSpec,
    SchedulerSpec,
    SweepSpec,
)
from tune_service.spec.training import (
    AUTO,
    BATCH_SIZE_SCOPES,
    DEFAULT_PROFILE_STEPS,
    LR_SCALINGS,
    PRECISIONS,
    SCHEDULE_INTERVALS,
    SCHEDULES,
    DDPSettings,
    ScheduleSettings,
    TrainingSettings,
)
from tune_service.spec.wandb import MODES as WANDB_MODES
from tune_service.spec.wandb import WandbSettings
from tune_service.spec.wandb_engines import CUSTOM_METHOD, read_engine_block, resolve_method

#: Every key each mapping of the document accepts, by its dotted path ("" is the top level); any other key
#: is refused. :mod:`~tune_service.spec.schema` builds the JSON Schema's properties from these.
TOP_LEVEL_KEYS = (
    "name",
    "description",
    "method",
    "metric",
    "metrics",
    "constraints",
    "run_cap",
    "parameters",
    "early_terminate",
    "task",
    "scheduler",
    "resources",
    "training",
    "wandb",
    "seed",
    "project",
    "entity",
    "failure",
    "execution",
    "limits",
    KNOWN_POINTS_KEY,
    "warm_start",
    "optuna",
    PRIORS_KEY,
    *WANDB_AGENT_KEYS,
    *WANDB_NOTED_KEYS,
)
EARLY_TERMINATE_KEYS = ("type", "min_iter", "max_iter", "s", "eta", "strict")
SCHEDULER_KEYS = tuple(f.name for f in fields(SchedulerSpec))
RESOURCE_KEYS = tuple(f.name for f in fields(ResourceSpec) if f.name != "gpus_auto")
TRAINING_KEYS = (
    "precision",
    "batch_size_scope",
    "grad_accum_steps",
    "lr_scaling",
    "warmup_epochs",
    "warmup_steps",
    "schedule",
    "clip_grad_norm",
    "sync_batchnorm",
    "num_workers",
    "pin_memory",
    "compile",
    "deterministic",
    "profile",
    "oom_retry",
    "report_every_steps",
    "checkpoint_every",
    "ddp",
)
SCHEDULE_KEYS = tuple(f.name for f in fields(ScheduleSettings))
DDP_KEYS = ("bucket_cap_mb", "gradient_as_bucket_view", "static_graph", "find_unused_parameters")
WANDB_KEYS = ("project", "entity", "group", "tags", "mode", "log_checkpoints", "init_timeout")
FAILURE_KEYS = ("max_failures", "max_failed_trials")
LIMITS_KEYS = tuple(f.name for f in fields(LimitsSpec))
EXECUTION_KEYS = tuple(f.name for f in fields(ExecutionSpec) if f.name != "bundle_auto")
OPTUNA_KEYS = tuple(f.name for f in fields(OptunaSettings))
SECTION_KEYS = {
    "": TOP_LEVEL_KEYS,
    "metric": OBJECTIVE_KEYS,
    "early_terminate": EARLY_TERMINATE_KEYS,
    "scheduler": SCHEDULER_KEYS,
    "resources": RESOURCE_KEYS,
    "training": TRAINING_KEYS,
    "training.ddp": DDP_KEYS,
    "training.schedule": SCHEDULE_KEYS,
    "wandb": WANDB_KEYS,
    "failure": FAILURE_KEYS,
    "execution": EXECUTION_KEYS,
    "limits": LIMITS_KEYS,
    "optuna": OPTUNA_KEYS,
}


def validate(raw: dict, default_name: str) -> SweepSpec:
    """The spec that ``raw`` (a parsed document, overrides applied) describes.

    Raises:
        SpecError: with every problem found, each naming its dotted path, the rule and the value.
    """
    check = Checker()
    check.unknown_keys("", raw, TOP_LEVEL_KEYS)
    for key, why in WANDB_NOTED_KEYS.items():
        if key in raw:
            check.note(f"{key}: read, not used: {why}")
    program, command = _program(check, raw)
    if program is not None and "task" in raw:
        check.note("program: read but not run; tune-service trains the spec's `task` instead")

    name = check.string("name", raw.get("name", default_name))
    description = check.string("description", raw.get("description", ""))
    engine = read_engine_block(check, raw, SCHEDULER_KEYS)
    method = resolve_method(
        check, check.choice("method", raw.get("method", "random"), (*METHODS, CUSTOM_METHOD)), engine
    )
    parameters = _parameters(check, raw.get("parameters"))
    runs_program = (program is not None or command is not None) and "task" not in raw  # as W&B's agent runs it
    objectives = read_objectives(check, raw)
    if objectives:
        metric = objectives[0]
        check_method(check, method)
    elif runs_program and raw.get("metric") is None:
        metric = MetricSpec(name=None)  # as W&B runs a sweep without a metric: see _without_metric
        _without_metric(check, raw, method)
    else:
        metric = read_metric(check, raw.get("metric", {}))
    constraints = read_constraints(check, raw.get("constraints"), objectives or (metric,))
    task = "" if runs_program else _task(check, raw.get("task", "digits"))
    scheduler = _scheduler(
        check,
        _early_terminate(
            check, raw.get("early_terminate"), None if engine else raw.get("scheduler"), method, runs_program
        ),
        method,
        runs_program,
        metric.declared,
        multi_objective=bool(objectives),
    )
    # W&B's agent runs one process per trial; several ranks are asked for, never assumed.
    resources = _resources(check, raw.get("resources", {}), ResourceSpec(workers=1) if runs_program else ResourceSpec())
    training = _training(check, raw.get("training", {}), resources)
    if training.report_every_steps and scheduler.time_unit != "step":
        check.fail(
            "training.report_every_steps",
            f"needs scheduler.time_unit: step (the scheduler's rungs and "
            f"max_t then count optimizer steps), got {training.report_every_steps} with time_unit "
            f"{scheduler.time_unit}",
        )
    seed = check.integer("seed", raw.get("seed", 0), minimum=0)
    wandb = _wandb(check, raw.get("wandb", {}), raw)
    run_cap = _run_cap(check, raw.get("run_cap"), method)
    points_to_evaluate = read_known_points(check, raw.get(KNOWN_POINTS_KEY), parameters, run_cap)
    warm_start = _warm_start(check, raw.get("warm_start"), method, metric.declared or bool(objectives))
    priors = read_priors(check, raw.get(PRIORS_KEY), parameters, method)
    failure = _failure(check, raw.get("failure", {}))
    execution = _execution(check, raw.get("execution", {}))
    limits = _limits(check, raw.get("limits", {}))
    optuna = _optuna(check, raw.get("optuna"), method)
    if method in ("bayes", "hyperopt", "bohb", "optuna") and parameters and not any(p.is_searched for p in parameters):
        check.fail(
            "parameters",
            f"method {method} needs at least one searched parameter (`values` or a "
            f"`distribution`), got only constants; use method random or grid",
        )

    if check.problems:
        raise SpecError(check.problems)
    return SweepSpec(
        name=name,
        method=method,
        metric=metric,
        objectives=objectives,
        constraints=constraints,
        optuna=optuna,
        run_cap=run_cap,
        parameters=parameters,
        points_to_evaluate=points_to_evaluate,
        warm_start=warm_start,
        priors=priors,
        task=task,
        scheduler=scheduler,
        resources=resources,
        training=training,
        seed=seed,
        description=description,
        wandb=wandb,
        failure=failure,
        execution=execution,
        limits=limits,
        notes=tuple(check.notes),
        source=copy.deepcopy(raw),
        program=program,
        command=command,
    )


def _program(check: Checker, raw: dict) -> tuple[str | None, tuple[str, ...] | None]:
    """W&B's ``program`` (a path, relative to the spec's directory) and ``command`` (a list of tokens,
    or one string split as a shell would)."""
    import shlex

    program = raw.get("program")
    if program is not None and (not isinstance(program, str) or not program.strip()):
        check.fail("program", f"must be the path of the training script W&B's agent runs, got {program!r}")
        program = None
    command = raw.get("command")
    if command is None:
        return program, None
    if isinstance(command, str):
        try:
            return program, tuple(shlex.split(command))
        except ValueError as err:
            check.fail("command", f"must split as a shell line ({err}), got {command!r}")
            return program, None
    if not isinstance(command, list) or not command or not all(isinstance(t, (str, int, float)) for t in command):
        check.fail(
            "command",
            f'must be a list of strings such as ["${{interpreter}}", "${{program}}", "${{args}}"], got {command!r}',
        )
        return program, None
    if program is None and any("${program}" in str(t) for t in command):
        check.fail("command", f"uses ${{program}} but the spec has no program, got {command!r}")
    return program, tuple(str(t) for t in command)


def _without_metric(check: Checker, raw: dict, method: str) -> None:
    """A program sweep without ``metric:``: W&B runs random and grid sweeps so (every run to its end, no
    ranking) and refuses what needs a metric, as its sweep controller does: ``bayes`` ("Bayesian search
    requires metric") and hyperband ("Hyperband stopping requires metric"). So do we, and so for every
    searcher and scheduler that needs one."""
    if method not in ("random", "grid"):
        check.fail(
            "method",
            f"{method} needs a metric to model (W&B refuses it without one too): add "
            f"metric: {{name: ..., goal: ...}}, or use random or grid, got {method!r}",
        )
    if raw.get("early_terminate") is not None:
        check.fail(
            "early_terminate",
            "needs a metric to compare runs by (W&B refuses hyperband without one "
            "too): add metric: {name: ..., goal: ...}",
        )
    scheduler = raw.get("scheduler")
    if isinstance(scheduler, dict) and scheduler.get("type", "fifo") != "fifo":
        check.fail(
            "scheduler.type",
            f"{scheduler['type']} needs a metric to compare trials by: add "
            f"metric: {{name: ..., goal: ...}}, or use fifo, got {scheduler['type']!r}",
        )


def _early_terminate(check: Checker, raw: Any, scheduler: Any, method: str, runs_program: bool = False) -> Any:
    """W&B's ``early_terminate: {type: hyperband, ...}`` as our scheduler keys, merged into ``scheduler``.

    ``min_iter`` (or ``max_iter / eta**s``) is the first rung, so ASHA's ``grace_period``; ``eta`` its
    ``reduction_factor``; ``max_iter`` the epoch budget ``max_t`` unless ``scheduler.max_t`` is given.
    A key that both blocks set is refused rather than one silently winning.
    """
    if raw is None:
        return scheduler
    if not isinstance(raw, dict):
        check.fail("early_terminate", f"must be a mapping such as {{type: hyperband, min_iter: 3}}, got {raw!r}")
        return scheduler
    if check.unknown_keys("early_terminate", raw, EARLY_TERMINATE_KEYS):
        return scheduler
    check.choice("early_terminate.type", raw.get("type"), ("hyperband",))
    eta = check.number("early_terminate.eta", raw.get("eta", 3))
    keys: dict[str, Any] = {"type": "hyperband" if method == "bohb" else "asha"}
    if eta is not None:
        keys["reduction_factor"] = eta
    if "min_iter" in raw:
        keys["grace_period"] = check.integer("early_terminate.min_iter", raw["min_iter"], minimum=1)
    elif "max_iter" in raw and "s" in raw:
        max_iter = check.integer("early_terminate.max_iter", raw["max_iter"], minimum=1)
        steps = check.integer("early_terminate.s", raw["s"], minimum=0)
        if eta is not None and eta > 1:
            keys["grace_period"] = max(1, int(round(max_iter / eta**steps)))
    else:
        check.fail("early_terminate", "hyperband needs min_iter, or max_iter and s")
    if "max_iter" in raw:
        keys["max_t"] = raw["max_iter"]
    elif "grace_period" in keys and eta is not None and eta > 1 and not runs_program:
        # W&B's hyperband with only min_iter has no end: its brackets go on at min_iter * eta**k
        # for as long as the program runs (as they do for a program trial here). For a task, three of
        # them give the epoch budget, unless scheduler.max_t sets it.
        keys["max_t"] = int(math.ceil(keys["grace_period"] * eta**3 - 1e-9))
    if method == "bohb":
        keys.pop("grace_period", None)  # HyperBand-for-BOHB derives its brackets from max_t and eta
    if "strict" in raw:
        check.note("early_terminate.strict: read; ASHA's asynchronous rule decides which trials stop")
    mapped = ", ".join(f"{k}: {v:g}" if isinstance(v, float) else f"{k}: {v}" for k, v in keys.items())
    check.note(f"early_terminate: W&B hyperband read as scheduler {{{mapped}}}")
    if scheduler is None:
        return keys
    if not isinstance(scheduler, dict):
        return scheduler  # _scheduler reports it
    for key, value in keys.items():
        if key in scheduler and scheduler[key] != value and not (key == "max_t"):
            check.fail(
                f"scheduler.{key}",
                f"conflicts with early_terminate (which sets it to {value!r}), "
                f"got {scheduler[key]!r}; give it in one place",
            )
    return {**keys, **scheduler}


def _task(check: Checker, raw: Any) -> str:
    if not isinstance(raw, str) or not raw.strip():
        check.fail("task", f"must be a built-in task name or 'package.module:attr', got {raw!r}")
        return ""
    return raw.strip()


#: The methods whose searcher learns from earlier trials (a model): the ones ``warm_start`` can tell.
WARM_START_METHODS = ("bayes", "hyperopt", "optuna", "bohb")


def _warm_start(check: Checker, raw: Any, method: str, has_metric: bool) -> str | None:
    """``warm_start``: an earlier sweep's experiment (a directory, or a URI on remote storage), whose
    trials the searcher is told before the first trial; read when the sweep is planned
    (:mod:`tune_service.search.warm_start`)."""
    if raw is None:
        return None
    if not isinstance(raw, str) or not raw.strip():
        check.fail("warm_start", f"must be the directory (or s3:// URI) of an earlier sweep's experiment, got {raw!r}")
        return None
    if method not in WARM_START_METHODS:
        check.fail(
            "warm_start",
            f"method {method} learns nothing from earlier trials: use method bayes, optuna or bohb, got {raw!r}",
        )
    elif not has_metric:
        check.fail(
            "warm_start", f"needs the sweep's metric: the searcher learns the earlier trials' values of it, got {raw!r}"
        )
    return raw


def _run_cap(check: Checker, raw: Any, method: str) -> int | None:
    if raw is None:
        return None if method == "grid" else DEFAULT_RUN_CAP
    return check.integer("run_cap", raw, minimum=1)


def _scheduler(
    check: Checker,
    raw: Any,
    method: str,
    runs_program: bool = False,
    has_metric: bool = True,
    multi_objective: bool = False,
) -> SchedulerSpec:
    """The ``scheduler`` block. A program trial counts the values of the metric it logs (its ``wandb.log``
    steps, without a metric), is stopped early only when the spec asks, and, unless a budget is given,
    runs until the program ends (:data:`PROGRAM_MAX_T`). Several objectives: ASHA or FIFO
    (:mod:`~tune_service.spec.objectives`)."""
    if runs_program:  # as under W&B's agent: no early stopping unless early_terminate (or scheduler) asks,
        # counted in values of the metric, as W&B's hyperband counts (run.metric_history), with no budget
        d = SchedulerSpec(
            type="hyperband" if method == "bohb" else "fifo",
            time_unit="value" if has_metric else "step",
            max_t=PROGRAM_MAX_T,
        )
    else:
        d = SchedulerSpec(type="hyperband" if method == "bohb" else "asha")
    if raw is None:
        raw = {}
    if not check.mapping("scheduler", raw):
        return d
    check.unknown_keys("scheduler", raw, SCHEDULER_KEYS)
    kind = check.choice("scheduler.type", raw.get("type", d.type), SCHEDULERS)
    if multi_objective:
        check_scheduler(check, kind)
    if method == "bohb" and kind != "hyperband":
        check.fail(
            "scheduler.type",
            f"must be hyperband when method is bohb (BOHB's brackets need HyperBand-for-BOHB), got {kind!r}",
        )
    max_t = check.integer("scheduler.max_t", raw.get("max_t", d.max_t), minimum=1)
    grace = check.integer("scheduler.grace_period", raw.get("grace_period", d.grace_period), minimum=1)
    if max_t >= 1 and grace > max_t:  # an invalid max_t is reported once, above
        check.fail("scheduler.grace_period", f"must be <= scheduler.max_t ({max_t}), got {grace}")
    eta = check.at_least(
        "scheduler.reduction_factor",
        check.number("scheduler.reduction_factor", raw.get("reduction_factor", d.reduction_factor)),
        1,
        strictly=True,
    )
    unit = check.choice("scheduler.time_unit", raw.get("time_unit", d.time_unit), TIME_UNITS)
    if unit == "value" and not runs_program:
        check.fail(
            "scheduler.time_unit",
            "value (the values of the metric a W&B program logged) is for a "
            "program's trials; a task's count epoch or step, got 'value'",
        )
    if kind in (*POPULATIONS, "pbt_replay") and unit != "epoch":
        check.fail(
            "scheduler.time_unit", f"must be epoch with scheduler.type {kind} (it changes trials at epochs), got {unit}"
        )
    return SchedulerSpec(
        type=kind,
        max_t=max_t,
        grace_period=grace,
        reduction_factor=eta or d.reduction_factor,
        time_unit=unit or d.time_unit,
        **_population(check, raw, kind, max_t),
        **_replay(check, raw, kind, max_t),
    )


def _replay(check: Checker, raw: dict, kind: str, max_t: int) -> dict[str, Any]:
    """``scheduler.schedule`` of ``type: pbt_replay``: its changes, by epoch (noted, unused, under another
    type). Which parameters a change may name is the plan's check, as ``mutate``'s is."""
    schedule = raw.get("schedule")
    if kind != "pbt_replay":
        if schedule:
            check.note(
                f"scheduler.schedule: read, not used: it is for scheduler.type pbt_replay, and the type is {kind}"
            )
        return {}
    example = "such as [{epoch: 2, config: {lr: 0.01}}]"
    if not isinstance(schedule, list) or not schedule:
        check.fail(
            "scheduler.schedule",
            f"must be a list of changes with scheduler.type pbt_replay, {example}, got {schedule!r}",
        )
        return {}
    changes: list[dict[str, Any]] = []
    for i, change in enumerate(schedule):
        path = f"scheduler.schedule[{i}]"
        if not (isinstance(change, dict) and set(change) == {"epoch", "config"}):
            check.fail(path, f"must be a mapping of epoch and config, {example}, got {change!r}")
            continue
        epoch = check.integer(f"{path}.epoch", change["epoch"], minimum=1)
        if max_t >= 1 and epoch >= max_t:
            check.fail(f"{path}.epoch", f"must be < scheduler.max_t ({max_t}): the trial goes on after it, got {epoch}")
        if changes and epoch <= changes[-1]["epoch"]:
            check.fail(
                f"{path}.epoch", f"must be greater than the change before it ({changes[-1]['epoch']}), got {epoch}"
            )
        config = change["config"]
        if not (isinstance(config, dict) and config and all(isinstance(k, str) for k in config)):
            check.fail(
                f"{path}.config",
                f"must be a mapping of parameter names to values, such as {{lr: 0.01}}, got {config!r}",
            )
            continue
        changes.append({"epoch": epoch, "config": flatten(config)})
    return {"schedule": tuple(changes)}


#: The ``scheduler`` keys of population-based training (``type: pbt`` or ``pb2``) only.
POPULATION_KEYS = (
    "perturbation_interval",
    "quantile_fraction",
    "resample_probability",
    "perturbation_factors",
    "mutate",
)
#: The population keys of ``type: pbt`` alone: how PBT changes a value, which PB2's model picks instead.
_PBT_ONLY_KEYS = ("resample_probability", "perturbation_factors")


def _population(check: Checker, raw: dict, kind: str, max_t: int) -> dict[str, Any]:
    """The ``scheduler`` block's keys of ``type: pbt`` or ``pb2`` (:class:`SchedulerSpec`), only noted under
    another type, and PBT's ways of changing a value (``resample_probability``, ``perturbation_factors``)
    under ``pb2``, whose model picks the values.
    Which parameters ``mutate`` may name depends on the parameters and the task: the plan checks that
    (:func:`tune_service.search.population.check_population`)."""
    d = SchedulerSpec(type="pbt")
    # read and left, as asha's keys are under fifo; said when it would have changed something
    unused = POPULATION_KEYS if kind not in POPULATIONS else _PBT_ONLY_KEYS if kind == "pb2" else ()
    for key in unused:
        default = getattr(d, key)
        if key in raw and raw[key] not in (default, list(default) if isinstance(default, tuple) else default):
            check.note(f"scheduler.{key}: read, not used: it is for scheduler.type pbt, and the type is {kind}")
    if kind not in POPULATIONS:
        return {}
    interval = check.integer(
        "scheduler.perturbation_interval", raw.get("perturbation_interval", d.perturbation_interval), minimum=1
    )
    if max_t >= 1 and interval >= max_t:
        check.fail(
            "scheduler.perturbation_interval",
            f"must be < scheduler.max_t ({max_t}), or no trial is ever perturbed, got {interval}",
        )
    quantile = check.number("scheduler.quantile_fraction", raw.get("quantile_fraction", d.quantile_fraction))
    if quantile is not None and not 0 < quantile <= 0.5:
        check.fail(
            "scheduler.quantile_fraction",
            f"must be in (0, 0.5] (the bottom and the top fraction of the population), got {quantile}",
        )
    resample = check.number("scheduler.resample_probability", raw.get("resample_probability", d.resample_probability))
    if resample is not None and not 0 <= resample <= 1:
        check.fail("scheduler.resample_probability", f"must be a probability in [0, 1], got {resample}")
    factors = raw.get("perturbation_factors", list(d.perturbation_factors))
    if not (
        isinstance(factors, list)
        and factors
        and all(isinstance(f, (int, float)) and not isinstance(f, bool) and f > 0 and math.isfinite(f) for f in factors)
    ):
        check.fail(
            "scheduler.perturbation_factors",
            f"must be a list of numbers > 0 to multiply a value by, such as [0.8, 1.2], got {factors!r}",
        )
        factors = list(d.perturbation_factors)
    mutate = raw.get("mutate")
    names = isinstance(mutate, list) and all(isinstance(n, str) for n in mutate)
    if mutate is not None and not (names and mutate and len(set(mutate)) == len(mutate)):
        check.fail(
            "scheduler.mutate",
            f"must be a list of the searched parameters' names, each once, such as [lr, weight_decay], got {mutate!r}",
        )
        mutate = None
    return dict(
        perturbation_interval=interval,
        quantile_fraction=quantile if quantile is not None else d.quantile_fraction,
        resample_probability=resample if resample is not None else d.resample_probability,
        perturbation_factors=tuple(float(f) for f in factors),
        mutate=tuple(mutate) if mutate is not None else None,
    )


def _optuna(check: Checker, raw: Any, method: str) -> OptunaSettings:
    """The ``optuna:`` block: used by ``method: optuna`` (or ``custom``, which runs it); noted otherwise."""
    d = OptunaSettings()
    if raw is None:
        return d
    if not check.mapping("optuna", raw, "{sampler: nsga2}"):
        return d
    check.unknown_keys("optuna", raw, OPTUNA_KEYS)
    sampler = check.choice("optuna.sampler", raw.get("sampler", d.sampler), OPTUNA_SAMPLERS)
    size = check.integer("optuna.population_size", raw.get("population_size", d.population_size), minimum=2)
    if OptunaSettings(sampler, size) == d:
        pass  # a block of defaults changes nothing
    elif method != "optuna":
        check.note(f"optuna: read, not used: it sets method optuna's sampler, and this sweep's method is {method}")
    elif size != d.population_size and sampler != "nsga2":
        check.note(f"optuna.population_size: read, not used: it is NSGA-II's generation, and the sampler is {sampler}")
    return OptunaSettings(sampler=sampler, population_size=size)


def _failure(check: Checker, raw: Any) -> FailureSpec:
    d = FailureSpec()
    if not check.mapping("failure", raw, "{max_failures: 2}"):
        return d
    check.unknown_keys("failure", raw, FAILURE_KEYS)
    max_failures = check.integer("failure.max_failures", raw.get("max_failures", d.max_failures), minimum=0)
    limit = raw.get("max_failed_trials")
    if limit is not None:
        number = check.number("failure.max_failed_trials", limit)
        whole = isinstance(number, int) or (isinstance(number, float) and number.is_integer())
        if number is not None and not (0 < number < 1 or (number >= 1 and whole)):
            check.fail(
                "failure.max_failed_trials",
                f"must be a count >= 1 or a fraction of the trials in (0, 1), got {limit!r}",
            )
            number = None
        limit = number
    return FailureSpec(max_failures=max_failures, max_failed_trials=limit)


def _limits(check: Checker, raw: Any) -> LimitsSpec:
    if not check.mapping("limits", raw, "{sweep_s: 3600}"):
        return LimitsSpec()
    check.unknown_keys("limits", raw, LIMITS_KEYS)
    seconds = {
        key: check.at_least(f"limits.{key}", check.number(f"limits.{key}", raw[key]), 0, strictly=True)
        for key in LIMITS_KEYS
        if raw.get(key) is not None
    }
    return LimitsSpec(**seconds)


def _execution(check: Checker, raw: Any) -> ExecutionSpec:
    defaults = ExecutionSpec()
    if not check.mapping("execution", raw, "{gangs: warm}"):
        return defaults
    check.unknown_keys("execution", raw, EXECUTION_KEYS)
    gangs = check.choice("execution.gangs", raw.get("gangs", defaults.gangs), GANG_MODES)
    recycle = check.integer(
        "execution.recycle_after_trials", raw.get("recycle_after_trials", defaults.recycle_after_trials), minimum=1
    )
    given_bundle = raw.get("bundle", defaults.bundle)
    auto = given_bundle == AUTO  # one trial a bundle until the driver has measured (execution.bundle_sizing)
    bundle = defaults.bundle
    if isinstance(given_bundle, int) and not isinstance(given_bundle, bool):
        bundle = check.integer("execution.bundle", given_bundle, minimum=1)
    elif not auto:
        check.fail("execution.bundle", f"must be an integer >= 1 or auto, got {given_bundle!r}")
    positive = {}
    for key in ("max_memory_growth_mib", "collective_timeout_s"):
        given = check.number(f"execution.{key}", raw.get(key, getattr(defaults, key)))
        value = check.at_least(f"execution.{key}", given, 0, strictly=True)
        positive[key] = value if value is not None else getattr(defaults, key)
    return ExecutionSpec(gangs=gangs, recycle_after_trials=recycle, bundle=bundle, bundle_auto=auto, **positive)


def _resources(check: Checker, raw: Any, d: ResourceSpec) -> ResourceSpec:
    """The ``resources`` block over the defaults ``d`` (one rank for a W&B program, as its agent runs it)."""
    if not check.mapping("resources", raw):
        return d
    check.unknown_keys("resources", raw, RESOURCE_KEYS)
    workers = check.integer("resources.workers", raw.get("workers", d.workers), minimum=1)
    cpus = check.at_least(
        "resources.cpus_per_worker",
        check.number("resources.cpus_per_worker", raw.get("cpus_per_worker", d.cpus_per_worker)),
        0,
        strictly=True,
    )
    given_gpus = raw.get("gpus_per_worker", d.gpus_per_worker)
    if given_gpus == AUTO:  # one GPU until the driver has measured the first trial (execution.packing)
        if workers != 1:
            check.fail(
                "resources.gpus_per_worker",
                f"auto packs trials of one rank onto a GPU (NCCL refuses two ranks of one trial on one GPU), "
                f"got resources.workers {workers}; give a number",
            )
        return ResourceSpec(
            workers=workers, cpus_per_worker=cpus or d.cpus_per_worker, gpus_per_worker=1, gpus_auto=True
        )
    gpus = check.at_least("resources.gpus_per_worker", check.number("resources.gpus_per_worker", given_gpus), 0)
    return ResourceSpec(
        workers=workers, cpus_per_worker=cpus or d.cpus_per_worker, gpus_per_worker=gpus or d.gpus_per_worker
    )


def _training(check: Checker, raw: Any, resources: ResourceSpec) -> TrainingSettings:
    if not isinstance(raw, dict):
        check.fail("training", f"must be a mapping, got {raw!r}")
        return TrainingSettings()
    check.unknown_keys("training", raw, TRAINING_KEYS)
    d = TrainingSettings()
    get = raw.get
    precision = check.choice("training.precision", get("precision", d.precision), PRECISIONS)
    scope = check.choice("training.batch_size_scope", get("batch_size_scope", d.batch_size_scope), BATCH_SIZE_SCOPES)
    accum = check.integer("training.grad_accum_steps", get("grad_accum_steps", d.grad_accum_steps), minimum=1)
    lr_scaling = check.choice("training.lr_scaling", get("lr_scaling", d.lr_scaling), LR_SCALINGS)
    warmup = check.number("training.warmup_epochs", get("warmup_epochs", d.warmup_epochs))
    if warmup is not None and warmup < 0:
        check.fail("training.warmup_epochs", f"must be >= 0, got {warmup}")
    warmup_steps = check.integer("training.warmup_steps", get("warmup_steps", d.warmup_steps), minimum=0)
    if warmup and warmup_steps:
        check.fail(
            "training.warmup_steps",
            f"give warmup_epochs or warmup_steps, not both, got {warmup_steps} and warmup_epochs {warmup}",
        )
    clip = check.at_least(
        "training.clip_grad_norm", check.number("training.clip_grad_norm", get("clip_grad_norm", d.clip_grad_norm)), 0
    )
    sync_bn = check.boolean("training.sync_batchnorm", get("sync_batchnorm", d.sync_batchnorm), allow_auto=True)
    if sync_bn is True and resources.gpus_per_worker == 0:
        check.fail(
            "training.sync_batchnorm",
            "true needs GPU ranks (PyTorch's SyncBatchNorm runs only on GPUs; "
            "resources.gpus_per_worker is 0), got true; use auto or false",
        )
    workers = get("num_workers", d.num_workers)
    if workers != AUTO and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 0):
        check.fail("training.num_workers", f"must be auto or an integer >= 0, got {workers!r}")
        workers = AUTO
    pin = check.boolean("training.pin_memory", get("pin_memory", d.pin_memory), allow_auto=True)
    profile = get("profile", False)
    if isinstance(profile, bool):
        profile_steps = DEFAULT_PROFILE_STEPS if profile else 0
    else:
        profile_steps = check.integer("training.profile", profile, minimum=0)
    return TrainingSettings(
        precision=precision,
        batch_size_scope=scope,
        grad_accum_steps=accum,
        lr_scaling=lr_scaling,
        warmup_epochs=warmup or 0,
        warmup_steps=warmup_steps,
        schedule=_schedule(check, get("schedule", d.schedule)),
        clip_grad_norm=clip or 0,
        sync_batchnorm=sync_bn,
        num_workers=workers,
        pin_memory=pin,
        compile=check.boolean("training.compile", get("compile", d.compile)),
        deterministic=check.boolean("training.deterministic", get("deterministic", d.deterministic)),
        profile_steps=profile_steps,
        oom_retry=check.boolean("training.oom_retry", get("oom_retry", d.oom_retry)),
        report_every_steps=check.integer("training.report_every_steps", get("report_every_steps", 0), minimum=0),
        checkpoint_every=check.integer(
            "training.checkpoint_every", get("checkpoint_every", d.checkpoint_every), minimum=0
        ),
        ddp=_ddp(check, get("ddp", {})),
    )


def _wandb(check: Checker, raw: Any, top: dict) -> WandbSettings:
    """The ``wandb`` block; W&B sweep files' top-level ``project`` and ``entity`` count as its own."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        check.fail("wandb", f"must be a mapping, got {raw!r}")
        return WandbSettings()
    check.unknown_keys("wandb", raw, WANDB_KEYS)
    d = WandbSettings()
    names = {}
    for key in ("project", "entity", "group"):
        value = raw.get(key, top.get(key) if key != "group" else None)
        names[key] = None if value is None else (check.string(f"wandb.{key}", value) or None)
    tags = raw.get("tags", [])
    if isinstance(tags, str):
        tags = [tags]
    if not isinstance(tags, list) or not all(isinstance(t, str) and t for t in tags):
        check.fail("wandb.tags", f"must be a list of non-empty strings, got {raw.get('tags')!r}")
        tags = []
    timeout = check.number("wandb.init_timeout", raw.get("init_timeout", d.init_timeout))
    if timeout is not None and timeout <= 0:
        check.fail("wandb.init_timeout", f"must be > 0 seconds, got {timeout}")
    return WandbSettings(
        **names,
        tags=tuple(tags),
        mode=check.choice("wandb.mode", raw.get("mode", d.mode), WANDB_MODES),
        log_checkpoints=check.boolean("wandb.log_checkpoints", raw.get("log_checkpoints", d.log_checkpoints)),
        init_timeout=float(timeout or d.init_timeout),
    )


def _schedule(check: Checker, raw: Any) -> ScheduleSettings:
    """``training.schedule``: a name (``cosine``) or a mapping of :class:`ScheduleSettings`' keys."""
    d = ScheduleSettings()
    if isinstance(raw, ScheduleSettings):  # absent: the default
        return raw
    if isinstance(raw, str):
        raw = {"name": raw}
    if not isinstance(raw, dict):
        check.fail("training.schedule", f"must be a schedule's name ({', '.join(SCHEDULES)}) or a mapping, got {raw!r}")
        return d
    check.unknown_keys("training.schedule", raw, SCHEDULE_KEYS)
    ratio = check.number("training.schedule.min_lr_ratio", raw.get("min_lr_ratio", d.min_lr_ratio))
    if ratio is not None and not 0 <= ratio <= 1:
        check.fail("training.schedule.min_lr_ratio", f"must be in [0, 1], got {ratio}")
    gamma = check.number("training.schedule.gamma", raw.get("gamma", d.gamma))
    gamma = check.at_least("training.schedule.gamma", gamma, 0, strictly=True)
    return ScheduleSettings(
        name=check.choice("training.schedule.name", raw.get("name", d.name), SCHEDULES),
        interval=check.choice("training.schedule.interval", raw.get("interval", d.interval), SCHEDULE_INTERVALS),
        min_lr_ratio=ratio if ratio is not None and 0 <= ratio <= 1 else d.min_lr_ratio,
        every_epochs=check.integer(
            "training.schedule.every_epochs", raw.get("every_epochs", d.every_epochs), minimum=1
        ),
        gamma=gamma if gamma is not None else d.gamma,
    )


def _ddp(check: Checker, raw: Any) -> DDPSettings:
    if not isinstance(raw, dict):
        check.fail("training.ddp", f"must be a mapping, got {raw!r}")
        return DDPSettings()
    check.unknown_keys("training.ddp", raw, DDP_KEYS)
    d = DDPSettings()
    bucket = check.number("training.ddp.bucket_cap_mb", raw.get("bucket_cap_mb", d.bucket_cap_mb))
    if bucket is not None and bucket <= 0:
        check.fail("training.ddp.bucket_cap_mb", f"must be > 0, got {bucket}")
    flags = {key: check.boolean(f"training.ddp.{key}", raw.get(key, getattr(d, key))) for key in DDP_KEYS[1:]}
    return DDPSettings(bucket_cap_mb=bucket or d.bucket_cap_mb, **flags)


def _parameters(check: Checker, raw: Any) -> tuple[ParameterSpec, ...]:
    return read_parameters(check, raw)
