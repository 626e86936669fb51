"""What one trial's ranks are handed: :class:`TrialConfig`, without torch (a warm trial's actor builds
one and passes it on to its ranks, and never imports torch)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping

from tune_service.spec.training import TrainingSettings
from tune_service.tasks import ResolvedTask, SealedTask


@dataclass(frozen=True)
class TrialConfig:
    """Everything one trial's ranks need, handed from the trial to every rank (by the gang, or by Ray Train)."""

    #: The task; sealed while it travels to a warm gang's ranks (:meth:`opened` there).
    task: ResolvedTask | SealedTask
    hparams: Mapping[str, Any]
    #: Whole epochs to train (the scheduler's ``max_t`` when its time unit is the epoch).
    epochs: int | None
    seed: int
    settings: TrainingSettings = field(default_factory=TrainingSettings)
    #: CPUs each rank was given (DataLoader workers are sized from it, not from the machine).
    cpus_per_rank: float = 1
    #: GPUs each rank was given: a share below 1 (a packed trial) holds the rank's process to that share
    #: of the GPU's memory (:func:`~tune_service.training.oom.hold_to_gpu_share`).
    gpus_per_rank: float = 0
    #: The trial's directory, for artifacts such as profiler traces.
    output_dir: str | None = None
    #: The Ray Train run's directory in the experiment's storage, where its checkpoints are (local or
    #: shared paths only): what a restarted worker group resumes from if Ray Train hands it none.
    checkpoint_root: str | None = None
    #: Optimizer steps to train instead of ``epochs`` (the scheduler's ``max_t`` when its time unit is
    #: the step); reports are then counted in steps.
    max_steps: int | None = None

    def __post_init__(self):
        if (self.epochs is None) == (self.max_steps is None):
            raise ValueError(
                f"a trial trains for epochs or for max_steps, one of them: got epochs={self.epochs!r}, "
                f"max_steps={self.max_steps!r}"
            )

    def opened(self) -> TrialConfig:
        """This config with its task opened (where the task runs: on a rank)."""
        if isinstance(self.task, SealedTask):
            return dataclasses.replace(self, task=self.task.open())
        return self

    def resolved_task(self) -> ResolvedTask:
        """The task, which must be open (see :meth:`opened`)."""
        if not isinstance(self.task, ResolvedTask):
            raise TypeError("the trial's task is still sealed: open the config on the rank first (TrialConfig.opened)")
        return self.task
