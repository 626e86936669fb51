"""One contract for every searcher and scheduler, driven through the calls Tune makes, without Ray
running (as Syne Tune tests its schedulers): suggest, result, complete, save, restore.

Searchers: every method the spec offers, built as a sweep builds it (``registry.build_searcher``), and
every method that takes ``priors:`` with them.
Each suggestion is a whole trial config in the spec's domain; a searcher saved mid-sweep and restored
into a new one goes on exactly as the original would (the next suggestions are equal), so a resumed
sweep neither repeats nor skips a configuration.

Schedulers: FIFO, ASHA and HyperBand (for random search and for BOHB) as the spec builds them; every
result gets a decision Tune knows. FIFO and ASHA: a scheduler rebuilt from what the trials reported (a
resume) decides the next result as the original does. HyperBand pauses and resumes trials through
Tune's controller: it runs here in a simulated loop of Tune's and trains exactly the trial-epochs the
plan (``--dry-run``) expects; its rebuilt brackets across a driver's SIGKILL are tested on a real Ray
(tests/integration). PBT's replay pauses each trial at its schedule's epochs, changed, in the same loop.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from ray.tune.experiment import Trial
from ray.tune.schedulers import TrialScheduler
from ray.tune.search import Searcher

from tune_service.search import registry
from tune_service.search.replay import RecordedTrial
from tune_service.search.schedule import expected_schedule
from tune_service.spec import load_spec

METRIC = "val_loss"
PARAMETERS = {
    "random": {"lr": {"distribution": "log_uniform_values", "min": 1e-4, "max": 1e-1},
               "hidden": {"values": [16, 32, 64]}, "optimizer": {"parameters": {"momentum": {"min": 0.0, "max": 0.9}}}},
    "grid": {"lr": {"values": [0.001, 0.01, 0.1]}, "hidden": {"values": [16, 32, 64]},
             "optimizer": {"parameters": {"momentum": {"values": [0.0, 0.9]}}}},
}
PARAMETERS["bayes"] = PARAMETERS["bohb"] = PARAMETERS["optuna"] = PARAMETERS["random"]
#: Beliefs about the parameters above (``priors:``), a nested one by its dotted name.
PRIORS = {"lr": {"value": 0.01, "confidence": "high"}, "hidden": 32, "optimizer.momentum": 0.5}


def build(method: str, scheduler: dict | None = None, priors: dict | None = None, objectives: list | None = None):
    default = {"type": "hyperband" if method == "bohb" else "fifo", "max_t": 3}
    goal = {"metrics": objectives} if objectives else {"metric": {"name": METRIC, "goal": "minimize"}}
    spec = load_spec({"method": method, "run_cap": 12, "seed": 3, **goal,
                      "parameters": PARAMETERS[method], "scheduler": scheduler or default,
                      **({"priors": priors} if priors else {})})
    searcher, num_trials = registry.build_searcher(spec)
    searcher.set_search_properties(METRIC, "min", {})  # what Tune does before the first suggestion
    return spec, searcher, num_trials


def loss(config: dict) -> float:
    """A made-up objective of the config, so model-based searchers have something to learn."""
    return abs(config["lr"] - 0.01) * 10 + config["hidden"] / 64 + config["optimizer"]["momentum"]


def in_domain(method: str, config: dict) -> bool:
    lr, hidden, momentum = config["lr"], config["hidden"], config["optimizer"]["momentum"]
    if method == "grid":
        return lr in (0.001, 0.01, 0.1) and hidden in (16, 32, 64) and momentum in (0.0, 0.9)
    return 1e-4 <= lr <= 1e-1 and hidden in (16, 32, 64) and 0.0 <= momentum <= 0.9


def run_trials(searcher: Searcher, ids: list[str]) -> list[dict]:
    """Suggest, report two epochs and complete each trial in turn, as Tune does at concurrency 1."""
    configs = []
    for trial_id in ids:
        config = searcher.suggest(trial_id)
        assert isinstance(config, dict), f"{trial_id}: {config!r}"
        for epoch in (1, 2):
            searcher.on_trial_result(trial_id, {METRIC: loss(config) / epoch, "epoch": epoch, "training_iteration": epoch})
        searcher.on_trial_complete(trial_id, {METRIC: loss(config) / 2, "epoch": 2, "training_iteration": 2})
        configs.append(config)
    return configs


@pytest.mark.parametrize("method,priors", [
    *((method, None) for method in ("random", "grid", "bayes", "bohb", "optuna")),
    *((method, PRIORS) for method in ("random", "bayes", "bohb", "optuna")),
])
def test_a_searcher_suggests_whole_configs_in_the_domain_and_resumes_exactly(method, priors, tmp_path):
    _, searcher, num_trials = build(method, priors=priors)
    assert num_trials == 12
    first = run_trials(searcher, [f"t{i}" for i in range(5)])
    assert all(in_domain(method, c) for c in first), first
    assert len({repr(sorted(c.items())) for c in first}) == 5  # no configuration twice

    searcher.save(str(tmp_path / "searcher.pkl"))
    _, restored, _ = build(method, priors=priors)
    restored.restore(str(tmp_path / "searcher.pkl"))
    ids = [f"t{i}" for i in range(5, 8)]
    assert run_trials(restored, ids) == run_trials(searcher, ids)


@pytest.mark.parametrize("method", ["random", "bayes", "optuna"])
def test_every_part_of_the_searcher_stack_saves_and_restores_its_own_state_exactly(method, tmp_path):
    """The stack (target, running cap, fidelity correction, decoding) saves as one file: each part's
    own state comes back as it was (trials running against the cap, the worst completed value, the
    trial that reached the target) and the restored stack then decides as the original does."""
    from tune_service.search.wrappers import FidelityCorrected, RunningCap, StopAtTarget, layer_of

    scheduler = {"type": "asha", "max_t": 3}
    spec = load_spec({"method": method, "run_cap": 12, "seed": 3,
                      "metric": {"name": METRIC, "goal": "minimize", "target": 0.05},
                      "parameters": PARAMETERS[method], "scheduler": scheduler})
    searcher, _ = registry.build_searcher(spec)
    searcher.set_search_properties(METRIC, "min", {})
    assert searcher.set_max_concurrency(2)  # the cap is the stack's own: Tune wraps no ConcurrencyLimiter
    for trial_id in ("a", "b"):
        assert isinstance(searcher.suggest(trial_id), dict)
    assert searcher.suggest("c") is None  # two running: the cap holds
    searcher.on_trial_complete("a", {METRIC: 0.9, "epoch": 3, "training_iteration": 3})  # its whole budget
    assert isinstance(searcher.suggest("c"), dict)
    searcher.on_trial_result("b", {METRIC: 0.01, "epoch": 1, "training_iteration": 1})  # below the target

    def parts(stack):
        return (layer_of(stack, RunningCap).running, layer_of(stack, FidelityCorrected).worst_completed,
                layer_of(stack, StopAtTarget).target_reached_by)

    # Random search hears results as they are (no budget to correct for): no worst completed value kept.
    assert parts(searcher) == ({"b", "c"}, {} if method == "random" else {METRIC: 0.9}, "b")
    searcher.save(str(tmp_path / "searcher.pkl"))
    restored, _ = registry.build_searcher(spec)
    restored.set_search_properties(METRIC, "min", {})
    restored.restore(str(tmp_path / "searcher.pkl"))
    assert parts(restored) == parts(searcher)
    assert restored.suggest("d") == searcher.suggest("d") == Searcher.FINISHED  # the target was reached


def drive_bohb(searcher: Searcher, ids: list[str], disturb: bool = False) -> list[dict]:
    """Suggest and complete each trial with a result at BOHB's budget 1, so its model is built and sampled
    from; with ``disturb``, something else draws from numpy's global random state before each."""
    configs = []
    for index, trial_id in enumerate(ids):
        if disturb:
            np.random.seed(1000 + index)
        config = searcher.suggest(trial_id)
        result = {METRIC: loss(config), "epoch": 1, "training_iteration": 1, "hyperband_info": {"budget": 1}}
        searcher.on_trial_result(trial_id, result)
        searcher.on_trial_complete(trial_id, result)
        configs.append(config)
    return configs


