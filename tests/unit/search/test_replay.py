"""ASHA's rungs rebuilt from recorded results (:mod:`tune_service.search.replay`), without Ray running."""

from __future__ import annotations

import json

import pytest
from ray.tune.experiment import Trial
from ray.tune.schedulers import ASHAScheduler, TrialScheduler

from tune_service.search.replay import RecordedTrial, ResumedASHA, read_recorded

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


def scheduler(cls, unit, *args):
    scale = STEPS if unit == "step" else 1
    s = cls(*args, time_attr=unit, max_t=4 * scale, grace_period=scale, reduction_factor=2)
    s.set_search_properties("score", "max")
    return s


def rungs(asha) -> list[dict]:
    (bracket,) = asha._brackets
    return [dict(recorded) for _, recorded in bracket._rungs]


@pytest.mark.parametrize("unit", ["epoch", "step"])
def test_a_resumed_asha_holds_the_rungs_of_an_asha_that_never_stopped(unit):
    recorded = {}
    for trial_id, time, score in HISTORY:
        recorded.setdefault(trial_id, []).append({**at(unit, time, score), "trial_id": trial_id})
    scale = STEPS if unit == "step" else 1
    recorded = {k: RecordedTrial(tuple(v), checkpoint_time=(2 if k == "d" else 4) * scale, time_attr=unit)
                for k, v in recorded.items()}

    uninterrupted = scheduler(ASHAScheduler, unit)
    trials = {k: trial(k, Trial.RUNNING) for k in "abcde"}
    for t in trials.values():
        uninterrupted.on_trial_add(None, t)
    for trial_id, time, score in HISTORY:
        uninterrupted.on_trial_result(None, trials[trial_id], at(unit, time, score))

    resumed = scheduler(ResumedASHA, unit, recorded)
    for trial_id in "dcba":  # Tune adds them back newest first; "d" resumes, the others ended
        resumed.on_trial_add(None, trial(trial_id, Trial.PENDING if trial_id == "d" else Trial.TERMINATED))
    # "d" resumes from its time-2 checkpoint, whose report is delivered again: not yet in that rung.
    (bracket,) = resumed._brackets
    assert {milestone: "d" in recorded for milestone, recorded in bracket._rungs} == {
        4 * scale: False, 2 * scale: False, scale: True}
    assert resumed.on_trial_result(None, trial("d", Trial.RUNNING), at(unit, 2, 0.95)) == "CONTINUE"
    assert rungs(resumed) == rungs(uninterrupted)

    fresh = trial("e", Trial.RUNNING)
    resumed.on_trial_add(None, fresh)
    uninterrupted.on_trial_add(None, fresh)
    decision = resumed.on_trial_result(None, fresh, at(unit, 1, 0.6))
    assert decision == uninterrupted.on_trial_result(None, fresh, at(unit, 1, 0.6)) == TrialScheduler.STOP
    # Without the replay the rungs are empty, and the same trial goes on.
    plain = scheduler(ASHAScheduler, unit)
    plain.on_trial_add(None, fresh)
    assert plain.on_trial_result(None, fresh, at(unit, 1, 0.6)) == TrialScheduler.CONTINUE


def test_recorded_results_are_read_from_each_trials_result_file_and_checkpoint(tmp_path):
    done, resuming = tmp_path / "trial_a", tmp_path / "trial_b"
    (resuming / "ddp").mkdir(parents=True)
    done.mkdir()
    (done / "result.json").write_text("".join(json.dumps({"trial_id": "a", "epoch": e, "score": 0.5}) + "\n"
                                              for e in (1, 2)))
    lines = [json.dumps({"trial_id": "b", "epoch": e, "score": 0.7}) for e in (1, 2, 3)]
    (resuming / "result.json").write_text("\n".join(lines) + '\n{"trial_id": "b", "epo')  # cut off by the crash
    (resuming / "ddp" / "checkpoint_manager_snapshot.json").write_text(
        json.dumps({"latest_checkpoint_result": {"metrics": {"epoch": 2, "score": 0.7}}}))

    recorded = read_recorded(tmp_path)
    assert set(recorded) == {"a", "b"} and recorded["a"].checkpoint_time == 0
    assert [r["epoch"] for r in recorded["b"].results] == [1, 2, 3] and recorded["b"].checkpoint_time == 2
    assert [r["epoch"] for r in recorded["b"].reported_once(resumes=True)] == [1]  # 2 and 3 come again
    assert [r["epoch"] for r in recorded["b"].reported_once(resumes=False)] == [1, 2, 3]
    assert recorded["a"].reported_once(resumes=True) == ()  # no checkpoint: it starts again at epoch 1
