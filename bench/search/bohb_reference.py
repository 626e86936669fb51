"""Our BOHB (its model built in the project on numpy and scipy: tune_service.search.bohb) against
hpbandster's (through Ray's TuneBOHB, as ``method: bohb`` ran before), each with HyperBand-for-BOHB, on
search_quality's problems, budgets and concurrencies, with the same seeds.

Per column (problem x concurrency): each one's median area under the anytime regret curve over the same
seeds, and a 95 % bootstrap interval of the difference of the medians (ours minus hpbandster's; below zero:
ours lower), the two samples resampled independently: the two models draw from different random streams,
so a seed pairs the runs' numbers but not their draws. The target: ours no worse, a column met where our
median area is at most hpbandster's or the interval holds zero (a tie at this many seeds).
``--quick``: 5 seeds, Branin and Hartmann-6, 2 workers.

Run: ``python bench/run.py bohb_reference`` (named only; needs the ``peers`` extra's hpbandster).
"""

from __future__ import annotations

import statistics
from typing import Any

from bench.common import figure

NAME = "bohb_reference"
OURS = "ours: BOHB + HyperBand"
SIZES = {False: {"seeds": list(range(20)), "problems": ["branin", "hartmann6", "hartmann3", "currin", "digits"],
                 "workers": [2, 8], "max_t": 27, "budget_trials": 20},
         True: {"seeds": list(range(5)), "problems": ["branin", "hartmann6"], "workers": [2], "max_t": 27,
                "budget_trials": 20}}


def run(quick: bool) -> dict[str, Any]:
    from bench.search.contenders import HPBANDSTER_BOHB
    from bench.search.hpbandster_bohb import installed
    from bench.search.search_quality_leaders import areas_by_run, difference_interval

    if not installed():
        raise RuntimeError("hpbandster and ConfigSpace are not installed: pip install -e '.[peers]'")
    size = SIZES[quick]
    columns = [(problem, workers) for problem in size["problems"] for workers in size["workers"]]
    by_job = areas_by_run(size, (OURS, HPBANDSTER_BOHB))
    figures, table = [], {}
    for problem, workers in columns:
        key = f"{problem}, {workers} workers"
        ours = [by_job[problem, OURS, seed, workers] for seed in size["seeds"]]
        reference = [by_job[problem, HPBANDSTER_BOHB, seed, workers] for seed in size["seeds"]]
        low, high = difference_interval(ours, reference)
        ours_median, reference_median = statistics.median(ours), statistics.median(reference)
        verdict = "tie" if low <= 0 <= high else ("ours lower" if high < 0 else "hpbandster lower")
        table[key] = {"ours_median": ours_median, "hpbandster_median": reference_median,
                      "difference_interval": (low, high), "verdict": verdict, "ours": ours, "hpbandster": reference}
        print(f"    {key}: ours {ours_median:.4g}, hpbandster {reference_median:.4g}, difference of medians "
              f"[{low:.3g}, {high:.3g}]: {verdict}", flush=True)
        figures.append(figure(f"{key}: regret area, our BOHB vs hpbandster's", "hpbandster BOHB", reference_median,
                              ours_median, None, met=ours_median <= reference_median or verdict == "tie",
                              note=f"{len(ours)} seeds; 95% interval of the difference of medians "
                                   f"[{low:.3g}, {high:.3g}]: {verdict}"))
    return {"figures": figures, "sizes": size, "contenders": [OURS, HPBANDSTER_BOHB], "table": table}


if __name__ == "__main__":
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))
    from bench.run import main

    sys.exit(main([NAME] + sys.argv[1:]))
