"""The shared train loop that runs on every rank of a trial: ``fit()`` with ``train_one_epoch()`` and
``evaluate()``, reporting metrics to Ray Train once per epoch.

``fit`` is the ``train_loop_per_worker`` of every trial that uses a :class:`~tune_service.tasks.Task`.
Ray Train has already started the process group (gloo on CPU, NCCL on GPU) when it is called.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Mapping

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from tune_service.tasks import ResolvedTask
from tune_service.training.data import RankLoaders, build_loaders
from tune_service.training.distributed import all_reduce_sum, rank_info, seed_everything
from tune_service.training.precision import Precision, choose_precision

OPTIMIZERS = ("adam", "adamw", "sgd")


@dataclass(frozen=True)
class TrialConfig:
    """Everything one trial's ranks need, handed from the trial to every rank by Ray Train."""

    task: ResolvedTask
    hparams: Mapping[str, Any]
    epochs: int
    seed: int
    precision: str = "auto"


def make_optimizer(model: nn.Module, hparams: Mapping[str, Any]) -> torch.optim.Optimizer:
    name = hparams.get("optimizer", "adam")
    lr, wd = float(hparams["lr"]), float(hparams.get("weight_decay", 0.0))
    if name == "adam":
        return torch.optim.Adam(model.parameters(), lr=lr, weight_decay=wd)
    if name == "adamw":
        return torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=wd)
    if name == "sgd":
        return torch.optim.SGD(model.parameters(), lr=lr, weight_decay=wd, momentum=float(hparams.get("momentum", 0.9)))
    raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {name!r}")


def train_one_epoch(model: nn.Module, task, loaders: RankLoaders, optimizer, scaler, precision: Precision,
                    device: torch.device, epoch: int) -> torch.Tensor:
    """One pass over this rank's shard. Returns ``[loss_sum, samples]`` for this rank, on the device.

    Losses are accumulated detached and on the device: no host sync per step, no graph kept alive.
    """
    model.train()
    loaders.sampler.set_epoch(epoch)  # a different shuffle every epoch, the same on every rank
    totals = torch.zeros(2, device=device, dtype=torch.float64)
    for inputs, targets in loaders.train:
        inputs = inputs.to(device, non_blocking=True)
        targets = targets.to(device, non_blocking=True)
        optimizer.zero_grad(set_to_none=True)
        with precision.autocast():
            outputs = model(inputs)
        loss = task.loss(outputs.float(), targets)  # the loss in fp32 whatever the autocast dtype
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        totals[0] += loss.detach() * targets.shape[0]
        totals[1] += targets.shape[0]
    return totals


@torch.no_grad()
def evaluate(model: nn.Module, task, loaders: RankLoaders, precision: Precision, device: torch.device) -> dict[str, float]:
    """Loss and accuracy over the whole validation set: every rank's shard, summed over all ranks."""
    model.eval()
    totals = torch.zeros(3, device=device, dtype=torch.float64)  # loss sum, correct, samples
    has_accuracy = True
    for inputs, targets in loaders.validation:
        inputs = inputs.to(device, non_blocking=True)
        targets = targets.to(device, non_blocking=True)
        with precision.autocast():
            outputs = model(inputs)
        outputs = outputs.float()
        totals[0] += task.loss(outputs, targets) * targets.shape[0]
        correct = task.correct(outputs, targets)
        if correct is None:
            has_accuracy = False
        else:
            totals[1] += correct
        totals[2] += targets.shape[0]
    loss_sum, correct, samples = all_reduce_sum(totals).tolist()  # one host sync per evaluation
    metrics = {"val_loss": loss_sum / max(samples, 1)}
    if has_accuracy:
        metrics["val_accuracy"] = correct / max(samples, 1)
    return metrics


def fit(config: TrialConfig | Mapping[str, Any]) -> None:
    """Train ``config.task`` for ``config.epochs`` epochs on this rank, reporting once per epoch.

    Reported metrics (identical on every rank, reduced over all of them): ``epoch`` (1-based),
    ``train_loss``, ``val_loss``, ``val_accuracy`` (tasks with an accuracy), ``world_size``,
    ``batch_per_rank``, ``precision``, ``epoch_time_s``.
    """
    import ray.train
    import ray.train.torch

    if not isinstance(config, TrialConfig):
        config = TrialConfig(**config)
    task = config.task.task
    ranks = rank_info()
    device = ray.train.torch.get_device()
    precision = choose_precision(config.precision, device)

    seed_everything(config.seed)  # identical initial weights on every rank
    model = task.model(config.hparams).to(device)
    if ranks.world_size > 1:
        model = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    optimizer = make_optimizer(model, config.hparams)
    scaler = precision.scaler()
    train_set, val_set = task.datasets(config.hparams)
    loaders = build_loaders(train_set, val_set, int(config.hparams["batch_size"]), ranks, device, config.seed)
    seed_everything(config.seed + ranks.rank)  # what each rank draws on its own (dropout, augmentation)

    for epoch in range(1, config.epochs + 1):
        started = time.perf_counter()
        train_totals = all_reduce_sum(train_one_epoch(model, task, loaders, optimizer, scaler, precision, device, epoch))
        loss_sum, samples = train_totals.tolist()
        metrics = evaluate(model, task, loaders, precision, device)
        metrics.update(
            epoch=epoch, train_loss=loss_sum / max(samples, 1), world_size=ranks.world_size,
            batch_per_rank=loaders.batch_per_rank, precision=precision.name,
            epoch_time_s=time.perf_counter() - started,
        )
        ray.train.report(metrics)
