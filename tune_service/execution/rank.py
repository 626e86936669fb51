"""One rank of a warm gang: a long-lived Ray actor that joins the gang's process group once and then runs
trial after trial of the shared loop (:func:`tune_service.training.loop.fit`).

Between trials a rank puts back what a trial may have changed in its process
(:class:`~tune_service.execution.process_state.ProcessState`: torch's global flags, the environment,
torch.compile's caches) and frees the trial's memory; its
:meth:`RankWorker.run_trial` returns what is left over (:class:`RankHealth`), from which the gang decides
whether it is still fit for the next trial.

Reports are synchronous, as a Tune function trainable's are. Each epoch, rank 0 hands its report (and
checkpoint) to the trial (:meth:`RankWorker.next_report`) and waits for the trial's word
(:meth:`RankWorker.decide`): go on, or stop (the scheduler stopped or paused the trial). Rank 0 then
broadcasts that word, so every rank leaves the loop at the same report and the process group stays
usable for the next trial.

torch and the shared loop are imported inside the methods, which run in the rank's process: the trial's
actor imports this module too, to create its ranks (``ray.remote`` needs the class), and stays free of
torch (1.3 s of CPU at every new gang, and about 250 MiB, in a process that trains nothing).
"""

from __future__ import annotations

import datetime
import gc
import json
import multiprocessing
import os
import queue
import shutil
import socket
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tune_service.execution.startup import collector_paused
from tune_service.experiment.layout import CHECKPOINT_REPORT_FILE
from tune_service.programs import rendezvous
from tune_service.ray_internals import set_tune_trial_environment
from tune_service.redaction import redacted_errors, redacted_output
from tune_service.training.data_cache import DataCache
from tune_service.training.oom import release_memory
from tune_service.training.trial_config import TrialConfig


#: A rank writes the checkpoints it hands to its trial under a directory of its own, named with its process
#: id: a rank killed with a checkpoint in hand (its gang ended by a failure, a stall or a lost driver)
#: cannot remove it, and the next rank to start on that node removes the directories of dead ranks.
SCRATCH_PREFIX = "tune_service_rank_"


#: The metric a bundle member reports beside its own: how many trials its bundle started with.
BUNDLE_MEMBERS = "bundle_members"


class TrialStopped(Exception):
    """Raised on every rank at a report when the trial's scheduler stopped (or paused) the trial."""


@dataclass(frozen=True)
class RankHealth:
    """What a rank holds after a trial; the gang compares it with what the rank held after its first."""

    rss_mib: float
    cuda_allocated_bytes: int
    child_processes: int


@dataclass(frozen=True)
class RankOutcome:
    """How a trial ended on one rank (``completed`` or ``stopped``) and the rank's health afterwards."""

    status: str
    health: RankHealth
    #: For a fused bundle, how each member left it (a ``MemberEnd`` by member); None for a trial.
    ends: dict[int, Any] | None = None


class GangContext:
    """The shared loop's :class:`~tune_service.training.context.TrainContext` on a warm rank."""

    def __init__(self, worker: "RankWorker", token: str, output_dir: str | None, checkpoint: Any):
        self.token = token
        self.device = worker.device
        self.output_dir = Path(output_dir) if output_dir else None
        self.data_cache = worker.data_cache
        self._worker = worker
        self._checkpoint = checkpoint

    def restored_state(self) -> dict[str, Any] | None:
        from tune_service.training.checkpoint import load_state

        return None if self._checkpoint is None else load_state(self._checkpoint, map_location=self.device)

    def checkpoint_dir(self, name: str) -> Path:
        return Path(tempfile.mkdtemp(prefix=f"{name}_", dir=self._worker.scratch))

    def report(self, metrics: dict[str, Any], checkpoint_dir: Path | None) -> None:
        """Rank 0 hands the report to the trial and waits for its word; every rank then learns it from
        rank 0 (one broadcast). Raises :class:`TrialStopped` on every rank when the trial was stopped."""
        worker = self._worker
        go_on = True
        if worker.rank == 0:
            go_on = worker.hand_over(self.token, metrics, checkpoint_dir)
        if worker.world_size > 1:
            import torch
            import torch.distributed as dist

            word = torch.tensor([1 if go_on else 0], device=self.device)
            dist.broadcast(word, src=0)
            go_on = bool(word.item())
        if not go_on:
            raise TrialStopped()


