"""ASHA promoting as its paper does (:mod:`tune_service.search.asha`), and its rungs rebuilt for a resumed
sweep, without Ray running."""

from __future__ import annotations

import math

import pytest
from ray.tune.experiment import Trial
from ray.tune.schedulers import ASHAScheduler, TrialScheduler

from tune_service.search.asha import PromotingASHA
from tune_service.search.replay import RecordedTrial

CONTINUE, STOP = TrialScheduler.CONTINUE, TrialScheduler.STOP


def decisions(make, scores: list[float]) -> list[str]:
    """Each of len(scores) trials reports ``score`` at epoch 1 (the first rung), in turn."""
    asha = make(time_attr="epoch", max_t=9, grace_period=1, reduction_factor=3)
    asha.set_search_properties("score", "max")
    out = []
    for index, score in enumerate(scores):
        trial = Trial("run_trial", trial_id=f"t{index}", stub=True)
        asha.on_trial_add(None, trial)
        out.append(asha.on_trial_result(None, trial, {"epoch": 1, "score": score}))
    return out


def test_a_trial_goes_on_only_among_the_top_third_of_its_rung_itself_included():
    scores = [5, 3, 4.5, 6, 1, 7, 2, 5.5, 0]
    assert decisions(PromotingASHA, scores) == [
        CONTINUE,  # alone: the best
        STOP,      # 3 < 5
        STOP,      # 4.5: not the best of 3
        CONTINUE,  # 6: the best of 4
        STOP,      # 1
        CONTINUE,  # 7: among the 2 best of 6
        STOP,      # 2
        STOP,      # 5.5: not among the 2 best of 8 (7 and 6)
        STOP,      # 0
    ]
    # Ray's ASHA: the 2/3 quantile of the trials before, interpolated, lets the third (4.5 against
    # 3 + 2/3 * (5 - 3) = 4.33) and the eighth (5.5 against the quantile 5 of the seven before) go on.
    ray = decisions(ASHAScheduler, scores)
    assert ray[2] == CONTINUE and ray[7] == CONTINUE


def test_a_minimised_metric_and_the_end_of_the_budget():
    asha = PromotingASHA(time_attr="epoch", max_t=3, grace_period=1, reduction_factor=3)
    asha.set_search_properties("loss", "min")
    a, b = (Trial("run_trial", trial_id=i, stub=True) for i in "ab")
    assert asha.on_trial_result(None, a, {"epoch": 1, "loss": 0.5}) == CONTINUE
    assert asha.on_trial_result(None, b, {"epoch": 1, "loss": 0.7}) == STOP
    assert asha.on_trial_result(None, a, {"epoch": 2, "loss": 0.4}) == CONTINUE  # between rungs
    assert asha.on_trial_result(None, a, {"epoch": 3, "loss": 0.3}) == STOP  # max_t: the trial is done
    with pytest.raises(ValueError, match="grace_period"):
        PromotingASHA(time_attr="epoch", max_t=3, grace_period=4, reduction_factor=3)


#: What four trials reported before the driver died, in order; "d" was at epoch 2, checkpointed at 2.
HISTORY = [("a", 1, 0.9), ("a", 2, 0.9), ("a", 3, 0.9), ("a", 4, 0.9), ("b", 1, 0.8), ("c", 1, 0.7),
           ("d", 1, 0.95), ("d", 2, 0.95)]
#: Reports by steps: 100 optimizer steps per time of HISTORY, four reports an epoch.
STEPS = 100


def trial(trial_id: str, status: str) -> Trial:
    t = Trial("run_trial", trial_id=trial_id, stub=True)
    t.set_status(status)
    return t


def at(unit: str, time: int, score: float) -> dict:
    """A report at ``time`` (of HISTORY's clock) as the shared loop makes it in ``unit``."""
    if unit == "step":
        return {"epoch": time * 0.25, "step": time * STEPS, "score": score}
    return {"epoch": time, "score": score}


def scheduler(unit, recorded=None):
    scale = STEPS if unit == "step" else 1
    s = PromotingASHA(time_attr=unit, max_t=4 * scale, grace_period=scale, reduction_factor=2, recorded=recorded)
    s.set_search_properties("score", "max")
    return s


