"""The results of a sweep of several objectives: its Pareto front in ``summary.json``, in
``load_results()`` and in the leaderboard, and no best trial; read back from the files as written."""

from __future__ import annotations

import json
import math

import pytest

import tune_service
from tune_service.experiment import layout
from tune_service.results import sweep_result
from tune_service.results.sweep_result import OBJECTIVES_KEY, PARETO_KEY, SweepResult, TrialRecord

OBJECTIVES = [("val_loss", "min"), ("n_params", "min")]


def trial(trial_id, loss, params, status="completed"):
    return TrialRecord(trial_id, status, {"width": params}, {"val_loss": loss, "n_params": params}, 2)


TRIALS = (
    trial("a", 0.30, 100),
    trial("b", 0.20, 400),
    trial("c", 0.35, 400),  # dominated by a and b
    trial("d", 0.10, 900),
    trial("e", 0.05, 50, status="failed"),  # would dominate all, but failed
    trial("f", math.nan, 10),  # not finite: on no front
    trial("g", 0.30, 100),  # equal to a: on the front with it
)


def result(tmp_path, trials=TRIALS) -> SweepResult:
    return SweepResult(str(tmp_path), "val_loss", "min", trials, None, sweep_result.ranking_entry(OBJECTIVES))


def test_the_front_is_the_undominated_trials_with_finite_values_by_the_first_objective(tmp_path):
    outcome = result(tmp_path)
    assert outcome.multi_objective and outcome.objectives == OBJECTIVES
    assert [t.trial_id for t in outcome.pareto] == ["d", "b", "a", "g"]
    assert sweep_result.best_trial(TRIALS, "val_loss", "min", OBJECTIVES) is None  # a front, not a best


def test_summary_json_holds_the_objectives_and_the_front_and_reading_it_back_works_it_out_again(tmp_path):
    outcome = result(tmp_path)
    sweep_result.write(outcome)
    data = json.loads((tmp_path / "summary.json").read_text())
    assert data[OBJECTIVES_KEY] == [{"name": "val_loss", "mode": "min"}, {"name": "n_params", "mode": "min"}]
    assert [t["trial_id"] for t in data[PARETO_KEY]] == ["d", "b", "a", "g"]
    assert data[PARETO_KEY][0] == {"trial_id": "d", "config": {"width": 900}, "metrics": {"val_loss": 0.1, "n_params": 900}}
    assert data["best"] is None and not (tmp_path / "best_config.yaml").exists()
    # a front edited away in the file is worked out again from the trials
    data[PARETO_KEY] = []
    (tmp_path / "summary.json").write_text(json.dumps(data))
    loaded = sweep_result.load(tmp_path)
    assert [t.trial_id for t in loaded.pareto] == ["d", "b", "a", "g"] and loaded.best is None
    assert PARETO_KEY not in loaded.extra
    layout.write_sweep_file(tmp_path, {"method": "optuna", "metrics": [{"name": "val_loss"}, {"name": "n_params"}],
                                       "parameters": {"width": {"values": [10, 50, 100, 400, 900]}}}, None)
    results = tune_service.load_results(tmp_path)
    assert [t.trial_id for t in results.pareto] == ["d", "b", "a", "g"] and results.best is None
    ranked = [t.trial_id for t in results.ranked()]
    assert set(ranked[:4]) == {"a", "b", "d", "g"} and ranked[4:] == ["c", "e", "f"]


def test_the_leaderboard_ranks_by_front_and_shows_every_objective(tmp_path):
    lines = result(tmp_path).leaderboard().splitlines()
    assert lines[0].split()[:6] == ["front", "trial", "status", "epochs", "val_loss", "n_params"]
    fronts = {line.split()[1]: line.split()[0] for line in lines[1:-1]}
    assert fronts == {"a": "1", "b": "1", "d": "1", "g": "1", "c": "2", "e": "-", "f": "-"}
    assert {line.split()[1] for line in lines[1:5]} == {"a", "b", "d", "g"}
    assert [line.split()[1] for line in lines[-3:-1]] == ["e", "f"]  # unscored last, in their order


@pytest.mark.parametrize("objectives", [[], [("val_loss", "min")]])
def test_one_objective_keeps_its_best_trial_and_its_front_is_that_trial(tmp_path, objectives):
    outcome = SweepResult(str(tmp_path), "val_loss", "min", TRIALS[:4], sweep_result.best_trial(TRIALS[:4], "val_loss", "min", objectives), sweep_result.ranking_entry(objectives))
    assert outcome.best is not None and outcome.best.trial_id == "d"
    assert not outcome.multi_objective and [t.trial_id for t in outcome.pareto] == ["d"]
    assert OBJECTIVES_KEY not in outcome.to_dict() and PARETO_KEY not in outcome.to_dict()


def test_a_trial_that_breaks_a_constraint_is_never_the_best_nor_on_the_front_and_ranks_after_the_feasible(tmp_path):
    from tune_service.spec.sweep import ConstraintSpec

    bounded = [ConstraintSpec("n_params", max=500)]
    outcome = SweepResult(str(tmp_path), "val_loss", "min", TRIALS, None, sweep_result.ranking_entry(OBJECTIVES, bounded))
    assert [t.trial_id for t in outcome.pareto] == ["b", "a", "g"]  # d (900 params) is out; b still beats c
    single = sweep_result.best_trial(TRIALS, "val_loss", "min", None, bounded)
    assert single is not None and single.trial_id == "b"  # d has the lowest loss, but 900 params
    ranked = [t.trial_id for t in sweep_result.rank_trials(TRIALS, "val_loss", "min", bounded)]
    assert ranked[:4] == ["b", "a", "g", "c"] and set(ranked[4:]) == {"d", "e", "f"}
    sweep_result.write(outcome)
    loaded = sweep_result.load(tmp_path)
    assert loaded.constraints == tuple(bounded) and [t.trial_id for t in loaded.pareto] == ["b", "a", "g"]
