"""One driver per experiment, on real locks: a second resume is refused naming the holder, before Ray
starts; the lock of a driver that was killed is taken over."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from tune_service import cli
from tune_service.experiment.layout import write_sweep_file
from tune_service.experiment.lock import LOCK_FILE, DriverLock, ExperimentLocked

HOLD = """
import sys, time
from tune_service.experiment.lock import DriverLock
DriverLock(sys.argv[1]).acquire()
print("held", flush=True)
time.sleep(600)
"""


def hold_in_another_process(directory) -> subprocess.Popen:
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(directory)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline() == "held\n"
    return holder


def test_a_second_resume_is_refused_naming_the_holder(tmp_path, capsys, forbid_ray_start):
    write_sweep_file(tmp_path, {"method": "random", "parameters": {"lr": {"value": 0.1}}}, None)
    holder = hold_in_another_process(tmp_path)
    try:
        assert cli.main(["--resume", str(tmp_path)]) == cli.EXIT_USAGE
        err = capsys.readouterr().err
        assert err.startswith(f"error: experiment: {str(tmp_path.resolve())!r} is being run by another driver "
                              f"(pid {holder.pid} on ")
        assert err.count("\n") == 1
    finally:
        holder.kill()
        holder.wait()


def test_the_lock_of_a_killed_driver_is_taken_over(tmp_path):
    holder = hold_in_another_process(tmp_path)
    with pytest.raises(ExperimentLocked):
        DriverLock(tmp_path).acquire()
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    lock = DriverLock(tmp_path).acquire()  # the kernel released the dead holder's lock
    try:
        assert f"pid {os.getpid()} on " in lock.holder()
        assert (tmp_path / LOCK_FILE).is_file()
    finally:
        lock.release()
    DriverLock(tmp_path).acquire().release()  # released: free again
