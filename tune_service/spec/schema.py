"""The spec file's JSON Schema (draft 2020-12): what ``tune-run schema`` prints, for completion and checks of
a spec's YAML in an editor, and what ``docs/spec-reference.md`` is generated from
(:mod:`~tune_service.spec.reference`).

The schema is built from the spec's own definitions, so that a key or a choice cannot be added to the
spec and left out of it: the keys of every mapping are :mod:`~tune_service.spec.validation`'s
(``SECTION_KEYS``), the choices the spec's constants (``METHODS``, ``GOALS``, ``SCHEDULERS``,
``GANG_MODES``, ``PRECISIONS``, ..., ``DISTRIBUTIONS`` and ``FORM_KEYS``), the defaults those of the spec
validated from an empty document (each section's dataclass defaults). What is written here is each key's
type and bounds and its one-sentence description; a key without them raises :class:`KeyError` naming
it, so a new key fails the tests until it is described.

The schema states less than validation checks (``grace_period <= max_t``, probabilities that sum to 1,
conditions naming an earlier parameter, a searcher that can express each form): ``tune-run dry-run``
is the full check. It is meant never to refuse a spec that validation accepts; the corners where it
does: ``distribution: null`` (validation infers the form), and a top-level ``project`` or ``entity`` that
is not a string while ``wandb:`` gives its own (validation then ignores it). Where it accepts more: an
integer written ``2.0`` (JSON Schema's integers include it), and infinite numbers.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any, Callable, Mapping

from tune_service.spec.objectives import MAX_OBJECTIVES, MIN_OBJECTIVES
from tune_service.spec.parameter_reading import read_parameters
from tune_service.spec.parameters import DISTRIBUTIONS, EXPONENT_FORMS, FORM_KEYS, POSITIVE_BOUNDS, RANGE_FORMS
from tune_service.spec.priors import CONFIDENCES
from tune_service.spec.rules import Checker
from tune_service.spec.sweep import (
    GANG_MODES,
    GOALS,
    METHODS,
    OPTUNA_SAMPLERS,
    SCHEDULERS,
    TIME_UNITS,
    WANDB_NOTED_KEYS,
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
)
from tune_service.spec.validation import SECTION_KEYS, validate
from tune_service.spec.wandb import MODES as WANDB_MODES
from tune_service.spec.wandb_engines import CUSTOM_METHOD, ENGINE_KEYS, ENGINES

DIALECT = "https://json-schema.org/draft/2020-12/schema"

#: A number as validation reads one: YAML 1.1 (PyYAML) reads ``1e-4`` as a string, so numeric strings count.
NUMBER_PATTERN = r"^\s*[+-]?(\d(_?\d)*(\.(\d(_?\d)*)?)?|\.\d(_?\d)*)([eE][+-]?\d(_?\d)*)?\s*$"
_NUMBER_REF = "#/$defs/number"
_PARAMETER_REF = "#/$defs/parameter"
_PARAMETERS_REF = "#/$defs/parameters"


def _number(**bounds: Any) -> dict:
    return {"$ref": _NUMBER_REF, **bounds}


def _integer(minimum: int) -> dict:
    return {"type": "integer", "minimum": minimum}


def _choice(choices: tuple[str, ...]) -> dict:
    return {"type": "string", "enum": list(choices)}


def _boolean(auto: bool = False) -> dict:
    return {"anyOf": [{"type": "boolean"}, {"const": AUTO}]} if auto else {"type": "boolean"}


def _nullable(schema: dict) -> dict:
    return {"anyOf": [schema, {"type": "null"}]}


_STRING = {"type": "string"}
_NAME = _nullable(_STRING)  # a wandb name: null (or "") leaves it to its default
_ANY: dict = {}

#: Each mapping of the document that may also be null (read as empty).
_NULLABLE_SECTIONS = ("scheduler", "wandb", "early_terminate", "parameters")

#: The type and bounds of every key that is not a mapping of keys, by dotted path.
TYPES: dict[str, dict] = {
    "name": _STRING,
    "description": _STRING,
    "method": _choice((*METHODS, CUSTOM_METHOD)),
    "run_cap": _nullable(_integer(1)),
    "points_to_evaluate": {"type": "array", "minItems": 1, "items": {"type": "object", "minProperties": 1}},
    "warm_start": {"type": "string", "pattern": r"\S"},
    "constraints": {
        "type": "array",
        "minItems": 1,
        "items": {
            "type": "object",
            "required": ["name"],
            "anyOf": [{"required": ["min"]}, {"required": ["max"]}],
            "properties": {
                "name": {"type": "string", "description": "A metric every report holds (not an objective)."},
                "min": {"$ref": _NUMBER_REF, "description": "Its smallest feasible value (inclusive)."},
                "max": {"$ref": _NUMBER_REF, "description": "Its largest feasible value (inclusive)."},
            },
            "additionalProperties": False,
        },
    },
    "priors": {
        "type": "object",
        "minProperties": 1,
        "additionalProperties": {
            "anyOf": [
                {"not": {"type": "object"}},
                {
                    "type": "object",
                    "required": ["value"],
                    "properties": {
                        "value": {"description": "The most likely value: one the parameter can take."},
                        "confidence": {
                            **_choice(tuple(CONFIDENCES)),
                            "description": "How sure: low, medium or high; default medium. Over a range, a normal "
                            "of spread 0.5, 0.25 or 0.125 of it; over values, 1.1, 1.75 or 2.5 times as likely as "
                            "each other.",
                        },
                    },
                    "additionalProperties": False,
                },
            ]
        },
    },
    "task": {"type": "string", "pattern": r"\S"},
    "seed": _integer(0),
    "project": _NAME,
    "entity": _NAME,
    "program": _ANY,
    "command": _ANY,
    **{key: _ANY for key in WANDB_NOTED_KEYS},
    "metric.name": _STRING,
    "metric.goal": _choice(GOALS),
    "metric.target": _number(),
    "metric.impute": _choice(("latest", "best", "worst")),
    "metric.impute_while_running": _choice(("latest", "best", "worst", "false")),
    "scheduler.engine": _choice(ENGINES),
    "optuna.sampler": _choice(OPTUNA_SAMPLERS),
    "optuna.population_size": _integer(2),
    "scheduler.source": _STRING,
    "scheduler.optimizer": _STRING,
    "scheduler.search_space": _STRING,
    "early_terminate.type": {"const": "hyperband"},
    "early_terminate.min_iter": _integer(1),
    "early_terminate.max_iter": _integer(1),
    "early_terminate.s": _integer(0),
    "early_terminate.eta": _number(exclusiveMinimum=1),
    "early_terminate.strict": _ANY,
    "scheduler.type": _choice(SCHEDULERS),
    "scheduler.max_t": _integer(1),
    "scheduler.grace_period": _integer(1),
    "scheduler.reduction_factor": _number(exclusiveMinimum=1),
    "scheduler.time_unit": _choice(TIME_UNITS),
    "scheduler.perturbation_interval": _integer(1),
    "scheduler.quantile_fraction": _number(exclusiveMinimum=0, maximum=0.5),
    "scheduler.resample_probability": _number(minimum=0, maximum=1),
    "scheduler.perturbation_factors": {"type": "array", "minItems": 1, "items": _number(exclusiveMinimum=0)},
    "scheduler.mutate": {"type": "array", "minItems": 1, "uniqueItems": True, "items": _STRING},
    "scheduler.schedule": {
        "type": "array",
        "items": {
            "type": "object",
            "required": ["epoch", "config"],
            "additionalProperties": False,
            "properties": {
                "epoch": {**_integer(1), "description": "The epoch after which the trial changes."},
                "config": {
                    "type": "object",
                    "minProperties": 1,
                    "description": "The parameters it changes, by name (dotted for nested ones), to their values.",
                },
            },
        },
    },
    "resources.workers": _integer(1),
    "resources.cpus_per_worker": _number(exclusiveMinimum=0),
    "resources.gpus_per_worker": {"anyOf": [_number(minimum=0), {"const": AUTO}]},
    "training.precision": _choice(PRECISIONS),
    "training.batch_size_scope": _choice(BATCH_SIZE_SCOPES),
    "training.grad_accum_steps": _integer(1),
    "training.lr_scaling": _choice(LR_SCALINGS),
    "training.warmup_epochs": _number(minimum=0),
    "training.warmup_steps": _integer(0),
    "training.clip_grad_norm": _number(minimum=0),
    "training.schedule.name": _choice(SCHEDULES),
    "training.schedule.interval": _choice(SCHEDULE_INTERVALS),
    "training.schedule.min_lr_ratio": _number(minimum=0, maximum=1),
    "training.schedule.every_epochs": _integer(1),
    "training.schedule.gamma": _number(exclusiveMinimum=0),
    "training.sync_batchnorm": _boolean(auto=True),
    "training.num_workers": {"anyOf": [_integer(0), {"const": AUTO}]},
    "training.pin_memory": _boolean(auto=True),
    "training.compile": _boolean(),
    "training.deterministic": _boolean(),
    "training.profile": {"anyOf": [{"type": "boolean"}, _integer(0)]},
    "training.oom_retry": _boolean(),
    "training.report_every_steps": _integer(0),
    "training.checkpoint_every": _integer(0),
    "training.ddp.bucket_cap_mb": _number(exclusiveMinimum=0),
    "training.ddp.gradient_as_bucket_view": _boolean(),
    "training.ddp.static_graph": _boolean(),
    "training.ddp.find_unused_parameters": _boolean(),
    "wandb.project": _NAME,
    "wandb.entity": _NAME,
    "wandb.group": _NAME,
    "wandb.tags": {
        "anyOf": [{"type": "string", "minLength": 1}, {"type": "array", "items": {"type": "string", "minLength": 1}}]
    },
    "wandb.mode": _choice(WANDB_MODES),
    "wandb.log_checkpoints": _boolean(),
    "wandb.init_timeout": _number(exclusiveMinimum=0),
    "failure.max_failures": _integer(0),
    "failure.max_failed_trials": _nullable({"anyOf": [_integer(1), _number(exclusiveMinimum=0, exclusiveMaximum=1)]}),
    "limits.sweep_s": _nullable(_number(exclusiveMinimum=0)),
    "limits.trial_s": _nullable(_number(exclusiveMinimum=0)),
    "limits.progress_s": _nullable(_number(exclusiveMinimum=0)),
    "execution.gangs": _choice(GANG_MODES),
    "execution.recycle_after_trials": _integer(1),
    "execution.max_memory_growth_mib": _number(exclusiveMinimum=0),
    "execution.collective_timeout_s": _number(exclusiveMinimum=0),
    "execution.bundle": {"anyOf": [_integer(1), {"const": AUTO}]},
}

#: One sentence per key (its meaning and unit), by dotted path; sections included.
DESCRIPTIONS: dict[str, str] = {
    "name": "The sweep's name, which names its experiment directory and, by default, its wandb project; "
    "defaults to the spec file's name without its extension.",
    "description": "Free text about the sweep, shown with its plan.",
    "method": "The search algorithm: random, grid (every combination), bayes (hyperopt TPE, as W&B's bayes), "
    "hyperopt (the same), bohb (BOHB, run with HyperBand-for-BOHB), optuna (Optuna's TPE, the "
    "`optuna` extra) or custom (W&B's method for a search its scheduler engine runs: Optuna's TPE here).",
    "metric": "What the sweep optimises: a metric that every epoch reports, and which way is better.",
    "metrics": "W&B's several objectives, instead of metric: 2 to 4 entries, each as metric is written; the "
    "results show the Pareto front. Methods custom, optuna (Optuna's multi-objective TPE or NSGA-II), random "
    "and grid; schedulers asha and hyperband (compare trials by Pareto order) and fifo.",
    "constraints": "Bounds on reported metrics, each {name, min, max} (a bound or both): a trial whose last "
    "report breaks one is infeasible, never the best or on the Pareto front, and Optuna's samplers are told "
    "each trial's violations, as Optuna's constraints say.",
    "run_cap": "The number of trials to run; with method grid the default is the whole grid.",
    "points_to_evaluate": "Configs to try first, each a mapping of every searched parameter (active under it) to "
    "a value it can take; they run as the sweep's first trials, count toward run_cap, and the searcher learns "
    "from them as from its own.",
    "warm_start": "An earlier sweep's experiment (its directory, or its s3:// URI): its finished trials are told "
    "to the searcher (bayes, optuna or bohb) before the first trial, as if it had run them; each earlier "
    "trial whose values lie in this sweep's space and that reported the metric (every objective), the others "
    "left out. The earlier sweep optimised the same objectives, each in the same direction.",
    "priors": "What you believe of some searched parameters, by name (dotted for nested ones): a most likely "
    "value, or `{value: V, confidence: low|medium|high}` (default medium); random, bayes, optuna and bohb draw "
    "more of their configs near it early on, less as the sweep learns. A block of its own, so `parameters:` "
    "stays W&B's grammar.",
    "parameters": "The hyperparameters, by name, in W&B's parameter grammar (see Parameters); a `parameters:` "
    "group or a dotted name nests them in each trial's config.",
    "early_terminate": "W&B's early stopping (`type: hyperband`), read as the scheduler it maps to "
    "(ASHA, or HyperBand-for-BOHB with method bohb).",
    "task": "What each trial trains: a built-in task's name, or `package.module:attr` naming a Task or a "
    "`train_loop_per_worker` function.",
    "scheduler": "Early stopping of trials, and every trial's epoch budget; or W&B's scheduler block "
    "(`engine: wandb | optuna | ax`), told apart by its keys.",
    "resources": "One trial's DDP world: its number of ranks and each rank's CPUs and GPUs.",
    "training": "How the shared train loop trains every trial: settings of the sweep, never searched.",
    "wandb": "Where and how each trial is logged, as one wandb run grouped by sweep.",
    "seed": "The sweep's random seed, for the searcher's samples and every trial's training.",
    "project": "A W&B sweep file's wandb project: the same as `wandb.project`, which wins when both are given.",
    "entity": "A W&B sweep file's wandb entity: the same as `wandb.entity`, which wins when both are given.",
    "failure": "What happens when a trial's DDP job fails (a rank killed, a node lost).",
    "execution": "How trials run on their ranks: warm gangs reused across trials, or a fresh Ray Train run each.",
    "limits": "Time limits, in seconds (none by default).",
    "program": "W&B's training script: without `task`, every trial runs it as W&B's agent would, on "
    "resources.workers ranks with torchrun's environment, from the spec file's directory (with `task`: "
    "read but not run).",
    "command": "W&B's command line for the program, with W&B's macros (${env}, ${interpreter}, ${program}, "
    "${args}, ${args_no_boolean_flags}, ${args_no_hyphens}, ${args_json}, ${args_json_file}, "
    "${envvar:NAME}); default: ${env} ${interpreter} ${program} ${args}.",
    **{key: f"W&B's `{key}`: read, not used ({why})." for key, why in WANDB_NOTED_KEYS.items()},
    "metric.name": "The metric to optimise, as every epoch reports it (such as `val_loss` or `val_accuracy`).",
    "metric.goal": "Whether a smaller (minimize) or a larger (maximize) value of the metric is better.",
    "metric.target": "A value of the metric that, once a result reaches it, starts no new trial "
    "(running trials finish).",
    "metric.impute": "W&B's value for a failed run in its Bayesian search: read, not used (a failed trial is "
    "a failed point to the searcher).",
    "metric.impute_while_running": "W&B's value for a running run: read, not used.",
    "optuna": "Method optuna's sampler (and method custom's, which runs it).",
    "optuna.sampler": "tpe (Optuna's TPE: multivariate, with the constant liar; for one objective or several) or "
    "nsga2 (Optuna's NSGA-II: a genetic search by generations, mostly for several objectives).",
    "optuna.population_size": "NSGA-II's generation: the trials it draws before it breeds from the best of them.",
    "scheduler.engine": "W&B's engine: wandb runs the file's method (grid, bayes, random); optuna runs Optuna's "
    "TPE (needs method custom); ax is not offered, and Optuna's TPE runs in its place.",
    "scheduler.source": "W&B's Python file of engine hooks: read, not run (W&B has published no contract for "
    "them); the search runs on parameters.",
    "scheduler.optimizer": "W&B's function in source that builds the optimizer: read, not run.",
    "scheduler.search_space": "W&B's function in source that defines the space: read, not run; give parameters.",
    "early_terminate.type": "W&B's early-termination algorithm; hyperband is the only one.",
    "early_terminate.min_iter": "The first rung, in epochs: the scheduler's grace_period.",
    "early_terminate.max_iter": "A trial's epoch budget: the scheduler's max_t.",
    "early_terminate.s": "With max_iter, sets the first rung to max_iter / eta**s epochs (when min_iter is not given).",
    "early_terminate.eta": "The factor between rungs: the scheduler's reduction_factor.",
    "early_terminate.strict": "W&B's stricter pruning: read, but ASHA's asynchronous rule decides which trials stop.",
    "scheduler.type": "The trial scheduler: asha (asynchronous successive halving), hyperband "
    "(synchronous brackets, which ignore grace_period; HyperBand-for-BOHB, the default and "
    "the only choice with method bohb), fifo (no early stopping), pbt (population-based training: the "
    "weak trials take the weights of the strong and change their hyperparameters; with method random or grid), "
    "pb2 (population-based bandits: as pbt, but a Gaussian-process bandit picks the new values within each "
    "parameter's min and max) or pbt_replay (each trial changes its hyperparameters at the epochs of "
    "schedule, as the trial a PBT sweep found them in did; what best_spec() of a PBT sweep writes).",
    "scheduler.perturbation_interval": "pbt, pb2: the epochs between a trial's comparisons with the population "
    "(each trial's checkpoint of that epoch is what another may copy); less than max_t.",
    "scheduler.quantile_fraction": "pbt, pb2: the bottom fraction of the population that copies a trial of the "
    "top fraction, at most 0.5.",
    "scheduler.resample_probability": "pbt: the chance that a copied trial's parameter is drawn again from "
    "its distribution rather than perturbed.",
    "scheduler.perturbation_factors": "pbt: what a continuous parameter is multiplied by (one at random), "
    "then kept within its bounds; a parameter with listed values steps to a neighbouring value instead.",
    "scheduler.schedule": "pbt_replay: the changes, by epoch, each {epoch: N, config: {name: value}}: after "
    "epoch N the trial goes on from its checkpoint of that epoch with these values (parameters named as in "
    "parameters, dotted for nested ones). Each N less than max_t, a multiple of training.checkpoint_every.",
    "scheduler.mutate": "pbt, pb2: the searched parameters it may change mid-training (default: the searched "
    "ones among lr, weight_decay, momentum, dampening and eps). Not one that changes the model's shapes, "
    "the batch size, the data, or a conditional one; under pb2, only ranges of real numbers with a min and "
    "a max.",
    "scheduler.max_t": "Every trial's budget in time_unit: the epochs (or steps) a trial runs when it is "
    "never stopped (for fifo too).",
    "scheduler.grace_period": "The epochs (or steps, by time_unit) every trial runs before it can be stopped: "
    "the first rung, at most max_t.",
    "scheduler.reduction_factor": "The factor between rungs: about one in reduction_factor trials that "
    "reach a rung goes on to the next.",
    "scheduler.time_unit": "What max_t, grace_period and the rungs count: epoch, or step (optimizer steps, "
    "for epochs too long to wait for; see training.report_every_steps); for a W&B "
    "program, value (the default there): the values of the metric it has logged, as "
    "W&B's hyperband counts them.",
    "resources.workers": "The number of DDP ranks of one trial (default 2; a W&B program's: 1, one process "
    "per trial as W&B's agent runs it).",
    "resources.cpus_per_worker": "CPUs reserved for each rank (may be fractional).",
    "resources.gpus_per_worker": "GPUs reserved for each rank (0: CPU ranks; a fraction packs that many "
    "trials on a GPU, each held to its share of its memory; auto measures the first trial and packs as many "
    "as fit).",
    "training.precision": "The training precision: auto (bf16 where the device supports it, fp16 with a "
    "GradScaler on older GPUs, fp32 on CPU), bf16, fp16 or fp32.",
    "training.batch_size_scope": "What the batch_size hyperparameter means: global (one optimizer step's batch "
    "over all ranks) or per_rank (each rank's batch per optimizer step).",
    "training.grad_accum_steps": "Micro-batches per optimizer step (the effective batch unchanged, gradients "
    "all-reduced once per step).",
    "training.lr_scaling": "linear multiplies lr by global batch / batch_size (the warm-up then starts from "
    "the sampled lr); none leaves lr as sampled.",
    "training.warmup_epochs": "Epochs of a linear warm-up to the peak lr, from the sampled lr with lr_scaling "
    "linear, from 0 otherwise.",
    "training.warmup_steps": "Optimizer steps of the linear warm-up, in place of warmup_epochs.",
    "training.clip_grad_norm": "Clip the gradients' total norm to this before each optimizer step (after "
    "accumulation, and after the fp16 scaler unscaled them); 0: off.",
    "training.schedule": "The lr schedule after the warm-up: a name (cosine) or a mapping of these keys.",
    "training.schedule.name": "constant; cosine and linear decay to min_lr_ratio x lr at the trial's last "
    "step (max_t epochs); step multiplies by gamma every every_epochs epochs; "
    "one_cycle warms up from lr/25 (over 30% of the trial unless a warm-up is "
    "given) and anneals by a cosine to lr/2.5e5.",
    "training.schedule.interval": "step moves the decay every optimizer step, epoch once per epoch (the "
    "warm-up is per step); a task's own scheduler is stepped at it.",
    "training.schedule.min_lr_ratio": "Where cosine and linear end, as a fraction of the peak lr.",
    "training.schedule.every_epochs": "Epochs between the step schedule's decays.",
    "training.schedule.gamma": "The step schedule's factor at each decay.",
    "training.sync_batchnorm": "Convert BatchNorm to SyncBatchNorm; auto does when a trial has more than one "
    "rank and its ranks are on GPUs (true needs GPU ranks).",
    "training.num_workers": "DataLoader worker processes per rank; auto: 4 per GPU rank within its CPUs, "
    "0 on CPU ranks.",
    "training.pin_memory": "Pinned memory for the DataLoader; auto: on GPU ranks.",
    "training.compile": "Compile the model with torch.compile.",
    "training.deterministic": "Use deterministic algorithms only (torch.use_deterministic_algorithms).",
    "training.profile": f"Record a torch.profiler trace of rank 0's first epoch into the trial's directory: "
    f"true for {DEFAULT_PROFILE_STEPS} steps, or this many steps (false or 0: off).",
    "training.oom_retry": "On out-of-memory, retry the trial from its last checkpoint at half the per-rank "
    "batch and twice the accumulation (the same effective batch).",
    "training.report_every_steps": "Validate and report every this many optimizer steps instead of at each "
    "epoch's end (0: at each epoch's end); needs scheduler.time_unit step.",
    "training.checkpoint_every": "Reports (epochs, or report_every_steps steps) between the checkpoints rank 0 "
    "saves, the last one always included (0: none).",
    "training.ddp": "Settings passed to DistributedDataParallel as they are.",
    "training.ddp.bucket_cap_mb": "The size of DDP's gradient all-reduce buckets, in megabytes.",
    "training.ddp.gradient_as_bucket_view": "Gradients as views into DDP's all-reduce buckets, which saves "
    "one copy of them.",
    "training.ddp.static_graph": "Tells DDP that the model's graph is the same at every step, which lets it optimise.",
    "training.ddp.find_unused_parameters": "Lets DDP find the parameters that get no gradient in a step "
    "(slower; needed when some are unused).",
    "wandb.project": "The wandb project of the sweep's runs; default: the top-level project, else the sweep's name.",
    "wandb.entity": "The wandb entity (user or team); default: the top-level entity, else the API key's "
    "default entity.",
    "wandb.group": "The wandb group of the sweep's runs; default: the experiment's name (one group per sweep).",
    "wandb.tags": "Tags added to every run: one tag, or a list.",
    "wandb.mode": "online, offline, disabled (wandb not even imported), or auto: WANDB_MODE if set, else "
    "online with an API key, else offline.",
    "wandb.log_checkpoints": "Upload each trial's last checkpoint as a `model` artifact.",
    "wandb.init_timeout": "Seconds wandb may take to start a run before the run is given up with a warning.",
    "failure.max_failures": "Restarts of a failed trial's ranks, from its latest checkpoint, before the trial fails.",
    "failure.max_failed_trials": "The sweep stops once this many trials have failed (a count), or this share "
    "of its trials (a fraction below 1); the common error is reported. Default: "
    "never.",
    "limits.sweep_s": "The sweep ends once its driver has run this long; running trials are left interrupted "
    "and `tune-run --resume` continues them.",
    "limits.trial_s": "A trial is stopped at its first report after this many seconds of training, keeping "
    "what it reported.",
    "limits.progress_s": "A trial with no report for this many seconds (a rank hung or stopped) has its gang "
    "ended and fails, or is retried under failure.max_failures; longer than the slowest "
    "epoch. Warm gangs only.",
    "execution.gangs": "warm keeps each concurrency slot's DDP ranks up across trials; fresh starts a new Ray "
    "Train run for every trial (for a task that leaks global state).",
    "execution.recycle_after_trials": "The number of trials after which a warm gang is rebuilt.",
    "execution.max_memory_growth_mib": "A warm gang is rebuilt when a rank's resident memory has grown by "
    "more than this many MiB since its first trial ended.",
    "execution.collective_timeout_s": "Seconds a rank waits in a collective for its peers before its gang "
    "is taken as broken and its trial fails (retried under "
    "failure.max_failures).",
    "execution.bundle": "Up to this many trials that differ only in the optimizer's hyperparameters (lr, "
    "weight_decay, momentum, betas, ...) train as one fused job on one warm gang of one rank; each is still "
    "a trial of its own (1: each trial alone; auto: the size that the first trial's fused step, timed at 1, "
    "2, 4, ... members, predicts to finish the sweep soonest, printed with the plan and recorded in "
    "summary.json).",
}

#: Keys whose default is no value to write: the name (the spec file's), no known points, no warm start, no
#: priors.
_NO_DEFAULT = ("name", "points_to_evaluate", "warm_start", "priors", "constraints")
#: Keys whose default another field of the typed spec holds: that field's dotted path, and its value as
#: written in a spec.
_DEFAULT_FROM: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "training.profile": ("training.profile_steps", lambda steps: steps or False),
    "early_terminate.eta": ("scheduler.reduction_factor", lambda eta: eta),
}

#: The parameter keys: type and bounds, and one sentence each.
PARAMETER_TYPES: dict[str, dict] = {
    "value": _ANY,
    "values": {"type": "array", "minItems": 1},
    "probabilities": _nullable({"type": "array", "minItems": 1, "items": _number(minimum=0)}),
    "min": _number(),
    "max": _number(),
    "q": _number(exclusiveMinimum=0),
    "mu": _number(),
    "sigma": _number(exclusiveMinimum=0),
    "a": _number(exclusiveMinimum=0),
    "b": _number(exclusiveMinimum=0),
    "when": _nullable({"type": "object", "minProperties": 1, "maxProperties": 1}),
}
PARAMETER_DESCRIPTIONS: dict[str, str] = {
    "value": "The value every trial gets.",
    "values": "The values to choose from.",
    "probabilities": "Each value's probability, one per value, summing to 1 (default: equally likely).",
    "distribution": "The parameter's form; when absent, value means constant, values categorical, integer "
    "min and max int_uniform, other min and max uniform.",
    "min": "The lower bound, inclusive (a natural-log exponent for log_uniform, q_log_uniform and inv_log_uniform).",
    "max": "The upper bound, inclusive (a natural-log exponent for log_uniform, q_log_uniform and inv_log_uniform).",
    "q": "The quantum: a value is rounded to a multiple of q in the bounds (an integral q gives ints).",
    "mu": "The normal's mean (of the logarithm, for log_normal).",
    "sigma": "The normal's standard deviation (of the logarithm, for log_normal).",
    "a": "Beta's first shape parameter (alpha).",
    "b": "Beta's second shape parameter (beta).",
    "when": "Samples this parameter only when an earlier `values` parameter has this value or one of this "
    "list (`{optimizer: sgd}`); otherwise a trial's config lacks it.",
    "parameters": "A group of parameters nested under this name in each trial's config; it takes no other key.",
}
#: What each form samples (bounds inclusive).
FORM_DESCRIPTIONS: dict[str, str] = {
    "constant": "That value.",
    "categorical": "One of the values, equally likely or with the given probabilities.",
    "uniform": "Uniform on [min, max].",
    "int_uniform": "Every integer in [min, max], equally likely.",
    "q_uniform": "Every multiple of q in [min, max], equally likely.",
    "log_uniform": "Log-uniform on [exp(min), exp(max)] (W&B deprecates it for log_uniform_values).",
    "q_log_uniform": "log_uniform rounded to a multiple of q (W&B deprecates it for q_log_uniform_values).",
    "log_uniform_values": "Log-uniform on [min, max].",
    "q_log_uniform_values": "Log-uniform on [min, max], rounded to a multiple of q.",
    "inv_log_uniform": "X with log(1/X) uniform on [min, max]: log-uniform on [exp(-max), exp(-min)] "
    "(W&B deprecates it for inv_log_uniform_values).",
    "inv_log_uniform_values": "X with log(1/X) uniform on [log(1/max), log(1/min)]: log-uniform on [min, max].",
    "normal": "N(mu, sigma), truncated to [min, max] when given.",
    "q_normal": "N(mu, sigma), truncated to [min, max] when given, rounded to a multiple of q.",
    "log_normal": "exp(N(mu, sigma)), truncated to [min, max] when given.",
    "q_log_normal": "exp(N(mu, sigma)), truncated to [min, max] when given, rounded to a multiple of q.",
    "beta": "Beta(a, b) on [0, 1].",
    "q_beta": "Beta(a, b) on [0, 1], rounded to a multiple of q.",
}
#: The keys each form cannot do without (the others are optional).
_REQUIRED = {"constant": ("value",), "categorical": ("values",), **{d: ("min", "max") for d in RANGE_FORMS}}


def spec_schema() -> dict:
    """The JSON Schema (draft 2020-12) of a spec file, as a JSON-serialisable dict (a new one each call)."""
    defaults = validate({}, default_name="")
    section = _section("", defaults)
    return {
        "$schema": DIALECT,
        "title": "tune-service sweep spec",
        "description": "A sweep spec: W&B's sweep configuration and tune-service's own keys. The schema states "
        "each key's type, bounds and choices; `tune-run dry-run` checks the rest.",
        **section,
        "allOf": [
            {
                "description": "method bohb needs scheduler type hyperband (BOHB's brackets need HyperBand-for-BOHB).",
                "if": {"required": ["method"], "properties": {"method": {"const": "bohb"}}},
                "then": {"properties": {"scheduler": {"properties": {"type": {"const": "hyperband"}}}}},
            }
        ],
        "$defs": {
            "number": {
                "title": "number",
                "description": 'A finite number; a numeric string such as "1e-4" counts as one (PyYAML reads '
                "1e-4 as a string).",
                "anyOf": [{"type": "number"}, {"type": "string", "pattern": NUMBER_PATTERN}],
            },
            "parameters": {
                "title": "mapping of parameters",
                "description": "Each key of `parameters:` names a parameter, in file order (a `when` names an "
                "earlier one); a dotted name (`optimizer.lr`) nests in each trial's config as a "
                "`parameters:` group does.",
                "type": "object",
                "additionalProperties": {"$ref": _PARAMETER_REF},
            },
            "parameter": {
                "title": "parameter",
                "description": "A parameter takes one of W&B's forms below (without `distribution`, the "
                "form follows from its keys), or is a `parameters:` group; bounds are inclusive.",
                "oneOf": _parameter_forms(),
            },
        },
    }


def _section(path: str, defaults: SweepSpec) -> dict:
    """The schema of the mapping at ``path`` (``""``: the document): validation's keys, no other."""
    properties = {key: _property(f"{path}.{key}" if path else key, defaults) for key in SECTION_KEYS[path]}
    return {"type": "object", "properties": properties, "additionalProperties": False}


