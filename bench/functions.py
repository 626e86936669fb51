"""Multi-fidelity Branin and Hartmann-6 (closed forms) and the trainable that reports them epoch by
epoch: the known-optimum benchmark's problems. numpy only: a trial imports neither torch nor the service.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from typing import Any

import numpy as np

# ---------------------------------------------------------------------------- known optima

# Multi-fidelity Branin and Hartmann-6 as BoTorch defines them (AugmentedBranin, AugmentedHartmann):
# the fidelity s in [0, 1] shifts one coefficient; at s = 1 they are the textbook functions.
BRANIN_BOUNDS = {"x1": (-5.0, 10.0), "x2": (0.0, 15.0)}
BRANIN_MIN = 0.397887357729739
HARTMANN_BOUNDS = {f"x{i}": (0.0, 1.0) for i in range(1, 7)}
HARTMANN_MIN = -3.322368011415515
_H_ALPHA = np.array([1.0, 1.2, 3.0, 3.2])
_H_A = np.array([[10, 3, 17, 3.5, 1.7, 8], [0.05, 10, 17, 0.1, 8, 14],
                 [3, 3.5, 1.7, 10, 17, 8], [17, 8, 0.05, 10, 0.1, 14]])
_H_P = 1e-4 * np.array([[1312, 1696, 5569, 124, 8283, 5886], [2329, 4135, 8307, 3736, 1004, 9991],
                        [2348, 1451, 3522, 2883, 3047, 6650], [4047, 8828, 8732, 5743, 1091, 381]])


def branin(x: dict[str, float], s: float = 1.0) -> float:
    x1, x2 = float(x["x1"]), float(x["x2"])
    t1 = x2 - (5.1 / (4 * math.pi ** 2) - 0.1 * (1 - s)) * x1 ** 2 + 5 / math.pi * x1 - 6
    return t1 ** 2 + 10 * (1 - 1 / (8 * math.pi)) * math.cos(x1) + 10


def hartmann6(x: dict[str, float], s: float = 1.0) -> float:
    point = np.array([float(x[f"x{i}"]) for i in range(1, 7)])
    inner = np.exp(-np.sum(_H_A * (point - _H_P) ** 2, axis=1))
    alpha = _H_ALPHA.copy()
    alpha[0] -= 0.1 * (1 - s)
    return float(-np.sum(alpha * inner))


FUNCTIONS = {"branin": (branin, BRANIN_BOUNDS, BRANIN_MIN), "hartmann6": (hartmann6, HARTMANN_BOUNDS, HARTMANN_MIN)}


def closed_form_trial(config: dict[str, Any], function: str = "branin", max_t: int = 9,
                      checkpointing: bool = False) -> None:
    """Report ``value`` = f(x, s) at fidelity s = epoch / max_t for epochs 1..max_t (resuming after the
    checkpointed epoch when paused and continued)."""
    from ray import tune

    f = FUNCTIONS[function][0]
    start = 0
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as directory:
            with open(os.path.join(directory, "epoch.json")) as stream:
                start = int(json.load(stream))
    for epoch in range(start + 1, max_t + 1):
        metrics = {"epoch": epoch, "value": f(config, epoch / max_t)}
        if checkpointing:
            with tempfile.TemporaryDirectory() as directory:
                with open(os.path.join(directory, "epoch.json"), "w") as stream:
                    json.dump(epoch, stream)
                tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(directory))
        else:
            tune.report(metrics)
