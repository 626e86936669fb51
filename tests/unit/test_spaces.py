"""Native spaces per searcher: inclusive integer ends, plain Python values, and refusals with reasons."""

from __future__ import annotations

import json
import random
from collections import Counter

import numpy as np
import pytest

from tune_service import spaces
from tune_service.errors import SpecError
from tune_service.spec import load_spec


def params(**parameters):
    return load_spec({"method": "random", "parameters": parameters}).parameters


def test_plain_turns_numpy_into_python():
    value = spaces.plain({"a": np.int64(3), "b": np.float32(0.5), "c": np.str_("x"), "d": (1, np.bool_(True))})
    assert value == {"a": 3, "b": 0.5, "c": "x", "d": [1, True]}
    assert [type(v) for v in (value["a"], value["b"], value["c"])] == [int, float, str]
    json.dumps(value)


def test_random_int_uniform_reaches_both_ends():
    domain = spaces.tune_domains(params(h={"min": 1, "max": 3}))["h"]
    rng = np.random.RandomState(0)
    seen = Counter(domain.sample(random_state=rng) for _ in range(600))
    assert set(seen) == {1, 2, 3}


def test_hyperopt_int_uniform_gives_ends_full_mass():
    from hyperopt.pyll.stochastic import sample

    space = spaces.hyperopt_space(params(h={"min": 1, "max": 3}))
    rng = np.random.default_rng(0)
    seen = Counter(int(sample(space, rng=rng)["h"]) for _ in range(3000))
    assert set(seen) == {1, 2, 3}
    # hyperopt's own uniformint would give 1 and 3 a quarter each; ours gives each a third.
    assert min(seen.values()) / 3000 > 0.30


def test_bohb_space_keeps_quantization_exact():
    cs = spaces.config_space(params(b={"distribution": "q_uniform", "min": 0, "max": 10, "q": 5}), seed=0)
    values = {cs.sample_configuration()["b"] for _ in range(200)}
    assert values == {0, 5, 10}  # Ray's converter would give 0..9


def test_quantized_values_stay_inside_bounds():
    p = params(x={"distribution": "q_uniform", "min": 0, "max": 1, "q": 0.3})[0]
    assert spaces.quantized_values(p) == [0.0, 0.3, 0.6, 0.9]


def test_grid_enumerates_in_order():
    points = spaces.grid_points(params(a={"values": [1, 2]}, b={"min": 0, "max": 1}, c={"value": "x"}))
    assert points == [{"a": 1, "b": 0, "c": "x"}, {"a": 1, "b": 1, "c": "x"},
                      {"a": 2, "b": 0, "c": "x"}, {"a": 2, "b": 1, "c": "x"}]


def test_grid_refuses_continuous_ranges_with_alternatives():
    with pytest.raises(SpecError) as info:
        spaces.grid_points(params(lr={"min": 0.1, "max": 1.0}))
    assert str(info.value) == (
        "parameters.lr: grid cannot sample uniform: a continuous range has no finite grid; list the points "
        "with `values: [...]`, use q_uniform, or use method random, bayes or bohb")


def test_bohb_refuses_list_valued_choices():
    with pytest.raises(SpecError, match="parameters.layers: bohb cannot sample categorical: ConfigSpace choices must be scalars"):
        spaces.config_space(params(layers={"values": [[64, 64], [128]]}), seed=0)


def test_weighted_choice_follows_probabilities():
    sampler = spaces.tune_domains(params(o={"values": ["a", "b"], "probabilities": [0.9, 0.1]}))["o"]
    np.random.seed(0)
    random.seed(0)
    draws = Counter(sampler.func(None) for _ in range(2000))
    assert 0.87 < draws["a"] / 2000 < 0.93
