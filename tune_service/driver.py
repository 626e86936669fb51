"""The driver: ``build_tuner(plan)`` is pure (no ``ray.init``, no ``fit``, no file written); ``run`` is
the one place with side effects: it connects to (or starts) Ray, runs the Tuner, and writes the results.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from tune_service import registry, results
from tune_service.errors import TuneServiceError
from tune_service.plan import SweepPlan, make_plan
from tune_service.resources import from_ray
from tune_service.spec import SweepSpec, load_spec
from tune_service.trial import DRIVER_RESOURCES, TrialTemplate

DEFAULT_STORAGE = "experiments"


def experiment_name(spec: SweepSpec) -> str:
    """The default experiment name: the sweep's name and the start time, so runs never collide."""
    return f"{spec.name}-{time.strftime('%Y%m%d-%H%M%S')}"


@dataclass(frozen=True)
class TunerRecipe:
    """Everything a Ray Tune ``Tuner`` is made of, before it exists. ``create()`` makes the Tuner, which
    writes the experiment directory (Ray's constructor saves ``tuner.pkl`` there)."""

    trainable: Any
    param_space: dict[str, Any]
    tune_config: Any
    run_config: Any

    def create(self):
        from ray import tune

        return tune.Tuner(self.trainable, param_space=self.param_space, tune_config=self.tune_config,
                          run_config=self.run_config)


def build_tuner(plan: SweepPlan, storage: str | os.PathLike, name: str, callbacks: list | None = None,
                verbose: int = 1) -> TunerRecipe:
    """The recipe of the Ray Tune ``Tuner`` for ``plan``. Pure: it starts no Ray and writes no file.

    Args:
        storage: the directory (or URI) that holds experiments; the experiment is ``storage/name``.
        callbacks: Tune callbacks (progress, logging) added to the run.
    """
    from ray import tune
    from ray.tune.search import Searcher

    spec = plan.spec
    searcher, param_space, _ = registry.build_searcher(spec, plan.max_concurrent)
    template = TrialTemplate(task=plan.task, epochs=spec.scheduler.max_t, seed=spec.seed, resources=spec.resources,
                             training=spec.training)

    def run_trial(config: dict[str, Any]) -> None:
        template(config)

    tune_config = tune.TuneConfig(
        metric=spec.metric.name,
        mode=spec.metric.mode,
        search_alg=searcher,
        scheduler=registry.build_scheduler(spec),
        num_samples=plan.num_trials,
        # A Searcher is capped here; the BasicVariantGenerator was given its cap when it was built.
        max_concurrent_trials=plan.max_concurrent if isinstance(searcher, Searcher) else None,
        trial_dirname_creator=lambda trial: f"trial_{trial.trial_id}",
    )
    run_config = tune.RunConfig(
        name=name,
        storage_path=str(Path(storage).resolve()) if "://" not in str(storage) else str(storage),
        callbacks=callbacks or [],
        verbose=verbose,
    )
    return TunerRecipe(tune.with_resources(run_trial, DRIVER_RESOURCES), param_space, tune_config, run_config)


def run(spec: str | os.PathLike | Mapping[str, Any] | SweepSpec, *, address: str | None = None,
        storage: str | os.PathLike = DEFAULT_STORAGE, name: str | None = None, task: Any = None,
        overrides: Mapping[str, Any] | None = None, verbose: int = 1, **more_overrides: Any) -> results.SweepResult:
    """Run a sweep to the end and return its :class:`~tune_service.results.SweepResult`.

    Args:
        spec: a spec file path, a dict in the spec format, or a loaded :class:`SweepSpec`.
        address: a Ray cluster to connect to (``auto`` or ``HOST:PORT``); ``None`` starts an embedded
            local Ray (or uses the one this process already started).
        storage: where experiments are written; the experiment directory is ``storage/name``.
        name: the experiment name; by default the spec's name and the start time.
        task: a Task object or train function to use instead of the spec's ``task`` string.
        overrides / more_overrides: dotted spec keys to set, e.g. ``run_cap=4`` or
            ``overrides={"scheduler.max_t": 3}``.

    Raises:
        TuneServiceError: the spec is invalid, the task cannot be used, or a trial cannot fit the cluster.
    """
    import ray

    if not isinstance(spec, SweepSpec):
        spec = load_spec(spec, {**(overrides or {}), **more_overrides})
    elif overrides or more_overrides:
        raise TuneServiceError("overrides: apply them when loading the spec (load_spec(path, overrides))")
    name = name or experiment_name(spec)
    experiment_dir = _experiment_dir(storage, name)

    started_here = not ray.is_initialized()
    if started_here:
        init_ray(address)
    try:
        plan = make_plan(spec, from_ray(), task=task)
        grid = build_tuner(plan, storage, name, verbose=verbose).create().fit()
        outcome = results.collect(grid, str(experiment_dir), spec.metric.name, spec.metric.mode, spec.scheduler.max_t)
        results.write(outcome)
        return outcome
    finally:
        if started_here:
            ray.shutdown()


def _experiment_dir(storage: str | os.PathLike, name: str) -> Path:
    path = Path(storage).resolve() / name
    if path.exists() and any(path.iterdir()):
        raise TuneServiceError(f"name: experiment directory {str(path)!r} already exists and is not empty; "
                               f"choose another --name (a finished trial is never overwritten)")
    return path


def init_ray(address: str | None = None, num_cpus: int | None = None) -> None:
    """Connect to the Ray cluster at ``address``, or start an embedded local Ray bound to loopback.

    The embedded Ray's workers get this process's ``sys.path``, so a task module the driver can
    import (``mypkg.tasks:MyTask``) imports on every rank too; Ray itself passes on only the script's
    directory and the working directory.
    """
    import ray

    if address:
        ray.init(address=address, logging_level=logging.WARNING)
        return
    search_path = os.pathsep.join(p for p in sys.path if p and os.path.isdir(p))
    ray.init(
        address="local",
        num_cpus=num_cpus,
        include_dashboard=True,  # Ray Train's placement-group cleanup uses the state API it serves
        dashboard_host="127.0.0.1",
        logging_level=logging.WARNING,
        runtime_env={"env_vars": {"PYTHONPATH": search_path}},
    )
