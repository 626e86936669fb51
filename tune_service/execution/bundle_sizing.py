"""``execution.bundle: auto``: how many trials one fused bundle trains, chosen from the sweep's first trial.

Before the sweep starts, the driver runs a probe where a gang's rank would run (a Ray task holding one
rank's CPUs and GPUs). It builds the first trial's bundle of ``K`` members for ``K`` = 1, 2, 4, ... up
to :data:`MOST_MEMBERS` (and no more than the sweep has trials for each gang), trains
:data:`WARMUP_BATCHES` batches of it untimed and :data:`PROBE_BATCHES` timed, and reads the seconds a
batch takes, and how long the probe took to have its first bundle ready (a rank's start: a process,
torch, the data, the model). The driver also times one fresh actor's start: each member is a Tune trial
with an actor of its own (started once per sweep, then reused for the next member). The size chosen is
the one whose predicted sweep time is the least, where for ``K`` members a bundle

- training takes the scheduler's expected trial-epochs (or steps; the plan shows them) x a bundle's
  seconds per epoch (or step) / (``K`` x the gangs at once),
- relaying the members' reports takes :data:`RELAY_S` more per report than a trial alone's (a member's
  report passes the broker and its own actor, and a bundle relays its members' one after another, so
  that a scheduler deciding by arrival sees them in the trials' order), over the gangs at once, and
- the sweep's start takes longer by the members' actors, (``K`` - 1) x the gangs at once x one actor's
  start / the cluster's CPUs (the actors beyond the one a trial alone has), then the wait for a
  bundle's members (:data:`~tune_service.execution.bundles.GATHER_S`), then its gang's start, which a
  trial alone overlaps with its actor's.

A bundle is taken only where it predicts at least :data:`MIN_GAIN` less time than each trial alone. On
a GPU the probe stops at the first ``K`` whose peak memory is above :data:`MEMORY_USE` of the rank's
share. The choice is printed with the plan and recorded in summary.json (``bundle``); a resumed sweep
measures again. A task torch.func cannot fuse trains each trial alone, and the plan says why.

The prediction leaves out what a bundle does not change (a trial alone's own reports and checkpoints,
the validation, the driver's and Ray's start), and the scheduler's trial-epochs are an estimate for ASHA
(see :mod:`~tune_service.search.schedule`): it ranks the sizes, it does not time the sweep.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from tune_service.execution.bundles import GATHER_S

if TYPE_CHECKING:
    from tune_service.execution.resources import ClusterResources
    from tune_service.spec import SweepSpec
    from tune_service.training.trial_config import TrialConfig

#: The most members the probe puts in one bundle.
MOST_MEMBERS = 16
#: A bundle is taken only where it predicts at least this share less time than each trial alone.
MIN_GAIN = 0.1
#: On a GPU: the share of the rank's GPU memory a bundle may fill.
MEMORY_USE = 0.9
#: Batches each bundle size trains untimed, then timed.
WARMUP_BATCHES, PROBE_BATCHES = 3, 10
#: Seconds a member's report costs beyond a trial alone's: measured on the 2-core CPU (2026-11-29,
#: docs/benchmarks.md, "`bundle: auto`"): beside the training, 0.07 s a member-epoch against 0.033 s a
#: trial-epoch alone.
RELAY_S = 0.04


@dataclass(frozen=True)
class ProbedSize:
    """A bundle of ``members``: its seconds a batch, and its peak GPU memory (0 on a CPU)."""

    members: int
    batch_s: float
    peak_bytes: int = 0


@dataclass(frozen=True)
class BundleSizing:
    """What ``bundle: auto`` chose, and from what (``members`` 1: each trial alone)."""

    members: int
    reason: str
    sizes: list[ProbedSize] = field(default_factory=list)
    #: Each size's predicted seconds of training, relays and starting its members' actors, by size.
    predicted_s: dict[int, float] = field(default_factory=dict)
    member_start_s: float = 0.0
    gang_start_s: float = 0.0
    probe_s: float = 0.0

    def describe(self) -> str:
        return f"bundle auto  {self.reason}"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def alone(reason: str) -> BundleSizing:
    """``bundle: auto`` on a sweep whose trials cannot be fused: each trial alone, saying why."""
    return BundleSizing(1, f"each trial alone: {reason}")


@dataclass(frozen=True)
class SweepWork:
    """What the prediction needs of the sweep: ``units`` trial-epochs (or steps: ``unit``) expected, each
    ``batches_per_unit`` batches and ``reports_per_unit`` reports, on ``slots`` gangs at once, on a
    cluster of ``cpus`` CPUs where a new actor starts in ``member_start_s`` and a gang in ``gang_start_s``."""

    units: float
    batches_per_unit: float
    reports_per_unit: float
    slots: int
    cpus: float
    member_start_s: float
    #: How long a gang's rank takes to start and have its first bundle ready (the probe's).
    gang_start_s: float = 0.0
    unit: str = "epoch"


def predicted_seconds(size: ProbedSize, work: SweepWork) -> float:
    """The sweep's predicted seconds with bundles of ``size`` (see the module's docstring)."""
    training = work.units * size.batch_s * work.batches_per_unit / (size.members * work.slots)
    if size.members == 1:
        return training
    relays = work.units * work.reports_per_unit * RELAY_S / work.slots
    actors = (size.members - 1) * work.slots * work.member_start_s / max(work.cpus, 1.0)
    return training + relays + actors + GATHER_S + work.gang_start_s


def choose(sizes: list[ProbedSize], work: SweepWork, memory_bytes: int = 0, probe_s: float = 0.0) -> BundleSizing:
    """The bundle size of the least predicted time among ``sizes`` (the first is one member alone), a
    bundle only where it gains at least :data:`MIN_GAIN` over each trial alone; ``memory_bytes``: the
    rank's share of its GPU (0: a CPU rank, no memory limit)."""
    one = sizes[0]  # alone is what runs when no bundle fits, so it is always a candidate
    fitting = [one, *(s for s in sizes[1:] if not memory_bytes or s.peak_bytes <= MEMORY_USE * memory_bytes)]
    predicted = {s.members: predicted_seconds(s, work) for s in fitting}
    best = min(fitting, key=lambda s: (predicted[s.members], s.members))
    if predicted[best.members] > (1 - MIN_GAIN) * predicted[one.members]:
        best = one
    timing = ", ".join(f"{s.members}: {s.batch_s * work.batches_per_unit * 1e3:.0f} ms" for s in fitting)
    over = len(sizes) - len(fitting)
    limit = f"; {over} size(s) above {MEMORY_USE:.0%} of the GPU share" if over else ""
    verdict = (f"{best.members} trials a bundle" if best.members > 1 else "each trial alone") + (
        f": predicted {predicted[best.members]:.1f} s of training, relays and members' starts against "
        f"{predicted[one.members]:.1f} s alone"
    )
    reason = (
        f"{verdict} ({work.units:g} trial-{work.unit}s expected on {work.slots} gang(s); a bundle's {work.unit} "
        f"by its members, {timing}{limit}; an actor starts in {work.member_start_s:.2f} s, a gang in "
        f"{work.gang_start_s:.1f} s); measured in {probe_s:.1f} s"
    )
    return BundleSizing(best.members, reason, list(sizes), predicted, work.member_start_s, work.gang_start_s, probe_s)


