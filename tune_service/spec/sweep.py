"""The sweep spec: a typed, frozen description of one sweep (``load_spec`` in
:mod:`~tune_service.spec.reading` builds it, :mod:`~tune_service.spec.validation` checks it).

The file format is a superset of the W&B sweep configuration, so a W&B user's sweep file is already a
valid spec. Our own keys (``task``, ``scheduler``, ``resources``, ``wandb``, ``seed``) add what W&B
leaves to its agent: what to train, early stopping, and the DDP world of each trial.

Validation happens completely before Ray starts and reports every problem at once, each with its dotted
path, the rule and the value (``parameters.lr.min: must be > 0 for log_uniform_values, got 0``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from tune_service.spec.parameters import ParameterSpec
from tune_service.spec.priors import PriorSpec
from tune_service.spec.training import TrainingSettings
from tune_service.spec.wandb import WandbSettings

METHODS = ("random", "grid", "bayes", "hyperopt", "bohb", "optuna")
GOALS = ("minimize", "maximize")
SCHEDULERS = ("asha", "hyperband", "fifo", "pbt", "pb2", "pbt_replay")
#: The schedulers of a population that exploits and explores as it trains (Ray Tune's PBT and PB2).
POPULATIONS = ("pbt", "pb2")
#: What the scheduler counts a trial's progress in: epochs or optimizer steps of a task's trial, or (a W&B
#: program's trial, as W&B's hyperband counts) the values of the sweep's metric the program has logged.
TIME_UNITS = ("epoch", "step", "value")
#: The report key of the ``value`` clock: how many values of the sweep's metric a program has logged.
METRIC_VALUES_KEY = "metric_values"

#: W&B keys that describe how W&B's agent launches a program: a spec with ``program`` and no ``task`` runs it.
WANDB_AGENT_KEYS = ("program", "command")
#: Keys of W&B's sweep configuration with no meaning here, and why: each is a ``note`` line, never a refusal.
WANDB_NOTED_KEYS = {
    "controller": "W&B's sweep controller (local or cloud); here the tune-run driver is the controller",
    "job": "a W&B Launch job; here the program (or the task) runs on this Ray cluster",
    "image_uri": "a W&B Launch image; here trials run in the Ray cluster's environment",
}
#: A program trial's budget when neither ``scheduler.max_t`` nor ``early_terminate.max_iter`` gives one:
#: the program ends itself, as under W&B's agent, and the scheduler's rungs go on as far as it logs. Never
#: shown as a budget: the plan and the live view say that the program decides its length.
PROGRAM_MAX_T = 1_000_000

DEFAULT_RUN_CAP = 10


@dataclass(frozen=True)
class MetricSpec:
    """What the sweep optimises. With ``target``, no new trial starts once a result reaches it (W&B's
    ``metric.target``); running trials finish.

    ``name`` None: a W&B program sweep whose file has no ``metric:`` (W&B accepts it for random and
    grid): every trial runs to its end, none is stopped early or ranked, and the results list what each
    logged."""

    name: str | None = "val_loss"
    goal: str = "minimize"  # or "maximize"
    target: float | None = None

    @property
    def declared(self) -> bool:
        """Whether the sweep has a metric at all (see ``name``)."""
        return self.name is not None

    @property
    def mode(self) -> str | None:
        """Ray Tune's spelling of the goal (None without a metric)."""
        if self.name is None:
            return None
        return "min" if self.goal == "minimize" else "max"


@dataclass(frozen=True)
class ConstraintSpec:
    """A bound on a reported metric (``constraints:``): a trial whose last report breaks one is
    infeasible (never the best, never on the front), as Optuna's constraints say. ``min`` and ``max``
    inclusive; at least one of them."""

    name: str
    min: float | None = None
    max: float | None = None

    def violation(self, value: object) -> float:
        """How far ``value`` is outside the bounds (<= 0: within them, as Optuna's ``constraints_func``
        reads it); infinite for a value that is missing or not a finite number."""
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return math.inf
        over = [value - self.max] if self.max is not None else []
        under = [self.min - value] if self.min is not None else []
        return float(max([*over, *under]))

    def describe(self) -> str:
        if self.min is not None and self.max is not None:
            return f"{self.min:g} <= {self.name} <= {self.max:g}"
        return f"{self.name} <= {self.max:g}" if self.max is not None else f"{self.name} >= {self.min:g}"


