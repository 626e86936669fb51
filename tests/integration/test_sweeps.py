"""Real sweeps on a real local Ray: every trial a 2-rank DDP job over gloo, tiny epochs."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml

import tune_service
from tune_service import cli
from tune_service.search.schedule import expected_schedule
from tune_service.spec import SchedulerSpec

pytestmark = [pytest.mark.integration, pytest.mark.timeout(400)]
ROOT = Path(__file__).resolve().parents[2]


def only_dir(storage: Path) -> Path:
    (experiment,) = list(storage.iterdir())
    return experiment


@pytest.mark.quick
def test_cli_hyperopt_asha_sweep_end_to_end(ray_cluster, tmp_path, capsys):
    storage = tmp_path / "runs"
    code = cli.main([
        str(ROOT / "search_spaces" / "quickstart.yaml"), "--storage", str(storage), "--name", "quick",
        "--set", "run_cap=5", "--set", "scheduler.max_t=3", "--set", "parameters.hidden.values=[16, 32]",
        "--set", "parameters.lr.min=1e-5",
    ])
    assert code == 0
    out = capsys.readouterr().out
    assert "rank  trial" in out and "5 trials:" in out  # the leaderboard

    summary = json.loads((storage / "quick" / "summary.json").read_text())
    trials = summary["trials"]
    assert len(trials) == 5
    assert all(t["metrics"]["world_size"] == 2 for t in trials)  # every trial a 2-rank DDP job
    assert all(t["status"] in ("completed", "stopped") for t in trials)
    assert any(t["status"] == "stopped" and t["epochs"] < 3 for t in trials)  # ASHA stopped one early
    assert all(t["status"] != "completed" or t["epochs"] == 3 for t in trials)
    best = summary["best"]
    assert best["metrics"]["val_accuracy"] == max(t["metrics"]["val_accuracy"] for t in trials)
    assert yaml.safe_load((storage / "quick" / "best_config.yaml").read_text()) == best["config"]
    assert set(best["config"]) == {"lr", "hidden", "dropout", "batch_size"}
    assert isinstance(best["config"]["hidden"], int) and isinstance(best["config"]["lr"], float)


def test_bohb_sweep_with_hyperband_for_bohb(ray_cluster, tmp_path):
    known = {"lr": 0.003, "hidden": 64, "layers": 2, "weight_decay": 1e-4}  # the sweep's first trial
    result = tune_service.run(ROOT / "search_spaces" / "bohb.yaml", storage=tmp_path, name="bohb", run_cap=3,
                              overrides={"scheduler.max_t": 3, "points_to_evaluate": [known]}, verbose=0)
    assert len(result.trials) == 3 and result.trials[0].config == known
    assert all(t.status in ("completed", "stopped") and t.epochs >= 1 for t in result.trials)
    # HyperBand-for-BOHB halves synchronously, so the dry-run's schedule is exact: 3 trials to epoch 1,
    # one of them on to epoch 3.
    expected = expected_schedule(SchedulerSpec("hyperband", max_t=3, reduction_factor=3), 3, bohb=True)
    assert sorted(t.epochs for t in result.trials) == [1, 1, 3]
    assert sum(t.epochs for t in result.trials) == expected.trial_epochs == 5
    assert result.best is not None and result.best_metrics["val_loss"] == min(t.metrics["val_loss"] for t in result.trials)
    assert 16 <= result.best_config["hidden"] <= 128 and isinstance(result.best_config["hidden"], int)
    assert tune_service.load_results(tmp_path / "bohb").best.trial_id == result.best.trial_id


def test_hyperband_with_random_search_fills_its_brackets_one_trial_at_a_time(ray_cluster, tmp_path):
    """One trial at a time on 2 CPUs: a trial paused at a rung must not hold the only slot, or the
    bracket never fills and HyperBand stops nothing."""
    spec = {"name": "hb", "method": "random", "run_cap": 5, "metric": {"name": "val_accuracy", "goal": "maximize"},
            "parameters": {"lr": {"distribution": "log_uniform_values", "min": 1e-3, "max": 3e-2}},
            "scheduler": {"type": "hyperband", "max_t": 3, "reduction_factor": 3}}
    result = tune_service.run(spec, storage=tmp_path, name="hb", verbose=0)
    # max_t=3, eta=3: a bracket of 2 trials trained to 3 epochs, then one of 3 trials from epoch 1
    # that keeps ceil(3/3) = 1 of them.
    expected = expected_schedule(SchedulerSpec("hyperband", max_t=3, reduction_factor=3), 5)
    assert [[(r.epoch, r.trials) for r in b.rungs] for b in expected.brackets] == [[(3, 2)], [(1, 3), (3, 1)]]
    assert sorted(t.epochs for t in result.trials) == [1, 1, 3, 3, 3]
    assert sum(t.epochs for t in result.trials) == expected.trial_epochs


@pytest.mark.quick
def test_user_task_by_import_path_under_grid_and_fifo(ray_cluster, tmp_path):
    spec = {
        "name": "regression", "task": "user_tasks:TinyRegression", "method": "grid",
        "metric": {"name": "val_loss", "goal": "minimize"},
        "parameters": {"lr": {"values": [0.05, 0.1]}, "width": {"value": 2}},
        "scheduler": {"type": "fifo", "max_t": 2},
    }
    result = tune_service.run(spec, storage=tmp_path, name="grid", verbose=0)
    assert sorted(t.config["lr"] for t in result.trials) == [0.05, 0.1]
    assert all(t.status == "completed" and t.epochs == 2 for t in result.trials)
    assert all("val_accuracy" not in t.metrics and t.metrics["world_size"] == 2 for t in result.trials)


def _rank_environments(tmp_path: Path, name: str) -> list[dict]:
    """Run a one-trial warm sweep whose ranks record their environment; what they recorded."""
    record_dir = tmp_path / f"{name}_ranks"
    record_dir.mkdir()
    spec = {"name": name, "task": "gang_tasks:EnvironmentRecordingDigits", "method": "random", "run_cap": 1,
            "metric": {"name": "val_accuracy", "goal": "maximize"},
            "parameters": {"record_dir": {"value": str(record_dir)}}, "scheduler": {"type": "fifo", "max_t": 1}}
    result = tune_service.run(spec, storage=tmp_path, name=name, verbose=0)
    assert [t.status for t in result.trials] == ["completed"]
    return [json.loads(path.read_text()) for path in sorted(record_dir.iterdir())]


def test_warm_trials_start_in_the_jobs_environment_with_tunes_variable_still_set(ray_cluster, tmp_path,
                                                                                 monkeypatch):
    """Tune's own runtime environment for trial actors is set aside (so a trial actor, and its ranks, can
    start on a Python worker Ray keeps ready), and the variable it carried is in every rank's process.
    With a variable Tune propagates set in the driver, Tune's registration stands: it reaches the ranks."""
    from ray.tune.execution.class_cache import ENV_VARS_TO_PROPAGATE

    from tune_service.ray_internals import TUNE_TRIAL_ENVIRONMENT

    ranks = _rank_environments(tmp_path, "ready")
    assert len(ranks) == 2
    assert all(r["runtime_env"] == {} and r["variables"] == TUNE_TRIAL_ENVIRONMENT for r in ranks)

    propagated = "RAY_TRAIN_ENABLE_PRINT_PATCH"  # set to its default: it changes nothing here
    assert propagated in ENV_VARS_TO_PROPAGATE
    monkeypatch.setenv(propagated, "1")
    ranks = _rank_environments(tmp_path, "propagated")
    assert all(r["runtime_env"] == {"env_vars": {**TUNE_TRIAL_ENVIRONMENT, propagated: "1"}} for r in ranks)