class RankWorker:
    """One rank of a gang (run as a threaded Ray actor, so that the trial can take rank 0's reports and
    give its word while :meth:`run_trial` runs).

    Args:
        rank, world_size: this rank's place in the gang's DDP world.
        backend: ``gloo`` (CPU) or ``nccl`` (GPU).
        collective_timeout_s: how long a collective waits for the other ranks before it raises.
        secrets: the driver's :class:`~tune_service.redaction.Fingerprints`; a trial's error quoting one
            is scrubbed here, before Ray logs it.
    """

    def __init__(self, rank: int, world_size: int, backend: str, collective_timeout_s: float, secrets: Any = None):
        set_tune_trial_environment()  # before anything of the trial runs, as Tune's runtime env would
        self.rank, self.world_size, self.backend = rank, world_size, backend
        self.timeout = datetime.timedelta(seconds=collective_timeout_s)
        self.secrets = secrets
        with collector_paused():  # see startup: about 0.35 s of this rank's start
            import torch

            # The first optimizer in a process imports torch's compiler (torch.optim's methods are wrapped
            # to keep it out; 1 s of CPU): every trial builds one, so it belongs to the gang's build.
            torch.optim.SGD([torch.zeros(1, requires_grad=True)])
        self.device = torch.device("cuda", 0) if backend == "nccl" else torch.device("cpu")
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)
            torch.zeros(1, device=self.device)  # the CUDA context, up before the first trial
            os.environ.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1")
        self.data_cache = DataCache()
        self.scratch = scratch_directory()
        # Rank 0's exchanges with the trial, each item tagged with its trial's token: the calls of one
        # trial may run in any order (this is a threaded actor), and a stopped trial leaves items behind.
        self.outbox: queue.Queue = queue.Queue()
        self.inbox: queue.Queue = queue.Queue()
        self.trials_run = 0
        self.state: Any = None  # a ProcessState, captured once the process group is up
        self._listener: socket.socket | None = None  # rank 0's, from address() to join()

    def address(self) -> tuple[str, int]:
        """Where the other ranks find rank 0: a port this rank listens on, on this node's address only
        (:mod:`~tune_service.programs.rendezvous`); :meth:`join` serves the process group's store on it."""
        self._listener = rendezvous.listen()
        return rendezvous.address_of(self._listener)

    def join(self, master_address: str, master_port: int) -> int:
        """Join the gang's process group (every rank at once); returns this process's id."""
        import torch.distributed as dist

        from tune_service.execution.process_state import ProcessState

        listener, self._listener = self._listener, None
        if self.world_size > 1:
            import ray

            os.environ.update(rendezvous.gloo_interface(ray.util.get_node_ip_address()))
            if listener is not None:
                store = rendezvous.serve(listener, self.timeout, self.world_size)
            else:
                store = rendezvous.connect(master_address, master_port, self.world_size, self.timeout)
            device_id: dict[str, Any] = {"device_id": self.device} if self.device.type == "cuda" else {}
            dist.init_process_group(
                self.backend,
                store=store,
                rank=self.rank,
                world_size=self.world_size,
                timeout=self.timeout,
                **device_id,
            )
            dist.barrier()  # every connection made now, not in the first trial's first step
        elif listener is not None:
            listener.close()
        self.state = ProcessState()
        _freeze_survivors()
        return os.getpid()

    def run_trial(self, token: str, trial: TrialConfig, checkpoint: Any) -> RankOutcome:
        """Run one trial of the shared loop on this rank (``trial``'s task sealed, opened here), from
        ``checkpoint`` if given (a directory or a ``ray.train.Checkpoint``). ``token`` names the trial in
        its exchanges with rank 0 (:meth:`next_report`, :meth:`decide`).

        Raises whatever the trial raised (:class:`TrialStopped` aside): the gang is then not reused.
        """
        from tune_service.training.loop import fit

        self._before_run()
        status = "completed"
        try:
            with redacted_errors(self.secrets), redacted_output(self.secrets):
                fit(trial.opened(), GangContext(self, token, trial.output_dir, checkpoint))
        except TrialStopped:
            status = "stopped"
        finally:
            self._after_run(token)
        return RankOutcome(status, self.health())

    def run_bundle(self, token: str, configs: list[TrialConfig]) -> RankOutcome:
        """Train ``configs`` as one fused bundle on this rank (a gang of one rank;
        :func:`~tune_service.training.fused.fit_bundle`). Each member's report (with its checkpoint, and
        :data:`BUNDLE_MEMBERS`) is handed over as ``(member, metrics, checkpoint_path)``
        (:meth:`next_report`), and the word on it (:meth:`decide`) says whether that member goes on. The
        outcome's ``ends`` say how each left.

        Raises what the bundle raised (:class:`~tune_service.training.fused.NotFusable` among them).
        """
        from tune_service.training.fused import fit_bundle, setup_bundle

        self._before_run()
        directory = Path(tempfile.mkdtemp(prefix="bundle_", dir=self.scratch))

        def report(member: int, metrics: dict[str, Any], checkpoint: Path | None) -> bool:
            metrics = {**metrics, BUNDLE_MEMBERS: len(configs)}  # the results say which trials were fused
            return self.hand_over(token, metrics, checkpoint, member=member)

        try:
            with redacted_errors(self.secrets), redacted_output(self.secrets):
                run = setup_bundle(configs, self.device)
                ends = fit_bundle(run, report, checkpoints=lambda member: directory / f"member_{member}")
                del run
        finally:
            shutil.rmtree(directory, ignore_errors=True)
            self._after_run(token)
        return RankOutcome("completed", self.health(), ends=ends)

    def _before_run(self) -> None:
        import torch

        self.state.restore()
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)  # per thread: Ray runs each call on a pool thread

    def _after_run(self, token: str) -> None:
        self.outbox.put((token, None))  # rank 0's run has ended: no more reports
        self.state.restore()
        # Once more, now that a stop's traceback (which holds the loop's frames) is gone.
        release_memory(self.device)
        if self.trials_run == 0:
            _freeze_survivors()  # the modules that the first run imported, its data
        self.trials_run += 1

    def hand_over(
        self, token: str, metrics: dict[str, Any], checkpoint_dir: Path | None, member: int | None = None
    ) -> bool:
        """Rank 0: hand a report to the trial (``(metrics, checkpoint path or None)``; a bundle's
        ``member`` first) and wait for its word (go on: True). The checkpoint directory gets the
        ``metrics`` written beside it (the report travels with its checkpoint, see checkpoints.py) and is
        removed once the word came: the trial has copied it by then."""
        if checkpoint_dir is not None:
            (checkpoint_dir / CHECKPOINT_REPORT_FILE).write_text(json.dumps(metrics, default=str))
        report = (metrics, None if checkpoint_dir is None else str(checkpoint_dir))
        self.outbox.put((token, report if member is None else (member, *report)))
        try:
            return _take(self.inbox, token)
        finally:
            if checkpoint_dir is not None:
                shutil.rmtree(checkpoint_dir, ignore_errors=True)

    def checkpoint_files(self, checkpoint_path: str) -> dict[str, bytes]:
        """Rank 0: the files of a checkpoint it handed over and waits on, by name, for a trial on another
        node (a bundle member's trial actor is not placed beside its bundle's rank)."""
        return {f.name: f.read_bytes() for f in Path(checkpoint_path).iterdir() if f.is_file()}

    def next_report(self, token: str) -> tuple | None:
        """Rank 0: the trial's next report and the local path of its checkpoint (or None), once rank 0
        reports (a bundle's: the member first); None once the run has ended on rank 0."""
        return _take(self.outbox, token)

    def decide(self, token: str, go_on: bool) -> None:
        """Rank 0: the trial's word on its last report: go on, or stop."""
        self.inbox.put((token, go_on))

    def health(self) -> RankHealth:
        """This rank's health now; taken after the trial's memory was released (``release_memory``)."""
        import torch

        return RankHealth(
            rss_mib=_resident_mib(),
            cuda_allocated_bytes=torch.cuda.memory_allocated(self.device) if self.device.type == "cuda" else 0,
            child_processes=len(multiprocessing.active_children()),
        )


