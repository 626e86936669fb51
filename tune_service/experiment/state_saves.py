"""When Tune saves the experiment's state while a sweep runs: on a period, at a bounded share of the
driver's time, and never once a trial.

Tune's driver saves its whole state (every trial's, and the searcher's) to the experiment on a period,
so the last save is what a resume after a SIGKILL starts from. Two things in Tune (Ray 2.60,
``ray/tune/execution/experiment_state.py``) make that cost grow with the sweep:

- With ``CheckpointConfig(num_to_keep=N)``, a trial that has checkpointed N times since the last save
  forces one. The sweep keeps two checkpoints a trial, so every trial of two epochs or more forced a save
  of the whole state: 300 forced saves in a sweep of 300 trials, each slower than the last
  (``docs/benchmarks.md``, "Scale"). Tune does it so that its state never names a checkpoint it has
  deleted; :mod:`tune_service.experiment.stand_ins` covers that case on resume instead.
- A fixed period (``TUNE_GLOBAL_CHECKPOINT_S``) takes no account of how long a save takes, which grows
  with the number of trials; only Tune's ``auto`` period does (19 times the last save: 5 % of the
  driver's time), and its floor is 10 s.

:func:`saves_on_their_period`, around ``Tuner.fit``, switches the forcing off and makes the period
``max(STATE_SAVE_PERIOD_S or the user's TUNE_GLOBAL_CHECKPOINT_S, 19 x the last save's time)``: the
period a user sets, or ours, is a floor, and the saves take at most a twentieth of the driver's time. A
user's ``TUNE_GLOBAL_CHECKPOINT_S=auto`` keeps Tune's own rule. The names used are Tune's private ones,
listed in :mod:`tune_service.ray_internals`.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Callable, Iterator

from tune_service.ray_internals import private, replaced, set_private

#: How often Tune saves the experiment's state, in seconds, while a save takes less than a twentieth of
#: that (Ray's ``TUNE_GLOBAL_CHECKPOINT_S``, which a user may set; Tune's default is at least 10 s). A
#: driver killed outright loses the results of at most this long: their trials continue from their
#: checkpoints. Each save also copies Tune's small per-trial files.
STATE_SAVE_PERIOD_S = "2"
#: The period is at least this many times the last save's time: Tune's own rule for its ``auto`` period.
PERIOD_PER_SAVE_TIME = 19


def _no_forced_save(tune_on_trial_checkpoint: Callable[..., Any]) -> Callable[..., Any]:
    def on_trial_checkpoint(manager, trial) -> None:
        """A trial's checkpoint does not force a save of the experiment's state."""

    return on_trial_checkpoint


def _period_floored(tune_update: Callable[..., Any]) -> Callable[..., Any]:
    def update(manager, time_taken: float) -> None:
        """After a save that took ``time_taken`` s: Tune's rule under ``auto``, else the set period is
        a floor and the period is at least :data:`PERIOD_PER_SAVE_TIME` times the save."""
        if manager.auto_checkpoint_enabled:
            tune_update(manager, time_taken)
            return
        floor = float(os.environ.get("TUNE_GLOBAL_CHECKPOINT_S", STATE_SAVE_PERIOD_S))
        set_private(manager, "_checkpoint_period", max(floor, time_taken * PERIOD_PER_SAVE_TIME))

    return update


@contextlib.contextmanager
def saves_on_their_period() -> Iterator[None]:
    """While the block runs (a sweep's ``Tuner.fit``), Tune saves the experiment's state on its period,
    which grows with the time a save takes, and never because a trial checkpointed.

    Raises:
        RayInternalsChanged: Tune's experiment-state manager is not as Ray 2.60's.
    """
    from ray.tune.execution import experiment_state

    manager_class = private(experiment_state, "_ExperimentCheckpointManager")
    with (
        replaced(manager_class, "on_trial_checkpoint", _no_forced_save),
        replaced(manager_class, "_update_auto_checkpoint_time", _period_floored),
    ):
        yield
