"""The sweep spec: reading a YAML file (W&B's sweep grammar and our superset), checking it, and the typed
spec the rest of the service works from. Imports neither torch nor Ray, so ``--help``, ``--dry-run``
and every spec error are fast.

Modules: ``sweep`` (the typed spec and its sections), ``reading`` (files, inline YAML, ``--set``
overrides), ``validation`` (one check per section, every problem in one pass) on ``rules`` (the rules a
value is checked against), ``parameters`` (the W&B parameter grammar), ``training`` and ``wandb`` (the
``training:`` and ``wandb:`` sections), ``configs`` (the shapes of a trial's config: nested, flat, plain).
"""

from tune_service.spec.reading import MAX_SPEC_BYTES, load_spec, parse_override
from tune_service.spec.sweep import ExecutionSpec, FailureSpec, MetricSpec, ResourceSpec, SchedulerSpec, SweepSpec
from tune_service.spec.training import DDPSettings, TrainingSettings
from tune_service.spec.wandb import WandbSettings

__all__ = [
    "SweepSpec",
    "load_spec",
    "parse_override",
    "MAX_SPEC_BYTES",
    "MetricSpec",
    "SchedulerSpec",
    "ResourceSpec",
    "FailureSpec",
    "ExecutionSpec",
    "TrainingSettings",
    "DDPSettings",
    "WandbSettings",
]
