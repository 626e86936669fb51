"""Search efficiency on digits: what early stopping with a model-based searcher saves against random
search without it, for the same number of configurations, and what it costs in best accuracy.

Pairs, each run for the same seeds and the same number of configurations:

- hyperopt TPE + ASHA against random search + FIFO;
- BOHB (with HyperBand-for-BOHB) against random search + HyperBand.

What runs: the service's own searcher and scheduler objects (``tune_service.search.registry.build_searcher`` /
``build_scheduler`` on a spec, the very classes a sweep uses: our searcher wrappers, RandomSearch,
hyperopt with the service's initial points, BOHB on the service's ConfigSpace, ASHA and the service's
HyperBand) on real Ray Tune, two trials at a time as on 2 CPUs, with a light trainable: the digits MLP
trained epoch by epoch in the trial's own process (:func:`bench.workloads.digits_trial`; checkpointed
each epoch under HyperBand, whose rungs pause and resume trials). The figures are about the searcher and
the scheduler, which see exactly what they would see from a DDP trial (one report per epoch); a DDP
trial of the same model would make this benchmark take hours on 2 cores. Tune's automatic per-result
file loggers are off (``TUNE_DISABLE_AUTO_CALLBACK_LOGGERS``): they took most of the time, and nothing the
searcher or the scheduler sees depends on them.

Figures, median over the seeds:

- trial-epochs used (the sum over trials of the epochs each trained), tune-service / anchor (target
  <= 1/3);
- best validation accuracy (the best trial's last report, as ``tune-run`` picks it), tune-service
  minus anchor in points (target >= -0.5).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import figure, light_tune, local_ray, median, quiet_ray_loggers

NAME = "search_efficiency"
SIZES = {False: {"seeds": [0, 1, 2, 3, 4], "configs": 15, "max_t": 9},
         True: {"seeds": [0], "configs": 9, "max_t": 9}}
TARGET_EPOCHS = "<= 1/3"
TARGET_POINTS = ">= -0.5"
SPACE = {
    "lr": {"distribution": "log_uniform_values", "min": 1e-4, "max": 1e-1},
    "hidden": {"values": [16, 32, 64, 128]},
    "layers": {"values": [1, 2]},
    "dropout": {"min": 0.0, "max": 0.5},
    "batch_size": {"values": [32, 64, 128, 256]},
    "optimizer": {"values": ["adam", "sgd"]},
    "weight_decay": {"distribution": "log_uniform_values", "min": 1e-6, "max": 1e-2},
}
#: name -> (method, scheduler)
VARIANTS = {
    "hyperopt + ASHA": ("hyperopt", "asha"),
    "random + FIFO": ("random", "fifo"),
    "BOHB + HyperBand for BOHB": ("bohb", "hyperband"),
    "random + HyperBand": ("random", "hyperband"),
}
PAIRS = (("hyperopt + ASHA", "random + FIFO"), ("BOHB + HyperBand for BOHB", "random + HyperBand"))


def sweep(variant: str, seed: int, size: dict[str, Any]) -> dict[str, Any]:
    """One sweep of ``size['configs']`` configurations; its trial-epochs and best accuracy."""
    from ray import tune

    from bench.workloads import digits_trial
    from tune_service.search import registry
    from tune_service.spec import load_spec

    method, scheduler = VARIANTS[variant]
    spec = load_spec({
        "name": "search", "method": method, "run_cap": size["configs"], "seed": seed,
        "metric": {"name": "val_accuracy", "goal": "maximize"}, "parameters": SPACE,
        "scheduler": {"type": scheduler, "max_t": size["max_t"], "reduction_factor": 3,
                      **({"grace_period": 1} if scheduler == "asha" else {})},
    })
    searcher, num_trials = registry.build_searcher(spec)
    recorder = LastResults()
    trainable = tune.with_parameters(digits_trial, seed=seed, checkpointing=scheduler == "hyperband")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as storage:
        tune.Tuner(
            tune.with_resources(trainable, {"cpu": 1}),
            tune_config=tune.TuneConfig(metric="val_accuracy", mode="max", search_alg=searcher,
                                        scheduler=registry.build_scheduler(spec), num_samples=num_trials,
                                        max_concurrent_trials=2, reuse_actors=True),
            run_config=tune.RunConfig(name="search", storage_path=storage, verbose=0, callbacks=[recorder],
                                      stop={"epoch": size["max_t"]},
                                      checkpoint_config=tune.CheckpointConfig(num_to_keep=1)),
        ).fit()
    last = recorder.last
    return {"trials": len(last), "trial_epochs": sum(r["epoch"] for r in last.values()),
            "best_val_accuracy": max(r["val_accuracy"] for r in last.values()),
            "completed": sum(r["epoch"] >= size["max_t"] for r in last.values()),
            "wall_s": round(time.perf_counter() - started, 1)}


def _callback_base():
    from ray import tune

    return tune.Callback


class LastResults(_callback_base()):
    """Every trial's latest report, kept in the driver."""

    def __init__(self):
        self.last: dict[str, dict[str, Any]] = {}

    def on_trial_result(self, iteration, trials, trial, result, **info):
        self.last[trial.trial_id] = {"epoch": int(result["epoch"]), "val_accuracy": float(result["val_accuracy"])}


def run(quick: bool) -> dict[str, Any]:
    size = SIZES[quick]
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in VARIANTS}
    with light_tune(), local_ray():
        quiet_ray_loggers()
        for seed in size["seeds"]:
            for name in VARIANTS:
                runs[name].append(sweep(name, seed, size))
                r = runs[name][-1]
                print(f"    seed {seed} {name}: {r['trials']} trials, {r['trial_epochs']} trial-epochs, "
                      f"best {r['best_val_accuracy']:.4f} ({r['wall_s']:.0f} s)", flush=True)
    figures = []
    for service, anchor in PAIRS:
        pairs = list(zip(runs[service], runs[anchor]))
        ratio = median([s["trial_epochs"] / a["trial_epochs"] for s, a in pairs])
        points = median([100 * (s["best_val_accuracy"] - a["best_val_accuracy"]) for s, a in pairs])
        epochs_s, epochs_a = median([s["trial_epochs"] for s, _ in pairs]), median([a["trial_epochs"] for _, a in pairs])
        acc_s = median([100 * s["best_val_accuracy"] for s, _ in pairs])
        acc_a = median([100 * a["best_val_accuracy"] for _, a in pairs])
        n = len(pairs)
        figures.append(figure(f"{service}: trial-epochs used", anchor, 1.0, ratio, TARGET_EPOCHS, "x",
                              note=f"median over {n} seeds of the per-seed ratio; median trial-epochs "
                                   f"{epochs_s:g} against {epochs_a:g}, {size['configs']} configurations, "
                                   f"max_t {size['max_t']}"))
        figures.append(figure(f"{service}: best val accuracy", anchor, acc_a, acc_s, f"{TARGET_POINTS} pt vs anchor",
                              "%", met=points >= -0.5,
                              note=f"median over {n} seeds of the per-seed difference: {points:+.2f} points"))
    fifo = runs["random + FIFO"]
    bohb_vs_fifo = median([b["trial_epochs"] / f["trial_epochs"] for b, f in zip(runs["BOHB + HyperBand for BOHB"], fifo)])
    return {"figures": figures, "sizes": size, "space": SPACE, "bohb_vs_random_fifo_trial_epochs": bohb_vs_fifo,
            "runs": runs}


if __name__ == "__main__":
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))
    from bench.run import main

    sys.exit(main([NAME] + sys.argv[1:]))
