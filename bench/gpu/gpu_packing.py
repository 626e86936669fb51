"""On a GPU: the README's quickstart (10 trials, hyperopt TPE + ASHA, a checkpoint every epoch) on one GPU,
one trial per GPU against packed trials (``resources.gpus_per_worker`` 1/4 and 1/8: that many warm gangs
share the GPU, each rank held to its share of the GPU's memory; and ``auto``, which measures the first
trial and chooses, its probe's time included), run as a user runs it
(``bench.service.warm_gangs.quickstart``: the whole command in a child process). Each trial is one rank
(NCCL refuses two ranks on one GPU) of one CPU. The anchor is the same sweep on this project's 2-core
CPU machine (docs/benchmarks.md: 18.6 s).

Packing changes the search a little: with several trials at once, TPE proposes some configs before the
results of the earlier ones are in, as on any cluster. Without CUDA nothing runs.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

from bench.common import figure

NAME = "gpu_packing"
SIZES = {False: {"run_cap": 10, "shares": [1.0, 0.25, 0.125, "auto"]}, True: {"run_cap": 10, "shares": [1.0, "auto"]}}
#: The quickstart on the 2-core CPU machine (README, docs/benchmarks.md), the issue's bound for one GPU.
CPU_QUICKSTART_S = 18.6


def run(quick: bool) -> dict[str, Any]:
    import torch

    from bench.service.warm_gangs import quickstart

    size = SIZES[quick]
    if not torch.cuda.is_available():
        return {"figures": [figure("quickstart on 1 GPU, packed", "2-core CPU", CPU_QUICKSTART_S, None, None, "s",
                                   note="not run: no CUDA")], "status": "not run: no CUDA", "sizes": size}
    wandb_mode = "offline" if importlib.util.find_spec("wandb") else "disabled"
    runs = {}
    for share in size["shares"]:
        settings = ("resources.workers=1", "resources.cpus_per_worker=1", f"resources.gpus_per_worker={share}")
        runs[share] = quickstart("warm", size["run_cap"], settings, wandb_mode)
    alone = runs[1.0]["wall_s"]
    figures = [figure(f"quickstart on 1 GPU, gpus_per_worker {share if share == 'auto' else f'{share:g}'}",
                      "2-core CPU", CPU_QUICKSTART_S, runs[share]["wall_s"], f"<= {CPU_QUICKSTART_S}", "s",
                      note=f"one trial per GPU: {alone:.1f} s; x{alone / runs[share]['wall_s']:.2f}"
                           + (f"; {runs[share]['packing']}" if runs[share].get("packing") else ""))
               for share in size["shares"]]
    return {"figures": figures, "status": "run", "device": torch.cuda.get_device_name(0), "sizes": size,
            "wandb": wandb_mode, "runs": {str(k): v for k, v in runs.items()}}


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))
    from bench.run import main

    sys.exit(main([NAME] + sys.argv[1:]))
