"""Per-trial DDP resources, and how many trials fit a cluster at once.

A trial is ``workers`` DDP ranks, each needing ``cpus_per_worker`` CPUs and ``gpus_per_worker`` GPUs.
Tune does not see those resources (the trial's Ray Train run reserves them itself), so we compute the
concurrency that fits and hand it to Tune as ``max_concurrent_trials``; more would leave trials waiting
for CPUs they never get, which on a small machine looks like a hang.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from tune_service.errors import CapacityError
from tune_service.spec import ResourceSpec

if TYPE_CHECKING:
    from ray.actor import ActorClass


@dataclass(frozen=True)
class ClusterResources:
    """What the cluster offers: totals, and the largest single node (one rank must fit on one node)."""

    cpus: float
    gpus: float
    largest_node_cpus: float
    largest_node_gpus: float
    nodes: int = 1
    source: str = "local"

    def describe(self) -> str:
        return f"{self.nodes} node(s), {self.cpus:g} CPU, {self.gpus:g} GPU ({self.source})"


def local_machine() -> ClusterResources:
    """What an embedded local Ray would get on this machine (no Ray started, no CUDA initialised)."""
    cpus = float(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
    gpus = float(_visible_gpus())
    return ClusterResources(cpus, gpus, cpus, gpus, nodes=1, source="this machine")


def _visible_gpus() -> int:
    try:
        import torch

        return torch.cuda.device_count()
    except Exception:  # torch without CUDA support, or a broken driver: no GPUs
        return 0


def from_ray() -> ClusterResources:
    """The resources of the Ray cluster this process is connected to (alive nodes only)."""
    import ray

    nodes = [n for n in ray.nodes() if n.get("Alive")]
    cpus = [n["Resources"].get("CPU", 0.0) for n in nodes]
    gpus = [n["Resources"].get("GPU", 0.0) for n in nodes]
    return ClusterResources(
        cpus=sum(cpus),
        gpus=sum(gpus),
        largest_node_cpus=max(cpus, default=0.0),
        largest_node_gpus=max(gpus, default=0.0),
        nodes=len(nodes),
        source="ray cluster",
    )


def trial_needs(resources: ResourceSpec) -> dict[str, float]:
    """The total resources of one trial (all its ranks)."""
    return {"CPU": resources.workers * resources.cpus_per_worker, "GPU": resources.workers * resources.gpus_per_worker}


def max_concurrent_trials(resources: ResourceSpec, cluster: ClusterResources) -> int:
    """How many trials run at once without any waiting for another's CPUs or GPUs.

    Raises:
        CapacityError: one trial alone does not fit, saying what it needs and what the cluster has.
    """
    need = trial_needs(resources)
    too_big = (
        need["CPU"] > cluster.cpus + 1e-9
        or need["GPU"] > cluster.gpus + 1e-9
        or resources.cpus_per_worker > cluster.largest_node_cpus + 1e-9
        or resources.gpus_per_worker > cluster.largest_node_gpus + 1e-9
    )
    if too_big:
        raise CapacityError(
            f"resources: one trial needs {resources.workers} workers x "
            f"({resources.cpus_per_worker:g} CPU, {resources.gpus_per_worker:g} GPU) = "
            f"{need['CPU']:g} CPU, {need['GPU']:g} GPU, but the cluster has {cluster.describe()}"
            f"{'' if cluster.nodes == 1 else f', at most {cluster.largest_node_cpus:g} CPU on one node'}; "
            f"lower resources.workers or the per-worker CPUs/GPUs"
        )
    fits = [math.floor(cluster.cpus / need["CPU"] + 1e-9)]
    if need["GPU"] > 0:
        fits.append(math.floor(cluster.gpus / need["GPU"] + 1e-9))
    return max(1, min(fits))


def place_ranks(
    actor_class: type, resources: ResourceSpec, placement_group: Any, rank_args: Callable[[int], tuple], **options: Any
) -> list[Any]:
    """Start one actor of ``actor_class`` per rank of a trial, each holding its rank's CPUs and GPUs: rank
    ``i`` in bundle ``i`` of ``placement_group`` (the trial actor's, one bundle per rank), or anywhere the
    cluster has room when it is None. ``rank_args(i)``: rank ``i``'s constructor arguments; ``options``:
    more of Ray's actor options."""
    import ray
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    actor: ActorClass[Any] = ray.remote(actor_class)
    ranks = []
    for rank in range(resources.workers):
        placed: dict[str, Any] = {
            "num_cpus": resources.cpus_per_worker,
            "num_gpus": resources.gpus_per_worker,
            **options,
        }
        if placement_group is not None:
            placed["scheduling_strategy"] = PlacementGroupSchedulingStrategy(
                placement_group, placement_group_bundle_index=rank
            )
        ranks.append(actor.options(**placed).remote(*rank_args(rank)))
    return ranks