def candidate_sizes(num_trials: int, slots: int) -> list[int]:
    """1, 2, 4, ... up to :data:`MOST_MEMBERS` and to the trials the sweep has for each of its gangs."""
    most = min(MOST_MEMBERS, max(1, math.ceil(num_trials / max(slots, 1))))
    return [2**i for i in range(int(math.log2(most)) + 1)]


def measure(
    first: TrialConfig, spec: SweepSpec, work_units: float, num_trials: int, cluster: ClusterResources
) -> BundleSizing:
    """The bundle size of a sweep whose first trial is ``first`` (its first suggestion, trained by
    epochs or steps as the sweep counts them), measured where a rank would run (see the module's
    docstring); ``work_units``: the scheduler's expected trial-epochs (or steps)."""
    import ray

    from tune_service.execution.resources import max_concurrent_trials

    slots = max_concurrent_trials(spec.resources, cluster)
    counts = candidate_sizes(num_trials, slots)
    started = time.perf_counter()
    r = spec.resources
    probe: Any = ray.remote(num_cpus=r.cpus_per_worker, num_gpus=r.gpus_per_worker)(run_probe)
    device_type = "cuda" if r.gpus_per_worker > 0 else "cpu"
    submitted = time.time()  # wall clocks: the probe may run on another node
    sizes, batches_per_epoch, memory_bytes, entered, ready_s = ray.get(probe.remote(first, counts, device_type))
    gang_start_s = max(entered - submitted, 0.0) + ready_s
    unit, every = spec.scheduler.time_unit, first.settings.report_every_steps
    steps_per_epoch = batches_per_epoch / first.settings.grad_accum_steps
    if unit == "epoch":
        batches_per_unit, reports_per_unit = batches_per_epoch, steps_per_epoch / every if every else 1.0
    else:
        batches_per_unit = first.settings.grad_accum_steps
        reports_per_unit = 1 / every if every else 1 / steps_per_epoch
    work = SweepWork(
        work_units, batches_per_unit, reports_per_unit, slots, cluster.cpus, one_actor_start_s(), gang_start_s, unit
    )
    return choose(sizes, work, memory_bytes, time.perf_counter() - started)