@dataclass(frozen=True)
class SchedulerSpec:
    """Early stopping. ``max_t`` is every trial's budget (also for FIFO) and ``grace_period`` its first
    rung, both counted in ``time_unit``: epochs, or optimizer steps (for long epochs)."""

    type: str
    max_t: int = 10
    grace_period: int = 1
    reduction_factor: float = 3
    time_unit: str = "epoch"
    #: Population-based training (``type: pbt``, Ray Tune's PBT and its names; ``type: pb2``, Ray Tune's
    #: PB2, which picks the new values with a Gaussian-process bandit instead of perturbing): every
    #: ``perturbation_interval`` epochs a trial in the bottom ``quantile_fraction`` of the population takes
    #: the weights and optimizer state of one in the top, and the hyperparameters in ``mutate``, each
    #: resampled from its own distribution with ``resample_probability``, else multiplied by one of
    #: ``perturbation_factors`` (kept within its bounds; a listed value steps to a neighbour instead).
    perturbation_interval: int = 4
    quantile_fraction: float = 0.25
    resample_probability: float = 0.25
    perturbation_factors: tuple[float, ...] = (0.8, 1.2)
    #: The searched parameters PBT may change mid-training (None: the optimizer's among them, see
    #: :data:`tune_service.search.population.OPTIMIZER_NUMBERS`).
    mutate: tuple[str, ...] | None = None
    #: ``type: pbt_replay`` (Ray Tune's PopulationBasedTrainingReplay): each trial trains with the spec's
    #: values, then after each change's ``epoch`` goes on from its checkpoint of that epoch with the
    #: change's ``config`` (dotted parameter names to values), as the trial PBT found them in did; what
    #: ``best_spec()`` of a PBT sweep writes. Each ``{"epoch": int, "config": {name: value}}``, by epoch.
    schedule: tuple[dict[str, Any], ...] = ()

    @property
    def population(self) -> bool:
        """Whether a population exploits and explores as it trains (``pbt`` or ``pb2``)."""
        return self.type in POPULATIONS

    @property
    def changes_running_trials(self) -> bool:
        """Whether the scheduler changes trials as they train (a population, or its replay): it pauses a
        trial, changes its config, and runs it again from a checkpoint."""
        return self.population or self.type == "pbt_replay"

    @property
    def time_attr(self) -> str:
        """The report key the scheduler reads a trial's progress from (``epoch``, ``step``, or
        :data:`METRIC_VALUES_KEY` for the ``value`` clock)."""
        return METRIC_VALUES_KEY if self.time_unit == "value" else self.time_unit

    @property
    def open_ended(self) -> bool:
        """Whether trials have no budget of their own: a program's trials end when their program ends."""
        return self.max_t >= PROGRAM_MAX_T


@dataclass(frozen=True)
class ResourceSpec:
    """One trial's DDP world: ``workers`` ranks, each with these CPUs and GPUs.

    ``gpus_per_worker: auto`` in a spec is read as ``gpus_per_worker=1, gpus_auto=True``: the driver
    measures the first trial on a GPU and packs as many trials on each GPU as fit
    (:mod:`tune_service.execution.packing`), then sets ``gpus_per_worker`` to the share it chose."""

    workers: int = 2
    cpus_per_worker: float = 1
    gpus_per_worker: float = 0
    #: ``gpus_per_worker: auto`` (not a spec key of its own).
    gpus_auto: bool = False

    def as_spec(self) -> dict[str, Any]:
        """The ``resources`` block as a spec says it (``gpus_per_worker: auto`` where it was auto)."""
        gpus: float | str = "auto" if self.gpus_auto else self.gpus_per_worker
        return {"workers": self.workers, "cpus_per_worker": self.cpus_per_worker, "gpus_per_worker": gpus}


@dataclass(frozen=True)
class FailureSpec:
    """What happens when a trial's DDP job fails (a rank killed, a node lost): its worker group is
    restarted from the trial's latest checkpoint up to ``max_failures`` times, then the trial fails.

    ``max_failed_trials``: the sweep stops once this many trials have failed (a count >= 1), or this
    share of its trial budget (a fraction below 1); None: never."""

    max_failures: int = 0
    max_failed_trials: float | None = None

    def failed_trials_limit(self, num_trials: int) -> int | None:
        """How many failed trials stop a sweep of ``num_trials`` trials (None: no limit)."""
        if self.max_failed_trials is None:
            return None
        if self.max_failed_trials >= 1:
            return int(self.max_failed_trials)
        return max(1, math.ceil(self.max_failed_trials * num_trials))


@dataclass(frozen=True)
class LimitsSpec:
    """Time limits (the ``limits:`` block), in seconds; None: none.

    - ``sweep_s``: the sweep ends once it has run this long (each run of its driver, a resume's too):
      running trials are left ``interrupted``, and ``resume`` continues them.
    - ``trial_s``: a trial is stopped at its first report after this much training time (Tune's
      ``time_total_s``), keeping what it reported.
    - ``progress_s``: a trial with no report for this long (a rank hung, stopped or deadlocked) has its
      gang ended and fails (or is retried under ``failure.max_failures``); a rank's collectives give up
      after it too. Longer than the slowest epoch, then. Warm gangs only.
    """

    sweep_s: float | None = None
    trial_s: float | None = None
    progress_s: float | None = None


