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
    measured = sweep_utilisation(spec)
    figures = [figure("utilisation: busy rank-slot-s / (wall x slots)", "", None, measured["utilisation"], TARGET,
                      note=f"{len(measured['trials'])} trials of 2 ranks, {measured['trial_epochs']} trial-epochs, "
                           f"hyperopt + ASHA; {measured['where']}")]
    return {"figures": figures, "sizes": size, **measured}


def sweep_utilisation(spec: dict[str, Any]) -> dict[str, Any]:
    """Run ``spec`` on :class:`bench.workloads.TiledDigits` on an embedded Ray and account for its rank
    slots. Per trial, from its ``result.json``: training, each report's ``epoch_time_s`` but a report a
    trial restarted from its own checkpoint repeats (PBT's pauses); held, each report's ``time_this_iter_s``
    (the trial's time since its last report or its start); start-up, each (re)start to its first report
    that trained, less that epoch."""
    import tune_service
    from bench.workloads import TiledDigits

    slots = NUM_CPUS  # one CPU per rank
    workers = spec["resources"]["workers"]
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
            trials.append({"trial_id": record.trial_id, "status": record.status, **account_trial(rows)})
    capacity = wall_s * slots
    busy = workers * sum(t["training_s"] for t in trials)
    startup = workers * sum(t["startup_s"] for t in trials)
    held = workers * sum(t["trial_s"] for t in trials)
    shares = {"training": busy / capacity, "trial start-up": startup / capacity,
              "reports and checkpoints": (held - startup - busy) / capacity, "no trial running": 1 - held / capacity}
    starts = sorted(s for t in trials for s in t["starts_s"])
    return {
        "utilisation": busy / capacity, "slots": slots, "sweep_wall_s": wall_s, "shares": shares, "trials": trials,
        "trial_epochs": sum(t["epochs"] for t in trials),
        "where": "of the rank-slot-seconds: " + ", ".join(f"{k} {v:.0%}" for k, v in shares.items())
                 + f"; {len(starts)} trial (re)starts to training, median {starts[len(starts) // 2]:.2f} s",
    }


def account_trial(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """One trial's epochs trained, training, start-up and held seconds, and each (re)start's seconds: to
    the first report that trained an epoch, less that epoch (a trial restarted from its own checkpoint
    first repeats that checkpoint's report, before its ranks have loaded it)."""
    training, starts, epochs = 0.0, [], 0
    for i, row in enumerate(rows):
        restarted = i == 0 or row.get("iterations_since_restore") == 1
        repeated = restarted and any(  # its checkpoint's report, made again
            (r["epoch"], r["epoch_time_s"]) == (row["epoch"], row["epoch_time_s"]) for r in rows[:i]
        )
        if not repeated:
            training += row["epoch_time_s"]
            epochs += 1
        if repeated and i + 1 < len(rows):
            following = rows[i + 1]
            starts.append(row["time_this_iter_s"] + following["time_this_iter_s"] - following["epoch_time_s"])
        elif restarted and not repeated:
            starts.append(row["time_this_iter_s"] - row["epoch_time_s"])
    return {"epochs": epochs, "training_s": training, "startup_s": sum(starts), "starts_s": starts,
            "trial_s": sum(row["time_this_iter_s"] for row in rows)}


if __name__ == "__main__":
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))
    from bench.run import main

    sys.exit(main([NAME] + sys.argv[1:]))
