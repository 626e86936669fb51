"""``execution.bundle: auto``: the rule that picks a bundle's size from the probe's timings, the sizes it
tries, and the probe itself on this CPU (a real bundle of the digits task, timed)."""

from __future__ import annotations

import time

import pytest

from tune_service.execution import bundle_sizing
from tune_service.execution.bundle_sizing import RELAY_S, ProbedSize, SweepWork, candidate_sizes, choose, run_probe
from tune_service.execution.bundles import GATHER_S
from tune_service.spec.training import TrainingSettings
from tune_service.tasks import resolve_task
from tune_service.tasks.digits import Digits
from tune_service.training.trial_config import TrialConfig

#: A bundle's seconds a batch that grow far slower than its members: fusing pays on the training.
FUSING_PAYS = [ProbedSize(1, 0.010), ProbedSize(2, 0.011), ProbedSize(4, 0.012), ProbedSize(8, 0.020)]


def work(units: float, **overrides) -> SweepWork:
    settings = {"batches_per_unit": 100, "reports_per_unit": 1.0, "slots": 2, "cpus": 2, "member_start_s": 1.0,
                "gang_start_s": 3.0}
    return SweepWork(units, **{**settings, **overrides})


def test_a_long_sweep_of_a_step_that_fuses_well_takes_the_size_of_least_predicted_time():
    sizing = choose(FUSING_PAYS, work(1000))
    # alone: 1000 x 1 s / 2 = 500 s; K a bundle: 1000 x (its epoch / K + RELAY_S) / 2, then the sweep's
    # start: (K - 1) x 2 actors x 1 s / 2 CPUs, the members' gathering and the gang's 3 s.
    start = {k: (k - 1) + GATHER_S + 3.0 for k in (2, 4, 8)}
    assert sizing.predicted_s == pytest.approx({1: 500, 2: 1000 * (1.1 / 2 + RELAY_S) / 2 + start[2],
                                                4: 1000 * (1.2 / 4 + RELAY_S) / 2 + start[4],
                                                8: 1000 * (2.0 / 8 + RELAY_S) / 2 + start[8]})
    assert sizing.members == 8  # 156 s
    assert sizing.reason.startswith("8 trials a bundle: predicted 156.0 s of training, relays and members' starts "
                                    "against 500.0 s alone (1000 trial-epochs expected on 2 gang(s)")


def test_a_short_sweep_trains_each_trial_alone_when_the_members_actors_cost_more_than_fusing_saves():
    sizing = choose(FUSING_PAYS, work(4))  # 2 s alone; 2 a bundle: 4 x (1.1 / 2 + RELAY_S) / 2 + 1 + 1 + 3 s
    assert sizing.members == 1 and sizing.reason.startswith("each trial alone: predicted 2.0 s")
    assert sizing.predicted_s[2] == pytest.approx(4 * (1.1 / 2 + RELAY_S) / 2 + 1 + GATHER_S + 3.0)


def test_a_bundle_that_gains_less_than_min_gain_is_not_taken():
    # 2 a bundle predicts 0.95 of the time alone: within MIN_GAIN, so each trial alone
    alone, relay, start = 1000 * 1.0 / 2, 1000 * RELAY_S / 2, 1.0 + GATHER_S + 3.0
    pair_s = (0.95 * alone - relay - start) * 2 * 2 / (1000 * 100)  # the batch time that predicts 0.95 x alone
    sizing = choose([ProbedSize(1, 0.010), ProbedSize(2, pair_s)], work(1000))
    assert sizing.predicted_s[2] == pytest.approx(0.95 * sizing.predicted_s[1])
    assert sizing.members == 1


def test_on_a_gpu_no_size_above_its_share_of_memory_is_taken():
    sizes = [ProbedSize(1, 0.010, 10), ProbedSize(2, 0.011, 50), ProbedSize(4, 0.012, 95)]
    sizing = choose(sizes, work(1000), memory_bytes=100)  # 95 > 0.9 x 100
    assert sizing.members == 2 and set(sizing.predicted_s) == {1, 2}
    assert "1 size(s) above 90% of the GPU share" in sizing.reason


def test_a_trial_above_its_gpu_share_alone_is_chosen_alone_not_refused():
    sizes = [ProbedSize(1, 0.010, 95), ProbedSize(2, 0.011, 120)]  # even one member is above 0.9 x 100
    sizing = choose(sizes, work(1000), memory_bytes=100)
    assert sizing.members == 1 and set(sizing.predicted_s) == {1}


@pytest.mark.parametrize("trials, slots, sizes", [(64, 2, [1, 2, 4, 8, 16]), (8, 2, [1, 2, 4]), (3, 2, [1, 2]),
                                                  (1, 4, [1])])
def test_the_probe_tries_powers_of_two_up_to_the_trials_each_gang_has(trials, slots, sizes):
    assert candidate_sizes(trials, slots) == sizes


def test_the_probe_times_a_real_bundle_at_each_size_on_this_cpu():
    config = TrialConfig(resolve_task(Digits()), dict(Digits.defaults), epochs=2, seed=0, settings=TrainingSettings())
    before = time.time()
    sizes, batches_per_epoch, memory, entered, ready_s = run_probe(config, [1, 2], "cpu", batches=(1, 2))
    assert [s.members for s in sizes] == [1, 2] and all(s.batch_s > 0 and s.peak_bytes == 0 for s in sizes)
    assert batches_per_epoch == 23 and memory == 0  # 1,437 training images in batches of 64; no GPU share
    assert before <= entered <= time.time() and ready_s > 0  # a first bundle built: data, model, stacking


def test_an_unfusable_tasks_auto_is_each_trial_alone_with_the_reason():
    sizing = bundle_sizing.alone("torch.func cannot run the task's training_step under vmap: ...")
    assert sizing.members == 1
    assert sizing.describe() == "bundle auto  each trial alone: torch.func cannot run the task's training_step under vmap: ..."
