"""The Tune trainable of every trial: a function that launches one Ray Train ``TorchTrainer`` (a real
DDP job of N ranks) and relays its per-epoch metrics to Tune.

This is Ray's non-deprecated path for Train inside Tune: the Tune trial is a light driver (it holds a
token amount of memory, no CPU) and the TorchTrainer reserves the ranks' CPUs/GPUs in its own placement
group. When Tune stops the trial, the driver's actor dies and the Train controller and its rank
processes die with it (they are owned by it).
"""

from __future__ import annotations

import logging
import os
import queue
import threading
from dataclasses import dataclass
from numbers import Number
from typing import Any, Callable

from tune_service.execution.sweep_trial import SweepTrial
from tune_service.experiment.checkpoints import TRAIN_RUN_NAME, checkpointed_report, trial_storage
from tune_service.experiment.layout import TIME_ATTR
from tune_service.redaction import scrubbing
from tune_service.spec import ResourceSpec
from tune_service.spec.configs import plain
from tune_service.spec.training import TrainingSettings
from tune_service.training.guards import check_metric_reported
from tune_service.training.oom import TrialOutOfMemory

logger = logging.getLogger(__name__)

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
            combined[key] = sum(values) / len(values)
    combined.setdefault(TIME_ATTR, report_index)
    return combined


def _relay_callback(metric: str, reports: Any):
    """A Ray Train callback (run in Train's controller) putting each report, combined over the ranks,
    into ``reports``, a :class:`ray.util.queue.Queue` the trial function empties (:func:`relay_reports`);
    the first report must hold ``metric`` (the one the sweep optimises)."""
    from ray.train import UserCallback
    from ray.tune.integration.ray_train import CHECKPOINT_PATH_KEY

    class RelayToTune(UserCallback):
        def __init__(self):
            self.reports = 0

        def after_report(self, run_context, metrics, checkpoint):
            self.reports += 1
            combined = combine_rank_metrics(metrics, self.reports)
            if self.reports == 1:
                check_metric_reported(metric, combined)
            if checkpoint:
                combined[CHECKPOINT_PATH_KEY] = checkpoint.path
            reports.put(combined)  # returns once the queue holds it, before Train's run can end

    return RelayToTune()


def relay_reports(fit: Callable[[], None], reports: Any, report: Callable[[dict], None],
                  poll_s: float = 0.1) -> None:
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
    """A trial as its own Ray Train run of ``resources.workers`` ranks."""

    resources: ResourceSpec
    #: Restarts of the trial's worker group (from its latest checkpoint) before the trial fails.
    max_failures: int = 0

    def __call__(self, config: dict[str, Any]) -> None:
        """Run one trial (the Tune function trainable).

        An out-of-memory with ``training.oom_retry`` relaunches the trial's DDP job at twice the
        gradient accumulation (half the per-rank batch, the same effective batch); the relaunched job has
        the same name and storage, so Ray Train resumes it from its latest checkpoint.
        """
        from ray import tune

        os.environ.setdefault(_POLL_ENV, TRAIN_POLL_INTERVAL_S)  # Ray Train passes it on to its controller
        hparams = {**self.task.defaults, **plain(config)}
        trial_dir = tune.get_context().get_trial_dir()
        training = self.training
        _redeliver_checkpointed_report()
        while True:
            try:
                self._train(hparams, training, trial_dir)
                return
            except Exception as error:
                out_of_memory = _out_of_memory_cause(error)
                if out_of_memory is None:
                    raise
            if not training.oom_retry or out_of_memory.micro_batch <= 1:
                raise out_of_memory  # the clear one-line error, not Ray Train's wrapper
            training = training.with_accumulation(out_of_memory.grad_accum_steps * 2)
            logger.warning("trial %s: %s; retrying with grad_accum_steps %d", os.path.basename(trial_dir),
                           out_of_memory, training.grad_accum_steps)

    def _train(self, hparams: dict[str, Any], training: TrainingSettings, trial_dir: str) -> None:
        from ray import train, tune
        from ray.train.torch import TorchTrainer
        from ray.util.queue import Queue

        storage_path, storage_filesystem = trial_storage()
        # Ranks read checkpoints from storage themselves only where it is a path they can open.
        local = getattr(storage_filesystem, "type_name", "") == "local"
        checkpoint_root = f"{storage_path}/{TRAIN_RUN_NAME}" if local else None
        worker_fn, worker_config = self._worker(hparams, training, trial_dir, checkpoint_root)
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
                name=TRAIN_RUN_NAME, storage_path=storage_path, storage_filesystem=storage_filesystem,
                callbacks=[_relay_callback(self.metric, reports)],
                # The latest checkpoint is all a resumed trial needs; one more survives a failed upload.
                checkpoint_config=train.CheckpointConfig(num_to_keep=2),
                # A rank that dies (killed, its node lost) restarts the whole worker group, which
                # resumes from the latest checkpoint, not from epoch 0.
                failure_config=train.FailureConfig(max_failures=self.max_failures),
                # Train logs every report at INFO on every rank; the trial's progress is Tune's to show.
                logging_config=train.LoggingConfig(log_level="WARNING"),
            ),
        )
        try:
            relay_reports(trainer.fit, reports, tune.report)
        finally:
            reports.shutdown()

    def _worker(self, hparams: dict[str, Any], training: TrainingSettings, trial_dir: str,
                checkpoint_root: str | None) -> tuple[Callable, Any]:
        if self.task.train_loop is not None:
            return self.task.train_loop, hparams  # a user's own train_loop_per_worker, run unchanged
        from tune_service.training.loop import fit

        # Ray Train hands ``train_loop_config`` to every rank as a dict; ``fit`` rebuilds its TrialConfig.
        return fit, {"task": self.task, "hparams": hparams, "epochs": self.epochs, "max_steps": self.max_steps,
                     "seed": self.seed, "settings": training, "cpus_per_rank": self.resources.cpus_per_worker,
                     "output_dir": trial_dir, "checkpoint_root": checkpoint_root}


def _redeliver_checkpointed_report() -> None:
    """Report again the epoch of the trial's latest checkpoint, if it has one (a resumed or retried trial).

    The report that came with that checkpoint may never have reached Tune: a sweep interrupted right
    after a rank reported loses what was in flight, while the checkpoint itself is safe in storage. The
    trial resumes after that epoch, so without this its row would be missing from the trial's history.
    Tune may see the epoch twice; the wandb tracker logs it once.
    """
    from ray import tune

    metrics = checkpointed_report(*trial_storage())
    if metrics is not None:
        tune.report(metrics)


def _out_of_memory_cause(error: BaseException) -> TrialOutOfMemory | None:
    """The rank's :class:`TrialOutOfMemory` inside Ray Train's error, if that is what ended the run."""
    seen = set()
    pending = [error]
    while pending:
        current = pending.pop()
        if id(current) in seen or current is None:
            continue
        seen.add(id(current))
        if isinstance(current, TrialOutOfMemory):
            return current
        pending += [current.__cause__, current.__context__, *getattr(current, "worker_failures", {}).values()]
    return None
