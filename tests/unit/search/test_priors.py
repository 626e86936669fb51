"""Priors (``priors:``) in the searchers: what each draws, measured as distributions over many draws (a
Kolmogorov-Smirnov or chi-square test against the law the docs state, and against the declared law it
must differ from), never one draw; PriorBand's half-and-half mixture with the declared laws; the fading of
the belief with the draws (πBO's rule); the evidence check that drops a belief the results contradict;
BOHB's picks weighed by it; the TPEs' start-up configs drawn from it."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest
from scipy import stats

from tune_service.execution.plan import make_plan
from tune_service.execution.resources import ClusterResources
from tune_service.search import registry
from tune_service.search.bohb import BOHBSearch
from tune_service.search.priors import PriorGuide, PriorLaw, decay, prior_weight, start_up_draws
from tune_service.search.searchers import RandomSearch
from tune_service.search.wrappers import innermost
from tune_service.spec import load_spec

METRIC = "val_loss"
LOW, HIGH = 1e-4, 1e-1
PARAMETERS = {
    "lr": {"distribution": "log_uniform_values", "min": LOW, "max": HIGH},
    "hidden": {"values": [32, 64, 128]},
    "batch_size": {"distribution": "q_uniform", "min": 16, "max": 128, "q": 16},
    "dropout": {"min": 0.0, "max": 0.5},
}
PRIORS = {"lr": {"value": 3e-3, "confidence": "high"}, "hidden": 128, "batch_size": {"value": 32, "confidence": "low"}}


def spec(method: str = "random", run_cap: int = 20, priors: dict | None = None, **extra):
    return load_spec({"method": method, "run_cap": run_cap, "seed": 5, "metric": {"name": METRIC, "goal": "minimize"},
                      "parameters": PARAMETERS, "priors": PRIORS if priors is None else priors,
                      "scheduler": {"type": "hyperband" if method == "bohb" else "fifo", "max_t": 3}, **extra})


def unit(lr: float) -> float:
    """lr on its log-uniform range's [0, 1] scale, where its belief is a normal."""
    return (math.log(lr) - math.log(LOW)) / (math.log(HIGH) - math.log(LOW))


def belief_cdf(spread: float):
    """The CDF of the belief about lr on its [0, 1] scale: a normal around 3e-3, truncated to [0, 1]."""
    centre = unit(3e-3)
    return stats.truncnorm(-centre / spread, (1 - centre) / spread, loc=centre, scale=spread).cdf


def mixture_cdf(spread: float):
    """Half the belief, half the declared (log-uniform) law: a guided searcher's draw of lr."""
    belief = belief_cdf(spread)
    return lambda u: 0.5 * belief(u) + 0.5 * np.clip(u, 0, 1)


def test_a_belief_over_a_range_is_a_normal_on_its_scale_whose_spread_grows_as_it_fades():
    law = PriorLaw(spec().parameters, spec().priors)
    rng = np.random.default_rng(0)
    for weight in (1.0, 0.5):
        u = [unit(law.sample(rng, weight)["lr"]) for _ in range(4000)]
        spread = 0.125 / math.sqrt(weight)  # high confidence: 0.125 of the range; to the power w, sqrt(1/w) wider
        assert stats.kstest(u, belief_cdf(spread)).pvalue > 1e-3, weight
        assert stats.kstest(u, "uniform").pvalue < 1e-6, weight  # not the declared law
        assert stats.kstest(u, belief_cdf(0.125 if weight < 1 else 0.25)).pvalue < 1e-4, weight  # not another spread
    u = [unit(law.sample(rng, 0.0)["lr"]) for _ in range(3000)]
    assert stats.kstest(u, "uniform").pvalue > 1e-3  # faded away: the declared law


