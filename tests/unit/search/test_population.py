"""``scheduler.type: pbt`` before anything runs: the spec's keys, what the population may change, the
dry-run's refusals, and the mutations handed to Ray's PBT (kept within their bounds and types)."""

from __future__ import annotations

import random

import pytest

from tune_service.errors import SpecError
from tune_service.execution.plan import make_plan
from tune_service.search import registry
from tune_service.search.population import OPTIMIZER_NUMBERS, mutable_parameters, seeded_draws, within_bounds
from tune_service.search.population_journal import read_history
from tune_service.spec import load_spec
from tune_service.training.fused import FUSABLE

LR = {"distribution": "log_uniform_values", "min": 1e-3, "max": 0.3}


def pbt_spec(parameters: dict | None = None, **scheduler) -> dict:
    return {
        "method": "random", "run_cap": 4, "metric": {"name": "val_loss", "goal": "minimize"},
        "parameters": parameters or {"lr": LR, "momentum": {"min": 0.0, "max": 0.9}, "hidden": {"values": [32, 64]}},
        "scheduler": {"type": "pbt", "max_t": 6, "perturbation_interval": 2, **scheduler},
    }


def refusal(spec: dict) -> str:
    with pytest.raises(SpecError) as caught:
        make_plan(load_spec(spec))
    return str(caught.value)


def test_the_optimizers_numbers_are_what_a_trial_restored_from_another_can_take_as_its_own():
    assert set(OPTIMIZER_NUMBERS) <= set(FUSABLE)


def test_by_default_the_population_changes_the_searched_optimizer_numbers_only():
    spec = load_spec(pbt_spec())
    assert [p.name for p in mutable_parameters(spec)] == ["lr", "momentum"]
    assert spec.scheduler.perturbation_factors == (0.8, 1.2) and spec.scheduler.quantile_fraction == 0.25
    assert [p.name for p in mutable_parameters(load_spec(pbt_spec(mutate=["momentum"])))] == ["momentum"]


def test_the_plan_says_what_the_population_compares_and_changes():
    text = make_plan(load_spec(pbt_spec(resample_probability=0.5))).describe()
    assert "scheduler    pbt: a population of 4, each trial trains 6 epochs" in text
    assert "every 2 epoch(s) the bottom 25% of the population copy a top 25% trial's weights" in text
    assert "then change lr, momentum (resampled with probability 0.5, else x0.8/1.2 within bounds)" in text
    assert "budget       24 trial-epochs expected" in text


@pytest.mark.parametrize(("spec", "message"), [
    (pbt_spec(mutate=["hidden"]), "scheduler.mutate: hidden changes the model's shapes (hidden=32 and 64 build "
                                  "different models)"),
    (pbt_spec(mutate=["lr", "seed_of_nothing"]), "scheduler.mutate: names searched parameters (lr, momentum, "
                                                 "hidden), got 'seed_of_nothing'"),
    (pbt_spec({"hidden": {"values": [32, 64]}}), "scheduler.mutate: none of the searched parameters (hidden) is "
                                                 "the optimizer's"),
    (pbt_spec({"opt": {"values": ["sgd", "adam"]}, "lr": LR, "momentum": {"min": 0.0, "max": 0.9,
                                                                          "when": {"opt": ["sgd"]}}},
              mutate=["momentum"]), "scheduler.mutate: momentum is conditional"),
    ({**pbt_spec(), "execution": {"bundle": 2}, "resources": {"workers": 1}}, "execution.bundle: must be 1 with "
                                                                              "scheduler.type pbt"),
    ({**pbt_spec(), "execution": {"bundle": "auto"}, "resources": {"workers": 1}},
     "execution.bundle: must be 1 with scheduler.type pbt (a bundle's members are not changed one by one), got auto"),
    ({**pbt_spec(), "execution": {"gangs": "fresh"}}, "execution.gangs: must be warm with scheduler.type pbt"),
    ({**pbt_spec(perturbation_interval=3), "training": {"checkpoint_every": 2}},
     "training.checkpoint_every: must divide scheduler.perturbation_interval (3)"),
])
def test_the_dry_run_refuses_what_a_checkpoint_cannot_carry_or_pbt_cannot_run(spec, message):
    assert message in refusal(spec)


