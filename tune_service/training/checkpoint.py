"""Trial checkpoints: what rank 0 saves, and how to load one back, in a trial or outside the service.

A checkpoint is a directory holding ``state.pt``: the *unwrapped* model's state dict (no ``module.``
prefix, so it loads into a plain non-DDP model), the optimizer's and the GradScaler's state, the last
finished epoch (and the batches of the next one trained, for a checkpoint taken mid-epoch), the optimizer
steps, and the trial's hyperparameters. It is read with ``torch.load(weights_only=True)``, which
cannot run code. Using the sweep's best model elsewhere is one call::

    model = MyTask().model(config)
    tune_service.load_model(checkpoint_dir, model)   # or a ray.train.Checkpoint
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any, Iterator, Mapping

import torch
from torch import nn

STATE_FILE = "state.pt"


def save_checkpoint(
    directory: str | os.PathLike,
    *,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scaler: torch.amp.GradScaler,
    epoch: int,
    meta: Mapping[str, Any],
    step: int | None = None,
    scheduler: Mapping[str, Any] | None = None,
    epoch_batches: int = 0,
) -> Path:
    """Write the checkpoint of ``epoch`` whole epochs and ``epoch_batches`` batches of the next into
    ``directory`` (call on rank 0 only).

    ``model`` must be the plain module (see :func:`tune_service.training.wrapping.unwrap`); ``step`` is
    the optimizer steps taken so far (where the lr schedule resumes), ``scheduler`` the state of a task's
    own lr scheduler.
    """
    state = {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scaler": scaler.state_dict(),
        "epoch": int(epoch),
        "epoch_batches": int(epoch_batches),
        "step": step,
        "scheduler": dict(scheduler) if scheduler is not None else None,
        "meta": dict(meta),
    }
    return write_state(directory, state)


def write_state(directory: str | os.PathLike, state: Mapping[str, Any]) -> Path:
    """Write a checkpoint's ``state`` (the form :func:`save_checkpoint` gives it) into ``directory``,
    whole or not at all."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f".{STATE_FILE}.tmp"
    torch.save(dict(state), tmp)
    os.replace(tmp, directory / STATE_FILE)  # never a half-written state.pt
    return directory


@contextlib.contextmanager
def _local_directory(checkpoint: Any) -> Iterator[Path]:
    if hasattr(checkpoint, "as_directory"):  # a ray.train.Checkpoint, possibly on remote storage
        with checkpoint.as_directory() as path:
            yield Path(path)
    else:
        yield Path(checkpoint)


def load_state(checkpoint: Any, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """The saved state of a checkpoint directory (a path or a ``ray.train.Checkpoint``), tensors mapped
    to ``map_location`` (the local device: a checkpoint written on ``cuda:0`` loads on any rank)."""
    with _local_directory(checkpoint) as path:
        file = path / STATE_FILE
        if not file.is_file():
            raise FileNotFoundError(f"not a tune-service checkpoint (no {STATE_FILE}): {str(path)!r}")
        return torch.load(file, map_location=map_location, weights_only=True)


def load_model(checkpoint: Any, model: nn.Module, map_location: str | torch.device = "cpu") -> nn.Module:
    """Load a trial's weights into a plain ``model`` (built by the task with the trial's config) and
    return it. The one call needed to use a sweep's best model outside the service."""
    model.load_state_dict(load_state(checkpoint, map_location)["model"])
    return model
