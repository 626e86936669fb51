"""Packed trials on one GPU (``resources.gpus_per_worker`` below 1): each rank is held to its share of
the GPU's memory, so a trial that overreaches runs out of memory alone and its neighbour trains on; and
``gpus_per_worker: auto``, which measures the first trial and packs as many as pay."""

from __future__ import annotations

import json

import pytest

import tune_service

pytestmark = [pytest.mark.integration, pytest.mark.gpu, pytest.mark.timeout(400)]


def test_a_packed_trial_that_overreaches_its_share_fails_alone_and_its_neighbour_completes(ray_cluster, tmp_path):
    spec = {
        "name": "packed", "task": "recording_tasks:GpuMemoryGrabbingDigits", "method": "grid",
        # 0.6 of the GPU fits an empty GPU, not a half share of it: without the share it would not fail
        "parameters": {"grab": {"values": [0.6, 0.0]}},
        "scheduler": {"type": "fifo", "max_t": 2}, "training": {"oom_retry": False},
        # two trials at once on the session's 2 CPUs, each with half the GPU
        "resources": {"workers": 1, "cpus_per_worker": 1, "gpus_per_worker": 0.5},
    }
    result = tune_service.run(spec, storage=tmp_path, name="packed", verbose=0)
    by_grab = {t.config["grab"]: t for t in result.trials}
    assert by_grab[0.6].status == "failed" and by_grab[0.6].error.startswith("TrialOutOfMemory: out of memory")
    assert by_grab[0.0].status == "completed" and by_grab[0.0].epochs == 2


def test_auto_measures_the_first_trial_then_packs_that_many_trials_per_gpu(ray_cluster, tmp_path):
    spec = {
        "name": "auto", "task": "digits", "method": "random", "run_cap": 4, "seed": 0,
        "parameters": {"lr": {"distribution": "log_uniform_values", "min": 1e-3, "max": 1e-2}},
        "scheduler": {"type": "fifo", "max_t": 2},
        "resources": {"workers": 1, "cpus_per_worker": 1, "gpus_per_worker": "auto"},
    }
    result = tune_service.run(spec, storage=tmp_path, name="auto", verbose=0)
    assert [t.status for t in result.trials] == ["completed"] * 4
    packing = json.loads((tmp_path / "auto" / "summary.json").read_text())["packing"]
    # the session's Ray has 2 CPUs: the probe tries 1 and 2 trials at once, and packs at most 2
    assert [run["trials"] for run in packing["runs"]] == [1, 2] and all(run["step_s"] > 0 for run in packing["runs"])
    assert packing["trials_per_gpu"] in (1, 2) and packing["gpus_per_worker"] == 1 / packing["trials_per_gpu"]
    assert packing["footprint_bytes"] > 0 and f"{packing['trials_per_gpu']} trial(s) per GPU" in packing["reason"]