def test_plain_train_loop_runs_unchanged_with_metrics_averaged_over_ranks(ray_cluster, tmp_path):
    from user_tasks import shard_reporting_loop

    spec = {
        "name": "plain", "method": "random", "run_cap": 1, "metric": {"name": "score", "goal": "maximize"},
        "parameters": {"offset": {"value": 10}, "steps": {"value": 2}},
        "scheduler": {"type": "fifo", "max_t": 2},
    }
    result = tune_service.run(spec, storage=tmp_path, name="plain", task=shard_reporting_loop, verbose=0)
    (trial,) = result.trials
    assert trial.epochs == 2  # epoch filled in from the report count
    assert trial.metrics["world_size"] == 2
    assert trial.metrics["rank_seen"] == 0.5  # the mean of ranks 0 and 1, not rank 0's shard
    assert trial.metrics["score"] == 10 + 1 + 0.5


def test_a_trial_too_large_for_the_cluster_is_refused_before_anything_is_written(ray_cluster, tmp_path):
    storage = tmp_path / "runs"
    with pytest.raises(tune_service.TuneServiceError, match="resources"):
        tune_service.run({"name": "big", "resources": {"workers": 3}, "parameters": {"lr": {"value": 0.01}}},
                         storage=storage, name="big")
    assert not (storage / "big").exists()  # no experiment directory for a sweep that never started


