"""The shared train function that runs on every rank of every trial (see ``loop.fit``).

The names below are imported on first use, so that a module of this package that needs no torch
(``guards``, ``oom``) can be imported without it: a warm trial's actor imports those and never torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: Public name -> (module, name in that module).
_EXPORTS = {
    "TrialConfig": ("tune_service.training.trial_config", "TrialConfig"),
    "TrainingSettings": ("tune_service.spec.training", "TrainingSettings"),
    "LocalContext": ("tune_service.training.context", "LocalContext"),
    "fit": ("tune_service.training.loop", "fit"),
    "train_one_epoch": ("tune_service.training.loop", "train_one_epoch"),
    "evaluate": ("tune_service.training.loop", "evaluate"),
    "load_model": ("tune_service.training.checkpoint", "load_model"),
    "load_state": ("tune_service.training.checkpoint", "load_state"),
    "TrialOutOfMemory": ("tune_service.training.oom", "TrialOutOfMemory"),
}

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    try:
        module, attribute = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'tune_service.training' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value  # once imported, a plain attribute
    return value


if TYPE_CHECKING:  # for type checkers and editors: the same names, imported eagerly
    from tune_service.spec.training import TrainingSettings
    from tune_service.training.checkpoint import load_model, load_state
    from tune_service.training.context import LocalContext
    from tune_service.training.loop import evaluate, fit, train_one_epoch
    from tune_service.training.trial_config import TrialConfig
    from tune_service.training.oom import TrialOutOfMemory
