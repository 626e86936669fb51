"""The hypervolume (:mod:`tune_service.results.front`): exact, as Optuna's own computes it, for two to four
objectives of either mode; its reference point as stated; its history only rising."""

from __future__ import annotations

import random

import numpy as np
import pytest
from optuna._hypervolume import compute_hypervolume  # Optuna's, to check ours against (a test-only import)

from tune_service.results.front import hypervolume, hypervolume_by_trial, reference_point


@pytest.mark.parametrize("modes", [("min", "min"), ("max", "min"), ("min", "max", "min"), ("max",) * 4])
@pytest.mark.parametrize("seed", range(4))
def test_the_volume_is_optunas(modes, seed):
    rng = random.Random(seed)
    points = [tuple(round(rng.random(), 2) for _ in modes) for _ in range(25)]
    reference = reference_point(points, modes)
    signs = np.array([1.0 if m == "min" else -1.0 for m in modes])
    theirs = compute_hypervolume(np.array(points) * signs, np.array(reference) * signs)
    assert hypervolume(points, modes, reference) == pytest.approx(theirs, rel=1e-9)


def test_the_reference_is_the_worst_value_a_tenth_of_the_range_further_out():
    points = [(0.9, 100.0), (0.5, 300.0), (0.7, 300.0)]
    assert reference_point(points, ("max", "min")) == pytest.approx((0.5 - 0.04, 300.0 + 20.0))
    assert reference_point([(1.0, 5.0)], ("min", "max")) == (2.0, 4.0)  # no range: one further out


def test_a_hand_worked_volume_and_its_history_by_trial():
    # two objectives to minimise, reference (4, 4): (1, 3) and (3, 1) dominate 3 + 3 - 1 = 5
    assert hypervolume([(1, 3), (3, 1)], ("min", "min"), (4, 4)) == 5
    assert hypervolume([(5, 1)], ("min", "min"), (4, 4)) == 0  # outside the reference: nothing
    history = hypervolume_by_trial([(1, 3), None, (2, 3.5), (3, 1), (1, 3)], ("min", "min"), (4, 4))
    assert history == [3, 3, 3, 5, 5]
