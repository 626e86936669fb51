"""``warm_start``: an earlier sweep's trials, read from its experiment directory (written here in the files
Tune writes: ``sweep.json``, and per trial ``params.json`` and ``result.json``), are told to the new
sweep's searcher, whose suggestions then gather where the earlier sweep did well; what cannot be told is
refused or left out by the stated rules; a resumed searcher goes on as the original."""

from __future__ import annotations

import numpy as np
import pytest

from earlier_sweeps import LR, METHODS, METRIC, earlier_sweep, loss, new_spec, random_configs
from tune_service.errors import SpecError
from tune_service.execution.plan import make_plan
from tune_service.execution.resources import ClusterResources
from tune_service.search import registry
from tune_service.search.warm_start import read_warm_start
from tune_service.spec import load_spec


def suggestions(spec, n: int, warm=None) -> list[dict]:
    searcher, _ = registry.build_searcher(spec, warm)
    searcher.set_search_properties(METRIC, "min", {})
    return [searcher.suggest(f"t{i}") for i in range(n)]


@pytest.mark.parametrize("method", METHODS)
def test_a_warm_started_searcher_suggests_where_the_earlier_sweep_did_well_where_a_cold_one_spreads(method, tmp_path):
    earlier = earlier_sweep(tmp_path / "earlier", random_configs(40))
    spec = new_spec(method, earlier)
    warm = read_warm_start(spec)
    assert len(warm.trials) == 40 and warm.dropped == ("dropout",)
    warm_started, cold = suggestions(spec, 30, warm), suggestions(new_spec(method, None), 30)
    # A cold searcher's first 30 configs are mostly its random start: hidden=32 (the best) a third of the
    # time; the warm one models the 40 earlier trials from its first suggestion (BOHB a third at random).
    assert sum(c["hidden"] == 32 for c in warm_started) > 1.5 * sum(c["hidden"] == 32 for c in cold)
    assert np.mean([loss(c) for c in warm_started]) < 0.75 * np.mean([loss(c) for c in cold])


def test_trials_outside_the_new_space_or_failed_are_left_out_and_the_plan_says_how_many(tmp_path):
    configs = random_configs(12)
    earlier = earlier_sweep(tmp_path / "earlier", configs, failed=(0,))
    spec = new_spec("bayes", earlier, parameters={"lr": {"distribution": "log_uniform_values", "min": 1e-3,
                                                         "max": 1.0}, "hidden": {"values": [16, 32, 64]}})
    warm = read_warm_start(spec)
    inside = [i for i, c in enumerate(configs) if c["lr"] >= 1e-3 and i != 0]
    assert [t.trial_id for t in warm.trials] == [f"{i:08x}" for i in inside]
    assert warm.outside_space == sum(c["lr"] < 1e-3 for i, c in enumerate(configs) if i != 0)
    assert warm.without_value == 1
    assert warm.trials[0].results[-1]["epoch"] == 2 and len(warm.trials[0].results) == 2  # every report
    line = next(x for x in make_plan(spec, ClusterResources(2, 0, 2, 0)).describe().splitlines()
                if x.startswith("warm start"))
    assert line.startswith(f"warm start: {len(inside)} trial(s) of {earlier} told to the searcher before the first")
    assert f"{warm.outside_space} outside this sweep's space, e.g. trial " in line and "must be inside its range" in line
    assert "1 failed or without a value of the metric" in line and "their dropout dropped" in line


@pytest.mark.parametrize("case, message", [
    ("other metric", "optimised val_accuracy (maximize), this one val_loss (minimize)"),
    ("new parameter", "have no values of momentum: every parameter this sweep searches needs them"),
    ("no experiment", "no sweep's experiment at"),
    ("none inside", "none of the 5 earlier trial(s) at"),
])
def test_what_a_warm_start_cannot_tell_is_refused_in_one_line(case, message, tmp_path):
    configs = random_configs(5)
    earlier = tmp_path / "earlier"
    parameters = {"lr": LR, "hidden": {"values": [16, 32, 64]}}
    if case == "other metric":
        earlier_sweep(earlier, configs, metric="val_accuracy", goal="maximize")
    elif case == "new parameter":
        earlier_sweep(earlier, configs)
        parameters["momentum"] = {"min": 0.0, "max": 0.9}
    elif case == "none inside":
        earlier_sweep(earlier, [{**c, "hidden": 128} for c in configs])
    with pytest.raises(SpecError) as refused:
        read_warm_start(new_spec("bayes", earlier, parameters=parameters))
    assert str(refused.value).startswith("warm_start: ") and message in str(refused.value)
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize("method, error", [
    ("random", "warm_start: method random learns nothing from earlier trials: use method bayes, optuna or bohb"),
    ("grid", "warm_start: method grid learns nothing from earlier trials"),
])
def test_a_searcher_without_a_model_refuses_a_warm_start(method, error, tmp_path):
    with pytest.raises(SpecError, match=error):
        load_spec({"method": method, "metric": {"name": METRIC}, "warm_start": str(tmp_path),
                   "parameters": {"lr": {"values": [0.1, 0.01]}}})


