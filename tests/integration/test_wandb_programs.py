"""Real W&B sweep programs that nobody here wrote, run unchanged as their users run them under W&B's agent
(issue 38): the sweep file as published and ``tune-run FILE``, from a copy of the program's folder (some
write into it). Only the lines that download a data set were swapped for scikit-learn's digits; each
folder's SOURCE.md names the repository, the commit and every change (tests/data/wandb_programs/)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from tune_service import cli
from tune_service.results import sweep_result
from wandb_files import offline_runs

pytestmark = [pytest.mark.integration, pytest.mark.timeout(420)]
PROGRAMS = Path(__file__).resolve().parents[1] / "data" / "wandb_programs"


def run_sweep(tmp_path: Path, folder: str, sweep_file: str, *flags: str, capfd=None, monkeypatch=None):
    """``tune-run FOLDER/SWEEP_FILE [flags]`` on a copy of the folder (on this session's Ray), from the
    folder (as its users run ``wandb agent``) when ``monkeypatch`` is given, else from elsewhere; the exit
    code, the printed output and the results."""
    project = tmp_path / folder
    shutil.copytree(PROGRAMS / folder, project)
    storage = tmp_path / "runs"
    if monkeypatch is not None:
        monkeypatch.chdir(project)
    code = cli.main([str(project / sweep_file), "--storage", str(storage), "--name", folder, "-q", *flags])
    output = capfd.readouterr() if capfd is not None else None
    return code, output, sweep_result.load(storage / folder), storage / folder


def trial_runs(experiment: Path) -> dict:
    return {run.run_id.rsplit("-", 1)[-1]: run for run in offline_runs(experiment) if run.job_type != "sweep-summary"}


def test_wandb_docs_sweep_example_reads_its_config_from_wandb_config(ray_cluster, tmp_path, capfd):
    """wandb/docs, "Add W&B to your code" (CLI): the program loads its own sweep file as defaults and takes
    every value from ``run.config``."""
    code, out, result, experiment = run_sweep(tmp_path, "docs_sweep_cli", "config.yaml", "--set", "run_cap=2",
                                              capfd=capfd)
    assert code == cli.EXIT_OK, out
    assert [t.status for t in result.trials] == ["completed", "completed"]
    assert all(t.progress("value") == t.config["epochs"] - 1 for t in result.trials)  # epochs 1..N-1, as it logs
    runs = trial_runs(experiment)
    for trial in result.trials:
        assert runs[trial.trial_id].config["lr"] == pytest.approx(trial.config["lr"])  # the trial's, not the file's


def test_wandb_boolean_flags_example_has_no_metric_and_every_trial_runs_to_its_end(ray_cluster, tmp_path, capfd):
    """wandb/examples sweeps-boolean-parameters: a grid with no ``metric:``, as W&B accepts it (issue 38, 1)."""
    code, out, result, experiment = run_sweep(tmp_path, "examples_boolean_flags", "sweep-bool.yaml", capfd=capfd)
    assert code == cli.EXIT_OK, out
    assert len(result.trials) == 8 and {t.status for t in result.trials} == {"completed"}
    assert result.metric is None and result.best is None
    assert {(t.config["optimizer"], t.config["flag1"], t.config["flag2"]) for t in result.trials} == {
        (o, a, b) for o in ("sgd", "adam") for a in (False, True) for b in (False, True)}
    assert all("metric" in t.metrics for t in result.trials)  # what each logged, listed
    assert "no metric: the trials are not ranked" in out.out
    assert "best_config" not in out.out and not (experiment / "best_config.yaml").exists()


def test_wandb_pytorch_cnn_example_as_2_rank_trials_saves_into_run_dir_and_hyperband_counts_values(
        ray_cluster, tmp_path, capfd):
    """wandb/examples pytorch-cnn-fashion: W&B's hyperband (max_iter 27, s 2, eta 3: bands at the 3rd and
    9th value of ``loss``) over a program that logs every 100 batches, and that ends with
    ``torch.save(..., os.path.join(wandb.run.dir, "model.pt"))`` on every rank (issue 38, 2 and 3)."""
    code, out, result, experiment = run_sweep(tmp_path, "examples_pytorch_cnn_fashion", "sweep-grid-hyperband.yaml",
                                              "--set", "run_cap=2", "--set", "resources.workers=2", capfd=capfd)
    assert code == cli.EXIT_OK, out
    assert result.time_unit == "value" and {t.status for t in result.trials} <= {"completed", "stopped"}
    for trial in result.trials:
        program = next(experiment.glob(f"trial_{trial.trial_id}*")) / "program"
        assert "Traceback" not in (program / "rank_1.log").read_text()  # rank 1 saved into its stand-in's dir
        if trial.status == "completed":  # a program stopped at a band is ended, saved or not (a race in CI)
            assert list((program / "rank_1_wandb").rglob("model.pt"))
        if trial.status == "stopped":  # at a band: after the 3rd value of loss, not the 3rd wandb.log
            assert trial.progress("value") >= 3
    runs = trial_runs(experiment)
    completed = [t for t in result.trials if t.status == "completed"]
    assert completed and all((runs[t.trial_id].directory / "files" / "model.pt").is_file() for t in completed)


def test_wandb_pytorch_colab_sweep_logs_per_batch_and_reports_per_value_of_its_metric(ray_cluster, tmp_path, capfd):
    """wandb/examples' PyTorch sweeps colab, as a script: ``batch loss`` logged every batch, ``loss``
    once an epoch; the scheduler's clock counts only the values of ``loss``."""
    code, out, result, experiment = run_sweep(tmp_path, "wandb_colab_pytorch_sweeps", "sweep.yaml", "--set",
                                              "run_cap=2", capfd=capfd)
    assert code == cli.EXIT_OK, out
    assert {t.status for t in result.trials} == {"completed"}
    for trial in result.trials:
        assert trial.progress("value") == 1 and trial.metrics["step"] > 1  # one value of loss, many logs
    assert all(runs.project == "pytorch-sweeps-demo" for runs in trial_runs(experiment).values())


