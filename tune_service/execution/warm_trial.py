"""The Tune trainable of a trial on a warm gang: lease the slot's gang, run the shared loop on it, and
relay rank 0's per-epoch reports (with their checkpoints) to Tune.

Tune runs it with ``reuse_actors=True`` and :func:`trial_resources`, so the trial actor, its placement
group and its gang serve trial after trial. A stop or pause from the scheduler reaches the trial inside
``tune.report`` (function trainables report synchronously), where the gang's ranks wait at the same
report: they leave the loop together and the gang is free for the next trial at once.

A trial starts from the newest complete checkpoint in its directory of the experiment's storage (a
retried, resumed or unpaused trial), and reports that checkpoint's epoch again first: a driver that
died just after the report may never have recorded it.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any

from tune_service.execution.gang import GangSettings, lease_gang
from tune_service.execution.sweep_trial import SweepTrial
from tune_service.experiment.checkpoints import newest_checkpoint, trial_storage
from tune_service.experiment.saving import FailingSaves
from tune_service.spec.configs import plain
from tune_service.training.guards import check_metric_reported
from tune_service.training.oom import TrialOutOfMemory

logger = logging.getLogger(__name__)

#: How long Tune's reuse of a trial actor waits for the last trial's function to end (Ray's default is
#: 2 s). The function ends once its ranks have left the loop, which is quick, but not on a loaded node.
THREAD_TIMEOUT_ENV = "TUNE_FUNCTION_THREAD_TIMEOUT_S"
THREAD_TIMEOUT_S = "30"


def trial_resources(settings: GangSettings):
    """Tune's resource request of a warm trial: one placement-group bundle per rank, packed onto as few
    nodes as they fit. The leading empty bundle puts the trial actor in bundle 0, beside rank 0, with
    no resources of its own (so rank 0's checkpoints are on the trial actor's disk)."""
    from ray import tune

    return tune.PlacementGroupFactory([{}, *settings.bundles], strategy="PACK")


@dataclass(frozen=True, kw_only=True)
class WarmTrial(SweepTrial):
    """A trial on its concurrency slot's warm gang."""

    gang: GangSettings

    def __call__(self, config: dict[str, Any]) -> None:
        """Run one trial. An out-of-memory with ``training.oom_retry`` runs it again, from its latest
        checkpoint, on a new gang at twice the gradient accumulation (the same effective batch)."""
        from ray import tune

        os.environ.setdefault(THREAD_TIMEOUT_ENV, THREAD_TIMEOUT_S)
        # Ray logs every persisted checkpoint at INFO; the trial's progress is Tune's table to show.
        logging.getLogger("ray.train._internal.storage").setLevel(logging.WARNING)
        hparams = {**self.task.defaults, **plain(config)}
        trial_dir = tune.get_context().get_trial_dir()
        storage_path, filesystem = trial_storage()
        training = self.training
        reports = 0
        checkpoint_saves = FailingSaves(f"a checkpoint of trial {os.path.basename(trial_dir)}")

        def relay(metrics: dict[str, Any], checkpoint_path: str | None) -> None:
            nonlocal reports
            reports += 1
            if reports == 1:
                check_metric_reported(self.metric, metrics)
            if checkpoint_path is None:
                tune.report(metrics)
            # Tune copies the checkpoint into storage before it takes the report: when that copy fails
            # (a full disk), the epoch is reported without it and the trial's newest complete
            # checkpoint stays the one to resume from (a cut copy is passed over: checkpoints.py).
            elif not checkpoint_saves.attempt(
                    lambda: tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(checkpoint_path))):
                tune.report(metrics)

        stored = newest_checkpoint(storage_path, filesystem)
        if stored is not None:
            tune.report(stored.report)  # see the module's docstring
        while True:
            gang = lease_gang(self.gang, self.secrets)
            trial = {"task": self.task, "hparams": hparams, "epochs": self.epochs, "max_steps": self.max_steps,
                     "seed": self.seed, "settings": training, "cpus_per_rank": self.gang.resources.cpus_per_worker,
                     "output_dir": trial_dir}
            try:
                gang.run(trial, None if stored is None else stored.as_ray_checkpoint(), trial_dir, relay)
                return
            except TrialOutOfMemory as out_of_memory:
                if not training.oom_retry or out_of_memory.micro_batch <= 1:
                    raise
                training = training.with_accumulation(out_of_memory.grad_accum_steps * 2)
                logger.warning("trial %s: %s; retrying on a new gang with grad_accum_steps %d",
                               os.path.basename(trial_dir), out_of_memory, training.grad_accum_steps)
                stored = newest_checkpoint(storage_path, filesystem)
