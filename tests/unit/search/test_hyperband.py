"""HyperBand's brackets rebuilt from recorded results (:mod:`tune_service.search.hyperband`), without Ray running.

The scenario, HyperBand-for-BOHB with ``max_t`` 3 and ``eta`` 3: bracket A holds trials 1-3 (halved at
epoch 1, keeping one), bracket B trials 4-5 (straight to epoch 3). Before the crash trials 1-3 reached
epoch 1, trial 2 (the best) went on to epoch 2 (checkpointed there) and trial 4 reported epoch 1
(checkpointed there); trials 1 and 3 had been stopped.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from ray.tune.experiment import Trial
from ray.tune.schedulers import TrialScheduler

from tune_service.search.hyperband import ResumedHyperBand, WaitingHyperBand, creation_index
from tune_service.search.replay import RecordedTrial

HYPERBAND_ARGS = dict(time_attr="epoch", max_t=3, reduction_factor=3)
SCORES = {1: 0.5, 2: 0.9, 3: 0.7, 4: 0.6, 5: 0.8}
BEFORE_THE_CRASH = [(1, 1), (2, 1), (3, 1), (2, 2), (4, 1)]  # (trial, epoch), as they arrived
CHECKPOINT_EPOCH = {2: 2, 4: 1}
#: What the sweep delivers after the resume: the two resumed trials report again from their checkpoints.
AFTER_THE_RESUME = [(2, 2), (2, 3), (4, 1), (4, 2), (4, 3), (5, 1), (5, 2), (5, 3)]


class Controller:
    """What Ray's HyperBand asks of Tune's controller: stop a trial, list the trials, tell the searcher."""

    def __init__(self, scheduler, trials):
        self.scheduler, self.trials = scheduler, trials
        self.marked_for_saving = []
        self.search_alg = SimpleNamespace(searcher=SimpleNamespace(on_pause=lambda _: None, on_unpause=lambda _: None))

    def stop_trial(self, trial):  # as TuneController.stop_trial does for a paused trial
        self.scheduler.on_trial_remove(self, trial)
        trial.set_status(Trial.TERMINATED)

    def get_trials(self):
        return list(self.trials.values())

    def _mark_trial_to_checkpoint(self, trial):  # Tune saves the trial's state with the experiment's next
        self.marked_for_saving.append(trial)


def new_trial(number: int, status: str = Trial.PENDING) -> Trial:
    trial = Trial("run_trial", trial_id=f"t{number}", experiment_tag=f"{number}_quality={SCORES[number]}", stub=True)
    trial.set_status(status)
    return trial


def deliver(scheduler, controller, trial, epoch) -> str:
    """One result, and the status Tune gives the trial after the scheduler's decision."""
    trial.set_status(Trial.RUNNING)
    decision = scheduler.on_trial_result(controller, trial, {"epoch": epoch, "score": SCORES[int(trial.trial_id[1:])]})
    if decision == TrialScheduler.STOP or epoch == HYPERBAND_ARGS["max_t"]:
        scheduler.on_trial_complete(controller, trial, {})
        trial.set_status(Trial.TERMINATED)
    elif decision == TrialScheduler.PAUSE:
        trial.set_status(Trial.PAUSED)
    return decision


def scheduler(cls, *args):
    s = cls(*args, bohb=True, **HYPERBAND_ARGS)
    s.set_search_properties("score", "max")
    return s


def run_uninterrupted():
    """The sweep without a crash: its scheduler, trials and controller at the moment of the crash."""
    hyperband = scheduler(WaitingHyperBand)
    trials = {n: new_trial(n) for n in (1, 2, 3, 4)}
    controller = Controller(hyperband, trials)
    for trial in trials.values():
        hyperband.on_trial_add(controller, trial)
    decisions = [deliver(hyperband, controller, trials[n], epoch) for n, epoch in BEFORE_THE_CRASH]
    assert decisions == ["PAUSE", "PAUSE", "STOP", "CONTINUE", "CONTINUE"]  # 3 stopped at the halving
    assert trials[1].status == trials[3].status == Trial.TERMINATED  # 1 stopped, while paused
    assert controller.marked_for_saving == [trials[1]]  # Tune saves the stop only of a trial with an actor
    return hyperband, trials, controller


def recorded() -> dict[str, RecordedTrial]:
    results = {}
    for n, epoch in BEFORE_THE_CRASH:
        results.setdefault(f"t{n}", []).append({"epoch": epoch, "score": SCORES[n], "trial_id": f"t{n}"})
    return {trial_id: RecordedTrial(tuple(r), CHECKPOINT_EPOCH.get(int(trial_id[1:]), 0))
            for trial_id, r in results.items()}


