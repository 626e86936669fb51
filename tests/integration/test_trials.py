"""A trial's life on a real local Ray: out-of-memory handling and retry from the last checkpoint,
and every rank process gone before the next trial starts (also after the scheduler stops one)."""

from __future__ import annotations

import json

import pytest

import tune_service

pytestmark = [pytest.mark.integration, pytest.mark.timeout(400)]


def oom_spec(retry: bool) -> dict:
    return {
        "name": "oom", "task": "recording_tasks:OutOfMemoryAfterFirstEpoch", "method": "random", "run_cap": 1,
        "parameters": {"batch_size": {"value": 64}},
        "scheduler": {"type": "fifo", "max_t": 3}, "training": {"oom_retry": retry},
    }


def test_out_of_memory_retries_at_half_the_micro_batch_from_the_last_checkpoint(ray_cluster, tmp_path):
    result = tune_service.run(oom_spec(retry=True), storage=tmp_path, name="retry", verbose=0)
    (trial,) = result.trials
    assert trial.status == "completed" and trial.epochs == 3
    assert (trial.metrics["batch_per_rank"], trial.metrics["grad_accum_steps"], trial.metrics["global_batch"]) == (16, 2, 64)
    (progress,) = tmp_path.glob("retry/trial_*/progress.csv")
    rows = progress.read_text().splitlines()
    header = rows[0].split(",")
    epochs = [int(row.split(",")[header.index("epoch")]) for row in rows[1:]]
    micro = [int(row.split(",")[header.index("batch_per_rank")]) for row in rows[1:]]
    assert epochs == [1, 2, 3] and micro == [32, 16, 16]  # epoch 1 kept, not rerun; resumed at epoch 2


def test_out_of_memory_without_retry_fails_the_trial_with_a_clear_reason(ray_cluster, tmp_path):
    result = tune_service.run(oom_spec(retry=False), storage=tmp_path, name="no_retry", verbose=0)
    (trial,) = result.trials
    assert trial.status == "failed" and result.best is None
    assert trial.error.startswith("TrialOutOfMemory: out of memory at epoch 2: per-rank batch 32 (x1 accumulation, "
                                  "2 ranks) on cpu with ")
    assert "set training.oom_retry: true" in trial.error


def test_rank_processes_exit_before_the_next_trial_starts(ray_cluster, tmp_path):
    audit = tmp_path / "pids"
    spec = {  # in grid order: a good trial, a hopeless one that ASHA stops at epoch 1, then a third
        "name": "audit", "task": "recording_tasks:AuditedDigits", "method": "grid",
        "parameters": {"lr": {"values": [0.01, 1e-7, 0.003]}, "audit_dir": {"value": str(audit)}},
        "scheduler": {"type": "asha", "max_t": 2, "grace_period": 1, "reduction_factor": 2},
        "execution": {"gangs": "fresh"},  # warm gangs keep their ranks on purpose (tests/integration/test_gangs.py)
    }
    result = tune_service.run(spec, storage=tmp_path, name="audit", verbose=0)
    statuses = [t.status for t in result.trials]  # in the order the trials were created
    assert statuses[:2] == ["completed", "stopped"]  # the third starts after a scheduler stop
    records = [json.loads(p.read_text()) for p in audit.glob("*.json")]
    assert len({r["trial"] for r in records}) == 3 and len(records) == 6  # 3 trials of 2 ranks
    assert all(r["alive_from_earlier_trials"] == [] for r in records)
