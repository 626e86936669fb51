"""The lifecycle every trial of a sweep runs through, however it trains: :class:`SweepTrial`.

Tune calls a trial's function with the searcher's config; :meth:`SweepTrial.__call__` is that function,
written once for every kind of trial:

1. **Where it starts** (:meth:`SweepTrial.start_point`). A checkpoint that Tune hands over
   (``tune.get_checkpoint()``) and that is not the trial's own (a population's exploit: another trial's
   weights) is where it starts. Otherwise it starts from the newest complete checkpoint in its own
   directory of the experiment's storage (a retried, resumed or unpaused trial): that is at least as new
   as any checkpoint of its own that Tune recorded, since the driver may have died before recording it.
   A trial whose scheduler decides where it goes on from (PBT and its replay: :attr:`SweepTrial.follows_handed`)
   starts from the checkpoint Tune hands it, its own included: a population goes on from a perturbation's
   checkpoint, not from one its ranks wrote after it (see :mod:`tune_service.search.population_journal`).
   The report that came with its own checkpoint is reported again first: a driver that died just after
   the report may never have recorded it (Tune may see it twice; the wandb tracker logs it once).
2. **One attempt** (:meth:`SweepTrial.attempt`): what differs between a trial on a warm gang, a fresh
   Ray Train run and a W&B program. Its reports reach Tune through :class:`TrialReports`, its stalls are
   judged by :class:`StallWatch`, and a stopped trial's ranks get :data:`STOP_GRACE_S` to leave.
3. **The retry policy.** An out-of-memory error, with ``training.oom_retry``, runs the trial again
   from its newest checkpoint at twice the gradient accumulation (the same effective batch, half the
   micro-batch), until the micro-batch is one sample. Any other failure is the trial's (Tune's
   ``failure.max_failures`` decides what happens next).
"""

from __future__ import annotations

import logging
import os
import posixpath
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tune_service.experiment.checkpoints import (
    newest_checkpoint,
    number_after_existing_checkpoints,
    read_checkpoint,
    trial_storage,
)
from tune_service.experiment.saving import FailingSaves
from tune_service.spec.configs import plain
from tune_service.spec.training import TrainingSettings
from tune_service.tasks import ResolvedTask, SealedTask
from tune_service.training.guards import check_metric_reported
from tune_service.training.oom import TrialOutOfMemory
from tune_service.training.trial_config import TrialConfig

if TYPE_CHECKING:
    from ray.train import Checkpoint

logger = logging.getLogger(__name__)

#: How long a stopped trial's ranks (a gang's, or a program's processes) get to end before they are killed.
STOP_GRACE_S = 10.0
#: How long Tune's reuse of a trial actor waits for the last trial's function to end (Ray's default is
#: 2 s). The function ends once its ranks have left the loop, or its programs have ended, which is quick,
#: but not on a loaded node, and a stopped program may take ``STOP_GRACE_S``.
THREAD_TIMEOUT_ENV = "TUNE_FUNCTION_THREAD_TIMEOUT_S"
THREAD_TIMEOUT_S = "30"


class TrialStalled(RuntimeError):
    """The trial went longer than ``limits.progress_s`` without progress; it was ended."""


class StallWatch:
    """``limits.progress_s``: the longest a trial may go without progress (None: no limit)."""

    def __init__(self, limit_s: float | None):
        self.limit_s = limit_s
        self._last = time.monotonic()

    def progressed(self) -> None:
        """The trial made progress (a report, a logged line) now."""
        self._last = time.monotonic()

    def remaining_s(self) -> float | None:
        """Seconds left before the trial counts as stalled (None: never)."""
        if self.limit_s is None:
            return None
        return max(0.0, self.limit_s - (time.monotonic() - self._last))

    def stalled(self) -> bool:
        return self.remaining_s() == 0.0

    def error(self, what: str, detail: str = "") -> TrialStalled:
        """The error to raise: ``what`` happened for the limit's seconds, then ``detail``."""
        return TrialStalled(f"{what} for {self.limit_s:g} s (limits.progress_s){detail}")


class TrialReports:
    """The trial's reports to Tune, made in one place. The first must hold the sweep's ``metric`` (none is
    checked when it is None); a report with a checkpoint directory hands that directory to Tune, which
    copies it into storage before it takes the report. When that copy fails (a full disk), the report is
    made without it, and the trial's newest complete checkpoint stays the one to resume from."""

    def __init__(self, metric: str | None, trial_name: str):
        self.metric = metric
        self.count = 0
        self._saves = FailingSaves(f"a checkpoint of trial {trial_name}")

    def __call__(self, metrics: dict[str, Any], checkpoint_path: str | None = None) -> None:
        """Report ``metrics`` (with the checkpoint in ``checkpoint_path``, if given). A stop from the
        scheduler arrives here: Tune raises it from ``tune.report``."""
        from ray import tune

        self.count += 1
        if self.count == 1 and self.metric is not None:
            check_metric_reported(self.metric, metrics)
        if checkpoint_path is None:
            tune.report(metrics)
            return
        path = checkpoint_path
        if not self._saves.attempt(lambda: tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(path))):
            tune.report(metrics)


@dataclass(frozen=True)
class StartPoint:
    """Where one attempt of a trial starts from."""

    #: The checkpoint to load (a ``ray.train.Checkpoint``); None when the kind of trial finds its own
    #: (a Ray Train run resumes from its storage) or has no state to load (a program's last report).
    checkpoint: Checkpoint | None
    #: The report that came with it, when it is the trial's own (reported again first); None for a
    #: checkpoint handed over from another trial.
    report: dict[str, Any] | None


