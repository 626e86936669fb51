"""On a GPU: warm gangs with CUDA. The README's quickstart (hyperopt TPE + ASHA, a checkpoint every
epoch) as ``bench/warm_gangs.py`` runs it, each trial one DDP rank on one GPU, on warm gangs and with
``execution.gangs=fresh`` (a new Ray Train run per trial, CUDA context and all), side by side.

One rank, because a machine of one GPU cannot hold a world of two NCCL ranks (NCCL refuses two ranks
on one device), and a world of one rank needs no process group: the figure is the CUDA side of a warm
start (context, allocator, cuDNN and cuBLAS handles kept), not NCCL's. With one GPU the sweep runs one
trial at a time, so the first trial builds the gang and every later one finds it up.

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
from bench.warm_gangs import side_by_side

NAME = "gpu_warm_gangs"
#: One round each: a fresh run of the 10-trial quickstart takes about 4 minutes on one GPU, and the device
#: lent to a session holds 15 minutes for everything (rerun it to repeat, and report every run).
SIZES = {False: {"rounds": 1, "run_cap": 10}, True: {"rounds": 1, "run_cap": 4}}
#: One rank of one GPU (and the CPU it had) per trial.
ONE_GPU_RANK = ("resources.workers=1", "resources.gpus_per_worker=1")


def run(quick: bool) -> dict[str, Any]:
    import torch

    size = SIZES[quick]
    if not torch.cuda.is_available():
        rows = [figure(name, "fresh Ray Train run per trial", None, None, None, "s", note="not run: no CUDA")
                for name in ("quickstart on 1 GPU, command to leaderboard", "1-GPU trial start on a warm gang")]
        return {"figures": rows, "status": "not run: no CUDA", "sizes": size}
    wandb_mode = "offline" if importlib.util.find_spec("wandb") else "disabled"
    result = side_by_side(size, ONE_GPU_RANK, wandb_mode, quickstart_name="quickstart on 1 GPU, command to leaderboard",
                          start_name="1-GPU trial start on a warm gang",
                          trials_note=f"trials of 1 rank x 1 GPU, wandb {wandb_mode}")
    return {**result, "status": "run", "device": torch.cuda.get_device_name(0), "wandb": wandb_mode}


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench.run import main

    sys.exit(main([NAME] + sys.argv[1:]))