def test_a_belief_over_values_makes_the_value_likelier_by_its_odds_and_keeps_declared_probabilities():
    rng = np.random.default_rng(1)
    law = PriorLaw(spec().parameters, spec().priors)
    for weight, odds in ((1.0, 1.75), (0.5, math.sqrt(1.75))):  # medium: 1.75 times each other value
        expected = np.array([1.0, 1.0, odds]) / (2 + odds)
        drawn = [law.sample(rng, weight)["hidden"] for _ in range(3000)]
        counts = [drawn.count(v) for v in (32, 64, 128)]
        assert stats.chisquare(counts, expected * 3000).pvalue > 1e-3, (weight, counts)
        assert stats.chisquare(counts).pvalue < 1e-3 if weight == 1 else True  # not equally likely
    weighted = load_spec({"method": "random", "metric": {"name": METRIC, "goal": "minimize"},
                          "parameters": {"hidden": {"values": [32, 64, 128], "probabilities": [0.6, 0.3, 0.1]}},
                          "priors": {"hidden": {"value": 128, "confidence": "high"}}})
    law = PriorLaw(weighted.parameters, weighted.priors)
    drawn = [law.sample(rng, 1.0)["hidden"] for _ in range(3000)]
    tilted = np.array([0.6, 0.3, 0.1 * 2.5])  # declared mass times the odds (high: 2.5)
    counts = [drawn.count(v) for v in (32, 64, 128)]
    assert stats.chisquare(counts, tilted / tilted.sum() * 3000).pvalue > 1e-3, counts


def test_a_configs_likelihood_ratio_is_above_0_near_the_belief_below_far_from_it_and_0_where_inactive():
    conditional = load_spec({"method": "bohb", "metric": {"name": METRIC, "goal": "minimize"},
                             "parameters": {"optimizer": {"values": ["sgd", "adam"]},
                                            "momentum": {"min": 0.0, "max": 0.99, "when": {"optimizer": "sgd"}}},
                             "priors": {"momentum": {"value": 0.9, "confidence": "high"}}})
    law = PriorLaw(conditional.parameters, conditional.priors)
    near, far = {"optimizer": "sgd", "momentum": 0.9}, {"optimizer": "sgd", "momentum": 0.1}
    assert law.log_ratio(near) > 0 > law.log_ratio(far)
    assert law.log_ratio({"optimizer": "adam"}) == 0  # inactive: the belief says nothing, neither likelier nor not
    # normalised: the belief's own draws are likelier under it on average (a KL divergence), uniform ones less
    rng = np.random.default_rng(6)
    belief = law.beliefs["momentum"]
    believed = [law.log_ratio({"optimizer": "sgd", "momentum": belief.sample(rng, 1.0)}) for _ in range(2000)]
    declared = [law.log_ratio({"optimizer": "sgd", "momentum": float(m)}) for m in rng.uniform(0, 0.99, 2000)]
    assert np.mean(believed) > 0 > np.mean(declared)
    values = PriorLaw(spec().parameters, spec().priors)  # hidden: 128 at odds 1.75 of [32, 64, 128]
    assert values.log_ratio({"hidden": 128}) == pytest.approx(math.log(1.75 / (3.75 / 3)))
    assert values.log_ratio({"hidden": 32}) == pytest.approx(math.log(1 / (3.75 / 3)))


def test_a_belief_over_a_quantized_range_weighs_each_multiple_by_the_normal_at_it():
    rng = np.random.default_rng(2)
    law = PriorLaw(spec().parameters, spec().priors)
    values = list(range(16, 129, 16))
    drawn = [law.sample(rng, 1.0)["batch_size"] for _ in range(4000)]
    # low confidence: spread 0.5 of the range; the multiples equally likely before the belief
    u = [(v - 16) / (128 - 16) for v in values]
    belief = np.exp(-0.5 * ((np.array(u) - u[1]) / 0.5) ** 2)
    counts = [drawn.count(v) for v in values]
    assert stats.chisquare(counts, belief / belief.sum() * 4000).pvalue > 1e-3, counts
    assert stats.chisquare(counts).pvalue < 1e-6  # not equally likely


def test_random_search_draws_half_its_configs_from_the_belief_to_the_power_beta_over_n():
    s = spec(run_cap=20)  # beta: a tenth of the sweep's trials, 2
    assert decay(20) == 2 and decay(None) == 10 and decay(5) == 1
    assert [prior_weight(n, 2) for n in (1, 2, 4, 20)] == [1, 1, 0.5, 0.1]
    first, twentieth = [], []
    for seed in range(500):
        search = RandomSearch(s.parameters, seed, prior=PriorLaw(s.parameters, s.priors), beta=2)
        draws = [search.suggest(f"t{i}") for i in range(20)]
        first.append(unit(draws[0]["lr"]))
        twentieth.append(unit(draws[19]["lr"]))
    assert stats.kstest(first, mixture_cdf(0.125)).pvalue > 1e-3
    assert stats.kstest(first, belief_cdf(0.125)).pvalue < 1e-6  # not the belief alone
    assert stats.kstest(twentieth, mixture_cdf(0.125 / math.sqrt(0.1))).pvalue > 1e-3
    assert stats.kstest(twentieth, mixture_cdf(0.125)).pvalue < 1e-4