@pytest.mark.parametrize(("scheduler", "message"), [
    ({"perturbation_interval": 0}, "scheduler.perturbation_interval: must be >= 1, got 0"),
    ({"quantile_fraction": 0.6}, "scheduler.quantile_fraction: must be in (0, 0.5]"),
    ({"resample_probability": 1.5}, "scheduler.resample_probability: must be a probability in [0, 1], got 1.5"),
    ({"perturbation_factors": [0.8, -1]}, "scheduler.perturbation_factors: must be a list of numbers > 0"),
    ({"mutate": ["lr", "lr"]}, "scheduler.mutate: must be a list of the searched parameters' names, each once"),
    ({"time_unit": "step"}, "scheduler.time_unit: must be epoch with scheduler.type pbt"),
])
def test_bad_pbt_keys_are_refused_naming_the_rule_and_the_value(scheduler, message):
    with pytest.raises(SpecError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")
                       .replace("]", r"\]")):
        load_spec(pbt_spec(**scheduler))


def test_a_pbt_key_under_another_scheduler_is_noted_as_unused():
    spec = load_spec({**pbt_spec(), "scheduler": {"type": "asha", "max_t": 6, "perturbation_interval": 3}})
    assert "scheduler.perturbation_interval: read, not used: it is for scheduler.type pbt, and the type is asha" \
        in spec.notes


def test_a_mutated_value_stays_within_its_bounds():
    spec = load_spec(pbt_spec({"lr": LR, "optimizer": {"parameters": {"momentum": {"min": 0.0, "max": 0.9}}}},
                              mutate=["lr", "optimizer.momentum"]))
    clip = within_bounds(mutable_parameters(spec))
    assert clip({"lr": 0.3 * 1.2, "optimizer": {"momentum": 0.9 * 1.2}}) == {"lr": 0.3, "optimizer": {"momentum": 0.9}}
    assert clip({"lr": 1e-3 * 0.8, "optimizer": {"momentum": 0.5}}) == {"lr": 1e-3, "optimizer": {"momentum": 0.5}}


def test_rays_pbt_mutates_the_nested_config_a_trial_has_within_bounds():
    from ray.tune.schedulers.pbt import _explore

    spec = load_spec(pbt_spec({"lr": LR, "optimizer": {"parameters": {"momentum": {"min": 0.0, "max": 0.9}}},
                               "dropout": {"values": [0.0, 0.1, 0.2]}, "hidden": {"values": [32, 64, 128]}},
                              mutate=["lr", "optimizer.momentum", "dropout"]))
    population = registry.build_scheduler(spec)
    random.seed(0)
    config = {"lr": 0.3, "optimizer": {"momentum": 0.9}, "dropout": 0.1, "hidden": 64}
    dropouts = set()
    for _ in range(50):  # Ray's own explore step, as an exploit runs it (its names are Ray's: the test says if they go)
        config, _ = _explore(config, population._hyperparam_mutations, 0.25, (0.8, 1.2), population._custom_explore_fn)
        assert 1e-3 <= config["lr"] <= 0.3 and 0.0 <= config["optimizer"]["momentum"] <= 0.9
        assert config["hidden"] == 64  # not the population's to change
        dropouts.add(config["dropout"])
    assert dropouts == {0.0, 0.1, 0.2}  # a listed value steps between its values


def replay_spec(schedule, **training) -> dict:
    """One SGD trial of the digits task, changed at the schedule's epochs."""
    return {
        "task": "digits", "method": "grid", "run_cap": 1, "metric": {"name": "val_loss", "goal": "minimize"},
        "parameters": {"lr": {"value": 0.01}, "momentum": {"value": 0.5}, "hidden": {"value": 32}},
        "scheduler": {"type": "pbt_replay", "max_t": 6, "schedule": schedule},
        **({"training": training} if training else {}),
    }


def test_a_replay_schedule_is_read_by_epoch_with_dotted_names():
    spec = load_spec(replay_spec([{"epoch": 2, "config": {"lr": 0.02}},
                                  {"epoch": 4, "config": {"optimizer": {"momentum": 0.9}}}]))
    assert spec.scheduler.schedule == ({"epoch": 2, "config": {"lr": 0.02}},
                                       {"epoch": 4, "config": {"optimizer.momentum": 0.9}})


