"""The search-quality benchmark's contenders, each a searcher and a scheduler behind
:class:`bench.search.search_simulation.Contender`.

- Ours: the Tune searcher and scheduler objects a sweep builds from its spec
  (``tune_service.search.registry``), driven through Tune's own searcher and scheduler calls
  (``suggest``, ``on_trial_add``, ``choose_trial_to_run``, ``on_trial_result``, ``on_trial_complete``,
  and for HyperBand's pauses the controller calls its brackets make), with the trial count a sweep of that
  budget would be given (``bench.search.known_optimum.sweep_spec``: as many trials as the scheduler's expected
  schedule fits in the budget) and the sweep's concurrency cap.
- Optuna: a study with a sampler (TPE, GP) and a pruner (successive halving, Hyperband, none), through
  its ask-and-tell interface; every trial epoch is ``trial.report(value, epoch)`` and
  ``trial.should_prune()``.
- Syne Tune: its asynchronous multi-fidelity schedulers, ASHA and BOHB (ASHA with a TPE-like model),
  through the calls its own tuner makes (``suggest``, ``on_trial_add``, ``on_trial_result``,
  ``on_trial_complete``). Its ASHA with CQR needs huggingface_hub, and with BORE takes 7 s a run here
  (three times any other): not in the set.
- The one-epoch baseline ("Is One Epoch All You Need For Multi-Fidelity Hyperparameter Optimization?",
  Egele, Guyon, Sun and Balaprakash, 2023), which recent work says every multi-fidelity method must beat:
  random configurations trained one epoch each, then the best ``K`` of them trained on to ``max_t``. On the
  same budget as every contender: as many first epochs as leave room for the ``K`` (``budget - K * (max_t -
  1)``); ``K`` = 3, the paper's smallest.
- DEHB (Awad, Mallik and Hutter, "DEHB: Evolutionary Hyperband for Scalable, Robust and Efficient
  Hyperparameter Optimization", IJCAI 2021), through its ask-and-tell interface: each job is a
  configuration trained for the fidelity (1, 3, 9 or 27 epochs) DEHB's brackets give it, from scratch,
  and told when that many epochs are done. Where the ``dehb`` package is not installed (its release pins
  numpy < 2; see docs/benchmarks.md for how it is installed beside numpy 2) it is left out, and said so.
"""

from __future__ import annotations

import logging
import warnings
from typing import Any

from bench.search.search_simulation import PAUSE, Problem

#: Ours: name -> (method, scheduler): each searcher with the schedulers a sweep offers it (BOHB: its
#: HyperBand).
OURS = {
    "ours: TPE + ASHA": ("hyperopt", "asha"), "ours: TPE + HyperBand": ("hyperopt", "hyperband"),
    "ours: TPE + FIFO": ("hyperopt", "fifo"),
    "ours: BOHB + HyperBand": ("bohb", "hyperband"),
    "ours: Optuna TPE + ASHA": ("optuna", "asha"),
    "ours: random + ASHA": ("random", "asha"), "ours: random + HyperBand": ("random", "hyperband"),
    "ours: random + FIFO": ("random", "fifo"),
}
#: The reference for our BOHB: hpbandster's model, as ``method: bohb`` ran it until the project built its
#: own (bench.search.bohb_reference; hpbandster and ConfigSpace of the ``peers`` extra).
HPBANDSTER_BOHB = "hpbandster: BOHB + HyperBand"
#: Optuna's: name -> (sampler, pruner).
OPTUNA = {
    "optuna: TPE + successive halving": ("tpe", "sha"), "optuna: TPE + Hyperband": ("tpe", "hyperband"),
    "optuna: TPE": ("tpe", None), "optuna: GP": ("gp", None),
}
#: Syne Tune's: name -> its scheduler class in syne_tune.optimizer.baselines.
SYNE_TUNE = {"syne tune: ASHA": "ASHA", "syne tune: BOHB": "BOHB"}
#: DEHB, where installed: name -> nothing to choose (its own brackets and evolution).
DEHB_CONTENDERS = {"dehb: DEHB": None}
#: The baselines: name -> how many of the first epoch's configurations train on (the one-epoch baseline's K).
BASELINES = {"baseline: one epoch, top 3": 3}
#: The reduction factor every early-stopping contender uses (ASHA's, Optuna's pruners', DEHB's).
ETA = 3


class _Trial:
    """What Tune's schedulers read of a trial: its id, its status (HyperBand's brackets pause, resume and
    stop trials by it), whether it is saving (never, here) and its last result."""

    def __init__(self, trial_id: str, status: str):
        self.trial_id = trial_id
        self.status = status
        self.is_saving = False
        self.last_result: dict[str, Any] = {}

    def __repr__(self) -> str:
        return self.trial_id


