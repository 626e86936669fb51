"""Guards on what a trial reports, each ending the trial with one line that says what went wrong.

- A non-finite training or validation loss ends the trial at that epoch, before the epoch is reported,
  so a diverged trial can never be chosen as best. The losses are checked once per epoch, after the
  all-reduce, so every rank sees the same values and stops together (no rank waits on a collective)
  and the hot loop gains no host sync. Under fp16 only the validation loss counts: an overflowing
  training step is the GradScaler's to skip, and it leaves the weights (so validation) finite.
- A metric the sweep optimises (``metric.name``) that the task never reports is caught at the first
  report, naming what it did report, instead of a sweep that ends with no best trial.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

LOSSES = ("train_loss", "val_loss")


class NonFiniteLoss(RuntimeError):
    """A loss became NaN or infinite. Picklable (it crosses Ray): the message is its only argument."""


class MissingMetric(RuntimeError):
    """The task's reports lack the metric the sweep optimises. Picklable."""


def check_finite_losses(metrics: Mapping[str, Any], epoch: int, precision: str = "fp32") -> None:
    """Raise :class:`NonFiniteLoss` (``non-finite loss at epoch 3: train_loss nan``) when a loss is not
    finite (under ``precision`` fp16, the validation loss only)."""
    checked = ("val_loss",) if precision == "fp16" else LOSSES
    bad = [
        f"{name} {metrics[name]}"
        for name in checked
        if isinstance(metrics.get(name), float) and not math.isfinite(metrics[name])
    ]
    if bad:
        raise NonFiniteLoss(
            f"non-finite loss at epoch {epoch}: {', '.join(bad)}; lower the learning rate or use precision fp32/bf16"
        )


def check_metric_reported(metric: str, reported: Mapping[str, Any]) -> None:
    """Raise :class:`MissingMetric` when ``metric`` is not among the ``reported`` names."""
    if metric not in reported:
        names = ", ".join(sorted(k for k in reported if not k.startswith("_")))
        raise MissingMetric(f"metric.name: the task never reported {metric!r}; its first report had: {names}")
