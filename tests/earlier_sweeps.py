"""An earlier sweep's experiment directory, written in the files Tune writes (``sweep.json``, and per trial
``params.json`` and ``result.json``), for the tests of ``warm_start``: trials of a known loss over ``lr``
(best at 0.01) and ``hidden`` (best at 32)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from tune_service.experiment.layout import write_sweep_file
from tune_service.spec import load_spec

METRIC = "val_loss"
BEST_LOG_LR = -2.0  # the best lr is 0.01
LR = {"distribution": "log_uniform_values", "min": 1e-5, "max": 1.0}
METHODS = ["bayes", "optuna", "bohb"]


def loss(config: dict) -> float:
    return (math.log10(config["lr"]) - BEST_LOG_LR) ** 2 + (0.0 if config.get("hidden", 32) == 32 else 2.0)


def earlier_sweep(directory: Path, configs: list[dict], metric: str = METRIC, goal: str = "minimize",
                  epochs: int = 2, failed: tuple[int, ...] = (), size: str | None = None) -> Path:
    """An experiment directory holding ``configs`` as finished trials of ``epochs`` epochs each. ``size``:
    a second objective (minimised, ``metrics:``), reported as the trial's ``hidden`` times 100."""
    objective = {"metric": {"name": metric, "goal": goal}}
    if size:
        objective = {"metrics": [{"name": metric, "goal": goal}, {"name": size, "goal": "minimize"}]}
    spec = {"name": "earlier", "method": "random", **objective,
            "parameters": {"lr": LR, "hidden": {"values": [16, 32, 64]}}}
    write_sweep_file(directory, spec, None)
    for index, config in enumerate(configs):
        trial = directory / f"trial_{index:08x}"
        trial.mkdir()
        (trial / "params.json").write_text(json.dumps(config))
        rows = [{metric: loss(config) + (epochs - epoch) * 0.1, "epoch": epoch, "training_iteration": epoch,
                 "trial_id": f"{index:08x}", "timestamp": 1_800_000_000 + index,
                 **({size: config["hidden"] * 100} if size else {})} for epoch in range(1, epochs + 1)]
        (trial / "result.json").write_text("".join(json.dumps(row) + "\n" for row in rows))
        if index in failed:
            (trial / "error.txt").write_text("Traceback ...\nRuntimeError: boom\n")
    return directory


def random_configs(n: int, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    return [{"lr": float(10 ** rng.uniform(-5, 0)), "hidden": int(rng.choice([16, 32, 64])), "dropout": 0.1}
            for _ in range(n)]


def new_spec(method: str, warm: Path | None, **extra):
    return load_spec({"method": method, "run_cap": 30, "seed": 1, "metric": {"name": METRIC, "goal": "minimize"},
                      "parameters": {"lr": LR, "hidden": {"values": [16, 32, 64]}},
                      "scheduler": {"type": "hyperband" if method == "bohb" else "fifo", "max_t": 2},
                      **({"warm_start": str(warm)} if warm else {}), **extra})
