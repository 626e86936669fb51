"""wandb on real sweeps: offline runs written by the driver, read back from wandb's own run files."""

from __future__ import annotations

import json
import logging
import signal
from pathlib import Path

import pytest
import yaml

import tune_service
from tune_service import cli
from tune_service.experiment.checkpoints import checkpointed_report
from tune_service.experiment.layout import REPORT_FILE
from tune_service.tracking.naming import run_id
from driver_process import signal_driver_when
from wandb_files import offline_runs

pytestmark = [pytest.mark.integration, pytest.mark.timeout(500)]
ROOT = Path(__file__).resolve().parents[2]
SECRET = "tunesvc-sentinel-key-0123456789abcdef0123456789"  # what an API key in the environment looks like


def by_id(runs):
    grouped = {}
    for run in runs:
        grouped.setdefault(run.run_id, []).append(run)
    return grouped


def epochs_logged(runs):
    return [row["epoch"] for run in runs for row in run.history if "epoch" in row]


def test_a_sweep_arrives_in_wandb_as_one_run_per_trial_and_a_summary(ray_cluster, tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_API_KEY", SECRET)  # present, but WANDB_MODE=offline wins: no network
    for variable in ("WANDB_DATA_DIR", "WANDB_CACHE_DIR", "WANDB_ARTIFACT_DIR"):  # artifact staging: not in ~
        monkeypatch.setenv(variable, str(tmp_path / "wandb_home" / variable.lower()))
    result = tune_service.run(ROOT / "search_spaces" / "quickstart.yaml", storage=tmp_path, name="tracked", run_cap=4,
                              overrides={"scheduler.max_t": 3, "wandb.tags": ["ci"], "wandb.log_checkpoints": True},
                              verbose=0)
    experiment = Path(result.experiment_dir)
    assert result.extra["wandb"]["mode"] == "offline"
    runs = by_id(offline_runs(experiment))
    summary_id = run_id("tracked", "summary")
    assert set(runs) == {run_id("tracked", t.trial_id) for t in result.trials} | {summary_id}
    assert all(len(attempts) == 1 for attempts in runs.values())  # one run per trial, logged once

    for trial in result.trials:
        (run,) = runs[run_id("tracked", trial.trial_id)]
        assert (run.project, run.group, run.job_type) == ("quickstart", "tracked", "trial")
        assert "ci" in run.tags and ("stopped-early" in run.tags) == (trial.status == "stopped")
        assert run.name.startswith("#00") and f"lr={trial.config['lr']:.3g}" in run.name
        assert {k: run.config[k] for k in trial.config} == trial.config  # the hyperparameters, as sampled
        assert run.config["resources"] == {"workers": 2, "cpus_per_worker": 1, "gpus_per_worker": 0}
        assert run.config["precision"] == "fp32" and run.config["training"]["precision"] == "auto"
        assert [row["_step"] for row in run.history] == list(range(1, trial.epochs + 1))  # epoch is the step
        assert epochs_logged([run]) == list(range(1, trial.epochs + 1))
        accuracies = [row["val_accuracy"] for row in run.history]
        assert run.summary["val_accuracy"] == accuracies[-1] == trial.metrics["val_accuracy"]  # last
        assert run.summary["best_val_accuracy"] == max(accuracies)  # and best
        assert run.summary["best_epoch"] == accuracies.index(max(accuracies)) + 1
        assert (run.summary["status"], run.summary["epochs"], run.exit_code) == (trial.status, trial.epochs, 0)
        assert run.artifacts == [(f"model-{run.run_id}", "model", ["state.pt"])]  # the last checkpoint
        assert not (run.directory / "files" / "requirements.txt").exists()  # the driver's: in the summary run

    (sweep,) = runs[summary_id]
    assert sweep.job_type == "sweep-summary" and sweep.group == "tracked"
    assert "torch==" in (sweep.directory / "files" / "requirements.txt").read_text()  # the sweep's packages, once
    table = sweep.table("trials")
    rows = [dict(zip(table["columns"], row)) for row in table["data"]]
    assert sorted(r["trial_id"] for r in rows) == sorted(t.trial_id for t in result.trials)
    for row in rows:
        trial = next(t for t in result.trials if t.trial_id == row["trial_id"])
        assert (row["status"], row["epochs"], row["val_accuracy"], row["lr"]) == (
            trial.status, trial.epochs, trial.metrics["val_accuracy"], trial.config["lr"])
    assert sweep.summary["best_trial_id"] == result.best.trial_id
    assert sweep.summary["best_config"] == result.best.config

    assert cli.main(["report", str(experiment)]) == 0  # the same sweep, for a user without wandb
    page = (experiment / REPORT_FILE).read_text(encoding="utf-8")
    assert all(t.trial_id in page for t in result.trials)

    leaks = [p for p in experiment.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    assert leaks == []  # the key is in the environment, and in none of our files or wandb's


def test_wandb_failing_at_init_warns_and_the_sweep_goes_on(ray_cluster, tmp_path, monkeypatch, caplog):
    monkeypatch.delenv("WANDB_MODE")
    monkeypatch.setenv("WANDB_API_KEY", "bad")  # wandb refuses it at init, before any network
    with caplog.at_level(logging.WARNING, logger="tune_service.tracking"):
        result = tune_service.run(ROOT / "search_spaces" / "quickstart.yaml", storage=tmp_path, name="failing",
                                  run_cap=2, overrides={"scheduler.max_t": 1, "wandb.mode": "online"}, verbose=0)
    assert [t.status for t in result.trials] == ["completed", "completed"]
    warnings = [r.getMessage() for r in caplog.records if r.getMessage().startswith("wandb: ")]
    expected = [run_id("failing", t.trial_id) for t in result.trials] + [run_id("failing", "summary")]
    assert sorted(w.split(" of run ")[1].split()[0] for w in warnings) == sorted(expected)  # one per run
    assert all("AuthenticationError" in w and "the sweep goes on" in w and "\n" not in w for w in warnings)
    assert (Path(result.experiment_dir) / "summary.json").is_file()


SLOW_SWEEP = {  # grid: three trials with three distinct learning rates
    "name": "interrupted", "method": "grid", "run_cap": 3, "task": "recording_tasks:SlowDigits",
    "metric": {"name": "val_accuracy", "goal": "maximize"}, "scheduler": {"type": "fifo", "max_t": 4},
    "parameters": {"lr": {"values": [0.003, 0.01, 0.001]}},
}


def latest_epoch(trial_dir: Path) -> int:
    """The epoch of the trial's latest checkpoint (0 before its first)."""
    return int((checkpointed_report(str(trial_dir)) or {}).get("epoch", 0))


def test_an_interrupted_sweep_resumes_into_the_same_runs(ray_cluster, tmp_path, capsys):
    records = tmp_path / "batches"
    records.mkdir()
    spec = tmp_path / "slow.yaml"
    spec.write_text(yaml.safe_dump({**SLOW_SWEEP, "parameters": {**SLOW_SWEEP["parameters"],
                                                                 "record_dir": {"value": str(records)}}}))
    experiment = tmp_path / "runs" / "slow"

    def one_trial_done_and_one_between_epochs():
        progress = [latest_epoch(d) for d in experiment.glob("trial_*")]
        return 4 in progress and any(1 <= e <= 2 for e in progress)

    # Ctrl+C: Tune saves the experiment's state and stops.
    interrupted = signal_driver_when(spec, tmp_path / "runs", "slow", one_trial_done_and_one_between_epochs,
                                     signal.SIGINT)
    output = interrupted.output
    assert interrupted.returncode == cli.EXIT_INTERRUPTED, output[-3000:]
    assert f"resume with: tune-run --resume {experiment}" in output
    first = json.loads((experiment / "summary.json").read_text())
    statuses = {t["trial_id"]: t["status"] for t in first["trials"]}
    assert "interrupted" in statuses.values() and "completed" in statuses.values()
    interrupted = next(t for t, s in statuses.items() if s == "interrupted")
    finished = [t for t, s in statuses.items() if s == "completed"]
    checkpointed = latest_epoch(experiment / f"trial_{interrupted}")  # what the resumed attempt starts after
    lr = next(t["config"]["lr"] for t in first["trials"] if t["trial_id"] == interrupted)
    before_resume = set(records.iterdir())

    assert cli.main(["--resume", str(experiment)]) == 0
    capsys.readouterr()
    result = tune_service.load_results(experiment)
    assert len(result.records) == 3 and set(result.trials["status"]) == {"completed"}
    runs = by_id(offline_runs(experiment))
    assert set(runs) == {run_id("slow", t.trial_id) for t in result.records} | {run_id("slow", "summary")}
    for trial_id in finished:  # finished before the interrupt: never run again, one run, every epoch once
        assert len(runs[run_id("slow", trial_id)]) == 1
        assert epochs_logged(runs[run_id("slow", trial_id)]) == [1, 2, 3, 4]
    attempts = runs[run_id("slow", interrupted)]  # the same run id, appended to by the resumed attempt
    assert len(attempts) == 2 and attempts[0].summary["status"] == "interrupted"
    assert attempts[1].summary["status"] == "completed"
    before, after = epochs_logged([attempts[0]]), epochs_logged([attempts[1]])
    assert before + after == [1, 2, 3, 4]  # each epoch once, in order, the checkpointed one included

    # Continued from its checkpoint: the resumed attempt's two ranks trained only the epochs after it.
    done_lr = next(t.config["lr"] for t in result.records if t.trial_id == finished[0])
    batches_per_epoch = {f.stat().st_size // 4 for f in records.glob(f"lr={done_lr}-*")}
    resumed = [f for f in records.glob(f"lr={lr}-*") if f not in before_resume]
    assert 1 <= checkpointed < 4 and len(batches_per_epoch) == 1 and len(resumed) == 2
    assert [f.stat().st_size for f in resumed] == [(4 - checkpointed) * batches_per_epoch.pop()] * 2
