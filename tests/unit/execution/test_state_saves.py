"""Inside saves_on_their_period, Tune's own experiment-state manager (Ray's class; its storage a local
directory whose copy to storage is immediate) saves on its period only: a trial's checkpoints force no
save, and the period grows with the time a save takes. Outside the block, and under a user's ``auto``,
it is Tune's as it was."""

from __future__ import annotations

import time

import pytest
from ray.tune.execution.experiment_state import _ExperimentCheckpointManager

from tune_service.experiment.state_saves import PERIOD_PER_SAVE_TIME, STATE_SAVE_PERIOD_S, saves_on_their_period


class LocalStorage:
    """What the manager uses of Ray's StorageContext (whose staging directory needs a running Ray)."""

    class Syncer:
        def sync_up(self, local_dir, remote_dir):
            return True

        def wait(self):
            pass

    def __init__(self, directory):
        self.experiment_driver_staging_path = self.experiment_fs_path = str(directory)
        self.syncer = self.Syncer()


def manager(tmp_path, period=STATE_SAVE_PERIOD_S):
    """Tune's manager as the TuneController makes it for a sweep that keeps two checkpoints a trial."""
    storage = LocalStorage(tmp_path)
    return _ExperimentCheckpointManager(storage=storage, checkpoint_period=period, sync_every_n_trial_checkpoints=2)


class Saves:
    def __init__(self, seconds=0.0):
        self.count, self.seconds = 0, seconds

    def __call__(self):
        self.count += 1
        time.sleep(self.seconds)


def saves_after_checkpoints(state_manager, checkpoints=4):
    """A save, then a trial's checkpoints within the period, then Tune asking to save again."""
    saves = Saves()
    state_manager.sync_up_experiment_state(saves)
    for _ in range(checkpoints):
        state_manager.on_trial_checkpoint("trial_1")
    state_manager.sync_up_experiment_state(saves)
    return saves.count


def test_a_trials_checkpoints_force_no_save_inside_the_block_and_do_outside_it(tmp_path):
    with saves_on_their_period():
        assert saves_after_checkpoints(manager(tmp_path)) == 1
    assert saves_after_checkpoints(manager(tmp_path)) == 2  # Tune's own forcing: num_to_keep=2 was reached


def test_the_period_is_at_least_19_times_the_last_save_and_the_set_period_a_floor(tmp_path, monkeypatch):
    monkeypatch.setenv("TUNE_GLOBAL_CHECKPOINT_S", STATE_SAVE_PERIOD_S)
    with saves_on_their_period():
        slow, quick = manager(tmp_path), manager(tmp_path)
        slow.sync_up_experiment_state(Saves(seconds=0.2))
        quick.sync_up_experiment_state(Saves())
    assert slow._checkpoint_period >= 0.2 * PERIOD_PER_SAVE_TIME
    assert quick._checkpoint_period == float(STATE_SAVE_PERIOD_S)
    tunes = manager(tmp_path)
    tunes.sync_up_experiment_state(Saves(seconds=0.2))
    assert tunes._checkpoint_period == float(STATE_SAVE_PERIOD_S)  # Tune's fixed period stays fixed


def test_a_users_auto_period_keeps_tunes_rule(tmp_path):
    with saves_on_their_period():
        auto = manager(tmp_path, period="auto")
        auto.sync_up_experiment_state(Saves())
    assert auto._checkpoint_period == 10.0  # Tune's floor for auto, not ours


@pytest.mark.parametrize("name", ["on_trial_checkpoint", "_update_auto_checkpoint_time"])
def test_tunes_methods_are_back_after_the_block_whatever_ends_it(name):
    tunes = getattr(_ExperimentCheckpointManager, name)
    with pytest.raises(KeyboardInterrupt), saves_on_their_period():
        assert getattr(_ExperimentCheckpointManager, name) is not tunes
        raise KeyboardInterrupt
    assert getattr(_ExperimentCheckpointManager, name) is tunes
