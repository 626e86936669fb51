"""A plain Ray Train loop keeps its checkpoints: what it reports with ``ray.train.report(...,
checkpoint=...)`` is what ``ray.train.get_checkpoint()`` gives the trial's next attempt, after a rank died
(a retry under ``failure.max_failures``) and after the driver was killed (``tune-run --resume``)."""

from __future__ import annotations

import signal

import pytest
import yaml

import tune_service
from tune_service import cli
from tune_service.experiment.checkpoints import checkpointed_report
from driver_process import command_line, signal_driver_when, still_running

pytestmark = [pytest.mark.integration, pytest.mark.timeout(400)]
RAY_AGENTS = ("ray::DashboardAgent", "ray::RuntimeEnvAgent")


def checkpointed_epoch(experiment) -> int:
    reports = [checkpointed_report(str(trial)) for trial in experiment.glob("trial_*")]
    return max([r["epoch"] for r in reports if r is not None], default=0)


def test_a_train_loops_checkpoint_reaches_its_retried_and_its_resumed_attempt(ray_cluster, tmp_path, expect_exit):
    records = tmp_path / "records"
    records.mkdir()
    spec = tmp_path / "looped.yaml"
    spec.write_text(yaml.safe_dump({
        "name": "looped", "task": "user_tasks:checkpointing_loop", "method": "grid",
        "metric": {"name": "score", "goal": "maximize"}, "scheduler": {"type": "fifo", "max_t": 5},
        "failure": {"max_failures": 1}, "resources": {"workers": 2},
        "parameters": {"epochs": {"value": 5}, "die_at": {"value": 2}, "epoch_s": {"value": 1.0},
                       "record_dir": {"value": str(records)}},
    }))
    experiment = tmp_path / "runs" / "looped"
    killed = signal_driver_when(spec, tmp_path / "runs", "looped", signum=signal.SIGKILL, timeout=300,
                                ready=lambda: checkpointed_epoch(experiment) >= 3)
    assert killed.returncode == -signal.SIGKILL, killed.output[-3000:]
    # The ranks and Train's controller die with their driver's Ray, but not at once: what they save
    # until they are gone counts (Ray's agents notice their raylet is gone more slowly).
    agents = [p for p in killed.descendants if command_line(p).startswith(RAY_AGENTS)]
    assert not still_running([p for p in killed.descendants if p not in agents], timeout=60)
    at_kill = checkpointed_epoch(experiment)
    # The first attempt started from nothing; rank 1 died in epoch 2, and the retry got epoch 1's checkpoint.
    assert (records / "starts").read_text().split() == ["0", "1"]

    assert cli.main(["--resume", str(experiment)]) == cli.EXIT_OK
    assert (records / "starts").read_text().split() == ["0", "1", str(at_kill)]  # resumed from its latest
    (trial,) = tune_service.load_results(experiment).records
    assert (trial.status, trial.epochs, trial.metrics["score"]) == ("completed", 5, 5.0)
    expect_exit(agents, timeout=180)  # none may outlive the tests (checked at the session's end: 60 s after the kill)
