"""The supervisor between a rank's actor and its program (``tune_service/programs/supervise.py``), run as
the actor runs it, on real processes: it records the program's exit code, ends the program when its pipe
closes (SIGTERM, SIGKILL after the grace period), and leaves nothing of the program's group behind."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tune_service.programs.rank import SUPERVISOR


def supervise(tmp_path: Path, program: str, grace_s: float = 5.0) -> tuple[int, int]:
    """Start ``program`` (Python source) under the supervisor as the rank actor does; its process group
    and the write end of its pipe."""
    read_fd, end_fd = os.pipe()
    first = subprocess.Popen([sys.executable, "-I", "-S", str(SUPERVISOR), str(tmp_path / "exit"), str(grace_s),
                              str(read_fd), "--", sys.executable, "-c", program],
                             cwd=tmp_path, start_new_session=True, pass_fds=(read_fd,))
    os.close(read_fd)
    assert first.wait(timeout=10) == 0  # it forked the supervisor and ended at once
    return first.pid, end_fd


def exit_code(tmp_path: Path, timeout_s: float = 30.0) -> int:
    deadline = time.monotonic() + timeout_s
    while not (tmp_path / "exit").exists():
        assert time.monotonic() < deadline, "the supervisor recorded no exit code"
        time.sleep(0.05)
    return int((tmp_path / "exit").read_text())


def group_ended(group: int, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_a_program_that_ends_by_itself_has_its_exit_code_recorded_and_its_leftovers_killed(tmp_path):
    # the program leaves a process running in its group, as a program's stray helper would
    group, end_fd = supervise(tmp_path, "import subprocess, sys; subprocess.Popen(['sleep', '600']); sys.exit(3)")
    try:
        assert exit_code(tmp_path) == 3
        assert group_ended(group)  # the sleeper went with the supervisor
    finally:
        os.close(end_fd)


@pytest.mark.parametrize("how", ["closed", "actor gone"])
def test_a_closed_pipe_ends_the_program_with_sigterm_first(tmp_path, how):
    program = ("import signal, sys, time, pathlib\n"
               "def stop(*_):\n    pathlib.Path('stopped').write_text('cleanly'); sys.exit(0)\n"
               "signal.signal(signal.SIGTERM, stop)\npathlib.Path('started').touch()\ntime.sleep(600)\n")
    if how == "closed":
        group, end_fd = supervise(tmp_path, program)
    else:  # the pipe's write end dies with the process holding it, as with a killed Ray actor
        holder = subprocess.Popen([sys.executable, "-c", (
            "import os, subprocess, sys, time\nr, w = os.pipe()\n"
            f"p = subprocess.Popen([sys.executable, '-I', '-S', {str(SUPERVISOR)!r}, 'exit', '5', str(r), '--', "
            f"sys.executable, '-c', {program!r}], start_new_session=True, pass_fds=(r,))\n"
            "print(p.pid, flush=True); p.wait(); time.sleep(600)\n")], cwd=tmp_path, stdout=subprocess.PIPE)
        group, end_fd = int(holder.stdout.readline()), None
    deadline = time.monotonic() + 30
    while not (tmp_path / "started").exists():
        assert time.monotonic() < deadline, "the program never started"
        time.sleep(0.05)
    if end_fd is not None:
        os.close(end_fd)
    else:
        holder.kill()
        holder.wait()
    assert exit_code(tmp_path) == 0
    assert (tmp_path / "stopped").read_text() == "cleanly"
    assert group_ended(group)


def test_a_program_that_ignores_sigterm_is_killed_after_the_grace_period(tmp_path):
    program = ("import signal, time, pathlib\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
               "pathlib.Path('started').touch()\ntime.sleep(600)\n")
    group, end_fd = supervise(tmp_path, program, grace_s=0.5)
    deadline = time.monotonic() + 30
    while not (tmp_path / "started").exists():
        assert time.monotonic() < deadline, "the program never started"
        time.sleep(0.05)
    os.close(end_fd)
    assert exit_code(tmp_path) == -9
    assert group_ended(group)
