"""``resources.gpus_per_worker: auto``: how many trials of a sweep share one GPU, measured on its first trial.

Before the sweep starts, the driver runs a probe on one GPU (a Ray task holding the whole GPU): up to
:data:`MOST_TRIALS_PER_GPU` processes, each training the sweep's first config (the searcher's first
suggestion) with the shared loop, warmed up, then timed ``PROBE_STEPS`` optimizer steps at a time,
first one process alone, then 2, 4, ... at once. From what it measured it picks ``k`` trials per GPU:

- memory: ``k`` footprints fit in :data:`MEMORY_USE` of the GPU, a footprint being the CUDA context
  plus :data:`MEMORY_MARGIN` x the caching allocator's peak (other configs of the sweep may be larger;
  a trial that still overreaches its share runs out of memory alone and is retried under its OOM policy);
- CPUs: ``k`` trials' CPUs (their loaders' included: ``cpus_per_worker``) fit the node's CPUs;
- speed: the most trials per second; a larger ``k`` is taken only while it gains at least
  :data:`MIN_GAIN` in throughput over the last one.

Each trial then gets ``gpus_per_worker = 1 / k``: Ray places ``k`` gangs on the GPU, and each rank is
held to that share of its memory (:func:`~tune_service.training.oom.hold_to_gpu_share`). The choice is
printed with the plan and recorded in summary.json (``packing``). On a cluster without a GPU, ``auto``
means CPU trials, said in the plan.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tune_service.execution.resources import ClusterResources
    from tune_service.spec.sweep import ResourceSpec
    from tune_service.training.trial_config import TrialConfig

#: The most trials the probe puts on one GPU.
MOST_TRIALS_PER_GPU = 8
#: A larger packing is taken only while it gains at least this share of throughput over the last one.
MIN_GAIN = 0.1
#: The share of the GPU's memory packed trials may fill, and the margin over the probed peak.
MEMORY_USE, MEMORY_MARGIN = 0.9, 1.5
#: Optimizer steps each probe process trains untimed, then timed.
WARMUP_STEPS, PROBE_STEPS = 10, 40


@dataclass(frozen=True)
class ProbeRun:
    """``trials`` probe processes at once: each one's seconds per optimizer step (the median of them)."""

    trials: int
    step_s: float

    @property
    def trials_per_s(self) -> float:
        return self.trials / self.step_s


@dataclass(frozen=True)
class Packing:
    """What ``gpus_per_worker: auto`` chose, and from what."""

    trials_per_gpu: int
    #: The GPU share of each trial's rank: ``1 / trials_per_gpu`` (0: no GPU, CPU trials).
    gpus_per_worker: float
    reason: str
    gpu_memory_bytes: int = 0
    footprint_bytes: int = 0
    runs: list[ProbeRun] = field(default_factory=list)
    probe_s: float = 0.0

    def describe(self) -> str:
        return f"gpus auto    {self.reason}"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def choose(
    runs: list[ProbeRun], footprint_bytes: int, gpu_memory_bytes: int, cpu_fit: int, probe_s: float = 0.0
) -> Packing:
    """The packing of a sweep whose first trial took ``footprint_bytes`` of a GPU of ``gpu_memory_bytes``
    (context and margin included) and ran as ``runs`` say, ``cpu_fit`` trials' CPUs fitting a node."""
    memory_fit = max(1, math.floor(MEMORY_USE * gpu_memory_bytes / max(footprint_bytes, 1)))
    fit = min(memory_fit, cpu_fit, MOST_TRIALS_PER_GPU)
    best = runs[0]
    for run in runs[1:]:
        if run.trials > fit or run.trials_per_s < best.trials_per_s * (1 + MIN_GAIN):
            break
        best = run
    alone = runs[0]
    limits = f"memory fits {memory_fit}, CPUs fit {cpu_fit}"
    reason = (
        f"{best.trials} trial(s) per GPU ({1 / best.trials:g} GPU each): {alone.step_s * 1e3:.1f} ms a step "
        f"alone, {best.step_s * 1e3:.1f} ms at {best.trials} at once ({best.trials_per_s / alone.trials_per_s:.2f}x "
        f"the throughput); {footprint_bytes / 2**30:.2f} GiB a trial of {gpu_memory_bytes / 2**30:.0f} GiB "
        f"({limits}); measured in {probe_s:.1f} s"
    )
    return Packing(best.trials, 1 / best.trials, reason, gpu_memory_bytes, footprint_bytes, runs, probe_s)


def without_gpu() -> Packing:
    return Packing(0, 0.0, "no GPU in the cluster: the trials run on CPUs")


