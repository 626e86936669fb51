"""One driver per experiment: the driver running (or resuming) a sweep holds a lock on its experiment
directory, so a second ``--resume`` of the same experiment is refused instead of both writing its
state.

The lock is an advisory ``flock`` on ``EXPERIMENT_DIR/.driver.lock`` (:data:`LOCK_FILE`), held while
the driver runs. The kernel releases it when the holder's process ends, however it ends (a SIGKILL
too), so a lock left by a dead driver is simply taken over. The file says who holds it (host, pid,
since when), for the refusal's message. ``flock`` holds between processes of one host; on a shared
filesystem it holds across hosts only where the filesystem supports it (NFSv4 does).
"""

from __future__ import annotations

import datetime
import fcntl
import json
import os
import socket
from pathlib import Path

from tune_service.errors import TuneServiceError

LOCK_FILE = ".driver.lock"


class ExperimentLocked(TuneServiceError):
    """Another driver is running this experiment."""


class DriverLock:
    """The lock of one experiment directory. ``acquire`` creates the directory if needed."""

    def __init__(self, experiment_dir: str | os.PathLike):
        self.path = Path(experiment_dir) / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> "DriverLock":
        """Take the lock, or refuse.

        Raises:
            ExperimentLocked: another process holds it (its host, pid and start are in the message).
        """
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise ExperimentLocked(
                f"experiment: {str(self.path.parent)!r} is being run by another driver "
                f"({self.holder()}); stop it first, or wait for it to end"
            ) from None
        holder = {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "since": datetime.datetime.now().isoformat(timespec="seconds"),
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(holder).encode(), 0)
        self._fd = fd
        return self

    def holder(self) -> str:
        """Who holds the lock, as its file says."""
        try:
            held = json.loads(self.path.read_text(encoding="utf-8"))
            return f"pid {held['pid']} on {held['host']} since {held['since']}"
        except (OSError, ValueError, KeyError, TypeError):
            return "a process that has not yet said who it is"

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
