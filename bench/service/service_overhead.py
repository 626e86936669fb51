"""Service overhead: the same sweep of trivial timed trials through ``tune-run`` and through plain,
hand-written Ray Tune scripts, side by side.

The sweep: ``trials`` trials, each one DDP rank of 1 CPU (so two run at once on the 2 CPUs) whose
``epochs`` epochs sleep ``epoch_s`` seconds and report (:func:`bench.workloads.sleep_epochs`). It runs
three ways, each in a fresh child process that starts its own embedded Ray (the same ``ray.init`` as
every benchmark), times the sweep alone (Ray already up) and shuts Ray down:

- ``tune-run``: ``tune_service.cli.main([SPEC, ...])``, the command line's own code path: spec loading
  and validation, the plan, the Tuner, the trials on warm gangs (the same sleeps on the shared loop,
  :class:`bench.workloads.SleepEpochsTask`), results and ``summary.json`` written, the leaderboard printed.
- ``tune+train`` (the anchor for the service's cost): the script a user writes by hand from Ray's
  docs: ``tune.Tuner(tune.with_resources(driver, {cpu: 0}), TuneConfig(num_samples=N,
  max_concurrent_trials=2))`` whose driver runs a ``TorchTrainer`` of the same loop with
  ``TuneReportCallback``, with the same Train poll interval (0.1 s) the service sets, so the ratio is
  what the service adds and not a Ray setting.
- ``tune`` (the anchor against the ideal): a plain Tune function trainable running the same sleeps in
  the trial's own process, no Ray Train: the shape of Ray's own bookkeeping release test.

The three run in turn, the order reversed every other round (A B C, C B A). Figures:

- ``tune-run`` sweep time / ``tune+train`` sweep time, median over rounds (target <= 0.3: warm gangs against a Train run per trial);
- sweep time / ideal, the ideal being trials x (epochs x epoch_s) / concurrent slots, the way Ray's
  release tests judge bookkeeping (they allow 1.28; our target 1.3): for ``tune-run`` and for ``tune``.

Each trial's start-up (trial start to first report, less one epoch) and the cost of one report come from
the trials' ``result.json`` rows and say what the gap to the ideal is made of.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import NUM_CPUS, ROOT, figure, interleaved, median

NAME = "service_overhead"
SIZES = {False: {"trials": 8, "epochs": 5, "epoch_s": 1.0, "rounds": 2},
         True: {"trials": 2, "epochs": 2, "epoch_s": 0.5, "rounds": 1}}
TARGET_VS_SCRIPT = "<= 0.3"
TARGET_VS_IDEAL = "<= 1.3"
RAY_RELEASE_GATE = 1.28
SLOTS = NUM_CPUS  # one 1-CPU rank per trial: two trials at once
POLL_ENV = {"RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": "0.1"}
SIDES = ("tune-run", "tune+train", "tune")


# ---------------------------------------------------------------------------- the child processes

def _spec(size: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": "overhead", "task": "bench.workloads:SleepEpochsTask", "method": "random", "seed": 0,
        "run_cap": size["trials"], "metric": {"name": "val_score", "goal": "maximize"},
        "parameters": {"epochs": {"value": size["epochs"]}, "epoch_s": {"value": size["epoch_s"]},
                       "x": {"min": 0.0, "max": 1.0}},
        "scheduler": {"type": "fifo", "max_t": size["epochs"]},
        "resources": {"workers": 1, "cpus_per_worker": 1},
        "training": {"checkpoint_every": 0},
        "wandb": {"mode": "disabled"},
    }


def _train_driver(config: dict[str, Any]) -> None:
    """The hand-written Tune trial: one TorchTrainer of the loop, its reports relayed to Tune."""
    from ray import train, tune
    from ray.train.torch import TorchTrainer
    from ray.tune.integration.ray_train import TuneReportCallback

    from bench.workloads import sleep_epochs

    TorchTrainer(
        sleep_epochs, train_loop_config=config,
        scaling_config=train.ScalingConfig(num_workers=1, resources_per_worker={"CPU": 1}),
        run_config=train.RunConfig(name=f"train_{tune.get_context().get_trial_id()}",
                                   storage_path=config["storage"], callbacks=[TuneReportCallback()]),
    ).fit()


def _child(side: str, size: dict[str, Any], out: str) -> None:
    import yaml
    import ray
    from ray import tune

    from bench.common import ray_init

    storage = tempfile.mkdtemp(prefix="bench_overhead_")
    ray_init(POLL_ENV if side == "tune+train" else None)
    try:
        param_space = {"epochs": size["epochs"], "epoch_s": size["epoch_s"], "x": tune.uniform(0.0, 1.0)}
        started = time.perf_counter()
        if side == "tune-run":
            from tune_service.cli import main

            spec_path = Path(storage) / "overhead.yaml"
            spec_path.write_text(yaml.safe_dump(_spec(size)))
            code = main([str(spec_path), "--storage", storage, "--name", "sweep"])
            if code != 0:
                raise SystemExit(f"tune-run exited {code}")
        elif side == "tune+train":
            tune.Tuner(
                tune.with_resources(_train_driver, {"cpu": 0, "memory": 2**20}),
                param_space={**param_space, "storage": storage},
                tune_config=tune.TuneConfig(metric="score", mode="max", num_samples=size["trials"],
                                            max_concurrent_trials=SLOTS),
                run_config=tune.RunConfig(name="sweep", storage_path=storage, verbose=0),
            ).fit()
        else:
            from bench.workloads import sleep_epochs_tune

            tune.Tuner(
                tune.with_resources(sleep_epochs_tune, {"cpu": 1}), param_space=param_space,
                tune_config=tune.TuneConfig(metric="score", mode="max", num_samples=size["trials"],
                                            max_concurrent_trials=SLOTS),
                run_config=tune.RunConfig(name="sweep", storage_path=storage, verbose=0),
            ).fit()
        sweep_s = time.perf_counter() - started
    finally:
        ray.shutdown()
    trials = []
    for path in sorted(glob.glob(os.path.join(storage, "sweep", "*", "result.json"))):
        rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
        if rows:
            trials.append({"first_report_s": rows[0]["time_total_s"], "total_s": rows[-1]["time_total_s"],
                           "reports": len(rows)})
    shutil.rmtree(storage, ignore_errors=True)
    Path(out).write_text(json.dumps({"sweep_s": sweep_s, "trials": trials}))


# ---------------------------------------------------------------------------- the parent

def _run_side(side: str, size: dict[str, Any]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as work:
        out = os.path.join(work, "out.json")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "bench.service.service_overhead", "--child", side,
                               "--size", json.dumps(size), "--out", out],
                              cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        command_s = time.perf_counter() - started
        if done.returncode != 0 or not os.path.exists(out):
            raise RuntimeError(f"{side} sweep failed (exit {done.returncode}):\n{done.stdout[-3000:]}")
        result = json.loads(Path(out).read_text())
    result["command_s"] = command_s
    if len(result["trials"]) != size["trials"]:
        raise RuntimeError(f"{side}: {len(result['trials'])} trials finished, expected {size['trials']}")
    epochs, epoch_s = size["epochs"], size["epoch_s"]
    result["startup_s"] = median([t["first_report_s"] - epoch_s for t in result["trials"]])
    result["per_report_s"] = median([(t["total_s"] - t["first_report_s"]) / max(1, epochs - 1) - epoch_s
                                     for t in result["trials"]])
    return result


def run(quick: bool) -> dict[str, Any]:
    size = SIZES[quick]
    ideal_s = size["trials"] * size["epochs"] * size["epoch_s"] / SLOTS
    rounds = interleaved({side: (lambda side=side: _run_side(side, size)) for side in SIDES}, size["rounds"])
    service, script, plain = rounds["tune-run"], rounds["tune+train"], rounds["tune"]
    vs_script = median([s["sweep_s"] / a["sweep_s"] for s, a in zip(service, script)])
    command_ratio = median([s["command_s"] / a["command_s"] for s, a in zip(service, script)])
    service_ideal = median([s["sweep_s"] / ideal_s for s in service])
    script_ideal = median([s["sweep_s"] / ideal_s for s in script])
    plain_ideal = median([s["sweep_s"] / ideal_s for s in plain])
    startup = median([s["startup_s"] for s in service])
    per_report = median([s["per_report_s"] for s in service])
    waves = -(-size["trials"] // SLOTS)
    # What the tune-run sweep would take if the only costs were the measured trial start-up and
    # per-report cost on top of the sleeps: what is left over is Tune's and the service's bookkeeping.
    explained_s = waves * (startup + size["epochs"] * (size["epoch_s"] + per_report))
    figures = [
        figure("sweep wall time, same trivial trials", "hand-written Tune + Train script", 1.0, vs_script,
               TARGET_VS_SCRIPT, "x",
               note=f"ratio of sweep times, median of {size['rounds']} interleaved round(s); "
                    f"whole commands (Python start, Ray start and shutdown included): {command_ratio:.3f}"),
        figure("sweep wall time / ideal", "plain Tune function trials (Ray's gate 1.28)", plain_ideal,
               service_ideal, TARGET_VS_IDEAL, "x",
               note=f"ideal = {size['trials']} trials x {size['epochs'] * size['epoch_s']:g} s / {SLOTS} slots "
                    f"= {ideal_s:g} s; hand-written Tune + Train script: {script_ideal:.2f}; a tune-run "
                    f"trial starts up in {startup:.2f} s (median; the first of each slot builds its gang) and "
                    f"a report costs {per_report:.3f} s"),
    ]
    return {
        "figures": figures,
        "sizes": size, "ideal_s": ideal_s, "slots": SLOTS,
        "ray_release_gate_vs_ideal": RAY_RELEASE_GATE,
        "explained_by_startup_and_reports_s": explained_s,
        "rounds": rounds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", choices=SIDES)
    parser.add_argument("--size")
    parser.add_argument("--out")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.child:
        _child(args.child, json.loads(args.size), args.out)
        return
    from bench.run import main as suite

    suite([NAME] + (["--quick"] if args.quick else []))


if __name__ == "__main__":
    main()
