"""The malloc arena cap: a process that calls :func:`cap_arenas` before its threads start has at most
:data:`ARENA_LIMIT` arenas however many threads allocate at once; one that does not has an arena a thread;
a user's ``MALLOC_ARENA_MAX`` wins. Each case runs in a process of its own (glibc fixes the limit for good)
and counts its arenas from glibc's own ``malloc_info``."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

from tune_service.execution.allocator import ARENA_LIMIT, arena_environment

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="arenas are glibc's")

#: Sixteen threads alive together, each allocating: glibc gives each new thread an arena of its own until
#: the limit. Prints whether it capped, then the arenas (``<heap nr=...>`` in malloc_info's XML).
COUNT_ARENAS = """
import ctypes, sys, tempfile, threading
from tune_service.execution.allocator import cap_arenas
capped = cap_arenas() if sys.argv[1] == "cap" else False
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
libc.fopen.restype = ctypes.c_void_p
libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
libc.fclose.argtypes = [ctypes.c_void_p]
together = threading.Barrier(16)
def allocate():
    block = libc.malloc(4096)
    together.wait()
    libc.free(block)
threads = [threading.Thread(target=allocate) for _ in range(16)]
for t in threads: t.start()
for t in threads: t.join()
with tempfile.NamedTemporaryFile(suffix=".xml") as report:
    stream = libc.fopen(report.name.encode(), b"w")
    libc.malloc_info(0, stream)
    libc.fclose(stream)
    print(capped, open(report.name).read().count("<heap nr="))
"""


def arenas(mode: str, **environment: str) -> tuple[bool, int]:
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"} | environment
    out = subprocess.run([sys.executable, "-c", COUNT_ARENAS, mode], env=env, capture_output=True, text=True,
                         check=True, timeout=60).stdout.split()
    return out[0] == "True", int(out[1])


def test_a_capped_process_has_at_most_the_limits_arenas_however_many_threads_allocate():
    capped, count = arenas("cap")
    assert capped and 1 <= count <= ARENA_LIMIT


def test_an_uncapped_process_has_more_arenas_than_the_limit():
    capped, count = arenas("none")
    assert not capped and count > ARENA_LIMIT  # what the cap prevents: an arena a thread, up to 8 a core


def test_a_users_malloc_arena_max_wins():
    capped, count = arenas("cap", MALLOC_ARENA_MAX="4")
    assert not capped and ARENA_LIMIT < count <= 4


def test_the_environment_for_rays_processes_caps_them_unless_the_user_chose(monkeypatch):
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    assert arena_environment() == {"MALLOC_ARENA_MAX": str(ARENA_LIMIT)}
    monkeypatch.setenv("MALLOC_ARENA_MAX", "8")
    assert arena_environment() == {}
