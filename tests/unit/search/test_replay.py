"""ASHA's rungs rebuilt from recorded results (:mod:`tune_service.search.replay`), without Ray running."""

from __future__ import annotations

import json

from ray.tune.experiment import Trial
from ray.tune.schedulers import ASHAScheduler, TrialScheduler

from tune_service.search.replay import RecordedTrial, ResumedASHA, read_recorded

ASHA_ARGS = dict(time_attr="epoch", max_t=4, grace_period=1, reduction_factor=2)
#: What four trials reported before the driver died, in order; "d" was at epoch 2, checkpointed at 2.
HISTORY = [("a", 1, 0.9), ("a", 2, 0.9), ("a", 3, 0.9), ("a", 4, 0.9), ("b", 1, 0.8), ("c", 1, 0.7),
           ("d", 1, 0.95), ("d", 2, 0.95)]


def trial(trial_id: str, status: str) -> Trial:
    t = Trial("run_trial", trial_id=trial_id, stub=True)
    t.set_status(status)
    return t


def scheduler(cls, *args):
    s = cls(*args, **ASHA_ARGS)
    s.set_search_properties("score", "max")
    return s


def rungs(asha) -> list[dict]:
    (bracket,) = asha._brackets
    return [dict(recorded) for _, recorded in bracket._rungs]


def test_a_resumed_asha_holds_the_rungs_of_an_asha_that_never_stopped():
    recorded = {}
    for trial_id, epoch, score in HISTORY:
        recorded.setdefault(trial_id, []).append({"epoch": epoch, "score": score, "trial_id": trial_id})
    recorded = {k: RecordedTrial(tuple(v), checkpoint_epoch=2 if k == "d" else 4) for k, v in recorded.items()}

    uninterrupted = scheduler(ASHAScheduler)
    trials = {k: trial(k, Trial.RUNNING) for k in "abcde"}
    for t in trials.values():
        uninterrupted.on_trial_add(None, t)
    for trial_id, epoch, score in HISTORY:
        uninterrupted.on_trial_result(None, trials[trial_id], {"epoch": epoch, "score": score})

    resumed = scheduler(ResumedASHA, recorded)
    for trial_id in "dcba":  # Tune adds them back newest first; "d" resumes, the others ended
        resumed.on_trial_add(None, trial(trial_id, Trial.PENDING if trial_id == "d" else Trial.TERMINATED))
    # "d" resumes from its epoch-2 checkpoint, whose report is delivered again: not yet in the rungs.
    assert "d" not in rungs(resumed)[0]
    assert resumed.on_trial_result(None, trial("d", Trial.RUNNING), {"epoch": 2, "score": 0.95}) == "CONTINUE"
    assert rungs(resumed) == rungs(uninterrupted)

    fresh = trial("e", Trial.RUNNING)
    resumed.on_trial_add(None, fresh)
    uninterrupted.on_trial_add(None, fresh)
    decision = resumed.on_trial_result(None, fresh, {"epoch": 1, "score": 0.6})
    assert decision == uninterrupted.on_trial_result(None, fresh, {"epoch": 1, "score": 0.6}) == TrialScheduler.STOP
    # Without the replay the rungs are empty, and the same trial goes on.
    plain = scheduler(ASHAScheduler)
    plain.on_trial_add(None, fresh)
    assert plain.on_trial_result(None, fresh, {"epoch": 1, "score": 0.6}) == TrialScheduler.CONTINUE


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
    assert set(recorded) == {"a", "b"} and recorded["a"].checkpoint_epoch == 0
    assert [r["epoch"] for r in recorded["b"].results] == [1, 2, 3] and recorded["b"].checkpoint_epoch == 2
    assert [r["epoch"] for r in recorded["b"].reported_once(resumes=True)] == [1]  # 2 and 3 come again
    assert [r["epoch"] for r in recorded["b"].reported_once(resumes=False)] == [1, 2, 3]
    assert recorded["a"].reported_once(resumes=True) == ()  # no checkpoint: it starts again at epoch 1
