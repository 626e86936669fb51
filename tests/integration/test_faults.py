"""Faults injected into real sweeps on the shared local Ray: each ends its trial with one clear line,
and the other trials go on."""

from __future__ import annotations

import pytest

import tune_service

pytestmark = [pytest.mark.integration, pytest.mark.timeout(400)]


def test_a_diverging_trial_fails_with_its_reason_and_is_never_the_best(ray_cluster, tmp_path):
    spec = {"name": "diverging", "task": "recording_tasks:DivergingDigits", "method": "grid",
            "metric": {"name": "val_loss", "goal": "minimize"}, "scheduler": {"type": "fifo", "max_t": 3},
            "parameters": {"diverge_at": {"values": [0, 2]}}, "resources": {"workers": 1}}
    result = tune_service.run(spec, storage=tmp_path, name="diverging", verbose=0)
    trials = {t.config["diverge_at"]: t for t in result.trials}
    assert (trials[0].status, trials[0].epochs) == ("completed", 3)
    diverged = trials[2]
    assert (diverged.status, diverged.epochs) == ("failed", 1)  # epoch 2 was never reported
    assert "NonFiniteLoss: non-finite loss at epoch 2: train_loss nan" in diverged.error
    assert "\n" not in diverged.error
    assert result.best.trial_id == trials[0].trial_id


def test_a_metric_the_task_never_reports_fails_the_trial_at_its_first_report(ray_cluster, tmp_path):
    spec = {"name": "unreported", "method": "random", "run_cap": 1, "metric": {"name": "accuracy", "goal": "maximize"},
            "scheduler": {"type": "fifo", "max_t": 3}, "parameters": {"lr": {"value": 0.01}},
            "resources": {"workers": 1}}
    result = tune_service.run(spec, storage=tmp_path, name="unreported", verbose=0)
    (trial,) = result.trials
    assert trial.status == "failed" and trial.epochs <= 1
    assert trial.error.startswith("MissingMetric: metric.name: the task never reported 'accuracy'; its first report "
                                  "had: ") and "val_accuracy" in trial.error
    assert result.best is None
