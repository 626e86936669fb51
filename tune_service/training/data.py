"""DataLoaders for one rank: the training set sharded by a DistributedSampler (reshuffled every epoch
with ``set_epoch``), the validation set split into disjoint shards without padding (so the all-reduced
metrics equal a single-process evaluation), and the batch sizes derived from the sweep's ``batch_size``.

An iterable data set is sharded by :class:`RankShard`: each rank, and each DataLoader worker of it, takes
every n-th sample of the stream, so no sample is seen twice in an epoch.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sized, cast

import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler, IterableDataset, Subset, get_worker_info

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


def steps_per_epoch_of(train_set: Dataset, plan: BatchPlan, world_size: int, workers: int) -> int | None:
    """:func:`steps_per_epoch` of ``train_set`` as this module's loaders shard it; None for an iterable
    data set without a length."""
    if not isinstance(train_set, IterableDataset):
        return steps_per_epoch(len(cast(Sized, train_set)), plan, world_size)
    try:
        size = len(cast(Sized, train_set))  # TypeError where the iterable data set has no __len__
    except TypeError:
        return None
    shards = world_size * max(1, workers)
    per_worker = size // shards  # RankShard drops the incomplete last round
    micro_batches = max(1, workers) * math.ceil(per_worker / plan.micro)
    return math.ceil(micro_batches / plan.grad_accum_steps)


class RankShard(IterableDataset):
    """One rank's share of an iterable data set, split again over its DataLoader workers.

    Of each round of ``world_size x workers`` consecutive samples, this rank's worker ``w`` takes the one
    at ``rank x workers + w``. ``equal`` (for training) drops an incomplete last round, so that every rank
    makes the same number of steps (a rank with a batch more would wait for its peers in DDP's all-reduce
    forever); without it (validation) every sample counts once.
    """

    def __init__(self, source: IterableDataset, rank: int, world_size: int, equal: bool):
        self.source, self.rank, self.world_size, self.equal = source, rank, world_size, equal

    def set_epoch(self, epoch: int) -> None:
        """Passed on to the source, for a data set that reshuffles its stream per epoch."""
        if hasattr(self.source, "set_epoch"):
            self.source.set_epoch(epoch)

    def __iter__(self) -> Iterator[Any]:
        info = get_worker_info()
        workers, worker = (info.num_workers, info.id) if info is not None else (1, 0)
        shards, index = self.world_size * workers, self.rank * workers + worker
        stream = iter(self.source)
        if not self.equal:
            yield from itertools.islice(stream, index, None, shards)
            return
        while len(round_ := list(itertools.islice(stream, shards))) == shards:
            yield round_[index]


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
    #: What reshuffles the training data each epoch: the DistributedSampler, or an iterable's RankShard.
    shuffler: DistributedSampler | RankShard
    batch: BatchPlan

    def set_epoch(self, epoch: int) -> None:
        self.shuffler.set_epoch(epoch)  # a different shuffle every epoch, the same on every rank


def build_loaders(
    train_set: Dataset,
    val_set: Dataset,
    batch: BatchPlan,
    ranks: RankInfo,
    seed: int,
    settings: LoaderSettings = LoaderSettings(0, False),
    collate: Callable[[list], Any] | None = None,
) -> RankLoaders:
    """Loaders for this rank. ``seed`` must be the same on every rank (the sampler's shuffle is shared);
    ``collate`` is the task's ``collate_fn`` (torch's default when None)."""
    common: dict[str, Any] = dict(
        num_workers=settings.num_workers,
        pin_memory=settings.pin_memory,
        persistent_workers=settings.persistent_workers,
        collate_fn=collate,
    )
    shuffler: DistributedSampler | RankShard
    if isinstance(train_set, IterableDataset):
        shuffler = RankShard(train_set, ranks.rank, ranks.world_size, equal=True)
        train = DataLoader(shuffler, batch_size=batch.micro, **common)
    else:
        shuffler = DistributedSampler(
            train_set, num_replicas=ranks.world_size, rank=ranks.rank, shuffle=True, seed=seed
        )
        train = DataLoader(train_set, batch_size=batch.micro, sampler=shuffler, **common)
    val_shard: Dataset
    if isinstance(val_set, IterableDataset):
        val_shard = RankShard(val_set, ranks.rank, ranks.world_size, equal=False)
    else:
        val_shard = Subset(val_set, range(ranks.rank, len(cast(Sized, val_set)), ranks.world_size))
    validation = DataLoader(val_shard, batch_size=batch.micro, shuffle=False, **common)
    return RankLoaders(train, validation, shuffler, batch)