def scratch_directory() -> Path:
    """A new directory for this rank process's checkpoints, in the node's temporary directory, after
    removing those of rank processes that are no longer alive there."""
    for stale in Path(tempfile.gettempdir()).glob(f"{SCRATCH_PREFIX}*"):
        pid = stale.name[len(SCRATCH_PREFIX) :].split("_")[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(stale, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}_"))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # no signal sent: only whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


def _freeze_survivors() -> None:
    """Put what exists now out of the garbage collector's sight for good (``gc.freeze``).

    Done once the process group is up and again after the gang's first trial: what lives then (torch and
    the modules trials import, the process group, the first data set) lives as long as the gang. The
    collection that ends each trial then looks at that trial's objects only: a full collection over
    torch's objects took ~80 ms, and with two ranks on two cores the collections at each trial's end
    were most of the time between trials (0.7 s of Tune's 0.75 s per trial in a sweep of short trials).
    Frozen objects are still freed by reference counting; only a frozen cycle that becomes garbage stays
    (the gang's memory bound rebuilds a gang that grows).
    """
    gc.freeze()


def _take(box: queue.Queue, token: str) -> Any:
    """The next item of the trial ``token`` from ``box``; items of earlier trials are dropped."""
    while True:
        item_token, item = box.get()
        if item_token == token:
            return item


def _resident_mib() -> float:
    """This process's resident memory in MiB (Linux's /proc; elsewhere the peak, from getrusage)."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak / 2**20 if sys.platform == "darwin" else peak / 2**10
