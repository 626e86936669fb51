"""Run a function on N real processes joined in a gloo process group (no Ray): what ``torchrun``
would do, small enough for a test. Each rank's return value comes back to the test."""

from __future__ import annotations

import importlib
import pickle
from pathlib import Path
from typing import Any

import torch.distributed as dist
import torch.multiprocessing as mp


def _rank_main(rank: int, world_size: int, workdir: str, target: str, kwargs: dict) -> None:
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
