"""Tune's result.json and progress.csv loggers copy a trial's file from storage once per trial and driver
run (its first start), not over the driver's newer copy each time the trial starts again."""

from __future__ import annotations

import pickle
from types import SimpleNamespace

import pytest
from ray.tune.logger import CSVLoggerCallback, JsonLoggerCallback

from tune_service.experiment.trial_logs import TrialProgressLogger, TrialResultsLogger, trial_loggers


@pytest.mark.parametrize(("logger", "tunes"), [(TrialResultsLogger, JsonLoggerCallback),
                                               (TrialProgressLogger, CSVLoggerCallback)])
def test_a_trials_file_is_copied_from_storage_at_its_first_start_only(monkeypatch, logger, tunes):
    copies = []
    # Tune's own copy (the method named in tune_service.ray_internals), recorded instead of run.
    monkeypatch.setattr(tunes, "_restore_from_remote", lambda self, name, trial: copies.append((name, trial.trial_id)))
    # trials whose checkpoint Tune's state names (a trial it has none of: test_rolled_forward.py)
    one, other = SimpleNamespace(trial_id="a", checkpoint="a's"), SimpleNamespace(trial_id="b", checkpoint="b's")
    kept = logger()
    for trial in (one, other, one, one, other):  # started, paused or exploited, started again
        kept._restore_from_remote("result.json", trial)
    assert copies == [("result.json", "a"), ("result.json", "b")]
    resumed = pickle.loads(pickle.dumps(kept))  # a resumed sweep's driver: a new run
    resumed._restore_from_remote("result.json", one)
    assert copies[-1] == ("result.json", "a") and len(copies) == 3


def test_they_replace_tunes_default_loggers_of_their_kinds():
    json_logger, csv_logger = trial_loggers()  # Tune adds no default of a kind it is given
    assert isinstance(json_logger, JsonLoggerCallback) and isinstance(csv_logger, CSVLoggerCallback)
