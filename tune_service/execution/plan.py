"""The resolved sweep: what will run, on what, how many at once. What ``tune-run --dry-run`` prints.

``plan_sweep`` finishes validation that needs more than the spec file, before Ray starts: it builds the
searcher once (refusing forms it cannot express; a grid is enumerated there and nowhere else), counts
the trials, resolves the task and lays out the schedule. ``SweepPlan.on(cluster)`` then checks that one
trial fits the cluster and sets the concurrency: the one step that waits for the cluster.
``make_plan`` does both. None of them starts Ray.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, Callable

from tune_service.errors import Problem, SpecError
from tune_service.execution import bundle_sizing
from tune_service.execution.bundle_sizing import BundleSizing
from tune_service.execution.bundles import bundle_trial, check_bundles, describe_bundles
from tune_service.execution.packing import Packing, measure, without_gpu
from tune_service.execution.resources import ClusterResources, local_machine, max_concurrent_trials, trial_needs
from tune_service.search import registry
from tune_service.search.population import check_population, describe_population
from tune_service.search.schedule import Schedule, expected_schedule
from tune_service.search.warm_start import WarmStart, read_warm_start
from tune_service.spec import MetricSpec, SweepSpec
from tune_service.spec.training import TrainingSettings
from tune_service.spec.wandb import resolve_mode
from tune_service.tasks import ResolvedTask, SealedTask, Task, resolve_task
from tune_service.tasks.spec_check import check_spec_against_task
from tune_service.training.trial_config import TrialConfig


@dataclass(frozen=True)
class SweepPlan:
    """A sweep resolved; ``cluster`` and ``max_concurrent`` are set by :meth:`on` (None before)."""

    spec: SweepSpec
    task: ResolvedTask
    num_trials: int
    schedule: Schedule
    #: The Tune searcher the sweep runs with (built once; Tune drives it).
    searcher: Any
    cluster: ClusterResources | None = None
    max_concurrent: int | None = None
    #: What ``gpus_per_worker: auto`` chose (:meth:`packed`, or :meth:`on` on a cluster without a GPU);
    #: None before, or where the spec gives a number.
    packing: Packing | None = None
    #: The earlier trials told to the searcher first (``warm_start``); None without one, or when resumed.
    warm: WarmStart | None = None
    #: What ``execution.bundle: auto`` chose (:meth:`bundled`, or the plan of a task that cannot be fused);
    #: None before, or where the spec gives a number.
    bundling: BundleSizing | None = None

    def on(self, cluster: ClusterResources) -> "SweepPlan":
        """This plan on ``cluster``: how many trials run at once.

        Raises:
            CapacityError: one trial does not fit the cluster.
        """
        plan = self
        if self.spec.resources.gpus_auto and self.packing is None and cluster.gpus < 1:
            plan = plan.packed_as(without_gpu())  # nothing to measure: CPU trials
        # A bundle's members hold 1/K of a slot's CPUs each (its gang's rank its GPUs): K members per slot.
        slots = max_concurrent_trials(plan.spec.resources, cluster)
        concurrent = min(slots * plan.bundle_size, plan.num_trials)
        return replace(plan, cluster=cluster, max_concurrent=concurrent)

    @property
    def bundle_size(self) -> int:
        """The most trials trained as one fused bundle (``execution.bundle``; 1: each trial alone)."""
        return self.spec.execution.bundle

    @property
    def slots(self) -> int:
        """Gangs at once: the concurrency, or (bundles) the gangs that train the bundles' members."""
        assert self.max_concurrent is not None, "a plan made on a cluster"
        return -(-self.max_concurrent // self.bundle_size)

    def packed(self, cluster: ClusterResources) -> "SweepPlan":
        """This plan with ``gpus_per_worker`` measured and chosen where the spec says ``auto``
        (:mod:`tune_service.execution.packing`: a probe of the first trial on one of ``cluster``'s GPUs);
        this plan otherwise."""
        if not self.spec.resources.gpus_auto or self.packing is not None or cluster.gpus < 1:
            return self  # nothing to measure (on a cluster without a GPU, :meth:`on` says CPU trials)
        return self.packed_as(measure(self.first_trial(), self.spec.resources, cluster))

    def bundled(self, cluster: ClusterResources) -> "SweepPlan":
        """This plan with its bundle size measured and chosen where the spec says ``execution.bundle: auto``
        (:mod:`tune_service.execution.bundle_sizing`: a probe of the first trial where a rank would run);
        this plan otherwise."""
        if not self.spec.execution.bundle_auto or self.bundling is not None:
            return self
        first = bundle_trial(self.spec, self.first_trial)
        sizing = bundle_sizing.measure(first, self.spec, self.schedule.trial_epochs, self.num_trials, cluster)
        return self.bundled_as(sizing)

    def bundled_as(self, sizing: BundleSizing) -> "SweepPlan":
        """This plan with ``execution.bundle`` as ``sizing`` chose it (``execution.bundle: auto``)."""
        execution = replace(self.spec.execution, bundle=sizing.members)
        return replace(self, spec=replace(self.spec, execution=execution), bundling=sizing)

    def first_trial(self) -> TrialConfig:
        """The sweep's first trial as its ranks would get it: the first suggestion of a copy of the plan's
        searcher over the task's defaults, trained by steps (the probe stops it), no checkpoints."""
        import copy

        suggested = copy.deepcopy(self.searcher).suggest("gpus-auto-probe") or {}
        defaults = self.task.task.defaults if self.task.task is not None else {}
        spec = self.spec
        return TrialConfig(
            SealedTask.of(self.task),
            {**defaults, **suggested},
            epochs=None,
            max_steps=10**9,
            seed=spec.seed,
            settings=replace(spec.training, checkpoint_every=0),
            cpus_per_rank=spec.resources.cpus_per_worker,
        )

    def packed_as(self, packing: Packing) -> "SweepPlan":
        """This plan with ``gpus_per_worker`` as ``packing`` chose it (``gpus_per_worker: auto``)."""
        resources = replace(self.spec.resources, gpus_per_worker=packing.gpus_per_worker)
        return replace(self, spec=replace(self.spec, resources=resources), packing=packing)

    @property
    def warm_gangs(self) -> bool:
        """Whether trials run on warm gangs: a Task's trials, unless the spec says ``gangs: fresh``. A
        plain ``train_loop_per_worker`` always gets a fresh Ray Train run per trial."""
        return self.spec.execution.gangs == "warm" and self.task.task is not None

    @property
    def runs_program(self) -> bool:
        """Whether every trial runs the spec's W&B ``program`` (:mod:`tune_service.execution.program_trial`)."""
        return self.spec.runs_program and self.task.task is None and self.task.train_loop is None

    @property
    def runs_ray_train(self) -> bool:
        """Whether each trial is a fresh Ray Train run (:mod:`tune_service.execution.fresh_trial`): neither
        on a warm gang nor a program's."""
        return not (self.warm_gangs or self.runs_program)

    def first_command(self) -> str:
        """The command line the sweep's first trial would run: the first suggestion of a copy of the
        plan's searcher (the searcher itself is left as it is, for the sweep)."""
        import copy

        from tune_service.programs.command import expand, shown

        first = copy.deepcopy(self.searcher).suggest("dry-run")
        return shown(
            expand(
                self.spec.command, self.spec.program or "", first or {}, args_json_file="TRIAL_DIR/program/args.json"
            )
        )

    @property
    def rungs(self) -> tuple[int, ...]:
        """The epochs (or steps) at which the scheduler may stop trials, smallest first; empty for FIFO."""
        return self.schedule.rung_epochs

    def _describe_packing(self) -> list[str]:
        if not self.spec.resources.gpus_auto:
            return []
        if self.packing is None:
            return [
                "gpus auto    trials per GPU measured on the first trial when the sweep starts (1 GPU each till then)"
            ]
        return [self.packing.describe()]

    def _describe_bundling(self) -> list[str]:
        if not self.spec.execution.bundle_auto:
            return []
        if self.bundling is None:
            return ["bundle auto  the bundle size measured on the first trial when the sweep starts (1 till then)"]
        return [self.bundling.describe()]

    def describe(self) -> str:
        """The plan as text: parameters, trials, schedule, resources, concurrency."""
        s = self.spec
        need = trial_needs(s.resources)
        lines = [
            f"sweep        {s.name}" + (f" - {s.description}" if s.description else ""),
            *self._describe_task(),
            f"method       {_method_named(s)}",
            f"metric       {_describe_metric(s)}",
            *([f"constraints  {_describe_constraints(s)}"] if s.constraints else []),
            f"trials       {self.num_trials}",
            "parameters",
        ]
        width = max((len(p.name) for p in s.parameters), default=0)
        lines += [f"  {p.name:<{width}}  {p.describe()}" for p in s.parameters] or ["  (none)"]
        if s.points_to_evaluate:
            lines.append(
                f"known points {len(s.points_to_evaluate)}, run first (points_to_evaluate); the searcher "
                f"learns from them as from its own"
            )
            lines += [
                f"  {i}: " + " ".join(f"{k}={v!r}" for k, v in point.items())
                for i, point in enumerate(s.points_to_evaluate)
            ]
        if self.warm is not None:
            lines.append(self.warm.describe())
        if s.priors:
            given = len(s.points_to_evaluate) + (len(self.warm.trials) if self.warm else 0)
            lines.append(f"priors       {', '.join(prior.describe() for prior in s.priors)}")
            lines.append(f"  {registry.describe_priors(s, given)}")
        sched = s.scheduler
        budget = (
            "no max_t: each program runs until it ends"
            if sched.open_ended
            else f"max_t={sched.max_t} {sched.time_unit}s"
        )
        if sched.type == "fifo":
            lines.append(
                "scheduler    fifo: "
                + (
                    "every trial runs its program to its end"
                    if sched.open_ended
                    else f"every trial trains {sched.max_t} {sched.time_unit}s"
                )
            )
        elif sched.population:
            lines.append(
                f"scheduler    {sched.type}: a population of {self.num_trials}, each trial trains {sched.max_t} epochs"
            )
            lines.append(f"  {describe_population(s)}")
            if (self.max_concurrent or 0) < self.num_trials:
                lines.append(
                    f"  {self.max_concurrent} of the {self.num_trials} train at once: the others wait paused at "
                    f"their last checkpoint and take turns, as in Ray's PBT"
                )
        elif sched.type == "pbt_replay":
            lines.append(f"scheduler    pbt_replay: each trial trains {sched.max_t} epochs, changed at epochs")
            lines += [
                f"  after {c['epoch']}: " + " ".join(f"{k}={v!r}" for k, v in c["config"].items())
                for c in sched.schedule
            ]
        else:
            lines.append(
                f"scheduler    {sched.type}{' (HyperBand for BOHB)' if s.searcher == 'bohb' else ''}: "
                f"{budget}, reduction_factor={sched.reduction_factor:g}"
                + (f", grace_period={sched.grace_period}" if sched.type == "asha" else "")
            )
            how = "expected" if self.schedule.exact else "expected, asynchronous promotion lets a few more on"
            if s.multi_objective:
                names = ", ".join(o.name or "" for o in s.objectives)
                lines.append(
                    f"  {'a rung' if sched.type == 'asha' else 'a bracket halving'} ranks its trials by Pareto "
                    f"order over {names}: non-dominated fronts, then crowding distance, then trial id "
                    f"({'MO-ASHA' if sched.type == 'asha' else 'as MO-ASHA'}, NSGA-II's selection)"
                )
            if sched.time_unit == "value":
                how += f"; a {sched.time_unit} is one value of {s.metric.name} logged, as W&B's hyperband counts"
            lines.append(f"  rungs ({how})")
            lines += [f"    {line}" for line in self.schedule.describe()]
        r = s.resources
        assert self.cluster is not None, "describe a plan made on a cluster (make_plan, or plan_sweep(spec).on)"
        what = f"{r.workers} process(es) of the program/trial" if self.runs_program else f"{r.workers} DDP ranks/trial"
        lines += [
            f"resources    {what} x ({r.cpus_per_worker:g} CPU, {r.gpus_per_worker:g} GPU)"
            f" = {need['CPU']:g} CPU, {need['GPU']:g} GPU per trial"
            + (
                " (one, as W&B's agent runs it; resources.workers: N for N ranks)"
                if self.runs_program and "resources" not in s.source
                else ""
            ),
            *self._describe_packing(),
            *self._describe_bundling(),
            f"cluster      {self.cluster.describe()}",
            *([] if self.runs_program else [f"training     {_describe_training(s.training)}"]),
            f"concurrency  {self.max_concurrent} trial(s) at once",
            f"execution    {self._describe_execution()}",
            f"failures     {self._describe_failures()}",
            f"budget       {_describe_budget(self.schedule)}",
            f"seed         {s.seed}",
            f"wandb        {_describe_wandb(s)}",
        ]
        lines += [f"note         {n}" for n in s.notes]
        return "\n".join(lines)

    def headline(self) -> list[str]:
        """The plan in two lines (and one each for ``gpus_per_worker: auto`` and a warm start), for the head
        of a run's output (``describe`` has it all)."""
        s, r = self.spec, self.spec.resources
        method = _method_named(s)
        open_ended = s.scheduler.open_ended
        if s.scheduler.type == "fifo":
            schedule = (
                "fifo, each program to its end"
                if open_ended
                else f"fifo, {s.scheduler.max_t} {s.scheduler.time_unit}s each"
            )
        elif s.scheduler.population:
            interval, max_t = s.scheduler.perturbation_interval, s.scheduler.max_t
            schedule = f"{s.scheduler.type} (perturbs every {interval} epochs; {max_t} epochs each)"
        elif s.scheduler.type == "pbt_replay":
            epochs = ", ".join(str(c["epoch"]) for c in s.scheduler.schedule)
            schedule = f"pbt_replay (changed after epochs {epochs}; {s.scheduler.max_t} epochs each)"
        else:
            rungs = ", ".join(str(e) for e in self.rungs[:4]) + (", ..." if len(self.rungs) > 4 else "")
            budget = "each program to its end" if open_ended else f"max_t {s.scheduler.max_t}"
            schedule = f"{s.scheduler.type} (rungs at {s.scheduler.time_unit} {rungs}; {budget})"
        gpus = f" + {r.gpus_per_worker:g} GPU" if r.gpus_per_worker else ""
        goal = " and ".join(f"{m.goal} {m.name}" for m in s.metrics) if s.metric.declared else "no metric"
        return [
            f"sweep {s.name}: {self.num_trials} trials, {method} + {schedule}, {goal}",
            f"each trial {r.workers} {'process(es) of the program' if self.runs_program else 'DDP rank(s)'} x "
            f"{r.cpus_per_worker:g} CPU{gpus}; {self.max_concurrent} at once "
            f"on {self.cluster.describe() if self.cluster else 'this machine'}"
            + (
                f"; fused bundles of up to {self.bundle_size}"
                if self.bundle_size > 1
                else "; warm gangs"
                if self.warm_gangs
                else f"; program {self.spec.program or 'of the command'}"
                if self.runs_program
                else "; a fresh Ray Train run per trial"
            ),
            *([self.packing.describe()] if self.packing is not None else []),  # gpus_per_worker: auto
            *([self.bundling.describe()] if self.bundling is not None else []),  # execution.bundle: auto
            *([self.warm.describe()] if self.warm is not None else []),
        ]

    def _describe_task(self) -> list[str]:
        if self.runs_program:
            where = self.spec.directory or "the working directory"
            return [
                f"program      {self.spec.program or '(none: the command names it)'}, run as W&B's agent runs "
                f"it, from {where}",
                f"command      {self.first_command()}   (the first trial's)",
            ]
        return [f"task         {self.task.reference}" + ("" if self.task.task else " (user train_loop_per_worker)")]

    def _describe_failures(self) -> str:
        retries = self.spec.failure.max_failures
        if self.runs_program:
            return f"a failed trial's program starts again up to {retries} time(s)"
        return f"a trial's ranks restart from its last checkpoint up to {retries} time(s)"

    def _describe_execution(self) -> str:
        e = self.spec.execution
        if self.bundle_size > 1:
            return (
                f"fused bundles of up to {self.bundle_size} trials on {self.slots} warm gang(s) of one rank "
                f"({describe_bundles(self.spec)})"
            )
        if self.warm_gangs:
            return (
                f"{self.max_concurrent} warm gang(s) of {self.spec.resources.workers} rank(s), each rebuilt after "
                f"{e.recycle_after_trials} trials or {e.max_memory_growth_mib:g} MiB of growth"
            )
        if self.runs_program:
            return (
                f"{self.spec.resources.workers} process(es) of the program per trial, with torchrun's "
                f"environment (RANK, WORLD_SIZE, MASTER_ADDR, ...)"
            )
        why = "execution.gangs: fresh" if self.task.task is not None else "a train_loop_per_worker runs fresh"
        return f"a fresh Ray Train run per trial ({why})"


def _describe_metric(spec: SweepSpec) -> str:
    m = spec.metric
    if spec.multi_objective:
        return (
            "; ".join(_describe_objective(o) for o in spec.objectives)
            + f" -- {len(spec.objectives)} objectives: the searcher models them all, and the results show the "
            f"Pareto front (the trials that no other trial beats on every objective)"
        )
    if not m.declared:
        return (
            "none: as W&B runs a sweep without one, every trial runs to its end, none is stopped early "
            "or ranked, and the results list what each logged"
        )
    return _describe_objective(m)


def _describe_constraints(spec: SweepSpec) -> str:
    told = (
        "Optuna's sampler is told each trial's violations"
        if spec.method == "optuna"
        else f"{spec.method} is not told of them (only Optuna's samplers take constraints)"
    )
    return (
        ", ".join(c.describe() for c in spec.constraints)
        + f" -- a trial that breaks one (at its last report) is infeasible: never the best or on the front; {told}"
    )


def _describe_objective(m: MetricSpec) -> str:
    return f"{m.name} ({m.goal})" + (
        f", the sweep stops starting trials once it reaches {m.target:g}" if m.target is not None else ""
    )


def _describe_budget(schedule: Schedule) -> str:
    if schedule.open_ended:
        return "set by the program: a trial runs until its program ends (or a rung stops it)"
    expected = schedule.trial_epochs
    approx = "" if schedule.exact else "~"
    shown = f"{approx}{expected:.0f}"
    return f"{shown} trial-{schedule.unit}s expected (at most {schedule.max_trial_epochs} without early stopping)"


def _describe_wandb(spec: SweepSpec) -> str:
    mode = resolve_mode(spec.wandb.mode)
    if mode == "disabled":
        return "disabled"
    where = "/".join(x for x in (spec.wandb.entity, spec.wandb.project or spec.name) if x)
    how = " (runs under EXPERIMENT_DIR/wandb; `wandb sync` uploads them)" if mode == "offline" else ""
    return f"{mode}, project {where}, one run per trial{how}"


def _describe_training(t: TrainingSettings) -> str:
    """The training settings, non-default ones only after the precision (``precision auto, oom_retry``)."""
    defaults = TrainingSettings()
    changed = [
        f"{f.name}={getattr(t, f.name)}"
        for f in fields(t)
        if f.name != "precision" and getattr(t, f.name) != getattr(defaults, f.name)
    ]
    return ", ".join([f"precision {t.precision}", *changed])


def plan_sweep(
    spec: SweepSpec, task: str | Task | Callable[..., Any] | None = None, resumed: bool = False
) -> SweepPlan:
    """Everything about ``spec`` that does not depend on a cluster; never starts Ray.

    Args:
        task: the task object itself (Python API), used instead of resolving ``spec.task``.
        resumed: the plan of a resumed sweep, whose searcher state is restored, the earlier trials of a
            warm start among it: the earlier experiment is not read again (it may be gone).

    Raises:
        SpecError: the searcher cannot express a parameter, the spec asks of its task a metric it never
            reports or a parameter it does not take (:mod:`tune_service.tasks.spec_check`), or its warm
            start cannot be told (:mod:`tune_service.search.warm_start`).
        TaskError: the task cannot be imported or used.
    """
    warm = None if resumed else read_warm_start(spec)
    searcher, num_trials = registry.build_searcher(spec, warm)
    if spec.runs_program and task is None:
        resolved = ResolvedTask(f"program {spec.program or ' '.join(spec.command or ())}")
    else:
        resolved = resolve_task(task if task is not None else spec.task)
    if resolved.task is not None:
        notes = check_spec_against_task(spec, resolved.task, resolved.reference)
        spec = replace(spec, notes=(*spec.notes, *notes))
    schedule = expected_schedule(spec.scheduler, num_trials, bohb=spec.searcher == "bohb")
    plan = SweepPlan(spec, resolved, num_trials, schedule, searcher, warm=warm)
    if spec.limits.progress_s is not None and plan.runs_ray_train:
        raise SpecError(
            [
                Problem(
                    "limits.progress_s",
                    "is watched on warm gangs only; this sweep's trials run "
                    "fresh (a train_loop_per_worker, or execution.gangs: fresh)",
                )
            ]
        )
    if spec.execution.bundle > 1 or spec.execution.bundle_auto:
        unfusable = check_bundles(spec, resolved.task, plan.runs_program, plan.first_trial)
        if unfusable is not None:  # bundle: auto on a task torch.func cannot fuse
            plan = plan.bundled_as(bundle_sizing.alone(unfusable))
    if spec.scheduler.changes_running_trials:
        check_population(spec, resolved.task, plan.runs_program)
    if spec.resources.gpus_auto and resolved.task is None:
        what = "a W&B program" if plan.runs_program else "a train_loop_per_worker"
        raise SpecError(
            [
                Problem(
                    "resources.gpus_per_worker",
                    f"auto measures a Task's first trial with the shared loop; this sweep runs {what}: give "
                    f"the GPU share as a number (0.25: four trials per GPU)",
                )
            ]
        )
    return plan


def make_plan(
    spec: SweepSpec, cluster: ClusterResources | None = None, task: str | Task | Callable[..., Any] | None = None
) -> SweepPlan:
    """:func:`plan_sweep` on a cluster (this machine when ``None``); what ``--dry-run`` prints.

    Raises:
        SpecError, TaskError: as :func:`plan_sweep`.
        CapacityError: one trial does not fit the cluster.
    """
    return plan_sweep(spec, task).on(cluster or local_machine())


#: What a method's name alone does not say.
_METHOD_NOTES = {"bayes": "hyperopt TPE", "optuna": "Optuna's TPE"}


def _method_named(spec: SweepSpec) -> str:
    """The method as the plan prints it: ``bayes (hyperopt TPE)``, ``optuna (Optuna's TPE)``, ``optuna
    (Optuna's NSGA-II, generations of 50)``, ``random``."""
    method = spec.method
    if method == "optuna" and spec.optuna.sampler == "nsga2":
        return f"optuna (Optuna's NSGA-II, generations of {spec.optuna.population_size})"
    return f"{method} ({_METHOD_NOTES[method]})" if method in _METHOD_NOTES else method