def resume(cls, *args, saved_as_ended=(1, 3)):
    """The restored sweep: Tune adds the trials back newest first (the ended ones too), then a new one."""
    hyperband = scheduler(cls, *args)
    trials = {n: new_trial(n, Trial.TERMINATED if n in saved_as_ended else Trial.PENDING) for n in (4, 2, 3, 1)}
    controller = Controller(hyperband, trials)
    for trial in trials.values():
        hyperband.on_trial_add(controller, trial)
    trials[5] = new_trial(5)
    hyperband.on_trial_add(controller, trials[5])
    hyperband.choose_trial_to_run(controller)
    return hyperband, trials, controller


def test_a_resumed_hyperband_decides_as_one_that_never_stopped():
    uninterrupted, trials, controller = run_uninterrupted()
    trials[5] = new_trial(5)
    uninterrupted.on_trial_add(controller, trials[5])
    expected = {(n, epoch): deliver(uninterrupted, controller, trials[n], epoch)
                for n, epoch in AFTER_THE_RESUME if (n, epoch) not in BEFORE_THE_CRASH}

    resumed, trials, controller = resume(ResumedHyperBand, recorded())
    decided = [(n, epoch, deliver(resumed, controller, trials[n], epoch)) for n, epoch in AFTER_THE_RESUME]
    # The results delivered again go on, as they did; every later one is decided as without the crash.
    assert [d for n, epoch, d in decided if (n, epoch) in BEFORE_THE_CRASH] == ["CONTINUE", "CONTINUE"]
    assert {(n, epoch): d for n, epoch, d in decided if (n, epoch) not in BEFORE_THE_CRASH} == expected
    assert expected[(2, 3)] == TrialScheduler.STOP and expected[(5, 1)] == TrialScheduler.CONTINUE


def test_without_the_rebuild_the_brackets_hold_the_wrong_trials():
    plain, trials, controller = resume(WaitingHyperBand)
    # Bracket A now holds 4, 2 and 3 (3 long ended): 2's epoch-2 result waits at A's first milestone.
    assert deliver(plain, controller, trials[2], 2) == TrialScheduler.PAUSE


def test_the_rebuilt_brackets_hold_each_trial_where_it_was_created():
    resumed, trials, _ = resume(ResumedHyperBand, recorded())
    first, second = resumed._hyperbands[0]
    assert first.current_trials() == [trials[2]] and first._cumul_r == 3  # halved; 1 and 3 left
    assert second.current_trials() == [trials[4], trials[5]] and second.filled()
    assert first._live_trials[trials[2]]["epoch"] == 1  # its epoch-2 result comes again
    assert second._live_trials[trials[4]] is None


@pytest.mark.parametrize("tag, index", [("12_quality=0.5", 12), ("3", 3), ("", None), (None, None)])
def test_the_creation_index_is_the_counter_at_the_start_of_the_tag(tag, index):
    trial = Trial("run_trial", trial_id="x", experiment_tag=tag or "", stub=True)
    if index is None:
        assert creation_index(trial) > 10**9  # unknown: after every known one
    else:
        assert creation_index(trial) == index


def test_a_trial_halved_out_after_the_last_saved_state_is_stopped_on_the_resume():
    # The state was saved before trial 1 was stopped, the results were copied after: it comes back pending.
    resumed, trials, controller = resume(ResumedHyperBand, recorded(), saved_as_ended=(3,))
    assert trials[1].status == Trial.TERMINATED and trials[1] in controller.marked_for_saving
    assert resumed.choose_trial_to_run(controller) is not trials[1]


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_a_non_finite_value_stops_its_trial_outside_the_bracket_which_halves_the_rest(bad):
    hyperband = scheduler(WaitingHyperBand)
    trials = {n: new_trial(n) for n in (1, 2, 3)}
    controller = Controller(hyperband, trials)
    for trial in trials.values():
        hyperband.on_trial_add(controller, trial)
    assert deliver(hyperband, controller, trials[1], 1) == TrialScheduler.PAUSE
    trials[3].set_status(Trial.RUNNING)
    assert hyperband.on_trial_result(controller, trials[3], {"epoch": 1, "score": bad}) == TrialScheduler.STOP
    hyperband.on_trial_complete(controller, trials[3], {"epoch": 1, "score": bad})
    trials[3].set_status(Trial.TERMINATED)
    bracket, _ = hyperband._trial_info[trials[2]]
    assert trials[3] not in bracket.current_trials()
    assert deliver(hyperband, controller, trials[2], 1) == TrialScheduler.CONTINUE  # the best of 1 and 2 goes on
    assert trials[1].status == Trial.TERMINATED  # halved out


def test_a_resumed_hyperband_leaves_a_recorded_non_finite_value_out_of_its_bracket():
    from tune_service.search.hyperband import _finite_prefix

    results = ({"epoch": 1, "score": 0.5}, {"epoch": 2, "score": float("nan")}, {"epoch": 3, "score": 0.9})
    assert _finite_prefix(results, ("score",)) == results[:1]
