"""W&B's sweep keys of July 2026 (wandb/sweeps#135, #138): ``metrics:`` (several objectives), ``method:
custom`` and the ``scheduler: {engine: ...}`` block, read as W&B means them. The files are the configs of
W&B's own tests (``tests/data/wandb_sweeps_2026/``, unchanged but for being written as YAML), each with
what W&B does with it and what we do: the same, except where a file's header says why not."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tune_service.errors import SpecError
from tune_service.spec import load_spec

FILES = sorted((Path(__file__).resolve().parents[2] / "data" / "wandb_sweeps_2026").glob("*.yaml"))


def header(path: Path, key: str) -> str:
    lines = [line for line in path.read_text().splitlines() if line.startswith(f"# {key}: ")]
    assert len(lines) == 1, path
    return lines[0].removeprefix(f"# {key}: ")


def test_the_corpus_holds_w_and_bs_tests_of_the_new_keys():
    assert len(FILES) >= 20
    assert {header(f, "W&B").split()[0] for f in FILES} == {"accepts", "refuses"}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_each_w_and_b_file_is_read_as_w_and_b_reads_it(path):
    expect = header(path, "expect")
    if expect == "ok":
        spec = load_spec(path)
        assert spec.method in ("optuna", "bayes")
        return
    with pytest.raises(SpecError) as info:
        load_spec(path)
    lines = str(info.value).splitlines()
    assert any(line.startswith(expect) for line in lines), lines


def test_several_objectives_keep_their_order_goals_and_targets_and_run_under_mo_asha():
    spec = load_spec(FILES[0])
    assert spec.method == "optuna" and spec.multi_objective and spec.scheduler.type == "asha"  # as for one
    assert [(m.name, m.goal) for m in spec.metrics] == [("loss", "minimize"), ("accuracy", "maximize")]
    assert spec.metric == spec.objectives[0]
    assert "method: custom runs Optuna's TPE (engine not given)" in spec.notes
    defaults = load_spec(next(f for f in FILES if f.stem.startswith("05_")))
    assert [m.goal for m in defaults.metrics] == ["minimize", "minimize"]  # W&B's default goal


def test_w_and_bs_engine_block_is_told_apart_from_ours_by_its_keys():
    doc = yaml.safe_load(next(f for f in FILES if f.stem.startswith("07_")).read_text())
    spec = load_spec(doc)
    assert spec.method == "bayes" and spec.scheduler.type == "asha"  # the wandb engine runs the file's method
    assert any(n.startswith("scheduler.source, scheduler.optimizer, scheduler.search_space: read, not run")
               for n in spec.notes)
    ours = load_spec({**doc, "scheduler": {"type": "fifo", "max_t": 3}})
    assert ours.scheduler.type == "fifo" and ours.scheduler.max_t == 3
    with pytest.raises(SpecError) as info:
        load_spec({**doc, "scheduler": {"engine": "wandb", "max_t": 3}})
    (problem,) = info.value.problems
    assert problem.path == "scheduler" and "W&B's engine block (engine" in problem.message
    assert "tune-service's early stopping (max_t" in problem.message


def test_an_engine_w_and_b_cannot_run_yet_runs_here_as_its_note_says():
    spec = load_spec({"method": "custom", "scheduler": {"engine": "optuna"}, "parameters": {"lr": {"min": 0.1, "max": 1.0}}})
    assert spec.method == "optuna"
    ax = load_spec({"method": "custom", "scheduler": {"engine": "ax"}, "parameters": {"lr": {"min": 0.1, "max": 1.0}}})
    assert ax.method == "optuna"
    assert "scheduler.engine: ax is not offered here; Optuna's TPE runs the search in its place" in ax.notes


@pytest.mark.parametrize("method, accepted", [("custom", True), ("optuna", True), ("random", True), ("grid", True),
                                              ("bayes", False), ("hyperopt", False), ("bohb", False)])
def test_searchers_that_take_one_objective_are_refused_naming_those_that_take_several(method, accepted):
    doc = {"method": method, "metrics": [{"name": "val_loss"}, {"name": "val_accuracy", "goal": "maximize"}],
           "parameters": {"lr": {"values": [0.1, 0.2]}}}
    if accepted:
        assert load_spec(doc).multi_objective
        return
    with pytest.raises(SpecError, match=f"^method: {method} optimises one objective .* use method custom or "
                                        "optuna .*, random or grid, got"):
        load_spec(doc)


def test_populations_a_repeated_objective_and_a_fifth_are_refused():
    objectives = [{"name": "val_loss"}, {"name": "val_accuracy", "goal": "maximize"}]
    base = {"method": "optuna", "metrics": objectives, "parameters": {"lr": {"values": [0.1, 0.2]}}}
    for kind in ("pbt", "pb2"):
        with pytest.raises(SpecError, match=f"^scheduler.type: {kind} compares trials by one objective; with "
                                            "several objectives use asha or hyperband .* or fifo"):
            load_spec({**base, "scheduler": {"type": kind}})
    assert load_spec({**base, "scheduler": {"type": "hyperband"}}).scheduler.type == "hyperband"
    with pytest.raises(SpecError, match=r"^metrics\[1\].name: names an objective twice"):
        load_spec({**base, "metrics": [objectives[0], objectives[0]]})
    with pytest.raises(SpecError, match="^metrics: must be a list of 2 to 4 objectives"):
        load_spec({**base, "metrics": [{"name": f"m{i}"} for i in range(5)]})

