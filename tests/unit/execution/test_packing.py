"""``gpus_per_worker: auto``: the spec's rules, the choice from what the probe measured, and the plan on a
cluster without a GPU (the probe itself needs a GPU: tests/integration/test_packed_trials.py)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tune_service.errors import SpecError
from tune_service.execution.packing import ProbeRun, choose
from tune_service.execution.plan import make_plan
from tune_service.execution.resources import ClusterResources
from tune_service.spec import load_spec

ROOT = Path(__file__).resolve().parents[3]
GIB = 2**30
# A launch-bound model: one trial's step takes 10 ms alone, a little longer beside others.
RUNS = [ProbeRun(1, 0.010), ProbeRun(2, 0.011), ProbeRun(4, 0.014), ProbeRun(8, 0.030)]


def test_the_most_throughput_is_chosen_and_a_packing_that_gains_little_is_not():
    packing = choose(RUNS, footprint_bytes=GIB, gpu_memory_bytes=80 * GIB, cpu_fit=16)
    # 8 at once: 267 trials/s against 286 at 4, no gain; 4 at once gains 2.86x over one alone
    assert (packing.trials_per_gpu, packing.gpus_per_worker) == (4, 0.25)
    assert "4 trial(s) per GPU (0.25 GPU each)" in packing.reason and "2.86x the throughput" in packing.reason


@pytest.mark.parametrize(
    "footprint, cpu_fit, trials",
    [(30 * GIB, 16, 2), (GIB, 2, 2), (GIB, 1, 1), (80 * GIB, 16, 1)],
    ids=["memory fits 2", "CPUs fit 2", "CPUs fit 1", "memory fits not even 1 with its margin"],
)
def test_memory_and_cpus_bound_the_packing(footprint, cpu_fit, trials):
    packing = choose(RUNS, footprint_bytes=footprint, gpu_memory_bytes=80 * GIB, cpu_fit=cpu_fit)
    assert packing.trials_per_gpu == trials and packing.gpus_per_worker == 1 / trials


def test_a_gain_below_the_threshold_stops_the_packing():
    runs = [ProbeRun(1, 0.010), ProbeRun(2, 0.0195), ProbeRun(4, 0.02)]  # 2 at once: 1.03x only
    assert choose(runs, GIB, 80 * GIB, 16).trials_per_gpu == 1


def quickstart(**resources) -> dict:
    spec = load_spec(ROOT / "search_spaces" / "quickstart.yaml").source
    return {**spec, "resources": {"workers": 1, "cpus_per_worker": 1, **resources}}


def test_auto_is_read_as_one_gpu_until_measured():
    resources = load_spec(quickstart(gpus_per_worker="auto")).resources
    assert (resources.gpus_per_worker, resources.gpus_auto) == (1, True)
    assert load_spec(quickstart(gpus_per_worker=0.25)).resources.gpus_auto is False


def test_auto_for_a_trial_of_several_ranks_is_refused_naming_the_rule():
    with pytest.raises(SpecError, match=r"resources.gpus_per_worker: auto packs trials of one rank .* got "
                                        r"resources.workers 2"):
        load_spec(quickstart(gpus_per_worker="auto", workers=2))


def test_auto_on_a_cluster_without_a_gpu_plans_cpu_trials_and_says_so():
    plan = make_plan(load_spec(quickstart(gpus_per_worker="auto")), ClusterResources(2, 0, 2, 0))
    assert plan.spec.resources.gpus_per_worker == 0 and plan.max_concurrent == 2
    assert "gpus auto    no GPU in the cluster: the trials run on CPUs" in plan.describe()


def test_auto_on_a_gpu_cluster_is_planned_at_one_gpu_until_the_sweep_measures_it():
    plan = make_plan(load_spec(quickstart(gpus_per_worker="auto")), ClusterResources(16, 1, 16, 1))
    assert plan.spec.resources.gpus_per_worker == 1 and plan.max_concurrent == 1 and plan.packing is None
    assert "trials per GPU measured on the first trial when the sweep starts" in plan.describe()
    measured = plan.packed_as(choose(RUNS, GIB, 80 * GIB, 16)).on(plan.cluster)
    assert measured.spec.resources.gpus_per_worker == 0.25 and measured.max_concurrent == 4
    assert replace(measured, packing=None).spec.resources.gpus_auto  # the spec still says auto


def test_the_probe_times_the_first_trial_alone_then_beside_another():
    from tune_service.execution.packing import run_probe

    plan = make_plan(load_spec(quickstart(gpus_per_worker="auto")), ClusterResources(2, 0, 2, 0))
    runs, footprint, memory = run_probe(plan.first_trial(), [1, 2], device_type="cpu", steps=(2, 3))
    assert [run.trials for run in runs] == [1, 2] and all(0 < run.step_s < 5 for run in runs)
    assert (footprint, memory) == (0, 0)  # no GPU memory to measure on a CPU


def test_auto_for_a_program_is_refused_naming_the_rule():
    spec = load_spec({"program": "train.py", "method": "random", "run_cap": 1, "metric": {"name": "loss"},
                      "parameters": {"lr": {"values": [0.1]}},
                      "resources": {"workers": 1, "gpus_per_worker": "auto"}})
    with pytest.raises(SpecError, match=r"resources.gpus_per_worker: auto measures a Task's first trial with the "
                                        r"shared loop; this sweep runs a W&B program"):
        make_plan(spec, ClusterResources(2, 0, 2, 0))
