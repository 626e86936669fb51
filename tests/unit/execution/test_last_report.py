"""A fresh trial's function returns only once it has handed every report of its Ray Train run to Tune
(:func:`tune_service.execution.fresh_trial.relay_reports`), without Ray running.

The run stands in for Ray Train's controller: its relay callback puts each report in the queue, the
last one just before the run returns, which is the moment Ray's own relay could lose (and hang on).
"""

from __future__ import annotations

import queue
import threading
import time

import pytest

from tune_service.execution.fresh_trial import relay_reports


def test_every_report_is_handed_over_in_order_before_the_function_returns_even_the_last_ones():
    reports, handed, run_ended = queue.Queue(), [], threading.Event()

    def fit():
        for epoch in (1, 2, 3):
            reports.put({"epoch": epoch})
        run_ended.set()  # the run ends with two reports still queued

    def report(metrics):  # Tune is slow to take the first report: the run ends meanwhile
        handed.append(metrics)
        if metrics["epoch"] == 1:
            run_ended.wait(10)
            time.sleep(0.1)

    relay_reports(fit, reports, report, poll_s=0.01)
    assert handed == [{"epoch": 1}, {"epoch": 2}, {"epoch": 3}]
    assert reports.empty()


def test_reports_reach_tune_while_the_run_goes_on():
    reports, handed, seen_during_the_run = queue.Queue(), [], threading.Event()

    def report(metrics):
        handed.append(metrics)
        seen_during_the_run.set()

    def fit():
        reports.put({"epoch": 1})
        assert seen_during_the_run.wait(10), "the first report waited for the run to end"

    relay_reports(fit, reports, report, poll_s=0.01)
    assert handed == [{"epoch": 1}]


def test_the_runs_error_is_raised_after_its_reports_are_handed_over():
    reports, handed = queue.Queue(), []

    def fit():
        reports.put({"epoch": 1})
        raise RuntimeError("rank 1 died")

    with pytest.raises(RuntimeError, match="rank 1 died"):
        relay_reports(fit, reports, handed.append, poll_s=10)
    assert handed == [{"epoch": 1}]


def test_a_ray_queue_ends_the_relay_as_a_stdlib_queue_does():
    from ray.util.queue import Empty

    assert issubclass(Empty, queue.Empty)  # relay_reports waits on ray.util.queue.Queue with queue.Empty