def test_bohb_follows_its_seed_alone_and_leaves_numpy_global_random_state_alone(tmp_path):
    """BOHB samples its model from a generator of its own (hpbandster's drew from numpy's global random
    state, which Tune's seed does not reach): a sweep's suggestions must not depend on what else in the
    driver drew from numpy, must not change it, and must go on after a resume as they would have."""
    ids = [f"t{i}" for i in range(12)]
    assert drive_bohb(build("bohb")[1], ids) == drive_bohb(build("bohb")[1], ids, disturb=True)

    np.random.seed(7)
    expected = np.random.rand()
    np.random.seed(7)
    drive_bohb(build("bohb")[1], ids[:6])
    assert np.random.rand() == expected

    _, searcher, _ = build("bohb")
    drive_bohb(searcher, ids[:8])
    searcher.save(str(tmp_path / "searcher.pkl"))
    _, restored, _ = build("bohb")
    restored.restore(str(tmp_path / "searcher.pkl"))
    assert drive_bohb(restored, ids[8:], disturb=True) == drive_bohb(searcher, ids[8:])


def test_grid_ends_after_its_points_and_the_cap():
    _, searcher, num_trials = build("grid")
    assert num_trials == 12  # 18 points, cut at run_cap
    run_trials(searcher, [f"t{i}" for i in range(12)])
    assert searcher.suggest("t12") == Searcher.FINISHED


