"""Every project in examples/ run as its README says (``tune-run examples/NAME/sweep.yaml``), as a user
would: the CLI's own process, started outside the example's directory, with its own embedded Ray."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tune_service import cli
from tune_service.experiment.layout import read_trial_results, trial_results_file
from tune_service.results import sweep_result
from tune_service.search.pareto import dominates
from wandb_files import offline_run_ids, offline_runs

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
ROOT = Path(__file__).resolve().parents[2]
TUNE_RUN = Path(sys.executable).with_name("tune-run")  # the console script pip installed


def run_example(name: str, storage: Path, *flags: str):
    """The example's README line (with ``flags``), run from ``storage`` (not the example's directory); its
    results."""
    readme = (ROOT / "examples" / name / "README.md").read_text()
    # the line the README gives is the one run here
    assert " ".join([f"tune-run examples/{name}/sweep.yaml", *flags]) + "\n" in readme
    done = subprocess.run([str(TUNE_RUN), str(ROOT / "examples" / name / "sweep.yaml"), *flags,
                           "--storage", str(storage)], cwd=storage, capture_output=True, text=True, timeout=240)
    assert done.returncode == cli.EXIT_OK, (done.stdout + done.stderr)[-3000:]
    (experiment,) = [p for p in storage.iterdir() if p.is_dir()]
    return sweep_result.load(experiment), experiment


def test_the_cnn_example_trains_in_bf16_on_a_cosine_schedule_and_asha_stops_trials(tmp_path):
    result, experiment = run_example("cnn_digits", tmp_path)
    assert len(result.trials) == 6 and any(t.status == "stopped" for t in result.trials)
    assert result.best.metrics["val_accuracy"] > 0.85
    (best_dir,) = experiment.glob(f"trial_{result.best.trial_id}*")
    reports = [json.loads(line) for line in (best_dir / "result.json").read_text().splitlines()]
    assert {r["precision"] for r in reports} == {"bf16"}
    lrs = [r["lr"] for r in reports]
    assert lrs == sorted(lrs, reverse=True) and lrs[-1] < 0.1 * lrs[0]  # the cosine decays to ~0


def test_the_regression_example_minimises_a_validation_mse(tmp_path):
    result, _ = run_example("diabetes_regression", tmp_path)
    assert len(result.trials) == 6 and {t.status for t in result.trials} == {"completed"}
    best = result.best.metrics["val_mse"]
    assert result.mode == "min" and best == min(t.metrics["val_mse"] for t in result.trials)
    assert best < 4500  # the target's variance is about 6000: it learned


def test_the_transformer_example_learns_from_dict_batches_and_asha_stops_trials_mid_epoch_by_steps(tmp_path):
    result, experiment = run_example("sequence_transformer", tmp_path)
    assert len(result.trials) == 4 and result.time_unit == "step"
    assert result.best.metrics["val_token_accuracy"] > 0.5  # chance is 1/16
    # ASHA over steps: a stopped trial ended at a rung, mid-epoch (an epoch is 63 steps)
    stopped = [t for t in result.trials if t.status == "stopped"]
    assert stopped and {t.steps for t in stopped} <= {100, 200, 400}
    (best_dir,) = experiment.glob(f"trial_{result.best.trial_id}*")
    reports = [json.loads(line) for line in (best_dir / "result.json").read_text().splitlines()]
    assert [r["step"] for r in reports] == list(range(50, 501, 50)) and reports[0]["epoch"] == round(50 / 63, 4)
    assert reports[0]["lr"] > reports[-1]["lr"]  # the cosine schedule after the warm-up
    (run,) = [r for r in offline_runs(experiment) if r.run_id.endswith(result.best.trial_id)]
    assert [row["_step"] for row in run.history] == [r["step"] for r in reports]  # wandb's step is the step


def test_the_ray_train_loop_example_runs_unchanged(tmp_path):
    result, experiment = run_example("ray_train_loop", tmp_path)
    assert len(result.trials) == 2 and result.best.metrics["val_accuracy"] > 0.8
    assert list(experiment.glob("trial_*/ddp/checkpoint_*/state.pt"))  # its own checkpoints, where Train keeps them


def test_the_wandb_program_example_runs_its_unchanged_script_as_2_rank_trials_and_asha_stops_some(tmp_path):
    result, experiment = run_example("wandb_program", tmp_path, "--set", "resources.workers=2")
    assert len(result.trials) == 4 and result.time_unit == "value"
    assert all(t.status in ("completed", "stopped") for t in result.trials)
    assert any(t.status == "stopped" and t.progress("value") < 6 for t in result.trials)  # at a W&B hyperband rung
    assert all(t.status != "completed" or t.metrics["epoch"] == 6 for t in result.trials)
    assert result.best.metrics["val_accuracy"] > 0.8
    for trial in result.trials:  # every trial a 2-rank job: both ranks' programs ran
        program = next(experiment.glob(f"trial_{trial.trial_id}*")) / "program"
        assert sorted(p.name for p in program.glob("rank_*.log")) == ["rank_0.log", "rank_1.log"]
    ids = [i.rsplit("-", 1)[-1] for i in offline_run_ids(experiment) if not i.endswith("-summary")]
    assert sorted(ids) == sorted(t.trial_id for t in result.trials)  # one wandb run per trial ...
    runs = {run.run_id.rsplit("-", 1)[-1]: run for run in offline_runs(experiment) if run.job_type == "trial"}
    for trial in result.trials:  # ... holding its metrics, a stopped trial's too (its program exited cleanly)
        logged = trial.progress("value")
        assert [row["val_accuracy"] for row in runs[trial.trial_id].history][:logged] == pytest.approx(
            [r["val_accuracy"] for r in read_trial_results(trial_results_file(experiment, trial.trial_id))
             if "val_accuracy" in r][:logged])
    # the stopped trials' programs were ended with their process groups
    left = [p for p in psutil.process_iter(["cmdline", "cwd"])
            if "train.py" in (p.info["cmdline"] or []) and p.info["cwd"] == str(ROOT / "examples" / "wandb_program")]
    assert not left


def test_the_wandb_multi_objective_example_runs_w_and_bs_new_schema_to_its_pareto_front(tmp_path):
    """W&B's `metrics:`, `method: custom` and `scheduler: {engine: optuna}`, with its unchanged script."""
    result, experiment = run_example("wandb_multi_objective", tmp_path)
    assert result.objectives == [("val_accuracy", "max"), ("n_params", "min")] and result.best is None
    assert len(result.trials) == 3 and all(t.status == "completed" for t in result.trials)
    for t in result.trials:  # what the script logged: its MLP's parameter count
        assert t.metrics["n_params"] == 64 * t.config["hidden"] + t.config["hidden"] + t.config["hidden"] * 10 + 10
    points = {t.trial_id: (t.metrics["val_accuracy"], t.metrics["n_params"]) for t in result.trials}
    front = {i for i, p in points.items() if not any(dominates(q, p, ("max", "min")) for q in points.values())}
    assert {t.trial_id for t in result.pareto} == front
    saved = json.loads((experiment / "summary.json").read_text())
    assert {t["trial_id"] for t in saved["pareto"]} == front and saved["hypervolume"]["value"] > 0
    sweep = json.loads((experiment / "sweep.json").read_text())["spec"]
    assert sweep["scheduler"] == {"engine": "optuna"} and sweep["method"] == "custom"  # the file, as W&B wrote it
