"""Searchers over several objectives: Optuna's multi-objective TPE or NSGA-II behind the stack every sweep
runs (:func:`~tune_service.search.wrappers.trial_configs`), told each trial's value of every objective; a
trial with a non-finite one is a failed point; each objective's target ends the sweep. Without Ray running."""

from __future__ import annotations

import math

import optuna
import pytest
from ray.tune.search import Searcher

from tune_service.search.registry import build_searcher
from tune_service.search.wrappers import innermost
from tune_service.spec import load_spec

OBJECTIVES = [{"name": "val_loss"}, {"name": "n_params", "goal": "minimize"}]
PARAMETERS = {"lr": {"distribution": "log_uniform_values", "min": 1e-4, "max": 1e-1}, "width": {"values": [8, 16, 32]}}


def searcher(**spec):
    built, _ = build_searcher(load_spec({"method": "optuna", "metrics": OBJECTIVES, "parameters": PARAMETERS,
                                         "run_cap": 30, "scheduler": {"type": "fifo", "max_t": 1}, **spec}))
    built.set_search_properties("val_loss", "min", {})  # what Tune passes: the first objective
    return built


def run(built, values, count: int) -> list:
    configs = []
    for i in range(count):
        config = built.suggest(f"t{i}")
        if config is None or config == Searcher.FINISHED:
            return configs
        configs.append(config)
        built.on_trial_complete(f"t{i}", values(i, config))
    return configs


@pytest.mark.parametrize("sampler, kind", [("tpe", optuna.samplers.TPESampler), ("nsga2", optuna.samplers.NSGAIISampler)])
def test_optunas_study_is_told_every_objective_of_every_trial(sampler, kind):
    built = searcher(optuna={"sampler": sampler, **({"population_size": 4} if sampler == "nsga2" else {})})
    study = innermost(built)._ot_study
    assert isinstance(study.sampler, kind) and [d.name for d in study.directions] == ["MINIMIZE", "MINIMIZE"]
    run(built, lambda i, c: {"val_loss": c["lr"] * 10, "n_params": c["width"] * 10 if i != 2 else math.nan}, 12)
    trials = study.get_trials(deepcopy=False)
    assert len(trials) == 12 and trials[2].state == optuna.trial.TrialState.FAIL  # a NaN objective: a failed point
    assert all(t.values == [t.params["lr"] * 10, t.params["width"] * 10] for i, t in enumerate(trials) if i != 2)
    if sampler == "nsga2":
        assert study.sampler._population_size == 4  # noqa: SLF001 - Optuna's own setting, read back


def test_each_objectives_target_ends_the_sweep_once_a_trial_reaches_it():
    built = searcher(metrics=[{"name": "val_loss"}, {"name": "n_params", "goal": "minimize", "target": 100}])
    configs = run(built, lambda i, c: {"val_loss": 1.0, "n_params": 500 if i < 3 else 90}, 10)
    assert len(configs) == 4  # the fourth reached n_params 90 <= 100: no fifth trial


@pytest.mark.parametrize("sampler", ["tpe", "nsga2"])
def test_optuna_is_told_each_trials_violations_and_goes_on_so_after_a_restore(sampler, tmp_path):
    constraints = [{"name": "latency_ms", "max": 2.0}, {"name": "memory", "min": 1.0}]
    built = searcher(optuna={"sampler": sampler}, constraints=constraints)
    values = lambda i, c: {"val_loss": c["lr"], "n_params": c["width"], "latency_ms": i / 2,  # noqa: E731
                           **({"memory": 3.0} if i % 2 else {})}
    run(built, values, 6)
    built.save(str(tmp_path / "searcher"))
    restored = searcher(optuna={"sampler": sampler}, constraints=constraints)
    restored.restore(str(tmp_path / "searcher"))
    for i in range(6, 8):  # the restored searcher's sampler (a copy) is told too
        restored.suggest(f"t{i}")
        restored.on_trial_complete(f"t{i}", values(i, {"lr": 0.1, "width": 8}))
    told = [list(t.system_attrs["constraints"]) for t in innermost(restored)._ot_study.get_trials(deepcopy=False)]
    # latency i/2 against 2.0; memory 3.0 against 1.0 on odd trials, missing (infinitely short) on even ones
    assert told == [[i / 2 - 2.0, -2.0 if i % 2 else math.inf] for i in range(8)]


def test_a_trial_asha_stopped_is_told_as_complete_no_better_than_the_worst_that_ran_its_budget():
    """Optuna takes no intermediate value with several objectives, and its TPE ranks pruned trials alike:
    told as pruned, a stopped trial could fill TPE's good group by chance. It is told complete instead,
    each objective no better than the worst completed trial's (which dominates it)."""
    built = searcher(scheduler={"type": "asha", "max_t": 3, "grace_period": 1})
    study = innermost(built)._ot_study
    for trial_id in ("a", "b", "c"):
        built.suggest(trial_id)
    built.on_trial_complete("a", {"val_loss": 0.4, "n_params": 100, "epoch": 3})  # its whole budget
    built.on_trial_complete("b", {"val_loss": 0.2, "n_params": 900, "epoch": 3})
    built.on_trial_complete("c", {"val_loss": 0.1, "n_params": 50, "epoch": 1})  # stopped at the first rung
    a, b, c = study.get_trials(deepcopy=False)
    assert [t.state for t in (a, b, c)] == [optuna.trial.TrialState.COMPLETE] * 3
    assert (a.values, b.values, c.values) == ([0.4, 100], [0.2, 900], [0.4, 900])