@pytest.mark.parametrize(("schedule", "message"), [
    ([], "scheduler.schedule: must be a list of changes with scheduler.type pbt_replay"),
    ([{"epoch": 2}], "scheduler.schedule[0]: must be a mapping of epoch and config"),
    ([{"epoch": 6, "config": {"lr": 0.1}}], "scheduler.schedule[0].epoch: must be < scheduler.max_t (6)"),
    ([{"epoch": 3, "config": {"lr": 0.1}}, {"epoch": 2, "config": {"lr": 0.2}}],
     "scheduler.schedule[1].epoch: must be greater than the change before it (3), got 2"),
    ([{"epoch": 2, "config": {}}], "scheduler.schedule[0].config: must be a mapping of parameter names to values"),
])
def test_a_bad_replay_schedule_is_refused_naming_the_change(schedule, message):
    with pytest.raises(SpecError) as caught:
        load_spec(replay_spec(schedule))
    assert message in str(caught.value)


@pytest.mark.parametrize(("spec", "message"), [
    (replay_spec([{"epoch": 3, "config": {"lr": 0.1}}], checkpoint_every=2),
     "scheduler.schedule[0].epoch: must be a multiple of training.checkpoint_every (2)"),
    (replay_spec([{"epoch": 2, "config": {"dropout_of_nothing": 0.1}}]),
     "scheduler.schedule[0].config: names the spec's parameters (lr, momentum, hidden), got 'dropout_of_nothing'"),
    (replay_spec([{"epoch": 2, "config": {"hidden": 64}}]), "scheduler.schedule[0].config: hidden changes the "
                                                            "model's shapes"),
    ({**replay_spec([{"epoch": 2, "config": {"lr": 0.1}}]), "execution": {"gangs": "fresh"}},
     "execution.gangs: must be warm with scheduler.type pbt_replay"),
])
def test_the_dry_run_refuses_a_replay_of_what_a_checkpoint_cannot_carry(spec, message):
    assert message in refusal(spec)


def test_a_schedule_under_another_scheduler_is_noted_as_unused():
    spec = load_spec({**replay_spec([]), "scheduler": {"type": "fifo", "max_t": 6,
                                                       "schedule": [{"epoch": 2, "config": {"lr": 0.1}}]}})
    assert "scheduler.schedule: read, not used: it is for scheduler.type pbt_replay, and the type is fifo" in spec.notes


# -- pb2: PBT's exploits, a Gaussian-process bandit's new values ----------------------------------------


def test_pb2_is_a_population_whose_plan_says_a_bandit_picks_the_new_values():
    spec = load_spec(pbt_spec(type="pb2", resample_probability=0.5))
    text = make_plan(spec).describe()
    assert "scheduler    pb2: a population of 4, each trial trains 6 epochs" in text
    assert "then change lr, momentum (picked by a Gaussian-process bandit (GP-UCB) within min and max)" in text
    # PBT's ways of changing a value are PB2's model's to pick: read, said unused
    assert "scheduler.resample_probability: read, not used: it is for scheduler.type pbt, and the type is pb2" \
        in spec.notes
    from ray.tune.schedulers.pb2 import PB2

    population = registry.build_scheduler(spec)
    assert isinstance(population, PB2)
    assert population._hyperparam_bounds == {"lr": [1e-3, 0.3], "momentum": [0.0, 0.9]}  # Ray's name: says if it goes


@pytest.mark.parametrize(("parameter", "why"), [
    ({"values": [0.1, 0.5, 0.9]}, "momentum is a choice among values"),
    ({"distribution": "q_uniform", "min": 0.0, "max": 0.9, "q": 0.1}, "momentum is a range of steps (q_uniform)"),
    ({"distribution": "normal", "mu": 0.5, "sigma": 0.1}, "momentum is a law without both min and max (normal)"),
])
def test_pb2_refuses_to_change_what_is_not_a_real_number_within_a_min_and_a_max(parameter, why):
    message = refusal(pbt_spec({"lr": LR, "momentum": parameter}, type="pb2"))
    assert f"scheduler.mutate: pb2 picks new values of real numbers within a min and a max; {why}: use " \
           f"scheduler.type pbt, or leave momentum out of mutate" in message
    make_plan(load_spec(pbt_spec({"lr": LR, "momentum": parameter})))  # PBT takes it


