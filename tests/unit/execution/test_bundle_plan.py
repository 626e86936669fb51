"""``execution.bundle``: the spec's rule, the dry-run's refusals of sweeps that cannot be fused (each one
line naming the field, the rule and the value), and what the plan says of a sweep that can."""

from __future__ import annotations

from pathlib import Path

import pytest

from general_tasks import BranchingDigits
from tune_service import cli
from tune_service.errors import SpecError
from tune_service.execution.plan import make_plan
from tune_service.execution.resources import ClusterResources
from tune_service.spec import load_spec

ROOT = Path(__file__).resolve().parents[3]
TWO_CPUS = ClusterResources(cpus=2, gpus=0, largest_node_cpus=2, largest_node_gpus=0)


def digits_spec(**overrides):
    return load_spec(
        {
            "name": "bundled",
            "method": "random",
            "run_cap": 8,
            "metric": {"name": "val_loss", "goal": "minimize"},
            "scheduler": {"type": "asha", "max_t": 3},
            "resources": {"workers": 1},
            "parameters": {"lr": {"min": 0.01, "max": 0.3}, "hidden": {"values": [32, 64]}},
            "execution": {"bundle": 4},
        },
        overrides,
    )


def test_a_bundle_below_one_is_refused_naming_the_field():
    with pytest.raises(SpecError, match=r"execution\.bundle: must be >= 1, got 0"):
        digits_spec(**{"execution.bundle": 0})


def test_the_plan_says_what_fuses_what_splits_bundles_and_the_concurrency():
    plan = make_plan(digits_spec(), TWO_CPUS)
    assert plan.max_concurrent == 8 and plan.slots == 2  # 4 members per slot's gang, 2 slots
    text = plan.describe()
    assert "fused bundles of up to 4 trials on 2 warm gang(s) of one rank" in text
    assert "members differ in lr; hidden split them into separate bundles" in text
    assert "fused bundles of up to 4" in plan.headline()[1]


@pytest.mark.parametrize(
    "overrides, task, rule",
    [
        ({"resources.workers": 2}, None, "4: a bundle trains on one rank; resources.workers is 2"),
        ({"execution.gangs": "fresh"}, None, "4: bundles train on warm gangs; execution.gangs is fresh"),
        ({"training.precision": "fp16"}, None, "4: fp16's loss scaler skips a step for every member"),
        ({"parameters.optimizer": {"value": "rmsprop"}}, None, "4: optimizer 'rmsprop' is not one a bundle stacks"),
        ({}, BranchingDigits(), "4: torch.func cannot run the task's training_step under vmap"),
    ],
    ids=["two ranks", "fresh gangs", "fp16", "rmsprop", "data-dependent control flow"],
)
def test_a_sweep_that_cannot_be_fused_is_refused_at_the_plan_with_the_reason(overrides, task, rule):
    with pytest.raises(SpecError, match="execution.bundle: " + rule.replace("(", r"\(").replace(")", r"\)")):
        make_plan(digits_spec(**overrides), TWO_CPUS, task=task)


def test_bundle_auto_is_one_trial_a_bundle_until_the_sweep_measures_its_first_trial():
    plan = make_plan(digits_spec(**{"execution.bundle": "auto"}), TWO_CPUS)
    assert plan.bundle_size == 1 and plan.bundling is None and plan.max_concurrent == 2
    assert "bundle auto  the bundle size measured on the first trial when the sweep starts (1 till then)" in (
        plan.describe())


def test_bundle_auto_takes_the_size_it_measured_for_the_concurrency_and_the_plan():
    from tune_service.execution.bundle_sizing import BundleSizing
    from tune_service.execution.plan import plan_sweep

    chosen = BundleSizing(4, "4 trials a bundle: predicted 10.0 s against 20.0 s alone")
    plan = plan_sweep(digits_spec(**{"execution.bundle": "auto"})).bundled_as(chosen).on(TWO_CPUS)
    assert (plan.bundle_size, plan.max_concurrent, plan.slots) == (4, 8, 2)
    text = plan.describe()
    assert "fused bundles of up to 4 trials on 2 warm gang(s) of one rank" in text
    assert "bundle auto  4 trials a bundle: predicted 10.0 s against 20.0 s alone" in text
    assert plan.bundling.as_dict()["members"] == 4  # what summary.json records


def test_bundle_auto_trains_each_trial_of_a_task_that_cannot_be_fused_alone_saying_why():
    plan = make_plan(digits_spec(**{"execution.bundle": "auto"}), TWO_CPUS, task=BranchingDigits())
    assert plan.bundle_size == 1 and plan.bundling.members == 1
    assert "bundle auto  each trial alone: torch.func cannot run the task's training_step under vmap" in (
        plan.describe())


@pytest.mark.parametrize("given, message", [
    ("many", "execution.bundle: must be an integer >= 1 or auto, got 'many'"),
    (2.5, "execution.bundle: must be an integer >= 1 or auto, got 2.5"),
    (True, "execution.bundle: must be an integer >= 1 or auto, got True"),
])
def test_a_bundle_neither_a_count_nor_auto_is_refused_naming_the_rule(given, message):
    with pytest.raises(SpecError, match=message.replace(".", r"\.")):
        digits_spec(**{"execution.bundle": given})


def test_bundle_auto_is_refused_where_the_specs_settings_keep_trials_from_bundles():
    with pytest.raises(SpecError, match=r"execution\.bundle: auto: a bundle trains on one rank; resources\.workers is 2"):
        make_plan(digits_spec(**{"execution.bundle": "auto", "resources.workers": 2}), TWO_CPUS)


def test_a_w_and_b_program_is_never_fused(tmp_path, capsys):
    spec = tmp_path / "program.yaml"
    spec.write_text(
        f"program: {ROOT / 'examples' / 'wandb_program' / 'train.py'}\nmethod: random\nrun_cap: 2\n"
        "metric: {name: loss, goal: minimize}\nparameters: {lr: {min: 0.01, max: 0.1}}\n"
        "execution: {bundle: 4}\n"
    )
    assert cli.main([str(spec), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: execution.bundle: 4: bundles fuse a Task's trials; this sweep runs a W&B program "
                   "(a process of its own)"]


def test_a_members_trial_name_carries_its_number_in_the_sweep_to_its_actor():
    from types import SimpleNamespace

    from tune_service.execution.bundles import member_name, member_number

    trial = SimpleNamespace(trial_id="ab12cd34", experiment_tag="12_lr=0.01")
    assert member_number(member_name(trial)) == 12
    assert member_number("warm_trial_ab12cd34") == 0  # not a member's name: no number, reported first


def test_a_bundles_rank_holds_its_gpu_and_its_members_the_cpus():
    """A rank that held no GPU would see every GPU of its node and train on the first; members hold only
    their share of the rank's CPUs, so K of them run per slot."""
    from tune_service.execution.bundles import member_resources
    from tune_service.execution.gang import GangSettings
    from tune_service.spec import ResourceSpec

    resources = ResourceSpec(workers=1, cpus_per_worker=2, gpus_per_worker=1)
    held = GangSettings(resources, holds_cpus=False).held
    assert (held.cpus_per_worker, held.gpus_per_worker) == (0, 1)
    assert member_resources(resources, 4).bundles == [{"CPU": 0.5}]
    assert GangSettings(resources).held == resources  # a warm trial's gang holds all of it
