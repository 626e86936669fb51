"""Start-up imports with the cyclic garbage collector paused: paused only inside the block, resumed after
it whatever ends it (never resumed when it was off before), and what the block made frozen; a new rank's
start imports torch and torch's compiler that way and leaves the collector running."""

from __future__ import annotations

import gc
import os
import subprocess
import sys

import pytest

from tune_service.execution.startup import collector_paused


@pytest.fixture
def unfrozen():
    """Nothing in the permanent generation when the test starts (a sweep run in this process by an earlier
    test froze its start-up), and the test's own frozen objects thawed again afterwards."""
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_the_collector_is_paused_inside_the_block_and_what_lives_is_frozen_after_it(unfrozen):
    assert gc.isenabled() and gc.get_freeze_count() == 0
    with collector_paused():
        assert not gc.isenabled()
        made_inside = [[] for _ in range(1000)]  # lists: objects the collector tracks
    assert gc.isenabled()
    assert gc.get_freeze_count() >= len(made_inside)


def test_the_collector_runs_again_after_an_error_inside_the_block(unfrozen):
    with pytest.raises(KeyError), collector_paused():
        raise KeyError("x")
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off(unfrozen):
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


#: A rank as its actor starts (without Ray): torch's compiler imported, the collector running, torch frozen.
NEW_RANK = ("import gc, sys; from tune_service.execution.rank import RankWorker; RankWorker(0, 1, 'gloo', 60.0); "
            "print(gc.isenabled(), 'torch._dynamo' in sys.modules, gc.get_freeze_count() > 100000)")


def test_a_new_rank_has_imported_torchs_compiler_and_its_collector_runs(tmp_path):
    done = subprocess.run([sys.executable, "-c", NEW_RANK], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "TMPDIR": str(tmp_path)})  # the rank's scratch directory
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True", "True", "True"]
