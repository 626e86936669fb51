"""The expected rung schedule and trial-epochs that ``--dry-run`` shows, worked out by hand from Ray's rules."""

from __future__ import annotations

import pytest

from tune_service.search.schedule import expected_schedule
from tune_service.spec import SchedulerSpec


def rungs(schedule):
    return [[(r.epoch, r.trials) for r in b.rungs] for b in schedule.brackets]


def test_fifo_trains_every_trial_to_max_t():
    schedule = expected_schedule(SchedulerSpec("fifo", max_t=5), 6)
    assert rungs(schedule) == [[(5, 6)]]
    assert schedule.trial_epochs == schedule.max_trial_epochs == 30 and schedule.rung_epochs == ()


def test_asha_keeps_a_fraction_one_over_eta_at_each_rung_and_at_least_one_trial():
    schedule = expected_schedule(SchedulerSpec("asha", max_t=8, grace_period=1, reduction_factor=3), 10)
    assert rungs(schedule) == [[(1, 10), (3, pytest.approx(10 / 3)), (8, pytest.approx(10 / 9))]]
    assert schedule.rung_epochs == (1, 3)
    assert schedule.trial_epochs == pytest.approx(10 * 1 + 10 / 3 * 2 + 10 / 9 * 5)
    assert not schedule.exact

    few = expected_schedule(SchedulerSpec("asha", max_t=27, grace_period=1, reduction_factor=3), 4)
    assert [t for _, t in rungs(few)[0]] == [4, pytest.approx(4 / 3), 1, 1]  # never fewer than one


def test_asha_rungs_start_at_the_grace_period_and_round_up_fractional_milestones():
    schedule = expected_schedule(SchedulerSpec("asha", max_t=20, grace_period=2, reduction_factor=2.5), 25)
    assert schedule.rung_epochs == (2, 5, 13)  # 2, 5, 12.5 -> reported first at epoch 13
    assert rungs(schedule)[0][-1] == (20, pytest.approx(25 / 2.5 ** 3))


def test_hyperband_fills_the_bracket_without_early_stopping_first():
    # max_t=9, eta=3: three brackets per band, s = 0, 1, 2 in that order (Ray's HyperBandScheduler).
    schedule = expected_schedule(SchedulerSpec("hyperband", max_t=9, reduction_factor=3), 12)
    assert rungs(schedule) == [
        [(9, 3)],                    # s=0: 3 trials, no stopping
        [(3, 5), (9, 2)],            # s=1: 5 trials from epoch 3, ceil(5/3)=2 go on
        [(1, 4), (3, 3), (9, 1)],    # s=2: 4 of its 9 trials; it keeps ceil(9/3)=3, then 1
    ]
    assert schedule.exact and schedule.trial_epochs == 27 + (15 + 12) + (4 + 6 + 6)


def test_hyperband_for_bohb_fills_the_most_aggressive_bracket_first():
    schedule = expected_schedule(SchedulerSpec("hyperband", max_t=9, reduction_factor=3), 12, bohb=True)
    assert rungs(schedule) == [[(1, 9), (3, 3), (9, 1)], [(3, 3), (9, 2)]]
    assert schedule.trial_epochs == 9 + 3 * 2 + 6 + 3 * 3 + 2 * 6


def test_hyperband_skips_a_bracket_whose_first_rung_is_below_one_epoch_and_truncates_like_ray():
    # max_t=8, eta=3: round(log3 8)+1 = 3 brackets; s=2 would start at int(8/9)=0 epochs and is skipped;
    # s=1 starts at int(8/3)=2 and its survivors stop at 6, not 8 (Ray truncates r to an int).
    schedule = expected_schedule(SchedulerSpec("hyperband", max_t=8, reduction_factor=3), 10)
    assert rungs(schedule) == [[(8, 3)], [(2, 5), (6, 2)], [(8, 2)]]
