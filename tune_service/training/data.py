"""DataLoaders for one rank: the training set sharded by a DistributedSampler (reshuffled every epoch
with ``set_epoch``), the validation set split into disjoint shards without padding (so the all-reduced
metrics equal a single-process evaluation), and the per-rank batch derived from the global batch."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler, Subset

from tune_service.training.distributed import RankInfo


def per_rank_batch(global_batch: int, world_size: int) -> int:
    """The sweep's ``batch_size`` is global: it means the same at every world size."""
    return max(1, int(global_batch) // world_size)


def loader_workers(device: torch.device) -> int:
    """DataLoader worker processes for one rank, sized from the CPUs this process may really use.

    The rule of thumb is 4 per GPU, but never more than the CPUs the rank was given minus one for the
    training process itself; on a CPU-only rank the data is loaded in-process (0 workers), since worker
    processes would compete with training for the same cores.
    """
    if device.type != "cuda":
        return 0
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(0, min(4, cpus - 1))


@dataclass
class RankLoaders:
    train: DataLoader
    validation: DataLoader
    sampler: DistributedSampler
    batch_per_rank: int


def build_loaders(train_set: Dataset, val_set: Dataset, global_batch: int, ranks: RankInfo,
                  device: torch.device, seed: int) -> RankLoaders:
    """Loaders for this rank. ``seed`` must be the same on every rank (the sampler's shuffle is shared)."""
    batch = per_rank_batch(global_batch, ranks.world_size)
    sampler = DistributedSampler(train_set, num_replicas=ranks.world_size, rank=ranks.rank, shuffle=True, seed=seed)
    workers = loader_workers(device)
    common = dict(num_workers=workers, pin_memory=device.type == "cuda", persistent_workers=workers > 0)
    train = DataLoader(train_set, batch_size=batch, sampler=sampler, **common)
    val_shard = Subset(val_set, range(ranks.rank, len(val_set), ranks.world_size))
    validation = DataLoader(val_shard, batch_size=batch, shuffle=False, **common)
    return RankLoaders(train, validation, sampler, batch)


def steps_per_epoch(dataset_size: int, global_batch: int, world_size: int) -> int:
    """Optimizer steps per epoch on each rank: ceil(ceil(N / world) / batch per rank)."""
    return math.ceil(math.ceil(dataset_size / world_size) / per_rank_batch(global_batch, world_size))
