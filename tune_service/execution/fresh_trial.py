"""The Tune trainable of every trial: a function that launches one Ray Train ``TorchTrainer`` (a real
DDP job of N ranks) and relays its per-epoch metrics to Tune.

This is Ray's non-deprecated path for Train inside Tune: the Tune trial is a light driver (it holds a
token amount of memory, no CPU) and the TorchTrainer reserves the ranks' CPUs/GPUs in its own placement
group. When Tune stops the trial, the driver's actor dies and the Train controller and its rank
processes die with it (they are owned by it).
"""

from __future__ import annotations

import dataclasses
import os
import queue
import threading
from dataclasses import dataclass
from numbers import Number
from typing import Any, Callable, cast

from tune_service.execution.sweep_trial import Attempt, StartPoint, SweepTrial
from tune_service.experiment.checkpoints import TRAIN_RUN_NAME, checkpointed_report, trial_storage
from tune_service.experiment.layout import TIME_ATTR
from tune_service.redaction import scrubbing
from tune_service.spec import ResourceSpec
from tune_service.tasks import ResolvedTask
from tune_service.training.trial_config import TrialConfig

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
    for key in per_rank[0]:
        values = [m.get(key) for m in per_rank]
        numeric = all(isinstance(v, Number) and not isinstance(v, bool) for v in values)
        if numeric and len(set(values)) > 1:
            combined[key] = sum(cast(list[float], values)) / len(values)  # all numbers (numeric)
    combined.setdefault(TIME_ATTR, report_index)
    return combined


def _relay_callback(reports: Any):
    """A Ray Train callback (run in Train's controller) putting each report, combined over the ranks,
    into ``reports``, a :class:`ray.util.queue.Queue` the trial function empties (:func:`relay_reports`)."""
    from ray.train import UserCallback
    from ray.tune.integration.ray_train import CHECKPOINT_PATH_KEY

    class RelayToTune(UserCallback):
        def __init__(self):
            self.reports = 0

        def after_report(self, run_context, metrics, checkpoint):
            self.reports += 1
            combined = combine_rank_metrics(metrics, self.reports)
            if checkpoint:
                combined[CHECKPOINT_PATH_KEY] = checkpoint.path
            reports.put(combined)  # returns once the queue holds it, before Train's run can end

    return RelayToTune()


def relay_reports(fit: Callable[[], object], reports: Any, report: Callable[[dict], None], poll_s: float = 0.1) -> None:
    """Run ``fit`` (a Ray Train run) in a thread and hand every report it puts in ``reports`` to
    ``report`` (``tune.report``), in order, from the calling thread; return once ``fit`` has returned
    and every one of its reports has been handed over, raising ``fit``'s error if it raised.

    Why not Ray's own relay (``TuneReportCallback``): it passes each report through Tune's trial actor's
    main thread, which can still hold the last report when the trial function returns; Ray then puts its
    "function returned" marker in the one-slot queue ahead of it and the main thread blocks for ever,
    holding the trial's slot (seen once in 200 trials). Here the trial function reports everything
    itself before returning, so nothing is left in flight when it does.
    """
    failure: list[BaseException] = []

    def run() -> None:
        try:
            fit()
        except BaseException as error:  # raised in the trial's own thread, below
            failure.append(error)

    fitting = threading.Thread(target=run, name="ray-train-fit", daemon=True)
    fitting.start()
    while fitting.is_alive():
        try:
            report(reports.get(timeout=poll_s))
        except queue.Empty:
            pass
    # fit has returned: each report's put returned before Train's run ended, so they are all queued.
    while True:
        try:
            report(reports.get_nowait())
        except queue.Empty:
            break
    if failure:
        raise failure[0]


@dataclass(frozen=True, kw_only=True)
class FreshTrial(SweepTrial):
    """A trial as its own Ray Train run of ``resources.workers`` ranks. An attempt after an out-of-memory
    error relaunches the run under the same name and storage, so Ray Train resumes it from its latest
    checkpoint."""

    resources: ResourceSpec
    #: Restarts of the trial's worker group (from its latest checkpoint) before the trial fails.
    max_failures: int = 0

    def own_start(self, storage_path: str, filesystem: Any) -> StartPoint | None:
        """The report of the Ray Train run's latest checkpoint; the run resumes from that checkpoint by
        itself (it keeps its name and storage), so there is none to hand it."""
        report = checkpointed_report(storage_path, filesystem)
        return None if report is None else StartPoint(None, report)

    def attempt(self, attempt: Attempt) -> None:
        from ray import train
        from ray.train.torch import TorchTrainer
        from ray.util.queue import Queue

        os.environ.setdefault(_POLL_ENV, TRAIN_POLL_INTERVAL_S)  # Ray Train passes it on to its controller
        storage_path, storage_filesystem = trial_storage()
        # Ranks read checkpoints from storage themselves only where it is a path they can open.
        local = getattr(storage_filesystem, "type_name", "") == "local"
        checkpoint_root = f"{storage_path}/{TRAIN_RUN_NAME}" if local else None
        worker_fn, worker_config = self._worker(attempt.config, checkpoint_root)
        worker_fn = scrubbing(worker_fn, self.secrets)
        r = self.resources
        use_gpu = r.gpus_per_worker > 0
        per_worker = {"CPU": r.cpus_per_worker, **({"GPU": r.gpus_per_worker} if use_gpu else {})}
        reports = Queue(actor_options={"num_cpus": 0})
        trainer = TorchTrainer(
            worker_fn,
            train_loop_config=worker_config,
            scaling_config=train.ScalingConfig(num_workers=r.workers, use_gpu=use_gpu, resources_per_worker=per_worker),
            run_config=train.RunConfig(
                # In the experiment's storage, not Tune's local staging copy: a trial resumed in a later
                # session (or on another node) finds the checkpoints of its earlier attempts there.
                name=TRAIN_RUN_NAME,
                storage_path=storage_path,
                storage_filesystem=storage_filesystem,
                callbacks=[_relay_callback(reports)],
                # The latest checkpoint is all a resumed trial needs; one more survives a failed upload.
                checkpoint_config=train.CheckpointConfig(num_to_keep=2),
                # A rank that dies (killed, its node lost) restarts the whole worker group, which
                # resumes from the latest checkpoint, not from epoch 0.
                failure_config=train.FailureConfig(max_failures=self.max_failures),
                # Train logs every report at INFO on every rank; the trial's progress is Tune's to show.
                # (mypy reads ray.train's V1 RunConfig; the V2 one Ray Train V2 exports at run time has it)
                logging_config=train.LoggingConfig(log_level="WARNING"),  # type: ignore[call-arg]
            ),
            # A checkpoint handed over from another trial; Ray Train prefers the run's own, once it has one.
            resume_from_checkpoint=None if attempt.start is None else attempt.start.checkpoint,
        )
        try:
            relay_reports(trainer.fit, reports, attempt.reports)
        finally:
            reports.shutdown()

    def _worker(self, config: TrialConfig, checkpoint_root: str | None) -> tuple[Callable, Any]:
        assert isinstance(self.task, ResolvedTask)  # only a warm trial's task travels sealed
        if self.task.train_loop is not None:
            return self.task.train_loop, dict(config.hparams)  # a user's own train_loop_per_worker, run unchanged
        from tune_service.training.loop import fit

        return fit, dataclasses.replace(config, checkpoint_root=checkpoint_root)
