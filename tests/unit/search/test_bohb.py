"""BOHB's model (tune_service.search.bohb): its coordinates, its kernel densities, where its model puts
suggestions, and that it needs none of hpbandster, ConfigSpace or statsmodels. Its random configs are
random search's (test_spaces.py), and its saves and restores the search contract's."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

from tune_service.search.bohb import BOHBSearch, Coordinate, KernelDensity
from tune_service.spec import load_spec

#: One of each kind of coordinate: a categorical, a quantized range (its index), a log range, a bounded
#: normal, an unbounded normal (on its CDF), an integer range.
SPACE = {"act": {"values": ["relu", "gelu", "tanh"]},
         "width": {"distribution": "q_uniform", "min": 8, "max": 64, "q": 8},
         "lr": {"distribution": "log_uniform_values", "min": 1e-4, "max": 1e-1},
         "drop": {"distribution": "normal", "mu": 0.2, "sigma": 0.1, "min": 0.0, "max": 0.5},
         "shift": {"distribution": "normal", "mu": 0.0, "sigma": 1.0},
         "layers": {"min": 1, "max": 4}}


def params(space=None):
    return load_spec({"method": "bohb", "parameters": space or SPACE}).parameters


def test_each_coordinate_decodes_its_own_encoding():
    rng = np.random.default_rng(0)
    for p in params():
        coordinate = Coordinate(p)
        for value in (coordinate.decode(u) for u in rng.random(50)):
            assert coordinate.decode(coordinate.encode(value)) == pytest.approx(value)
            assert 0.0 <= coordinate.encode(value) <= (coordinate.choices or 1.0)


def test_the_kernel_density_is_statsmodels_normal_reference_product_kernel():
    data = np.array([[0.1, 0.0], [0.4, 1.0], [0.35, 2.0], [0.8, 1.0], [0.5, 1.0]])
    kde = KernelDensity(data, np.array([0, 3]), min_bandwidth=1e-3)
    n, d = data.shape
    assert kde.bw == pytest.approx(1.06 * data.std(axis=0) * n ** (-1 / (4 + d)))  # Scott's rule, as statsmodels
    x, (h, lam) = (0.3, 1.0), kde.bw
    by_hand = sum(math.exp(-0.5 * ((xi - x[0]) / h) ** 2) / math.sqrt(2 * math.pi) / h
                  * ((1 - lam) if ci == x[1] else lam / 2) for xi, ci in data) / n
    assert kde.pdf(np.array([x, x])) == pytest.approx([by_hand, by_hand])


def drive(searcher: BOHBSearch, loss, n: int, budget: float = 9) -> list[dict]:
    configs = []
    for i in range(n):
        config = searcher.suggest(f"t{i}")
        searcher.on_trial_result(f"t{i}", {"loss": loss(config), "hyperband_info": {"budget": budget}})
        searcher.on_trial_complete(f"t{i}")
        configs.append(config)
    return configs


def test_the_models_suggestions_stay_in_each_parameters_domain():
    searcher = BOHBSearch(params(), "loss", "min", seed=1)
    configs = drive(searcher, lambda c: abs(math.log10(c["lr"]) + 2.5) + c["layers"] / 10, 120)
    assert searcher.state["models"]  # the later suggestions came from a model
    for c in configs:
        assert c["act"] in ("relu", "gelu", "tanh") and c["width"] in range(8, 65, 8) and isinstance(c["width"], int)
        assert 1e-4 <= c["lr"] <= 1e-1 and 0.0 <= c["drop"] <= 0.5 and math.isfinite(c["shift"])
        assert c["layers"] in (1, 2, 3, 4) and isinstance(c["layers"], int)


def test_the_model_proposes_near_the_best_configs_and_a_max_metric_is_a_negated_loss():
    space = {"x": {"min": 0.0, "max": 1.0}, "y": {"min": 0.0, "max": 1.0}}
    for mode, sign in (("min", 1), ("max", -1)):
        searcher = BOHBSearch(params(space), "loss", mode, seed=0)
        configs = drive(searcher, lambda c: sign * ((c["x"] - 0.3) ** 2 + (c["y"] - 0.7) ** 2), 100)
        distance = [math.hypot(c["x"] - 0.3, c["y"] - 0.7) for c in configs[40:]]
        # uniform points are 0.38 from (0.3, 0.7) at the median; a third of BOHB's stay random
        assert np.median(distance) < 0.2, mode


def test_a_conditional_parameter_is_left_out_where_inactive_and_modelled_where_active():
    space = {"opt": {"values": ["sgd", "adam"]}, "momentum": {"min": 0.0, "max": 0.99, "when": {"opt": "sgd"}},
             "lr": {"min": 0.0, "max": 1.0}}
    searcher = BOHBSearch(params(space), "loss", "min", seed=0)
    configs = drive(searcher, lambda c: c["lr"] + (c.get("momentum", 0.5) - 0.9) ** 2, 80)
    assert searcher.state["models"]
    assert all(("momentum" in c) == (c["opt"] == "sgd") for c in configs)


def test_bohb_imports_none_of_hpbandster_configspace_or_statsmodels():
    code = ("import sys\n"
            "for name in ('hpbandster', 'ConfigSpace', 'statsmodels'): sys.modules[name] = None\n"
            "from tune_service.search import registry\n"
            "from tune_service.spec import load_spec\n"
            "spec = load_spec('search_spaces/bohb.yaml')\n"
            "searcher, _ = registry.build_searcher(spec)\n"
            "for i in range(30):\n"
            "    c = searcher.suggest(str(i))\n"
            "    searcher.on_trial_result(str(i), {'val_loss': c['lr'], 'hyperband_info': {'budget': 9}})\n"
            "    searcher.on_trial_complete(str(i), {'val_loss': c['lr'], 'epoch': 9, 'training_iteration': 9})\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('hpbandster', 'ConfigSpace', 'statsmodels')"
            " and sys.modules[m] is not None))\n")
    from pathlib import Path

    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[3])
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"


def test_a_trials_last_result_is_recorded_at_its_epoch_once_per_budget():
    # Tune gives a searcher no on_trial_result for the result its scheduler stops a trial on: the trial's
    # end brings it (hpbandster records every run it finishes; Ray's TuneBOHB loses these).
    searcher = BOHBSearch(params({"x": {"min": 0.0, "max": 1.0}}), "loss", "min", seed=0, time_attr="epoch")
    searcher.suggest("t0")
    searcher.on_trial_result("t0", {"loss": 1.0, "epoch": 3, "hyperband_info": {"budget": 3}})
    searcher.on_trial_complete("t0", {"loss": 0.5, "epoch": 9})
    searcher.suggest("t1")
    searcher.on_trial_result("t1", {"loss": 0.2, "epoch": 9, "hyperband_info": {"budget": 9}})
    searcher.on_trial_complete("t1", {"loss": 0.2, "epoch": 9})
    searcher.suggest("t2")
    searcher.on_trial_complete("t2", {"loss": 0.7, "epoch": 1}, error=True)  # a failed trial tells nothing
    observed = {budget: [loss for _, loss in seen] for budget, seen in searcher.state["observations"].items()}
    assert observed == {3: [1.0], 9: [0.5, 0.2]}


def test_choices_that_are_lists_are_modelled_by_their_index():
    # ConfigSpace refused them (its choices must be scalars), and so did method bohb
    space = {"layers": {"values": [[64, 64], [128]]}, "lr": {"min": 0.0, "max": 1.0}}
    searcher = BOHBSearch(params(space), "loss", "min", seed=0)
    configs = drive(searcher, lambda c: c["lr"] + len(c["layers"]), 40)
    assert searcher.state["models"] and all(c["layers"] in ([64, 64], [128]) for c in configs)
    assert sum(c["layers"] == [128] for c in configs[20:]) > 12  # the model prefers the better choice
