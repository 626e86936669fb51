"""The driver: ``build_tuner(plan)`` is pure (no ``ray.init``, no ``fit``, no file written); ``run`` is
the one place with side effects: it connects to (or starts) Ray, runs the Tuner, and writes the results.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping

from tune_service import redaction
from tune_service.display import LiveView
from tune_service.errors import Problem, SpecError, TuneServiceError
from tune_service.execution.connect import init_ray
from tune_service.execution.bundles import BundleMember, member_name, member_resources, start_broker
from tune_service.execution.fresh_trial import DRIVER_RESOURCES, FreshTrial
from tune_service.execution.gang import GangSettings
from tune_service.execution.plan import SweepPlan, plan_sweep
from tune_service.execution.program_trial import ProgramTrial
from tune_service.execution.resources import from_ray
from tune_service.execution.retiring import RetiredTrials, retires, retiring
from tune_service.execution.stopping import FailureBudget, SweepTimeLimit, TrialTimeLimit, check_main_thread
from tune_service.execution.sweep_trial import SweepTrial
from tune_service.execution.termination import Termination
from tune_service.execution.trial_actors import trial_actors_on_ready_workers
from tune_service.execution.warm_trial import WarmTrial, trial_resources
from tune_service.experiment import layout, saving, stand_ins, state_saves
from tune_service.experiment.lock import DriverLock
from tune_service.experiment.remote import RemoteExperiment, is_remote
from tune_service.experiment.trial_logs import EndedTrialFiles
from tune_service.ray_internals import private, set_tune_trial_environment
from tune_service.results.lineage import with_lineage
from tune_service.results import sweep_result as results
from tune_service.results.progress import ENDED, SweepProgress
from tune_service.search import registry
from tune_service.search.continued import ContinuedSearch, EndedTrial, RunningTrialsReconciled
from tune_service.search.population_journal import PopulationHistory, read_history
from tune_service.search.population_search import PopulationSearch
from tune_service.spec import SweepSpec, load_spec
from tune_service.tasks import SealedTask

DEFAULT_STORAGE = "experiments"
#: ``verbose`` levels of :func:`run` and :func:`resume`: 0 prints nothing; 1 our live view; 2 also Ray's
#: and Ray Train's own output (Tune's tables, what ranks print).
VERBOSE_LIVE, VERBOSE_RAY = 1, 2


def experiment_name(spec: SweepSpec) -> str:
    """The default experiment name: the sweep's name (made a plain directory name) and the start time to
    the millisecond, so runs never collide."""
    now = time.time()  # to the millisecond: two sweeps started in one second get two directories
    stamp = f"{time.strftime('%Y%m%d-%H%M%S', time.localtime(now))}-{int(now * 1000) % 1000:03d}"
    return f"{layout.plain_name(spec.name)}-{stamp}"


@dataclass(frozen=True)
class TunerRecipe:
    """Everything a Ray Tune ``Tuner`` is made of, before it exists. ``create()`` makes the Tuner, which
    writes the experiment directory (Ray's constructor saves ``tuner.pkl`` there)."""

    trainable: Any
    param_space: dict[str, Any]
    tune_config: Any
    run_config: Any

    def create(self):
        from ray import tune

        return tune.Tuner(
            self.trainable, param_space=self.param_space, tune_config=self.tune_config, run_config=self.run_config
        )

    def restore(self, experiment_dir: str | os.PathLike, ended: Mapping[int, EndedTrial] | None = None):
        """The Tuner of an interrupted (or finished) experiment: unfinished trials resume from their
        checkpoints; finished and failed ones stay as they were. The scheduler and the searcher are this
        recipe's (Ray would unpickle the ones saved when the experiment began: a scheduler that knows none
        of its results, and the run_cap the sweep began with); the searcher's state is then restored
        from the experiment, and it creates trials up to the recipe's ``num_samples``
        (:class:`~tune_service.search.continued.ContinuedSearch`), rolling forward over ``ended``: the
        ended trials by number, of which those created after Tune's state was saved are not run again."""
        from ray import tune

        tuner = tune.Tuner.restore(
            str(experiment_dir),
            self.trainable,
            resume_unfinished=True,
            resume_errored=False,
            restart_errored=False,
            param_space=self.param_space,
        )
        # Ray 2.60 has no public setter (the request upstream: docs/development.md)
        restored = private(private(tuner, "_local_tuner"), "_tune_config")
        restored.scheduler = self.tune_config.scheduler
        search = self.tune_config.search_alg
        if not isinstance(search, ContinuedSearch):  # a PopulationSearch is one already
            search = ContinuedSearch(
                search, self.tune_config.num_samples, self.tune_config.max_concurrent_trials, ended
            )
        restored.search_alg = search
        restored.max_concurrent_trials = None  # capped inside ContinuedSearch, as Tune caps a searcher
        return tuner


def build_tuner(
    plan: SweepPlan,
    storage: str | os.PathLike,
    name: str,
    callbacks: list | None = None,
    verbose: int = 1,
    recorded: Mapping[str, Any] | None = None,
    stopper: Any = None,
    program_wandb: Mapping[str, Any] | None = None,
    bundle_broker: str | None = None,
    population_history: PopulationHistory | None = None,
) -> TunerRecipe:
    """The recipe of the Ray Tune ``Tuner`` for ``plan``. Pure: it starts no Ray and writes no file.

    Args:
        storage: the directory (or URI) that holds experiments; the experiment is ``storage/name``.
        callbacks: Tune callbacks (progress, logging) added to the run.
        recorded: for a resumed sweep, what its trials reported (:func:`tune_service.search.replay.read_recorded`),
            from which the scheduler's records are rebuilt.
        stopper: a Tune ``Stopper`` that may end trials (:mod:`~tune_service.execution.stopping`).
        verbose: Tune's own console verbosity (0: silent).
        program_wandb: for a program's trials, what their ``wandb.init`` gets (the sweep's tracker's
            project, group, directory and mode; ``disabled`` when None).
        bundle_broker: for a sweep of bundles (``execution.bundle``), the name of its running broker
            (:func:`~tune_service.execution.bundles.start_broker`).
        population_history: for a resumed population (PBT, PB2), its decisions so far
            (:func:`~tune_service.search.population_journal.read_history`), which it goes on from.
    """
    from ray import tune

    if plan.max_concurrent is None:
        raise TuneServiceError(
            "build_tuner: the plan has no cluster yet; make it with make_plan(spec, cluster) "
            "or plan_sweep(spec).on(cluster)"
        )
    spec = plan.spec
    fingerprints = redaction.Fingerprints.of_environment()  # the driver's secrets, as salted hashes only
    by_steps = spec.scheduler.time_unit == "step"
    shared: dict[str, Any] = dict(
        task=plan.task,
        epochs=None if by_steps else spec.scheduler.max_t,
        max_steps=spec.scheduler.max_t if by_steps else None,
        seed=spec.seed,
        training=spec.training,
        metric=spec.metric.name,
        secrets=fingerprints,
        cpus_per_rank=spec.resources.cpus_per_worker,
        gpus_per_rank=spec.resources.gpus_per_worker,
    )
    template: SweepTrial
    if not plan.runs_ray_train:
        gang = GangSettings(spec.resources, spec.execution, spec.limits.progress_s)
        resources = trial_resources(gang)
        if plan.bundle_size > 1:
            if bundle_broker is None:
                raise TuneServiceError("build_tuner: a sweep of bundles needs its broker (bundles.start_broker)")
            template = BundleMember(**{**shared, "task": SealedTask.of(plan.task)}, broker=bundle_broker)
            resources = member_resources(spec.resources, plan.bundle_size)
        elif plan.runs_program:
            template = ProgramTrial(
                **shared,
                gang=gang,
                program=spec.program or "",
                command=spec.command,
                directory=spec.directory,
                experiment=name,
                wandb_run=dict(program_wandb or {"mode": "disabled"}),
                key_parameters=tuple(p.name for p in spec.parameters if p.is_searched),
            )
        else:
            template = WarmTrial(
                **{**shared, "task": SealedTask.of(plan.task)},
                gang=gang,
                follows_handed=spec.scheduler.changes_running_trials,
            )
        # A failed trial is retried by Tune (a warm one from its newest checkpoint, on a new gang; a
        # program from its start); a fresh trial retries inside its Ray Train run instead.
        failure = tune.FailureConfig(max_failures=spec.failure.max_failures)
    else:
        template = FreshTrial(**shared, resources=spec.resources, max_failures=spec.failure.max_failures)
        resources, failure = DRIVER_RESOURCES, None

    def run_trial(config: dict[str, Any]) -> None:
        set_tune_trial_environment()
        with redaction.redacted_errors(fingerprints):  # before Ray writes the error (error.txt, logs)
            template(config)

    search: Any = plan.searcher
    concurrent: int | None = plan.max_concurrent
    if spec.scheduler.population:
        # PBT compares a population that exists at once: all of it is created, the cluster runs what fits
        # and the rest wait (paused or pending) for their turn; other schedulers get trials as slots free.
        concurrent = plan.num_trials
    if spec.scheduler.changes_running_trials:  # a paused trial keeps its actor (see PopulationSearch)
        search, concurrent = PopulationSearch(search, plan.num_trials, concurrent), None
    tune_config = tune.TuneConfig(
        metric=spec.metric.name,
        mode=spec.metric.mode,
        search_alg=search,
        scheduler=registry.build_scheduler(
            spec, recorded, takes_turns=plan.max_concurrent < plan.num_trials, population_history=population_history
        ),
        num_samples=plan.num_trials,
        max_concurrent_trials=concurrent,
        trial_dirname_creator=lambda trial: f"{layout.TRIAL_DIR_PREFIX}{trial.trial_id}",
        # a bundle member's number reaches its actor in its name: the order members report in
        trial_name_creator=member_name if plan.bundle_size > 1 else None,
        # A warm trial's actor (and with it its placement group and gang) serves the slot's next trial.
        reuse_actors=plan.warm_gangs,
    )
    from tune_service.experiment.trial_logs import trial_loggers

    run_config = tune.RunConfig(
        name=name,
        storage_path=str(storage) if is_remote(storage) else str(Path(storage).resolve()),
        callbacks=[*trial_loggers(), *(callbacks or [])],
        stop=stopper,
        verbose=verbose,
        failure_config=failure,
        checkpoint_config=_checkpoints_kept(spec, plan.warm_gangs),
    )
    # The searcher hands each trial its whole config (constants included), so Tune's param_space is empty.
    return TunerRecipe(tune.with_resources(run_trial, resources), {}, tune_config, run_config)


def _checkpoints_kept(spec: SweepSpec, warm_gangs: bool) -> Any:
    """Tune's checkpoint config: on warm gangs the newest two (the newest is all a resumed trial needs; one
    more survives a cut-off copy), except under PBT, which keeps every one: a paused trial may exploit
    another's checkpoint of an earlier perturbation after that trial has reported two more."""
    from ray import tune

    if not warm_gangs:
        return None
    return tune.CheckpointConfig(num_to_keep=None if spec.scheduler.population else 2)


def run(
    spec: str | os.PathLike | Mapping[str, Any] | SweepSpec,
    *,
    address: str | None = None,
    storage: str | os.PathLike = DEFAULT_STORAGE,
    name: str | None = None,
    task: Any = None,
    overrides: Mapping[str, Any] | None = None,
    verbose: int = 1,
    **more_overrides: Any,
) -> results.SweepResult:
    """Run a sweep to the end and return its :class:`~tune_service.results.sweep_result.SweepResult`.

    Args:
        spec: a spec file path, a dict in the spec format, or a loaded :class:`SweepSpec`.
        address: a Ray cluster to connect to (``auto`` or ``HOST:PORT``); ``None`` starts an embedded
            local Ray (or uses the one this process already started).
        storage: where experiments are written; the experiment directory is ``storage/name``. A URI
            (``s3://bucket/prefix``) puts the experiment on remote storage (:mod:`~tune_service.experiment.remote`).
        name: the experiment name; by default the spec's name and the start time.
        task: a Task object or train function to use instead of the spec's ``task`` string.
        overrides / more_overrides: dotted spec keys to set, e.g. ``run_cap=4`` or
            ``overrides={"scheduler.max_t": 3}``.
        verbose: 0 prints nothing; 1 the live view (:mod:`tune_service.display.live`); 2 also Ray's and
            Ray Train's own output.

    An interrupted sweep (Ctrl+C) returns what it has, with ``interrupted`` set; :func:`resume` finishes it.

    Raises:
        TuneServiceError: the spec is invalid, the task cannot be used, or a trial cannot fit the cluster.
    """
    if not isinstance(spec, SweepSpec):
        spec = load_spec(spec, {**(overrides or {}), **more_overrides})
    elif overrides or more_overrides:
        raise TuneServiceError("overrides: apply them when loading the spec (load_spec(path, overrides))")
    redaction.refuse_secrets_in_spec(spec.source)  # what a spec holds is saved, by us and by Ray
    name = name or experiment_name(spec)
    if problem := layout.plain_name_problem(name):
        raise TuneServiceError(f"name: {problem}")
    if is_remote(storage):
        experiment = RemoteExperiment.new(str(storage), name)
        try:
            return _execute(
                spec, experiment.mirror, address=address, task=task, verbose=verbose, restore=False, remote=experiment
            )
        finally:
            experiment.close()
    experiment_dir = _new_experiment_dir(storage, name)
    return _execute(spec, experiment_dir, address=address, task=task, verbose=verbose, restore=False)


def resume(
    experiment_dir: str | os.PathLike,
    *,
    address: str | None = None,
    task: Any = None,
    verbose: int = 1,
    run_cap: int | None = None,
) -> results.SweepResult:
    """Finish an interrupted sweep, or continue a finished one with more trials: finished trials are
    kept as they are (never rerun), interrupted ones continue from their last checkpoints, and the
    searcher goes on from its saved state up to ``run_cap`` trials in all.

    Args:
        experiment_dir: the directory :func:`run` wrote (``storage/name``), or its URI on remote storage.
        task: the task object, if the sweep was run with one (``run(..., task=...)``).
        run_cap: a new, larger ``run_cap`` (None: the sweep's own); the experiment's spec keeps it, for
            the next resume.

    Raises:
        TuneServiceError: the directory is not a tune-service experiment, or its task object is missing.
        SpecError: ``run_cap`` is not larger than the sweep's, or the sweep walks a whole grid.
    """
    remote = RemoteExperiment.existing(str(experiment_dir)) if is_remote(experiment_dir) else None
    local_dir = remote.mirror if remote else Path(experiment_dir).resolve()
    try:
        saved = layout.read_sweep_file(local_dir)
        if saved is None:
            raise TuneServiceError(
                f"resume: {str(experiment_dir)!r} is not a tune-service experiment directory (no {layout.SWEEP_FILE})"
            )
        if saved.get("task_object") and task is None:
            raise TuneServiceError(
                f"task: this sweep ran with a task object ({saved['task_object']}); "
                f"pass the same task to resume(..., task=...)"
            )
        spec = replace(load_spec(saved["spec"]), directory=saved.get("directory"))
        if run_cap is not None:
            spec = _with_larger_run_cap(spec, run_cap)
        return _execute(
            spec,
            local_dir,
            address=address,
            task=task,
            verbose=verbose,
            restore=True,
            remote=remote,
            spec_changed=run_cap is not None,
        )
    finally:
        if remote is not None:
            remote.close()


def _with_larger_run_cap(spec: SweepSpec, run_cap: int) -> SweepSpec:
    """``spec`` with ``run_cap`` raised to ``run_cap``, validated as the spec's own would be."""
    if spec.run_cap is None:
        raise SpecError(
            [Problem("run_cap", f"this sweep runs its whole grid: it has no more trials to add, got {run_cap!r}")]
        )
    if isinstance(run_cap, bool) or not isinstance(run_cap, int) or run_cap <= spec.run_cap:
        raise SpecError(
            [
                Problem(
                    "run_cap",
                    f"a resume can raise run_cap above the sweep's {spec.run_cap}, not keep or lower it, "
                    f"got {run_cap!r}",
                )
            ]
        )
    return replace(load_spec({**spec.source, "run_cap": run_cap}), directory=spec.directory)


def _ended_trials(previous: results.SweepResult | None, recorded: Mapping[str, Any]) -> dict[int, EndedTrial]:
    """A resumed sweep's ended trials (by the service's records) by number, with what each reported
    (``recorded``: :func:`~tune_service.search.replay.read_recorded`, by trial id)."""
    ended = {}
    for trial in previous.trials if previous else ():
        if trial.status in ENDED and trial.number is not None:
            reported = recorded.get(trial.trial_id)
            ended[trial.number] = EndedTrial(
                trial.trial_id, trial.config, tuple(reported.results) if reported else (), trial.status == "failed"
            )
    return ended


def _execute(
    spec: SweepSpec,
    experiment_dir: Path,
    *,
    address: str | None,
    task: Any,
    verbose: int,
    restore: bool,
    remote: RemoteExperiment | None = None,
    spec_changed: bool = False,
) -> results.SweepResult:
    """Run (or restore and continue) the experiment in ``experiment_dir`` and write its results; with
    ``remote``, ``experiment_dir`` is its mirror, and the result names the remote experiment.
    ``spec_changed``: a restored experiment's spec differs from the one it was saved with (a larger
    ``run_cap``), and is saved in its place once the plan holds."""
    import ray

    from tune_service import tracking
    from tune_service.experiment import last_good
    from tune_service.search import replay
    from tune_service.experiment.callbacks import FinalStatuses

    plan = plan_sweep(spec, task, resumed=restore)  # every refusal that needs no cluster comes before Ray starts
    ending = {"limits.sweep_s": spec.limits.sweep_s, "failure.max_failed_trials": spec.failure.max_failed_trials}
    for what in (what for what, given in ending.items() if given is not None):
        check_main_thread(what)  # they end the sweep as Ctrl+C does
    lock = DriverLock(experiment_dir)  # one driver per experiment
    if restore:
        lock.acquire()  # a second resume is refused before Ray starts
    started_here = not ray.is_initialized()
    if started_here:
        try:
            init_ray(address, log_to_driver=verbose >= VERBOSE_RAY, state_api=plan.runs_ray_train)
        except BaseException:
            lock.release()
            raise
    # wandb keeps its debug logs in the experiment directory: on a full disk Python's logging would
    # print a traceback for every line it cannot write there (its documented production setting).
    logging_errors_raised, logging.raiseExceptions = logging.raiseExceptions, False
    tracker = tracking.create_tracker(spec, experiment_dir.name, experiment_dir)
    statuses = FinalStatuses(experiment_dir.name)
    state_keeper = last_good.LastGoodState(experiment_dir)
    progress = budget = timer = broker = reconciled = retired = None
    try:
        cluster = from_ray()
        # gpus_per_worker: auto and execution.bundle: auto measured, then the concurrency
        plan = plan.packed(cluster).bundled(cluster).on(cluster)
        if not restore:  # the plan holds: from here on the experiment directory exists
            lock.acquire()
        if not restore or spec_changed:
            _write_sweep_file(experiment_dir, spec, task)
            if remote is not None:
                remote.upload(layout.SWEEP_FILE)
        had_summary = restore and (experiment_dir / layout.SUMMARY_FILE).is_file()
        previous = results.load(experiment_dir) if had_summary else None
        view = None
        if verbose >= VERBOSE_LIVE:
            view = LiveView([*plan.headline(), f"experiment {remote.uri if remote else experiment_dir}"], plan.rungs)
        observers = [observer for observer in (view, remote) if observer is not None]
        # where the trials' checkpoints are: the experiment's storage (path, pyarrow filesystem)
        trials_stored = (remote.path, remote.filesystem) if remote else (str(experiment_dir), None)
        # a resumed population goes on from the decisions it wrote down
        population_history = read_history(experiment_dir, *trials_stored) if restore else None
        progress = SweepProgress(
            experiment_dir,
            spec.metric.name,
            spec.metric.mode,
            spec.scheduler.max_t,
            plan.num_trials,
            observers=observers,
            previous=previous,
            time_unit=spec.scheduler.time_unit,
            lineages=population_history.lineages() if population_history else None,
            objectives=spec.objective_modes,
            constraints=spec.constraints,
        )
        progress.start()
        if remote is not None:
            saving.FailingSaves(f"{layout.SUMMARY_FILE} to {remote.uri}").attempt(
                lambda: remote.upload(layout.SUMMARY_FILE)
            )
        limit = spec.failure.failed_trials_limit(plan.num_trials)
        budget = FailureBudget(experiment_dir.name, limit, progress) if limit else None
        timer = SweepTimeLimit(experiment_dir.name, spec.limits.sweep_s) if spec.limits.sweep_s else None
        ends = [callback for callback in (budget, timer) if callback is not None]
        # a resumed searcher counts as running only the trials Tune restored unfinished
        reconciled = RunningTrialsReconciled(f"{experiment_dir.name}/running", plan.searcher)
        # under FIFO and ASHA a trial that has ended leaves Tune's controller: the driver stays flat
        if retires(spec):
            uploaded = (lambda: remote.log_uploaded) if remote is not None else (lambda: True)
            retired = RetiredTrials(experiment_dir.name, progress, statuses, uploaded)
        # an ended trial's result files are in storage before its line is in the log of ended trials
        ended_files = EndedTrialFiles(f"{experiment_dir.name}/ended_files")
        callbacks: list[Any] = [statuses, state_keeper, reconciled, ended_files, progress, *ends]
        callbacks += [c for c in (retired, tracker) if c is not None]
        recorded = None
        if restore:
            last_good.reinstate(experiment_dir)  # over a state file that a killed driver left half-copied
            # where Tune's state may name a checkpoint its num_to_keep deleted before the driver died
            stand_ins.put_stand_ins(*trials_stored)
            recorded = replay.read_recorded(
                experiment_dir,
                (remote.filesystem, remote.path) if remote else None,
                spec.scheduler.time_attr,
                ended={t.trial_id for t in previous.trials if t.status in ENDED} if previous else frozenset(),
            )
        broker_name = None
        if plan.bundle_size > 1:
            broker, broker_name = start_broker(
                spec, plan.bundle_size, plan.slots, redaction.Fingerprints.of_environment()
            )
        recipe = build_tuner(
            plan,
            remote.storage_uri if remote else experiment_dir.parent,
            experiment_dir.name,
            callbacks=callbacks,
            verbose=1 if verbose >= VERBOSE_RAY else 0,
            recorded=recorded,
            stopper=TrialTimeLimit(spec.limits.trial_s) if spec.limits.trial_s else None,
            program_wandb=tracker.program_run() if tracker is not None else None,
            bundle_broker=broker_name,
            population_history=population_history,
        )
        # trials that ended after Tune's last save of its state are rolled forward, not run again
        ended = _ended_trials(previous, recorded or {}) if restore and retires(spec) else {}
        tuner = recipe.restore(remote.uri if remote else experiment_dir, ended) if restore else recipe.create()
        # Tune's newer console output prints its experiment header even at verbose=0; its older one is
        # silent there (our view is the output unless verbose=2 asks for Ray's).
        quiet = {} if verbose >= VERBOSE_RAY else {"RAY_AIR_NEW_OUTPUT": "0"}
        settings = _environment(
            TUNE_GLOBAL_CHECKPOINT_S=state_saves.STATE_SAVE_PERIOD_S,
            **quiet,
        )
        # Warm and program trials run nothing of Ray Train in their processes; their actors can start
        # on the workers Ray keeps ready (see trial_actors).
        ready_workers = trial_actors_on_ready_workers() if not plan.runs_ray_train else contextlib.nullcontext()
        resume_line = f"resume with: tune-run --resume {remote.uri if remote else experiment_dir}"
        termination = Termination(progress, resume_line)
        with (
            termination,
            settings,
            _ray_logs_quiet(verbose < VERBOSE_RAY, experiment_dir / layout.DRIVER_LOG_FILE),
            ready_workers,
            state_saves.saves_on_their_period(),
            retiring() if retired is not None else contextlib.nullcontext(),
            view or contextlib.nullcontext(),
        ):
            grid = tuner.fit()
        if restore:
            stand_ins.remove_stand_ins(*trials_stored)
        # A trial Tune terminated without completing it (the sweep ended by a limit, as Ctrl+C ends it)
        # is still running for our progress: it was cut, and resume continues it.
        cut = statuses.unfinished | {t.trial_id for t in progress.running}
        held = results.collect(  # the trials Tune still holds; those that left it are in the progress's log
            grid,
            str(experiment_dir),
            spec.metric.name,
            spec.metric.mode,
            spec.scheduler.max_t,
            unfinished=cut,
            time_unit=spec.scheduler.time_unit,
            objectives=spec.objective_modes,
            constraints=spec.constraints,
            numbers=statuses.numbers,
        )
        outcome = progress.final(held)
        outcome = with_lineage(outcome, progress.exploited)  # PBT's exploits, which only the progress saw
        outcome = replace(outcome, extra={**outcome.extra, "max_t": spec.scheduler.max_t, "rungs": list(plan.rungs)})
        if termination.signal_name is not None:
            outcome = replace(outcome, extra={**outcome.extra, results.SIGNAL_KEY: termination.signal_name})
        if budget is not None and budget.exhausted:
            outcome = replace(outcome, extra={**outcome.extra, results.STOPPED_KEY: budget.reason()})
        elif timer is not None and timer.reached:
            outcome = replace(
                outcome,
                extra={
                    **outcome.extra,
                    results.TIME_LIMIT_KEY: f"the sweep ran its limit of {spec.limits.sweep_s:g} s (limits.sweep_s)",
                },
            )
        if plan.packing is not None:  # what gpus_per_worker: auto chose, and from what
            outcome = replace(outcome, extra={**outcome.extra, "packing": plan.packing.as_dict()})
        if plan.bundling is not None:  # what execution.bundle: auto chose, and from what
            outcome = replace(outcome, extra={**outcome.extra, "bundle": plan.bundling.as_dict()})
        if tracker is not None:
            outcome = replace(outcome, extra={**outcome.extra, "wandb": tracker.describe()})
            if not outcome.interrupted:
                tracker.log_sweep(outcome)
        if remote is not None:  # the summary names the remote experiment, and is written in its mirror
            outcome = remote.as_uploaded(outcome)
        saving.save_at_the_end(layout.SUMMARY_FILE, lambda: results.write(outcome, experiment_dir))
        if remote is not None:
            saving.save_at_the_end(f"the experiment's files to {remote.uri}", remote.upload_own_files)
        return outcome
    finally:
        if broker is not None:  # its gangs go with it
            ray.kill(broker)
        lock.release()
        statuses.release()
        state_keeper.release()
        for callback in (progress, budget, timer, reconciled, retired):
            if callback is not None:
                callback.release()
        if tracker is not None:
            tracker.close()
            if remote is not None:  # the runs' last files, written as they finished
                saving.FailingSaves(f"wandb's runs to {remote.uri}").attempt(lambda: remote.upload("wandb"))
        logging.raiseExceptions = logging_errors_raised
        if started_here:
            ray.shutdown()


@contextlib.contextmanager
def _ray_logs_quiet(quiet: bool, log_path: Path):
    """While the sweep runs, Ray's own log messages below ERROR stay out of the console (the live view
    is the output; ``verbose=2`` shows them), and so do Tune's failed state saves (said once instead,
    :class:`~tune_service.experiment.saving.TuneStateSaveErrors`) and the traceback Tune logs for each
    failed trial (about 40 lines each, where the live view says the error in one): those go to the
    experiment's ``driver.log``."""
    ray_logger = logging.getLogger("ray")
    previous = ray_logger.level
    state_saves = saving.TuneStateSaveErrors()
    logging.getLogger(saving.TuneStateSaveErrors.LOGGER).addFilter(state_saves)
    trial_errors = _TrialErrorsToFile(log_path)
    if quiet:
        ray_logger.setLevel(logging.ERROR)
        logging.getLogger(_TrialErrorsToFile.LOGGER).addFilter(trial_errors)
    try:
        yield
    finally:
        ray_logger.setLevel(previous)
        logging.getLogger(saving.TuneStateSaveErrors.LOGGER).removeFilter(state_saves)
        logging.getLogger(_TrialErrorsToFile.LOGGER).removeFilter(trial_errors)
        trial_errors.close()


class _TrialErrorsToFile(logging.Filter):
    """Takes Tune's "Trial task failed" records (with their tracebacks) off the console, into a file."""

    #: The logger of Tune's controller, which logs a failed trial's error.
    LOGGER = "ray.tune.execution.tune_controller"

    def __init__(self, path: Path):
        super().__init__()
        self.path = path
        self.handler: logging.FileHandler | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith("Trial task failed"):
            return True
        try:
            if self.handler is None:
                self.handler = logging.FileHandler(self.path, encoding="utf-8", delay=True)
                self.handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
            self.handler.emit(record)
        except OSError:
            pass  # a full disk: the trial's one line is still shown, and its error.txt kept by Tune
        return False

    def close(self) -> None:
        if self.handler is not None:
            self.handler.close()


@contextlib.contextmanager
def _environment(**defaults: str):
    """Environment variables set while the block runs, unless the user set them already."""
    added = {k: v for k, v in defaults.items() if k not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for key in added:
            os.environ.pop(key, None)


def _write_sweep_file(experiment_dir: Path, spec: SweepSpec, task: Any) -> None:
    """What :func:`resume` needs: the spec as loaded (overrides applied) and whether a task object was used."""
    saved = redaction.redact(
        {"spec": spec.source, "task_object": None if task is None else repr(task)}, by_name=False
    )  # secret values out; resume needs the rest as it is
    layout.write_sweep_file(experiment_dir, saved["spec"], saved["task_object"], spec.directory)


def _new_experiment_dir(storage: str | os.PathLike, name: str) -> Path:
    path = Path(storage).resolve() / name
    if path.exists() and any(path.iterdir()):
        raise TuneServiceError(
            f"name: experiment directory {str(path)!r} already exists and is not empty; "
            f"choose another --name (a finished trial is never overwritten)"
        )
    return path
