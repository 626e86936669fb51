"""Every form of the W&B grammar through every searcher that accepts it: thousands of sampled configs
checked for bounds, inclusive ends, types and frequencies against the declared law (fixed seeds), and a
clear refusal from every searcher that cannot express a form.

The reference laws below are written from the grammar's definitions with scipy, independently of
``tune_service.search.spaces``.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

from tune_service.errors import SpecError
from tune_service.search import registry, spaces
from tune_service.search.searchers import GridSearch, RandomSearch
from tune_service.spec import configs
from tune_service.spec import load_spec

N = 4000
P_MIN = 1e-3  # a fixed-seed test: a right sampler passes by a wide margin, a wrong one fails far below


def params(**parameters):
    return load_spec({"method": "random", "parameters": parameters}).parameters


def draws(searcher: str, ps, n: int = N) -> list[dict]:
    """``n`` configs as a trial would receive them, sampled through ``searcher``'s own space."""
    decode = spaces.Decoder(ps)
    if searcher == "random":
        search = RandomSearch(ps, seed=0)
        return [decode(search.suggest(str(i))) for i in range(n)]
    if searcher == "hyperopt":
        from hyperopt.pyll.stochastic import sample

        space, rng = spaces.hyperopt_space(ps), np.random.default_rng(0)
        return [decode(sample(space, rng=rng)) for _ in range(n)]
    if searcher == "bohb":  # its random configs (a third of them once it has a model: test_bohb.py)
        from tune_service.search.bohb import BOHBSearch

        search = BOHBSearch(ps, "loss", "min", seed=0)
        return [decode(search.suggest(str(i))) for i in range(n)]
    if searcher == "optuna":  # the priors: what TPE draws from before its model, and samples around
        import optuna

        space, out = spaces.OptunaSpace(ps), []
        study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
        for _ in range(n):
            trial = study.ask()
            out.append(decode(space(trial)))
            study.tell(trial, 0.0)
        return out
    raise ValueError(searcher)


# -- reference laws ---------------------------------------------------------------------------------


def cells(values, law, low, high):
    """P(nearest multiple inside [low, high] = v) for a continuous law truncated to [low, high]."""
    edges = [low, *((a + b) / 2 for a, b in zip(values, values[1:])), high]
    cdf = law.cdf(edges)
    return dict(zip(values, np.diff(cdf) / (cdf[-1] - cdf[0])))


def rounded(law, q, lo_k, hi_k):
    """P(round(X / q) * q = k q) for k in [lo_k, hi_k] (an unbounded law; the rest is the tails)."""
    return {k * q: law.cdf((k + 0.5) * q) - law.cdf((k - 0.5) * q) for k in range(lo_k, hi_k + 1)}


def truncated(law, low, high):
    a, b = law.cdf(low), law.cdf(high)
    return lambda x: (law.cdf(x) - a) / (b - a)