def reported(guide: PriorGuide, near_is_better: bool) -> PriorGuide:
    """``guide`` told 12 finished trials, half near the believed lr, half far from it; the near ones best
    (or worst)."""
    for i in range(12):
        near = i % 2 == 0
        lr = 3e-3 * (1.2 if i % 4 == 0 else 0.8) if near else (1.5e-4 if i % 4 == 1 else 0.08)
        config = {"lr": lr, "hidden": 64, "batch_size": 64, "dropout": 0.2}
        guide.record(f"t{i}", config, 3, (0.1 if near == near_is_better else 1.0) + i / 100)
    return guide


def test_a_belief_the_best_results_contradict_is_dropped_and_one_they_bear_out_stands():
    law = PriorLaw(spec().parameters, spec().priors)
    assert reported(PriorGuide(law, 2.0), near_is_better=True).believed()
    against = reported(PriorGuide(law, 2.0), near_is_better=False)
    assert not against.believed() and against.next_weight() == 0
    rng = np.random.default_rng(4)
    u = [unit(against.sample(rng, against.next_weight())["lr"]) for _ in range(2000)]
    assert stats.kstest(u, "uniform").pvalue > 1e-3  # the declared laws alone from then on
    fresh = PriorGuide(law, 2.0)
    for i in range(7):  # too few reports to judge: the beliefs stand
        fresh.record(f"t{i}", {"lr": 0.08, "hidden": 32, "batch_size": 128, "dropout": 0.4}, 3, 0.1)
    assert fresh.believed()


def test_random_search_hears_the_reports_that_test_its_belief():
    s = spec(run_cap=20)
    search, _ = registry.build_searcher(s)
    search.set_search_properties(METRIC, "min", {})
    guide = innermost(search).guide
    for i in range(10):  # the further from the believed lr, the better
        config = search.suggest(f"t{i}")
        search.on_trial_complete(f"t{i}", {METRIC: -abs(math.log10(config["lr"] / 3e-3)), "epoch": 3,
                                           "training_iteration": 3})
    assert len(guide.state["seen"]) == 10 and not guide.believed()


def test_random_search_with_priors_resumes_its_draws_and_evidence_exactly(tmp_path):
    s = spec(run_cap=20)
    search, _ = registry.build_searcher(s)
    search.set_search_properties(METRIC, "min", {})
    for i in range(7):
        config = search.suggest(f"t{i}")
        search.on_trial_complete(f"t{i}", {METRIC: config["dropout"], "epoch": 3, "training_iteration": 3})
    search.save(str(tmp_path / "s.pkl"))
    restored, _ = registry.build_searcher(s)
    restored.set_search_properties(METRIC, "min", {})
    restored.restore(str(tmp_path / "s.pkl"))
    assert innermost(restored).guide.state == innermost(search).guide.state
    assert innermost(restored).guide.state["drawn"] == 7
    assert [restored.suggest(f"u{i}") for i in range(5)] == [search.suggest(f"u{i}") for i in range(5)]


def bohb_with_a_model(prior: bool) -> BOHBSearch:
    """A BOHB whose model has seen 20 configs at budget 1, the best near lr = 1e-2 (with ``prior``: the
    spec's, which believes 3e-3)."""
    s = spec("bohb")
    search = BOHBSearch(s.parameters, METRIC, "min", seed=7,
                        **({"prior": PriorLaw(s.parameters, s.priors), "beta": 2.0} if prior else {}))
    rng = np.random.default_rng(3)
    for i in range(20):
        config = {"lr": float(10 ** rng.uniform(-4, -1)), "hidden": int(rng.choice([32, 64, 128])),
                  "batch_size": int(rng.choice(range(16, 129, 16))), "dropout": float(rng.uniform(0, 0.5))}
        search.state["live"][f"s{i}"] = (config, set())
        search.on_trial_result(f"s{i}", {METRIC: abs(math.log10(config["lr"]) + 2), "hyperband_info": {"budget": 1}})
    assert search.state["models"], "the model is built"
    return search


