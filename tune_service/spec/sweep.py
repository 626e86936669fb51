"""The sweep spec: a typed, frozen description of one sweep, and ``load_spec`` that builds it.

The file format is a superset of the W&B sweep configuration, so a W&B user's sweep file is already a
valid spec. Our own keys (``task``, ``scheduler``, ``resources``, ``wandb``, ``seed``) add what W&B
leaves to its agent: what to train, early stopping, and the DDP world of each trial.

Validation happens completely before Ray starts and reports every problem at once, each with its dotted
path, the rule and the value (``parameters.lr.min: must be > 0 for log_uniform_values, got 0``).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Hashable, Mapping

import yaml

from tune_service.errors import Problem, SpecError, nearest
from tune_service.spec.parameters import ParameterSpec, parse_parameters
from tune_service.spec.wandb import MODES as WANDB_MODES
from tune_service.spec.wandb import WandbSettings
from tune_service.spec.training import (
    AUTO, BATCH_SIZE_SCOPES, DEFAULT_PROFILE_STEPS, LR_SCALINGS, PRECISIONS, DDPSettings, TrainingSettings,
)

METHODS = ("random", "grid", "bayes", "hyperopt", "bohb")
GOALS = ("minimize", "maximize")
SCHEDULERS = ("asha", "hyperband", "fifo")

#: W&B keys that describe how W&B's own agent launches a program. We read them and say we do not run them.
WANDB_AGENT_KEYS = ("program", "command")
_TOP_LEVEL_KEYS = (
    "name", "description", "method", "metric", "run_cap", "parameters", "early_terminate", "task", "scheduler",
    "resources", "training", "wandb", "seed", "project", "entity", "failure", "execution",
    *WANDB_AGENT_KEYS,
)
_EARLY_TERMINATE_KEYS = ("type", "min_iter", "max_iter", "s", "eta", "strict")
_TRAINING_KEYS = (
    "precision", "batch_size_scope", "grad_accum_steps", "lr_scaling", "warmup_epochs", "sync_batchnorm",
    "num_workers", "pin_memory", "compile", "deterministic", "profile", "oom_retry", "checkpoint_every", "ddp",
)
_WANDB_KEYS = ("project", "entity", "group", "tags", "mode", "log_checkpoints", "init_timeout")
_DDP_KEYS = ("bucket_cap_mb", "gradient_as_bucket_view", "static_graph", "find_unused_parameters")

DEFAULT_RUN_CAP = 10
DEFAULT_METRIC = {"name": "val_loss", "goal": "minimize"}
MAX_SPEC_BYTES = 1_000_000


@dataclass(frozen=True)
class MetricSpec:
    """What the sweep optimises. With ``target``, no new trial starts once a result reaches it (W&B's
    ``metric.target``); running trials finish."""

    name: str
    goal: str  # "minimize" | "maximize"
    target: float | None = None

    @property
    def mode(self) -> str:
        """Ray Tune's spelling of the goal."""
        return "min" if self.goal == "minimize" else "max"


@dataclass(frozen=True)
class SchedulerSpec:
    """Early stopping. ``max_t`` is every trial's epoch budget (also for FIFO)."""

    type: str
    max_t: int = 10
    grace_period: int = 1
    reduction_factor: float = 3


@dataclass(frozen=True)
class ResourceSpec:
    """One trial's DDP world: ``workers`` ranks, each with these CPUs and GPUs."""

    workers: int = 2
    cpus_per_worker: float = 1
    gpus_per_worker: float = 0


@dataclass(frozen=True)
class FailureSpec:
    """What happens when a trial's DDP job fails (a rank killed, a node lost): its worker group is
    restarted from the trial's latest checkpoint up to ``max_failures`` times, then the trial fails."""

    max_failures: int = 0


GANG_MODES = ("warm", "fresh")


@dataclass(frozen=True)
class ExecutionSpec:
    """How trials run on their ranks (the ``execution:`` block).

    - ``gangs``: ``warm`` (default) keeps each concurrency slot's DDP ranks up across trials, so a trial
      starts on ranks that already have torch imported, their process group set up and their data sets
      built; ``fresh`` starts a new Ray Train run for every trial (for a task that leaks global state).
      A plain ``train_loop_per_worker`` always runs fresh.
    - ``recycle_after_trials``: a warm gang is rebuilt after this many trials.
    - ``max_memory_growth_mib``: a warm gang is rebuilt when a rank's resident memory has grown by more
      than this since its first trial ended.
    - ``collective_timeout_s``: how long a rank waits in a collective for its peers before the gang is
      taken as broken (a hung or lost rank): its trial fails and retries under ``failure.max_failures``.
    """

    gangs: str = "warm"
    recycle_after_trials: int = 100
    max_memory_growth_mib: float = 1024
    collective_timeout_s: float = 600