class TrialsOnly:
    """What Ray's PBT asks of Tune's controller when no trial is in a quantile yet: the trials."""

    def __init__(self, trials):
        self.trials = trials

    def get_trials(self):
        return list(self.trials)


@pytest.mark.parametrize("takes_turns", [False, True])
def test_a_population_that_runs_at_once_takes_no_turns(takes_turns, tmp_path, monkeypatch):
    """Ray's PBT pauses a trial at its perturbation while another is paused or pending, so that trials take
    turns; where the whole population runs at once the other is only starting again (an exploit), and a
    pause would restart this trial for nothing."""
    from ray.tune.experiment import Trial
    from ray.tune.schedulers import TrialScheduler

    from tune_service.search import population

    monkeypatch.setattr(population, "journal_directory", lambda trial: tmp_path)  # a stub trial has no storage

    scheduler = registry.build_scheduler(load_spec(pbt_spec()), takes_turns=takes_turns)
    scheduler.set_search_properties("val_loss", "min")
    running, restarting = (Trial("trainable", config={"lr": 0.01}, trial_id=f"t{i}", stub=True) for i in range(2))
    running.status, restarting.status = Trial.RUNNING, Trial.PENDING
    controller = TrialsOnly([running, restarting])
    for trial in (running, restarting):
        scheduler.on_trial_add(controller, trial)
    decision = scheduler.on_trial_result(controller, running, {"val_loss": 1.0, "epoch": 2, "training_iteration": 2})
    assert decision == (TrialScheduler.PAUSE if takes_turns else TrialScheduler.CONTINUE)
    (written,) = read_history(tmp_path).decisions  # the decision, in the journal before it takes effect
    assert (written.trial_id, written.time, written.perturbed_at, written.donor) == (running.trial_id, 2, 2, None)


def test_each_decisions_draws_come_from_the_seed_the_trial_and_the_time_alone():
    """Ray's PBT draws its donor, factors and resamples from Python's ``random`` and PB2 from NumPy's global
    generator, neither seeded: seeded_draws seeds both for one decision, so a resumed population draws what
    the uninterrupted one did. This fails if Ray's PBT stops drawing from ``random``."""
    import numpy as np
    from ray.tune.schedulers.pbt import _explore

    config = {"lr": 0.01, "momentum": 0.5}
    mutations = {"lr": lambda: random.uniform(1e-3, 0.3), "momentum": [0.0, 0.5, 0.9]}

    def explore(seed, place, time):
        with seeded_draws(seed, place, time):
            return [_explore(config, mutations, 0.5, [0.8, 1.2], None)[0] for _ in range(5)], np.random.uniform()

    random.seed(11)
    np.random.seed(11)
    outside = random.random(), np.random.uniform()
    random.seed(11)
    np.random.seed(11)
    first = explore(3, 1, 4)
    assert (random.random(), np.random.uniform()) == outside  # the driver's own draws are left as they were
    assert explore(3, 1, 4) == first
    assert explore(3, 2, 4) != first and explore(3, 1, 6) != first and explore(4, 1, 4) != first


def test_of_trials_that_trained_as_long_the_one_decided_on_longest_ago_runs_next():
    """An exploited trial takes its donor's training time. Were it to run before its paused donor, it would
    exploit the donor's same checkpoint at its next perturbation, and again, for ever."""
    from ray.tune.experiment import Trial

    scheduler = registry.build_scheduler(load_spec(pbt_spec()), takes_turns=True)
    scheduler.set_search_properties("val_loss", "min")
    exploited, donor = (Trial("trainable", config={"lr": 0.01}, trial_id=f"t{i}", experiment_tag=f"{i + 1}_lr=0.01",
                              stub=True) for i in range(2))
    controller = TrialsOnly([exploited, donor])
    for trial in (exploited, donor):
        scheduler.on_trial_add(controller, trial)
        trial.status = Trial.PAUSED
    assert scheduler.choose_trial_to_run(controller) is exploited  # neither decided on: the first created
    scheduler.last_decided.update({donor.trial_id: 0, exploited.trial_id: 1})
    assert scheduler.choose_trial_to_run(controller) is donor