SCHEDULERS = {
    "fifo": {"type": "fifo", "max_t": 9},
    "asha": {"type": "asha", "max_t": 9, "grace_period": 1, "reduction_factor": 3},
    "asha over two objectives": {"type": "asha", "max_t": 9, "grace_period": 1, "reduction_factor": 3},
}  # HyperBand: test_hyperband_decides_every_result_and_follows_the_planned_schedule
#: The second objective of "asha over two objectives": later trials are smaller, so no trial dominates another.
SIZE = "n_params"


class Controller:
    """What a scheduler asks of Tune's controller in these calls: nothing beyond being passed along."""


def results_of(trial_index: int) -> list[dict]:
    """Trial i's losses: later trials are worse, so ASHA has trials to stop."""
    return [{METRIC: 1.0 + trial_index - 0.1 * epoch, SIZE: 100 - 10 * trial_index, "epoch": epoch,
             "training_iteration": epoch} for epoch in range(1, 4)]


def stub_trials(count: int, status: str = Trial.PENDING) -> list[Trial]:
    trials = [Trial("trainable", config={}, trial_id=f"t{i}", stub=True) for i in range(count)]
    for trial in trials:
        trial.status = status
    return trials


def decide(scheduler: TrialScheduler, trial: Trial, index: int) -> list[str]:
    """Report the trial's epochs until the scheduler stops it; its decisions in order."""
    decisions = []
    for result in results_of(index):
        decisions.append(scheduler.on_trial_result(Controller(), trial, result))
        if decisions[-1] == TrialScheduler.STOP:
            break
    scheduler.on_trial_complete(Controller(), trial, result)
    return decisions


@pytest.mark.parametrize("kind", sorted(SCHEDULERS))
def test_a_scheduler_decides_every_result_and_a_rebuilt_one_decides_as_the_original(kind):
    objectives = [{"name": METRIC}, {"name": SIZE}] if "objectives" in kind else None
    spec, _, _ = build("random", SCHEDULERS[kind], objectives=objectives)
    original = registry.build_scheduler(spec)
    assert type(original).__name__ == {"fifo": "FIFOScheduler", "asha": "PromotingASHA"}.get(kind, "ParetoASHA")
    original.set_search_properties(METRIC, "min")
    trials = stub_trials(6)
    for trial in trials:
        original.on_trial_add(Controller(), trial)
    decisions = {trial.trial_id: decide(original, trial, i) for i, trial in enumerate(trials)}
    every = [d for ds in decisions.values() for d in ds]
    assert set(every) <= {TrialScheduler.CONTINUE, TrialScheduler.STOP, TrialScheduler.PAUSE}
    expected = {TrialScheduler.CONTINUE, TrialScheduler.STOP} if "asha" in kind else {TrialScheduler.CONTINUE}
    assert set(every) == expected  # ASHA stops the worse trials at a rung; FIFO none

    # A resume after five trials ended: rebuilt from what they reported, the scheduler judges the sixth
    # as the original did.
    recorded = {f"t{i}": RecordedTrial(tuple(results_of(i)[:len(decisions[f"t{i}"])])) for i in range(5)}
    rebuilt = registry.build_scheduler(spec, recorded)
    rebuilt.set_search_properties(METRIC, "min")
    ended, sixth = stub_trials(5, Trial.TERMINATED), stub_trials(6)[5]
    for trial in (*ended, sixth):
        rebuilt.on_trial_add(Controller(), trial)
    assert decide(rebuilt, sixth, 5) == decisions["t5"]