@dataclass(frozen=True)
class SweepSpec:
    """A fully validated sweep. Build it with :func:`load_spec`; never mutate it."""

    name: str
    method: str
    metric: MetricSpec
    run_cap: int | None
    parameters: tuple[ParameterSpec, ...]
    task: str
    scheduler: SchedulerSpec
    resources: ResourceSpec
    training: TrainingSettings = field(default_factory=TrainingSettings)
    seed: int = 0
    description: str = ""
    wandb: WandbSettings = field(default_factory=WandbSettings)
    failure: FailureSpec = field(default_factory=FailureSpec)
    execution: ExecutionSpec = field(default_factory=ExecutionSpec)
    notes: tuple[str, ...] = ()
    #: The document this spec was validated from (overrides applied): what a resumed sweep reloads.
    source: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def searcher(self) -> str:
        """The search algorithm's canonical name (``bayes`` is hyperopt TPE)."""
        return "hyperopt" if self.method == "bayes" else self.method

    def parameter(self, name: str) -> ParameterSpec:
        for p in self.parameters:
            if p.name == name:
                return p
        raise KeyError(name)


# --------------------------------------------------------------------------------------------------
# Loading


def load_spec(source: str | Path | Mapping[str, Any], overrides: Mapping[str, Any] | None = None) -> SweepSpec:
    """Read, override and validate a sweep spec.

    Args:
        source: a path to a YAML file, an inline YAML or JSON mapping (text starting with ``{``), or an
            already parsed mapping (a Python dict).
        overrides: dotted keys set on the raw document before validation, e.g.
            ``{"run_cap": 4, "scheduler.max_t": 3}`` (what ``tune-run --set`` passes).

    Returns:
        The validated, frozen :class:`SweepSpec`.

    Raises:
        SpecError: with every problem found, each naming its dotted path, the rule and the value.
    """
    raw, origin = _read(source)
    raw = copy.deepcopy(raw)
    for key, value in (overrides or {}).items():
        _set_dotted(raw, key, value)
    return _Validator(raw, default_name=origin).spec()


def parse_override(text: str) -> tuple[str, Any]:
    """Parse one ``KEY=VALUE`` of ``--set``; the value is read as YAML (``4`` is an int, ``a`` a str)."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise SpecError([Problem("--set", f"must be KEY=VALUE, got {text!r}")])
    try:
        parsed = yaml.safe_load(value) if value.strip() else ""
    except yaml.YAMLError:
        parsed = value
    return key.strip(), parsed


def _read(source: str | Path | Mapping[str, Any]) -> tuple[dict, str]:
    if isinstance(source, Mapping):
        return dict(source), "sweep"
    if isinstance(source, str) and source.lstrip().startswith("{"):
        # An inline mapping (YAML flow style, so JSON too): how a submitted sweep's spec travels in its
        # Ray Job's entrypoint, where no file of the submitter's exists.
        return _parse(source, "inline spec"), "sweep"
    path = Path(source)
    if not path.is_file():
        raise SpecError([Problem("", f"spec file not found: {str(path)!r}")])
    if path.stat().st_size > MAX_SPEC_BYTES:
        raise SpecError([Problem("", f"spec file must be at most {MAX_SPEC_BYTES} bytes, got {path.stat().st_size}")])
    return _parse(path.read_text(encoding="utf-8"), path.name), path.stem


def _parse(text: str, label: str) -> dict:
    """The mapping a spec's YAML text holds; ``label`` names the text in errors (its file name)."""
    if len(text.encode("utf-8")) > MAX_SPEC_BYTES:
        raise SpecError([Problem("", f"{label} must be at most {MAX_SPEC_BYTES} bytes, got {len(text.encode())}")])
    try:
        doc = yaml.load(text, Loader=_SpecLoader)  # a SafeLoader: a spec must not be able to run code
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        reason = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise SpecError([Problem("", f"{label}: invalid YAML{where}: {reason}")]) from None
    except RecursionError:
        raise SpecError([Problem("", f"{label}: document is nested too deeply")]) from None
    if not isinstance(doc, dict):
        raise SpecError([Problem("", f"{label}: must be a mapping of keys to values, got {type(doc).__name__}")])
    return doc


