"""The Tune trainable of every trial: a function that launches one Ray Train ``TorchTrainer`` (a real
DDP job of N ranks) and relays its per-epoch metrics to Tune.

This is Ray's non-deprecated path for Train inside Tune: the Tune trial is a light driver (it holds a
token amount of memory, no CPU) and the TorchTrainer reserves the ranks' CPUs/GPUs in its own placement
group. When Tune stops the trial, the driver's actor dies and the Train controller and its rank
processes die with it (they are owned by it).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from numbers import Number
from typing import Any, Callable

from tune_service.registry import TIME_ATTR
from tune_service.spaces import plain
from tune_service.spec import ResourceSpec
from tune_service.tasks import ResolvedTask

#: Ray Train's controller polls its ranks every 2 s by default and a report waits for the next poll,
#: which made every epoch of a small trial cost about 2 s. 0.1 s keeps the poll cheap and reports fast.
TRAIN_POLL_INTERVAL_S = "0.1"
_POLL_ENV = "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S"

#: What the trial driver reserves from Tune: Tune needs a non-empty request, and a CPU here would be a
#: CPU taken from the ranks. 1 MiB of memory is a valid request on every node.
DRIVER_RESOURCES = {"cpu": 0, "memory": 2**20}


def combine_rank_metrics(per_rank: list[dict[str, Any]], report_index: int) -> dict[str, Any]:
    """One metrics dict from every rank's report: numbers are averaged over the ranks, anything else is
    rank 0's, and ``epoch`` is filled in (the report's 1-based index) when the task does not report it.

    The shared loop already reduces its metrics over all ranks, so averaging changes nothing for it; a
    plain user ``train_loop_per_worker`` that reports its own shard's numbers gets the mean over ranks.
    """
    combined = dict(per_rank[0])
    for key, value in per_rank[0].items():
        values = [m.get(key) for m in per_rank]
        numeric = all(isinstance(v, Number) and not isinstance(v, bool) for v in values)
        if numeric and len(set(values)) > 1:
            combined[key] = sum(values) / len(values)
    combined.setdefault(TIME_ATTR, report_index)
    return combined


def _relay_callback():
    """A Ray Train callback relaying each report to Tune, built on Ray's ``TuneReportCallback``."""
    from ray.tune.integration.ray_train import CHECKPOINT_PATH_KEY, TuneReportCallback

    class RelayToTune(TuneReportCallback):
        def __init__(self):
            super().__init__()
            self.reports = 0

        def after_report(self, run_context, metrics, checkpoint):
            self.reports += 1
            combined = combine_rank_metrics(metrics, self.reports)
            if checkpoint:
                combined[CHECKPOINT_PATH_KEY] = checkpoint.path
            self._training_actor_item_queue.put(combined)

    return RelayToTune()


@dataclass(frozen=True)
class TrialTemplate:
    """What every trial of a sweep shares; the searcher fills in the hyperparameters."""

    task: ResolvedTask
    epochs: int
    seed: int
    resources: ResourceSpec

    def __call__(self, config: dict[str, Any]) -> None:
        """Run one trial (the Tune function trainable)."""
        from ray import train, tune
        from ray.train.torch import TorchTrainer

        os.environ.setdefault(_POLL_ENV, TRAIN_POLL_INTERVAL_S)  # Ray Train passes it on to its controller
        hparams = {**self.task.defaults, **plain(config)}
        worker_fn, worker_config = self._worker(hparams)
        r = self.resources
        use_gpu = r.gpus_per_worker > 0
        per_worker = {"CPU": r.cpus_per_worker, **({"GPU": r.gpus_per_worker} if use_gpu else {})}
        trial_dir = tune.get_context().get_trial_dir()
        trainer = TorchTrainer(
            worker_fn,
            train_loop_config=worker_config,
            scaling_config=train.ScalingConfig(num_workers=r.workers, use_gpu=use_gpu, resources_per_worker=per_worker),
            run_config=train.RunConfig(
                name="ddp", storage_path=trial_dir, callbacks=[_relay_callback()],
                # Train logs every report at INFO on every rank; the trial's progress is Tune's to show.
                logging_config=train.LoggingConfig(log_level="WARNING"),
            ),
        )
        trainer.fit()

    def _worker(self, hparams: dict[str, Any]) -> tuple[Callable, Any]:
        if self.task.train_loop is not None:
            return self.task.train_loop, hparams  # a user's own train_loop_per_worker, run unchanged
        from tune_service.training.loop import fit

        # Ray Train hands ``train_loop_config`` to every rank as a dict; ``fit`` rebuilds its TrialConfig.
        return fit, {"task": self.task, "hparams": hparams, "epochs": self.epochs, "seed": self.seed}
