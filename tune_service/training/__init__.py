"""The shared train function that runs on every rank of every trial (see ``loop.fit``)."""

from tune_service.training.loop import TrialConfig, evaluate, fit, train_one_epoch

__all__ = ["TrialConfig", "fit", "train_one_epoch", "evaluate"]
