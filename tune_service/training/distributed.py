"""Rank helpers for the shared loop: who am I, per-rank seeds, reducing metrics over all ranks, and
logging from rank 0 only."""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist

#: The shared loop's logger; on ranks other than 0 its records are dropped (one copy of every line).
log = logging.getLogger("tune_service.training")


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
    """Seed Python, NumPy and torch (CPU and every CUDA device)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    # torch.manual_seed also seeds every other backend torch knows (MPS, XPU, MTIA, ...): 100 times the
    # cost of these two, paid once per epoch and report by every rank.
    torch.default_generator.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


def rank_epoch_seed(seed: int, rank: int, epoch: int) -> int:
    """The seed of what ``rank`` draws on its own in ``epoch`` (dropout, augmentation): different per rank
    and per epoch, and recomputable, so a trial resumed at epoch 5 draws what it would have drawn."""
    return int(np.random.SeedSequence([seed, rank, epoch]).generate_state(1)[0])


def rank_step_seed(seed: int, rank: int, step: int) -> int:
    """The seed of what ``rank`` draws after a report in the middle of an epoch, at optimizer step
    ``step``: a trial resumed from that report's checkpoint draws what it would have drawn."""
    return int(np.random.SeedSequence([seed, rank, step, 1]).generate_state(1)[0])


def all_reduce_sum(values: torch.Tensor) -> torch.Tensor:
    """Sum a tensor of per-rank totals over all ranks (in place; a no-op without a process group).

    Metrics are reduced as sums and counts, never as per-rank means, so ranks with more samples weigh more.
    """
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        dist.all_reduce(values, op=dist.ReduceOp.SUM)
    return values


class _MainRankOnly(logging.Filter):
    def __init__(self):
        super().__init__()
        self.is_main = True

    def filter(self, record: logging.LogRecord) -> bool:
        return self.is_main


_main_rank_only = _MainRankOnly()


def log_from_main_rank_only(ranks: RankInfo) -> logging.Logger:
    """The loop's logger, silenced on every rank but 0 (N ranks would print N copies of every line)."""
    _main_rank_only.is_main = ranks.is_main
    if _main_rank_only not in log.filters:
        log.addFilter(_main_rank_only)
    return log
