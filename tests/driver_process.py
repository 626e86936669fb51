"""A sweep's driver run as its own process (``python -m tune_service.cli SPEC``), to be signalled."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import psutil

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Signalled:
    returncode: int | None
    output: str
    #: The driver's descendants (its embedded Ray, the trials' ranks) when the signal was sent.
    descendants: list[psutil.Process]
    #: Seconds from the signal to the driver's end (None: never signalled).
    ended_s: float | None = None


def signal_driver_when(spec: Path, storage: Path | str, name: str, ready: Callable[[], bool], signum: int,
                       timeout: float = 300, env: dict[str, str] | None = None, group: bool = False) -> Signalled:
    """Run the driver of ``spec`` (tests/ on its path, for the recording tasks; ``env`` added to its
    environment), send it ``signum`` once ``ready()`` holds (polled every 0.2 s), and wait for it to end.
    It is killed if it is still running. ``group``: the driver leads a process group of its own, and the
    signal goes to the whole group (as GNU ``timeout`` and Slurm send it): its embedded Ray's processes too."""
    env = {**os.environ, **(env or {}),
           "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")])}
    driver = subprocess.Popen([sys.executable, "-m", "tune_service.cli", str(spec), "--storage", str(storage),
                               "--name", name], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              start_new_session=group)
    # Read as it comes: a driver that writes more than the pipe holds (64 KiB) before the signal would
    # otherwise block on its next write, and never become ready.
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(driver.stdout), daemon=True)  # type: ignore[arg-type]
    reader.start()
    descendants, signalled_at = [], None
    try:
        deadline = time.monotonic() + timeout
        while driver.poll() is None and time.monotonic() < deadline:
            if ready():
                descendants = psutil.Process(driver.pid).children(recursive=True)
                signalled_at = time.monotonic()
                if group:
                    os.killpg(driver.pid, signum)
                else:
                    driver.send_signal(signum)
                break
            time.sleep(0.2)
        driver.wait(timeout=240)
    finally:
        if driver.poll() is None:
            driver.send_signal(signal.SIGKILL)
            driver.wait()
        reader.join(timeout=60)  # the pipe ends once every process holding it has (Ray's too)
    ended_s = None if signalled_at is None else time.monotonic() - signalled_at
    return Signalled(driver.returncode, "".join(lines), descendants, ended_s)


def command_line(process: psutil.Process) -> str:
    """The process's command line ('' once it has ended); Ray's processes put their role there."""
    try:
        return " ".join(process.cmdline())
    except psutil.Error:
        return ""


def still_running(processes: list[psutil.Process], timeout: float) -> list[str]:
    """The command lines of ``processes`` still running after up to ``timeout`` s (a zombie has ended:
    with its parent gone, nothing in this container may reap it)."""
    deadline = time.monotonic() + timeout
    while True:
        running = []
        for process in processes:
            try:
                if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                    running.append(command_line(process)[:120])
            except psutil.Error:
                pass
        if not running or time.monotonic() >= deadline:
            return running
        time.sleep(0.5)


class ExitWatch(threading.Thread):
    """:func:`still_running` of ``processes`` with ``timeout``, in a thread started now: the same check from
    the same moment, read later (``left``, once joined). See the ``expect_exit`` fixture."""

    def __init__(self, processes: list[psutil.Process], timeout: float, what: str):
        super().__init__(name=f"exit-watch {what}", daemon=True)
        self.processes, self.timeout, self.what = processes, timeout, what
        self.left: list[str] | None = None
        self.start()

    def run(self) -> None:
        self.left = still_running(self.processes, self.timeout)