class TuneContender:
    """One of our methods: the searcher and scheduler a sweep of this budget builds, driven as Tune's
    controller drives them: a new trial is created pending from the searcher when none is pending, the
    scheduler picks the trial to run (``choose_trial_to_run``), which runs until the scheduler stops or
    pauses it; a paused trial resumes when the scheduler picks it again (HyperBand's brackets)."""

    def __init__(self, problem: Problem, method: str, scheduler: str, seed: int, max_t: int, budget_trials: int,
                 workers: int, hpbandster: bool = False, warm_start: str | None = None, run_cap: int | None = None,
                 priors: dict[str, Any] | None = None, objectives: tuple[str, ...] = ()):
        from ray.tune.schedulers import TrialScheduler

        from bench.search.known_optimum import sweep_spec
        from tune_service.search import registry
        from tune_service.search.warm_start import read_warm_start
        from tune_service.spec import load_spec

        spec = sweep_spec(problem.name, method, scheduler != "fifo", seed, {"max_t": max_t, "budget": budget_trials},
                          problem.bounds, scheduler, objectives)
        #: What a trial reports: ``value``, or one value per objective (all minimised).
        self.reported = objectives or ("value",)
        overrides = {k: v for k, v in {"warm_start": warm_start, "run_cap": run_cap, "priors": priors}.items()
                     if v is not None}
        if overrides:  # a warm start is read below as a sweep's plan reads it
            spec = load_spec({**spec.source, **overrides})
        self.searcher, self.trials_left = registry.build_searcher(spec, read_warm_start(spec))
        if hpbandster:  # the same sweep, on hpbandster's model
            from bench.search.hpbandster_bohb import hpbandster_bohb

            self.searcher = hpbandster_bohb(spec)
        self.scheduler = registry.build_scheduler(spec)
        self.searcher.set_search_properties(self.reported[0], "min", {})  # several objectives: set already
        self.searcher.set_max_concurrency(workers)  # as the sweep's max_concurrent_trials
        self.scheduler.set_search_properties(self.reported[0], "min")  # Tune's metric: the first objective
        self.time_attr = spec.scheduler.time_attr
        self.decisions = {TrialScheduler.CONTINUE: True, TrialScheduler.STOP: False, TrialScheduler.PAUSE: PAUSE}
        self.started = 0
        self.trials: dict[str, _Trial] = {}  # every trial, by id
        self.configs: dict[str, dict[str, float]] = {}
        self.controller = _Controller(self)

    def start(self) -> tuple[str, dict[str, float]] | None:
        from ray.tune.experiment import Trial

        # Tune's step: the searcher's queue topped up first (Tune holds one pending trial from a searcher,
        # TUNE_MAX_PENDING_TRIALS_PG's "auto"), then the scheduler picks the trial to run.
        if not any(trial.status == Trial.PENDING for trial in self.trials.values()):
            self._add_pending()
        trial = self.scheduler.choose_trial_to_run(self.controller)
        if trial is None:
            return None
        trial.status = Trial.RUNNING
        return trial.trial_id, self.configs[trial.trial_id]

    def _add_pending(self) -> bool:
        """A new pending trial from the searcher, as Tune adds one; False when there is none."""
        from ray.tune.experiment import Trial

        if self.trials_left <= 0:
            return False  # Tune's num_samples: the sweep's trial count
        trial = _Trial(f"t{self.started:05d}", Trial.PENDING)
        config = self.searcher.suggest(trial.trial_id)
        if not isinstance(config, dict):
            return False  # FINISHED, or nothing now (the concurrency cap)
        self.trials_left -= 1
        self.started += 1
        self.trials[trial.trial_id], self.configs[trial.trial_id] = trial, config
        self.scheduler.on_trial_add(self.controller, trial)
        return True

    def _result(self, epoch: int, value: Any) -> dict[str, Any]:
        values = dict(zip(self.reported, value, strict=True)) if len(self.reported) > 1 else {"value": value}
        return {**values, "epoch": epoch, "training_iteration": epoch, self.time_attr: epoch}

    def report(self, trial_id: str, epoch: int, value: float) -> bool | str:
        from ray.tune.experiment import Trial

        # In Tune's order: the scheduler decides; the searcher sees the result unless the trial stops.
        trial = self.trials[trial_id]
        trial.last_result = result = self._result(epoch, value)
        decision = self.decisions[self.scheduler.on_trial_result(self.controller, trial, result)]
        if decision is not False:
            self.searcher.on_trial_result(trial_id, result)
        if decision == PAUSE:
            trial.status = Trial.PAUSED
        return decision

    def end(self, trial_id: str, epoch: int, value: float, completed: bool) -> None:
        from ray.tune.experiment import Trial

        # A running trial that ends, stopped or complete: both hear of it with its last result, as in Tune.
        trial, result = self.trials[trial_id], self._result(epoch, value)
        self.scheduler.on_trial_complete(self.controller, trial, result)
        self.searcher.on_trial_complete(trial_id, result)
        trial.status = Trial.TERMINATED


