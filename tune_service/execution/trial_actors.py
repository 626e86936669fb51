"""Warm and program trials' Tune actors on the Python workers Ray starts ahead of demand.

Ray keeps idle Python workers ready (one per CPU when it starts), and a task or actor takes one only if
its runtime environment is the job's. Tune (Ray 2.60) registers every trainable's actor class with a
runtime environment of its own, ``{"env_vars": {"PL_DISABLE_FORK": "1"}}`` plus whichever of the
variables it propagates the driver has set (``ray/tune/execution/class_cache.py``), so every trial
actor, and every rank its trial starts (children inherit it), waited for a new Python process to start:
0.8 s of a core each here, while the idle workers stood by.

:func:`trial_actors_on_ready_workers`, around a warm sweep's ``Tuner.fit``, registers the trial actor
class with the job's environment instead whenever Tune would give it nothing but ``PL_DISABLE_FORK``;
the trial and its ranks set that variable in their own processes
(:func:`~tune_service.ray_internals.set_tune_trial_environment`), so what runs there sees the
environment it saw before. With any propagated variable set (AWS credentials,
Ray Train settings), Tune's registration is left as it is.

Tune's class cache is private to Ray; each name used is in :mod:`tune_service.ray_internals`, and a
Tune whose default variables differ from the one variable set here is an error, not a silent change.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Callable, Iterator

from tune_service.ray_internals import TUNE_TRIAL_ENVIRONMENT, RayInternalsChanged, private, replaced


def _registering_without_environment(tune_get: Callable[..., Any]) -> Callable[..., Any]:
    """Tune's ``_ActorClassCache.get`` while a sweep is inside the block: the class registered without a
    runtime environment, unless the driver has a variable Tune propagates (then ``tune_get``, Tune's own)."""

    def get(cache, trainable_cls):
        import ray
        from ray.tune.execution import class_cache

        registered = private(cache, "_cache")
        if trainable_cls not in registered:
            if any(name in os.environ for name in private(class_cache, "ENV_VARS_TO_PROPAGATE")):
                return tune_get(cache, trainable_cls)
            registered[trainable_cls] = ray.remote(trainable_cls)
        return registered[trainable_cls]

    return get


@contextlib.contextmanager
def trial_actors_on_ready_workers() -> Iterator[None]:
    """While the block runs (a warm sweep's ``Tuner.fit``), Tune registers its trial actor classes
    without a runtime environment of their own when the driver has none of the variables Tune
    propagates. Overlapping blocks (sweeps run from threads) leave Tune's registration as it was when the
    last one ends.

    Raises:
        RayInternalsChanged: Tune's class cache is not as Ray 2.60's (names, or default variables).
    """
    import ray
    from ray.tune.execution import class_cache

    defaults = private(class_cache, "DEFAULT_ENV_VARS")
    private(class_cache, "ENV_VARS_TO_PROPAGATE")  # there before any sweep starts, not in its first trial
    cache_class = private(class_cache, "_ActorClassCache")
    if defaults != TUNE_TRIAL_ENVIRONMENT:
        raise RayInternalsChanged(
            f"Ray {ray.__version__}'s Tune gives trial actors {defaults}, not "
            f"{TUNE_TRIAL_ENVIRONMENT} (tune_service.execution.trial_actors)"
        )
    with replaced(cache_class, "get", _registering_without_environment):
        yield
