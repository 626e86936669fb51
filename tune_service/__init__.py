"""tune-service: hyperparameter sweeps of PyTorch DDP trials on Ray Tune.

Public API::

    import tune_service
    result = tune_service.run("search_spaces/quickstart.yaml", run_cap=4)
    result.best_config, result.best_metrics, result.trials
    tune_service.resume("experiments/quickstart-20261122-101500")   # finish an interrupted sweep
    job = tune_service.submit("sweep.yaml", "http://HEAD:8265", storage="/shared/experiments")  # a Ray Job
    job.status(), job.logs(), job.wait(), job.stop(), job.results()
"""

from tune_service.driver import build_tuner, resume, run
from tune_service.jobs import SweepJob, attach, submit
from tune_service.errors import CapacityError, Problem, SpecError, TaskError, TuneServiceError
from tune_service.plan import SweepPlan, make_plan
from tune_service.results import SweepResult, TrialRecord
from tune_service.results import load as load_results
from tune_service.spec import SweepSpec, load_spec
from tune_service.tasks import Task
from tune_service.training import LocalContext, TrainingSettings, load_model

__version__ = "0.1.0"

__all__ = [
    "run", "resume", "submit", "attach", "SweepJob", "load_spec", "make_plan", "build_tuner", "load_results", "load_model", "Task", "LocalContext",
    "TrainingSettings",
    "SweepSpec", "SweepPlan", "SweepResult", "TrialRecord",
    "TuneServiceError", "SpecError", "CapacityError", "TaskError", "Problem",
]