def measure(first: TrialConfig, resources: ResourceSpec, cluster: ClusterResources) -> Packing:
    """The packing of a sweep whose first trial is ``first``, measured by the probe on one of ``cluster``'s
    GPUs (a Ray task holding the whole GPU; see the module's docstring)."""
    import ray

    cpu_fit = max(1, math.floor(cluster.largest_node_cpus / (resources.cpus_per_worker * resources.workers)))
    counts = [n for n in (1, 2, 4, 8) if n <= min(cpu_fit, MOST_TRIALS_PER_GPU)]
    started = time.perf_counter()
    probe = ray.remote(num_gpus=1, num_cpus=0)(run_probe)
    runs, footprint, memory = ray.get(probe.remote(first, counts))
    return choose(runs, footprint, memory, cpu_fit, time.perf_counter() - started)


def run_probe(
    config: TrialConfig,
    counts: list[int],
    device_type: str = "cuda",
    steps: tuple[int, int] = (WARMUP_STEPS, PROBE_STEPS),
) -> tuple[list[ProbeRun], int, int]:
    """On the GPU this task holds: ``max(counts)`` processes, warmed, timed ``counts[i]`` at a time. Returns
    the runs, a trial's footprint (context + margin x peak) and the GPU's memory, in bytes. ``steps``: the
    untimed and the timed steps. (``cpu`` times CPU processes, with no memory measured: how the probe
    itself is tested without a GPU.)"""
    import statistics

    import torch.multiprocessing as mp

    spawn = mp.get_context("spawn")
    most = max(counts)
    go = [spawn.Event() for _ in range(most)]
    ready, results = spawn.Queue(), spawn.Queue()
    processes = [
        spawn.Process(target=_probe_process, args=(config, device_type, steps, go[i], ready, results))
        for i in range(most)
    ]
    for process in processes:
        process.start()
    try:
        memory = _collect(ready, most, processes)
        runs = []
        for count in counts:
            for event in go[:count]:
                event.set()
            runs.append(ProbeRun(count, statistics.median(_collect(results, count, processes))))
        # The smallest context seen is the nearest to one process's own (they start together).
        context_bytes = min(context for context, _, _ in memory)
        footprint = int(context_bytes + MEMORY_MARGIN * max(peak for _, peak, _ in memory))
        return runs, footprint, memory[0][2]
    finally:
        for event in go:
            event.set()
        for process in processes:
            process.kill()
            process.join()


def _collect(answers: Any, count: int, processes: list[Any]) -> list[Any]:
    """``count`` answers from the probe processes; raises as soon as one of them has died (its error is
    on its stderr, in the driver's log)."""
    import queue

    collected: list[Any] = []
    while len(collected) < count:
        try:
            collected.append(answers.get(timeout=1))
        except queue.Empty:
            if any(p.exitcode is not None for p in processes):
                codes = [p.exitcode for p in processes]
                raise RuntimeError(
                    f"gpus_per_worker auto: a probe process of the first trial failed (exit codes {codes})"
                ) from None
    return collected


def _probe_process(
    config: TrialConfig, device_type: str, steps: tuple[int, int], go: Any, ready: Any, results: Any
) -> None:
    """One probe process: the trial built and warmed up (``steps[0]`` steps), its memory said; then, each
    time it is told to go, ``steps[1]`` timed steps, their mean said."""
    import torch

    from tune_service.training import LocalContext
    from tune_service.training.loop import setup_run, train_steps

    cuda = device_type == "cuda"
    device = torch.device("cuda", 0) if cuda else torch.device("cpu")
    context_bytes = total = 0
    if cuda:
        torch.cuda.set_device(device)
        torch.zeros(1, device=device)
        free, total = torch.cuda.mem_get_info(device)
        context_bytes = total - free  # this process's CUDA context, and any neighbour's started at the same time

    def synchronise() -> None:
        if cuda:
            torch.cuda.synchronize(device)

    run = setup_run(config.opened(), LocalContext(device=device))
    run.reset_train_totals()
    warmup, timed = steps
    stream = (None for epoch in itertools.count(1) for _ in train_steps(run, epoch))
    for _ in itertools.islice(stream, warmup):
        pass
    synchronise()
    ready.put((context_bytes, torch.cuda.max_memory_reserved(device) if cuda else 0, total))
    while True:
        go.wait()
        go.clear()
        started = time.perf_counter()
        for _ in itertools.islice(stream, timed):
            pass
        synchronise()
        results.put((time.perf_counter() - started) / timed)
