"""The two leaders of search_quality, our BOHB with its HyperBand and DEHB, at 100 seeds: which is ahead,
column by column, and by how much more than chance.

``search_quality`` ranks 15 contenders at 20 seeds; at that size these two swap places between runs in a
column or two (their median areas a few percent apart, each contender's own spread wider). Here the two
alone run 100 seeds (0-99; the first 20 are search_quality's) on the same 10 columns (5 problems x 2
concurrencies, the same budget and ``max_t``), spread over the machine's cores. Per column: each one's
median area under the anytime regret curve and a 95 % bootstrap interval of the difference of the
medians (ours minus DEHB's; below zero: ours lower). A column where the interval holds zero is a tie at
this many seeds. ``--quick``: 10 seeds, Branin only.

Run: ``python bench/run.py search_quality_leaders`` (named only; about 18 minutes on 2 cores, with DEHB
installed as docs/benchmarks.md says).
"""

from __future__ import annotations

import random
import statistics
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from bench.common import NUM_CPUS, figure

NAME = "search_quality_leaders"
OURS = "ours: BOHB + HyperBand"
PEER = "dehb: DEHB"
SIZES = {False: {"seeds": list(range(100)), "problems": ["branin", "hartmann6", "hartmann3", "currin", "digits"],
                 "workers": [2, 8], "max_t": 27, "budget_trials": 20},
         True: {"seeds": list(range(10)), "problems": ["branin"], "workers": [2], "max_t": 27,
                "budget_trials": 20}}
#: Resamples of the bootstrap interval.
RESAMPLES = 4000


def _area(job: tuple[str, str, int, int, dict[str, Any]]) -> float:
    from bench.search.search_quality import one_run

    return one_run(*job)[0]["area"]


def areas_by_run(size: dict[str, Any], contenders: tuple[str, ...]) -> dict[tuple[str, str, int, int], float]:
    """Each contender's area on each column of ``size`` (problem x concurrency) and seed, by
    ``(problem, contender, seed, workers)``, computed over the machine's cores."""
    jobs = [(problem, name, seed, workers, size) for problem in size["problems"] for workers in size["workers"]
            for name in contenders for seed in size["seeds"]]
    with ProcessPoolExecutor(NUM_CPUS) as pool:
        areas = list(pool.map(_area, jobs, chunksize=4))
    return {(problem, name, seed, workers): area
            for (problem, name, seed, workers, _), area in zip(jobs, areas, strict=True)}


def difference_interval(ours: list[float], peer: list[float], seed: int = 0) -> tuple[float, float]:
    """A 95 % percentile-bootstrap interval of ``median(ours) - median(peer)`` (independent samples)."""
    rng = random.Random(seed)
    differences = sorted(statistics.median(rng.choices(ours, k=len(ours)))
                         - statistics.median(rng.choices(peer, k=len(peer))) for _ in range(RESAMPLES))
    return differences[int(0.025 * RESAMPLES)], differences[int(0.975 * RESAMPLES) - 1]


def run(quick: bool) -> dict[str, Any]:
    from bench.search.contenders import dehb_installed

    if not dehb_installed():
        raise RuntimeError("DEHB is not installed: see docs/benchmarks.md (search quality) for how")
    size = SIZES[quick]
    columns = [(problem, workers) for problem in size["problems"] for workers in size["workers"]]
    by_job = areas_by_run(size, (OURS, PEER))
    figures, table = [], {}
    for problem, workers in columns:
        key = f"{problem}, {workers} workers"
        ours = [by_job[problem, OURS, seed, workers] for seed in size["seeds"]]
        peer = [by_job[problem, PEER, seed, workers] for seed in size["seeds"]]
        low, high = difference_interval(ours, peer)
        verdict = "tie" if low <= 0 <= high else ("ours lower" if high < 0 else "DEHB lower")
        table[key] = {"ours_median": statistics.median(ours), "peer_median": statistics.median(peer),
                      "difference_interval": (low, high), "verdict": verdict, "ours": ours, "peer": peer}
        print(f"    {key}: ours {table[key]['ours_median']:.4g}, DEHB {table[key]['peer_median']:.4g}, "
              f"difference [{low:.3g}, {high:.3g}]: {verdict}", flush=True)
        figures.append(figure(f"{key}: regret area, our BOHB vs DEHB", "DEHB", table[key]["peer_median"],
                              table[key]["ours_median"], None, met=verdict != "DEHB lower",
                              note=f"{len(ours)} seeds; 95% interval of the difference of medians "
                                   f"[{low:.3g}, {high:.3g}]: {verdict}"))
    return {"figures": figures, "sizes": size, "contenders": [OURS, PEER], "table": table}


if __name__ == "__main__":
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))
    from bench.run import main

    sys.exit(main([NAME] + sys.argv[1:]))
