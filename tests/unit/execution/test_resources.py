"""Concurrency that fits the cluster, and a clear refusal when one trial cannot fit."""

from __future__ import annotations

import pytest

from tune_service.errors import CapacityError
from tune_service.execution.resources import ClusterResources, max_concurrent_trials
from tune_service.spec import ResourceSpec


def cluster(cpus, gpus=0, nodes=1):
    return ClusterResources(cpus, gpus, cpus / nodes, gpus / nodes, nodes=nodes)


@pytest.mark.parametrize("workers, cpus, gpus, total_cpus, total_gpus, expected", [
    (2, 1, 0, 2, 0, 1),     # this machine: one 2-rank trial at a time
    (2, 1, 0, 8, 0, 4),
    (1, 1, 0, 3, 0, 3),
    (2, 0.5, 0, 2, 0, 2),
    (2, 2, 1, 32, 4, 2),    # GPUs are the tighter limit
    (4, 1, 1, 32, 8, 2),
])
def test_concurrency_packs_whole_trials(workers, cpus, gpus, total_cpus, total_gpus, expected):
    spec = ResourceSpec(workers=workers, cpus_per_worker=cpus, gpus_per_worker=gpus)
    assert max_concurrent_trials(spec, cluster(total_cpus, total_gpus)) == expected


def test_trial_larger_than_cluster_says_what_it_needs_and_what_there_is():
    with pytest.raises(CapacityError) as info:
        max_concurrent_trials(ResourceSpec(workers=4, cpus_per_worker=1), cluster(2))
    assert str(info.value) == (
        "resources: one trial needs 4 workers x (1 CPU, 0 GPU) = 4 CPU, 0 GPU, but the cluster has "
        "1 node(s), 2 CPU, 0 GPU (local); lower resources.workers or the per-worker CPUs/GPUs")


def test_gpu_trial_on_cpu_cluster_is_refused():
    with pytest.raises(CapacityError, match="= 2 CPU, 2 GPU, but the cluster has 1 node\\(s\\), 8 CPU, 0 GPU"):
        max_concurrent_trials(ResourceSpec(workers=2, cpus_per_worker=1, gpus_per_worker=1), cluster(8))


def test_one_rank_must_fit_on_one_node():
    with pytest.raises(CapacityError, match="at most 2 CPU on one node"):
        max_concurrent_trials(ResourceSpec(workers=1, cpus_per_worker=3), cluster(4, nodes=2))