class _Controller:
    """What Tune's schedulers call on Tune's controller: its trials, stopping a paused or pending trial
    (as ``TuneController.stop_trial`` does), the searcher (HyperBand-for-BOHB tells it of pauses), and
    marking a trial's status to be saved (nothing is saved here)."""

    def __init__(self, contender: TuneContender):
        self._contender = contender
        self.search_alg = contender  # what HyperBand-for-BOHB reads: ``search_alg.searcher``

    def get_trials(self) -> list[_Trial]:
        return list(self._contender.trials.values())

    def stop_trial(self, trial: _Trial) -> None:
        from ray.tune.experiment import Trial

        if trial.status in (Trial.TERMINATED, Trial.ERROR):
            return
        if trial.status == Trial.RUNNING:  # a scheduler stops a running trial by its answer, not this way
            raise AssertionError(f"the scheduler stopped running trial {trial.trial_id} through the controller")
        self._contender.scheduler.on_trial_remove(self, trial)
        self._contender.searcher.on_trial_complete(trial.trial_id)
        trial.status = Trial.TERMINATED

    def _mark_trial_to_checkpoint(self, trial: _Trial) -> None:
        pass


class OptunaContender:
    """An Optuna study (sampler and pruner) through ask and tell."""

    def __init__(self, problem: Problem, sampler: str, pruner: str | None, seed: int, max_t: int):
        import optuna

        optuna.logging.set_verbosity(logging.WARNING)
        samplers = {"tpe": lambda: optuna.samplers.TPESampler(seed=seed),
                    "gp": lambda: optuna.samplers.GPSampler(seed=seed)}
        pruners = {"sha": lambda: optuna.pruners.SuccessiveHalvingPruner(min_resource=1, reduction_factor=ETA),
                   "hyperband": lambda: optuna.pruners.HyperbandPruner(
                       min_resource=1, max_resource=max_t, reduction_factor=ETA),
                   None: optuna.pruners.NopPruner}
        # Named: the Hyperband pruner assigns brackets by a hash of the study name (random when unnamed).
        self.study = optuna.create_study(study_name=f"seed-{seed}", direction="minimize", sampler=samplers[sampler](),
                                         pruner=pruners[pruner]())
        self.bounds = problem.bounds
        self.open: dict[int, Any] = {}

    def start(self) -> tuple[int, dict[str, float]]:
        trial = self.study.ask()
        config = {name: trial.suggest_float(name, low, high) for name, (low, high) in self.bounds.items()}
        self.open[trial.number] = trial
        return trial.number, config

    def report(self, trial_id: int, epoch: int, value: float) -> bool:
        trial = self.open[trial_id]
        trial.report(value, epoch)
        return not trial.should_prune()

    def end(self, trial_id: int, epoch: int, value: float, completed: bool) -> None:
        import optuna

        trial = self.open.pop(trial_id)
        if completed:
            self.study.tell(trial, value)
        else:
            self.study.tell(trial, state=optuna.trial.TrialState.PRUNED)


class SyneTuneContender:
    """A Syne Tune scheduler, as its tuner drives it."""

    def __init__(self, problem: Problem, scheduler: str, seed: int, max_t: int):
        from syne_tune.config_space import uniform
        from syne_tune.optimizer import baselines
        from syne_tune.optimizer.scheduler import SchedulerDecision

        logging.getLogger("syne_tune").setLevel(logging.ERROR)  # it warns of arguments its own baselines pass
        warnings.filterwarnings("ignore", category=FutureWarning, module="pandas")  # pandas warns for it
        space = {name: uniform(low, high) for name, (low, high) in problem.bounds.items()}
        self.scheduler = getattr(baselines, scheduler)(space, metric="value", time_attr="epoch", max_t=max_t,
                                                       do_minimize=True, random_seed=seed, grace_period=1,
                                                       reduction_factor=ETA)
        self.go_on = SchedulerDecision.CONTINUE
        self.names = list(problem.bounds)
        self.trials: dict[int, Any] = {}

    def start(self) -> tuple[int, dict[str, float]] | None:
        from datetime import datetime

        from syne_tune.backend.trial_status import Trial

        suggestion = self.scheduler.suggest()
        if suggestion is None:
            return None
        trial = Trial(trial_id=len(self.trials), config=suggestion.config, creation_time=datetime.now())
        self.trials[trial.trial_id] = trial
        self.scheduler.on_trial_add(trial)
        return trial.trial_id, {name: suggestion.config[name] for name in self.names}

    def report(self, trial_id: int, epoch: int, value: float) -> bool:
        decision = self.scheduler.on_trial_result(self.trials[trial_id], {"value": value, "epoch": epoch})
        return decision == self.go_on

    def end(self, trial_id: int, epoch: int, value: float, completed: bool) -> None:
        if completed:  # a stopped trial is only stopped, as Syne Tune's tuner does it
            self.scheduler.on_trial_complete(self.trials[trial_id], {"value": value, "epoch": epoch})


