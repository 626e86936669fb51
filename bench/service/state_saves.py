"""Tune's experiment-state saves in a warm-gang sweep: how many, and what each costs as trials end.

A probe for issue 43 (not in the suite; about 1.5 minutes a run for 300 trials here): the soak's sweep
(the digits task, random search, FIFO, 2 epochs, 2 ranks a trial, wandb off) through
``tune_service.run`` on an embedded Ray, with Tune's save of its experiment state timed. Tune saves it on
a period (``TUNE_GLOBAL_CHECKPOINT_S``, 2 s here) and, left to itself, also whenever a trial has
checkpointed ``num_to_keep`` times (2 here) since the last save (Ray's ``_sync_every_n_trial_checkpoints``,
"a non-performant workaround" in its own comment). Each save writes every trial's state, so its cost
grows with the trials behind it. The service switches that forcing off
(:mod:`tune_service.experiment.state_saves`); ``--variants service,tune`` runs the sweep both ways,
alternating, the ``tune`` one without the service's switch.

It times ``TuneController.save_to_dir`` (Ray's private method that writes the state; named here only,
and the probe fails with an AttributeError if Ray renames it) and counts the saves that were forced.
``python bench/service/state_saves.py [--trials 300] [--variants service,tune] [--repeats 1]``; each run
is appended to ``bench/results/state_saves.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
RESULTS = ROOT / "bench" / "results" / "state_saves.json"
if __package__ in (None, ""):
    sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=300)
    parser.add_argument("--variants", default="service", help="service, tune, or both (alternating)")
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    variants = args.variants.split(",")
    for _ in range(args.repeats):
        for variant in variants:
            run = probe(args.trials, variant)
            print(json.dumps({k: v for k, v in run.items() if k != "machine"}), flush=True)
            runs = json.loads(RESULTS.read_text()) if RESULTS.exists() else []
            RESULTS.write_text(json.dumps([*runs, run], indent=2) + "\n")


def probe(trials: int, variant: str) -> dict:
    """One sweep of ``trials`` trials, its state saves timed: ``variant`` ``service`` as the service runs
    it, ``tune`` with Tune's forced saves back."""
    import ray
    from ray.tune.execution import tune_controller

    import tune_service
    from bench.common import machine_info
    from tune_service.execution.connect import init_ray
    from tune_service.experiment import state_saves

    saves: list[tuple[int, float]] = []  # (trials ended when it saved, seconds it took)
    forced = 0
    save_to_dir, checkpoint = tune_controller.TuneController.save_to_dir, tune_controller.TuneController.checkpoint
    ours = state_saves.saves_on_their_period

    def timed_save(controller) -> None:
        started = time.perf_counter()
        save_to_dir(controller)
        ended = sum(t.status in ("TERMINATED", "ERROR") for t in controller.get_trials())
        saves.append((ended, time.perf_counter() - started))

    def counted_checkpoint(controller, force: bool = False, wait: bool = False) -> None:
        nonlocal forced
        forced += bool(controller._checkpoint_manager._should_force_sync_up)
        checkpoint(controller, force=force, wait=wait)

    tune_controller.TuneController.save_to_dir = timed_save
    tune_controller.TuneController.checkpoint = counted_checkpoint
    if variant == "tune":
        state_saves.saves_on_their_period = contextlib.nullcontext
    spec = {
        "name": "state-saves", "task": "digits", "method": "random", "run_cap": trials, "seed": 0,
        "metric": {"name": "val_accuracy", "goal": "maximize"},
        "parameters": {"lr": {"distribution": "log_uniform_values", "min": 1e-3, "max": 3e-2},
                       "hidden": {"values": [32, 64]}},
        "scheduler": {"type": "fifo", "max_t": 2},
        "resources": {"workers": 2, "cpus_per_worker": 1},
        "wandb": {"mode": "disabled"},
    }
    try:
        with tempfile.TemporaryDirectory(prefix="state-saves-") as storage:
            init_ray(num_cpus=os.cpu_count())
            started = time.perf_counter()
            try:
                tune_service.run(spec, storage=storage, name="probe", verbose=0)
            finally:
                ray.shutdown()
            wall_s = time.perf_counter() - started
            state = max(Path(storage, "probe").glob("experiment_state-*.json"), key=lambda p: p.stat().st_mtime)
            state_bytes = state.stat().st_size
    finally:
        tune_controller.TuneController.save_to_dir, tune_controller.TuneController.checkpoint = save_to_dir, checkpoint
        state_saves.saves_on_their_period = ours
    quarter = trials // 4
    by_quarter = []
    for low in range(0, trials, quarter):
        these = [s for ended, s in saves if low <= ended < low + quarter]
        by_quarter.append({"trials_ended": [low, low + quarter], "saves": len(these),
                           "mean_save_ms": round(1e3 * sum(these) / max(len(these), 1), 2)})
    return {"date": time.strftime("%Y-%m-%dT%H:%M:%S"), "variant": variant, "trials": trials,
            "wall_s": round(wall_s, 1), "saves": len(saves), "forced": forced,
            "save_s_total": round(sum(s for _, s in saves), 2), "state_bytes_at_end": state_bytes,
            "by_quarter": by_quarter, "load_average": os.getloadavg(), "machine": machine_info()}

if __name__ == "__main__":
    main()
