"""A NaN metric stops its trial and never enters a rung (issue 44), from a W&B program and from a plain
train loop, on a real local Ray: the diverged trial is stopped where it diverged and is never the best,
and the others run as if it had not been there."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import tune_service
from user_tasks import diverging_loop

pytestmark = [pytest.mark.integration, pytest.mark.timeout(400)]
PROGRAM = Path(__file__).resolve().parents[1] / "data" / "programs" / "logs_metrics.py"


def test_a_program_that_logs_nan_is_stopped_there_and_is_never_the_best(ray_cluster, tmp_path):
    spec = {"program": str(PROGRAM), "method": "grid", "metric": {"name": "val_loss", "goal": "minimize"},
            "parameters": {"lr": {"values": [0.1, 0.2]}, "nan-at": {"values": [-1, 1]}, "steps": {"value": 4}},
            "early_terminate": {"type": "hyperband", "min_iter": 1, "eta": 2}, "wandb": {"mode": "disabled"}}
    result = tune_service.run(spec, storage=tmp_path, name="nan-program", verbose=0)
    diverged = [t for t in result.trials if t.config["nan-at"] == 1]
    assert len(diverged) == 2 and all(t.status == "stopped" for t in diverged)  # at its NaN, or at rung 1 before
    at_nan = [t for t in diverged if math.isnan(t.metrics["val_loss"])]
    assert at_nan and all(t.progress("value") == 1 for t in at_nan)  # one finite value logged, the NaN not counted
    assert result.best is not None and result.best.config["nan-at"] == -1


def test_a_train_loop_that_reports_nan_is_stopped_there_and_is_never_the_best(ray_cluster, tmp_path):
    spec = {"method": "grid", "metric": {"name": "score", "goal": "maximize"},
            "parameters": {"quality": {"value": 1}, "diverge": {"values": [False, True]}},
            "scheduler": {"type": "asha", "max_t": 3, "grace_period": 1, "reduction_factor": 3},
            "resources": {"workers": 1}, "wandb": {"mode": "disabled"}}
    result = tune_service.run(spec, storage=tmp_path, name="nan-loop", task=diverging_loop, verbose=0)
    for trial in result.trials:
        if trial.config["diverge"]:
            assert trial.status == "stopped" and trial.epochs == 2 and math.isnan(trial.metrics["score"])
    assert result.best is not None and not result.best.config["diverge"]