def _property(dotted: str, defaults: SweepSpec) -> dict:
    """The schema of the key at ``dotted``: its description, type, bounds and default."""
    schema: dict[str, Any]
    if dotted == "training.schedule":  # a schedule's name is short for {name: NAME}
        schema = {"description": _described(dotted), "anyOf": [_choice(SCHEDULES), _section(dotted, defaults)]}
    elif dotted == "scheduler":  # ours, or W&B's engine block: told apart by their keys
        engine_block = {
            "type": "object",
            "properties": {key: _property(f"scheduler.{key}", defaults) for key in ENGINE_KEYS},
            "required": ["engine"],
            "additionalProperties": False,
        }
        schema = {
            "description": _described(dotted),
            "anyOf": [_section(dotted, defaults), engine_block, {"type": "null"}],
        }
    elif dotted == "metrics":
        metric = _section("metric", defaults)
        schema = {
            "description": _described(dotted),
            "type": "array",
            "minItems": MIN_OBJECTIVES,
            "maxItems": MAX_OBJECTIVES,
            "items": {**metric, "required": ["name"]},
        }
    elif dotted in SECTION_KEYS:
        schema = {"description": _described(dotted), **_section(dotted, defaults)}
        if dotted == "early_terminate":
            schema["required"] = ["type"]
            schema["anyOf"] = [{"required": ["min_iter"]}, {"required": ["max_iter", "s"]}]
    elif dotted == "parameters":
        schema = {"description": _described(dotted), "$ref": _PARAMETERS_REF}
    else:
        schema = {"description": _described(dotted), **copy.deepcopy(_entry(TYPES, "TYPES", "spec key", dotted))}
        found, default = _default(dotted, defaults)
        if found:
            schema["default"] = default
    if dotted in _NULLABLE_SECTIONS and dotted != "scheduler":  # the scheduler's two blocks include null
        described = schema.pop("description")
        schema = {"description": described, "anyOf": [schema, {"type": "null"}]}
    return schema


