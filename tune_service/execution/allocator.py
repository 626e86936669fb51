"""glibc's malloc arenas, capped in the processes of a long sweep.

glibc gives threads arenas (heaps) of their own, up to eight a core, and never hands one back: each arena
keeps the most it ever held, so a many-threaded process (a sweep's driver runs Ray's and Tune's threads)
grows with the bursts each arena has seen, not with what it holds. Two arenas (the cap many long-running
services deploy with) keep the allocator parallel enough for a driver and less than halve its growth over
a long sweep (issue 43; the soak's figures are in docs/benchmarks.md). A user's own ``MALLOC_ARENA_MAX``
always wins.
"""

from __future__ import annotations

import ctypes
import os
import platform

#: The arenas a process of the sweep may have.
ARENA_LIMIT = 2
_VARIABLE = "MALLOC_ARENA_MAX"
_M_ARENA_MAX = -8  # mallopt's parameter number (glibc's malloc.h)


def arena_environment() -> dict[str, str]:
    """``MALLOC_ARENA_MAX`` for the processes a local Ray starts (glibc reads it when a process starts);
    nothing where this environment sets it already (those processes inherit the user's value)."""
    return {} if _VARIABLE in os.environ else {_VARIABLE: str(ARENA_LIMIT)}


def cap_arenas() -> bool:
    """Cap this process's arenas at :data:`ARENA_LIMIT`, as ``MALLOC_ARENA_MAX`` would have at its start;
    whether it did. Nothing where the environment sets ``MALLOC_ARENA_MAX`` (glibc has applied it) or the
    C library is not glibc (no arenas to cap). glibc fixes its limit for good once a process has more than
    eight arenas, so call this before the process starts its threads."""
    if _VARIABLE in os.environ or platform.libc_ver()[0] != "glibc":
        return False
    return bool(ctypes.CDLL(None).mallopt(_M_ARENA_MAX, ARENA_LIMIT))
