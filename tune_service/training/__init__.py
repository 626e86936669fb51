"""The shared train function that runs on every rank of every trial (see ``loop.fit``)."""

from tune_service.spec.training import TrainingSettings
from tune_service.training.checkpoint import load_model, load_state
from tune_service.training.context import LocalContext
from tune_service.training.loop import TrialConfig, evaluate, fit, train_one_epoch
from tune_service.training.oom import TrialOutOfMemory

__all__ = ["TrialConfig", "TrainingSettings", "LocalContext", "fit", "train_one_epoch", "evaluate",
           "load_model", "load_state", "TrialOutOfMemory"]