class SimulatedController:
    """The part of Tune's controller that HyperBand calls (the trials, stopping one, the searcher it
    tells of pauses); :func:`play` runs Tune's loop around it, one trial at a time."""

    def __init__(self, trials: list[Trial], scheduler: TrialScheduler):
        self.trials, self.scheduler = trials, scheduler
        self.marked: list[str] = []
        self.search_alg = SimpleNamespace(searcher=SimpleNamespace(on_pause=lambda trial_id: None,
                                                                   on_unpause=lambda trial_id: None))

    def get_trials(self) -> list[Trial]:
        return list(self.trials)

    def stop_trial(self, trial: Trial) -> None:
        """As Tune's: a paused or pending trial is removed from the scheduler, then ends."""
        assert trial.status in (Trial.PAUSED, Trial.PENDING), trial.status  # HyperBand stops no other
        self.scheduler.on_trial_remove(self, trial)
        trial.status = Trial.TERMINATED

    def _mark_trial_to_checkpoint(self, trial: Trial) -> None:
        """As Tune's (private): the trial's status goes into the next saved experiment state."""
        self.marked.append(trial.trial_id)


def play(scheduler: TrialScheduler, trials: list[Trial], max_t: int) -> dict[str, list[str]]:
    """Tune's loop: run the trial the scheduler chooses until it pauses, stops or reaches ``max_t``;
    trial i's loss at epoch e is ``1 + i - e / 10`` (later trials worse). Each trial's decisions."""
    controller = SimulatedController(trials, scheduler)
    for trial in trials:
        scheduler.on_trial_add(controller, trial)
    decisions: dict[str, list[str]] = {t.trial_id: [] for t in trials}
    for _ in range(10 * len(trials) * max_t):  # far more than any schedule needs
        trial = scheduler.choose_trial_to_run(controller)
        if trial is None:
            break
        trial.status = Trial.RUNNING
        while trial.status == Trial.RUNNING:
            epoch = len(decisions[trial.trial_id]) + 1
            result = {METRIC: 1.0 + int(trial.trial_id[1:]) - epoch / 10, "epoch": epoch, "training_iteration": epoch}
            decision = scheduler.on_trial_result(controller, trial, result)
            decisions[trial.trial_id].append(decision)
            if decision == TrialScheduler.PAUSE:
                trial.status = Trial.PAUSED
            elif decision == TrialScheduler.STOP or epoch == max_t or trial.status == Trial.TERMINATED:
                trial.status = Trial.TERMINATED
                scheduler.on_trial_complete(controller, trial, result)
    assert all(t.status == Trial.TERMINATED for t in trials), {t.trial_id: t.status for t in trials}
    return decisions


@pytest.mark.parametrize("trials", [9, 12])
@pytest.mark.parametrize("method", ["random", "bohb"])
def test_hyperband_decides_every_result_and_follows_the_planned_schedule(method, trials):
    spec, _, _ = build(method, {"type": "hyperband", "max_t": 9, "reduction_factor": 3})
    scheduler = registry.build_scheduler(spec)
    scheduler.set_search_properties(METRIC, "min")
    decisions = play(scheduler, stub_trials(trials), max_t=9)
    assert set(d for ds in decisions.values() for d in ds) <= {
        TrialScheduler.CONTINUE, TrialScheduler.STOP, TrialScheduler.PAUSE}
    epochs = {trial_id: len(ds) for trial_id, ds in decisions.items()}
    planned = expected_schedule(spec.scheduler, trials, bohb=method == "bohb")
    assert planned.exact and sum(epochs.values()) == planned.trial_epochs  # what --dry-run promised
    assert min(epochs.values()) < 9 and epochs["t0"] == 9  # some are halved out; the best goes on


def test_a_replay_pauses_each_trial_at_the_schedules_epochs_changed_and_trains_the_planned_epochs():
    schedule = [{"epoch": 2, "config": {"lr": 0.02}}, {"epoch": 4, "config": {"optimizer.momentum": 0.9}}]
    spec, _, _ = build("grid", {"type": "pbt_replay", "max_t": 6, "schedule": schedule})
    scheduler = registry.build_scheduler(spec)
    scheduler.set_search_properties(METRIC, "min")
    trials = stub_trials(3)
    for i, trial in enumerate(trials):
        trial.set_config({"lr": 0.001, "hidden": 16 * (i + 1), "optimizer": {"momentum": 0.0}})
    decisions = play(scheduler, trials, max_t=6)
    pause, go = TrialScheduler.PAUSE, TrialScheduler.CONTINUE
    assert all(d == [go, pause, go, pause, go, go] for d in decisions.values()), decisions
    assert [t.config for t in trials] == [{"lr": 0.02, "hidden": 16 * (i + 1), "optimizer": {"momentum": 0.9}}
                                          for i in range(3)]
    assert sum(map(len, decisions.values())) == expected_schedule(spec.scheduler, 3).trial_epochs
