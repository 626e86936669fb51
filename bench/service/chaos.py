"""Chaos: a long random + ASHA sweep of 2-rank trials run twice, once without faults and once while a chaos
loop SIGKILLs a random rank process every ``--rank-kill-every`` seconds and the driver itself twice (at a
third and two thirds of the trials ended), resuming it each time with ``tune-run --resume``.

The trials' metric is a deterministic function of their config (:class:`ScoredDigits`: ``score`` is the
hyperparameter ``quality`` at every epoch, the ranks training the digits task for real), and with 2 ranks
on the machine's 2 CPUs the trials run one at a time, in the searcher's order. So ASHA must decide the same
with faults as without, and this checks it, per run:

- every trial ended exactly once: ``ended_trials.jsonl`` holds each trial once, ``--trials`` of them;
- with all its results: each trial's ``result.json`` holds a report of each of its epochs (a trial whose
  rank was killed reports its checkpoint's epoch again when it goes on: counted apart);
- ASHA's decisions identical: trial by trial in creation order, the same config, the same epochs trained
  and the same status as in the run without faults (the share that agree is reported; the target is 1.0);
- the resumes' times: from the driver's kill to its resumed run's first trial ended.

Not in CI and not in ``bench/run.py`` (minutes a run): ``python bench/service/chaos.py [--trials 600]``.
The run without faults is made once per invocation and compared with ``--runs`` chaos runs; each
invocation is appended to ``bench/results/chaos.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import torch

from tune_service.tasks.digits import Digits

ROOT = Path(__file__).resolve().parent.parent.parent
RESULTS = ROOT / "bench" / "results" / "chaos.json"
RANKS = "ray::RankWorker"
#: Ray's agents outlive a SIGKILLed driver by up to 60 s (they wait on the dead raylet); not waited for.
RAY_AGENTS = ("ray::DashboardAgent", "ray::RuntimeEnvAgent")


class ScoredDigits(Digits):
    """The digits task whose validation ``score`` is its hyperparameter ``quality`` at every epoch: the
    ranks train for real, and a scheduler's decisions follow from the configs alone."""

    hyperparameters = (*Digits.defaults, "quality")
    metric_names = ("accuracy", "score")

    def model(self, config):
        self.quality = float(config["quality"])
        return super().model(config)

    def metrics(self, outputs, targets):
        return {**super().metrics(outputs, targets), "score": torch.tensor(self.quality * targets.shape[0])}


def sweep_spec(trials: int, max_failures: int) -> dict:
    return {
        "name": "chaos", "task": f"{__name__ if __name__ != '__main__' else 'bench.service.chaos'}:ScoredDigits",
        "method": "random", "run_cap": trials, "seed": 0,
        "metric": {"name": "val_score", "goal": "maximize"},
        "parameters": {"quality": {"distribution": "uniform", "min": 0.0, "max": 1.0},
                       "hidden": {"value": 32}},
        "scheduler": {"type": "asha", "max_t": 4, "grace_period": 1, "reduction_factor": 2},
        "resources": {"workers": 2, "cpus_per_worker": 1},
        "failure": {"max_failures": max_failures},
        "wandb": {"mode": "disabled"},
    }


def _driver(args: list[str]) -> subprocess.Popen:
    """``python -m tune_service.cli ARGS`` with this repository on its path (the ranks import this module),
    quiet, its output kept in the experiment's parent for a look after a failure."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen([sys.executable, "-m", "tune_service.cli", *args, "-q"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _finish(driver: subprocess.Popen, what: str) -> None:
    output = driver.communicate()[0]
    if driver.returncode != 0:
        raise SystemExit(f"{what} exited {driver.returncode}:\n{output[-4000:]}")


def _ended(experiment: Path) -> list[str]:
    """The trial ids in the experiment's ended-trials log, a line each, in the order they ended."""
    from tune_service.results import sweep_result

    return [t.trial_id for t in sweep_result.read_ended(experiment / "ended_trials.jsonl")]


def _title(process) -> str:
    try:
        return (process.cmdline() or [""])[0]
    except Exception:  # psutil.Error: gone between listing and reading
        return ""