class DEHBContender:
    """DEHB through ask and tell: a job runs its configuration for the job's fidelity, then is told."""

    #: Where DEHB writes its log (it must have a directory): one for the whole process, removed at exit.
    _output = None

    def __init__(self, problem: Problem, seed: int, max_t: int):
        import tempfile

        import ConfigSpace
        from dehb import DEHB

        if DEHBContender._output is None:
            DEHBContender._output = tempfile.TemporaryDirectory(prefix="bench_dehb_")
        space = ConfigSpace.ConfigurationSpace(seed=seed)
        space.add([ConfigSpace.UniformFloatHyperparameter(name, low, high)
                   for name, (low, high) in problem.bounds.items()])
        # save_freq None: no state written as the incumbent changes (only at the end of DEHB's own run loop,
        # which ask and tell never call).
        self.dehb = DEHB(cs=space, dimensions=len(problem.bounds), min_fidelity=1, max_fidelity=max_t, eta=ETA,
                         n_workers=1, seed=seed, save_freq=None, log_level="ERROR",
                         output_path=DEHBContender._output.name)
        self.jobs: dict[int, dict[str, Any]] = {}
        self.asked = 0

    def start(self) -> tuple[int, dict[str, float]]:
        job = self.dehb.ask()
        self.asked += 1
        self.jobs[self.asked] = job
        return self.asked, dict(job["config"])

    def report(self, trial_id: int, epoch: int, value: float) -> bool:
        return epoch < round(float(self.jobs[trial_id]["fidelity"]))

    def end(self, trial_id: int, epoch: int, value: float, completed: bool) -> None:
        self.dehb.tell(self.jobs.pop(trial_id), {"fitness": value, "cost": epoch})


class OneEpochContender:
    """The one-epoch baseline: ``first_round`` random configurations (uniform within the bounds) trained one
    epoch each, paused there; once all have reported, the ``keep`` best go on to ``max_t``."""

    def __init__(self, problem: Problem, seed: int, max_t: int, budget: int, keep: int):
        import numpy as np

        self.problem, self.keep = problem, keep
        self.rng = np.random.default_rng(seed)
        self.first_round = max(keep, budget - keep * (max_t - 1))
        self.configs: dict[int, dict[str, float]] = {}
        self.first_epoch: dict[int, float] = {}
        self.going_on: list[int] | None = None  # the best, once the first round is done

    def start(self) -> tuple[int, dict[str, float]] | None:
        if len(self.configs) < self.first_round:
            trial_id = len(self.configs)
            self.configs[trial_id] = {name: float(self.rng.uniform(low, high))
                                      for name, (low, high) in self.problem.bounds.items()}
            return trial_id, self.configs[trial_id]
        if len(self.first_epoch) < self.first_round:
            return None  # the round's last first epochs are still training
        if self.going_on is None:
            self.going_on = sorted(self.first_epoch, key=self.first_epoch.__getitem__)[: self.keep]
        return (self.going_on[0], self.configs[self.going_on.pop(0)]) if self.going_on else None

    def report(self, trial_id: int, epoch: int, value: float) -> bool | str:
        if epoch == 1:
            self.first_epoch[trial_id] = value
            return PAUSE
        return True

    def end(self, trial_id: int, epoch: int, value: float, completed: bool) -> None:
        pass


def dehb_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("dehb") is not None


def contender(name: str, problem: Problem, seed: int, max_t: int, budget_trials: int, workers: int):
    """The contender called ``name`` (a key of OURS, OPTUNA, SYNE_TUNE, DEHB_CONTENDERS or BASELINES, or
    HPBANDSTER_BOHB), new, for one run."""
    if name in DEHB_CONTENDERS:
        return DEHBContender(problem, seed, max_t)
    if name in BASELINES:
        return OneEpochContender(problem, seed, max_t, budget_trials * max_t, BASELINES[name])
    if name == HPBANDSTER_BOHB:
        return TuneContender(problem, "bohb", "hyperband", seed, max_t, budget_trials, workers, hpbandster=True)
    if name in OURS:
        method, scheduler = OURS[name]
        return TuneContender(problem, method, scheduler, seed, max_t, budget_trials, workers)
    if name in SYNE_TUNE:
        return SyneTuneContender(problem, SYNE_TUNE[name], seed, max_t)
    sampler, pruner = OPTUNA[name]
    return OptunaContender(problem, sampler, pruner, seed, max_t)
