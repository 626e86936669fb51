"""A process's start-up imports (torch, Ray Tune) with Python's cyclic garbage collector paused.

Importing torch and Ray Tune makes a few hundred thousand objects, none of them garbage, and the
collector walks them over and over while they are being made: torch and its compiler import in 1.8 s
without it against 2.1 s with it, and the driver's modules (torch, Ray Tune) in 2.5 s against 2.8 s, on
a 2-core machine. Both are on the path to a sweep's first batch: the driver's before Tune starts, a new
gang's ranks before their first trial. What such an import makes lives as long as the process, so it
is frozen afterwards (``gc.freeze``): later collections, one at every trial's end on a rank, no longer
walk it.
"""

from __future__ import annotations

import contextlib
import gc
from typing import Iterator


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for the ``with`` block; at its end (an exception's too), freeze
    what is alive (``gc.freeze``: kept out of later collections; reference counting still frees it) and
    resume the collector, if it was running before.

    For a process's start-up in processes of the service's own (the command line's driver, a rank):
    what a frozen object references is never collected as a cycle, so it is not for a user's process.
    """
    running = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if running:
            gc.enable()
