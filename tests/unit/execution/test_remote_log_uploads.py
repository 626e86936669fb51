"""The log of ended trials on remote storage: an object store cannot append, so the mirror's log is
uploaded whole, at most every ``LOG_UPLOAD_PERIOD_S`` while trials end, and once more when the period
has passed after the last one (at a tick of Tune's loop). Here the "bucket" is a ``file://`` URI, which
pyarrow opens as it opens ``s3://``."""

from __future__ import annotations

import time

from tune_service.experiment import remote
from tune_service.results.sweep_result import TrialRecord, append_ended, read_ended


def test_the_log_goes_up_at_the_first_end_then_at_most_once_a_period(tmp_path, monkeypatch):
    monkeypatch.setattr(remote, "LOG_UPLOAD_PERIOD_S", 0.5)
    bucket = tmp_path / "bucket"
    bucket.mkdir()
    experiment = remote.RemoteExperiment.new(f"file://{bucket}", "sweep")
    try:
        (bucket / "sweep").mkdir()  # as Tune's files make it (an object store needs no directory)
        uploaded = bucket / "sweep" / "ended_trials.jsonl"

        def end(trial_id: str) -> None:
            append_ended([TrialRecord(trial_id, "completed", {}, {}, 1)], experiment.mirror)
            experiment.trial_ended(None, None)

        end("a")  # the first: up at once
        assert [t.trial_id for t in read_ended(uploaded)] == ["a"]
        end("b")
        end("c")  # within the period: not uploaded again, whatever the number of trials
        experiment.tick(None)
        assert [t.trial_id for t in read_ended(uploaded)] == ["a"]
        time.sleep(0.6)
        experiment.tick(None)  # the period passed with trials behind: up, whole
        assert [t.trial_id for t in read_ended(uploaded)] == ["a", "b", "c"]
        uploaded.unlink()
        time.sleep(0.6)
        experiment.tick(None)  # nothing ended since: nothing to upload
        assert not uploaded.exists()
    finally:
        experiment.close()