#: The samplers of ``method: optuna`` (``optuna.sampler``).
OPTUNA_SAMPLERS = ("tpe", "nsga2")


@dataclass(frozen=True)
class OptunaSettings:
    """How ``method: optuna`` (and ``custom``) searches (the ``optuna:`` block).

    - ``sampler``: ``tpe``, Optuna's TPE (multivariate, with the constant liar for running trials:
      Optuna 5's defaults, for one objective and several), or ``nsga2``, Optuna's NSGA-II, a genetic
      search over generations of ``population_size`` trials (mostly for several objectives).
    - ``population_size``: NSGA-II's generation.
    """

    sampler: str = "tpe"
    population_size: int = 50


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
    - ``bundle``: up to this many trials of one architecture train as one fused job on one warm gang of
      one rank (:mod:`tune_service.execution.bundles`); 1 (default): each trial trains alone. ``bundle:
      auto`` in a spec is read as ``bundle=1, bundle_auto=True``: the driver measures the first trial's
      fused step and chooses the size (:mod:`tune_service.execution.bundle_sizing`), then sets ``bundle``.
    """

    gangs: str = "warm"
    recycle_after_trials: int = 100
    max_memory_growth_mib: float = 1024
    collective_timeout_s: float = 600
    bundle: int = 1
    #: ``bundle: auto`` (not a spec key of its own).
    bundle_auto: bool = False


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
    limits: LimitsSpec = field(default_factory=LimitsSpec)
    #: ``method: optuna``'s sampler (the ``optuna:`` block).
    optuna: OptunaSettings = field(default_factory=OptunaSettings)
    #: The objectives of a sweep with several (``metrics:``, :mod:`~tune_service.spec.objectives`), in the
    #: file's order; ``metric`` is then the first of them. Empty with one objective.
    objectives: tuple[MetricSpec, ...] = ()
    #: Bounds on reported metrics (``constraints:``): a trial that breaks one is infeasible.
    constraints: tuple[ConstraintSpec, ...] = ()
    #: Configs to run first (``points_to_evaluate``), each flat, its values typed
    #: (:mod:`~tune_service.spec.known_points`).
    points_to_evaluate: tuple[Mapping[str, Any], ...] = ()
    #: An earlier sweep's experiment (a directory or a URI) whose trials the searcher is told first
    #: (:mod:`~tune_service.search.warm_start`); None: the searcher starts cold.
    warm_start: str | None = None
    #: What the user believes of some parameters (``priors:``), in parameter order
    #: (:mod:`~tune_service.spec.priors`); empty: every draw follows the declared laws.
    priors: tuple[PriorSpec, ...] = ()
    notes: tuple[str, ...] = ()
    #: The document this spec was validated from (overrides applied): what a resumed sweep reloads.
    source: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    #: W&B's ``program`` and ``command``: run for every trial when the spec has no ``task``.
    program: str | None = None
    command: tuple[str, ...] | None = None
    #: Where a program runs: the spec file's directory (None: the working directory of the run). Where the
    #: spec was read from, not what it says: two specs that differ only here are equal.
    directory: str | None = field(default=None, compare=False)

    @property
    def runs_program(self) -> bool:
        """Whether the trials run ``program`` with ``command`` (a W&B sweep file without ``task``: W&B's
        agent runs a ``command`` without a ``program`` too) rather than a task."""
        return (self.program is not None or self.command is not None) and not self.task

    @property
    def multi_objective(self) -> bool:
        """Whether the sweep has several objectives (``metrics:``)."""
        return len(self.objectives) > 1

    @property
    def metrics(self) -> tuple[MetricSpec, ...]:
        """Every objective: the ``metrics:`` of a sweep with several, else its one ``metric`` (none for a
        W&B program sweep without a metric)."""
        if self.objectives:
            return self.objectives
        return (self.metric,) if self.metric.declared else ()

    @property
    def objective_modes(self) -> list[tuple[str, str]]:
        """``(name, mode)`` of every objective (:attr:`metrics`), as the schedulers and results take them."""
        return [(o.name, o.mode) for o in self.metrics if o.name is not None and o.mode is not None]

    @property
    def searcher(self) -> str:
        """The search algorithm's canonical name (``bayes`` is hyperopt TPE)."""
        return "hyperopt" if self.method == "bayes" else self.method

    def parameter(self, name: str) -> ParameterSpec:
        for p in self.parameters:
            if p.name == name:
                return p
        raise KeyError(name)