@dataclass(frozen=True)
class Attempt:
    """One attempt of a trial: what its ranks are handed, where it starts, where its reports go."""

    config: TrialConfig
    start: StartPoint | None
    reports: TrialReports
    #: The trial's staging directory on this node (``tune.get_context().get_trial_dir()``).
    trial_dir: str


@dataclass(frozen=True, kw_only=True)
class SweepTrial:
    """The trial function's fixed part and its lifecycle; a kind of trial fills in :meth:`attempt` (and,
    where its checkpoints live elsewhere, :meth:`own_start`)."""

    #: The task; a warm trial's travels sealed, opened only on its ranks (see :class:`SealedTask`).
    task: ResolvedTask | SealedTask
    #: A trial's budget: whole epochs, or (when the scheduler counts steps) optimizer steps; one is None.
    epochs: int | None
    seed: int
    max_steps: int | None = None
    training: TrainingSettings = field(default_factory=TrainingSettings)
    #: The metric the sweep optimises: a trial whose first report lacks it fails at once (None: a W&B
    #: program's sweep without one).
    metric: str | None = "val_loss"
    #: The driver's secrets, as :class:`~tune_service.redaction.Fingerprints`: a rank's error that
    #: quotes one is scrubbed in the rank, before Ray logs it and hands it on.
    secrets: Any = None
    #: CPUs each rank is given (its loaders are sized from them).
    cpus_per_rank: float = 1
    #: GPUs each rank is given (below 1: a packed trial, held to that share of the GPU's memory).
    gpus_per_rank: float = 0
    #: A trial whose scheduler decides where it goes on from (PBT, its replay): it starts from the checkpoint
    #: Tune hands it, its own included, rather than from its own newest.
    follows_handed: bool = False

    def __call__(self, config: dict[str, Any]) -> None:
        """Run one trial: start point, attempts, retry policy (see the module's docstring)."""
        from ray import tune

        os.environ.setdefault(THREAD_TIMEOUT_ENV, THREAD_TIMEOUT_S)
        # Ray logs every persisted checkpoint at INFO; the trial's progress is Tune's table to show.
        logging.getLogger("ray.train._internal.storage").setLevel(logging.WARNING)
        trial_dir = tune.get_context().get_trial_dir()
        name = os.path.basename(trial_dir)
        hparams = {**self.task.defaults, **plain(config)}
        start = self.start_point()
        number_after_existing_checkpoints()
        if start is not None and start.report is not None:
            tune.report(start.report)
            if self.ended(start.report):
                return
        training = self.training
        reports = TrialReports(self.metric, name)  # one per trial: its first report is checked, a full disk said once
        while True:
            try:
                self.attempt(Attempt(self.trial_config(hparams, training, trial_dir), start, reports, trial_dir))
                return
            except Exception as error:
                out_of_memory = out_of_memory_cause(error)
                if out_of_memory is None:
                    raise
            if not training.oom_retry or out_of_memory.micro_batch <= 1:
                raise out_of_memory  # the clear one-line error, not a wrapper of Ray's
            training = training.with_accumulation(out_of_memory.grad_accum_steps * 2)
            logger.warning(
                "trial %s: %s; retrying with grad_accum_steps %d", name, out_of_memory, training.grad_accum_steps
            )
            start = self.start_point()

    def start_point(self) -> StartPoint | None:
        """Where the trial starts: a checkpoint Tune hands over from another trial (or, for a trial that
        :attr:`follows_handed`, any complete one Tune hands over), else the trial's own newest
        (:meth:`own_start`), else None (from scratch)."""
        from ray import tune

        storage_path, filesystem = trial_storage()
        handed = tune.get_checkpoint()
        if handed is not None and not _within(handed.path, storage_path):
            return StartPoint(handed, None)
        if handed is not None and self.follows_handed:
            own = read_checkpoint(handed.path, filesystem)
            if own is not None:
                return StartPoint(own.as_ray_checkpoint(), own.report)
        return self.own_start(storage_path, filesystem)

    def own_start(self, storage_path: str, filesystem: Any) -> StartPoint | None:
        """The trial's newest complete checkpoint in its directory of storage, with its report."""
        stored = newest_checkpoint(storage_path, filesystem)
        return None if stored is None else StartPoint(stored.as_ray_checkpoint(), stored.report)

    def ended(self, report: dict[str, Any]) -> bool:
        """Whether the report of the trial's own checkpoint says the trial had ended (nothing to run)."""
        return False

    def trial_config(self, hparams: dict[str, Any], training: TrainingSettings, trial_dir: str) -> TrialConfig:
        """What the trial's ranks are handed for one attempt."""
        return TrialConfig(
            self.task,
            hparams,
            epochs=self.epochs,
            max_steps=self.max_steps,
            seed=self.seed,
            settings=training,
            cpus_per_rank=self.cpus_per_rank,
            gpus_per_rank=self.gpus_per_rank,
            output_dir=trial_dir,
        )

    def attempt(self, attempt: Attempt) -> None:
        """Run the trial once, from ``attempt.start``, reporting through ``attempt.reports``; return when it
        has ended, raise when it failed (a :class:`TrialOutOfMemory` anywhere in the error's causes is
        retried under the policy)."""
        raise NotImplementedError


def out_of_memory_cause(error: BaseException) -> TrialOutOfMemory | None:
    """The rank's :class:`TrialOutOfMemory` inside ``error`` (itself, a cause, or a Ray Train worker's
    failure), if that is what ended the attempt."""
    seen = set()
    pending: list[BaseException | None] = [error]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, TrialOutOfMemory):
            return current
        pending += [current.__cause__, current.__context__, *getattr(current, "worker_failures", {}).values()]
    return None


def _within(path: str, directory: str) -> bool:
    """Whether ``path`` is inside ``directory`` (paths on one storage filesystem)."""
    return posixpath.normpath(path).startswith(posixpath.normpath(directory) + "/")
