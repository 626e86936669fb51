"""Warm trials' actors registered without Tune's runtime environment: only inside the block, and never
on a Tune whose default trial environment is not the one the trials set themselves. (That the trials'
processes then start in the job's environment, with Tune's variable set, is tested on a real sweep:
tests/integration/test_sweeps.py.)"""

from __future__ import annotations

import pytest
from ray.tune.execution import class_cache

from tune_service.execution.trial_actors import trial_actors_on_ready_workers
from tune_service.ray_internals import RayInternalsChanged


def test_tunes_registration_is_back_after_the_block_whatever_ends_it():
    tunes = class_cache._ActorClassCache.get
    with trial_actors_on_ready_workers():
        assert class_cache._ActorClassCache.get is not tunes
    assert class_cache._ActorClassCache.get is tunes
    with pytest.raises(KeyboardInterrupt), trial_actors_on_ready_workers():
        raise KeyboardInterrupt
    assert class_cache._ActorClassCache.get is tunes


def test_a_tune_with_other_default_trial_variables_is_an_error_naming_them(monkeypatch):
    monkeypatch.setattr(class_cache, "DEFAULT_ENV_VARS", {"PL_DISABLE_FORK": "1", "SOMETHING_NEW": "1"})
    with pytest.raises(RayInternalsChanged, match="SOMETHING_NEW"), trial_actors_on_ready_workers():
        pass
    assert class_cache._ActorClassCache.get.__module__ == class_cache.__name__


def test_overlapping_sweeps_leave_tunes_registration_as_it_was_whichever_ends_first():
    tunes = class_cache._ActorClassCache.get
    first, second = trial_actors_on_ready_workers(), trial_actors_on_ready_workers()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)  # the sweep that started first ends first
    assert class_cache._ActorClassCache.get is not tunes  # the other still runs with it
    second.__exit__(None, None, None)
    assert class_cache._ActorClassCache.get is tunes
