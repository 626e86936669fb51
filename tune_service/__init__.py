"""tune-service: hyperparameter sweeps of PyTorch DDP trials on Ray Tune.

Public API::

    import tune_service
    result = tune_service.run("search_spaces/quickstart.yaml", run_cap=4)
    result.best_config, result.best_metrics, result.trials
    tune_service.resume("experiments/quickstart-20261122-101500")   # finish an interrupted sweep
    results = tune_service.load_results("experiments/quickstart-20261122-101500")  # finished or running
    results.trials, results.history            # pandas DataFrames: one row per trial, per report
    results.best, results.best_checkpoint, results.load_best_model(), results.best_spec("best.yaml")
    job = tune_service.submit("sweep.yaml", "http://HEAD:8265", storage="/shared/experiments")  # a Ray Job
    job.status(), job.logs(), job.wait(), job.stop(), job.results()

The names are imported on first use, so that ``import tune_service.spec`` (and ``tune-run --help``)
does not pay for torch and Ray. ARCHITECTURE.md maps the subpackages.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: Public name -> (module, name in that module).
_EXPORTS = {
    "run": ("tune_service.execution.driver", "run"),
    "resume": ("tune_service.execution.driver", "resume"),
    "build_tuner": ("tune_service.execution.driver", "build_tuner"),
    "submit": ("tune_service.jobs", "submit"),
    "attach": ("tune_service.jobs", "attach"),
    "SweepJob": ("tune_service.jobs", "SweepJob"),
    "load_spec": ("tune_service.spec.reading", "load_spec"),
    "SweepSpec": ("tune_service.spec.sweep", "SweepSpec"),
    "TrainingSettings": ("tune_service.spec.training", "TrainingSettings"),
    "make_plan": ("tune_service.execution.plan", "make_plan"),
    "SweepPlan": ("tune_service.execution.plan", "SweepPlan"),
    "load_results": ("tune_service.results.analysis", "load_results"),
    "SweepResults": ("tune_service.results.analysis", "SweepResults"),
    "SweepResult": ("tune_service.results.sweep_result", "SweepResult"),
    "TrialRecord": ("tune_service.results.sweep_result", "TrialRecord"),
    "Task": ("tune_service.tasks.base", "Task"),
    "load_model": ("tune_service.training.checkpoint", "load_model"),
    "LocalContext": ("tune_service.training.context", "LocalContext"),
    "TuneServiceError": ("tune_service.errors", "TuneServiceError"),
    "SpecError": ("tune_service.errors", "SpecError"),
    "CapacityError": ("tune_service.errors", "CapacityError"),
    "TaskError": ("tune_service.errors", "TaskError"),
    "Problem": ("tune_service.errors", "Problem"),
}

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    try:
        module, attribute = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'tune_service' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value  # once imported, a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])


if TYPE_CHECKING:  # for type checkers and editors: the same names, imported eagerly
    from tune_service.errors import CapacityError, Problem, SpecError, TaskError, TuneServiceError
    from tune_service.execution.driver import build_tuner, resume, run
    from tune_service.execution.plan import SweepPlan, make_plan
    from tune_service.jobs import SweepJob, attach, submit
    from tune_service.results.analysis import SweepResults, load_results
    from tune_service.results.sweep_result import SweepResult, TrialRecord
    from tune_service.spec import SweepSpec, load_spec
    from tune_service.spec.training import TrainingSettings
    from tune_service.tasks.base import Task
    from tune_service.training.checkpoint import load_model
    from tune_service.training.context import LocalContext
