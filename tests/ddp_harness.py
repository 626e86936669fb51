"""Run a function on N real processes joined in a gloo process group (no Ray): what ``torchrun``
would do, small enough for a test. Each rank's return value comes back to the test.

Each rank computes on its share of the machine's CPUs (intra-op threads), as under ``torchrun``
(``OMP_NUM_THREADS=1`` for several ranks a node) and as a trial's ranks do under Ray (the rank actor's
CPUs). With every core's threads in each of 2 ranks on 2 cores, torch 2.13's first Adam step after a
``no_sync`` accumulation gave the ranks different weights in 4 of 66 fresh process pairs (docs/development.md).
"""

from __future__ import annotations

import importlib
import os
import pickle
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def _rank_main(rank: int, world_size: int, workdir: str, target: str, kwargs: dict) -> None:
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // world_size))
    dist.init_process_group("gloo", init_method=f"file://{workdir}/rendezvous", rank=rank, world_size=world_size)
    try:
        module_name, attr = target.split(":")
        result = getattr(importlib.import_module(module_name), attr)(**kwargs)
        (Path(workdir) / f"result_{rank}.pkl").write_bytes(pickle.dumps(result))
        dist.barrier()  # no rank tears gloo down while its peer still talks (a C++ abort otherwise)
    finally:
        dist.destroy_process_group()


def run_ranks(target: str, world_size: int, workdir: Path, **kwargs: Any) -> list[Any]:
    """Call ``module:function(**kwargs)`` on ``world_size`` spawned ranks; their results in rank order.

    A rank that raises fails the call with that rank's traceback (``torch.multiprocessing.spawn``).
    """
    workdir.mkdir(parents=True, exist_ok=True)
    mp.spawn(_rank_main, args=(world_size, str(workdir), target, kwargs), nprocs=world_size, join=True)
    return [pickle.loads((workdir / f"result_{rank}.pkl").read_bytes()) for rank in range(world_size)]