def _entry(table: Mapping[str, Any], table_name: str, what: str, key: str) -> Any:
    """``table[key]``, or a KeyError naming the table of this module to fill in: a key, form or choice
    added to the spec must be described here before the schema builds."""
    if key not in table:
        noun = "description" if table_name.endswith("DESCRIPTIONS") else "type"
        raise KeyError(f"{what} {key!r} has no {noun} in tune_service/spec/schema.py's {table_name}; add one")
    return table[key]


def _described(dotted: str) -> str:
    return _entry(DESCRIPTIONS, "DESCRIPTIONS", "spec key", dotted)


def _default(dotted: str, spec: SweepSpec) -> tuple[bool, Any]:
    """Whether ``dotted`` has a default, and the default as written in a spec."""
    if dotted in _NO_DEFAULT:
        return False, None
    field, as_written = _DEFAULT_FROM.get(dotted, (dotted, lambda value: value))
    node: Any = spec
    for name in field.split("."):
        if not hasattr(node, name):
            return False, None  # a key no typed field holds (project, early_terminate, program, ...)
        node = getattr(node, name)
    value = as_written(node)
    if value is None or dataclasses.is_dataclass(value):
        return False, None
    return True, list(value) if isinstance(value, tuple) else value


def _parameter_forms() -> list[dict]:
    """Every form of a parameter: a group, the three forms W&B infers from their keys, and one per
    distribution. They exclude one another, as validation reads them."""
    group = {
        "title": "parameters",
        "description": _parameter_description("parameters"),
        "type": "object",
        "properties": {
            "parameters": {
                "description": _parameter_description("parameters"),
                "$ref": _PARAMETERS_REF,
                "minProperties": 1,
            }
        },
        "required": ["parameters"],
        "additionalProperties": False,
    }
    inferred = [
        _form("value", "constant", inferred=True),
        _form("values", "categorical", inferred=True),
        _form(
            "min, max",
            "uniform",
            inferred=True,
            description="Uniform on [min, max], or every integer in it equally likely when both are "
            "integers (int_uniform).",
        ),
    ]
    return [group, *inferred, *(_form(d, d) for d in DISTRIBUTIONS)]


