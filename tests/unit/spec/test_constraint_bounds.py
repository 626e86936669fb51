"""``constraints:``: bounds on reported metrics, read and refused in one line each; a value's violation
as Optuna's constraints read it (<= 0 feasible)."""

from __future__ import annotations

import math

import pytest

from tune_service.errors import SpecError
from tune_service.spec import load_spec
from tune_service.spec.sweep import ConstraintSpec

BASE = {"task": "digits", "metric": {"name": "val_accuracy", "goal": "maximize"}, "parameters": {"lr": {"values": [0.01, 0.1]}}}


def test_bounds_are_read_with_one_or_both_ends():
    spec = load_spec({**BASE, "constraints": [{"name": "n_params", "max": "2e6"}, {"name": "latency_ms", "min": 0, "max": 5}]})
    assert spec.constraints == (ConstraintSpec("n_params", None, 2e6), ConstraintSpec("latency_ms", 0, 5))
    assert [c.describe() for c in spec.constraints] == ["n_params <= 2e+06", "0 <= latency_ms <= 5"]


@pytest.mark.parametrize("constraints, error", [
    ([{"name": "val_accuracy", "max": 1}], r"^constraints\[0\].name: is an objective"),
    ([{"name": "n_params"}], r"^constraints\[0\]: needs min, max or both"),
    ([{"name": "n_params", "min": 3, "max": 1}], r"^constraints\[0\].min: must be <= constraints\[0\].max \(1\), got 3"),
    ([{"name": "a", "max": 1}, {"name": "a", "min": 0}], r"^constraints\[1\].name: is bounded twice"),
    ([{"name": "a", "max": 1, "below": 2}], r"^constraints\[0\].below: unknown key"),
    ("n_params", r"^constraints: must be a list of bounds"),
    ([{"name": "n_param", "max": 1}], r"^constraints\[0\].name: the task digits never reports 'n_param' "
                                       r"\(did you mean 'n_params'\?\)"),
])
def test_a_bad_bound_is_refused_naming_it(constraints, error):
    from tune_service.execution.plan import plan_sweep

    with pytest.raises(SpecError, match=error):
        plan_sweep(load_spec({**BASE, "constraints": constraints}))


def test_a_violation_is_how_far_outside_and_a_missing_or_non_finite_value_is_infinitely_so():
    bound = ConstraintSpec("x", min=1, max=3)
    assert [bound.violation(v) for v in (2, 1, 3, 0, 5)] == [-1, 0, 0, 1, 2]
    assert all(bound.violation(v) == math.inf for v in (None, math.nan, math.inf, "2", True))