class RankKiller(threading.Thread):
    """Every ``period`` s, SIGKILLs one rank process of the driver's embedded Ray, picked at random."""

    def __init__(self, period: float, seed: int):
        super().__init__(daemon=True)
        self.period, self.random = period, random.Random(seed)
        self.driver_pid: int | None = None
        self.kills: list[float] = []
        self._done = threading.Event()

    def run(self) -> None:
        import psutil

        started = time.monotonic()
        while not self._done.wait(self.period):
            try:
                ranks = [p for p in psutil.Process(self.driver_pid).children(recursive=True)
                         if _title(p).startswith(RANKS)]
            except psutil.Error:  # the driver is being killed or resumed: next time
                continue
            if ranks:
                try:
                    self.random.choice(ranks).send_signal(signal.SIGKILL)
                    self.kills.append(round(time.monotonic() - started, 1))
                except psutil.Error:
                    pass

    def stop(self) -> None:
        self._done.set()
        self.join()


def _kill_driver(driver: subprocess.Popen) -> None:
    """SIGKILL the driver and wait until its processes (its embedded Ray, the ranks) are gone."""
    import psutil

    descendants = [p for p in psutil.Process(driver.pid).children(recursive=True)
                   if not _title(p).startswith(RAY_AGENTS)]
    driver.send_signal(signal.SIGKILL)
    driver.communicate()
    psutil.wait_procs(descendants, timeout=60)


def chaos_run(spec_path: Path, storage: Path, trials: int, rank_kill_every: float, seed: int) -> dict:
    """The sweep with faults: ranks killed every ``rank_kill_every`` s, the driver killed and resumed at a
    third and two thirds of the trials ended. Returns the kills and the resumes' times."""
    experiment = storage / "chaos"
    killer = RankKiller(rank_kill_every, seed)
    resumes = []
    started = time.monotonic()
    driver = _driver([str(spec_path), "--storage", str(storage), "--name", "chaos"])
    killer.driver_pid = driver.pid
    killer.start()
    try:
        for fraction in (1 / 3, 2 / 3):
            while len(_ended(experiment)) < fraction * trials:
                if driver.poll() is not None:
                    _finish(driver, "the chaos run's driver")
                time.sleep(0.2)
            ended_before = len(_ended(experiment))
            killed_at = time.monotonic()
            _kill_driver(driver)
            down_s = time.monotonic() - killed_at
            resumed_at = time.monotonic()
            driver = _driver(["--resume", str(experiment)])
            killer.driver_pid = driver.pid
            while len(_ended(experiment)) <= ended_before and driver.poll() is None:
                time.sleep(0.1)
            resumes.append({"at_trials_ended": ended_before, "driver_gone_s": round(down_s, 1),
                            "resume_to_first_trial_ended_s": round(time.monotonic() - resumed_at, 1),
                            "kill_to_first_trial_ended_s": round(time.monotonic() - killed_at, 1)})
        _finish(driver, "the chaos run's resumed driver")
    finally:
        killer.stop()
        if driver.poll() is None:
            driver.kill()
    return {"wall_s": round(time.monotonic() - started, 1), "rank_kills": len(killer.kills),
            "rank_kill_times_s": killer.kills, "resumes": resumes}


def _result_epochs(trial_dir: Path) -> list[int]:
    """The epochs of the reports in the trial's ``result.json``, in order."""
    lines = (trial_dir / "result.json").read_text().splitlines() if (trial_dir / "result.json").exists() else []
    return [json.loads(line)["epoch"] for line in lines if line.strip()]


