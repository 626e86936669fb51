"""On a GPU: warm gangs with CUDA. The README's quickstart (hyperopt TPE + ASHA, a checkpoint every
epoch) as ``bench/service/warm_gangs.py`` runs it, on warm gangs and with ``execution.gangs=fresh`` (a new Ray
Train run per trial, CUDA context and all), side by side.

Each trial is two DDP ranks of one GPU each, an NCCL world, where the machine has two GPUs or more; on a
machine of one GPU it is one rank, because NCCL refuses two ranks on one device, and a world of one rank
needs no process group: the figure is then the CUDA side of a warm start (context, allocator, cuDNN and
cuBLAS handles kept), not NCCL's. With two GPUs (or one) the sweep runs one trial at a time, so the first
trial builds the gang and every later one finds it up.

wandb logs offline where it is installed, else is disabled (the result says which).

Figures: the quickstart's wall time and a trial's start (trial start to first report, less its first
epoch) on a warm gang, each beside the fresh run; the cold gang build in the note. Without CUDA nothing
runs and the result says ``not run: no CUDA``.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

from bench.common import figure
from bench.service.warm_gangs import side_by_side

NAME = "gpu_warm_gangs"
#: One round each: a fresh run of the 10-trial quickstart takes about 4 minutes on one GPU, and the device
#: lent to a session holds 15 minutes for everything (rerun it to repeat, and report every run).
SIZES = {False: {"rounds": 1, "run_cap": 10}, True: {"rounds": 1, "run_cap": 4}}


def ranks_per_trial(gpus: int) -> int:
    """A trial's ranks, each of one GPU: two (an NCCL world) where the machine has two GPUs, else one."""
    return 2 if gpus >= 2 else 1


def run(quick: bool) -> dict[str, Any]:
    import torch

    size = SIZES[quick]
    if not torch.cuda.is_available():
        rows = [figure(name, "fresh Ray Train run per trial", None, None, None, "s", note="not run: no CUDA")
                for name in ("quickstart on 1 GPU, command to leaderboard", "1-GPU trial start on a warm gang")]
        return {"figures": rows, "status": "not run: no CUDA", "sizes": size}
    wandb_mode = "offline" if importlib.util.find_spec("wandb") else "disabled"
    ranks = ranks_per_trial(torch.cuda.device_count())
    world, gpus = ("1 GPU", "1-GPU") if ranks == 1 else (f"{ranks} GPUs (NCCL)", f"{ranks}-GPU (NCCL)")
    result = side_by_side(size, (f"resources.workers={ranks}", "resources.gpus_per_worker=1"), wandb_mode,
                          quickstart_name=f"quickstart on {world}, command to leaderboard",
                          start_name=f"{gpus} trial start on a warm gang",
                          trials_note=f"trials of {ranks} rank(s) x 1 GPU, wandb {wandb_mode}")
    return {**result, "status": "run", "device": torch.cuda.get_device_name(0), "ranks_per_trial": ranks,
            "wandb": wandb_mode}


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))
    from bench.run import main

    sys.exit(main([NAME] + sys.argv[1:]))
