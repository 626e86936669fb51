"""DataLoaders for one rank: the training set sharded by a DistributedSampler (reshuffled every epoch
with ``set_epoch``), the validation set split into disjoint shards without padding (so the all-reduced
metrics equal a single-process evaluation), and the batch sizes derived from the sweep's ``batch_size``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler, Subset

from tune_service.spec.training import AUTO, TrainingSettings
from tune_service.training.distributed import RankInfo

#: The posts' rule of thumb for DataLoader workers per GPU.
WORKERS_PER_GPU = 4


@dataclass(frozen=True)
class BatchPlan:
    """The batch sizes of one trial.

    ``global_batch`` samples make one optimizer step over all ranks; each rank contributes ``per_rank``
    of them, loaded as ``grad_accum_steps`` micro-batches of ``micro`` samples.
    """

    global_batch: int
    per_rank: int
    micro: int
    grad_accum_steps: int


def plan_batches(batch_size: int, world_size: int, grad_accum_steps: int = 1, scope: str = "global") -> BatchPlan:
    """The sweep's ``batch_size`` is global (the same at every world size) or, with ``scope`` ``per_rank``,
    each rank's batch per optimizer step."""
    per_rank = int(batch_size) if scope == "per_rank" else max(1, int(batch_size) // world_size)
    micro = max(1, per_rank // grad_accum_steps)
    return BatchPlan(per_rank * world_size, per_rank, micro, grad_accum_steps)


def steps_per_epoch(dataset_size: int, plan: BatchPlan, world_size: int) -> int:
    """Optimizer steps per epoch on each rank: ceil(micro-batches in the rank's shard / accumulation)."""
    micro_batches = math.ceil(math.ceil(dataset_size / world_size) / plan.micro)
    return math.ceil(micro_batches / plan.grad_accum_steps)


@dataclass(frozen=True)
class LoaderSettings:
    num_workers: int
    pin_memory: bool

    @property
    def persistent_workers(self) -> bool:
        return self.num_workers > 0  # workers started once per trial, not once per epoch


def loader_settings(settings: TrainingSettings, device: torch.device, cpus_per_rank: float) -> LoaderSettings:
    """DataLoader settings for one rank, from the CPUs it was given (not the machine's).

    ``auto`` workers: on a GPU rank, 4 (the rule of thumb) but at most the rank's CPUs minus one for the
    training process itself; on a CPU rank 0 (in-process loading), since worker processes would compete
    with training for the same cores. ``auto`` pinning: on CUDA only (pinned memory makes the
    ``non_blocking`` host-to-device copies asynchronous; it means nothing without a GPU).
    """
    cuda = device.type == "cuda"
    if settings.num_workers == AUTO:
        workers = min(WORKERS_PER_GPU, max(0, int(cpus_per_rank) - 1)) if cuda else 0
    else:
        workers = int(settings.num_workers)
    pin = cuda if settings.pin_memory == AUTO else bool(settings.pin_memory) and cuda
    return LoaderSettings(workers, pin)


@dataclass
class RankLoaders:
    train: DataLoader
    validation: DataLoader
    sampler: DistributedSampler
    batch: BatchPlan


def build_loaders(train_set: Dataset, val_set: Dataset, batch: BatchPlan, ranks: RankInfo, seed: int,
                  settings: LoaderSettings = LoaderSettings(0, False)) -> RankLoaders:
    """Loaders for this rank. ``seed`` must be the same on every rank (the sampler's shuffle is shared)."""
    sampler = DistributedSampler(train_set, num_replicas=ranks.world_size, rank=ranks.rank, shuffle=True, seed=seed)
    common = dict(num_workers=settings.num_workers, pin_memory=settings.pin_memory,
                  persistent_workers=settings.persistent_workers)
    train = DataLoader(train_set, batch_size=batch.micro, sampler=sampler, **common)
    val_shard = Subset(val_set, range(ranks.rank, len(val_set), ranks.world_size))
    validation = DataLoader(val_shard, batch_size=batch.micro, shuffle=False, **common)
    return RankLoaders(train, validation, sampler, batch)