E = math.e
# name: (parameter body, kind, reference, (low, high) or None, value type, searchers that accept it)
FORMS = {
    "uniform": ({"min": -2.0, "max": 3.0}, "cdf", stats.uniform(-2, 5).cdf, (-2, 3), float,
                ("random", "hyperopt", "bohb", "optuna")),
    "int_uniform": ({"min": 1, "max": 6}, "pmf", {k: 1 / 6 for k in range(1, 7)}, (1, 6), int,
                    ("random", "hyperopt", "bohb", "grid", "optuna")),
    "q_uniform": ({"distribution": "q_uniform", "min": 0, "max": 1, "q": 0.25}, "pmf",
                  {v: 0.2 for v in (0.0, 0.25, 0.5, 0.75, 1.0)}, (0, 1), float, ("random", "hyperopt", "bohb", "grid", "optuna")),
    "log_uniform": ({"distribution": "log_uniform", "min": -3, "max": 0}, "cdf", stats.loguniform(E ** -3, 1).cdf,
                    (E ** -3, 1), float, ("random", "hyperopt", "bohb", "optuna")),
    "q_log_uniform": ({"distribution": "q_log_uniform", "min": 0, "max": math.log(100), "q": 10}, "pmf",
                      cells(list(range(10, 101, 10)), stats.loguniform(1, 100), 1, 100), (10, 100), int,
                      ("random", "hyperopt", "bohb", "grid", "optuna")),
    "log_uniform_values": ({"distribution": "log_uniform_values", "min": 1e-4, "max": 1e-1}, "cdf",
                           stats.loguniform(1e-4, 1e-1).cdf, (1e-4, 1e-1), float, ("random", "hyperopt", "bohb", "optuna")),
    "q_log_uniform_values": ({"distribution": "q_log_uniform_values", "min": 1, "max": 64, "q": 4}, "pmf",
                             cells(list(range(4, 65, 4)), stats.loguniform(1, 64), 1, 64), (4, 64), int,
                             ("random", "hyperopt", "bohb", "grid", "optuna")),
    "inv_log_uniform": ({"distribution": "inv_log_uniform", "min": 1, "max": 5}, "cdf",
                        # log(1/X) uniform on [1, 5]
                        lambda x: 1 - stats.uniform(1, 4).cdf(np.log(1 / np.asarray(x))), (E ** -5, E ** -1), float,
                        ("random", "hyperopt", "bohb", "optuna")),
    "inv_log_uniform_values": ({"distribution": "inv_log_uniform_values", "min": 0.01, "max": 1}, "cdf",
                               # log(1/X) uniform on [log(1/max), log(1/min)]
                               lambda x: 1 - stats.uniform(0, math.log(100)).cdf(np.log(1 / np.asarray(x))),
                               (0.01, 1), float, ("random", "hyperopt", "bohb", "optuna")),
    "normal": ({"distribution": "normal", "mu": 1, "sigma": 2}, "cdf", stats.norm(1, 2).cdf, None, float,
               ("random", "hyperopt", "bohb")),
    "normal_bounded": ({"distribution": "normal", "mu": 0, "sigma": 1, "min": -1, "max": 2}, "cdf",
                       truncated(stats.norm(0, 1), -1, 2), (-1, 2), float, ("random", "bohb")),
    "q_normal": ({"distribution": "q_normal", "mu": 0, "sigma": 3}, "pmf", rounded(stats.norm(0, 3), 1, -6, 6), None,
                 int, ("random", "hyperopt", "bohb")),
    "q_normal_bounded": ({"distribution": "q_normal", "mu": 0, "sigma": 2, "min": -3, "max": 3}, "pmf",
                         cells(list(range(-3, 4)), stats.norm(0, 2), -3, 3), (-3, 3), int,
                         ("random", "hyperopt", "bohb", "grid")),
    "log_normal": ({"distribution": "log_normal", "mu": 0, "sigma": 0.5}, "cdf", stats.lognorm(s=0.5).cdf, None,
                   float, ("random", "hyperopt", "bohb")),
    "log_normal_bounded": ({"distribution": "log_normal", "mu": 0, "sigma": 1, "min": 0.5, "max": 4}, "cdf",
                           truncated(stats.lognorm(s=1), 0.5, 4), (0.5, 4), float, ("random", "bohb")),
    "q_log_normal": ({"distribution": "q_log_normal", "mu": 2, "sigma": 0.5}, "pmf",
                     rounded(stats.lognorm(s=0.5, scale=E ** 2), 1, 0, 14), None, int, ("random", "hyperopt", "bohb")),
    "q_log_normal_bounded": ({"distribution": "q_log_normal", "mu": 2, "sigma": 0.5, "min": 2, "max": 20, "q": 2},
                             "pmf", cells(list(range(2, 21, 2)), stats.lognorm(s=0.5, scale=E ** 2), 2, 20), (2, 20),
                             int, ("random", "hyperopt", "bohb", "grid")),
    "beta": ({"distribution": "beta", "a": 2, "b": 5}, "cdf", stats.beta(2, 5).cdf, (0, 1), float, ("random", "bohb")),
    "q_beta": ({"distribution": "q_beta", "a": 2, "b": 2, "q": 0.1}, "pmf",
               cells([round(0.1 * k, 1) for k in range(11)], stats.beta(2, 2), 0, 1), (0, 1), float,
               ("random", "hyperopt", "bohb", "grid")),
    "categorical": ({"values": ["a", "b", "c"]}, "pmf", {"a": 1 / 3, "b": 1 / 3, "c": 1 / 3}, None, str,
                    ("random", "hyperopt", "bohb", "grid", "optuna")),
    "categorical_probabilities": ({"values": [16, 32, 64], "probabilities": [0.6, 0.3, 0.1]}, "pmf",
                                  {16: 0.6, 32: 0.3, 64: 0.1}, (16, 64), int, ("random", "hyperopt", "bohb")),
    "constant": ({"value": 7}, "pmf", {7: 1.0}, (7, 7), int, ("random", "hyperopt", "bohb", "grid", "optuna")),
}
CASES = [(form, searcher) for form, entry in FORMS.items() for searcher in ("random", "hyperopt", "bohb", "optuna")
         if searcher in entry[-1]]
REFUSALS = [(form, searcher) for form, entry in FORMS.items() for searcher in ("hyperopt", "bohb", "grid", "optuna")
            if searcher not in entry[-1]]


