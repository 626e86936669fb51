"""A trial's optimizer and learning-rate schedule.

The optimizer is any ``torch.optim`` optimizer the config names (``optimizer: adamw``), its arguments
the config keys of the same names (``weight_decay``, ``betas``, ...); a task's ``configure_optimizers``
may build both itself. The schedule is a factor of each parameter group's peak lr computed from the
optimizer-step index alone: a resumed trial that knows its step continues the same curve exactly, with
no scheduler state to restore.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

import torch

from tune_service.spec.training import ScheduleSettings
from tune_service.tasks.optimizers import optimizer_arguments, optimizer_class

#: Arguments whose default here differs from torch's: SGD without momentum is rarely what a sweep means.
DEFAULT_ARGUMENTS = {"sgd": {"momentum": 0.9}}
#: torch's OneCycleLR defaults: the warm-up's share of the trial and the start and end divisors.
ONE_CYCLE_WARMUP_SHARE, ONE_CYCLE_START_DIV, ONE_CYCLE_END_DIV = 0.3, 25.0, 1e4


def optimizer_settings(hparams: Mapping[str, Any]) -> tuple[type[torch.optim.Optimizer], dict[str, Any]]:
    """The optimizer class ``hparams["optimizer"]`` names (``adam`` when absent) and the constructor
    arguments ``hparams`` gives it (a list where torch wants a tuple, such as ``betas``, is converted),
    over this module's defaults (:data:`DEFAULT_ARGUMENTS`).

    Raises:
        ValueError: the name is no optimizer the loop can step.
    """
    name = str(hparams.get("optimizer", "adam"))
    cls = optimizer_class(name)
    arguments: dict[str, Any] = dict(DEFAULT_ARGUMENTS.get(name.lower(), {}))
    for key in optimizer_arguments(cls):
        if key in hparams:
            value = hparams[key]
            arguments[key] = tuple(value) if isinstance(value, list) else value
    return cls, arguments


def make_optimizer(
    parameters: Iterable[torch.nn.Parameter], hparams: Mapping[str, Any], lr: float
) -> torch.optim.Optimizer:
    """The optimizer of :func:`optimizer_settings` at learning rate ``lr``.

    Raises:
        ValueError: the name is no optimizer the loop can step.
    """
    cls, arguments = optimizer_settings(hparams)
    build: Callable[..., torch.optim.Optimizer] = cls  # each optimizer takes lr (their base class does not)
    return build(parameters, lr=lr, **arguments)


@dataclass(frozen=True)
class LearningRateSchedule:
    """The factor of the peak lr at each optimizer step: a linear warm-up, then the schedule's decay.

    ``start`` is the warm-up's first factor (1 / the lr scaling factor with ``lr_scaling: linear``, so it
    starts from the unscaled lr; 0 otherwise). ``total_steps`` is the trial's horizon (its maximum epochs
    x ``steps_per_epoch``, or its maximum steps), where cosine and linear reach ``min_lr_ratio``.
    """

    settings: ScheduleSettings
    steps_per_epoch: int
    total_steps: int
    warmup_steps: int = 0
    start: float = 0.0

    @classmethod
    def for_trial(
        cls, settings: ScheduleSettings, steps_per_epoch: int, total_steps: int, warmup_steps: int, lr_scale: float
    ) -> "LearningRateSchedule":
        """The schedule of a trial of ``total_steps`` optimizer steps (its ``max_t``, in epochs x
        ``steps_per_epoch`` or in steps)."""
        start = 1.0 / lr_scale if lr_scale != 1.0 else 0.0
        if settings.name == "one_cycle":
            start = 1.0 / ONE_CYCLE_START_DIV
            warmup_steps = warmup_steps or round(ONE_CYCLE_WARMUP_SHARE * total_steps)
        return cls(settings, max(1, steps_per_epoch), max(1, total_steps), warmup_steps, start)

    @property
    def constant(self) -> bool:
        """Whether the factor is 1 at every step (no warm-up, no decay): nothing to set per step."""
        return self.settings.name == "constant" and self.warmup_steps == 0

    def factor(self, step: int) -> float:
        """The factor of the peak lr for optimizer step ``step`` (0-based, over the whole trial)."""
        if step < self.warmup_steps:
            return self.start + (1.0 - self.start) * step / self.warmup_steps
        if self.settings.interval == "epoch":
            step = max(self.warmup_steps, step - step % self.steps_per_epoch)  # held for the epoch
        return self._decay(step)

    def _decay(self, step: int) -> float:
        name, floor = self.settings.name, self.settings.min_lr_ratio
        progress = min(1.0, max(0.0, (step - self.warmup_steps) / max(1, self.total_steps - self.warmup_steps)))
        if name == "cosine":
            return floor + (1.0 - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))
        if name == "linear":
            return floor + (1.0 - floor) * (1.0 - progress)
        if name == "step":
            return self.settings.gamma ** (step // (self.settings.every_epochs * self.steps_per_epoch))
        if name == "one_cycle":
            end = 1.0 / (ONE_CYCLE_START_DIV * ONE_CYCLE_END_DIV)
            return end + (1.0 - end) * 0.5 * (1.0 + math.cos(math.pi * progress))
        return 1.0

    def apply(self, optimizer: torch.optim.Optimizer, step: int) -> float:
        """Set every parameter group's lr for ``step`` (its peak kept as ``initial_lr``, torch's own key,
        which the optimizer's state dict saves); the first group's lr."""
        factor = self.factor(step)
        for group in optimizer.param_groups:
            group["lr"] = group.setdefault("initial_lr", group["lr"]) * factor
        return optimizer.param_groups[0]["lr"]
