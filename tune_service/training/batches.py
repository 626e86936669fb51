"""Batches of any structure: what a task's data loader yields, moved to the rank's device as it is.

A batch may be a tensor, a tuple or list (a named tuple too), a dict or any mapping (a tokenizer's
``BatchEncoding``), a dataclass, or any nesting of these; anything else (strings, numbers, ``None``) is
left as it is. Tensors are copied with ``non_blocking=True``: from pinned memory the copy overlaps the
computation instead of stalling the host.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import torch


def move_to_device(batch: Any, device: torch.device) -> Any:
    """``batch`` with every tensor in it on ``device``, the containers rebuilt as the same types."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, Mapping):
        moved = {key: move_to_device(value, device) for key, value in batch.items()}
        return moved if type(batch) is dict else _rebuilt_mapping(batch, moved)
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # a named tuple
        return type(batch)(*(move_to_device(value, device) for value in batch))
    if isinstance(batch, (tuple, list)):  # the common (inputs, targets): tensors moved without a call each
        return type(batch)(
            value.to(device, non_blocking=True) if isinstance(value, torch.Tensor) else move_to_device(value, device)
            for value in batch
        )
    if dataclasses.is_dataclass(batch) and not isinstance(batch, type):
        return dataclasses.replace(
            batch,
            **{
                field.name: move_to_device(getattr(batch, field.name), device)
                for field in dataclasses.fields(batch)
                if field.init
            },
        )
    return batch


def _rebuilt_mapping(original: Mapping, moved: dict) -> Any:
    """A mapping of the original's type holding ``moved``; a plain dict where that type cannot be built
    from a dict (its constructor takes other arguments)."""
    rebuild: Any = type(original)  # a concrete mapping type, whose constructor may take a dict or not
    try:
        return rebuild(moved)
    except TypeError:
        return moved


def count_samples(batch: Any) -> int:
    """The number of samples in ``batch``: the leading dimension of its first tensor (depth first).

    Raises:
        ValueError: the batch holds no tensor with a dimension, so a task must say its size itself.
    """
    tensor = _first_tensor(batch)
    if tensor is None:
        raise ValueError(
            f"cannot count the samples of a batch without tensors ({type(batch).__name__}); "
            f"return (loss, samples) from training_step, or 'samples' from validation_step"
        )
    return int(tensor.shape[0])


def _first_tensor(batch: Any) -> torch.Tensor | None:
    if isinstance(batch, torch.Tensor):
        return batch if batch.dim() > 0 else None
    if isinstance(batch, Mapping):
        values = list(batch.values())
    elif isinstance(batch, (tuple, list)):
        values = list(batch)
    elif dataclasses.is_dataclass(batch) and not isinstance(batch, type):
        values = [getattr(batch, field.name) for field in dataclasses.fields(batch)]
    else:
        return None
    for value in values:
        found = _first_tensor(value)
        if found is not None:
            return found
    return None
