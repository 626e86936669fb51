"""ASHA over several objectives (:mod:`tune_service.search.pareto_asha`): a trial goes on when it is among
the top 1/eta of its rung by Pareto order, whatever order the rung's values arrived in; a non-finite value
stops its trial; a resumed sweep's rungs are rebuilt to the same decisions. Without Ray running."""

from __future__ import annotations

import itertools
import math

import pytest
from ray.tune.experiment import Trial
from ray.tune.schedulers import TrialScheduler

from tune_service.search.pareto_asha import ParetoASHA
from tune_service.search.replay import RecordedTrial

CONTINUE, STOP = TrialScheduler.CONTINUE, TrialScheduler.STOP
OBJECTIVES = [("accuracy", "max"), ("size", "min")]


def make(recorded=None) -> ParetoASHA:
    asha = ParetoASHA(OBJECTIVES, time_attr="epoch", max_t=9, grace_period=1, reduction_factor=3, recorded=recorded)
    asha.set_search_properties("accuracy", "max")  # what Tune passes: the first objective
    return asha


def stub(trial_id: str, status: str = Trial.RUNNING) -> Trial:
    trial = Trial("run_trial", trial_id=trial_id, stub=True)
    trial.set_status(status)
    return trial


def report(asha: ParetoASHA, trial_id: str, accuracy: float, size: float, epoch: int = 1) -> str:
    trial = stub(trial_id)
    asha.on_trial_add(None, trial)
    return asha.on_trial_result(None, trial, {"epoch": epoch, "accuracy": accuracy, "size": size})


def test_a_trial_goes_on_when_it_is_among_the_top_third_of_its_rung_by_pareto_order():
    asha = make()
    assert report(asha, "t0", 0.5, 100) == CONTINUE  # alone: the best
    assert report(asha, "t1", 0.4, 200) == STOP  # dominated by t0
    # n=3, one goes on: t0 and t2 are the front's two ends (crowding infinite), the tie falls by id to t0
    assert report(asha, "t2", 0.9, 900) == STOP
    assert report(asha, "t3", 0.3, 50) == STOP  # n=4, one: t3 and t2 now the ends, t3 after t2 by id
    assert report(asha, "t4", 0.2, 40) == STOP  # n=5, one: t4 (0.2, 40) and t2 the ends, t2 first
    # n=6, two go on: the ends t2 and t5 (the smallest), ahead of t0 and t3 inside the front
    assert report(asha, "t5", 0.1, 10) == CONTINUE
    assert asha.rungs[1]["t0"] == (0.5, 100.0) and len(asha.rungs[1]) == 6


def test_the_decision_depends_on_the_rungs_values_alone_not_on_their_order_of_arrival():
    values = {"a": (0.5, 100), "b": (0.4, 200), "c": (0.9, 900), "d": (0.7, 300), "e": (0.6, 150), "f": (0.3, 50)}
    newcomer = ("g", 0.65, 120)
    outcomes = set()
    for order in itertools.permutations(values):
        asha = make()
        for trial_id in order:
            report(asha, trial_id, *values[trial_id])
        outcomes.add(report(asha, *newcomer))
    assert len(outcomes) == 1


def test_a_non_finite_value_of_any_objective_stops_its_trial_and_stays_out_of_the_rungs():
    asha = make()
    report(asha, "a", 0.5, 100)
    assert report(asha, "b", 0.9, math.nan) == STOP
    assert report(asha, "c", math.inf, 10) == STOP
    assert list(asha.rungs[1]) == ["a"]
    trial = stub("d")
    assert asha.on_trial_result(None, trial, {"epoch": 1, "accuracy": 0.9}) == CONTINUE  # size missing: not judged
    assert "d" not in asha.rungs[1]


def test_a_resumed_pareto_asha_holds_the_rungs_and_makes_the_decisions_of_one_that_never_stopped():
    history = [("a", 1, 0.5, 100), ("a", 3, 0.6, 100), ("b", 1, 0.4, 200), ("c", 1, 0.9, 900), ("c", 3, 0.95, 900),
               ("d", 1, 0.7, 300)]
    uninterrupted = make()
    for trial_id, epoch, accuracy, size in history:
        report(uninterrupted, trial_id, accuracy, size, epoch)
    recorded = {}
    for trial_id, epoch, accuracy, size in history:
        recorded.setdefault(trial_id, []).append({"epoch": epoch, "accuracy": accuracy, "size": size})
    resumed = make({k: RecordedTrial(tuple(v)) for k, v in recorded.items()})
    for trial_id in "dcba":  # Tune adds them back newest first
        resumed.on_trial_add(None, stub(trial_id, Trial.TERMINATED))
    assert resumed.rungs == uninterrupted.rungs
    for values in [(0.55, 120), (0.8, 950), (0.3, 50), (0.1, 1000)]:
        trial_id = f"n{values[0]}"
        assert report(resumed, trial_id, *values) == report(uninterrupted, trial_id, *values)


def test_it_needs_two_objectives_each_min_or_max():
    with pytest.raises(ValueError, match="two or more objectives"):
        ParetoASHA([("accuracy", "max")], time_attr="epoch", max_t=9, grace_period=1, reduction_factor=3)
    with pytest.raises(ValueError, match="each min or max"):
        ParetoASHA([("a", "max"), ("b", "up")], time_attr="epoch", max_t=9, grace_period=1, reduction_factor=3)
