"""A sweep of several objectives end to end: ``search_spaces/multi_objective.yaml`` (the digits task's
val_accuracy against its n_params, val_loss bounded by a constraint) under Optuna's multi-objective TPE
and MO-ASHA, on 2-rank DDP trials: the front of the feasible trials in the leaderboard, summary.json,
load_results() and the wandb summary run, and no best trial anywhere."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tune_service
from tune_service import cli
from tune_service.search.pareto import dominates
from tune_service.tracking.naming import SUMMARY_RUN, run_id
from wandb_files import offline_runs

pytestmark = [pytest.mark.integration, pytest.mark.timeout(400)]
ROOT = Path(__file__).resolve().parents[2]
MODES = ("max", "min")


def digits_mlp_parameters(hidden: int, layers: int) -> int:
    """The digits MLP's parameter count, worked out by hand: 64 inputs, ``layers`` of ``hidden``, 10 outputs."""
    widths = [64, *[hidden] * layers, 10]
    return sum(a * b + b for a, b in zip(widths, widths[1:], strict=False))


def cli_dry_run(capsys) -> str:
    assert cli.main(["dry-run", str(ROOT / "search_spaces" / "multi_objective.yaml"),
                     "--set", "constraints=[{name: val_loss, max: 1.2}]"]) == cli.EXIT_OK
    return capsys.readouterr().out


def test_the_multi_objective_example_ends_with_its_pareto_front_everywhere(ray_cluster, tmp_path, capsys):
    storage = tmp_path / "runs"
    code = cli.main([str(ROOT / "search_spaces" / "multi_objective.yaml"), "--storage", str(storage),
                     "--name", "front", "--set", "run_cap=5", "--set", "scheduler.max_t=2",
                     "--set", "constraints=[{name: val_loss, max: 1.2}]"])
    out = capsys.readouterr().out
    assert code == cli.EXIT_OK, out
    assert "maximize val_accuracy and minimize n_params" in out  # the plan's head
    assert "constraints  val_loss <= 1.2" in cli_dry_run(capsys)
    experiment = storage / "front"
    summary = json.loads((experiment / "summary.json").read_text())
    trials = summary["trials"]
    assert len(trials) == 5 and all(t["metrics"]["world_size"] == 2 for t in trials)
    # MO-ASHA: a trial ran its budget, or was stopped at the first rung
    assert all((t["status"], t["epochs"]) in (("completed", 2), ("stopped", 1)) for t in trials)
    for t in trials:  # what is traded, reported by the shared loop
        assert t["metrics"]["n_params"] == digits_mlp_parameters(t["config"]["hidden"], t["config"]["layers"])
        assert 0 < t["metrics"]["latency_ms"] < 100

    # The front, by its definition, from the trials' own values: among the feasible ones
    points = {t["trial_id"]: (t["metrics"]["val_accuracy"], t["metrics"]["n_params"]) for t in trials
              if t["metrics"]["val_loss"] <= 1.2}
    front = {i for i, p in points.items() if not any(dominates(q, p, MODES) for q in points.values())}
    assert summary["objectives"] == [{"name": "val_accuracy", "mode": "max"}, {"name": "n_params", "mode": "min"}]
    assert summary["constraints"] == [{"name": "val_loss", "min": None, "max": 1.2}]
    assert {t["trial_id"] for t in summary["pareto"]} == front and summary["best"] is None
    assert not (experiment / "best_config.yaml").exists()
    listed = [line for line in out.splitlines() if line.startswith("Pareto front of val_accuracy (max), n_params (min)")]
    assert len(listed) == 1 and set(listed[0].split(": ", 1)[1].split(": ")[1].split(", ")) == front
    board = out.splitlines()[out.splitlines().index(next(line for line in out.splitlines() if line.startswith("front  trial"))):]
    assert {line.split()[1] for line in board[1:] if line.startswith("1 ")} == front

    assert summary["hypervolume"]["value"] > 0 and len(summary["hypervolume"]["reference"]) == 2
    assert any(line.startswith("hypervolume ") for line in out.splitlines())

    results = tune_service.load_results(experiment)
    assert {t.trial_id for t in results.pareto} == front and results.best is None

    runs = {run.run_id: run for run in offline_runs(experiment)}
    sweep = runs[run_id("front", SUMMARY_RUN)]
    assert sweep.config["objectives"] == summary["objectives"]
    assert set(sweep.summary["pareto_front"]) == front and sweep.summary["best_trial_id"] is None
    assert all(sweep.summary["pareto_front"][i] == points_config for i, points_config in
               ((t["trial_id"], t["config"]) for t in summary["pareto"]))
