"""Search quality over two objectives: our multi-objective search and early stopping against Optuna's
multi-objective TPE (which prunes nothing: Optuna has no multi-objective pruner, optuna#3450) and Syne
Tune's MOASHA, on the same problems, budgets and concurrency, in one process.

Problems (both objectives minimised, each with a known Pareto front):

- ZDT1 (Zitzler, Deb and Thiele 2000) on four variables in [0, 1]: ``f1 = x1``, ``f2 = g (1 - sqrt(f1 / g))``,
  ``g = 1 + 9 mean(x2..x4)``; the front is ``f2 = 1 - sqrt(f1)``.
- DTLZ2 (Deb, Thiele, Laumanns and Zitzler 2002) with two objectives on four variables in [0, 1]:
  ``f1 = (1 + g) cos(x1 pi / 2)``, ``f2 = (1 + g) sin(x1 pi / 2)``, ``g = sum((x_i - 0.5)^2, i >= 2)``;
  the front is the quarter circle of radius 1.
- The digits task: its validation error (1 - accuracy) against its parameter count, from the recorded
  learning curves of :mod:`bench.search.digits_curves` (the front: the table's undominated points at
  ``max_t`` epochs; not in ``--quick``).

The fidelity of the closed forms: trained ``epoch`` of ``max_t`` epochs (``s = epoch / max_t``), each
objective is its value plus ``(1 - s) * delta(x)``, ``delta(x) = 0.25 (1 + sin(6 sum(x)))``: a loss that
falls as the trial trains, by an amount that differs between configurations, so that an early ranking is
informative but not exact. The digits curves are real training: the error after that many epochs.

The metric: after every trial-epoch, the hypervolume of the front of every trial's last report (what the
service's results show: a trial stopped early counts with the values it was stopped at), as a share of
the true front's. The reference points are BoTorch's (``botorch.test_functions.multi_objective``): ZDT1
(11, 11), DTLZ2 (1.1, 1.1), where the true hypervolumes are 121 - 1/3 and 1.21 - pi/4; the digits
problem's is a tenth of each objective's range over the whole table beyond its worst value there. The
hypervolume regret is one minus that share; the figure is its area per trial-epoch (its mean over the
budget), as the search-quality benchmark measures simple regret. Simulated sweeps
(:mod:`bench.search.search_simulation`): ``budget`` trial-epochs, ``workers`` trials at a time, every
early-stopping contender halving by 3 from one epoch.

Contenders: ours (the Tune searcher and scheduler objects a sweep of ``metrics:`` builds: Optuna's
multi-objective TPE with MO-ASHA, with HyperBand halving by Pareto order, and without early stopping; random
search with MO-ASHA), Optuna's multi-objective TPE (its defaults, ask and tell, every trial to ``max_t``)
and Syne Tune's MOASHA (random search; its non-dominated sorting).
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Callable

import numpy as np

from bench.common import figure
from bench.search.contenders import SyneTuneContender
from bench.search.search_quality import _quartiles

NAME = "pareto_quality"
SIZES = {False: {"seeds": list(range(20)), "problems": ["zdt1", "dtlz2", "digits"], "workers": [2, 8], "max_t": 27,
                 "budget_trials": 20},
         True: {"seeds": [0, 1], "problems": ["zdt1", "dtlz2"], "workers": [2], "max_t": 27, "budget_trials": 20}}
OBJECTIVES = ("f1", "f2")
#: Ours: name -> (method, scheduler), as a sweep of ``metrics:`` builds them.
OURS = {
    "ours: Optuna TPE + MO-ASHA": ("optuna", "asha"), "ours: Optuna TPE + MO-HyperBand": ("optuna", "hyperband"),
    "ours: Optuna TPE + FIFO": ("optuna", "fifo"), "ours: random + MO-ASHA": ("random", "asha"),
}
PEERS = ("optuna: MO TPE, no pruning", "syne tune: MOASHA")
ETA = 3
VARIABLES = {f"x{i}": (0.0, 1.0) for i in range(1, 5)}


@dataclass(frozen=True)
class ParetoProblem:
    """``f(x, s)``: both objectives (minimised) at fidelity ``s``; the true front's hypervolume against
    ``reference``."""

    name: str
    f: Callable[[dict[str, float], float], tuple[float, float]]
    bounds: dict[str, tuple[float, float]]
    reference: tuple[float, float]
    true_hypervolume: float


def _low_fidelity_offset(v: np.ndarray, s: float) -> float:
    return (1.0 - s) * 0.25 * (1.0 + math.sin(6.0 * float(v.sum())))


def zdt1(x: dict[str, float], s: float = 1.0) -> tuple[float, float]:
    v = np.array([x[name] for name in VARIABLES])
    g = 1.0 + 9.0 * float(v[1:].mean())
    f1 = float(v[0])
    offset = _low_fidelity_offset(v, s)
    return f1 + offset, g * (1.0 - math.sqrt(f1 / g)) + offset


def dtlz2(x: dict[str, float], s: float = 1.0) -> tuple[float, float]:
    v = np.array([x[name] for name in VARIABLES])
    g = float(((v[1:] - 0.5) ** 2).sum())
    angle = float(v[0]) * math.pi / 2
    offset = _low_fidelity_offset(v, s)
    return (1 + g) * math.cos(angle) + offset, (1 + g) * math.sin(angle) + offset


def digits_problem(max_t: int) -> ParetoProblem:
    """The digits curves' error against the digits MLP's parameter count (each hidden width's, counted on
    the task's own model)."""
    from bench.search import digits_curves
    from tune_service.results.front import reference_point
    from tune_service.search.pareto import non_dominated
    from tune_service.tasks.digits import Digits

    error = 1.0 - digits_curves.accuracy_curves(max_t)
    widths = digits_curves.GRID["log2_hidden"]
    params = [sum(p.numel() for p in Digits().model({**Digits.defaults, "hidden": round(2 ** w)}).parameters())
              for w in widths]

    def f(config: dict[str, float], s: float) -> tuple[float, float]:
        index = digits_curves.nearest(config)
        return float(error[index + (max(1, round(s * max_t)) - 1,)]), float(params[index[1]])

    points = [(float(error[i + (max_t - 1,)]), float(params[i[1]])) for i in np.ndindex(*error.shape[:-1])]
    front = [points[i] for i in non_dominated(points, ["min", "min"])]
    reference = reference_point(points, ["min", "min"])
    bounds = {name: (float(values[0]), float(values[-1])) for name, values in digits_curves.GRID.items()}
    return ParetoProblem("digits", f, bounds, (reference[0], reference[1]), _hypervolume(front, reference))


def _hypervolume(points, reference) -> float:
    from tune_service.results.front import hypervolume

    return hypervolume(points, ["min", "min"], reference)


def problem_named(name: str, max_t: int) -> ParetoProblem:
    if name == "digits":
        return digits_problem(max_t)
    f, reference, true_hypervolume = {"zdt1": (zdt1, (11.0, 11.0), 121 - 1 / 3),
                                      "dtlz2": (dtlz2, (1.1, 1.1), 1.21 - math.pi / 4)}[name]
    return ParetoProblem(name, f, VARIABLES, reference, true_hypervolume)


class HypervolumeRegret:
    """The anytime rule (:class:`bench.search.search_simulation.Anytime`): one minus the share of the true
    front's hypervolume that the front of every trial's last report dominates."""

    def __init__(self, problem: ParetoProblem):
        self.problem = problem
        self.last: dict[Any, tuple[float, float]] = {}

    def regret(self, trial_id: Any, config: dict[str, float], epoch: int, value: Any) -> float:
        self.last[trial_id] = value
        share = _hypervolume(list(self.last.values()), self.problem.reference) / self.problem.true_hypervolume
        return 1.0 - share


class OptunaMultiObjective:
    """Optuna's multi-objective TPE with its defaults, through ask and tell; every trial runs to ``max_t``
    (Optuna prunes no trial of several objectives)."""

    def __init__(self, problem: ParetoProblem, seed: int):
        import logging

        import optuna

        optuna.logging.set_verbosity(logging.WARNING)
        self.study = optuna.create_study(directions=["minimize", "minimize"],
                                         sampler=optuna.samplers.TPESampler(seed=seed))
        self.bounds = problem.bounds
        self.open: dict[int, Any] = {}

    def start(self) -> tuple[int, dict[str, float]]:
        trial = self.study.ask()
        self.open[trial.number] = trial
        return trial.number, {name: trial.suggest_float(name, low, high) for name, (low, high) in self.bounds.items()}

    def report(self, trial_id: int, epoch: int, value: Any) -> bool:
        return True

    def end(self, trial_id: int, epoch: int, value: Any, completed: bool) -> None:
        self.study.tell(self.open.pop(trial_id), list(value))


class SyneTuneMOASHA(SyneTuneContender):
    """Syne Tune's MOASHA (random configurations, non-dominated sorting at each rung), as its tuner drives
    it. It samples with numpy's global generator, seeded here."""

    def __init__(self, problem: ParetoProblem, seed: int, max_t: int):
        from syne_tune.config_space import uniform
        from syne_tune.optimizer.scheduler import SchedulerDecision
        from syne_tune.optimizer.schedulers.multiobjective.moasha import MOASHA

        np.random.seed(seed)
        space = {name: uniform(low, high) for name, (low, high) in problem.bounds.items()}
        self.scheduler = MOASHA(space, metrics=list(OBJECTIVES), do_minimize=True, time_attr="epoch", max_t=max_t,
                                grace_period=1, reduction_factor=ETA, random_seed=seed)
        self.go_on = SchedulerDecision.CONTINUE
        self.names = list(problem.bounds)
        self.trials: dict[int, Any] = {}

    def _result(self, epoch: int, value: Any) -> dict[str, Any]:
        return {**dict(zip(OBJECTIVES, value, strict=True)), "epoch": epoch}

    def report(self, trial_id: int, epoch: int, value: Any) -> bool:
        return self.scheduler.on_trial_result(self.trials[trial_id], self._result(epoch, value)) == self.go_on

    def end(self, trial_id: int, epoch: int, value: Any, completed: bool) -> None:
        if completed:
            self.scheduler.on_trial_complete(self.trials[trial_id], self._result(epoch, value))


def contender(name: str, problem: ParetoProblem, seed: int, size: dict[str, Any], workers: int):
    from bench.search.contenders import TuneContender

    if name in OURS:
        method, scheduler = OURS[name]
        return TuneContender(problem, method, scheduler, seed, size["max_t"], size["budget_trials"], workers,
                             objectives=OBJECTIVES)
    if name == PEERS[0]:
        return OptunaMultiObjective(problem, seed)
    return SyneTuneMOASHA(problem, seed, size["max_t"])


def one_run(problem: ParetoProblem, name: str, seed: int, workers: int, size: dict[str, Any]) -> dict[str, float]:
    from bench.search.search_simulation import simulate

    budget = size["budget_trials"] * size["max_t"]
    started = time.perf_counter()
    curve = simulate(problem, contender(name, problem, seed, size, workers), workers=workers, budget=budget,
                     max_t=size["max_t"], anytime=HypervolumeRegret(problem))
    return {"area": curve.area(budget), "final": curve.at(budget), "trials": curve.trials,
            "wall_s": round(time.perf_counter() - started, 3)}


def run(quick: bool) -> dict[str, Any]:
    import warnings

    warnings.filterwarnings("ignore", category=FutureWarning, module="pandas")  # Syne Tune's pandas
    size = SIZES[quick]
    budget = size["budget_trials"] * size["max_t"]
    runs: dict[str, dict[str, list[dict[str, float]]]] = {}
    for problem_name in size["problems"]:
        problem = problem_named(problem_name, size["max_t"])
        for workers in size["workers"]:
            key = f"{problem_name}, {workers} workers"
            runs[key] = {name: [one_run(problem, name, seed, workers, size) for seed in size["seeds"]]
                         for name in [*OURS, *PEERS]}
            print(f"    {key}: " + ", ".join(
                f"{c} {statistics.median(r['area'] for r in rs):.3g}" for c, rs in runs[key].items()), flush=True)
    figures, table = [], {}
    for key, by_contender in runs.items():
        table[key] = {c: {"area_quartiles": _quartiles([r["area"] for r in rs]),
                          "final_quartiles": _quartiles([r["final"] for r in rs]),
                          "trials_median": statistics.median(r["trials"] for r in rs)}
                      for c, rs in by_contender.items()}
        ours = min(OURS, key=lambda c: table[key][c]["area_quartiles"][1])
        peer = min(PEERS, key=lambda c: table[key][c]["area_quartiles"][1])
        ours_area, peer_area = table[key][ours]["area_quartiles"][1], table[key][peer]["area_quartiles"][1]
        figures.append(figure(f"{key}: hypervolume-regret area, best of ours vs best peer", peer, peer_area,
                              ours_area, f"<= {peer_area:.4g}", met=ours_area <= peer_area,
                              note=f"ours: {ours}; median over {len(size['seeds'])} seeds, budget {budget} "
                                   f"trial-epochs"))
        mo_asha = "ours: Optuna TPE + MO-ASHA"
        figures.append(figure(f"{key}: hypervolume-regret area, our MO-ASHA vs Optuna's MO TPE without pruning",
                              PEERS[0], table[key][PEERS[0]]["area_quartiles"][1],
                              table[key][mo_asha]["area_quartiles"][1],
                              f"<= {table[key][PEERS[0]]['area_quartiles'][1]:.4g}",
                              met=table[key][mo_asha]["area_quartiles"][1] <= table[key][PEERS[0]]["area_quartiles"][1],
                              note="what early stopping over several objectives buys on the same searcher"))
    versions = {p: metadata.version(p) for p in ("ray", "optuna", "syne-tune")}
    return {"figures": figures, "sizes": size, "versions": versions, "table": table, "runs": runs}


if __name__ == "__main__":
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))
    from bench.run import main

    sys.exit(main([NAME] + sys.argv[1:]))
