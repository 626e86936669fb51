"""A grid is counted and drawn one point at a time: a grid of 20^7 points is refused without a run_cap
(naming its size) and, with one, plans and runs its first points at once; a resumed grid draws on."""

from __future__ import annotations

import pickle
import time
import tracemalloc

import yaml

from tune_service import cli
from tune_service.execution.plan import plan_sweep
from tune_service.search.searchers import GridSearch
from tune_service.search.spaces import MAX_GRID_POINTS
from tune_service.spec import load_spec

HUGE = {f"p{i}": {"values": list(range(20))} for i in range(7)}  # 20^7 = 1 280 000 000 points


def test_a_huge_grid_without_run_cap_is_refused_naming_its_size(tmp_path, capsys, forbid_ray_start):
    path = tmp_path / "huge.yaml"
    path.write_text(yaml.safe_dump({"method": "grid", "task": "user_tasks:config_reporting_loop", "parameters": HUGE}))
    started = time.monotonic()
    assert cli.main([str(path), "--dry-run"]) == cli.EXIT_USAGE
    assert time.monotonic() - started < 5  # counted, not enumerated (the enumeration would run out of memory)
    assert capsys.readouterr().err == (f"error: run_cap: a grid of at most {MAX_GRID_POINTS} points runs whole; this "
                                       f"one has 1280000000: set run_cap to run its first N points, or use method "
                                       f"random\n")


def test_a_huge_grid_with_run_cap_plans_and_draws_its_first_points_in_little_memory():
    spec = load_spec({"method": "grid", "run_cap": 5, "parameters": HUGE})
    tracemalloc.start()
    plan = plan_sweep(spec, task="user_tasks:config_reporting_loop")
    searcher = GridSearch(spec.parameters, limit=5)
    points = [searcher.suggest(str(i)) for i in range(6)]
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert plan.num_trials == 5 and peak < 10 * 2**20
    assert points[:5] == [{**{f"p{i}": 0 for i in range(6)}, "p6": last} for last in range(5)]  # last varies fastest
    assert points[5] == GridSearch.FINISHED


def test_a_resumed_grid_draws_on_from_where_it_was(tmp_path):
    spec = load_spec({"method": "grid", "parameters": {"a": {"values": [1, 2, 3]}, "b": {"values": ["x", "y"]}}})
    whole = [GridSearch(spec.parameters).suggest(str(i)) for i in range(1)]
    first = GridSearch(spec.parameters)
    drawn = [first.suggest(str(i)) for i in range(2)]
    first.save(str(tmp_path / "state"))
    again = pickle.loads(pickle.dumps(GridSearch(spec.parameters)))  # as Tune pickles its searcher
    again.restore(str(tmp_path / "state"))
    rest = [again.suggest(str(i)) for i in range(5)]
    assert whole[0] == drawn[0] == {"a": 1, "b": "x"}
    assert drawn + rest[:4] == [{"a": a, "b": b} for a in (1, 2, 3) for b in ("x", "y")]
    assert rest[4] == GridSearch.FINISHED


def test_a_conditional_grid_is_counted_by_walking_it():
    spec = load_spec({"method": "grid", "parameters": {
        "opt": {"values": ["sgd", "adam"]},
        "momentum": {"values": [0.0, 0.9], "when": {"opt": "sgd"}},
    }})
    assert GridSearch(spec.parameters).size == 3  # sgd x 2 momenta, adam alone
