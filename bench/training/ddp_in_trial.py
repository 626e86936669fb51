"""DDP inside a trial: the same training loop as a tune-service trial (Ray Train) and under plain
``torch.multiprocessing`` + gloo, time per epoch after start-up, and start-up itself.

Both sides run the shared loop (``tune_service.training.fit``) on the same task: the digits CNN with
its training set repeated (:class:`bench.workloads.TiledDigits`, ``repeat`` copies, so an epoch lasts
about a second on 2 cores), the same hyperparameters, 2 gloo ranks of one core each, a checkpoint and a
full validation every epoch.

- tune-service: ``tune_service.run`` of a one-trial FIFO sweep (the real trial: a Tune trial driving a
  Ray Train ``TorchTrainer`` of 2 ranks) on an embedded Ray started once. Epoch time: Tune's
  ``time_this_iter_s`` of epochs 2.. (report to report, as the trial sees them: training, validation,
  checkpoint and the report's way to Tune); start-up: the trial's start to its first report, less the
  first epoch's own ``epoch_time_s``.
- anchor: ``torch.multiprocessing.spawn`` of 2 ranks that set one thread each (as ``torchrun`` does)
  and ``init_process_group("gloo")``, then the same ``fit`` with a local context that checkpoints to
  disk. Epoch time: report to report on rank 0; start-up: spawn to first report, less the first epoch.

The sides alternate, one trial each per round, the order reversed every other round. The figure is
the median over rounds of (median tune-service epoch / median anchor epoch); Ray's own release gate
for Train against plain torch DDP is 1.15, our target 1.10. The fixed cost per epoch (the difference
of the two epoch times) is reported too: it, not the ratio, is what does not depend on epoch length.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import CpuSampler, figure, interleaved, local_ray, median

NAME = "ddp_in_trial"
SIZES = {False: {"epochs": 8, "repeat": 16, "rounds": 3}, True: {"epochs": 3, "repeat": 8, "rounds": 1}}
TARGET = "<= 1.10"
RAY_RELEASE_GATE = 1.15
WORLD_SIZE = 2


def _hparams(size: dict[str, Any]) -> dict[str, Any]:
    from bench.workloads import TiledDigits

    return {**TiledDigits.defaults, "repeat": size["repeat"]}


# ---------------------------------------------------------------------------- tune-service side

def _service_trial(size: dict[str, Any]) -> dict[str, Any]:
    import tune_service
    from bench.workloads import TiledDigits

    spec = {
        "name": "ddp-in-trial", "method": "random", "run_cap": 1, "seed": 0,
        "metric": {"name": "val_accuracy", "goal": "maximize"},
        "parameters": {k: {"value": v} for k, v in _hparams(size).items()},
        "scheduler": {"type": "fifo", "max_t": size["epochs"]},
        "resources": {"workers": WORLD_SIZE, "cpus_per_worker": 1},
        "wandb": {"mode": "disabled"},
    }
    with tempfile.TemporaryDirectory() as storage:
        started = time.perf_counter()
        with CpuSampler(_process_kind) as cpu:
            result = tune_service.run(spec, storage=storage, name="trial", verbose=0, task=TiledDigits())
        run_s = time.perf_counter() - started
        (trial,) = result.trials
        if trial.status != "completed":
            raise RuntimeError(f"the trial ended {trial.status}: {trial.error}")
        rows = [json.loads(line) for line in
                Path(result.experiment_dir, f"trial_{trial.trial_id}", "result.json").read_text().splitlines()]
    epochs = [row["time_this_iter_s"] for row in rows[1:]]
    return {"epoch_s": epochs, "startup_s": rows[0]["time_total_s"] - rows[0]["epoch_time_s"],
            "compute_s": [row["epoch_time_s"] for row in rows], "run_s": run_s,
            "final_val_accuracy": rows[-1]["val_accuracy"], "cpu_s": cpu.by_kind(), "niceness": cpu.niceness()}


def _process_kind(cmdline: str) -> str:
    """Ranks, Ray's actors by class, Ray's own daemons, and the rest."""
    if cmdline.startswith("ray::"):
        return cmdline.split(" ")[0].split(".")[0]
    for daemon in ("raylet", "gcs_server", "dashboard", "log_monitor", "monitor.py", "runtime_env", "default_worker"):
        if daemon in cmdline:
            return daemon
    return "other"


# ---------------------------------------------------------------------------- anchor side

def _rank(rank: int, size: dict[str, Any], work: str, spawned_at: float) -> None:
    import torch
    import torch.distributed as dist

    from bench.workloads import TiledDigits
    from tune_service.tasks import ResolvedTask
    from tune_service.training import LocalContext, TrainingSettings, fit
    from tune_service.training.loop import TrialConfig

    torch.set_num_threads(1)  # what torchrun's OMP_NUM_THREADS=1 and Ray's 1-CPU rank both give
    dist.init_process_group("gloo", init_method=f"file://{work}/rendezvous", rank=rank, world_size=WORLD_SIZE)
    stamps: list[float] = []
    compute: list[float] = []

    class Timed(LocalContext):
        def report(self, metrics, checkpoint_dir):
            super().report(metrics, checkpoint_dir)
            stamps.append(time.time())
            compute.append(metrics["epoch_time_s"])

    try:
        fit(TrialConfig(ResolvedTask("tiled_digits", task=TiledDigits()), _hparams(size), epochs=size["epochs"],
                        seed=0, settings=TrainingSettings(), cpus_per_rank=1, output_dir=os.path.join(work, f"rank{rank}")),
            Timed(output_dir=os.path.join(work, f"rank{rank}")))
        if rank == 0:
            Path(work, "times.json").write_text(json.dumps({"stamps": stamps, "compute": compute, "spawned_at": spawned_at}))
        dist.barrier()
    finally:
        dist.destroy_process_group()


def _bare_trial(size: dict[str, Any]) -> dict[str, Any]:
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as work:
        started = time.perf_counter()
        with CpuSampler(_process_kind) as cpu:
            mp.spawn(_rank, args=(size, work, time.time()), nprocs=WORLD_SIZE)
        run_s = time.perf_counter() - started
        times = json.loads(Path(work, "times.json").read_text())
    stamps = times["stamps"]
    return {"epoch_s": [b - a for a, b in zip(stamps, stamps[1:])],
            "startup_s": stamps[0] - times["spawned_at"] - times["compute"][0],
            "compute_s": times["compute"], "run_s": run_s, "cpu_s": cpu.by_kind(), "niceness": cpu.niceness()}


def run(quick: bool) -> dict[str, Any]:
    size = SIZES[quick]
    with local_ray():
        rounds = interleaved({"tune-service": lambda: _service_trial(size), "torch.multiprocessing": lambda: _bare_trial(size)},
                             size["rounds"])
    service, bare = rounds["tune-service"], rounds["torch.multiprocessing"]
    ratios = [median(s["epoch_s"]) / median(b["epoch_s"]) for s, b in zip(service, bare)]
    service_epoch = median([median(s["epoch_s"]) for s in service])
    bare_epoch = median([median(b["epoch_s"]) for b in bare])
    overhead = median([median(s["epoch_s"]) - median(b["epoch_s"]) for s, b in zip(service, bare)])
    # What an epoch costs beyond its own training and validation (report, checkpoint, the way to Tune).
    def outside_compute(r):
        return median([e - c for e, c in zip(r["epoch_s"], r["compute_s"][1:])])

    reporting_service = median([outside_compute(s) for s in service])
    reporting_bare = median([outside_compute(b) for b in bare])
    compute_ratio = median([median(s["compute_s"][1:]) / median(b["compute_s"][1:]) for s, b in zip(service, bare)])
    # Cores that processes other than the ranks kept busy while each side ran (Ray's daemons, the Train
    # controller, the Tune trial, the placement-group cleaner; for the anchor, the idle Ray beside it).
    def side_cores(runs, rank_kinds):
        return median([sum(v for k, v in r["cpu_s"].items() if k not in rank_kinds) / r["run_s"] for r in runs])

    ray_cores_service = side_cores(service, ("ray::RayTrainWorker",))
    ray_cores_bare = side_cores(bare, ("other",))
    startup_service = median([s["startup_s"] for s in service])
    startup_bare = median([b["startup_s"] for b in bare])
    figures = [
        figure("time per epoch after start-up, 2-rank DDP", "torch.multiprocessing + gloo", 1.0, median(ratios),
               TARGET, "x",
               note=f"median of {len(ratios)} interleaved rounds x {size['epochs'] - 1} epochs; epochs "
                    f"{bare_epoch:.2f} s (anchor) and {service_epoch:.2f} s; Ray's release gate is "
                    f"{RAY_RELEASE_GATE}. Beyond its own training and validation an epoch costs "
                    f"{reporting_service:.3f} s in the trial (report, checkpoint, relay to Tune) and "
                    f"{reporting_bare:.3f} s in the anchor; the training and validation themselves "
                    f"(epoch_time_s) took {compute_ratio:.2f}x the anchor's, while processes other than the "
                    f"ranks kept {ray_cores_service:.2f} of the 2 cores busy (anchor: {ray_cores_bare:.2f})"),
        figure("trial start-up (to the first epoch's start)", "torch.multiprocessing + gloo", startup_bare,
               startup_service, None, "s",
               note="reported separately: Ray Train's controller, the rank processes and their imports"),
    ]
    return {"figures": figures, "sizes": size, "ray_release_gate": RAY_RELEASE_GATE, "paired_ratios": ratios,
            "overhead_per_epoch_s": overhead, "training_compute_ratio": compute_ratio,
            "outside_compute_per_epoch_s": {"tune-service": reporting_service, "torch.multiprocessing": reporting_bare},
            "non_rank_cores": {"tune-service": ray_cores_service, "torch.multiprocessing": ray_cores_bare},
            "rounds": rounds}


if __name__ == "__main__":
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))
    from bench.run import main

    sys.exit(main([NAME] + sys.argv[1:]))
