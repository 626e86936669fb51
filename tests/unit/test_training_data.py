"""The shared loop's data contract, checked without Ray: the global batch, disjoint shards that
reshuffle every epoch, and validation shards that cover every sample exactly once."""

from __future__ import annotations

import torch
from torch.utils.data import TensorDataset

from tune_service.training.data import build_loaders, per_rank_batch, steps_per_epoch
from tune_service.training.distributed import RankInfo

CPU = torch.device("cpu")


def indexed(n: int) -> TensorDataset:
    return TensorDataset(torch.arange(n), torch.zeros(n, dtype=torch.long))


def epoch_indices(loaders, epoch: int) -> list[int]:
    loaders.sampler.set_epoch(epoch)
    return [int(i) for batch, _ in loaders.train for i in batch]


def test_batch_size_is_global():
    assert per_rank_batch(64, 1) == 64 and per_rank_batch(64, 2) == 32 and per_rank_batch(64, 4) == 16
    # digits' 1437 training images: the same number of optimizer steps per epoch at world 1 and 2
    assert steps_per_epoch(1437, 64, 1) == 23 and steps_per_epoch(1437, 64, 2) == 23


def test_training_shards_are_disjoint_cover_the_data_and_reshuffle_each_epoch():
    data = indexed(100)
    ranks = [build_loaders(data, data, 10, RankInfo(r, 2), CPU, seed=0) for r in range(2)]
    assert [len(list(r.train)) for r in ranks] == [steps_per_epoch(100, 10, 2)] * 2
    first = [epoch_indices(r, 1) for r in ranks]
    assert set(first[0]).isdisjoint(first[1]) and sorted(first[0] + first[1]) == list(range(100))
    second = [epoch_indices(r, 2) for r in ranks]
    assert second[0] != first[0]  # set_epoch changes the order


def test_validation_shards_cover_each_sample_exactly_once():
    data = indexed(101)  # not divisible by the world size: no padding, no duplicates
    seen = [int(i) for r in range(3)
            for batch, _ in build_loaders(data, data, 9, RankInfo(r, 3), CPU, seed=0).validation for i in batch]
    assert sorted(seen) == list(range(101))
