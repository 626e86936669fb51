"""What every benchmark of the suite shares: the embedded Ray they start, the result file they write,
the figure rows they print, and the machine they ran on.

A figure is one row of the Performance table of docs/benchmarks.md: what was measured, the anchor's value (what a
user would run instead, measured in the same run), tune-service's value, the target and whether it
was met. Timings are only ever compared as ratios of runs made side by side in one process (or one
parent process), interleaved where the benchmark allows: this machine is shared, and its absolute
speed moves by 10 % and more from one minute to the next.
"""

from __future__ import annotations

import contextlib
import datetime
import fractions
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator

ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = ROOT / "bench" / "results"
QUICK_RESULTS_DIR = RESULTS_DIR / "quick"
#: CPUs of every embedded Ray the suite starts: the 2-core development machine's.
NUM_CPUS = 2


def search_path() -> str:
    """This process's ``sys.path`` (the repository root included) as a PYTHONPATH for Ray's workers, so
    they import ``bench.workloads`` as the driver does."""
    paths = [str(ROOT)] + [p for p in sys.path if p and os.path.isdir(p)]
    return os.pathsep.join(dict.fromkeys(paths))


def ray_init(env: dict[str, str] | None = None) -> None:
    """Start an embedded local Ray as the existing benchmarks and ``tune-run`` do (2 CPUs, dashboard on
    loopback for Ray Train's state API, errors only).

    The dashboard gets a port of its own, and Ray's workers are told it (``RAY_API_SERVER_ADDRESS``):
    Ray Train's placement-group cleaner asks the state API whether a trial's controller is alive, and
    without an address it looks for Ray instances on the machine; with another one running (tests on this
    shared machine) it dies with "Found multiple active Ray instances", the trial's placement group is
    never removed, and the next trial waits for CPUs that never come (WorkerGroupStartupTimeoutError).
    """
    import ray

    from tune_service.execution.connect import free_listening_port, inherited_by_ray_processes

    port = free_listening_port()
    variables = {"PYTHONPATH": search_path(), "RAY_API_SERVER_ADDRESS": f"http://127.0.0.1:{port}", **(env or {})}
    with inherited_by_ray_processes(variables):  # as tune-run's embedded Ray: see that function for why
        ray.init(address="local", num_cpus=NUM_CPUS, include_dashboard=True, dashboard_host="127.0.0.1",
                 dashboard_port=port, logging_level="ERROR")


@contextlib.contextmanager
def local_ray(env: dict[str, str] | None = None) -> Iterator[None]:
    """An embedded Ray for the ``with`` block; always shut down, whatever happens inside."""
    import ray

    ray_init(env)
    try:
        yield
    finally:
        ray.shutdown()


@contextlib.contextmanager
def light_tune() -> Iterator[None]:
    """Tune without its automatic per-result loggers (CSV, JSON, TensorBoard), for the benchmarks whose
    thousands of short trials measure searchers and schedulers, not Tune's file writing: they took
    three quarters of such a run's time here. Nothing the searcher or scheduler sees changes."""
    key = "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS"
    before = os.environ.get(key)
    os.environ[key] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = before


def quiet_ray_loggers() -> None:
    """Searchers warn per result in ways that say nothing here (BOHB without its scheduler, hyperopt's
    start-up); the benchmark's own output is the table."""
    import logging

    for name in ("ray.tune", "ray.tune.search.bohb.bohb_search", "hyperopt", "hpbandster"):
        logging.getLogger(name).setLevel(logging.ERROR)


