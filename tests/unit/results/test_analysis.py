"""A sweep read back as data (``tune_service.load_results``): the trials and history tables, the best
trial's checkpoint and model, and the spec that trains it again; on experiment directories written here
as the driver and Tune write them (summary.json, sweep.json, each trial's params.json and result.json,
real checkpoints of the digits task), without Ray."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
import yaml

import tune_service
from tune_service.errors import TuneServiceError
from tune_service.execution.plan import make_plan, plan_sweep
from tune_service.execution.resources import ClusterResources
from tune_service.experiment import layout
from tune_service.results import analysis, sweep_result
from tune_service.results.analysis import CONFIG_PREFIX, RECORD_COLUMNS, load_results
from tune_service.results.sweep_result import SweepResult, TrialRecord
from tune_service.search import registry
from tune_service.spec import load_spec
from tune_service.tasks.digits import Digits
from tune_service.training.checkpoint import save_checkpoint
from tune_service.training.precision import choose_precision

ROOT = Path(__file__).resolve().parents[3]
QUICKSTART = ROOT / "search_spaces" / "quickstart.yaml"
T0 = 1_800_000_000  # Tune's report timestamps, in seconds


def quickstart_source(**changes) -> dict:
    """The quickstart spec as the driver saves it in sweep.json (a parsed document), max_t 3."""
    source = yaml.safe_load(QUICKSTART.read_text())
    source["scheduler"]["max_t"] = 3
    source.update(changes)
    return source


def tune_report(trial_id: str, epoch: int, config: dict, accuracy: float, *, done: bool = False,
                time_total_s: float | None = None, timestamp: int = T0) -> dict:
    """One line of a trial's result.json, as Tune writes it for the shared loop's report."""
    return {
        "val_loss": 1.0 - accuracy, "val_accuracy": accuracy, "epoch": epoch, "train_loss": 1.5 - accuracy,
        "world_size": 2, "lr": config.get("lr"), "precision": "fp32", "epoch_time_s": 0.1,
        "timestamp": timestamp, "checkpoint_dir_name": f"checkpoint_{epoch - 1:06d}", "should_checkpoint": True,
        "done": done, "training_iteration": epoch, "trial_id": trial_id, "date": "2027-01-15_08-00-00",
        "time_this_iter_s": 0.5, "time_total_s": 0.5 * epoch if time_total_s is None else time_total_s, "pid": 1,
        "hostname": "node", "node_ip": "127.0.0.1", "config": config, "time_since_restore": 0.5 * epoch,
        "iterations_since_restore": epoch,
    }


def write_trial(experiment: Path, trial_id: str, config: dict, reports: list[dict],
                error: tuple[str, float] | None = None) -> Path:
    """A trial's directory as Tune leaves it: params.json, result.json, and error.txt if it failed
    (``error``: its last line and its modification time)."""
    directory = layout.trial_dir(experiment, trial_id)
    directory.mkdir(parents=True)
    (directory / layout.TRIAL_PARAMS_FILE).write_text(json.dumps(config))
    (directory / layout.TRIAL_RESULTS_FILE).write_text("".join(json.dumps(r) + "\n" for r in reports))
    if error is not None:
        path = directory / layout.TRIAL_ERROR_FILE
        path.write_text(f"Failure # 1 (occurred at 2027-01-15_08-00-00)\nTraceback (most recent call last):\n"
                        f'  File "x.py", line 1, in f\n{error[0]}\n')
        os.utime(path, (error[1], error[1]))
    return directory


def finished_sweep(experiment: Path, running: bool = False) -> dict[str, dict]:
    """A finished quickstart sweep of three trials: one completed, one stopped by ASHA, one failed
    (``running``: its summary partial, as a running sweep's is)."""
    configs = {"aaa": {"lr": 0.01, "hidden": 64, "dropout": 0.1, "batch_size": 32},
               "bbb": {"lr": 0.001, "hidden": 32, "dropout": 0.2, "batch_size": 64},
               "ccc": {"lr": 0.02, "hidden": 128, "dropout": 0.0, "batch_size": 32}}
    write_trial(experiment, "aaa", configs["aaa"], [tune_report("aaa", e, configs["aaa"], a, done=e == 3)
                                                     for e, a in ((1, 0.5), (2, 0.8), (3, 0.9))])
    write_trial(experiment, "bbb", configs["bbb"], [tune_report("bbb", 1, configs["bbb"], 0.3, done=True)])
    write_trial(experiment, "ccc", configs["ccc"], [tune_report("ccc", 1, configs["ccc"], 0.95)],
                error=("tune_service.training.guards.NonFiniteLoss: epoch 2: train_loss is nan", T0 + 60))
    last = lambda trial_id: {k: v for k, v in layout.read_trial_results(  # noqa: E731
        layout.trial_results_file(experiment, trial_id))[-1].items() if k not in sweep_result.TUNE_KEYS}
    trials = (TrialRecord("aaa", "completed", configs["aaa"], last("aaa"), 3),
              TrialRecord("bbb", "stopped", configs["bbb"], last("bbb"), 1),
              TrialRecord("ccc", "failed", configs["ccc"], last("ccc"), 1, "NonFiniteLoss: epoch 2: train_loss is nan"))
    sweep_result.write(SweepResult(str(experiment), "val_accuracy", "max", trials,
                                   sweep_result.best_trial(trials, "val_accuracy", "max"),
                                   {"max_t": 3, **({"in_progress": True} if running else {})}))
    layout.write_sweep_file(experiment, quickstart_source(), None)
    return configs


def test_trials_table_has_one_row_per_trial_with_status_time_metrics_and_config(tmp_path):
    configs = finished_sweep(tmp_path)
    results = tune_service.load_results(tmp_path)

    trials = results.trials
    assert list(trials.columns[:6]) == [*RECORD_COLUMNS, "val_accuracy"]  # the sweep's metric first
    assert [c for c in trials.columns if c.startswith(CONFIG_PREFIX)] == [
        "config/lr", "config/hidden", "config/dropout", "config/batch_size"]
    assert not {"timestamp", "done", "training_iteration", "config", "pid"} & set(trials.columns)
    rows = trials.set_index("trial_id")
    assert list(rows.index) == ["aaa", "bbb", "ccc"]
    assert list(rows["status"]) == ["completed", "stopped", "failed"] and list(rows["epochs"]) == [3, 1, 1]
    assert list(rows["time_total_s"]) == [1.5, 0.5, 0.5]  # Tune's time at the last report
    assert rows.loc["ccc", "error"] == "NonFiniteLoss: epoch 2: train_loss is nan"
    assert rows.loc["aaa", "val_accuracy"] == 0.9 and rows.loc["aaa", "config/hidden"] == 64
    assert rows.loc["bbb", "config/lr"] == configs["bbb"]["lr"]

    # The failed trial's 0.95 is never the best.
    assert results.best.trial_id == "aaa" and results.best_config == configs["aaa"]
    assert [t.trial_id for t in results.ranked()] == ["aaa", "bbb", "ccc"]
    assert "aaa" in results.leaderboard() and results.result.best == results.best


def test_history_has_every_report_of_every_trial(tmp_path):
    finished_sweep(tmp_path)
    history = load_results(tmp_path).history
    assert list(history.columns[:2]) == ["trial_id", "epoch"] and history.columns[-1] == "time_total_s"
    assert {"val_loss", "val_accuracy", "train_loss"} <= set(history.columns)
    assert not {"timestamp", "done", "config", "trial_id.1"} & set(history.columns)
    assert list(zip(history["trial_id"], history["epoch"])) == [("aaa", 1), ("aaa", 2), ("aaa", 3), ("bbb", 1),
                                                                ("ccc", 1)]
    assert list(history.loc[history["trial_id"] == "aaa", "val_accuracy"]) == [0.5, 0.8, 0.9]


def test_history_keeps_the_last_report_of_an_epoch_a_resumed_trial_reported_again(tmp_path):
    config = {"lr": 0.01, "hidden": 64, "dropout": 0.1, "batch_size": 32}
    # Epochs 1-3, then the driver died; resumed from the checkpoint of epoch 1: 2 and 3 again, then 4.
    first = [tune_report("r", e, config, a) for e, a in ((1, 0.5), (2, 0.6), (3, 0.7))]
    again = [tune_report("r", e, config, a, time_total_s=10.0 + e) for e, a in ((2, 0.65), (3, 0.75), (4, 0.8))]
    write_trial(tmp_path, "r", config, first + again)
    layout.write_sweep_file(tmp_path, quickstart_source(), None)

    history = load_results(tmp_path).history
    assert list(history["epoch"]) == [1, 2, 3, 4]
    assert list(history["val_accuracy"]) == [0.5, 0.65, 0.75, 0.8]
    assert list(history["time_total_s"]) == [0.5, 12.0, 13.0, 14.0]


def test_a_running_sweep_without_a_summary_is_read_from_its_trials_directories(tmp_path):
    layout.write_sweep_file(tmp_path, quickstart_source(), None)
    config = {"lr": 0.01, "hidden": 64, "dropout": 0.1, "batch_size": 32}

    def epochs(trial_id: str, n: int, done: bool = False, bonus: float = 0.0) -> list[dict]:
        return [tune_report(trial_id, e, config, 0.1 * e + bonus, done=done and e == n, timestamp=T0 + e)
                for e in range(1, n + 1)]

    write_trial(tmp_path, "done3", config, epochs("done3", 3, done=True))
    write_trial(tmp_path, "asha1", config, epochs("asha1", 1, done=True))
    write_trial(tmp_path, "going", config, epochs("going", 2, bonus=0.5))
    write_trial(tmp_path, "broke", config, epochs("broke", 1, bonus=0.9),
                error=("tune_service.execution.gang.GangBroken: rank 1 of the trial's DDP gang died", T0 + 100))
    # Failed once, then retried: it has reported since its failure.
    write_trial(tmp_path, "retried", config, epochs("retried", 2), error=("RuntimeError: boom", T0 - 100))
    write_trial(tmp_path, "new", config, [])
    (layout.trial_dir(tmp_path, "new") / layout.TRIAL_PARAMS_FILE).unlink()  # started, nothing written yet

    results = load_results(tmp_path)
    rows = results.trials.set_index("trial_id")
    assert dict(rows["status"]) == {"done3": "completed", "asha1": "stopped", "going": "running",
                                    "broke": "failed", "retried": "running", "new": "running"}
    assert dict(rows["epochs"]) == {"done3": 3, "asha1": 1, "going": 2, "broke": 1, "retried": 2, "new": 0}
    assert rows.loc["broke", "error"] == "GangBroken: rank 1 of the trial's DDP gang died"
    assert rows.loc["going", "config/hidden"] == 64 and rows.loc["going", "val_accuracy"] == pytest.approx(0.7)
    assert results.metric == "val_accuracy" and results.mode == "max"
    assert results.best.trial_id == "going"  # a running trial counts with its last report; failed never
    assert list(rows.index)[-1] == "new"  # trials are in the order they first reported; the silent last


def test_a_partial_summary_is_completed_from_the_trials_directories(tmp_path):
    finished_sweep(tmp_path, running=True)
    config = {"lr": 0.03, "hidden": 32, "dropout": 0.0, "batch_size": 64}
    write_trial(tmp_path, "ddd", config, [tune_report("ddd", 1, config, 0.99, timestamp=T0 + 5)])

    results = load_results(tmp_path)
    assert list(results.trials["trial_id"]) == ["aaa", "bbb", "ccc", "ddd"]
    assert results.trials.set_index("trial_id").loc["ddd", "status"] == "running"
    assert results.best.trial_id == "ddd" and len(results.history) == 6
    assert results.lost_attempts == ()


def test_a_directory_a_complete_summary_does_not_list_is_a_lost_attempt_not_a_trial(tmp_path):
    # a killed driver's trial started after Tune's last state save, started again under "aaa" on resume
    finished_sweep(tmp_path)
    config = {"lr": 0.01, "hidden": 64, "dropout": 0.1, "batch_size": 32}
    write_trial(tmp_path, "first", config, [tune_report("first", 1, config, 0.99, timestamp=T0 - 5)])

    results = load_results(tmp_path)
    assert [r.trial_id for r in results.records] == ["aaa", "bbb", "ccc"]
    assert list(results.trials["trial_id"]) == ["aaa", "bbb", "ccc"]
    assert set(results.history["trial_id"]) == {"aaa", "bbb", "ccc"}
    assert results.best.trial_id == "aaa"  # not the lost attempt's better value
    assert results.lost_attempts == ("first",) and layout.trial_dir(tmp_path, "first").is_dir()  # kept on disk


def test_a_trial_a_partial_summary_lists_as_running_is_read_from_its_newer_directory(tmp_path):
    layout.write_sweep_file(tmp_path, quickstart_source(), None)
    config = {"lr": 0.01, "hidden": 64, "dropout": 0.1, "batch_size": 32}
    write_trial(tmp_path, "late", config, [tune_report("late", e, config, 0.3 * e, done=e == 3) for e in (1, 2, 3)])
    write_trial(tmp_path, "early", config, [tune_report("early", 1, config, 0.2, done=True)])
    snapshot = (TrialRecord("early", "stopped", config, {"val_accuracy": 0.2, "epoch": 1}, 1),
                TrialRecord("late", "running", config, {"val_accuracy": 0.3, "epoch": 1}, 1))  # as of epoch 1
    sweep_result.write(SweepResult(str(tmp_path), "val_accuracy", "max", snapshot, None, {"in_progress": True}))

    results = load_results(tmp_path)
    assert results.partial
    rows = results.trials.set_index("trial_id")
    assert dict(rows["status"]) == {"early": "stopped", "late": "completed"}
    assert rows.loc["late", "epochs"] == 3 and rows.loc["late", "val_accuracy"] == pytest.approx(0.9)
    assert results.best.trial_id == "late"
    finished_sweep(tmp_path / "done")
    assert not load_results(tmp_path / "done").partial


@pytest.mark.parametrize("files", [(), ("trial_x/result.json",)])
def test_a_directory_that_is_not_an_experiment_is_refused_in_one_line_naming_it(tmp_path, files):
    for name in files:
        (tmp_path / name).parent.mkdir(parents=True)
        (tmp_path / name).write_text("")
    with pytest.raises(TuneServiceError) as raised:
        load_results(tmp_path)
    message = str(raised.value)
    assert str(tmp_path) in message and "\n" not in message
    with pytest.raises(TuneServiceError, match="not a directory"):
        load_results(tmp_path / "missing")


def test_an_experiment_that_has_no_trials_yet_gives_empty_tables(tmp_path):
    layout.write_sweep_file(tmp_path, quickstart_source(), None)
    results = load_results(tmp_path)
    assert results.trials.empty and list(results.trials.columns) == list(RECORD_COLUMNS)
    assert results.history.empty and results.best is None and results.best_checkpoint is None
    with pytest.raises(TuneServiceError, match="no best trial"):
        results.best_spec()


def digits_checkpoint(directory: Path, config: dict, epoch: int, seed: int, wrap: bool = False) -> dict:
    """A real checkpoint of the digits task, saved by the shared loop's ``save_checkpoint``; the model's
    state. ``wrap``: saved from a DDP-like wrapper (keys with a ``module.`` prefix)."""
    hparams = {**Digits.defaults, **config}
    torch.manual_seed(seed)
    model = Digits().model(hparams)
    saved = torch.nn.Module() if wrap else model
    if wrap:
        saved.module = model
    optimizer = torch.optim.Adam(model.parameters(), lr=hparams["lr"])
    save_checkpoint(directory, model=saved, optimizer=optimizer,
                    scaler=choose_precision("fp32", torch.device("cpu")).scaler(), epoch=epoch,
                    meta={"task": "digits", "hparams": hparams})
    return {k: v.clone() for k, v in model.state_dict().items()}


def test_the_best_model_is_rebuilt_from_the_spec_and_loaded_from_its_newest_checkpoint(tmp_path):
    configs = finished_sweep(tmp_path)
    best_dir = layout.trial_dir(tmp_path, "aaa")
    states = {}
    for epoch in (2, 3):  # as a warm trial leaves them: Tune's checkpoint_NNNNNN, state and report
        checkpoint = best_dir / f"checkpoint_{epoch - 1:06d}"
        states[epoch] = digits_checkpoint(checkpoint, configs["aaa"], epoch, seed=epoch)
        (checkpoint / layout.CHECKPOINT_REPORT_FILE).write_text(json.dumps({"epoch": epoch, "val_accuracy": 0.9}))

    results = load_results(tmp_path)
    assert results.best_checkpoint == best_dir / "checkpoint_000002"
    model = results.load_best_model()
    assert not model.training
    loaded = model.state_dict()
    assert loaded.keys() == states[3].keys() and all(torch.equal(loaded[k], states[3][k]) for k in loaded)
    assert all(t.device.type == "cpu" for t in loaded.values())
    assert model[0].out_features == configs["aaa"]["hidden"]  # built with the best config


def test_a_fresh_trials_checkpoint_saved_with_a_ddp_prefix_loads_into_the_plain_model(tmp_path):
    configs = finished_sweep(tmp_path)
    run_dir = layout.trial_dir(tmp_path, "aaa") / "ddp"  # a fresh trial's Ray Train run
    older = digits_checkpoint(run_dir / "checkpoint_2027-01-15_08-00-01.000001", configs["aaa"], 2, seed=1)
    newest = digits_checkpoint(run_dir / "checkpoint_2027-01-15_08-00-02.000002", configs["aaa"], 3, seed=2, wrap=True)
    state = torch.load(run_dir / "checkpoint_2027-01-15_08-00-02.000002" / "state.pt", weights_only=True)
    assert all(k.startswith("module.") for k in state["model"])
    (run_dir / "checkpoint_manager_snapshot.json").write_text(json.dumps(
        {"latest_checkpoint_result": {"checkpoint_dir_name": "checkpoint_2027-01-15_08-00-02.000002",
                                      "metrics": {"epoch": 3}}}))

    results = load_results(tmp_path)
    assert results.best_checkpoint.name == "checkpoint_2027-01-15_08-00-02.000002"
    loaded = results.load_best_model().state_dict()
    assert all(torch.equal(loaded[k], newest[k]) for k in newest)
    assert not all(torch.equal(loaded[k], older[k]) for k in older)


def test_loading_the_best_model_needs_a_checkpoint_and_the_task_object_a_sweep_ran_with(tmp_path):
    finished_sweep(tmp_path)
    results = load_results(tmp_path)
    assert results.best_checkpoint is None
    with pytest.raises(TuneServiceError, match="has no checkpoint"):
        results.load_best_model()
    layout.write_sweep_file(tmp_path, quickstart_source(), "<MyTask object>")
    digits_checkpoint(layout.trial_dir(tmp_path, "aaa") / "checkpoint_000000", {}, 1, seed=0)
    (layout.trial_dir(tmp_path, "aaa") / "checkpoint_000000" / layout.CHECKPOINT_REPORT_FILE).write_text("{}")
    with pytest.raises(TuneServiceError, match=r"pass the same task to load_best_model\(task=...\)"):
        load_results(tmp_path).load_best_model()


NESTED_SPACE = {
    "name": "nested", "task": "digits", "method": "random", "metric": {"name": "val_loss", "goal": "minimize"},
    "run_cap": 5,
    "parameters": {
        "optimizer": {"values": ["adam", "sgd"]},
        "opt": {"parameters": {"lr": {"min": 0.001, "max": 0.1},
                               "momentum": {"values": [0.8, 0.9], "when": {"optimizer": "sgd"}}}},
        "hidden": {"value": 32},
    },
    "scheduler": {"type": "asha", "max_t": 4},
}
#: ``model.hidden`` beside ``model``: a trial gets it as one flat key, as W&B passes it.
FLAT_KEY_SPACE = {**NESTED_SPACE, "name": "flat-key", "parameters": {
    "model": {"values": ["mlp", "cnn"]}, "model.hidden": {"values": [16, 32]}, "lr": {"min": 0.001, "max": 0.1}}}


@pytest.mark.parametrize("source", [
    *(yaml.safe_load(p.read_text()) for p in sorted((ROOT / "search_spaces").glob("*.yaml"))), NESTED_SPACE,
    FLAT_KEY_SPACE,
], ids=lambda s: s["name"])
def test_the_best_spec_trains_exactly_the_best_config_once(tmp_path, source):
    spec = load_spec(source)
    searcher, _ = registry.build_searcher(spec)
    best = searcher.suggest("t1")  # a config as the sweep's searcher gives it
    trials = (TrialRecord("t1", "completed", best, {spec.metric.name: 0.5}, spec.scheduler.max_t),)
    sweep_result.write(SweepResult(str(tmp_path), spec.metric.name, spec.metric.mode, trials, trials[0]))
    layout.write_sweep_file(tmp_path, source, None)

    written = load_results(tmp_path).best_spec(tmp_path / "best.yaml")
    reread = load_spec(tmp_path / "best.yaml")
    assert yaml.safe_load((tmp_path / "best.yaml").read_text()) == written
    assert reread.name == f"{spec.name}-best" and reread.method == "grid" and reread.run_cap == 1
    assert reread.scheduler.type == "fifo" and reread.scheduler.max_t == spec.scheduler.max_t
    assert not any(p.is_searched for p in reread.parameters) and "early_terminate" not in written
    assert (reread.metric, reread.task, reread.resources, reread.seed) == (spec.metric, spec.task, spec.resources,
                                                                          spec.seed)
    plan = plan_sweep(reread)
    assert plan.num_trials == 1 and plan.rungs == ()
    assert make_plan(reread, ClusterResources(64, 0, 64, 0)).num_trials == 1
    # The one trial it runs gets the best trial's config, nested as the sweep's were.
    only, _ = registry.build_searcher(reread)
    assert only.suggest("again") == best


def test_load_results_and_sweep_results_are_public_and_lazy():
    assert tune_service.load_results is analysis.load_results
    assert tune_service.SweepResults is analysis.SweepResults
    assert {"load_results", "SweepResults"} <= set(tune_service.__all__)


def test_a_sweep_of_several_objectives_writes_the_spec_of_the_front_member_the_user_picks(tmp_path):
    source = yaml.safe_load((ROOT / "search_spaces" / "multi_objective.yaml").read_text())
    spec = load_spec(source)
    objectives = [(o.name, o.mode) for o in spec.objectives]
    trials = (
        TrialRecord("small", "completed", {"lr": 0.01, "hidden": 8, "layers": 1},
                    {"val_accuracy": 0.90, "n_params": 600}, 4),
        TrialRecord("large", "completed", {"lr": 0.002, "hidden": 128, "layers": 2},
                    {"val_accuracy": 0.97, "n_params": 27000}, 4),
        TrialRecord("worse", "completed", {"lr": 0.02, "hidden": 64, "layers": 2},
                    {"val_accuracy": 0.89, "n_params": 9000}, 4),  # dominated by small
    )
    sweep_result.write(SweepResult(str(tmp_path), "val_accuracy", "max", trials, None,
                                   sweep_result.ranking_entry(objectives)))
    layout.write_sweep_file(tmp_path, source, None)
    results = load_results(tmp_path)
    assert {t.trial_id for t in results.pareto} == {"small", "large"}

    with pytest.raises(TuneServiceError) as raised:  # no one best trial: the error names the front
        results.best_spec()
    assert "Pareto front (large, small)" in str(raised.value) and "\n" not in str(raised.value)
    with pytest.raises(TuneServiceError, match="no trial .* is called 'nope'"):
        results.best_spec(trial="nope")

    written = results.best_spec(tmp_path / "small.yaml", trial="small")
    reread = load_spec(tmp_path / "small.yaml")
    assert reread.name == "multi-objective-small" and reread.run_cap == 1 and reread.method == "grid"
    assert "a trial on the Pareto front (small)" in written["description"]
    assert [(o.name, o.mode) for o in reread.objectives] == objectives  # still scored on both
    only, _ = registry.build_searcher(reread)
    assert only.suggest("again") == trials[0].config
    # A dominated trial may be picked too, and says so.
    assert "a trial (worse)" in results.best_spec(trial="worse")["description"]