def _form(title: str, distribution: str, inferred: bool = False, description: str | None = None) -> dict:
    if description is None:
        description = _entry(FORM_DESCRIPTIONS, "FORM_DESCRIPTIONS", "distribution", distribution)
        if distribution in EXPONENT_FORMS:
            description = description.rstrip(".") + "; a note says so when the spec is read."
    keys = FORM_KEYS[distribution] + (("q",) if distribution.startswith("q_") else ())
    properties = {}
    if not inferred:
        properties["distribution"] = {"description": _parameter_description("distribution"), "const": distribution}
    defaults = _parameter_defaults(distribution)
    for key in (*keys, "when"):
        kind = _entry(PARAMETER_TYPES, "PARAMETER_TYPES", "parameter key", key)
        schema = {"description": _parameter_description(key), **copy.deepcopy(kind)}
        if key in ("min", "max") and distribution == "int_uniform":
            schema["multipleOf"] = 1
        if key == "min" and distribution in POSITIVE_BOUNDS:
            schema["exclusiveMinimum"] = 0
        if key in defaults:
            schema["default"] = defaults[key]
        properties[key] = schema
    schema = {
        "title": title if inferred else f"distribution: {distribution}",
        "description": description,
        "type": "object",
        "properties": properties,
        "required": [*([] if inferred else ["distribution"]), *_REQUIRED.get(distribution, ())],
        "additionalProperties": False,
    }
    if not inferred and distribution not in _REQUIRED and "min" in keys:
        schema["dependentRequired"] = {"min": ["max"], "max": ["min"]}
    return schema


def _parameter_description(key: str) -> str:
    return _entry(PARAMETER_DESCRIPTIONS, "PARAMETER_DESCRIPTIONS", "parameter key", key)


def _parameter_defaults(distribution: str) -> dict[str, Any]:
    """The values the reader gives a form's optional keys (``q``, ``mu``, ``sigma``, ``a``, ``b``)."""
    keys = FORM_KEYS[distribution] + (("q",) if distribution.startswith("q_") else ())
    optional = [k for k in keys if k not in _REQUIRED.get(distribution, ()) and k in ("q", "mu", "sigma", "a", "b")]
    if not optional:
        return {}
    body = {"distribution": distribution, **{k: (1 if k == "min" else 2) for k in _REQUIRED.get(distribution, ())}}
    check = Checker()
    read = read_parameters(check, {"x": body})
    if check.problems:
        raise ValueError(
            f"cannot find the defaults of {distribution}: the reader refuses {body} "
            f"({'; '.join(map(str, check.problems))})"
        )
    return {k: getattr(read[0], k) for k in optional}
