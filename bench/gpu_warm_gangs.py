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

from bench.common import figure, interleaved, median
from bench.warm_gangs import TARGET_QUICKSTART_S, TARGET_WARM_START_S, quickstart

NAME = "gpu_warm_gangs"
SIZES = {False: {"rounds": 2, "run_cap": 10}, True: {"rounds": 1, "run_cap": 4}}
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
    rounds = interleaved({gangs: (lambda gangs=gangs: quickstart(gangs, size["run_cap"], ONE_GPU_RANK, wandb_mode))
                          for gangs in ("warm", "fresh")}, size["rounds"])
    warm, fresh = rounds["warm"], rounds["fresh"]
    warm_starts = [t["startup_s"] for r in warm for t in r["trials"][1:]]
    cold_builds = [r["trials"][0]["startup_s"] for r in warm]
    fresh_starts = [t["startup_s"] for r in fresh for t in r["trials"]]
    figures = [
        figure("quickstart on 1 GPU, command to leaderboard", "fresh Ray Train run per trial",
               median([r["wall_s"] for r in fresh]), median([r["wall_s"] for r in warm]), TARGET_QUICKSTART_S, "s",
               note=f"{size['run_cap']} trials of 1 rank x 1 GPU, wandb {wandb_mode}, median of {size['rounds']} "
                    "round(s); every run: warm " + ", ".join(f"{r['wall_s']:.1f}" for r in warm) + " s; fresh "
                    + ", ".join(f"{r['wall_s']:.1f}" for r in fresh) + " s"),
        figure("1-GPU trial start on a warm gang", "fresh Ray Train run per trial", median(fresh_starts),
               median(warm_starts), TARGET_WARM_START_S, "s",
               note=f"trial start to first report less its first epoch, median of {len(warm_starts)} warm "
                    f"trials (max {max(warm_starts):.2f} s); the cold gang build (first trial): "
                    + ", ".join(f"{s:.1f}" for s in cold_builds) + " s"),
    ]
    return {"figures": figures, "status": "run", "device": torch.cuda.get_device_name(0), "wandb": wandb_mode,
            "sizes": size, "rounds": rounds}


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench.run import main

    sys.exit(main([NAME] + sys.argv[1:]))
