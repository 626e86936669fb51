"""Load, in small: a sweep of more trivial trials than the cluster runs at once records every trial and
every epoch (``bench/service/load_200.py`` is the 200-trial run, by hand)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tune_service

pytestmark = [pytest.mark.integration, pytest.mark.timeout(400)]


#: One more trial than the cluster runs at once (two 1-rank trials on CI's 2 CPUs): a trial waits for a
#: slot and takes over the gang a finished trial left. The trials are a Task's on warm gangs, the
#: service's own path (a plain train loop's trial is a fresh Ray Train run: nine new processes and about
#: 75 CPU-s here; its slot handover is the ray_train_loop example's, in test_examples.py).
TRIALS = 3


def test_a_sweep_of_many_trivial_trials_records_every_trial_and_epoch(ray_cluster, tmp_path):
    spec = {"name": "many", "task": "user_tasks:ConfigReporting", "method": "random", "run_cap": TRIALS, "seed": 0,
            "metric": {"name": "val_score", "goal": "maximize"}, "scheduler": {"type": "fifo", "max_t": 2},
            "parameters": {"lr": {"distribution": "uniform", "min": 0.001, "max": 0.1}},
            "resources": {"workers": 1}, "wandb": {"mode": "disabled"}}
    result = tune_service.run(spec, storage=tmp_path, name="many", verbose=0)
    assert [(t.status, t.epochs) for t in result.trials] == [("completed", 2)] * TRIALS
    assert len({t.config["lr"] for t in result.trials}) == TRIALS
    assert all(t.metrics["val_score"] == pytest.approx(t.config["lr"]) for t in result.trials)  # its own config's
    assert result.best.metrics["val_score"] == max(t.metrics["val_score"] for t in result.trials)

    experiment = Path(result.experiment_dir)
    histories = [path.read_text().splitlines() for path in experiment.glob("trial_*/result.json")]
    assert sorted(len(lines) for lines in histories) == [2] * TRIALS  # one result per epoch, per trial
    assert len(json.loads((experiment / "summary.json").read_text())["trials"]) == TRIALS
