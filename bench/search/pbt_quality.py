"""Population-based training's search quality where the schedule matters (issue 41): PBT against TPE + ASHA
and random search + FIFO, on the same compute, over seeds.

The task: the digits CNN (16 channels, BatchNorm) trained with SGD at a constant learning rate for 12
epochs, one rank a trial on this machine's two CPUs. Each method searches the learning rate
(log-uniform, 1e-3 to 1) and the momentum (0 to 0.95). A constant rate must choose between learning fast
and settling; a rate that decays does both, which only PBT can give a trial (it changes lr and momentum
as the trial trains, so each trial's rate becomes a schedule).

- ``pbt``: a population of 8 (random), perturbed every 2 epochs, the bottom quarter copying the top
  quarter (Ray's PBT defaults otherwise); 8 x 12 = 96 trial-epochs, plus what exploits train again.
- ``random``: random search + FIFO, 8 trials x 12 epochs = 96 trial-epochs.
- ``tpe_asha``: hyperopt's TPE + ASHA (grace 1, reduction factor 3): as many trials as ASHA's expected
  schedule fits in 96 trial-epochs.

The figure is a sweep's best final ``val_loss``: the lowest of its trials' last reports at epoch 12 (a
trial ASHA stopped did not finish). Each method runs each seed (the spec's ``seed``: the searcher's draws
and the models' initialisation), one sweep after another on one embedded Ray, the methods alternating
within a seed. The trial-epochs each sweep trained (reports less the repeats of a restart from a trial's
own checkpoint) are reported beside, so a method that got more compute shows it.

``python bench/search/pbt_quality.py [--seeds 10] [--quick]`` -> ``bench/results/pbt_quality.json``
(about 30 s a sweep here: 15 minutes for 10 seeds).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import local_ray, write_result  # noqa: E402
from bench.service.utilisation import account_trial  # noqa: E402

NAME = "pbt_quality"
MAX_T, POPULATION, INTERVAL = 12, 8, 2
BUDGET = POPULATION * MAX_T  # trial-epochs
PARAMETERS = {
    "model": {"value": "cnn"}, "hidden": {"value": 16}, "optimizer": {"value": "sgd"},
    "lr": {"distribution": "log_uniform_values", "min": 1e-3, "max": 1.0},
    "momentum": {"min": 0.0, "max": 0.95},
}
METHODS = ("pbt", "tpe_asha", "random")


def asha_trials(budget: int) -> int:
    """The most trials whose expected ASHA schedule trains at most ``budget`` trial-epochs."""
    from tune_service.search import expected_schedule
    from tune_service.spec import load_spec

    scheduler = load_spec(spec_for("tpe_asha", 0, 1)).scheduler
    trials = 1
    while expected_schedule(scheduler, trials + 1).trial_epochs <= budget:
        trials += 1
    return trials


def spec_for(method: str, seed: int, trials: int) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "name": f"{method}-{seed}", "task": "digits", "seed": seed, "run_cap": trials,
        "metric": {"name": "val_loss", "goal": "minimize"}, "parameters": PARAMETERS,
        "resources": {"workers": 1, "cpus_per_worker": 1}, "wandb": {"mode": "disabled"},
    }
    if method == "pbt":
        spec.update(method="random", scheduler={"type": "pbt", "max_t": MAX_T, "perturbation_interval": INTERVAL})
    elif method == "random":
        spec.update(method="random", scheduler={"type": "fifo", "max_t": MAX_T})
    else:
        spec.update(method="hyperopt",
                    scheduler={"type": "asha", "max_t": MAX_T, "grace_period": 1, "reduction_factor": 3})
    return spec


def one_sweep(method: str, seed: int, trials: int, storage: str) -> dict[str, Any]:
    import tune_service
    from tune_service.experiment.layout import TRIAL_RESULTS_FILE, read_trial_results

    started = time.perf_counter()
    result = tune_service.run(spec_for(method, seed, trials), storage=storage, name=f"{method}-{seed}", verbose=0)
    wall_s = time.perf_counter() - started
    finals = [t.metrics["val_loss"] for t in result.trials if t.epochs >= MAX_T and "val_loss" in t.metrics]
    experiment = Path(result.experiment_dir)
    # the epochs each trial trained: its reports, less the repeats of its own checkpoint's after a restart
    epochs = sum(account_trial(read_trial_results(d / TRIAL_RESULTS_FILE))["epochs"]
                 for d in experiment.glob("trial_*"))
    return {"method": method, "seed": seed, "trials": len(result.trials), "best_final_val_loss": min(finals),
            "finished": len(finals), "trial_epochs": epochs, "wall_s": round(wall_s, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--quick", action="store_true", help="two seeds")
    args = parser.parse_args()
    seeds = range(2 if args.quick else args.seeds)
    trials = {"pbt": POPULATION, "random": POPULATION, "tpe_asha": asha_trials(BUDGET)}
    runs = []
    started = time.perf_counter()
    with local_ray(), tempfile.TemporaryDirectory(prefix="pbt-quality-") as storage:
        for seed in seeds:
            for method in METHODS:
                run = one_sweep(method, seed, trials[method], storage)
                print(run, flush=True)
                runs.append(run)
    summary = {}
    for method in METHODS:
        mine = [r for r in runs if r["method"] == method]
        summary[method] = {
            "median_best_final_val_loss": statistics.median(r["best_final_val_loss"] for r in mine),
            "mean_best_final_val_loss": statistics.fmean(r["best_final_val_loss"] for r in mine),
            "median_trial_epochs": statistics.median(r["trial_epochs"] for r in mine),
        }
    wins = {method: 0 for method in METHODS}
    for seed in seeds:
        by_method = {r["method"]: r["best_final_val_loss"] for r in runs if r["seed"] == seed}
        wins[min(by_method, key=by_method.__getitem__)] += 1
    payload = {"methods": {m: {"trials": trials[m]} for m in METHODS}, "summary": summary,
               "best_of_the_three_by_seed": wins, "runs": runs}
    print(summary, wins)
    print(write_result(NAME, args.quick, payload, time.perf_counter() - started))


if __name__ == "__main__":
    main()
