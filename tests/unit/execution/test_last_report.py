"""A trial function returns only once Tune has taken its DDP job's last report
(:func:`tune_service.execution.fresh_trial.wait_for_tune_to_take_the_last_report`), without Ray running.

The session stands in for Ray 2.60's ``_TrainSession``: its two one-slot queues, and a thread playing
the trial actor's main thread, which moves the last report from the first queue to the second and
then hands it to Tune.
"""

from __future__ import annotations

import queue
import threading
import time
from types import SimpleNamespace

import pytest

from tune_service.execution.fresh_trial import wait_for_tune_to_take_the_last_report
from tune_service.ray_internals import RayInternalsChanged


def test_the_trial_function_waits_until_the_last_report_has_been_taken():
    session = SimpleNamespace(_inter_actor_queue=queue.Queue(1), result_queue=queue.Queue(1))
    session._inter_actor_queue.put({"epoch": 2})  # the controller's last report, not yet moved on
    taken = []

    def main_thread():
        time.sleep(0.3)  # busy with Tune's previous request
        session.result_queue.put(session._inter_actor_queue.get())
        time.sleep(0.1)
        taken.append(session.result_queue.get())

    mover = threading.Thread(target=main_thread)
    mover.start()
    wait_for_tune_to_take_the_last_report(session, timeout_s=10)
    assert taken == [{"epoch": 2}]  # had the function returned earlier, Ray's marker would have blocked it
    assert session.result_queue.empty() and session._inter_actor_queue.empty()
    mover.join()


def test_a_report_never_taken_ends_the_wait_with_a_warning(caplog):
    session = SimpleNamespace(_inter_actor_queue=queue.Queue(1), result_queue=queue.Queue(1))
    session._inter_actor_queue.put({"epoch": 2})
    wait_for_tune_to_take_the_last_report(session, timeout_s=0.3)
    assert "has not taken the trial's last report" in caplog.text


def test_a_session_without_the_queues_is_an_error_naming_them():
    with pytest.raises(RayInternalsChanged, match=r"_TrainSession\._inter_actor_queue \(used in execution\.fresh_trial"):
        wait_for_tune_to_take_the_last_report(SimpleNamespace(), timeout_s=1000)  # a Ray without them: said


def test_ray_still_relays_reports_through_the_two_queues_waited_on():
    import inspect

    from ray.train._internal.session import _TrainSession

    source = inspect.getsource(_TrainSession)
    assert "self.result_queue = queue.Queue(1)" in source
    assert "self._inter_actor_queue = ray_queue.Queue(1" in source  # else the wait above waits on nothing
