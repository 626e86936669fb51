"""Soak: a 600-trial sweep on warm gangs (random search, FIFO, 2 epochs, 2 DDP ranks each, the built-in
digits task, wandb off) through ``tune_service.run`` on an embedded Ray, as one sweep.

What it checks, per run:

- every trial has its results (2 epochs each) and none hangs (the slowest trial's own time is reported);
- memory stays flat: the driver's RSS, the rank processes' RSS (all ``RankWorker`` actors) and the
  trial actors' RSS, sampled every second and binned by how many trials had finished when the sample was
  taken; the median of the samples while the last 100 trials ran (``--window``) must be within 10 % of
  the median while the first 100 ran. Gangs are recycled every ``execution.recycle_after_trials`` (100 by
  default), so each rank process's own growth over its life is reported too;
- the sweep's wall time (target under 30 minutes on the 2-core machine for 600 trials), and its wall time
  per trial over the first and the last window;
- how many trials' directories the driver's staging copy of the experiment holds at the end (Tune copies
  that copy into storage at each state save; the trials that left Tune's controller leave it too).

``--scheduler asha --epochs 4 --trials 10000 --window 1000`` is issue 43's 10,000-trial figure (random +
ASHA, 2 ranks a trial).

Not in CI and not in ``bench/run.py`` (about 4 minutes a run here): run it by hand, three times, and report
every run: ``python bench/service/soak.py [--trials 600]``. Each run is appended to ``bench/results/soak.json``.

Under FIFO (as here) and ASHA a trial that has ended leaves Tune's controller
(:mod:`tune_service.execution.retiring`, issue 43): the driver's memory does not grow with the trials
behind it. ``--keep-ended`` switches that off (the driver keeps every trial, as Tune does by design,
ray-project/ray#64231), for the figure beside it; ``--keep-staged`` leaves the retired trials' directories
in Tune's staging copy of the experiment (:mod:`tune_service.experiment.staging`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from tune_service.execution import allocator
from tune_service.experiment import layout

ROOT = Path(__file__).resolve().parent.parent.parent
RESULTS = ROOT / "bench" / "results" / "soak.json"
TARGET_WALL_S = 30 * 60
TARGET_GROWTH = 0.10
WINDOW = 100  # trials: the first and the last window are compared (--window)
SETTLE = 5  # trials: a rank process's growth over its life is counted from this many trials into it

#: Process titles grouped into the figures (Ray names an actor's process ``ray::Class`` or
#: ``ray::Class.method`` while a call runs; Tune's actor for a function trial is ``ImplicitFunc``).
RANKS, TRIAL_ACTORS = "ray::RankWorker", "ray::ImplicitFunc"


def _title(process) -> str:
    title = (process.cmdline() or [process.name()])[0]
    return title.split(".")[0].split()[0] if title.startswith("ray::") else process.name()


class MemorySampler(threading.Thread):
    """Every ``period`` s: the driver's RSS, the summed RSS of the rank processes and of the trial actors,
    and how many trials have ended (the lines of the service's ``ended_trials.jsonl``).

    It runs in the driver's process, so its own cost stays constant: it reads only the log's new bytes
    each time. (It globbed every trial's ``result.json`` each second until 2026-11-30: over 2,000 trials
    that took a quarter of the driver's samples in a profile, and its set of paths grew with the trials.)"""

    def __init__(self, experiment: Path, period: float = 1.0):
        super().__init__(daemon=True)
        self.experiment, self.period = experiment, period
        self.samples: list[dict] = []
        #: rank pid -> {"seen_at": trials finished when first seen, "base": RSS once SETTLE trials more had
        #: finished (its first trials import torch and build data), "last": RSS, "samples": n}
        self.rank_life: dict[int, dict] = {}
        self._ended, self._read = 0, 0  # the log's complete lines so far, and the bytes they came from
        self._titles: dict[int, str] = {}
        self._done = threading.Event()

    def _finished_trials(self) -> int:
        try:
            with open(self.experiment / layout.ENDED_TRIALS_FILE, "rb") as log:
                log.seek(self._read)
                new = log.read()
        except OSError:
            return self._ended  # not written yet
        complete = new.rfind(b"\n") + 1  # a line being written is read next time
        self._ended += new.count(b"\n", 0, complete)
        self._read += complete
        return self._ended

    def run(self) -> None:
        import psutil  # Ray's own dependency

        me, started = psutil.Process(), time.monotonic()
        while not self._done.wait(self.period):
            done = self._finished_trials()
            rss = {"driver": me.memory_info().rss, RANKS: 0, TRIAL_ACTORS: 0}
            for child in me.children(recursive=True):
                try:
                    title = _title(child)
                    if title in (RANKS, TRIAL_ACTORS):
                        self._titles[child.pid] = title
                    title = self._titles.get(child.pid, title)  # an actor reads ray::IDLE between calls
                    if title in rss:
                        child_rss = child.memory_info().rss
                        rss[title] += child_rss
                        if title == RANKS:
                            life = self.rank_life.setdefault(child.pid, {"seen_at": done, "base": None,
                                                                         "last": 0, "samples": 0})
                            if life["base"] is None and done >= life["seen_at"] + SETTLE:
                                life["base"] = child_rss
                            life["last"], life["samples"] = child_rss, life["samples"] + 1
                except psutil.Error:
                    continue
            self.samples.append({"t": round(time.monotonic() - started, 1), "finished": done,
                                 **{k: round(v / 2**20, 1) for k, v in rss.items()}})
            if len(self.samples) % 60 == 0:
                print(f"[{self.samples[-1]['t']:6.0f} s] {done} trials finished; RSS MiB: "
                      + ", ".join(f"{k} {self.samples[-1][k]:.0f}" for k in rss), flush=True)

    def stop(self) -> None:
        self._done.set()
        self.join()


def keep_ended_trials() -> None:
    """``--keep-ended``: the driver keeps every trial in Tune's controller, as before issue 43."""
    from tune_service.execution import driver

    driver.retires = lambda spec: False


def keep_staged_trial_dirs() -> None:
    """``--keep-staged``: a retired trial's directory stays in Tune's staging copy of the experiment, which
    Tune copies whole into storage at each state save (before 2026-11-30)."""
    from tune_service.experiment.staging import StagedTrialDirs

    StagedTrialDirs.retired = lambda self, trials: None


def window_medians(samples: list[dict], key: str, lo: int, hi: int) -> float | None:
    """The median of ``key`` over the samples taken while trials ``lo+1 .. hi`` were running (0 values, a
    moment with no process of the kind, such as a gang being rebuilt, left out)."""
    values = [s[key] for s in samples if lo <= s["finished"] < hi and s[key] > 0]
    return round(statistics.median(values), 1) if values else None


def window_wall_per_trial(samples: list[dict], window: int, trials: int, wall_s: float) -> dict:
    """The sweep's wall time per trial over its first ``window`` trials (from the first trial ended, so a
    cold start is not counted) and over its last, and their ratio: from the samples' trial counts, the
    sweep's end at ``wall_s``."""

    def reached(count: int) -> float:
        return next((s["t"] for s in samples if s["finished"] >= count), wall_s)

    first = (reached(1 + window) - reached(1)) / window
    final = (wall_s - reached(trials - window)) / window
    return {"first_window": round(first, 3), "last_window": round(final, 3), "ratio": round(final / first, 3)}


def staged_trial_dirs(experiment: str) -> int | None:
    """How many trial directories the staging copies of an experiment named ``experiment`` hold in this
    machine's newest Ray session that has one (Ray's layout: ``<temp>/ray/session_<id>/artifacts/<time>/
    <experiment>/driver_artifacts``, a ``<time>`` for each of Tune's storage contexts of the experiment;
    ``session_latest`` is a link, read once); None where there is none."""
    ray_temp = Path(tempfile.gettempdir(), "ray")
    copies = {c.resolve() for c in ray_temp.glob(f"session_*/artifacts/*/{experiment}/driver_artifacts")}
    if not copies:
        return None
    session = max((copy.parents[3] for copy in copies), key=os.path.getmtime)
    return sum(d.is_dir() for copy in copies if copy.parents[3] == session for d in copy.iterdir())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=600)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--scheduler", choices=("fifo", "asha"), default="fifo",
                        help="asha: rungs at every power of 2 epochs up to --epochs, reduction factor 2")
    parser.add_argument("--window", type=int, default=WINDOW, help="trials in the first and the last window")
    parser.add_argument("--results", default=str(RESULTS), help="the JSON file this run is appended to")
    parser.add_argument("--keep-ended", action="store_true", help="Tune keeps every ended trial (before issue 43)")
    parser.add_argument("--keep-staged", action="store_true",
                        help="retired trials' directories stay in Tune's staging copy (before 2026-11-30)")
    args = parser.parse_args()
    if args.keep_ended:
        keep_ended_trials()
    if args.keep_staged:
        keep_staged_trial_dirs()

    import ray

    import tune_service
    from bench.common import trial_seconds
    from tune_service.execution.connect import init_ray

    spec = {
        "name": "soak", "task": "digits", "method": "random", "run_cap": args.trials, "seed": 0,
        "metric": {"name": "val_accuracy", "goal": "maximize"},
        "parameters": {"lr": {"distribution": "log_uniform_values", "min": 1e-3, "max": 3e-2},
                       "hidden": {"values": [32, 64]}},
        "scheduler": {"type": "fifo", "max_t": args.epochs} if args.scheduler == "fifo" else
                     {"type": "asha", "max_t": args.epochs, "grace_period": 1, "reduction_factor": 2},
        "resources": {"workers": 2, "cpus_per_worker": 1},
        "wandb": {"mode": "disabled"},
    }
    with tempfile.TemporaryDirectory(prefix="soak-") as storage:
        experiment = Path(storage) / "soak"
        init_ray(num_cpus=os.cpu_count())  # the embedded Ray that tune-run starts
        sampler = MemorySampler(experiment)
        try:
            sampler.start()
            started = time.perf_counter()
            result = tune_service.run(spec, storage=storage, name="soak", verbose=0)
            wall_s = time.perf_counter() - started
        finally:
            try:
                sampler.stop()
            finally:
                ray.shutdown()
        own_s = sorted(trial_seconds(experiment))
        ended_log = experiment / layout.ENDED_TRIALS_FILE
        logged = len(ended_log.read_text().splitlines()) if ended_log.exists() else None
        # what Tune's controller still held at the end (its final saved state): none, its ended trials retired
        tune_held = len(json.loads(max(experiment.glob("experiment_state-*.json")).read_text())["trial_data"])
        staged = staged_trial_dirs("soak")

    samples, window, last = sampler.samples, args.window, args.trials - args.window
    memory = {}
    for key in ("driver", RANKS, TRIAL_ACTORS):
        first, final = window_medians(samples, key, 0, window), window_medians(samples, key, last, args.trials)
        growth = None if not first or final is None else round(final / first - 1, 3)
        memory[key] = {"first_window_mib": first, "last_window_mib": final, "growth": growth,
                       "flat": growth is not None and abs(growth) <= TARGET_GROWTH}
    lives = [{"pid": pid, "base_mib": round(life["base"] / 2**20, 1), "last_mib": round(life["last"] / 2**20, 1),
              "samples": life["samples"]} for pid, life in sampler.rank_life.items() if life["base"]]
    # a trial ASHA stopped has its results up to its rung
    complete = [t for t in result.trials if t.metrics and (t.epochs == args.epochs or t.status == "stopped")]
    run = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "variant": "keep_ended" if args.keep_ended else "service (ended trials retired)",
        "retired_trial_dirs": "kept in staging" if args.keep_staged else "moved into storage",
        "scheduler": args.scheduler, "window_trials": window,
        # glibc's arenas: the service caps them at 2 unless the environment sets MALLOC_ARENA_MAX (which wins)
        "malloc_arena_max": os.environ.get("MALLOC_ARENA_MAX", f"{allocator.ARENA_LIMIT} (the service's cap)"),
        "trials_in_ended_log": logged,
        "trials_tune_held_at_the_end": tune_held,
        # trials' directories left in the driver's staging copy of the experiment, which Tune's saves copy
        "trial_dirs_in_staging_at_the_end": staged,
        "trials": args.trials, "epochs_per_trial": args.epochs,
        "wall_s": round(wall_s, 1), "under_30_min": wall_s < TARGET_WALL_S,
        "trials_recorded": len(result.trials), "trials_complete": len(complete),
        "all_results": len(complete) == args.trials,
        "statuses": {s: sum(t.status == s for t in result.trials) for s in ("completed", "stopped", "failed",
                                                                             "interrupted")},
        "trial_own_s": {"median": own_s[len(own_s) // 2], "max": own_s[-1]} if own_s else None,
        "wall_per_trial_s": window_wall_per_trial(samples, window, args.trials, wall_s),
        "memory": memory,
        "rank_processes": len(lives),
        # Each rank process from SETTLE trials into its life (see MemorySampler) to its last sample.
        "rank_growth_over_life_max": max((round(x["last_mib"] / x["base_mib"] - 1, 3) for x in lives), default=None),
        "rank_lives": lives,
        "samples": len(samples),
        "machine": {"cpus": os.cpu_count(), "load_average": [round(x, 2) for x in os.getloadavg()],
                    "python": sys.version.split()[0], "ray": ray.__version__},
    }
    print(json.dumps({k: v for k, v in run.items() if k != "rank_lives"}, indent=2))
    out = Path(args.results)
    runs = json.loads(out.read_text())["runs"] if out.exists() else []
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"runs": runs + [run]}, indent=2) + "\n")
    print(f"appended run {len(runs) + 1} to {out}")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