@pytest.mark.parametrize("unit", ["epoch", "step"])
def test_a_resumed_asha_holds_the_rungs_of_an_asha_that_never_stopped(unit):
    recorded = {}
    for trial_id, time, score in HISTORY:
        recorded.setdefault(trial_id, []).append({**at(unit, time, score), "trial_id": trial_id})
    scale = STEPS if unit == "step" else 1
    recorded = {k: RecordedTrial(tuple(v), checkpoint_time=(2 if k == "d" else 4) * scale, time_attr=unit)
                for k, v in recorded.items()}

    uninterrupted = scheduler(unit)
    trials = {k: trial(k, Trial.RUNNING) for k in "abcde"}
    for t in trials.values():
        uninterrupted.on_trial_add(None, t)
    for trial_id, time, score in HISTORY:
        uninterrupted.on_trial_result(None, trials[trial_id], at(unit, time, score))

    resumed = scheduler(unit, recorded)
    for trial_id in "dcba":  # Tune adds them back newest first; "d" resumes, the others ended
        resumed.on_trial_add(None, trial(trial_id, Trial.PENDING if trial_id == "d" else Trial.TERMINATED))
    # "d" resumes from its time-2 checkpoint, whose report is delivered again: not yet in that rung.
    assert {milestone: "d" in recorded for milestone, recorded in resumed.rungs.items()} == {
        4 * scale: False, 2 * scale: False, scale: True}
    assert resumed.on_trial_result(None, trial("d", Trial.RUNNING), at(unit, 2, 0.95)) == "CONTINUE"
    assert resumed.rungs == uninterrupted.rungs

    fresh = trial("e", Trial.RUNNING)
    resumed.on_trial_add(None, fresh)
    uninterrupted.on_trial_add(None, fresh)
    decision = resumed.on_trial_result(None, fresh, at(unit, 1, 0.6))
    assert decision == uninterrupted.on_trial_result(None, fresh, at(unit, 1, 0.6)) == TrialScheduler.STOP
    # Without the replay the rungs are empty, and the same trial goes on.
    plain = scheduler(unit)
    plain.on_trial_add(None, fresh)
    assert plain.on_trial_result(None, fresh, at(unit, 1, 0.6)) == TrialScheduler.CONTINUE




def test_a_resumed_asha_replays_the_ended_trials_tune_did_not_add_back_before_its_first_decision():
    """Under ASHA an ended trial leaves Tune's controller (tune_service.execution.retiring): a resumed Tune
    adds back only "d", which was running. The ended ones, marked so by the service's records, enter the
    rungs before the first decision, as they would have had Tune added them back."""
    recorded = {}
    for trial_id, time, score in HISTORY:
        recorded.setdefault(trial_id, []).append({**at("epoch", time, score), "trial_id": trial_id})
    ended = {k: RecordedTrial(tuple(v), checkpoint_time=2 if k == "d" else 4, ended=k != "d")
             for k, v in recorded.items()}
    added_back = scheduler("epoch", ended)
    for trial_id in "dcba":
        added_back.on_trial_add(None, trial(trial_id, Trial.PENDING if trial_id == "d" else Trial.TERMINATED))
    retired = scheduler("epoch", ended)
    retired.on_trial_add(None, trial("d", Trial.PENDING))
    assert all(set(rung) <= {"d"} for rung in retired.rungs.values())  # nothing decided yet
    d = trial("d", Trial.RUNNING)
    assert retired.on_trial_result(None, d, at("epoch", 2, 0.95)) == added_back.on_trial_result(
        None, d, at("epoch", 2, 0.95))
    assert retired.rungs == added_back.rungs and any(len(rung) > 1 for rung in retired.rungs.values())
    # Not marked ended (the service's records do not say so), a trial Tune did not add back is not replayed.
    unmarked = scheduler("epoch", {k: RecordedTrial(v.results, v.checkpoint_time) for k, v in ended.items()})
    unmarked.on_trial_add(None, trial("d", Trial.PENDING))
    unmarked.on_trial_result(None, d, at("epoch", 2, 0.95))
    assert all(set(rung) <= {"d"} for rung in unmarked.rungs.values())


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_non_finite_value_stops_its_trial_and_never_enters_a_rung(bad):
    """A NaN sorted among numbers falls by its order of arrival: kept in a rung, every later cut there
    would depend on it. It stops its trial, and the rung decides as if it had never come."""
    scores = [5, 3, 4.5, 6, 1, 7]
    with_bad = decisions(PromotingASHA, [scores[0], bad, *scores[1:]])
    assert with_bad[1] == STOP
    assert [with_bad[0], *with_bad[2:]] == decisions(PromotingASHA, scores)
    asha = PromotingASHA(time_attr="epoch", max_t=9, grace_period=1, reduction_factor=3)
    asha.set_search_properties("score", "max")
    t = Trial("run_trial", trial_id="t", stub=True)
    assert asha.on_trial_result(None, t, {"epoch": 1, "score": bad}) == STOP
    asha.on_trial_complete(None, t, {"epoch": 1, "score": bad})
    assert all(not rung for rung in asha.rungs.values())


def test_a_resumed_asha_leaves_a_recorded_non_finite_value_out_of_its_rungs():
    recorded = {"a": RecordedTrial(({"epoch": 1, "score": math.nan, "trial_id": "a"},), 0)}
    asha = PromotingASHA(time_attr="epoch", max_t=9, grace_period=1, reduction_factor=3, recorded=recorded)
    asha.set_search_properties("score", "max")
    asha.on_trial_add(None, trial("a", Trial.TERMINATED))
    assert all(not rung for rung in asha.rungs.values())
