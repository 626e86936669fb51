"""Problems with a known optimum: multi-fidelity Branin and Hartmann-6, simple regret after a fixed
budget, for TPE, BOHB and random search, each with and without early stopping.

The functions are BoTorch's ``AugmentedBranin`` and ``AugmentedHartmann`` (closed forms; the fidelity
``s`` in [0, 1] shifts one coefficient, and at ``s = 1`` they are the textbook functions, minima
0.397887 and -3.322368). A trial of a configuration ``x`` reports ``f(x, epoch / max_t)`` at epochs 1 to
``max_t``: the fidelity is the epoch (:func:`bench.search.functions.closed_form_trial`).

What runs: the service's searcher and scheduler objects (``tune_service.search.registry.build_searcher`` /
``build_scheduler`` on a spec, as a sweep builds them) on real Ray Tune, two trials at a time, with that
closed-form function as the trainable (Tune's per-result file loggers off, as in search_efficiency).
Variants:

- TPE (hyperopt, the service's initial points) + ASHA, and + FIFO;
- BOHB + HyperBand-for-BOHB, and BOHB + FIFO (its model then learns from full-fidelity results only:
  a FIFO scheduler that labels each trial's last epoch with BOHB's budget, as HyperBand-for-BOHB does);
- random + ASHA, and random + FIFO (the anchor).

Every run gets the same budget of trial-epochs (``budget`` x ``max_t``; a Tune stopper ends the run once
it is spent). A run without early stopping has ``budget`` trials; one with it has as many as the
scheduler's expected schedule fits in the budget (``tune_service.search.schedule``, the arithmetic ``--dry-run``
prints). The incumbent is the best configuration at the highest fidelity reached, as HpBandSter picks
it; its simple regret is ``f(x, 1) - f*``. Figures: the median regret over the seeds, each variant
against random + FIFO (target: no worse than that anchor).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import figure, light_tune, local_ray, median, quiet_ray_loggers

NAME = "known_optimum"
SIZES = {False: {"seeds": [0, 1, 2, 3, 4], "max_t": 9, "budget": 8},
         True: {"seeds": [0], "max_t": 9, "budget": 6}}
#: name -> (method, early stopping)
VARIANTS = {
    "TPE + ASHA": ("hyperopt", True), "TPE + FIFO": ("hyperopt", False),
    "BOHB + HyperBand for BOHB": ("bohb", True), "BOHB + FIFO": ("bohb", False),
    "random + ASHA": ("random", True), "random + FIFO": ("random", False),
}
ANCHOR = "random + FIFO"
#: The problems it runs (of bench.search.functions.FUNCTIONS).
KNOWN = ("branin", "hartmann6")


def sweep_spec(function: str, method: str, early: bool, seed: int, size: dict[str, Any],
               bounds: dict[str, tuple[float, float]] | None = None, scheduler_type: str | None = None,
               objectives: tuple[str, ...] = ()):
    """The spec of a sweep of ``function`` with ``method``, with as many trials as ``size``'s budget fits
    (a sweep without early stopping: the budget in full trials); its parameters ``bounds``, by default
    those of ``bench.search.functions.FUNCTIONS[function]``; early stopping by ``scheduler_type``, by default
    HyperBand for BOHB and ASHA for the others. It minimises ``value``, or with ``objectives`` each of them
    (``metrics:``)."""
    from bench.search.functions import FUNCTIONS
    from tune_service.search.schedule import expected_schedule
    from tune_service.spec import load_spec

    bounds = bounds if bounds is not None else FUNCTIONS[function][1]
    early_type = scheduler_type or ("hyperband" if method == "bohb" else "asha")
    scheduler = {"type": early_type if early else "fifo", "max_t": size["max_t"], "reduction_factor": 3}
    if scheduler["type"] == "asha":
        scheduler["grace_period"] = 1
    raw = {"name": function, "method": method, "seed": seed, "run_cap": size["budget"],
           **({"metrics": [{"name": name, "goal": "minimize"} for name in objectives]} if objectives
              else {"metric": {"name": "value", "goal": "minimize"}}),
           "parameters": {name: {"min": low, "max": high} for name, (low, high) in bounds.items()},
           "scheduler": scheduler if method != "bohb" or early else {"type": "hyperband", "max_t": size["max_t"]}}
    spec = load_spec(raw)
    if early:  # as many trials as the expected schedule fits in the budget
        budget = size["budget"] * size["max_t"]
        trials = size["budget"]
        while expected_schedule(spec.scheduler, trials + 1, bohb=method == "bohb").trial_epochs <= budget:
            trials += 1
        spec = load_spec({**raw, "run_cap": trials})
    return spec


def _fifo_for_bohb(max_t: int):
    """FIFO that labels a trial's last epoch with BOHB's budget, so BOHB's model learns from it."""
    from ray.tune.schedulers import FIFOScheduler

    class FifoForBOHB(FIFOScheduler):
        def on_trial_result(self, tune_controller, trial, result):
            if result.get("epoch", 0) >= max_t:
                result["hyperband_info"] = {"budget": max_t}
            return super().on_trial_result(tune_controller, trial, result)

    return FifoForBOHB()


