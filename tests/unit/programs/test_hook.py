"""The import hook a W&B program runs under (``tune_service/programs/hook``), on a real program in its
own process and real wandb offline runs: its config is the trial's, its logs are the trial's reports,
its run is the trial's run, and a rank other than 0 logs nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tune_service.programs.rank import HOOK_DIR
from wandb_files import offline_runs

PROGRAMS = Path(__file__).resolve().parents[2] / "data" / "programs"
PROGRAM = PROGRAMS / "logs_metrics.py"


def run_program(tmp_path: Path, rank0: bool, params: dict, *args: str, mode: str = "offline",
                program: Path = PROGRAM) -> subprocess.CompletedProcess:
    trial = tmp_path / "trial.json"
    run = {"id": "sweep-abc-0001", "name": "#001 lr=0.3", "group": "sweep-abc", "project": "ours",
           "dir": str(tmp_path if rank0 else tmp_path / "rank_1_wandb"), "mode": mode if rank0 else "disabled",
           "resume": "allow"}
    trial.write_text(json.dumps({"params": params, "run": run}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    # the environment programs/rank.py gives a rank (WANDB_RUN_ID, as W&B's agent marks the sweep's run)
    env.update(PYTHONPATH=str(HOOK_DIR), TUNE_SERVICE_TRIAL=str(trial), WANDB_SILENT="true", WANDB_RUN_ID=run["id"])
    if rank0:
        env["TUNE_SERVICE_REPORTS"] = str(tmp_path / "reports.jsonl")
    return subprocess.run([sys.executable, str(program), *args], env=env, capture_output=True, text=True,
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


def test_another_rank_gets_a_stand_in_run_whose_dir_exists_so_saving_into_it_works(tmp_path):
    """W&B's PyTorch example ends with torch.save(..., os.path.join(wandb.run.dir, "model.pt")): on a rank
    other than 0 the disabled run's dir did not exist, and the save crashed the rank (issue 38, 2)."""
    done = run_program(tmp_path, False, {"lr": 0.5}, program=PROGRAMS / "saves_into_run_dir.py")
    assert done.returncode == 0, done.stderr[-2000:]
    assert list((tmp_path / "rank_1_wandb").rglob("model.pt"))  # in the rank's own directory
    assert not list(tmp_path.glob("wandb/*run-*")) and not (tmp_path / "reports.jsonl").exists()


def test_rank_0s_run_knows_its_sweep_as_the_trials_group(tmp_path):
    done = run_program(tmp_path, True, {"lr": 0.5}, program=PROGRAMS / "saves_into_run_dir.py")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "sweep_id sweep-abc" in done.stdout  # not None: the trial's group (issue 38, sweep_run.sweep_id)
    (run,) = offline_runs(tmp_path)
    assert run.run_id == "sweep-abc-0001" and (run.directory / "files" / "model.pt").is_file()


def test_runs_a_program_opens_for_itself_are_its_own_in_the_trials_group_and_not_the_trials_reports(tmp_path):
    """W&B's cross-validation example: fold workers that clear the agent's WANDB_ variables open runs of
    their own; only the parent's run is the trial's, and only its logs are reports (issue 38, 5)."""
    done = run_program(tmp_path, True, {"lr": 0.2}, program=PROGRAMS / "cross_validation.py")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "sweep id: sweep-abc sweep url: None" in done.stdout
    reports = [json.loads(line) for line in (tmp_path / "reports.jsonl").read_text().splitlines()]
    assert reports == [{"val_accuracy": pytest.approx(0.2 * (1 + 2 + 3) / 3), "step": 1}]
    runs = {run.run_id: run for run in offline_runs(tmp_path)}
    trial = runs.pop("sweep-abc-0001")
    assert [row["val_accuracy"] for row in trial.history] == [pytest.approx(0.4)]
    assert len(runs) == 3 and {run.group for run in runs.values()} == {"sweep-abc"}  # the fold runs
    assert sorted(run.name for run in runs.values()) == ["#001 lr=0.3-0", "#001 lr=0.3-1", "#001 lr=0.3-2"]
    assert all(len(run.history) == 2 for run in runs.values())
