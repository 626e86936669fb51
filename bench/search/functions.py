"""Multi-fidelity test functions with a known optimum (closed forms) and the trainable that reports them
epoch by epoch: the problems of the known-optimum and search-quality benchmarks. numpy only: a trial
imports neither torch nor the service.

Each is ``f(x, s)``, minimised, with a fidelity ``s`` in [0, 1] (the share of ``max_t`` epochs trained);
at ``s = 1`` it is the textbook function:

- Branin and Hartmann-6 as BoTorch defines them (``AugmentedBranin``, ``AugmentedHartmann``).
- Hartmann-3 with the fidelity shifting its first coefficient as in Hartmann-6 (the form of Kandasamy
  et al., "Multi-fidelity Bayesian Optimisation with Continuous Approximations", ICML 2017).
- Currin's exponential function (Currin et al. 1991), negated to be minimised, with the low fidelity of
  Xiong, Qian and Wu ("Sequential design and analysis of high-accuracy and low-accuracy computer codes",
  Technometrics 2013: the mean of four neighbouring points) and ``s`` mixing the two linearly.
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


def _hartmann(x: dict[str, float], s: float, a: np.ndarray, p: np.ndarray) -> float:
    """``-sum_i alpha_i exp(-sum_j a_ij (x_j - p_ij)^2)``, alpha's first coefficient lowered by ``0.1 (1 - s)``."""
    point = np.array([float(x[f"x{j}"]) for j in range(1, a.shape[1] + 1)])
    inner = np.exp(-np.sum(a * (point - p) ** 2, axis=1))
    alpha = _H_ALPHA.copy()
    alpha[0] -= 0.1 * (1 - s)
    return float(-np.sum(alpha * inner))


def hartmann6(x: dict[str, float], s: float = 1.0) -> float:
    return _hartmann(x, s, _H_A, _H_P)


HARTMANN3_BOUNDS = {f"x{i}": (0.0, 1.0) for i in range(1, 4)}
HARTMANN3_MIN = -3.86277978733266  # at (0.114589, 0.555649, 0.852547) (L-BFGS-B from 200 starts)
_H3_A = np.array([[3.0, 10, 30], [0.1, 10, 35], [3.0, 10, 30], [0.1, 10, 35]])
_H3_P = 1e-4 * np.array([[3689, 1170, 2673], [4699, 4387, 7470], [1091, 8732, 5547], [381, 5743, 8828]])


def hartmann3(x: dict[str, float], s: float = 1.0) -> float:
    return _hartmann(x, s, _H3_A, _H3_P)


CURRIN_BOUNDS = {"x1": (0.0, 1.0), "x2": (0.0, 1.0)}
CURRIN_MIN = -13.798722044728  # at x2 = 0, x1 = 0.216667 (L-BFGS-B from 200 starts)


def _currin_high(x1: float, x2: float) -> float:
    damping = 1.0 - math.exp(-1.0 / (2.0 * x2)) if x2 > 0 else 1.0  # its limit at x2 = 0
    return -damping * (2300 * x1 ** 3 + 1900 * x1 ** 2 + 2092 * x1 + 60) / (100 * x1 ** 3 + 500 * x1 ** 2 + 4 * x1 + 20)


def currin(x: dict[str, float], s: float = 1.0) -> float:
    x1, x2 = float(x["x1"]), float(x["x2"])
    high = _currin_high(x1, x2)
    if s >= 1.0:
        return high
    low = 0.25 * (_currin_high(x1 + 0.05, x2 + 0.05) + _currin_high(x1 + 0.05, max(0.0, x2 - 0.05))
                  + _currin_high(x1 - 0.05, x2 + 0.05) + _currin_high(x1 - 0.05, max(0.0, x2 - 0.05)))
    return s * high + (1 - s) * low


FUNCTIONS = {"branin": (branin, BRANIN_BOUNDS, BRANIN_MIN), "hartmann6": (hartmann6, HARTMANN_BOUNDS, HARTMANN_MIN),
             "hartmann3": (hartmann3, HARTMANN3_BOUNDS, HARTMANN3_MIN), "currin": (currin, CURRIN_BOUNDS, CURRIN_MIN)}


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
