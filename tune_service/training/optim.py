"""The optimizer a trial's hyperparameters name, and its learning rate per optimizer step (the linear
scaling rule with warm-up, computed from the step index so a resumed trial needs no scheduler state)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import torch
from torch import nn

OPTIMIZERS = ("adam", "adamw", "sgd")


def make_optimizer(model: nn.Module, hparams: Mapping[str, Any], lr: float) -> torch.optim.Optimizer:
    """``optimizer`` (adam | adamw | sgd), ``weight_decay`` and ``momentum`` (sgd) from the hparams."""
    name = hparams.get("optimizer", "adam")
    wd = float(hparams.get("weight_decay", 0.0))
    if name == "adam":
        return torch.optim.Adam(model.parameters(), lr=lr, weight_decay=wd)
    if name == "adamw":
        return torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=wd)
    if name == "sgd":
        return torch.optim.SGD(model.parameters(), lr=lr, weight_decay=wd, momentum=float(hparams.get("momentum", 0.9)))
    raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {name!r}")


@dataclass(frozen=True)
class LearningRate:
    """``base`` (the ``lr`` hyperparameter) scaled by ``factor``, reached linearly over ``warmup_steps``."""

    base: float
    factor: float = 1.0
    warmup_steps: int = 0

    @property
    def peak(self) -> float:
        return self.base * self.factor

    def at(self, step: int) -> float:
        """The learning rate of optimizer step ``step`` (0-based, counted over the whole trial)."""
        if self.warmup_steps <= 0 or step >= self.warmup_steps:
            return self.peak
        return self.base + (self.peak - self.base) * step / self.warmup_steps

    def apply(self, optimizer: torch.optim.Optimizer, step: int) -> None:
        lr = self.at(step)
        for group in optimizer.param_groups:
            group["lr"] = lr