def test_bohb_picks_among_its_models_candidates_the_one_the_belief_weighs_up():
    """From the same state, so the same candidates: the pick with the prior is never less likely under the
    belief than the pick without (it minimises g/l divided by the belief), and more likely in a good share of
    them (in the others the model's best candidate is the belief's best too)."""
    plain, weighed = bohb_with_a_model(prior=False), bohb_with_a_model(prior=True)
    law = weighed.guide.law
    better = picks = 0
    for draw in range(60):
        state = pickle.dumps(weighed.state)
        plain.state, weighed.state = pickle.loads(state), pickle.loads(state)
        without, with_prior = plain._model_pick(1.0), weighed._model_pick(1.0)
        if without is None:  # the random fraction, for both: the same generator
            assert with_prior is None
            continue
        assert law.log_ratio(with_prior) >= law.log_ratio(without) - 1e-12
        better += law.log_ratio(with_prior) > law.log_ratio(without)
        picks += 1
        weighed.state["rng"].random(draw + 1)  # on to other candidates
    assert picks >= 30 and better >= picks // 5, (better, picks)


def test_bohbs_random_configs_follow_the_belief_half_the_time():
    s = spec("bohb")
    first = []
    for seed in range(600):
        search = BOHBSearch(s.parameters, METRIC, "min", seed=seed, prior=PriorLaw(s.parameters, s.priors), beta=2.0)
        first.append(unit(search.suggest("t0")["lr"]))  # no model yet: a random config, the belief at power 1
    assert stats.kstest(first, mixture_cdf(0.125)).pvalue > 1e-3
    assert stats.kstest(first, "uniform").pvalue < 1e-6


@pytest.mark.parametrize("method,start_up", [("bayes", 10), ("optuna", 10)])
def test_a_tpe_starts_from_configs_drawn_from_the_belief_in_place_of_its_random_ones(method, start_up):
    s = spec(method, run_cap=30)  # hyperopt's and Optuna's start-up: 10 configs for a sweep of 30
    expected = start_up_draws(PriorLaw(s.parameters, s.priors), s.seed, start_up)
    searcher, _ = registry.build_searcher(s)
    searcher.set_search_properties(METRIC, "min", {})
    suggested = []
    for i in range(start_up + 2):
        config = searcher.suggest(f"t{i}")
        suggested.append(config)
        searcher.on_trial_complete(f"t{i}", {METRIC: abs(math.log10(config["lr"]) + 2), "epoch": 3})
    for got, want in zip(suggested, expected, strict=False):
        assert got.keys() == want.keys() and all(got[k] == pytest.approx(want[k]) for k in want), (got, want)
    assert suggested[start_up] != expected[-1]  # then its own

    # Known points count among the start-up configs: the belief draws the rest.
    with_points = spec(method, run_cap=30, points_to_evaluate=[{"lr": 0.01, "hidden": 32, "batch_size": 64,
                                                                 "dropout": 0.1}])
    assert registry._start_up_from_priors(with_points, 1) == expected[: start_up - 1]


def test_a_tpe_start_up_draws_every_other_config_from_the_belief():
    draws = [start_up_draws(PriorLaw(spec().parameters, spec().priors), seed, 10) for seed in range(300)]
    believed = [unit(d[i]["lr"]) for d in draws for i in range(0, 10, 2)]
    declared = [unit(d[i]["lr"]) for d in draws for i in range(1, 10, 2)]
    assert stats.kstest(believed, belief_cdf(0.125)).pvalue > 1e-3
    assert stats.kstest(declared, "uniform").pvalue > 1e-3


@pytest.mark.parametrize("method,use", [
    ("random", "each config drawn half from them (to the power min(1, 2/n) at the n-th), half from the declared"),
    ("bohb", "BOHB's random configs drawn half from them (to the power min(1, 2/n) at the n-th), half from the"),
    ("bayes", "the TPE's 6 random start-up config(s) drawn half from them, half from the declared laws; it learns"),
])
def test_the_dry_run_shows_each_prior_and_how_the_searcher_uses_them(method, use):
    lines = make_plan(spec(method), ClusterResources(2, 0, 2, 0)).describe().splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("priors"))
    assert lines[at] == ("priors       lr=0.003 (high confidence), hidden=128 (medium confidence), "
                         "batch_size=32 (low confidence)")
    assert "until the best configs are likelier without them" in lines[at + 1] or method == "bayes"
    assert lines[at + 1].startswith(f"  {use}")
