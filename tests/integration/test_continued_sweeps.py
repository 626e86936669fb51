"""A finished sweep continued with more trials (``tune-run resume DIR --set run_cap=N``): it goes on from
where it stopped, on a real local Ray. Its finished trials are kept (never rerun), its searcher goes on from
its saved state, and ASHA judges the new trials against the rungs' records of the old ones."""

from __future__ import annotations

import json

import pytest

import tune_service
from tune_service import cli
from tune_service.experiment import layout

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
#: The grid, in its order: the sweep runs the first three, and is continued with the last two, which
#: are the worst (a trial's score is its quality: recording_tasks.ScoredDigits).
QUALITIES = [0.9, 0.8, 0.7, 0.1, 0.2]


def test_a_finished_sweep_goes_on_with_more_trials_from_where_it_stopped(ray_cluster, tmp_path):
    records = tmp_path / "batches"  # what each trial's ranks trained, a byte a batch
    records.mkdir()
    spec = {
        "name": "continued", "method": "grid", "run_cap": 3, "task": "recording_tasks:ScoredDigits",
        "metric": {"name": "val_score", "goal": "maximize"},
        "scheduler": {"type": "asha", "max_t": 2, "grace_period": 1, "reduction_factor": 2},
        "parameters": {"quality": {"values": QUALITIES}, "record_dir": {"value": str(records)}},
    }
    first = tune_service.run(spec, storage=tmp_path, name="continued", verbose=0)
    assert sorted(t.config["quality"] for t in first.trials) == [0.7, 0.8, 0.9]
    trained = {f.name: f.stat().st_size for f in records.iterdir()}

    experiment = tmp_path / "continued"
    assert cli.main(["resume", str(experiment), "--set", "run_cap=5", "--quiet"]) == cli.EXIT_OK
    result = tune_service.load_results(experiment)
    assert len(result.records) == 5
    before = {name.split("-")[0] for name in trained}  # quality=Q
    assert {f.name: f.stat().st_size for f in records.iterdir() if f.name.split("-")[0] in before} == trained
    # (the finished trials were not rerun)
    by_quality = {t.config["quality"]: t for t in result.records}
    assert sorted(by_quality) == sorted(QUALITIES)  # the grid went on from its 4th point, none repeated
    assert {q: by_quality[q].trial_id for q in (0.9, 0.8, 0.7)} == {t.config["quality"]: t.trial_id for t in first.trials}
    # ASHA kept its rungs: the new trials are judged against the old ones' epoch-1 records, and stop there
    # (alone at the rung, the first new one would be the best so far, and go on).
    assert [(by_quality[q].status, by_quality[q].epochs) for q in (0.1, 0.2)] == [("stopped", 1), ("stopped", 1)]
    assert json.loads((experiment / layout.SWEEP_FILE).read_text())["spec"]["run_cap"] == 5  # for the next resume
