"""Known points (``points_to_evaluate``): every searcher suggests them first, exactly as the spec gives
them, then configs of its own; they count toward ``run_cap``; a searcher saved between two points and
restored into a new one goes on with the second, then exactly as the original."""

from __future__ import annotations

import pytest

from tune_service.search import registry
from tune_service.search.wrappers import innermost
from tune_service.spec import load_spec

METRIC = "val_loss"
METHODS = ["random", "grid", "bayes", "bohb", "optuna"]
RANGES = {"lr": {"distribution": "log_uniform_values", "min": 1e-4, "max": 1e-1}, "hidden": {"values": [16, 32, 64]},
          "width": {"distribution": "q_uniform", "min": 8, "max": 64, "q": 8},
          "optimizer": {"parameters": {"momentum": {"min": 0.0, "max": 0.9}}}}
GRID = {"lr": {"values": [0.0003, 0.01, 0.1]}, "hidden": {"values": [16, 32, 64]},
        "width": {"distribution": "q_uniform", "min": 8, "max": 64, "q": 8},
        "optimizer": {"parameters": {"momentum": {"values": [0.5, 0.9]}}}}
# written as a user would: a nested group, a dotted name, a number as YAML 1.1 reads 3e-4 (a string)
POINTS = [{"lr": "3e-4", "hidden": 32, "width": 16, "optimizer": {"momentum": 0.5}},
          {"lr": 0.01, "hidden": 64, "width": 64, "optimizer.momentum": 0.9}]
EXPECTED = [{"lr": 0.0003, "hidden": 32, "width": 16, "optimizer": {"momentum": 0.5}},
            {"lr": 0.01, "hidden": 64, "width": 64, "optimizer": {"momentum": 0.9}}]


def build(method: str, run_cap: int | None = 6):
    points = [{**POINTS[0], "lr": 0.0003}, POINTS[1]] if method == "grid" else POINTS  # a value of the grid's own
    spec = load_spec({"method": method, "run_cap": run_cap, "seed": 3, "metric": {"name": METRIC, "goal": "minimize"},
                      "parameters": GRID if method == "grid" else RANGES, "points_to_evaluate": points,
                      "scheduler": {"type": "hyperband" if method == "bohb" else "fifo", "max_t": 2}})
    searcher, num_trials = registry.build_searcher(spec)
    searcher.set_search_properties(METRIC, "min", {})  # what Tune does before the first suggestion
    return searcher, num_trials


def loss(config: dict) -> float:
    return abs(config["lr"] - 0.01) * 10 + config["hidden"] / 64 + config["optimizer"]["momentum"]


def run_trials(searcher, ids: list[str]) -> list[dict]:
    """Suggest, report two epochs of and complete each trial in turn, as Tune does at concurrency 1."""
    configs = []
    for trial_id in ids:
        config = searcher.suggest(trial_id)
        assert isinstance(config, dict), f"{trial_id}: {config!r}"
        for epoch in (1, 2):
            result = {METRIC: loss(config) / epoch, "epoch": epoch, "training_iteration": epoch}
            searcher.on_trial_result(trial_id, {**result, "hyperband_info": {"budget": epoch}})
        searcher.on_trial_complete(trial_id, {METRIC: loss(config) / 2, "epoch": 2, "training_iteration": 2})
        configs.append(config)
    return configs


@pytest.mark.parametrize("method", METHODS)
def test_each_searcher_runs_the_known_points_first_then_its_own_configs(method):
    searcher, num_trials = build(method)
    assert num_trials == 6  # the points count toward run_cap
    configs = run_trials(searcher, [f"t{i}" for i in range(5)])
    assert configs[:2] == EXPECTED
    assert all(c not in EXPECTED for c in configs[2:])  # then the searcher's own, in its domain
    assert all(8 <= c["width"] <= 64 and c["width"] % 8 == 0 and c["hidden"] in (16, 32, 64) for c in configs[2:])


@pytest.mark.parametrize("method", METHODS)
def test_a_searcher_saved_between_two_known_points_resumes_with_the_second(method, tmp_path):
    original, _ = build(method)
    run_trials(original, ["t0"])
    original.save(str(tmp_path / "searcher.pkl"))
    restored, _ = build(method)
    restored.restore(str(tmp_path / "searcher.pkl"))
    resumed = run_trials(restored, ["t1", "t2", "t3"])
    assert resumed[0] == EXPECTED[1]
    assert resumed == run_trials(original, ["t1", "t2", "t3"])


def test_hyperopts_tpe_holds_the_known_points_with_their_results_as_its_own_trials():
    searcher, _ = build("bayes")
    run_trials(searcher, ["t0", "t1"])
    trials = innermost(searcher).get_state()["hyperopt_trials"]  # Ray's public state of its HyperOptSearch
    told = {t["misc"]["vals"]["lr"][0]: t["result"]["loss"] for t in trials.trials}
    assert told == pytest.approx({c["lr"]: loss(c) / 2 for c in EXPECTED})


def test_a_grid_runs_the_known_points_then_its_whole_grid_or_run_cap_in_all():
    whole, size = build("grid", run_cap=None)
    assert size == 2 + 3 * 3 * 8 * 2
    configs = run_trials(whole, [f"t{i}" for i in range(size)])
    assert configs[:2] == EXPECTED and len({str(c) for c in configs[2:]}) == size - 2
    assert whole.suggest("one-more") == "FINISHED"
    capped, size = build("grid", run_cap=2)
    assert size == 2 and run_trials(capped, ["t0", "t1"]) == EXPECTED and capped.suggest("t2") == "FINISHED"


def test_a_point_given_as_a_trial_receives_it_types_its_values():
    spec = load_spec({"parameters": {"layers": {"min": 1, "max": 4}, "dropout": {"distribution": "q_uniform",
                                                                                  "min": 0.0, "max": 0.5, "q": 0.1}},
                      "points_to_evaluate": [{"layers": 2.0, "dropout": 0.30000000000000004}]})
    (point,) = spec.points_to_evaluate
    assert point == {"layers": 2, "dropout": 0.3} and isinstance(point["layers"], int)


def test_a_random_or_grid_search_saved_before_known_points_existed_restores_and_goes_on(tmp_path):
    import itertools
    import pickle

    from tune_service.search.searchers import GridSearch, RandomSearch
    from tune_service.search.spaces import grid_points

    params = load_spec({"parameters": GRID}).parameters
    original = RandomSearch(params, seed=3)
    [original.suggest(f"t{i}") for i in range(2)]
    (tmp_path / "random.pkl").write_bytes(pickle.dumps(original.rng.bit_generator.state))  # the old file
    restored = RandomSearch(params, seed=3)
    restored.restore(str(tmp_path / "random.pkl"))
    assert [restored.suggest(f"t{i}") for i in range(2, 5)] == [original.suggest(f"t{i}") for i in range(2, 5)]
    grid = GridSearch(params)
    (tmp_path / "grid.pkl").write_bytes(pickle.dumps(2))  # two points handed out
    grid.restore(str(tmp_path / "grid.pkl"))
    assert grid.suggest("t2") == next(itertools.islice(grid_points(params), 2, None))  # the grid's third point
