"""Utilisation under population-based training: the share of the rank slots busy training while a
population of 2-rank DDP trials takes turns on this 2-CPU machine (one trial at a time), each paused at
every perturbation to let the next train, and the weak taking the strong's checkpoints.

The sweep: ``scheduler.type: pbt``, random lr and momentum (SGD), the population ``run_cap``, each trial
``max_t`` epochs of the digits CNN with its training set repeated (:class:`bench.workloads.TiledDigits`,
epochs of about 4 s here; the whole population about 22 minutes), measured as :mod:`bench.service.utilisation` measures an ASHA sweep (a report a
trial repeats after a restart from its own checkpoint is not training). Target >= 0.85, absolute.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.common import figure
from bench.service.utilisation import TARGET, WORKERS, sweep_utilisation

NAME = "pbt_utilisation"
SIZES = {False: {"run_cap": 16, "max_t": 20, "interval": 4, "repeat": 16},
         True: {"run_cap": 4, "max_t": 6, "interval": 2, "repeat": 8}}


def run(quick: bool) -> dict[str, Any]:
    size = SIZES[quick]
    spec = {
        "name": "pbt_utilisation", "method": "random", "run_cap": size["run_cap"], "seed": 0,
        "metric": {"name": "val_accuracy", "goal": "maximize"},
        "parameters": {"optimizer": {"value": "sgd"},
                       "lr": {"distribution": "log_uniform_values", "min": 1e-3, "max": 0.3},
                       "momentum": {"min": 0.0, "max": 0.95}, "repeat": {"value": size["repeat"]}},
        "scheduler": {"type": "pbt", "max_t": size["max_t"], "perturbation_interval": size["interval"]},
        "resources": {"workers": WORKERS, "cpus_per_worker": 1},
        "wandb": {"mode": "disabled"},
    }
    measured = sweep_utilisation(spec)
    figures = [figure("PBT utilisation: busy rank-slot-s / (wall x slots)", "", None, measured["utilisation"],
                      TARGET, note=f"a population of {size['run_cap']} trials of 2 ranks, {size['max_t']} epochs "
                                   f"each, perturbed every {size['interval']}; {measured['trial_epochs']} "
                                   f"trial-epochs trained; {measured['where']}")]
    return {"figures": figures, "sizes": size, **measured}


if __name__ == "__main__":
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))
    from bench.run import main

    sys.exit(main([NAME] + sys.argv[1:]))
