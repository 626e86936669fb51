"""The ``training:`` block of a spec: how the shared loop trains every trial of a sweep.

These are settings of the sweep, not searched hyperparameters: every trial trains the same way, so
trials differ only in what the searcher samples. This module imports nothing heavy (the spec validator
and the driver read it without torch).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Union

PRECISIONS = ("auto", "bf16", "fp16", "fp32")
BATCH_SIZE_SCOPES = ("global", "per_rank")
LR_SCALINGS = ("none", "linear")
SCHEDULES = ("constant", "cosine", "linear", "step", "one_cycle")
SCHEDULE_INTERVALS = ("step", "epoch")
AUTO = "auto"
#: Steps recorded by ``profile: true`` (after one warm-up step).
DEFAULT_PROFILE_STEPS = 5


@dataclass(frozen=True)
class DDPSettings:
    """Knobs passed to ``DistributedDataParallel`` as they are (PyTorch's defaults, except
    ``gradient_as_bucket_view``, which saves one copy of the gradients)."""

    bucket_cap_mb: float = 25
    gradient_as_bucket_view: bool = True
    static_graph: bool = False
    find_unused_parameters: bool = False


@dataclass(frozen=True)
class ScheduleSettings:
    """The learning-rate schedule after the warm-up, as a factor of the peak lr (``training.schedule``).

    - ``name``: ``constant``; ``cosine`` and ``linear`` decay to ``min_lr_ratio`` x peak at the trial's
      last step (its ``max_t`` epochs); ``step`` multiplies by ``gamma`` every ``every_epochs`` epochs;
      ``one_cycle`` warms up from peak / 25 (over 30 % of the trial unless a warm-up is given), then
      anneals by a cosine to peak / 2.5e5 (torch's ``OneCycleLR`` without momentum cycling).
    - ``interval``: ``step`` moves the decay every optimizer step; ``epoch`` holds it for each epoch (the
      warm-up is always per step). A task's own scheduler (``configure_optimizers``) is stepped at it.
    """

    name: str = "constant"
    interval: str = "step"
    min_lr_ratio: float = 0.0
    every_epochs: int = 1
    gamma: float = 0.1


@dataclass(frozen=True)
class TrainingSettings:
    """How the shared loop trains. Every field is a spec key under ``training:``.

    - ``precision``: ``auto`` (bf16 autocast where the device supports it, fp16 + GradScaler on older
      GPUs, fp32 on CPU), or one of ``bf16``, ``fp16``, ``fp32``.
    - ``batch_size_scope``: what the ``batch_size`` hyperparameter means. ``global``: the batch of one
      optimizer step over all ranks (the same at every world size). ``per_rank``: each rank's batch per
      optimizer step, so the global batch grows with the world (the posts' convention).
    - ``grad_accum_steps``: micro-batches per optimizer step; the effective batch is unchanged, each
      micro-batch is smaller, and gradients are all-reduced once per optimizer step.
    - ``lr_scaling``: ``linear`` multiplies ``lr`` by global batch / ``batch_size`` (the linear scaling
      rule: a no-op for a global batch, ``x world`` for a per-rank one).
    - ``warmup_epochs`` / ``warmup_steps`` (one or the other): a linear warm-up to the peak lr over that
      many epochs or optimizer steps, from the unscaled ``lr`` with ``lr_scaling: linear`` (Goyal et al.),
      from 0 otherwise.
    - ``schedule``: the decay after the warm-up (:class:`ScheduleSettings`).
    - ``clip_grad_norm``: clip the gradients' total norm to this (0: off) before every optimizer step,
      after the fp16 scaler has unscaled them and after accumulation.
    - ``sync_batchnorm``: ``auto`` converts BatchNorm to SyncBatchNorm when the world is > 1 and the
      ranks are on GPUs (PyTorch's SyncBatchNorm runs only there).
    - ``num_workers`` / ``pin_memory``: DataLoader settings; ``auto`` sizes them from the rank's device
      and CPUs (see :func:`tune_service.training.data.loader_settings`).
    - ``compile``: ``torch.compile`` the model. ``deterministic``: deterministic algorithms only.
    - ``profile_steps``: record a ``torch.profiler`` trace of this many steps of the first epoch on rank 0
      (0: off), written into the trial's directory.
    - ``oom_retry``: on out-of-memory, retry the trial at half the per-rank batch and twice the
      accumulation (same effective batch), from its last checkpoint, until the micro-batch is 1.
    - ``report_every_steps``: validate and report every this many optimizer steps instead of at each
      epoch's end (0: at each epoch's end); needs the scheduler's time unit ``step``.
    - ``checkpoint_every``: rank 0 saves a checkpoint at every this many reports (epochs, or
      ``report_every_steps`` steps) and at the last one (0: never).
    """

    precision: str = AUTO
    batch_size_scope: str = "global"
    grad_accum_steps: int = 1
    lr_scaling: str = "none"
    warmup_epochs: float = 0
    warmup_steps: int = 0
    schedule: ScheduleSettings = field(default_factory=ScheduleSettings)
    clip_grad_norm: float = 0
    sync_batchnorm: Union[bool, str] = AUTO
    num_workers: Union[int, str] = AUTO
    pin_memory: Union[bool, str] = AUTO
    compile: bool = False
    deterministic: bool = False
    profile_steps: int = 0
    oom_retry: bool = False
    report_every_steps: int = 0
    checkpoint_every: int = 1
    ddp: DDPSettings = field(default_factory=DDPSettings)

    def with_accumulation(self, grad_accum_steps: int) -> "TrainingSettings":
        return replace(self, grad_accum_steps=grad_accum_steps)
