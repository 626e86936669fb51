"""How a sweep stops when its driver is told to: SIGTERM, as launchers send it.

GNU ``timeout``, Slurm's ``scancel``, ``docker stop`` and a pod's termination send SIGTERM, often to the
driver's whole process group, and give it a grace period (``docker stop``: 10 s, Kubernetes: 30 s) before
SIGKILL. While Tune runs (:class:`Termination`):

- SIGTERM stops the sweep as Ctrl+C does: Tune finishes its step and saves the experiment's state, the
  running trials are left ``interrupted``, the summary records what finished, and ``resume`` continues.
  The outcome says so (:data:`~tune_service.results.sweep_result.SIGNAL_KEY`): ``tune-run`` exits 143,
  as for SIGTERM (130 for Ctrl+C).
- A signal to the whole process group ends the embedded Ray with the driver (Ray's processes block
  SIGINT, not SIGTERM), and Tune would then wait a minute on Ray's dead control store before its process
  dies, writing nothing. So after a SIGTERM the driver watches: once the Ray it drives no longer
  answers, or ``grace_s`` has passed, it does not wait on Tune. It writes the summary from what it has
  seen (the ended trials as they ended, the running ones ``interrupted``), prints the resume line, and
  exits 143 at once. Tune's experiment state is its newest complete copy
  (:mod:`~tune_service.experiment.last_good`), as after a driver that was SIGKILLed: the resume is the
  same, and no finished trial is lost or rerun.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
import time
from typing import Callable

from tune_service.results.progress import SweepProgress
from tune_service.results.sweep_result import SIGNAL_KEY, write

#: How long after SIGTERM the driver waits for Tune to stop while Ray still answers (inside the 30 s
#: that launchers commonly give, with time for Ray's own shutdown).
STOP_GRACE_S = 20.0
#: How often the watch looks at Ray and at the clock.
WATCH_PERIOD_S = 0.2


def gcs_answers() -> bool:
    """Whether the Ray cluster this process is connected to still accepts connections at its control
    store (GCS): a refused or timed-out connection means it is gone."""
    import ray

    host, _, port = ray.get_runtime_context().gcs_address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=1.0):
            return True
    except OSError:
        return False


class Termination:
    """While the block runs (in the main thread; elsewhere signals are not ours), SIGTERM ends the sweep
    as described above. ``signal_name`` says which signal, if any, ended it."""

    def __init__(
        self,
        progress: SweepProgress,
        resume_hint: str,
        ray_answers: Callable[[], bool] = gcs_answers,
        grace_s: float = STOP_GRACE_S,
    ):
        self.progress, self.resume_hint = progress, resume_hint
        self.ray_answers, self.grace_s = ray_answers, grace_s
        self.signal_name: str | None = None
        self._finished = threading.Event()
        self._previous: object = None  # the SIGTERM handler put back at the end
        self._installed = False  # whether ours is in place (the main thread's only)

    def __enter__(self) -> "Termination":
        if threading.current_thread() is threading.main_thread():
            # Installed after ray.init, whose own SIGTERM handler exits at once.
            self._previous, self._installed = signal.signal(signal.SIGTERM, self._on_sigterm), True
        return self

    def __exit__(self, *exc: object) -> None:
        self._finished.set()
        if self._installed:  # a handler Python did not install (None) is put back as the default
            signal.signal(signal.SIGTERM, self._previous or signal.SIG_DFL)  # type: ignore[arg-type]
            self._installed = False

    def _on_sigterm(self, signum: int, frame: object) -> None:
        if self.signal_name != "SIGTERM":
            self.signal_name = "SIGTERM"
            threading.Thread(target=self._watch, name="tune-service-termination", daemon=True).start()
        signal.raise_signal(signal.SIGINT)  # Tune's own stop: state saved, trials interrupted

    def _watch(self) -> None:
        deadline = time.monotonic() + self.grace_s
        while not self._finished.wait(WATCH_PERIOD_S):
            if not self.ray_answers():
                self._abandon("Ray stopped with the driver")
            if time.monotonic() > deadline:
                self._abandon(f"Tune did not stop within {self.grace_s:g} s")

    def _abandon(self, why: str) -> None:
        """Write what the driver knows and exit 143, not waiting on Tune or on Ray."""
        outcome = None
        for _ in range(5):  # Tune's thread may be changing the trials at this moment
            try:
                outcome = self.progress.interrupted()
                break
            except RuntimeError:
                time.sleep(0.05)
        if outcome is not None:
            outcome.extra[SIGNAL_KEY] = "SIGTERM"
            try:
                write(outcome)
            except OSError as err:
                print(f"error: could not write the summary ({err})", file=sys.stderr)
        print(f"\nterminated (SIGTERM; {why}): {self.resume_hint}", flush=True)
        sys.stderr.flush()
        os._exit(128 + signal.SIGTERM)