def chi_square_p(values: list, pmf: dict) -> float:
    """p-value of the observed counts against ``pmf``; bins expected below 5 are pooled with the tails."""
    counts = {v: 0 for v in pmf}
    other = 0
    for v in values:
        key = next((k for k in pmf if k == v or (isinstance(k, float) and math.isclose(k, v, abs_tol=1e-9))), None)
        if key is None:
            other += 1
        else:
            counts[key] += 1
    observed, expected = [], []
    pooled_obs, pooled_exp = other, N * (1 - sum(pmf.values()))
    for k, p in pmf.items():
        if N * p < 5:
            pooled_obs, pooled_exp = pooled_obs + counts[k], pooled_exp + N * p
        else:
            observed.append(counts[k])
            expected.append(N * p)
    if pooled_exp > 1e-9 or pooled_obs:
        observed.append(pooled_obs)
        expected.append(max(pooled_exp, 1e-9))
    if len(observed) < 2:
        return 1.0 if observed == [N] else 0.0
    return stats.chisquare(observed, np.array(expected) * sum(observed) / sum(expected)).pvalue


@pytest.mark.parametrize("form, searcher", CASES, ids=[f"{f}-{s}" for f, s in CASES])
def test_each_form_samples_its_declared_law(form, searcher):
    body, kind, reference, bounds, value_type, _ = FORMS[form]
    ps = params(x=body)
    values = [config["x"] for config in draws(searcher, ps)]

    assert all(type(v) is value_type for v in values), {type(v) for v in values}
    json.dumps(values)  # plain Python values only
    if bounds is not None:
        assert bounds[0] - 1e-12 <= min(values) and max(values) <= bounds[1] + 1e-12
    if kind == "pmf":
        if bounds is not None and value_type is not str:  # inclusive ends are reached
            assert min(values) == pytest.approx(bounds[0]) and max(values) == pytest.approx(bounds[1])
        assert chi_square_p(values, reference) > P_MIN
    else:
        assert stats.kstest(values, reference).pvalue > P_MIN


@pytest.mark.parametrize("form, searcher", REFUSALS, ids=[f"{f}-{s}" for f, s in REFUSALS])
def test_a_searcher_that_cannot_express_a_form_refuses_it_with_the_reason(form, searcher):
    if FORMS[form][0].get("probabilities") and searcher == "grid":
        pytest.skip("a grid visits every value once: probabilities do not apply")
    spec = load_spec({"method": searcher, "parameters": {"x": FORMS[form][0]}})
    with pytest.raises(SpecError, match=rf"parameters\.x: {searcher} cannot sample \w+: .+; .+") as info:
        registry.build_searcher(spec)  # where a sweep's plan meets the refusal
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("form", [f for f, entry in FORMS.items() if "grid" in entry[-1]])
def test_grid_visits_exactly_the_declared_values(form):
    body, kind, reference, *_ = FORMS[form]
    points = [spaces.Decoder(params(x=body))(p)["x"] for p in spaces.grid_points(params(x=body))]
    assert sorted(points, key=str) == sorted(reference, key=str)


def test_plain_turns_numpy_into_python():
    value = configs.plain({"a": np.int64(3), "b": np.float32(0.5), "c": np.str_("x"), "d": (1, np.bool_(True))})
    assert value == {"a": 3, "b": 0.5, "c": "x", "d": [1, True]}
    assert [type(v) for v in (value["a"], value["b"], value["c"])] == [int, float, str]


def test_grid_enumerates_in_order_and_run_cap_cuts_it():
    ps = params(a={"values": [1, 2]}, b={"min": 0, "max": 1}, c={"value": "x"})
    points = [spaces.Decoder(ps)(p) for p in spaces.grid_points(ps)]
    assert points == [{"a": 1, "b": 0, "c": "x"}, {"a": 1, "b": 1, "c": "x"},
                      {"a": 2, "b": 0, "c": "x"}, {"a": 2, "b": 1, "c": "x"}]
    capped = GridSearch(ps, limit=3)
    assert [capped.suggest(str(i)) for i in range(4)][-1] == "FINISHED"


def test_grid_refuses_continuous_ranges_with_alternatives():
    with pytest.raises(SpecError) as info:
        spaces.grid_points(params(lr={"min": 0.1, "max": 1.0}))
    assert str(info.value) == (
        "parameters.lr: grid cannot sample uniform: a continuous range has no finite grid; list the points "
        "with `values: [...]`, use a q_ form with bounds, or use method random, bayes or bohb")


def test_hyperopt_int_uniform_gives_ends_full_mass():
    # hyperopt's own uniformint would give 1 and 3 a quarter each; ours gives each a third.
    values = [c["h"] for c in draws("hyperopt", params(h={"min": 1, "max": 3}))]
    assert min(values.count(1), values.count(3)) / N > 0.30


