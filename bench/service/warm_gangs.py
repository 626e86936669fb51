"""Warm gangs: the README's quickstart (10 trials of 2 DDP ranks, hyperopt TPE + ASHA, a checkpoint every
epoch, wandb offline) as a user runs it, ``tune-run search_spaces/quickstart.yaml``, on warm gangs and
with ``--set execution.gangs=fresh`` (a new Ray Train run per trial, as before warm gangs), side by side,
the order alternating by round. Each run is the whole command in a child process: Python's and Ray's
start, the sweep, the leaderboard.

Figures:

- the quickstart's wall time, from the command to the leaderboard (target <= 45 s), beside the fresh run;
- a 2-rank trial's start on a warm gang (target <= 0.5 s): from Tune starting the trial to its first
  report, less the first epoch's own time (``time_total_s - epoch_time_s`` of its first result), median
  over the trials that found their slot's gang up; beside it the same for the trial that built the
  gang (the cold build) and for the fresh runs' trials.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import ROOT, figure, interleaved, median

NAME = "warm_gangs"
SIZES = {False: {"rounds": 2, "run_cap": 10}, True: {"rounds": 1, "run_cap": 4}}
TARGET_QUICKSTART_S = "<= 45"
TARGET_WARM_START_S = "<= 0.5"
SPEC = ROOT / "search_spaces" / "quickstart.yaml"


def quickstart(gangs: str, run_cap: int, settings: tuple[str, ...] = (), wandb_mode: str = "offline") -> dict[str, Any]:
    """One ``tune-run`` of the quickstart (``settings``: more ``--set`` overrides): its wall time and each
    trial's start-up, in start order."""
    with tempfile.TemporaryDirectory(prefix="bench_warm_") as storage:
        command = [sys.executable, "-m", "tune_service.cli", str(SPEC), "--storage", storage, "--name", "sweep",
                   "--set", f"execution.gangs={gangs}", "--set", f"run_cap={run_cap}"]
        for setting in settings:
            command += ["--set", setting]
        started = time.perf_counter()
        done = subprocess.run(command, cwd=storage, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env={**os.environ, "WANDB_MODE": wandb_mode})
        wall_s = time.perf_counter() - started
        if done.returncode != 0:
            raise RuntimeError(f"quickstart ({gangs}) exited {done.returncode}:\n{done.stdout[-3000:]}")
        summary = json.loads(Path(storage, "sweep", "summary.json").read_text())
        trials = []
        for path in glob.glob(os.path.join(storage, "sweep", "trial_*", "result.json")):
            rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
            trials.append({"started": rows[0]["timestamp"] - rows[0]["time_total_s"], "epochs": len(rows),
                           "startup_s": rows[0]["time_total_s"] - rows[0]["epoch_time_s"]})
    trials.sort(key=lambda t: t["started"])
    print(f"      {gangs}: {wall_s:.1f} s; each trial's start (s): "
          + ", ".join(f"{t['startup_s']:.2f}" for t in trials), flush=True)
    packing = summary.get("packing", {}).get("reason")  # what gpus_per_worker: auto chose
    return {"wall_s": wall_s, "trials": trials, "output_lines": len(done.stdout.splitlines()), "packing": packing}


def side_by_side(size: dict[str, Any], settings: tuple[str, ...] = (), wandb_mode: str = "offline", *,
                 quickstart_name: str, start_name: str, trials_note: str) -> dict[str, Any]:
    """The quickstart on warm gangs and fresh, interleaved for ``size["rounds"]`` rounds; its two figures
    (wall time, a trial's start) and every run. One concurrency slot: a run's first trial builds the gang."""
    rounds = interleaved({gangs: (lambda gangs=gangs: quickstart(gangs, size["run_cap"], settings, wandb_mode))
                          for gangs in ("warm", "fresh")}, size["rounds"])
    warm, fresh = rounds["warm"], rounds["fresh"]
    warm_starts = [t["startup_s"] for r in warm for t in r["trials"][1:]]
    cold_builds = [r["trials"][0]["startup_s"] for r in warm]
    fresh_starts = [t["startup_s"] for r in fresh for t in r["trials"]]
    figures = [
        figure(quickstart_name, "fresh Ray Train run per trial",
               median([r["wall_s"] for r in fresh]), median([r["wall_s"] for r in warm]), TARGET_QUICKSTART_S, "s",
               note=f"{size['run_cap']} {trials_note}, median of {size['rounds']} round(s); every run: warm "
                    + ", ".join(f"{r['wall_s']:.1f}" for r in warm) + " s; fresh "
                    + ", ".join(f"{r['wall_s']:.1f}" for r in fresh) + " s"),
        figure(start_name, "fresh Ray Train run per trial", median(fresh_starts),
               median(warm_starts), TARGET_WARM_START_S, "s",
               note=f"trial start to first report less its first epoch, median of {len(warm_starts)} warm "
                    f"trials (max {max(warm_starts):.2f} s); the cold gang build (first trial): "
                    + ", ".join(f"{s:.1f}" for s in cold_builds) + " s"),
    ]
    return {"figures": figures, "sizes": size, "rounds": rounds}


def run(quick: bool) -> dict[str, Any]:
    return side_by_side(SIZES[quick], quickstart_name="quickstart, command to leaderboard",
                        start_name="2-rank trial start on a warm gang", trials_note="trials")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))
    from bench.run import main

    sys.exit(main([NAME] + sys.argv[1:]))
