"""Priors (``priors:``, issue 42) in the search-quality simulation (:mod:`bench.search.search_simulation`):
each of our searchers with its early stopping, without a prior, with a good one and with a bad one, on
the same seeds and budget as the search-quality benchmark.

The priors, as mf-prior-bench and PriorBand build them for their synthetic functions: a good prior is the
known optimum moved by a fixed draw of noise (``GOOD_NOISE`` of each range), a bad prior the worst of 1,000
uniform draws (both drawn once, from a fixed seed, so every run and seed sees the same belief); each at
medium confidence. Issue 42's goals, median over the seeds: with the good prior, the trial-epochs spent
until the median regret is no worse than the no-prior run's final median regret, at most half of the
budget; with the bad prior, a final median regret at most 1.2 times the no-prior one (PriorBand's claim
of robustness).
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import figure

NAME = "prior_quality"
SIZES = {False: {"seeds": list(range(20)), "problems": ["hartmann6", "branin"], "workers": 2, "max_t": 27,
                 "budget_trials": 20},
         True: {"seeds": [0, 1, 2], "problems": ["hartmann6"], "workers": 2, "max_t": 27, "budget_trials": 20}}
#: Ours: name -> (method, scheduler); the issue's two first.
CONTENDERS = {"TPE + ASHA": ("hyperopt", "asha"), "BOHB + HyperBand": ("bohb", "hyperband"),
              "random + ASHA": ("random", "asha"), "Optuna TPE + ASHA": ("optuna", "asha")}
#: Where each problem's minimum is (one of Branin's three).
OPTIMA = {"hartmann6": {"x1": 0.20169, "x2": 0.150011, "x3": 0.476874, "x4": 0.275332, "x5": 0.311652, "x6": 0.6573},
          "branin": {"x1": -np.pi, "x2": 12.275}}
#: The good prior's distance from the optimum: normal noise of this share of each range.
GOOD_NOISE = 0.05
PRIOR_SEED = 2026


def priors_of(problem) -> dict[str, dict[str, Any]]:
    """The good and the bad ``priors:`` block of ``problem``, each at medium confidence."""
    rng = np.random.default_rng(PRIOR_SEED)
    bounds = problem.bounds
    good = {}
    for name, (low, high) in bounds.items():
        moved = OPTIMA[problem.name][name] + rng.normal(0, GOOD_NOISE * (high - low))
        good[name] = float(min(max(moved, low), high))
    draws = [{name: float(rng.uniform(low, high)) for name, (low, high) in bounds.items()} for _ in range(1000)]
    bad = max(draws, key=lambda x: problem.f(x, 1.0))
    return {kind: {name: {"value": value, "confidence": "medium"} for name, value in point.items()}
            for kind, point in (("good", good), ("bad", bad))}


def _run(problem, method: str, scheduler: str, seed: int, size: dict[str, Any], priors: dict | None):
    from bench.search.contenders import TuneContender
    from bench.search.search_simulation import simulate

    budget = size["budget_trials"] * size["max_t"]
    contender = TuneContender(problem, method, scheduler, seed, size["max_t"], size["budget_trials"],
                              size["workers"], priors=priors)
    return simulate(problem, contender, workers=size["workers"], budget=budget, max_t=size["max_t"])


def _median_curve(curves, budget: int) -> list[float]:
    return [statistics.median(c.at(spent) for c in curves) for spent in range(1, budget + 1)]


def run(quick: bool) -> dict[str, Any]:
    from bench.search.search_quality import problem_named

    size = SIZES[quick]
    budget = size["budget_trials"] * size["max_t"]
    figures, table = [], {}
    for name in size["problems"]:
        problem = problem_named(name, size["max_t"])
        beliefs = priors_of(problem)
        start = time.perf_counter()
        for label, (method, scheduler) in CONTENDERS.items():
            curves = {kind: [_run(problem, method, scheduler, seed, size, beliefs.get(kind)) for seed in size["seeds"]]
                      for kind in ("none", "good", "bad")}
            median = {kind: _median_curve(c, budget) for kind, c in curves.items()}
            final = {kind: m[-1] for kind, m in median.items()}
            reached = next((spent for spent, r in enumerate(median["good"], start=1) if r <= final["none"]), None)
            row = {kind: {"final": final[kind], "area": statistics.median(c.area(budget) for c in curves[kind]),
                          "finals": [c.at(budget) for c in curves[kind]]} for kind in curves}
            row["good reaches the no-prior final at"] = reached
            table[f"{name}, {label}"] = row
            note = (f"median over {len(size['seeds'])} seeds, {size['workers']} workers, budget {budget} trial-epochs; "
                    f"final regret without / good / bad: {final['none']:.3g} / {final['good']:.3g} / {final['bad']:.3g}")
            figures.append(figure(f"{name}, {label}: good prior, share of the budget to reach the no-prior final "
                                  f"regret", "no prior", 1.0, (reached or budget + 1) / budget, "<= 0.5", note=note))
            figures.append(figure(f"{name}, {label}: bad prior, final regret / no prior's", "no prior", final["none"],
                                  final["bad"] / final["none"] if final["none"] > 0 else float("inf"), "<= 1.2",
                                  note=note))
            print(f"    {name}, {label}: final none {final['none']:.3g}, good {final['good']:.3g} (reached at "
                  f"{reached}/{budget}), bad {final['bad']:.3g} ({time.perf_counter() - start:.0f} s)", flush=True)
    return {"figures": figures, "sizes": size, "priors": {n: priors_of(problem_named(n, size["max_t"]))
                                                          for n in size["problems"]}, "table": table}


if __name__ == "__main__":
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))
    from bench.run import main

    sys.exit(main([NAME] + sys.argv[1:]))
