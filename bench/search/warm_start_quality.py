"""Warm start (``warm_start: DIR``, issue 42): a new sweep told an earlier sweep's trials on the same
problem, against the same sweep started cold, in the search-quality simulation
(:mod:`bench.search.search_simulation`).

The earlier sweep has ``earlier_trials`` trials on another seed, of two kinds: random search + FIFO
(every trial run to ``max_t``), and TPE + ASHA (the quickstart's kind, most of its trials stopped early,
so it spends less compute on them). It is
written as an experiment directory in the files Tune writes (``sweep.json``, and per trial ``params.json``
and ``result.json``) and read back by the warm start as a user's would be. The new sweep is each of our
model-based searchers with its early stopping, the budget of the search-quality benchmark. Its regret area
counts its own trials only: the earlier ones are told to its searcher, never run again. Median over the
seeds, paired (the same earlier sweep for the cold and the warm run of a seed). Goal: a warm area at
most half the cold one.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import figure

NAME = "warm_start_quality"
SIZES = {False: {"seeds": list(range(20)), "problems": ["branin", "hartmann6"], "workers": 2, "max_t": 27,
                 "budget_trials": 20, "earlier_trials": 30},
         True: {"seeds": [0, 1, 2], "problems": ["branin"], "workers": 2, "max_t": 27, "budget_trials": 20,
                "earlier_trials": 30}}
#: Ours with a model: name -> (method, scheduler).
CONTENDERS = {"TPE + ASHA": ("hyperopt", "asha"), "Optuna TPE + ASHA": ("optuna", "asha"),
              "BOHB + HyperBand": ("bohb", "hyperband")}
#: The earlier sweeps: name -> (method, scheduler), each of ``earlier_trials`` trials (the early-stopped
#: kind spends less compute on them).
EARLIER = {"random + FIFO": ("random", "fifo"), "TPE + ASHA": ("hyperopt", "asha")}
#: The earlier sweep's seeds are these plus the new sweep's: never the same draws.
EARLIER_SEED_OFFSET = 1000


class _Recording:
    """A contender whose trials' configs and reports are kept: the earlier sweep, to be written out."""

    def __init__(self, inner):
        self.inner = inner
        self.trials: dict[Any, tuple[dict[str, float], list[float]]] = {}

    def start(self):
        started = self.inner.start()
        if started is not None and started[0] not in self.trials:
            self.trials[started[0]] = (dict(started[1]), [])
        return started

    def report(self, trial_id, epoch: int, value: float):
        self.trials[trial_id][1].append(value)
        return self.inner.report(trial_id, epoch, value)

    def end(self, trial_id, epoch: int, value: float, completed: bool) -> None:
        self.inner.end(trial_id, epoch, value, completed)


def earlier_sweep(problem, kind: str, seed: int, size: dict[str, Any], directory: Path) -> Path:
    """Run the earlier sweep of ``kind`` (a key of :data:`EARLIER`) and write it as an experiment
    directory; the directory."""
    from bench.search.contenders import TuneContender
    from bench.search.search_simulation import simulate
    from tune_service.experiment.layout import write_sweep_file

    trials, max_t = size["earlier_trials"], size["max_t"]
    method, scheduler = EARLIER[kind]
    recording = _Recording(TuneContender(problem, method, scheduler, seed, max_t, trials, size["workers"],
                                         run_cap=trials))
    simulate(problem, recording, workers=size["workers"], budget=trials * max_t, max_t=max_t)
    write_sweep_file(directory, {"name": "earlier", "method": method, "metric": {"name": "value", "goal": "minimize"},
                                 "parameters": {k: {"min": lo, "max": hi} for k, (lo, hi) in problem.bounds.items()}},
                     None)
    for index, (config, values) in enumerate(recording.trials.values()):
        trial = directory / f"trial_{index:05d}"
        trial.mkdir()
        (trial / "params.json").write_text(json.dumps(config))
        rows = [{"value": v, "epoch": e, "training_iteration": e, "trial_id": f"{index:05d}", "timestamp": index}
                for e, v in enumerate(values, start=1)]
        (trial / "result.json").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return directory


def _run(problem, method: str, scheduler: str, seed: int, size: dict[str, Any], warm: str | None) -> dict:
    """One new sweep, cold (``warm`` None) or warm-started from the experiment ``warm``: its row."""
    from bench.search.contenders import TuneContender
    from bench.search.search_simulation import simulate

    budget = size["budget_trials"] * size["max_t"]
    began = time.perf_counter()
    contender = TuneContender(problem, method, scheduler, seed, size["max_t"], size["budget_trials"], size["workers"],
                              warm_start=warm)
    curve = simulate(problem, contender, workers=size["workers"], budget=budget, max_t=size["max_t"])
    return {"area": curve.area(budget), "final": curve.at(budget), "wall_s": round(time.perf_counter() - began, 3)}


def run(quick: bool) -> dict[str, Any]:
    from bench.search.search_quality import problem_named

    size = SIZES[quick]
    budget = size["budget_trials"] * size["max_t"]
    key = "{name}, told {kind}, {label}".format
    runs: dict[str, dict[str, list[dict[str, float]]]] = {
        key(name=n, kind=k, label=c): {"cold": [], "warm": []} for n in size["problems"] for k in EARLIER
        for c in CONTENDERS}
    for name in size["problems"]:
        problem = problem_named(name, size["max_t"])
        for seed in size["seeds"]:
            # A seed's cold runs are the same whatever the earlier sweep: run once, paired with each kind's.
            cold = {label: _run(problem, *searcher, seed, size, None) for label, searcher in CONTENDERS.items()}
            for kind in EARLIER:
                with tempfile.TemporaryDirectory(prefix="warm-start-bench-") as scratch:
                    earlier = earlier_sweep(problem, kind, seed + EARLIER_SEED_OFFSET, size, Path(scratch) / "earlier")
                    for label, searcher in CONTENDERS.items():
                        runs[key(name=name, kind=kind, label=label)]["cold"].append(cold[label])
                        runs[key(name=name, kind=kind, label=label)]["warm"].append(
                            _run(problem, *searcher, seed, size, str(earlier)))
    figures = []
    for run_key, paired in runs.items():
        cold_area = statistics.median(r["area"] for r in paired["cold"])
        warm_area = statistics.median(r["area"] for r in paired["warm"])
        ratios = [w["area"] / c["area"] for c, w in zip(paired["cold"], paired["warm"]) if c["area"] > 0]
        note = (f"median over {len(size['seeds'])} seeds, budget {budget} trial-epochs; warm/cold paired by "
                f"seed: median {statistics.median(ratios):.3g}, warm better in "
                f"{sum(r < 1 for r in ratios)} of {len(ratios)}")
        figures.append(figure(f"{run_key}: regret area, warm / cold", "cold start", cold_area, warm_area / cold_area,
                              "<= 0.5", note=note))
        print(f"    {run_key}: cold {cold_area:.3g}, warm {warm_area:.3g} ({warm_area / cold_area:.2f})", flush=True)
    return {"figures": figures, "sizes": size, "runs": runs}


if __name__ == "__main__":
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))
    from bench.run import main

    sys.exit(main([NAME] + sys.argv[1:]))
