"""What a sweep's trials reported, read back for a resume (:mod:`tune_service.search.replay`)."""

from __future__ import annotations

import json

from tune_service.search.replay import read_recorded

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
