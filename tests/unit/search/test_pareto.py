"""Pareto order (:mod:`tune_service.search.pareto`): the first front is the one Optuna's own
``study.best_trials`` finds, every later front is dominated only by earlier ones, and the crowding
distance orders a front as NSGA-II does."""

from __future__ import annotations

import math
import random

import numpy as np
import optuna
import pytest

from tune_service.search.pareto import crowding_distances, dominates, fronts, non_dominated, pareto_order


def optuna_front(points, modes) -> set[int]:
    """The indices of ``points`` on the front of an Optuna study told them, by Optuna's ``best_trials``."""
    directions = ["minimize" if m == "min" else "maximize" for m in modes]
    study = optuna.create_study(directions=directions)
    distribution = optuna.distributions.IntDistribution(0, len(points))
    for i, point in enumerate(points):
        study.add_trial(optuna.trial.create_trial(params={"i": i}, distributions={"i": distribution}, values=list(point)))
    return {t.params["i"] for t in study.best_trials}


@pytest.mark.parametrize("modes", [("min", "min"), ("min", "max"), ("max", "min", "max"), ("min",) * 4])
@pytest.mark.parametrize("seed", range(5))
def test_the_first_front_is_optunas_and_each_later_one_is_dominated_only_by_earlier_ones(modes, seed):
    rng = random.Random(seed)
    # rounded, so that ties and equal points occur
    points = [tuple(round(rng.random(), 1) for _ in modes) for _ in range(40)]
    found = fronts(points, modes)
    assert sorted(i for front in found for i in front) == list(range(len(points)))
    assert set(found[0]) == optuna_front(points, modes)
    assert non_dominated(points, modes) == found[0]
    for k, front in enumerate(found):
        for i in front:
            assert not any(dominates(points[j], points[i], modes) for later in found[k:] for j in later)
            if k:
                assert any(dominates(points[j], points[i], modes) for j in found[k - 1])


def test_dominance_needs_one_objective_strictly_better_and_follows_each_mode():
    assert dominates((1, 5), (2, 5), ("min", "min")) and not dominates((1, 5), (1, 5), ("min", "min"))
    assert dominates((1, 6), (2, 5), ("min", "max")) and not dominates((1, 4), (2, 5), ("min", "max"))
    assert fronts([(1, 1), (1, 1), (2, 2)], ("min", "min")) == [[0, 1], [2]]  # equal points share a front


def test_the_crowding_distance_is_infinite_at_the_ends_and_the_sum_of_normalised_gaps_between():
    front = [(0.0, 4.0), (1.0, 2.0), (3.0, 1.0), (4.0, 0.0)]
    d = crowding_distances(front)
    assert d[0] == d[3] == math.inf
    assert d[1] == pytest.approx((3 - 0) / 4 + (4 - 1) / 4) and d[2] == pytest.approx((4 - 1) / 4 + (2 - 0) / 4)
    assert crowding_distances(front[:2]) == [math.inf, math.inf]


def test_the_order_is_by_front_then_by_crowding_then_by_arrival():
    points = [(1.0, 2.0), (2.0, 2.5), (0.0, 4.0), (3.0, 1.0), (4.0, 0.0), (1.5, 1.8)]
    front = [0, 2, 3, 4, 5]  # 1 is dominated by 0; both ranges are 4
    distances = dict(zip(front, crowding_distances([points[i] for i in front])))
    assert distances[2] == distances[4] == math.inf  # the ends
    assert distances[3] == pytest.approx((4 - 1.5) / 4 + (1.8 - 0) / 4)
    assert distances[0] == pytest.approx((1.5 - 0) / 4 + (4 - 1.8) / 4)
    assert distances[5] == pytest.approx((3 - 1) / 4 + (2 - 1) / 4)
    assert pareto_order(points, ("min", "min")) == [2, 4, 3, 0, 5, 1]


@pytest.mark.parametrize("seed", range(5))
def test_two_objectives_sorted_give_the_fronts_of_the_pairwise_comparison(seed):
    """The one-sort peel of two objectives against the pairwise one, on points with ties and repeats."""
    from tune_service.search import pareto

    rng = np.random.default_rng(seed)
    points = [tuple(p) for p in rng.integers(0, 12, size=(400, 2)).astype(float)]
    modes = ["min", "max"]
    losses = pareto._losses(points, modes)
    pairwise = np.zeros(len(points), dtype=bool)
    for i, a in enumerate(losses):
        pairwise[i] = any((b <= a).all() and (b < a).any() for b in losses)
    assert (pareto._dominated_2d(losses) == pairwise).all()
    assert fronts(points, modes) == fronts([(*p, 0.0) for p in points], [*modes, "min"])  # the general peel
