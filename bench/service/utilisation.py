"""Utilisation: during a real sweep, the share of the cluster's rank slots that is busy training.

The sweep: ``tune_service.run`` of the quickstart's shape (hyperopt TPE + ASHA, 2-rank DDP trials of one
CPU per rank, so one trial at a time fills both slots of this 2-CPU machine) on the digits CNN with its
training set repeated (:class:`bench.workloads.TiledDigits`, epochs of about a second), on an embedded
Ray started beforehand (Ray's own start is not part of a sweep).

    utilisation = busy rank-slot-seconds / (sweep wall time x slots)

- busy: per trial, the sum of its epochs' ``epoch_time_s`` (training and validation, as the shared loop
  times them) times its ranks;
- wall: the ``tune_service.run`` call; slots: the cluster's CPUs / CPUs per rank (2).

Target >= 0.85. There is no anchor to run beside it: the figure is absolute. What the rest of the
rank-slot-seconds went to is measured from the same sweep: each trial's start-up (trial start to its
first report, less the first epoch), its reports and checkpoints (trial time less start-up and
training), and the time no trial held the slots (wall x slots less the trials' rank-seconds).
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import NUM_CPUS, figure, local_ray

NAME = "utilisation"
SIZES = {False: {"run_cap": 6, "max_t": 8, "repeat": 16}, True: {"run_cap": 2, "max_t": 3, "repeat": 8}}
TARGET = ">= 0.85"
WORKERS = 2


def run(quick: bool) -> dict[str, Any]:
    import tune_service
    from bench.workloads import TiledDigits

    size = SIZES[quick]
    spec = {
        "name": "utilisation", "method": "bayes", "run_cap": size["run_cap"], "seed": 0,
        "metric": {"name": "val_accuracy", "goal": "maximize"},
        "parameters": {"lr": {"distribution": "log_uniform_values", "min": 1e-4, "max": 3e-2},
                       "hidden": {"values": [16, 32, 48]}, "dropout": {"min": 0.0, "max": 0.3},
                       "repeat": {"value": size["repeat"]}},
        "scheduler": {"type": "asha", "max_t": size["max_t"], "grace_period": 1, "reduction_factor": 3},
        "resources": {"workers": WORKERS, "cpus_per_worker": 1},
        "wandb": {"mode": "disabled"},
    }
    slots = NUM_CPUS  # one CPU per rank
    trials = []
    with local_ray(), tempfile.TemporaryDirectory() as storage:
        started = time.perf_counter()
        result = tune_service.run(spec, storage=storage, name="sweep", verbose=0, task=TiledDigits())
        wall_s = time.perf_counter() - started
        for record in result.trials:
            path = Path(result.experiment_dir, f"trial_{record.trial_id}", "result.json")
            rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
            if not rows or record.status == "failed":
                raise RuntimeError(f"trial {record.trial_id} {record.status}: {record.error}")
            trials.append({"trial_id": record.trial_id, "status": record.status, "epochs": len(rows),
                           "training_s": sum(r["epoch_time_s"] for r in rows),
                           "startup_s": rows[0]["time_total_s"] - rows[0]["epoch_time_s"],
                           "trial_s": rows[-1]["time_total_s"]})
    capacity = wall_s * slots
    busy = WORKERS * sum(t["training_s"] for t in trials)
    startup = WORKERS * sum(t["startup_s"] for t in trials)
    held = WORKERS * sum(t["trial_s"] for t in trials)
    shares = {"training": busy / capacity, "trial start-up": startup / capacity,
              "reports and checkpoints": (held - startup - busy) / capacity, "no trial running": 1 - held / capacity}
    per_trial_startup = sorted(t["startup_s"] for t in trials)[len(trials) // 2]
    figures = [figure("utilisation: busy rank-slot-s / (wall x slots)", "", None, busy / capacity, TARGET,
                      note=f"{len(trials)} trials of 2 ranks, {sum(t['epochs'] for t in trials)} trial-epochs, "
                           f"hyperopt + ASHA; of the rank-slot-seconds: "
                           + ", ".join(f"{k} {v:.0%}" for k, v in shares.items())
                           + f"; a trial starts up in {per_trial_startup:.1f} s (median)")]
    return {"figures": figures, "sizes": size, "slots": slots, "sweep_wall_s": wall_s, "shares": shares,
            "trials": trials}


if __name__ == "__main__":
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))
    from bench.run import main

    sys.exit(main([NAME] + sys.argv[1:]))
