"""Load: a 200-trial sweep of a trivial task through ``tune_service.run`` on the 2-core machine.

Every trial is a real one (a Tune trial driving a 1-rank TorchTrainer, 1 CPU) of a task that only
reports ``--epochs`` epochs; random search, FIFO. Reports the sweep's wall time, the driver process's
peak RSS (``getrusage`` and a 0.5 s sample, with the sampled peak of all of Ray's processes beside it),
how many trials ended with results, and the result files in the experiment directory (Tune's
``result.json`` of each trial, and every file). Writes ``bench/results/load_200.json``.

Too slow for CI (about 6 s of Ray start-up per trial, two at a time): run it by hand,
``python bench/service/load_200.py [--trials 200] [--epochs 2]``; ``--trials 10`` first to extrapolate.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make ``bench`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

from bench.common import trial_seconds  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent.parent
RESULTS = ROOT / "bench" / "results" / "load_200.json"


def trivial(config):
    """A 1-rank task that trains nothing: it reports a loss of its one hyperparameter per epoch."""
    import ray.train

    for epoch in range(1, int(config["epochs"]) + 1):
        ray.train.report({"epoch": epoch, "loss": (float(config["x"]) - 0.5) ** 2 + 1.0 / epoch})


class Sampler(threading.Thread):
    """Samples the RSS of this process and of all its children (Ray's processes) every ``period`` s,
    and prints the progress (trials with a result file) every ``report_every`` s."""

    def __init__(self, experiment: Path, total: int, period: float = 0.5, report_every: float = 30.0):
        super().__init__(daemon=True)
        self.experiment, self.total, self.period, self.report_every = experiment, total, period, report_every
        self.driver_peak = self.tree_peak = 0
        self.cpu_s: dict[int, tuple[str, float]] = {}  # pid -> (process title, CPU seconds when last seen)
        self.started = time.monotonic()
        self._done = threading.Event()

    def run(self) -> None:
        import psutil  # Ray's own copy

        me, last_report = psutil.Process(), 0.0
        while not self._done.wait(self.period):
            driver = me.memory_info().rss
            tree = driver
            for child in me.children(recursive=True):
                try:
                    tree += child.memory_info().rss
                    times = child.cpu_times()
                    title = _title(child)
                    if title == "ray::IDLE" and child.pid in self.cpu_s:  # an actor's process, between calls
                        title = self.cpu_s[child.pid][0]
                    self.cpu_s[child.pid] = (title, times.user + times.system)
                except psutil.Error:
                    continue
            self.driver_peak, self.tree_peak = max(self.driver_peak, driver), max(self.tree_peak, tree)
            now = time.monotonic() - self.started
            if now - last_report >= self.report_every:
                last_report = now
                done = len(list(self.experiment.glob("trial_*/result.json")))
                print(f"[{now:7.0f} s] {done}/{self.total} trials have results; driver RSS {driver / 2**20:.0f} MiB, "
                      f"with Ray's processes {tree / 2**20:.0f} MiB", flush=True)

    def cpu_by_process(self) -> dict[str, float]:
        """CPU seconds of this process's children by title (``ray::TrainController``, ``raylet``...), as
        last sampled: a process's last half second is missed."""
        totals: dict[str, float] = {}
        for title, seconds in self.cpu_s.values():
            totals[title] = totals.get(title, 0.0) + seconds
        return dict(sorted(totals.items(), key=lambda item: -item[1]))

    def stop(self) -> None:
        self._done.set()
        self.join()


def _title(process) -> str:
    """``ray::TrainController`` for an actor's process (its class, once it runs one), else its name."""
    title = (process.cmdline() or [process.name()])[0]
    if title.startswith("ray::"):
        return title.split(".")[0].split()[0]
    return process.name()


def actors_by_class() -> dict[str, int]:
    """How many actors of each class the sweep created (alive or dead): the processes Ray started."""
    import ray
    from ray.util.state import list_actors

    dashboard = "http://" + ray._private.worker._global_node.address_info["webui_url"]
    counts: dict[str, int] = {}
    try:
        actors = list_actors(address=dashboard, limit=10_000, raise_on_missing_output=False)  # the API's maximum
    except Exception as error:  # noqa: BLE001 - a figure lost, not the run
        return {f"unavailable ({type(error).__name__})": 0}
    for actor in actors:
        counts[actor.class_name] = counts.get(actor.class_name, 0) + 1
    return dict(sorted(counts.items(), key=lambda item: -item[1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--results", default=str(RESULTS), help="where the figures are written (JSON)")
    args = parser.parse_args()

    import ray

    import tune_service
    from tune_service.execution.connect import init_ray

    spec = {
        "name": "load", "method": "random", "run_cap": args.trials, "seed": 0,
        "metric": {"name": "loss", "goal": "minimize"},
        "parameters": {"x": {"distribution": "uniform", "min": 0.0, "max": 1.0}, "epochs": {"value": args.epochs}},
        "scheduler": {"type": "fifo", "max_t": args.epochs},
        "resources": {"workers": 1, "cpus_per_worker": 1},
        "wandb": {"mode": "disabled"},
    }
    with tempfile.TemporaryDirectory(prefix="load_200-") as storage:
        experiment = Path(storage) / "load"
        init_ray(num_cpus=2)  # the embedded Ray tune-run starts, at the machine's 2 CPUs
        sampler = Sampler(experiment, args.trials)
        try:
            sampler.start()
            started = time.perf_counter()
            result = tune_service.run(spec, storage=storage, name="load", task=trivial, verbose=0)
            wall_s = time.perf_counter() - started
            actors = actors_by_class()
        finally:
            try:
                sampler.stop()
            finally:
                ray.shutdown()
        files = [p for p in experiment.rglob("*") if p.is_file()]
        result_files = [p for p in experiment.glob("trial_*/result.json") if p.stat().st_size > 0]
        with_results = [t for t in result.trials if t.metrics]
        inside = sorted(trial_seconds(experiment))
        figures = {
            "trials": args.trials,
            "epochs_per_trial": args.epochs,
            "wall_s": round(wall_s, 1),
            "wall_s_per_trial": round(wall_s / args.trials, 2),
            "trials_recorded": len(result.trials),
            "trials_with_results": len(with_results),
            "statuses": {s: sum(t.status == s for t in result.trials) for s in ("completed", "stopped", "failed",
                                                                                 "interrupted")},
            "epochs_recorded": sum(t.epochs for t in result.trials),
            "all_results": len(with_results) == args.trials and all(t.epochs == args.epochs for t in result.trials),
            "trial_own_wall_s_median": round(inside[len(inside) // 2], 2) if inside else None,
            "actors_per_trial": {name: round(n / args.trials, 2) for name, n in actors.items()},
            "cpu_s_per_trial_by_process": {title: round(seconds / args.trials, 2)
                                           for title, seconds in sampler.cpu_by_process().items()
                                           if seconds / args.trials >= 0.05},
            "result_files": len(result_files),
            "files_in_experiment_dir": len(files),
            "summary_trials": len(json.loads((experiment / "summary.json").read_text())["trials"]),
            "driver_peak_rss_mib_getrusage": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "driver_peak_rss_mib_sampled": round(sampler.driver_peak / 2**20, 1),
            "driver_and_ray_peak_rss_mib_sampled": round(sampler.tree_peak / 2**20, 1),
            "machine": {"cpus": os.cpu_count(), "load_average": [round(x, 2) for x in os.getloadavg()],
                        "python": sys.version.split()[0], "ray": ray.__version__},
        }
    print(json.dumps(figures, indent=2))
    out = Path(args.results)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(figures, indent=2) + "\n")
    print(f"written {out}")


if __name__ == "__main__":
    main()
