"""A W&B program's logs as its trial's reports (:class:`ReportRelay`): the scheduler's clock is the count of
the metric's values, as W&B's hyperband counts ``run.metric_history`` (issue 38, 3)."""

from __future__ import annotations

import math

from tune_service.execution.program_trial import ReportRelay
from tune_service.spec.sweep import METRIC_VALUES_KEY


def test_the_clock_counts_values_of_the_metric_not_logs():
    relay = ReportRelay("val_accuracy")
    logs = [{"grad_norm": 1.0, "step": 1}, {"grad_norm": 0.5, "step": 2}, {"val_accuracy": 0.7, "step": 3},
            {"grad_norm": 0.4, "step": 4}, {"val_accuracy": 0.8, "step": 5}]
    reports = [relay.add(log) for log in logs]
    assert reports[:2] == [None, None]  # Tune refuses a report without the sweep's metric: they wait
    assert [r[METRIC_VALUES_KEY] for r in reports[2:]] == [1, 1, 2]
    assert reports[3] == {"grad_norm": 0.4, "val_accuracy": 0.7, "step": 4, METRIC_VALUES_KEY: 1}  # carried on


def test_non_finite_values_are_not_counted_as_wandb_leaves_them_out_of_the_history():
    relay = ReportRelay("loss")
    counts = [relay.add({"loss": value})[METRIC_VALUES_KEY] for value in (1.0, math.nan, math.inf, 0.5)]
    assert counts == [1, 1, 1, 2]


def test_without_a_metric_every_log_is_a_report():
    relay = ReportRelay(None)
    assert relay.add({"metric": 3, "step": 1}) == {"metric": 3, "step": 1, METRIC_VALUES_KEY: 0}
    assert not relay.metric_seen