#: Per method, a seed whose first two (random) configs take both sides of both conditions, so the check
#: below sees each inactive parameter left out within the first two trials, and the trial count: the two
#: TPEs' start-up is two random trials (``_initial_points``), and the 4th trial is suggested once two have
#: completed (two run at once), so it is the model's own proposal under the conditional space. BOHB's model
#: needs more points than a short sweep has (more than one per parameter, plus one), so its trials are
#: all random, as is random search: two trials see the same code paths as more would. The trials are a
#: Task's on warm gangs (what a plain train loop receives: test_plain_train_loop_runs_unchanged_...).
CONDITIONAL_SWEEPS = [("bayes", 0, 4), ("bohb", 1, 2), ("random", 1, 2), ("optuna", 0, 4)]


@pytest.mark.parametrize("method, seed, trials", CONDITIONAL_SWEEPS, ids=[m for m, _, _ in CONDITIONAL_SWEEPS])
def test_a_conditional_space_never_hands_a_trial_an_inactive_parameter(ray_cluster, tmp_path, method, seed, trials):
    from user_tasks import CONDITIONAL_NAMES, ConfigReporting

    scheduler = {"type": "hyperband" if method == "bohb" else "fifo", "max_t": 1}
    spec = tune_service.load_spec(ROOT / "search_spaces" / "conditional.yaml", {
        "method": method, "run_cap": trials, "seed": seed, "metric": {"name": "val_score", "goal": "maximize"},
        "scheduler": scheduler, "resources.workers": 1,  # one rank: two trials at once on two CPUs
    })
    result = tune_service.run(spec, storage=tmp_path, name=method, task=ConfigReporting(), verbose=0)
    assert len(result.trials) == trials and all(t.status == "completed" for t in result.trials)
    for trial in result.trials:
        config = trial.config
        active = {"model", "hidden", "optimizer", "lr"}
        active |= {"layers", "dropout"} if config["model"] == "mlp" else set()
        active |= {"momentum"} if config["optimizer"] == "sgd" else set()
        assert set(config) == active  # what the searcher proposed ...
        received = {name for i, name in enumerate(CONDITIONAL_NAMES) if int(trial.metrics["val_received"]) >> i & 1}
        assert received == active  # ... and what the ranks received
    # Both sides of each condition were drawn, so the check above saw inactive parameters left out.
    assert {t.config["model"] for t in result.trials} == {"mlp", "cnn"}
    assert {t.config["optimizer"] for t in result.trials} == {"adam", "sgd"}


def test_a_real_wandb_sweep_file_runs_a_short_sweep(ray_cluster, tmp_path):
    """fastai's Simpsons sweep from wandb/examples, as it is but for the budget and a `task` (its program is
    not in the collection): digits, taking any parameter, trains in place of its program, with the file's
    batch sizes, dropout and W&B's old log_uniform (natural-log exponents)."""
    path = ROOT / "tests" / "data" / "wandb_sweeps" / "02_fastai-simpsons-bayes.yaml"
    result = tune_service.run(path, storage=tmp_path, name="fastai", verbose=0, overrides={
        "task": "user_tasks:DigitsTakingAnything", "run_cap": 2, "scheduler.max_t": 1, "metric.name": "val_accuracy",
        "resources.workers": 1})
    assert len(result.trials) == 2 and all(t.status == "completed" for t in result.trials)
    for trial in result.trials:
        config = trial.config
        assert set(config) == {"epochs", "dropout", "img_size", "one_cycle", "batch_size", "pretrained", "learning_rate"}
        assert config["epochs"] == 20 and config["batch_size"] in (8, 16, 32, 64) and 0 <= config["dropout"] <= 1
        assert isinstance(config["pretrained"], bool) and math.exp(-11) <= config["learning_rate"] <= math.exp(-2)
        assert trial.metrics["global_batch"] == config["batch_size"]  # the file's batch size reached the loop