def machine_info() -> dict[str, Any]:
    """Where the figures came from: cores, memory, CPU model, load, library versions, CUDA."""
    info: dict[str, Any] = {
        "cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
    }
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu_model"] = line.split(":", 1)[1].strip()
                break
    with contextlib.suppress(OSError, ValueError):
        kib = int(Path("/proc/meminfo").read_text().split()[1])
        info["memory_gib"] = round(kib / 2**20, 1)
    with contextlib.suppress(OSError):
        info["load_average"] = [round(x, 2) for x in os.getloadavg()]
    for module in ("ray", "torch"):
        with contextlib.suppress(ImportError):
            info[module] = __import__(module).__version__
    with contextlib.suppress(ImportError):
        import torch

        info["cuda"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return info


def figure(name: str, anchor_name: str, anchor: float | None, service: float | None, target: str | None,
           unit: str = "", met: bool | None = None, note: str = "") -> dict[str, Any]:
    """One row of the table. ``target`` reads like ``<= 1.05`` or ``>= 0.9`` and decides ``met``
    (applied to ``service``) unless ``met`` is given."""
    if met is None and target and service is not None:
        op, value = target.split()[:2]
        bound = float(fractions.Fraction(value))
        met = service <= bound + 1e-12 if op == "<=" else service >= bound - 1e-12
    return {"figure": name, "anchor_name": anchor_name, "anchor": anchor, "tune_service": service,
            "target": target, "unit": unit, "met": met, "note": note}


def fmt(value: Any, unit: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    text = f"{value:.3g}" if abs(value) < 1000 else f"{value:.0f}"
    return f"{text} {unit}".strip()


def print_table(title: str, figures: list[dict[str, Any]]) -> None:
    rows = [(f["figure"], f"{fmt(f['anchor'], f['unit'])} ({f['anchor_name']})" if f["anchor_name"] else
             fmt(f["anchor"], f["unit"]), fmt(f["tune_service"], f["unit"]), f["target"] or "-",
             {True: "met", False: "MISSED", None: "-"}[f["met"]]) for f in figures]
    head = ("figure", "anchor", "tune-service", "target", "met?")
    widths = [max(len(r[i]) for r in rows + [head]) for i in range(5)]
    print(f"\n== {title}")
    for row in [head] + rows:
        print("  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths)))


def write_result(name: str, quick: bool, payload: dict[str, Any], wall_s: float) -> Path:
    """``bench/results/NAME.json`` (``bench/results/quick/NAME.json`` with ``--quick``): the figures,
    the details they were computed from, and where and when."""
    directory = QUICK_RESULTS_DIR if quick else RESULTS_DIR
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.json"
    document = {"benchmark": name, "quick": quick,
                "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "wall_s": round(wall_s, 1), "machine": machine_info(), **payload}
    path.write_text(json.dumps(document, indent=2, default=_jsonable) + "\n")
    return path


def _jsonable(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, (set, tuple)):
        return list(value)
    return str(value)


class CpuSampler:
    """CPU seconds used by this process's descendants (an embedded Ray's processes and its workers, or
    spawned ranks) while the ``with`` block runs, per kind of process, sampled every ``interval_s``.

    A process that ends between two samples loses its last interval: the totals are lower bounds.
    ``kind(cmdline)`` names a process's kind (by default its first word)."""

    def __init__(self, kind: Callable[[str], str] | None = None, interval_s: float = 0.5):
        import threading

        self.kind = kind or (lambda cmdline: cmdline.split(" ")[0])
        self.interval_s = interval_s
        self.first: dict[int, float] = {}
        self.last: dict[int, float] = {}
        self.kinds: dict[int, str] = {}
        self.nice: dict[int, int] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _sample(self, initial: bool) -> None:
        import psutil

        for child in psutil.Process().children(recursive=True):
            try:
                with child.oneshot():
                    times = child.cpu_times()
                    used = times.user + times.system
                    # Named at every sample: a Ray worker takes its title (ray::RayTrainWorker) after start.
                    self.kinds[child.pid] = self.kind(" ".join(child.cmdline()) or child.name())
                    self.nice[child.pid] = child.nice()
                    if child.pid not in self.first:
                        self.first[child.pid] = used if initial else 0.0
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
            self.last[child.pid] = used

    def _loop(self) -> None:
        while not self.stop.wait(self.interval_s):
            self._sample(initial=False)

    def __enter__(self) -> "CpuSampler":
        self.started = time.perf_counter()
        self._sample(initial=True)
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()
        self._sample(initial=False)
        self.wall_s = time.perf_counter() - self.started

    def by_kind(self) -> dict[str, float]:
        """CPU seconds per kind of process over the block."""
        out: dict[str, float] = {}
        for pid, kind in self.kinds.items():
            out[kind] = out.get(kind, 0.0) + max(0.0, self.last.get(pid, 0.0) - self.first.get(pid, 0.0))
        return {k: round(v, 2) for k, v in sorted(out.items(), key=lambda kv: -kv[1])}

    def niceness(self) -> dict[str, list[int]]:
        """The scheduling niceness seen per kind of process (Ray runs its workers at 15 by default)."""
        out: dict[str, set[int]] = {}
        for pid, kind in self.kinds.items():
            out.setdefault(kind, set()).add(self.nice.get(pid, 0))
        return {k: sorted(v) for k, v in out.items()}


def trial_seconds(experiment: Path) -> list[float]:
    """Each trial's own wall time as Tune measured it (its function's start to its last report)."""
    from tune_service.experiment.layout import read_trial_results, trial_results_files

    reports = (read_trial_results(path) for path in trial_results_files(experiment))
    return [float(rows[-1]["time_total_s"]) for rows in reports if rows]


def median(values: list[float]) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def interleaved(sides: dict[str, Callable[[], Any]], rounds: int) -> dict[str, list[Any]]:
    """Run every side once per round, the order reversed every other round (ABC, CBA, ABC, ...), so a
    slow patch of this shared machine falls on all sides alike; each side's results in round order."""
    names = list(sides)
    out: dict[str, list[Any]] = {name: [] for name in names}
    for index in range(rounds):
        for name in (names if index % 2 == 0 else names[::-1]):
            started = time.perf_counter()
            out[name].append(sides[name]())
            print(f"    round {index + 1}/{rounds} {name}: {time.perf_counter() - started:.1f} s", flush=True)
    return out