def test_bohb_keeps_quantization_exact():
    values = {c["b"] for c in draws("bohb", params(b={"distribution": "q_uniform", "min": 0, "max": 10, "q": 5}), 300)}
    assert values == {0, 5, 10}  # Ray's converter would give 0..9


# -- nested and conditional parameters --------------------------------------------------------------

CONDITIONAL = {
    "optimizer": {"values": ["sgd", "adam"]},
    "momentum": {"min": 0.0, "max": 0.99, "when": {"optimizer": "sgd"}},
    "nesterov": {"values": [True, False], "when": {"optimizer": "sgd"}},
    "dampening": {"distribution": "q_uniform", "min": 0, "max": 0.5, "q": 0.1, "when": {"nesterov": False}},
    "betas": {"parameters": {"b1": {"values": [0.8, 0.9], "when": {"optimizer": "adam"}},
                             "b2": {"values": [0.99, 0.999], "when": {"optimizer": ["adam"]}}}},
    "model.hidden": {"values": [32, 64]},
}


def check_activity(config: dict) -> None:
    """Each parameter is present exactly when its condition holds."""
    sgd = config["optimizer"] == "sgd"
    assert ("momentum" in config) == sgd and ("nesterov" in config) == sgd
    assert ("dampening" in config) == (sgd and config["nesterov"] is False)
    assert ("betas" in config) == (not sgd)
    if not sgd:
        assert set(config["betas"]) == {"b1", "b2"}
    assert config["model"]["hidden"] in (32, 64)


@pytest.mark.parametrize("searcher", ["random", "hyperopt", "bohb", "optuna"])
def test_conditional_parameters_are_sampled_only_when_their_condition_holds(searcher):
    ps = load_spec({"method": searcher, "parameters": CONDITIONAL}).parameters
    configs = draws(searcher, ps, 2000)
    for config in configs:
        check_activity(config)
    share_sgd = sum(c["optimizer"] == "sgd" for c in configs) / len(configs)
    assert 0.45 < share_sgd < 0.55
    momentum = [c["momentum"] for c in configs if "momentum" in c]
    assert stats.kstest(momentum, stats.uniform(0, 0.99).cdf).pvalue > P_MIN  # its law, where it is active


def test_conditional_grid_enumerates_only_active_combinations():
    space = {**CONDITIONAL, "momentum": {"values": [0.0, 0.9], "when": {"optimizer": "sgd"}}}
    ps = load_spec({"method": "grid", "parameters": space}).parameters
    configs = [spaces.Decoder(ps)(p) for p in spaces.grid_points(ps)]
    # sgd: 2 momentum x (nesterov true + nesterov false x 6 dampening) = 14; adam: 2 x 2 betas = 4; x 2 hidden
    assert len(configs) == (14 + 4) * 2
    assert len({json.dumps(c, sort_keys=True) for c in configs}) == len(configs)
    for config in configs:
        check_activity(config)


@pytest.mark.parametrize("method", ["hyperopt", "bohb", "optuna"])
def test_model_based_search_never_suggests_an_inactive_parameter(method):
    """Past the random start-up, the TPEs and BOHB's model propose the configs: still never an inactive one."""
    from tune_service.search import registry

    spec = load_spec({"method": method, "run_cap": 40, "metric": {"name": "loss", "goal": "minimize"},
                      "scheduler": {"max_t": 1}, "parameters": CONDITIONAL})
    searcher, _ = registry.build_searcher(spec)
    rng = np.random.default_rng(0)
    for i in range(40):
        config = searcher.suggest(str(i))
        check_activity(config)
        loss = (config.get("momentum", 0.5) - 0.9) ** 2 + rng.normal(0, 0.01)
        result = {"loss": loss, "epoch": 1, "training_iteration": 1, "time_total_s": 1.0}
        searcher.on_trial_result(str(i), result)
        searcher.on_trial_complete(str(i), result)


def test_nested_groups_and_dotted_names_give_nested_configs():
    ps = params(optimizer={"parameters": {"lr": {"value": 0.1}, "name": {"values": ["sgd"]}}},
                **{"model.layers": {"value": 2}})
    assert [p.name for p in ps] == ["optimizer.lr", "optimizer.name", "model.layers"]
    config = draws("random", ps, 1)[0]
    assert config == {"optimizer": {"lr": 0.1, "name": "sgd"}, "model": {"layers": 2}}
    assert configs.flatten(config) == {"optimizer.lr": 0.1, "optimizer.name": "sgd", "model.layers": 2}
