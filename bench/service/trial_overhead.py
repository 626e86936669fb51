"""What a Tune trial that runs a 2-rank TorchTrainer costs on top of its training.

Runs the same sweep of trivial trials (each rank reports ``--reports`` empty epochs) twice in one
process, each on a fresh embedded Ray: once with Ray's default Train poll interval (2 s) and once with
this service's setting, and prints, side by side:

- per-report overhead: the median time between two consecutive ``ray.train.report`` calls of a rank
  whose epoch does no work (so all of it is overhead);
- trial start-up: from the Tune trial's start to its first report (the TorchTrainer's controller, the
  2 rank processes, the process group, and one empty epoch);
- trial wall time.

Targets on the 2-core development machine: per-report overhead <= 0.2 s, start-up <= 5 s.
Usage: ``python bench/service/trial_overhead.py [--reports 10] [--trials 2]``; writes
``bench/results/trial_overhead.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent.parent / "results" / "trial_overhead.json"
TARGETS = {"per_report_s": 0.2, "startup_s": 5.0}


def empty_epochs(config):
    """A plain train loop whose epochs do nothing but report: what remains is the overhead."""
    import ray.train
    import torch
    import torch.distributed as dist

    for epoch in range(1, int(config["reports"]) + 1):
        now = torch.tensor([time.time()], dtype=torch.float64)
        dist.all_reduce(now, op=dist.ReduceOp.MAX)  # the last rank to arrive
        ray.train.report({"epoch": epoch, "reported_at": float(now.item())})


def measure(poll_interval_s: str | None, reports: int, trials: int) -> dict:
    import ray

    from tune_service.execution.connect import free_listening_port
    from tune_service.execution.driver import build_tuner
    from tune_service.execution.plan import make_plan
    from tune_service.execution.resources import from_ray
    from tune_service.spec import load_spec

    env = {"RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": poll_interval_s} if poll_interval_s else {}
    # A dashboard port of our own, told to the workers: Ray Train's placement-group cleaner otherwise
    # fails when another Ray runs on this machine, and the next trial waits forever (see bench/common.py).
    port = free_listening_port()
    env["RAY_API_SERVER_ADDRESS"] = f"http://127.0.0.1:{port}"
    ray.init(address="local", num_cpus=2, include_dashboard=True, dashboard_host="127.0.0.1", dashboard_port=port,
             logging_level="ERROR", runtime_env={"env_vars": env})
    try:
        spec = load_spec({
            "name": "overhead", "method": "random", "run_cap": trials,
            "metric": {"name": "epoch", "goal": "maximize"},
            "parameters": {"reports": {"value": reports}},
            "scheduler": {"type": "fifo", "max_t": reports},
            "resources": {"workers": 2, "cpus_per_worker": 1},
        })
        plan = make_plan(spec, from_ray(), task=empty_epochs)
        with tempfile.TemporaryDirectory() as storage:
            started = time.perf_counter()
            grid = build_tuner(plan, storage, "bench", verbose=0).create().fit()
            sweep_s = time.perf_counter() - started
            frames = [r.metrics_dataframe for r in grid]
    finally:
        ray.shutdown()
    gaps, startups, walls = [], [], []
    for df in frames:
        stamps = df["reported_at"].tolist()
        gaps += [b - a for a, b in zip(stamps, stamps[1:])]
        startups.append(float(df["time_total_s"].iloc[0]))
        walls.append(float(df["time_total_s"].iloc[-1]))
    return {
        "poll_interval_s": float(poll_interval_s) if poll_interval_s else None,
        "per_report_s": statistics.median(gaps),
        "startup_s": statistics.median(startups),
        "trial_wall_s": statistics.median(walls),
        "sweep_wall_s": sweep_s,
        "trials": len(frames),
        "reports_per_trial": reports,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=int, default=10)
    parser.add_argument("--trials", type=int, default=2)
    args = parser.parse_args()

    from tune_service.execution.fresh_trial import TRAIN_POLL_INTERVAL_S

    ray_default = measure("2.0", args.reports, args.trials)
    service = measure(None, args.reports, args.trials)  # the trial sets its own poll interval
    service["poll_interval_s"] = float(TRAIN_POLL_INTERVAL_S)

    print(f"{'':28}{'ray default':>14}{'tune-service':>14}{'ratio':>8}{'target':>9}")
    for key, label in (("per_report_s", "per-report overhead (s)"), ("startup_s", "trial start-up (s)"),
                       ("trial_wall_s", "trial wall time (s)"), ("sweep_wall_s", "sweep wall time (s)")):
        target = TARGETS.get(key)
        print(f"{label:28}{ray_default[key]:14.3f}{service[key]:14.3f}{service[key] / ray_default[key]:8.2f}"
              f"{'' if target is None else f'<= {target:g}':>9}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({
        "ray_default": ray_default, "tune_service": service, "targets": TARGETS,
        "machine": "2-core development machine, CPU only",
    }, indent=2) + "\n")
    print(f"written {RESULTS}")


if __name__ == "__main__":
    main()