def run_probe(
    config: TrialConfig,
    counts: list[int],
    device_type: str = "cpu",
    batches: tuple[int, int] = (WARMUP_BATCHES, PROBE_BATCHES),
) -> tuple[list[ProbedSize], int, int, float, float]:
    """Each of ``counts`` members in one bundle of ``config``'s trial, warmed then timed over
    ``batches`` (untimed, timed); stops at the first size whose peak memory is above the GPU share.
    Returns the sizes, the batches of one epoch, the rank's share of its GPU in bytes (0 on a CPU), when
    this function began (``time.time()``) and the seconds it took to have its first bundle ready."""
    entered, began = time.time(), time.perf_counter()
    import torch

    from tune_service.training.fused import setup_bundle

    cuda = device_type == "cuda"
    device = torch.device("cuda", 0) if cuda else torch.device("cpu")
    share = 0
    if cuda:
        torch.cuda.set_device(device)
        share = int(torch.cuda.get_device_properties(device).total_memory * min(config.gpus_per_rank or 1.0, 1.0))
    sizes: list[ProbedSize] = []
    per_epoch, ready_s = 1, 0.0
    warmup, timed = batches
    for members in counts:
        if cuda:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(device)
        run = setup_bundle([config] * members, device)
        ready_s = ready_s or time.perf_counter() - began
        per_epoch = max(len(run.loaders.train), 1)
        _train_batches(run, warmup)
        if cuda:
            torch.cuda.synchronize(device)
        started = time.perf_counter()
        trained = _train_batches(run, timed)
        if cuda:
            torch.cuda.synchronize(device)
        peak = torch.cuda.max_memory_allocated(device) if cuda else 0
        sizes.append(ProbedSize(members, (time.perf_counter() - started) / trained, peak))
        del run
        if share and peak > MEMORY_USE * share:
            break  # a larger bundle would not fit either
    return sizes, per_epoch, share, entered, ready_s


def _train_batches(run: Any, count: int) -> int:
    """Train the bundle ``run`` on ``count`` batches, over as many (partial) epochs as that takes."""
    from tune_service.training.fused import train_epoch

    done, epoch, per_epoch = 0, run.epochs_done, max(len(run.loaders.train), 1)
    while done < count:
        epoch += 1
        take = min(count - done, per_epoch)
        train_epoch(run, epoch, max_batches=take)
        done += take
    return done


def one_actor_start_s() -> float:
    """Seconds from asking Ray for a new actor to its first answer, in a Python process of its own (as a
    bundle member's trial actor needs one: the workers Ray keeps ready are not used for it)."""
    import ray

    @ray.remote(num_cpus=0, runtime_env={"env_vars": {"TUNE_SERVICE_BUNDLE_PROBE": "1"}})
    class Started:
        def answer(self) -> bool:
            return True

    began = time.perf_counter()
    actor = Started.remote()  # type: ignore[attr-defined]
    ray.get(actor.answer.remote())
    took = time.perf_counter() - began
    ray.kill(actor)
    return took
