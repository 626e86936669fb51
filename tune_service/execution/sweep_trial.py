"""What every trial of a sweep shares, however it runs (on a warm gang, or as a fresh Ray Train run)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tune_service.spec.training import TrainingSettings
from tune_service.tasks import ResolvedTask, SealedTask


@dataclass(frozen=True, kw_only=True)
class SweepTrial:
    """The trial function's fixed part; Tune calls it with each trial's config (the searcher's values)."""

    #: The task; a warm trial's travels sealed, opened only on its ranks (see :class:`SealedTask`).
    task: ResolvedTask | SealedTask
    #: A trial's budget: whole epochs, or (when the scheduler counts steps) optimizer steps; one is None.
    epochs: int | None
    seed: int
    max_steps: int | None = None
    training: TrainingSettings = field(default_factory=TrainingSettings)
    #: The metric the sweep optimises: a trial whose first report lacks it fails at once.
    metric: str = "val_loss"
    #: The driver's secrets, as :class:`~tune_service.redaction.Fingerprints`: a rank's error that
    #: quotes one is scrubbed in the rank, before Ray logs it and hands it on.
    secrets: Any = None

    def __call__(self, config: dict[str, Any]) -> None:
        raise NotImplementedError