def outcomes(experiment: Path) -> dict:
    """What the sweep decided and kept: per trial (by creation number) its config, epochs and status; and
    the checks of "ended exactly once, with all its results"."""
    import tune_service
    from tune_service.experiment import layout

    result = tune_service.load_results(experiment)
    numbered = [r for r in result.records if r.number is not None]
    ended = Counter(_ended(experiment))
    by_id = {d.name.removeprefix(layout.TRIAL_DIR_PREFIX): d for d in experiment.glob(f"{layout.TRIAL_DIR_PREFIX}*")}
    missing, repeated = [], []
    for record in numbered:
        epochs = _result_epochs(by_id[record.trial_id]) if record.trial_id in by_id else []
        if set(epochs) != set(range(1, record.epochs + 1)):
            missing.append({"trial": record.number, "epochs": record.epochs, "result_json": epochs})
        elif len(epochs) != len(set(epochs)):  # a retried attempt reports its checkpoint's epoch again
            repeated.append({"trial": record.number, "result_json": epochs})
    return {
        "decisions": {r.number: (round(r.config["quality"], 12), r.epochs, r.status) for r in numbered},
        "trials": len(numbered),
        "numbers_repeated": sorted(n for n, count in Counter(r.number for r in numbered).items() if count > 1),
        "records_without_a_number": len(result.records) - len(numbered),
        # a trial created after Tune's last state save and running at a driver's kill: created again on
        # resume, its first directory left and read as a lost attempt, not a trial (docs/how-it-runs.md)
        "directories_of_lost_attempts": len(result.lost_attempts),
        "ended_once": sum(1 for count in ended.values() if count == 1),
        "ended_more_than_once": sorted(t for t, count in ended.items() if count > 1),
        "results_missing_an_epoch": missing,
        "results_with_an_epoch_reported_twice": repeated,
        "statuses": dict(Counter(r.status for r in result.records)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=600)
    parser.add_argument("--runs", type=int, default=3, help="chaos runs compared with the one run without faults")
    parser.add_argument("--rank-kill-every", type=float, default=30.0, help="seconds between two rank kills")
    parser.add_argument("--max-failures", type=int, default=3)
    parser.add_argument("--keep", metavar="DIR", help="run the experiments in DIR, and keep them")
    parser.add_argument("--results", default=str(RESULTS), help="the JSON file this invocation is appended to")
    args = parser.parse_args()

    import ray

    spec = sweep_spec(args.trials, args.max_failures)
    invocation = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "trials": args.trials,
                  "rank_kill_every_s": args.rank_kill_every, "spec": spec, "runs": []}
    with (contextlib.nullcontext(args.keep) if args.keep else tempfile.TemporaryDirectory(prefix="chaos-")) as tmp:
        spec_path = Path(tmp) / "chaos.yaml"
        spec_path.write_text(json.dumps(spec))  # JSON is YAML
        started = time.monotonic()
        reference_dir = Path(tmp) / "reference"
        _finish(_driver([str(spec_path), "--storage", str(reference_dir), "--name", "chaos"]), "the run without faults")
        reference = outcomes(reference_dir / "chaos")
        invocation["without_faults"] = {"wall_s": round(time.monotonic() - started, 1),
                                        **{k: v for k, v in reference.items() if k != "decisions"}}
        print(json.dumps(invocation["without_faults"]), flush=True)
        for run in range(args.runs):
            storage = Path(tmp) / f"chaos-{run}"
            faults = chaos_run(spec_path, storage, args.trials, args.rank_kill_every, seed=run)
            found = outcomes(storage / "chaos")
            same = sum(found["decisions"].get(n) == d for n, d in reference["decisions"].items())
            differing = [{"trial": n, "without_faults": d, "with_faults": found["decisions"].get(n)}
                         for n, d in reference["decisions"].items() if found["decisions"].get(n) != d]
            entry = {"run": run + 1, **faults, **{k: v for k, v in found.items() if k != "decisions"},
                     "decisions_identical": round(same / max(len(reference["decisions"]), 1), 4),
                     "differing": differing[:20],
                     "load_average": [round(x, 2) for x in os.getloadavg()]}
            invocation["runs"].append(entry)
            print(json.dumps({k: v for k, v in entry.items() if k != "rank_kill_times_s"}), flush=True)
    invocation["machine"] = {"cpus": os.cpu_count(), "python": sys.version.split()[0], "ray": ray.__version__}
    out = Path(args.results)
    done = json.loads(out.read_text())["invocations"] if out.exists() else []
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"invocations": done + [invocation]}, indent=2) + "\n")
    print(f"appended invocation {len(done) + 1} to {out}")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
