"""Rank helpers for the shared loop: who am I, per-rank seeds, and reducing metrics over all ranks."""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist


@dataclass(frozen=True)
class RankInfo:
    rank: int
    world_size: int

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def rank_info() -> RankInfo:
    """This process's rank and the world size (0 of 1 outside a process group)."""
    if dist.is_available() and dist.is_initialized():
        return RankInfo(dist.get_rank(), dist.get_world_size())
    return RankInfo(0, 1)


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch. Called with the same seed on every rank before building the model
    (identical initial weights), then with ``seed + rank`` for everything each rank draws on its own."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def all_reduce_sum(values: torch.Tensor) -> torch.Tensor:
    """Sum a tensor of per-rank totals over all ranks (in place; a no-op without a process group).

    Metrics are reduced as sums and counts, never as per-rank means, so ranks with more samples weigh more.
    """
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        dist.all_reduce(values, op=dist.ReduceOp.SUM)
    return values
