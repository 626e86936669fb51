"""The Task protocol: what the shared train loop needs to train a user's model.

A task is a small object (or class) with two required methods; the shared loop in
:mod:`tune_service.training.loop` brings DDP, data sharding, mixed precision, checkpoints, metric
reduction and reporting. Every method receives the trial's hyperparameters (``config``: the task's
``defaults`` overlaid with what the searcher sampled), is called on every rank, and must be
deterministic given ``config``.

Example::

    class MyTask(Task):
        defaults = {"lr": 1e-3, "batch_size": 64, "width": 128}

        def datasets(self, config):
            return train_dataset, val_dataset          # map-style torch Datasets of (input, target)

        def model(self, config):
            return torch.nn.Sequential(...)

        def loss(self, outputs, targets):              # optional: cross-entropy by default
            return torch.nn.functional.cross_entropy(outputs, targets)
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import torch
import torch.nn.functional as F


class Task:
    """Base class of a trainable task. Subclasses override ``datasets`` and ``model``.

    Contract:
        - ``defaults``: hyperparameters the task understands, with the values used when the sweep does
          not search them. The shared loop reads ``lr``, ``batch_size`` (global, over all ranks, unless
          ``training.batch_size_scope`` is ``per_rank``), ``optimizer`` (adam | adamw | sgd),
          ``weight_decay`` and ``momentum``.
        - ``datasets(config) -> (train, validation)``: map-style torch Datasets of ``(input, target)``;
          the validation set must have at least as many samples as there are ranks.
        - ``model(config) -> nn.Module``: a fresh model; the loop moves it to the rank's device and
          wraps it in DDP. Seeded identically on every rank, so every rank starts from the same weights.
        - ``loss(outputs, targets) -> scalar tensor``: the mean loss of a batch, computed in fp32 (the
          loop casts the outputs); cross-entropy unless overridden.
        - ``metrics(outputs, targets) -> {name: tensor}``: *sums* over the batch (e.g. the number of
          correct predictions); each is reported as ``val_<name>`` = sum over the whole validation set
          / its size. Default: ``accuracy`` by argmax. Return ``{}`` for none.

    Optional hooks:
        - ``augment(inputs, targets, config) -> (inputs, targets)``: applied to each training batch on the
          device. Random draws here differ per rank and per epoch (the loop seeds each rank apart).
        - ``ddp_comm_hook() -> (state, hook) | None``: a DDP communication hook (e.g. PyTorch's
          ``fp16_compress_hook``) registered on the DDP wrapper at world size > 1.

    Optional attribute:
        - ``data_hparams``: the hyperparameters that shape what ``datasets`` returns. A warm gang keeps
          the data sets it built and hands them to the next trial whose values of these match; ``()``
          says the data never depend on the config. ``None`` (the default): built anew for every trial.
          The data sets are then shared by trials, so ``datasets`` must not return objects a trial
          changes.
    """

    name: str = "task"
    defaults: Mapping[str, Any] = {}
    data_hparams: tuple[str, ...] | None = None

    def datasets(self, config: Mapping[str, Any]):
        raise NotImplementedError

    def model(self, config: Mapping[str, Any]) -> torch.nn.Module:
        raise NotImplementedError

    def loss(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(outputs, targets)

    def metrics(self, outputs: torch.Tensor, targets: torch.Tensor) -> Mapping[str, torch.Tensor]:
        return {"accuracy": (outputs.argmax(dim=1) == targets).sum()}

    def augment(self, inputs: torch.Tensor, targets: torch.Tensor,
                config: Mapping[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
        return inputs, targets

    def ddp_comm_hook(self) -> tuple[Any, Callable] | None:
        return None
