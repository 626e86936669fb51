"""FinalStatuses records the trials unfinished at the last step's end, reading only the trials not yet
finished and the new ones at each step: a trial that has ended is not read again, however long the
sweep goes on."""

from __future__ import annotations

from tune_service.experiment.callbacks import FinalStatuses


class Trial:
    """A Tune trial as the callback sees it, counting how often its status is read."""

    def __init__(self, trial_id: str, status: str = "PENDING"):
        self.trial_id, self._status, self.reads = trial_id, status, 0

    @property
    def status(self) -> str:
        self.reads += 1
        return self._status

    @status.setter
    def status(self, value: str) -> None:
        self._status = value


def test_the_trials_unfinished_at_the_last_steps_end_are_recorded(tmp_path):
    statuses = FinalStatuses("exp-unfinished")
    try:
        done, failed, running, pending = Trial("a"), Trial("b"), Trial("c"), Trial("d")
        trials = [done, failed, running]
        statuses.on_step_end(0, trials)
        done.status, failed.status, running.status = "TERMINATED", "ERROR", "RUNNING"
        trials.append(pending)
        statuses.on_step_end(1, trials)
        running.status = "TERMINATED"  # Tune marks an interrupted sweep's running trials so at its end
        statuses.on_experiment_end(trials)
        assert statuses.unfinished == {"c", "d"}
    finally:
        statuses.release()


def test_a_finished_trial_is_not_read_again_at_later_steps():
    statuses = FinalStatuses("exp-constant")
    try:
        trials = [Trial(f"t{i}", "TERMINATED") for i in range(100)]
        for step in range(50):
            trials.append(Trial(f"new{step}", "RUNNING"))
            statuses.on_step_end(step, trials)
        assert max(t.reads for t in trials[:100]) == 1
        assert min(t.reads for t in trials[100:]) >= 1  # every running trial is read at each step after it came
        statuses.on_experiment_end(trials)
        assert statuses.unfinished == {f"new{step}" for step in range(50)}
    finally:
        statuses.release()


def test_a_trial_added_before_a_requeue_in_the_same_step_is_read():
    """Tune requeues a failed trial by moving it to the end of its list, behind one just added."""
    statuses = FinalStatuses("exp-requeue")
    try:
        trials = [Trial("a", "RUNNING"), Trial("b", "RUNNING")]
        statuses.on_step_end(0, trials)
        trials.append(Trial("new"))  # added, pending
        trials.append(trials.pop(0))  # "a" failed and is requeued, pending again
        statuses.on_step_end(1, trials)
        statuses.on_experiment_end(trials)
        assert statuses.unfinished == {"a", "b", "new"}
    finally:
        statuses.release()


def test_trials_that_left_tunes_list_after_a_step_do_not_hide_the_ones_added_next():
    """Under FIFO and ASHA the service takes ended trials out of Tune's list after each step
    (tune_service.execution.retiring) and says how many: the trials added at the next step are read."""
    statuses = FinalStatuses("exp-left")
    try:
        trials = [Trial("a", "TERMINATED"), Trial("b", "RUNNING")]
        statuses.on_step_end(0, trials)
        del trials[0]
        statuses.left(1)
        trials.append(Trial("c"))
        statuses.on_step_end(1, trials)
        statuses.on_experiment_end(trials)
        assert statuses.unfinished == {"b", "c"}
    finally:
        statuses.release()
