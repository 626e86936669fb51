"""The import hook a W&B program runs under (``tune_service/programs/hook``), on a real program in its
own process and real wandb offline runs: its config is the trial's, its logs are the trial's reports,
its run is the trial's run, and a rank other than 0 logs nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tune_service.programs.rank import HOOK_DIR
from wandb_files import offline_runs

PROGRAM = Path(__file__).resolve().parents[2] / "data" / "programs" / "logs_metrics.py"


def run_program(tmp_path: Path, rank0: bool, params: dict, *args: str,
                mode: str = "offline") -> subprocess.CompletedProcess:
    trial = tmp_path / "trial.json"
    run = {"id": "sweep-abc-0001", "name": "#001 lr=0.3", "group": "sweep-abc", "project": "ours",
           "dir": str(tmp_path), "mode": mode if rank0 else "disabled", "resume": "allow"}
    trial.write_text(json.dumps({"params": params, "run": run}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    env.update(PYTHONPATH=str(HOOK_DIR), TUNE_SERVICE_TRIAL=str(trial), WANDB_SILENT="true")
    if rank0:
        env["TUNE_SERVICE_REPORTS"] = str(tmp_path / "reports.jsonl")
    return subprocess.run([sys.executable, str(PROGRAM), *args], env=env, capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)


def test_rank_0_logs_its_reports_into_the_trials_run_with_the_trials_config(tmp_path):
    done = run_program(tmp_path, True, {"lr": 0.3, "model": {"depth": 4}}, "--steps", "3")
    assert done.returncode == 0, done.stderr[-2000:]
    reports = [json.loads(line) for line in (tmp_path / "reports.jsonl").read_text().splitlines()]
    assert [r["step"] for r in reports] == [1, 2, 3]  # the uncommitted log joins the next one
    assert reports[0] == {"train_loss": 1.0, "val_loss": 0.3, "val.accuracy": 0.5, "step": 1}
    (run,) = offline_runs(tmp_path)
    assert (run.run_id, run.group, run.project, run.name) == ("sweep-abc-0001", "sweep-abc", "ours", "#001 lr=0.3")
    assert run.config["lr"] == 0.3 and run.config["steps"] == 3  # the trial's value over the program's default
    assert run.config["model"] == {"depth": 4, "width": 8}  # nested parameters as nested dicts
    assert [row["val_loss"] for row in run.history] == [0.3, 0.6, 0.3 * 3]


def test_without_wandb_for_the_sweep_rank_0_still_reports_and_writes_no_run(tmp_path):
    done = run_program(tmp_path, True, {"lr": 0.2}, "--steps", "2", mode="disabled")
    assert done.returncode == 0, done.stderr[-2000:]
    reports = [json.loads(line) for line in (tmp_path / "reports.jsonl").read_text().splitlines()]
    assert [(r["step"], r["val_loss"]) for r in reports] == [(1, 0.2), (2, 0.4)]
    assert not list(tmp_path.glob("wandb/*run-*"))


def test_another_rank_trains_with_the_config_but_logs_nothing(tmp_path):
    done = run_program(tmp_path, False, {"lr": 0.5}, "--steps", "2")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "'lr': 0.5" in done.stdout
    assert not (tmp_path / "reports.jsonl").exists() and not list(tmp_path.glob("wandb/*run-*"))


def test_without_the_trial_the_hook_does_nothing(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    env.update(PYTHONPATH=str(HOOK_DIR), WANDB_MODE="disabled")
    done = subprocess.run([sys.executable, str(PROGRAM), "--steps", "1"], env=env, capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert done.returncode == 0 and "'lr': 0.1" in done.stdout, done.stderr[-2000:]