def test_a_nested_bayes_sweep_from_a_research_repository(ray_cluster, tmp_path, capfd, monkeypatch):
    """PratikStar/TimbreSpace: bayes over a nested parameter, project and entity at the top of the file,
    which sits in a subfolder beside its program and names it from the repository's root
    (``program: analysis/wandb_sweeps.py``), where its users run W&B's agent."""
    code, out, result, experiment = run_sweep(tmp_path, "timbrespace_nested", "analysis/wandb_sweeps.yaml",
                                              "--set", "run_cap=3", capfd=capfd, monkeypatch=monkeypatch)
    assert code == cli.EXIT_OK, out
    assert len(result.trials) == 3 and {t.status for t in result.trials} == {"completed"}
    assert all(0.0001 <= t.config["lr"]["kld"] <= 0.1 for t in result.trials)
    assert result.best is not None and result.best.metrics["loss"] == min(t.metrics["loss"] for t in result.trials)


def test_a_students_numpy_assignment_with_its_own_command_line(ray_cluster, tmp_path, capfd):
    """AaradhyaDashore/da6401_assignment_1: no ``program:``, a ``command:`` with a hard-coded ``python``
    and a multi-value flag before ``${args}``, run from the repository's root; it logs images and a
    confusion matrix, and writes its best model into its own folder (here a copy)."""
    code, out, result, experiment = run_sweep(tmp_path, "da6401_numpy_mlp", "precision_sweep.yaml", "--set",
                                              "run_cap=1", "--set", "parameters.epochs.values=[3]", capfd=capfd)
    assert code == cli.EXIT_OK, out
    (trial,) = result.trials
    assert trial.status == "completed" and trial.progress("value") == 3 and 0 < trial.metrics["val_acc"] <= 1
    assert (tmp_path / "da6401_numpy_mlp" / "best_config.json").is_file()


def test_wandbs_cross_validation_example_broken_on_todays_wandb_fails_in_one_line_with_its_own_error(
        ray_cluster, tmp_path, capfd):
    """wandb/examples sweeps-cross-validation calls ``Run.get_sweep_url``, which wandb 0.31 removed: the
    program raises, then hangs at exit joining the fold workers it forked. Its trial fails at once with
    the program's own error and where its whole output is, not as a stall, and no Ray traceback is
    printed (issue 38, smaller ones)."""
    code, out, result, experiment = run_sweep(tmp_path, "examples_cross_validation", "sweep-cross-validation.yaml",
                                              "--set", "run_cap=1", capfd=capfd)
    assert code == cli.EXIT_FAILED
    (trial,) = result.trials
    assert trial.status == "failed"
    assert "raised AttributeError: 'Run' object has no attribute 'get_sweep_url'" in trial.error
    log = next(experiment.glob(f"trial_{trial.trial_id}*")) / "program" / "rank_0.log"
    assert f"its output: {log}; its last lines:" in trial.error and "stall" not in trial.error.lower()
    assert "get_sweep_url" in log.read_text()  # the program's own traceback, whole
    assert "Traceback" not in out.out + out.err
    assert "Trial task failed" in (experiment / "driver.log").read_text()  # the whole story, for whoever needs it
    summary = json.loads((experiment / "summary.json").read_text())
    assert summary["trials"][0]["status"] == "failed"
