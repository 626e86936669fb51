"""HyperBand over several objectives (:class:`tune_service.search.hyperband.ParetoBracket`): a bracket halves
by Pareto order, whatever order the results came in, and a resumed one halves as it did; without Ray running.

The scenario, HyperBand with ``max_t`` 3 and ``eta`` 3, objectives accuracy (max) and size (min): the first
bracket (no early stopping) takes trials 1-2, the second trials 3-5, halved at epoch 1 to one trial.
Trial 4 is the most accurate, trial 3 the smallest, trial 5 dominated by 4: the front is {3, 4}, both ends
of it (infinite crowding distance), so the tie falls to the trial id and trial 3 goes on, where the
accuracy alone would keep trial 4.
"""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import pytest
from ray.tune.experiment import Trial
from ray.tune.schedulers import TrialScheduler

from tune_service.search.hyperband import ResumedHyperBand, WaitingHyperBand
from tune_service.search.replay import RecordedTrial

OBJECTIVES = [("accuracy", "max"), ("size", "min")]
VALUES = {1: (0.5, 10.0), 2: (0.6, 10.0), 3: (0.80, 100.0), 4: (0.90, 1000.0), 5: (0.85, 2000.0)}


class Controller:
    """What Ray's HyperBand asks of Tune's controller."""

    def __init__(self, scheduler, trials):
        self.scheduler, self.trials = scheduler, trials
        self.search_alg = SimpleNamespace(searcher=SimpleNamespace(on_pause=lambda _: None, on_unpause=lambda _: None))

    def stop_trial(self, trial):
        self.scheduler.on_trial_remove(self, trial)
        trial.set_status(Trial.TERMINATED)

    def get_trials(self):
        return list(self.trials.values())

    def _mark_trial_to_checkpoint(self, trial):
        pass


def hyperband(cls=WaitingHyperBand, *args, objectives=OBJECTIVES):
    scheduler = cls(*args, bohb=False, objectives=objectives, time_attr="epoch", max_t=3, reduction_factor=3)
    scheduler.set_search_properties("accuracy", "max")  # Tune's metric: the first objective
    return scheduler


def new_trial(number: int, status: str = Trial.PENDING) -> Trial:
    trial = Trial("run_trial", trial_id=f"t{number}", experiment_tag=f"{number}_x=1", stub=True)
    trial.set_status(status)
    return trial


def result(number: int, epoch: int) -> dict:
    accuracy, size = VALUES[number]
    return {"epoch": epoch, "accuracy": accuracy, "size": size, "trial_id": f"t{number}"}


def deliver(scheduler, controller, trial, epoch) -> str:
    trial.set_status(Trial.RUNNING)
    decision = scheduler.on_trial_result(controller, trial, result(int(trial.trial_id[1:]), epoch))
    if decision == TrialScheduler.STOP or epoch == 3:
        scheduler.on_trial_complete(controller, trial, {})
        trial.set_status(Trial.TERMINATED)
    elif decision == TrialScheduler.PAUSE:
        trial.set_status(Trial.PAUSED)
    return decision


def halve_second_bracket(order, objectives=OBJECTIVES):
    """Trials 1-5 added; 3, 4, 5 report epoch 1 in ``order``: the trials of the second bracket left running."""
    scheduler = hyperband(objectives=objectives)
    trials = {n: new_trial(n) for n in VALUES}
    controller = Controller(scheduler, trials)
    for trial in trials.values():
        scheduler.on_trial_add(controller, trial)
    for n in order:
        deliver(scheduler, controller, trials[n], 1)
    return {n for n in (3, 4, 5) if trials[n].status != Trial.TERMINATED}


@pytest.mark.parametrize("order", list(itertools.permutations((3, 4, 5))))
def test_a_bracket_halves_by_pareto_order_whatever_order_its_results_came_in(order):
    assert halve_second_bracket(order) == {3}
    assert halve_second_bracket(order, objectives=()) == {4}  # one objective: Ray's halving by accuracy


def test_a_non_finite_value_of_any_objective_stops_its_trial():
    scheduler = hyperband()
    trial = new_trial(3, Trial.RUNNING)
    controller = Controller(scheduler, {3: trial})
    scheduler.on_trial_add(controller, trial)
    nan_size = {**result(3, 1), "size": float("nan")}
    assert scheduler.on_trial_result(controller, trial, nan_size) == TrialScheduler.STOP


def test_a_resumed_pareto_hyperband_halves_its_bracket_as_it_did():
    # Before the crash: trials 3-5 reached epoch 1 and the bracket halved to 3, which went on (checkpoint at 1).
    recorded = {f"t{n}": RecordedTrial((result(n, 1),), 1 if n == 3 else 0) for n in (3, 4, 5)}
    resumed = hyperband(ResumedHyperBand, recorded)
    trials = {n: new_trial(n, Trial.PENDING if n == 3 else Trial.TERMINATED) for n in (5, 4, 3, 2, 1)}
    trials[1].set_status(Trial.PENDING)
    trials[2].set_status(Trial.PENDING)
    controller = Controller(resumed, trials)
    for trial in trials.values():
        resumed.on_trial_add(controller, trial)
    resumed.choose_trial_to_run(controller)
    bracket, _ = resumed._trial_info[trials[3]]
    assert bracket.current_trials() == [trials[3]]  # halved again to the Pareto pick, not to trial 4
    assert deliver(resumed, controller, trials[3], 2) == TrialScheduler.CONTINUE


def test_one_objective_or_a_bad_mode_is_refused():
    with pytest.raises(ValueError, match="two or more"):
        hyperband(objectives=[("accuracy", "max")])
    with pytest.raises(ValueError, match="two or more"):
        hyperband(objectives=[("accuracy", "max"), ("size", "smallest")])


def test_a_sweep_of_several_objectives_builds_hyperband_over_them_fresh_and_resumed():
    from pathlib import Path

    import yaml

    from tune_service.search import registry
    from tune_service.spec import load_spec

    source = yaml.safe_load((Path(__file__).resolve().parents[3] / "search_spaces" / "multi_objective.yaml").read_text())
    spec = load_spec({**source, "scheduler": {"type": "hyperband", "max_t": 3}})
    expected = (("val_accuracy", "max"), ("n_params", "min"))
    fresh, resumed = registry.build_scheduler(spec), registry.build_scheduler(spec, recorded={})
    assert type(resumed) is ResumedHyperBand and fresh.objectives == resumed.objectives == expected
