"""Fused bundles in a sweep: one sweep of the digits MLP (random search over Adam's lr and weight decay,
ASHA, one rank per trial, a checkpoint every epoch, wandb offline) run as a user runs it, ``tune-run``,
with each trial alone on a warm gang and with ``execution.bundle: 8``, side by side, the order
alternating by round. Each run is the whole command in a child process: Python's and Ray's start, the
sweep, the leaderboard.

Figure: the bundled sweep's trials per hour over the same sweep's with every trial alone (target >= 2,
the issue's CPU row for a bundle of 8, here through the whole service: Tune, ASHA, wandb, checkpoints).
Both sweeps use the machine's two slots: two warm gangs of one rank, each training one trial at a time
or one bundle of up to 8 members at a time. A third variant is ``execution.bundle: auto``: its trials per
hour over alone's, and the size it chose in each run.

On a machine with a GPU the trials run on it, each rank with one CPU: alone at one GPU per trial, alone
packed eight to the GPU (``gpus_per_worker: 0.125``), and in bundles of 8 at one GPU per bundle.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from bench.common import figure, interleaved, median

NAME = "bundled_sweep"
SIZES = {False: {"rounds": 2, "run_cap": 32}, True: {"rounds": 1, "run_cap": 16}}
TARGET_RATIO = ">= 2"
BUNDLE = 8


def sweep_spec(run_cap: int, gpus_per_worker: float = 0) -> dict[str, Any]:
    return {
        "name": "bundled-sweep", "task": "digits", "method": "random", "run_cap": run_cap, "seed": 0,
        "metric": {"name": "val_accuracy", "goal": "maximize"},
        "parameters": {
            "lr": {"distribution": "log_uniform_values", "min": 1e-4, "max": 3e-2},
            "weight_decay": {"distribution": "log_uniform_values", "min": 1e-6, "max": 1e-2},
            "optimizer": {"value": "adam"},
        },
        "scheduler": {"type": "asha", "max_t": 8, "grace_period": 1, "reduction_factor": 3},
        "resources": {"workers": 1, "cpus_per_worker": 1, "gpus_per_worker": gpus_per_worker},
    }


def one_sweep(bundle: int | str, run_cap: int, gpus_per_worker: float = 0) -> dict[str, Any]:
    """One ``tune-run`` of the sweep with ``execution.bundle`` ``bundle`` (a size, or ``auto``): its wall
    time, its trials and, under ``auto``, the size it chose."""
    with tempfile.TemporaryDirectory(prefix="bench_bundled_") as storage:
        spec = Path(storage, "sweep.yaml")
        spec.write_text(yaml.safe_dump({**sweep_spec(run_cap, gpus_per_worker), "execution": {"bundle": bundle}}))
        command = [sys.executable, "-m", "tune_service.cli", str(spec), "--storage", storage, "--name", "sweep"]
        started = time.perf_counter()
        done = subprocess.run(command, cwd=storage, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env={**os.environ, "WANDB_MODE": "offline"})
        wall_s = time.perf_counter() - started
        if done.returncode != 0:
            raise RuntimeError(f"bundle {bundle} exited {done.returncode}:\n{done.stdout[-3000:]}")
        summary = json.loads(Path(storage, "sweep", "summary.json").read_text())
    trials = summary["trials"]
    epochs = sum(t["epochs"] for t in trials)
    best = summary.get("best", {}).get("metrics", {}).get("val_accuracy")
    print(f"      bundle {bundle}, {gpus_per_worker:g} GPU: {wall_s:.1f} s, {len(trials)} trials, {epochs} epochs, "
          f"best {best}", flush=True)
    chose = summary.get("bundle", {}).get("members")  # bundle: auto's choice
    return {"wall_s": wall_s, "trials": len(trials), "epochs": epochs, "best_val_accuracy": best,
            "trials_per_hour": len(trials) / wall_s * 3600, **({"auto_chose": chose} if chose else {})}


def run(quick: bool) -> dict[str, Any]:
    import torch

    size = SIZES[quick]
    # name -> (bundle, GPUs per rank)
    variants: dict[str, tuple[int | str, float]] = {"1": (1, 0.0), str(BUNDLE): (BUNDLE, 0.0), "auto": ("auto", 0.0)}
    if torch.cuda.is_available():
        variants = {"1": (1, 1.0), "1 packed": (1, 1 / BUNDLE), str(BUNDLE): (BUNDLE, 1.0), "auto": ("auto", 1.0)}
    rounds = interleaved({name: (lambda v=v: one_sweep(v[0], size["run_cap"], v[1])) for name, v in variants.items()},
                         size["rounds"])
    alone, bundled = rounds["1"], rounds[str(BUNDLE)]
    ratios = [b["trials_per_hour"] / a["trials_per_hour"] for a, b in zip(alone, bundled, strict=True)]
    figures = [
        figure(f"sweep in bundles of {BUNDLE}, trials per hour / alone", "each trial alone on a warm gang",
               1.0, median(ratios), TARGET_RATIO, "x",
               note=f"{size['run_cap']} trials, random + ASHA, median of {size['rounds']} round(s); every run: "
                    "alone " + ", ".join(f"{r['wall_s']:.1f}" for r in alone) + " s; bundled "
                    + ", ".join(f"{r['wall_s']:.1f}" for r in bundled) + " s; ratios "
                    + ", ".join(f"{r:.2f}" for r in ratios)),
    ]
    automatic = rounds["auto"]
    figures.append(figure("sweep with bundle: auto, trials per hour / alone", "each trial alone on a warm gang",
                          1.0, median([b["trials_per_hour"] / a["trials_per_hour"]
                                       for a, b in zip(alone, automatic, strict=True)]), None, "x",
                          note="every run: auto " + ", ".join(f"{r['wall_s']:.1f} s (chose {r.get('auto_chose')})"
                                                              for r in automatic)))
    if "1 packed" in rounds:
        packed = rounds["1 packed"]
        figures.append(figure(f"sweep packed {BUNDLE} to the GPU, trials per hour / alone", "each trial alone on "
                              "a warm gang", 1.0, median([p["trials_per_hour"] / a["trials_per_hour"]
                                                          for a, p in zip(alone, packed, strict=True)]), None, "x",
                              note="every run: packed " + ", ".join(f"{r['wall_s']:.1f}" for r in packed) + " s"))
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    return {"figures": figures, "sizes": size, "rounds": rounds, "device": device}


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))
    from bench.run import main

    sys.exit(main([NAME] + sys.argv[1:]))
