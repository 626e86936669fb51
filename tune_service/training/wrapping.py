"""Turning a task's plain model into what each rank trains: SyncBatchNorm where it helps, moved to the
rank's device, wrapped in DistributedDataParallel with the spec's knobs, optionally compiled; and back
(``unwrap``) to the plain model that checkpoints hold."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, cast

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from tune_service.spec.training import AUTO, TrainingSettings

_BATCHNORMS = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)


@dataclass
class PreparedModel:
    """The three views of one trial's model on one rank.

    ``module`` is what the loop calls (possibly compiled), ``ddp`` the DDP wrapper (``None`` at world
    size 1), ``plain`` the task's own module, whose ``state_dict`` has no ``module.`` prefix.
    """

    module: nn.Module
    ddp: DistributedDataParallel | None
    plain: nn.Module


def convert_batchnorm(model: nn.Module, setting: bool | str, device: torch.device, world_size: int) -> nn.Module:
    """The model with SyncBatchNorm in place of BatchNorm when ``setting`` asks for it.

    ``auto``: when the model has BatchNorm, the world is > 1 and the ranks are on GPUs (PyTorch's
    SyncBatchNorm, and DDP with it, run only there). Small per-rank batches otherwise give noisy BN
    statistics: each rank normalises with its own few samples.
    """
    if setting == AUTO:
        wanted = device.type == "cuda" and any(isinstance(m, _BATCHNORMS) for m in model.modules())
    else:
        wanted = bool(setting)
    return nn.SyncBatchNorm.convert_sync_batchnorm(model) if wanted and world_size > 1 else model


def prepare_model(
    model: nn.Module,
    device: torch.device,
    world_size: int,
    settings: TrainingSettings,
    comm_hook: tuple[Any, Callable] | None = None,
) -> PreparedModel:
    """Make ``model`` ready to train on this rank (see :class:`PreparedModel`).

    ``comm_hook`` is an optional ``(state, hook)`` for ``DistributedDataParallel.register_comm_hook``
    (gradient compression, or counting all-reduces in tests).
    """
    model = convert_batchnorm(model, settings.sync_batchnorm, device, world_size).to(device)
    plain = model
    ddp = None
    if world_size > 1:
        knobs = settings.ddp
        ddp = DistributedDataParallel(
            model,
            device_ids=[device.index] if device.type == "cuda" else None,
            bucket_cap_mb=knobs.bucket_cap_mb,
            gradient_as_bucket_view=knobs.gradient_as_bucket_view,
            static_graph=knobs.static_graph,
            find_unused_parameters=knobs.find_unused_parameters,
        )
        if comm_hook is not None:
            ddp.register_comm_hook(*comm_hook)
        model = ddp
    if settings.compile:
        model = cast(nn.Module, torch.compile(model))  # an OptimizedModule, for a module
    return PreparedModel(module=model, ddp=ddp, plain=plain)


def unwrap(model: nn.Module) -> nn.Module:
    """The plain module inside DDP and/or ``torch.compile`` wrappers."""
    while True:
        if isinstance(model, DistributedDataParallel):
            model = model.module
        elif hasattr(model, "_orig_mod"):
            model = cast(nn.Module, model._orig_mod)  # torch.compile's wrapped module
        else:
            return model