class _SpecLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a key given twice in one mapping (YAML would keep the last one
    silently, and a sweep would run with half of what its author wrote)."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, Hashable):
                continue  # the base loader reports an unhashable key itself
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep)


def _set_dotted(doc: dict, dotted: str, value: Any) -> None:
    node = doc
    parts = dotted.split(".")
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[parts[-1]] = value


# --------------------------------------------------------------------------------------------------
# Validation


class _Validator:
    """Walks the raw document once, collecting every problem, and builds the frozen spec."""

    def __init__(self, raw: dict, default_name: str):
        self.raw = raw
        self.default_name = default_name
        self.problems: list[Problem] = []
        self.notes: list[str] = []

    def fail(self, path: str, message: str) -> None:
        self.problems.append(Problem(path, message))

    def spec(self) -> SweepSpec:
        raw = self.raw
        self._unknown_keys("", raw, _TOP_LEVEL_KEYS)
        for key in WANDB_AGENT_KEYS:
            if key in raw:
                self.notes.append(f"{key}: read but not run; tune-service trains the spec's `task` instead")

        name = self._string("name", raw.get("name", self.default_name))
        description = self._string("description", raw.get("description", ""))
        method = self._choice("method", raw.get("method", "random"), METHODS)
        metric = self._metric(raw.get("metric", DEFAULT_METRIC))
        parameters = self._parameters(raw.get("parameters"))
        task = self._task(raw.get("task", "digits"))
        scheduler = self._scheduler(self._early_terminate(raw.get("early_terminate"), raw.get("scheduler"), method),
                                    method)
        resources = self._resources(raw.get("resources", {}))
        training = self._training(raw.get("training", {}), resources)
        seed = self._int("seed", raw.get("seed", 0), minimum=0)
        wandb = self._wandb(raw.get("wandb", {}), raw)
        run_cap = self._run_cap(raw.get("run_cap"), method)
        failure = self._failure(raw.get("failure", {}))
        execution = self._execution(raw.get("execution", {}))
        if method in ("bayes", "hyperopt", "bohb") and parameters and not any(p.is_searched for p in parameters):
            self.fail("parameters", f"method {method} needs at least one searched parameter (`values` or a "
                                    f"`distribution`), got only constants; use method random or grid")

        if self.problems:
            raise SpecError(self.problems)
        return SweepSpec(
            name=name, method=method, metric=metric, run_cap=run_cap, parameters=parameters,
            task=task, scheduler=scheduler, resources=resources, training=training, seed=seed,
            description=description, wandb=wandb, failure=failure, execution=execution, notes=tuple(self.notes), source=copy.deepcopy(raw),
        )

    # -- scalars ----------------------------------------------------------------------------------

    def _unknown_keys(self, path: str, mapping: dict, allowed: tuple[str, ...]) -> bool:
        """Report keys not in ``allowed``; True if there were any."""
        unknown = [key for key in mapping if key not in allowed]
        for key in unknown:
            where = f"{path}.{key}" if path else str(key)
            self.fail(where, f"unknown key{nearest(key, allowed)}; valid keys: {', '.join(allowed)}")
        return bool(unknown)

    def _string(self, path: str, value: Any) -> str:
        if not isinstance(value, str):
            self.fail(path, f"must be a string, got {value!r}")
            return ""
        return value

    def _choice(self, path: str, value: Any, choices: tuple[str, ...]) -> str:
        if value not in choices:
            self.fail(path, f"must be one of {', '.join(choices)}, got {value!r}{nearest(value, choices)}")
            return choices[0]
        return value

    def _number(self, path: str, value: Any) -> float | int | None:
        """A real number. YAML 1.1 reads ``1e-4`` as a string, so numeric strings are accepted."""
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                pass
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            self.fail(path, f"must be a finite number, got {value!r}")
            return None
        return value

    def _bool(self, path: str, value: Any, allow_auto: bool = False) -> bool | str:
        if isinstance(value, bool) or (allow_auto and value == AUTO):
            return value
        self.fail(path, f"must be {'auto, ' if allow_auto else ''}true or false, got {value!r}")
        return False

    def _int(self, path: str, value: Any, minimum: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(path, f"must be an integer, got {value!r}")
            return minimum
        if value < minimum:
            self.fail(path, f"must be >= {minimum}, got {value}")
        return value

    # -- sections ---------------------------------------------------------------------------------

    def _metric(self, raw: Any) -> MetricSpec:
        if not isinstance(raw, dict):
            self.fail("metric", f"must be a mapping with name and goal, got {raw!r}")
            return MetricSpec(**DEFAULT_METRIC)
        self._unknown_keys("metric", raw, ("name", "goal", "target"))
        name = self._string("metric.name", raw.get("name", DEFAULT_METRIC["name"]))
        goal = self._choice("metric.goal", raw.get("goal", "minimize"), GOALS)
        target = self._number("metric.target", raw["target"]) if "target" in raw else None
        return MetricSpec(name=name, goal=goal, target=target)

    def _early_terminate(self, raw: Any, scheduler: Any, method: str) -> Any:
        """W&B's ``early_terminate: {type: hyperband, ...}`` as our scheduler keys, merged into ``scheduler``.

        ``min_iter`` (or ``max_iter / eta**s``) is the first rung, so ASHA's ``grace_period``; ``eta`` its
        ``reduction_factor``; ``max_iter`` the epoch budget ``max_t`` unless ``scheduler.max_t`` is given.
        A key that both blocks set is refused rather than one silently winning.
        """
        if raw is None:
            return scheduler
        if not isinstance(raw, dict):
            self.fail("early_terminate", f"must be a mapping such as {{type: hyperband, min_iter: 3}}, got {raw!r}")
            return scheduler
        if self._unknown_keys("early_terminate", raw, _EARLY_TERMINATE_KEYS):
            return scheduler
        self._choice("early_terminate.type", raw.get("type"), ("hyperband",))
        eta = self._number("early_terminate.eta", raw.get("eta", 3))
        keys: dict[str, Any] = {"type": "hyperband" if method == "bohb" else "asha"}
        if eta is not None:
            keys["reduction_factor"] = eta
        if "min_iter" in raw:
            keys["grace_period"] = self._int("early_terminate.min_iter", raw["min_iter"], minimum=1)
        elif "max_iter" in raw and "s" in raw:
            max_iter = self._int("early_terminate.max_iter", raw["max_iter"], minimum=1)
            steps = self._int("early_terminate.s", raw["s"], minimum=0)
            if eta is not None and eta > 1:
                keys["grace_period"] = max(1, int(round(max_iter / eta ** steps)))
        else:
            self.fail("early_terminate", "hyperband needs min_iter, or max_iter and s")
        if "max_iter" in raw:
            keys["max_t"] = raw["max_iter"]
        elif "grace_period" in keys and eta is not None and eta > 1:
            # W&B's hyperband with only min_iter has no end: its brackets go on at min_iter * eta**k
            # for as long as the program runs. Three of them give the epoch budget, unless
            # scheduler.max_t sets it.
            keys["max_t"] = int(math.ceil(keys["grace_period"] * eta ** 3 - 1e-9))
        if method == "bohb":
            keys.pop("grace_period", None)  # HyperBand-for-BOHB derives its brackets from max_t and eta
        if "strict" in raw:
            self.notes.append("early_terminate.strict: read; ASHA's asynchronous rule decides which trials stop")
        mapped = ", ".join(f"{k}: {v:g}" if isinstance(v, float) else f"{k}: {v}" for k, v in keys.items())
        self.notes.append(f"early_terminate: W&B hyperband read as scheduler {{{mapped}}}")
        if scheduler is None:
            return keys
        if not isinstance(scheduler, dict):
            return scheduler  # _scheduler reports it
        for key, value in keys.items():
            if key in scheduler and scheduler[key] != value and not (key == "max_t"):
                self.fail(f"scheduler.{key}", f"conflicts with early_terminate (which sets it to {value!r}), "
                                              f"got {scheduler[key]!r}; give it in one place")
        return {**keys, **scheduler}

    def _task(self, raw: Any) -> str:
        if not isinstance(raw, str) or not raw.strip():
            self.fail("task", f"must be a built-in task name or 'package.module:attr', got {raw!r}")
            return ""
        return raw.strip()

    def _run_cap(self, raw: Any, method: str) -> int | None:
        if raw is None:
            return None if method == "grid" else DEFAULT_RUN_CAP
        return self._int("run_cap", raw, minimum=1)

    def _scheduler(self, raw: Any, method: str) -> SchedulerSpec:
        default_type = "hyperband" if method == "bohb" else "asha"
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            self.fail("scheduler", f"must be a mapping, got {raw!r}")
            return SchedulerSpec(type=default_type)
        self._unknown_keys("scheduler", raw, ("type", "max_t", "grace_period", "reduction_factor"))
        kind = self._choice("scheduler.type", raw.get("type", default_type), SCHEDULERS)
        if method == "bohb" and kind != "hyperband":
            self.fail("scheduler.type", f"must be hyperband when method is bohb (BOHB's brackets need "
                                        f"HyperBand-for-BOHB), got {kind!r}")
        max_t = self._int("scheduler.max_t", raw.get("max_t", 10), minimum=1)
        grace = self._int("scheduler.grace_period", raw.get("grace_period", 1), minimum=1)
        if max_t >= 1 and grace > max_t:  # an invalid max_t is reported once, above
            self.fail("scheduler.grace_period", f"must be <= scheduler.max_t ({max_t}), got {grace}")
        eta = self._number("scheduler.reduction_factor", raw.get("reduction_factor", 3))
        if eta is not None and eta <= 1:
            self.fail("scheduler.reduction_factor", f"must be > 1, got {eta}")
        return SchedulerSpec(type=kind, max_t=max_t, grace_period=grace, reduction_factor=eta or 3)

    def _failure(self, raw: Any) -> FailureSpec:
        if not isinstance(raw, dict):
            self.fail("failure", f"must be a mapping such as {{max_failures: 2}}, got {raw!r}")
            return FailureSpec()
        self._unknown_keys("failure", raw, ("max_failures",))
        return FailureSpec(max_failures=self._int("failure.max_failures", raw.get("max_failures", 0), minimum=0))

    def _execution(self, raw: Any) -> ExecutionSpec:
        if not isinstance(raw, dict):
            self.fail("execution", f"must be a mapping such as {{gangs: warm}}, got {raw!r}")
            return ExecutionSpec()
        defaults = ExecutionSpec()
        self._unknown_keys("execution", raw, tuple(f.name for f in fields(ExecutionSpec)))
        gangs = self._choice("execution.gangs", raw.get("gangs", defaults.gangs), GANG_MODES)
        recycle = self._int("execution.recycle_after_trials",
                            raw.get("recycle_after_trials", defaults.recycle_after_trials), minimum=1)
        positive = {}
        for key in ("max_memory_growth_mib", "collective_timeout_s"):
            value = self._number(f"execution.{key}", raw.get(key, getattr(defaults, key)))
            if value is not None and value <= 0:
                self.fail(f"execution.{key}", f"must be > 0, got {value}")
            positive[key] = value if value is not None and value > 0 else getattr(defaults, key)
        return ExecutionSpec(gangs=gangs, recycle_after_trials=recycle, **positive)

    def _resources(self, raw: Any) -> ResourceSpec:
        if not isinstance(raw, dict):
            self.fail("resources", f"must be a mapping, got {raw!r}")
            return ResourceSpec()
        self._unknown_keys("resources", raw, ("workers", "cpus_per_worker", "gpus_per_worker"))
        workers = self._int("resources.workers", raw.get("workers", 2), minimum=1)
        cpus = self._number("resources.cpus_per_worker", raw.get("cpus_per_worker", 1))
        if cpus is not None and cpus <= 0:
            self.fail("resources.cpus_per_worker", f"must be > 0, got {cpus}")
        gpus = self._number("resources.gpus_per_worker", raw.get("gpus_per_worker", 0))
        if gpus is not None and gpus < 0:
            self.fail("resources.gpus_per_worker", f"must be >= 0, got {gpus}")
        return ResourceSpec(workers=workers, cpus_per_worker=cpus or 1, gpus_per_worker=gpus or 0)

    def _training(self, raw: Any, resources: ResourceSpec) -> TrainingSettings:
        if not isinstance(raw, dict):
            self.fail("training", f"must be a mapping, got {raw!r}")
            return TrainingSettings()
        self._unknown_keys("training", raw, _TRAINING_KEYS)
        d = TrainingSettings()
        get = raw.get
        precision = self._choice("training.precision", get("precision", d.precision), PRECISIONS)
        scope = self._choice("training.batch_size_scope", get("batch_size_scope", d.batch_size_scope), BATCH_SIZE_SCOPES)
        accum = self._int("training.grad_accum_steps", get("grad_accum_steps", d.grad_accum_steps), minimum=1)
        lr_scaling = self._choice("training.lr_scaling", get("lr_scaling", d.lr_scaling), LR_SCALINGS)
        warmup = self._number("training.warmup_epochs", get("warmup_epochs", d.warmup_epochs))
        if warmup is not None and warmup < 0:
            self.fail("training.warmup_epochs", f"must be >= 0, got {warmup}")
        sync_bn = self._bool("training.sync_batchnorm", get("sync_batchnorm", d.sync_batchnorm), allow_auto=True)
        if sync_bn is True and resources.gpus_per_worker == 0:
            self.fail("training.sync_batchnorm", "true needs GPU ranks (PyTorch's SyncBatchNorm runs only on GPUs; "
                                                 "resources.gpus_per_worker is 0), got true; use auto or false")
        workers = get("num_workers", d.num_workers)
        if workers != AUTO and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 0):
            self.fail("training.num_workers", f"must be auto or an integer >= 0, got {workers!r}")
            workers = AUTO
        pin = self._bool("training.pin_memory", get("pin_memory", d.pin_memory), allow_auto=True)
        profile = get("profile", False)
        if isinstance(profile, bool):
            profile_steps = DEFAULT_PROFILE_STEPS if profile else 0
        else:
            profile_steps = self._int("training.profile", profile, minimum=0)
        return TrainingSettings(
            precision=precision, batch_size_scope=scope, grad_accum_steps=accum, lr_scaling=lr_scaling,
            warmup_epochs=warmup or 0, sync_batchnorm=sync_bn, num_workers=workers, pin_memory=pin,
            compile=self._bool("training.compile", get("compile", d.compile)),
            deterministic=self._bool("training.deterministic", get("deterministic", d.deterministic)),
            profile_steps=profile_steps,
            oom_retry=self._bool("training.oom_retry", get("oom_retry", d.oom_retry)),
            checkpoint_every=self._int("training.checkpoint_every", get("checkpoint_every", d.checkpoint_every), minimum=0),
            ddp=self._ddp(get("ddp", {})),
        )

    def _wandb(self, raw: Any, top: dict) -> WandbSettings:
        """The ``wandb`` block; W&B sweep files' top-level ``project`` and ``entity`` count as its own."""
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            self.fail("wandb", f"must be a mapping, got {raw!r}")
            return WandbSettings()
        self._unknown_keys("wandb", raw, _WANDB_KEYS)
        d = WandbSettings()
        names = {}
        for key in ("project", "entity", "group"):
            value = raw.get(key, top.get(key) if key != "group" else None)
            names[key] = None if value is None else (self._string(f"wandb.{key}", value) or None)
        tags = raw.get("tags", [])
        if isinstance(tags, str):
            tags = [tags]
        if not isinstance(tags, list) or not all(isinstance(t, str) and t for t in tags):
            self.fail("wandb.tags", f"must be a list of non-empty strings, got {raw.get('tags')!r}")
            tags = []
        timeout = self._number("wandb.init_timeout", raw.get("init_timeout", d.init_timeout))
        if timeout is not None and timeout <= 0:
            self.fail("wandb.init_timeout", f"must be > 0 seconds, got {timeout}")
        return WandbSettings(
            **names, tags=tuple(tags), mode=self._choice("wandb.mode", raw.get("mode", d.mode), WANDB_MODES),
            log_checkpoints=self._bool("wandb.log_checkpoints", raw.get("log_checkpoints", d.log_checkpoints)),
            init_timeout=float(timeout or d.init_timeout),
        )

    def _ddp(self, raw: Any) -> DDPSettings:
        if not isinstance(raw, dict):
            self.fail("training.ddp", f"must be a mapping, got {raw!r}")
            return DDPSettings()
        self._unknown_keys("training.ddp", raw, _DDP_KEYS)
        d = DDPSettings()
        bucket = self._number("training.ddp.bucket_cap_mb", raw.get("bucket_cap_mb", d.bucket_cap_mb))
        if bucket is not None and bucket <= 0:
            self.fail("training.ddp.bucket_cap_mb", f"must be > 0, got {bucket}")
        flags = {key: self._bool(f"training.ddp.{key}", raw.get(key, getattr(d, key))) for key in _DDP_KEYS[1:]}
        return DDPSettings(bucket_cap_mb=bucket or d.bucket_cap_mb, **flags)

    def _parameters(self, raw: Any) -> tuple[ParameterSpec, ...]:
        return parse_parameters(raw, self.fail, self.notes.append, self._number)