@pytest.mark.parametrize("method", METHODS)
def test_a_warm_started_searcher_restored_without_the_earlier_trials_goes_on_as_the_original(method, tmp_path):
    """A resumed sweep builds its searcher without reading the earlier sweep again: its known points
    still come next, then the original's own suggestions."""
    earlier = earlier_sweep(tmp_path / "earlier", random_configs(8))
    point = {"lr": 0.003, "hidden": 64}
    spec = new_spec(method, earlier, points_to_evaluate=[point])
    original, _ = registry.build_searcher(spec, read_warm_start(spec))
    original.save(str(tmp_path / "searcher.pkl"))
    restored, _ = registry.build_searcher(spec, None)
    restored.restore(str(tmp_path / "searcher.pkl"))
    for searcher in (original, restored):
        searcher.set_search_properties(METRIC, "min", {})
    first, after = [restored.suggest(f"t{i}") for i in range(3)], [original.suggest(f"t{i}") for i in range(3)]
    assert first[0] == point and first == after


def test_bayes_refuses_a_warm_start_in_a_space_with_conditions_naming_the_warm_start(tmp_path):
    configs = [{**c, "opt": opt, **({"momentum": 0.5} if opt == "sgd" else {})}
               for c, opt in zip(random_configs(4), ["sgd", "adam"] * 2)]
    earlier = earlier_sweep(tmp_path / "earlier", configs)
    parameters = {"lr": LR, "hidden": {"values": [16, 32, 64]}, "opt": {"values": ["sgd", "adam"]},
                  "momentum": {"min": 0.0, "max": 0.9, "when": {"opt": ["sgd"]}}}
    spec = new_spec("bayes", earlier, parameters=parameters)
    with pytest.raises(SpecError, match=r"^warm_start: bayes \(hyperopt\) cannot start from known points in a space "
                                        r"with conditions on searched parameters \(momentum when opt\); use "
                                        r"method optuna, or drop warm_start$"):
        registry.build_searcher(spec, read_warm_start(spec))
    assert len(suggestions(new_spec("optuna", earlier, parameters=parameters), 1, read_warm_start(spec))) == 1


def test_a_sweep_of_several_objectives_is_told_the_earlier_trials_value_of_each(tmp_path):
    import optuna

    from tune_service.search.wrappers import innermost

    configs = random_configs(12)
    earlier = earlier_sweep(tmp_path / "earlier", configs, size="n_params", failed=(3,))
    objectives = [{"name": METRIC, "goal": "minimize"}, {"name": "n_params", "goal": "minimize"}]
    spec = load_spec({"method": "optuna", "run_cap": 30, "seed": 1, "metrics": objectives,
                      "parameters": {"lr": LR, "hidden": {"values": [16, 32, 64]}},
                      "scheduler": {"type": "asha", "max_t": 2}, "warm_start": str(earlier)})
    warm = read_warm_start(spec)
    assert len(warm.trials) == 11 and warm.without_value == 1  # the failed one left out
    searcher, _ = registry.build_searcher(spec, warm)
    told = innermost(searcher)._ot_study.get_trials(deepcopy=False)
    assert [t.state for t in told] == [optuna.trial.TrialState.COMPLETE] * 11
    kept = [c for i, c in enumerate(configs) if i != 3]
    assert [t.values for t in told] == [[pytest.approx(loss(c)), c["hidden"] * 100] for c in kept]

    # One objective against two, or two against one: refused, naming both.
    with pytest.raises(SpecError, match=r"optimised val_loss \(minimize\), this one n_params \(minimize\) and "
                                        r"val_loss \(minimize\)"):
        read_warm_start(load_spec({**spec.source, "warm_start": str(earlier_sweep(tmp_path / "one", configs))}))
    with pytest.raises(SpecError, match=r"optimised n_params \(minimize\) and val_loss \(minimize\), this one "
                                        r"val_loss \(minimize\)"):
        read_warm_start(new_spec("optuna", earlier))
