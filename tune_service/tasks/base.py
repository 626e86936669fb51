"""The Task protocol: what the shared train loop needs to train a user's model.

A task is a small object (or class) with three required methods; the shared loop in
:mod:`tune_service.training.loop` brings DDP, data sharding, metric reduction and reporting. Every
method receives the trial's hyperparameters (``config``, the task's ``defaults`` overlaid with what the
searcher sampled), is called on every rank, and must be deterministic given ``config``.

Example::

    class MyTask(Task):
        defaults = {"lr": 1e-3, "batch_size": 64, "width": 128}

        def datasets(self, config):
            return train_dataset, val_dataset          # torch Datasets of (input, target)

        def model(self, config):
            return torch.nn.Sequential(...)

        def loss(self, outputs, targets):              # optional: cross-entropy by default
            return torch.nn.functional.cross_entropy(outputs, targets)
"""

from __future__ import annotations

from typing import Any, Mapping

import torch
import torch.nn.functional as F


class Task:
    """Base class of a trainable task. Subclasses override ``datasets`` and ``model``.

    Contract:
        - ``defaults``: hyperparameters the task understands, with the values used when the sweep does
          not search them. The shared loop reads ``lr``, ``batch_size`` (global, over all ranks),
          ``optimizer`` (adam | adamw | sgd), ``weight_decay`` and ``momentum`` from the config.
        - ``datasets(config) -> (train, validation)``: map-style torch Datasets of ``(input, target)``.
        - ``model(config) -> nn.Module``: a fresh model; the loop moves it to the rank's device and wraps
          it in DDP.
        - ``loss(outputs, targets) -> scalar tensor``: cross-entropy unless overridden.
        - ``correct(outputs, targets) -> tensor``: number of correct predictions in the batch (argmax by
          default), giving ``val_accuracy``; return ``None`` for tasks without an accuracy.
    """

    name: str = "task"
    defaults: Mapping[str, Any] = {}

    def datasets(self, config: Mapping[str, Any]):
        raise NotImplementedError

    def model(self, config: Mapping[str, Any]) -> torch.nn.Module:
        raise NotImplementedError

    def loss(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(outputs, targets)

    def correct(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor | None:
        return (outputs.argmax(dim=1) == targets).sum()