def _budget_stopper(total: int):
    from ray.tune import Stopper

    class BudgetStopper(Stopper):
        """Ends the run once ``total`` trial-epochs have been reported (each trial's epochs counted once:
        Tune also shows the stopper a finished function trial's last result again)."""

        def __init__(self):
            self.reported: set[tuple[str, int]] = set()

        def __call__(self, trial_id, result):
            self.reported.add((trial_id, int(result.get("epoch", 0))))
            return False

        def stop_all(self):
            return len(self.reported) >= total

    return BudgetStopper()


def _recorder():
    from ray import tune

    class Recorder(tune.Callback):
        def __init__(self):
            self.last: dict[str, dict[str, Any]] = {}

        def on_trial_result(self, iteration, trials, trial, result, **info):
            self.last[trial.trial_id] = {"epoch": int(result["epoch"]), "value": float(result["value"]),
                                         "config": dict(trial.config)}

    return Recorder()


def optimise(function: str, variant: str, seed: int, size: dict[str, Any]) -> dict[str, Any]:
    """One run; the incumbent's simple regret and what the run used."""
    from ray import tune

    from bench.search.functions import FUNCTIONS, closed_form_trial
    from tune_service.search import registry

    method, early = VARIANTS[variant]
    spec = sweep_spec(function, method, early, seed, size)
    searcher, num_trials = registry.build_searcher(spec)
    if method == "bohb" and not early:
        scheduler = _fifo_for_bohb(size["max_t"])
    else:
        scheduler = registry.build_scheduler(spec)
    recorder = _recorder()
    trainable = tune.with_parameters(closed_form_trial, function=function, max_t=size["max_t"],
                                     checkpointing=spec.scheduler.type == "hyperband" and early)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as storage:
        tune.Tuner(
            tune.with_resources(trainable, {"cpu": 1}),
            tune_config=tune.TuneConfig(metric="value", mode="min", search_alg=searcher, scheduler=scheduler,
                                        num_samples=num_trials, max_concurrent_trials=2, reuse_actors=True),
            run_config=tune.RunConfig(name="optimum", storage_path=storage, verbose=0, callbacks=[recorder],
                                      stop=_budget_stopper(size["budget"] * size["max_t"]),
                                      checkpoint_config=tune.CheckpointConfig(num_to_keep=1)),
        ).fit()
    f, _, minimum = FUNCTIONS[function]
    last = list(recorder.last.values())
    top = max(r["epoch"] for r in last)
    incumbent = min((r for r in last if r["epoch"] == top), key=lambda r: r["value"])
    return {"regret": f(incumbent["config"], 1.0) - minimum, "trials": len(last),
            "trial_epochs": sum(r["epoch"] for r in last), "incumbent_fidelity_epochs": top,
            "incumbent": incumbent["config"], "wall_s": round(time.perf_counter() - started, 1)}


def run(quick: bool) -> dict[str, Any]:
    size = SIZES[quick]
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {fn: {v: [] for v in VARIANTS} for fn in KNOWN}
    with light_tune(), local_ray():
        quiet_ray_loggers()
        for function in KNOWN:
            for seed in size["seeds"]:
                for variant in VARIANTS:
                    r = optimise(function, variant, seed, size)
                    runs[function][variant].append(r)
                    print(f"    {function} seed {seed} {variant}: {r['trials']} trials, {r['trial_epochs']} "
                          f"trial-epochs, regret {r['regret']:.4g} ({r['wall_s']:.0f} s)", flush=True)
    figures = []
    for function, variants in runs.items():
        anchor = median([r["regret"] for r in variants[ANCHOR]])
        for variant, results in variants.items():
            if variant == ANCHOR:
                continue
            regret = median([r["regret"] for r in results])
            figures.append(figure(f"{function}: simple regret, {variant}", ANCHOR, anchor, regret,
                                  f"<= {anchor:.4g} (anchor)",
                                  met=regret <= anchor,
                                  note=f"median over {len(results)} seeds; budget {size['budget']} x {size['max_t']} "
                                       f"trial-epochs; {median([r['trials'] for r in results]):g} trials"))
    return {"figures": figures, "sizes": size, "runs": runs}


if __name__ == "__main__":
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))
    from bench.run import main

    sys.exit(main([NAME] + sys.argv[1:]))
