"""A gang: the N rank actors of one trial's DDP world, kept up across the trials of one concurrency slot.

A trial's Tune actor holds a placement group of N bundles (one per rank, the trial's per-rank CPUs and
GPUs; the actor itself sits in bundle 0 with no resources of its own, see
:func:`~tune_service.execution.warm_trial.trial_resources`). With Tune's ``reuse_actors`` that actor,
its placement group and so its gang outlive the trial: the next trial of the slot leases the same gang
(:func:`lease_gang`) and starts on ranks that have torch imported, their process group up and their
data built. What Tune and ``ray status`` show as used is what the gangs hold.

A gang is given up, and a new one built for the next trial, when a rank dies, raises or times out in a
collective (its peers may be stuck mid-collective, so the whole gang goes), after
``recycle_after_trials`` trials, or when a rank's memory has grown past ``max_memory_growth_mib``, holds
CUDA memory after its trial, or keeps child processes its trial started.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

from tune_service.execution.rank import RankHealth, RankOutcome, RankWorker
from tune_service.execution.resources import place_ranks
from tune_service.execution.sweep_trial import STOP_GRACE_S, StallWatch
from tune_service.spec import ExecutionSpec, ResourceSpec
from tune_service.training.trial_config import TrialConfig

logger = logging.getLogger(__name__)

#: Calls a rank serves at once: the trial's run, rank 0's next report, and the trial's word on it.
_RANK_CONCURRENCY = 4


@dataclass(frozen=True)
class GangSettings:
    """What a gang is made of (the spec's ``resources``) and when it is rebuilt (its ``execution``)."""

    resources: ResourceSpec
    execution: ExecutionSpec = field(default_factory=ExecutionSpec)
    #: ``limits.progress_s``: the longest a trial may go without a report (None: no limit).
    progress_s: float | None = None
    #: Whether the ranks hold their CPUs in Ray. A bundle's gang does not: the bundle's members (Tune
    #: trials) hold them, a share each (:mod:`~tune_service.execution.bundles`). A rank always holds its
    #: GPUs: Ray then shows it its own (``CUDA_VISIBLE_DEVICES``), where a rank holding none would see
    #: every GPU of its node and train on the first.
    holds_cpus: bool = True

    @property
    def held(self) -> ResourceSpec:
        """What each rank holds in Ray: the spec's CPUs and GPUs per rank, less the CPUs when the ranks
        do not hold them (:attr:`holds_cpus`)."""
        return self.resources if self.holds_cpus else dataclasses.replace(self.resources, cpus_per_worker=0)

    @property
    def collective_timeout_s(self) -> float:
        """How long a rank waits in a collective: the progress limit, when it is the shorter."""
        return min(self.execution.collective_timeout_s, self.progress_s or math.inf)

    @property
    def backend(self) -> str:
        return "nccl" if self.resources.gpus_per_worker > 0 else "gloo"

    @property
    def bundles(self) -> list[dict[str, float]]:
        """One placement-group bundle per rank."""
        r = self.resources
        gpu = {"GPU": r.gpus_per_worker} if r.gpus_per_worker > 0 else {}
        return [{"CPU": r.cpus_per_worker, **gpu} for _ in range(r.workers)]


class GangBroken(RuntimeError):
    """A rank of the gang died, or did not leave a stopped trial in time; the gang has been given up."""


class Gang:
    """N rank actors joined in one process group. Build with :meth:`build`; run trials with :meth:`run`."""

    def __init__(self, settings: GangSettings, ranks: list[Any], placement_group_id: Any, build_s: float):
        self.settings = settings
        self.ranks = ranks
        self.placement_group_id = placement_group_id
        #: Seconds from asking for the ranks to their process group being up.
        self.build_s = build_s
        self.trials_run = 0
        #: Why the gang must not run another trial (None while it may).
        self.retired: str | None = None
        self._first_health: list[RankHealth] | None = None

    @classmethod
    def build(
        cls,
        settings: GangSettings,
        placement_group: Any = None,
        secrets: Any = None,
        worker: type[RankWorker] = RankWorker,
    ) -> "Gang":
        """Start the ranks (rank i in bundle i of ``placement_group``, else anywhere the cluster has room)
        and join them in one process group. ``worker``: the rank's class (tests look inside a subclass)."""
        import ray

        started = time.monotonic()
        r = settings.resources
        ranks = place_ranks(
            worker,
            settings.held,
            placement_group,
            lambda rank: (rank, r.workers, settings.backend, settings.collective_timeout_s, secrets),
            max_concurrency=_RANK_CONCURRENCY,
        )
        gang = cls(settings, ranks, None if placement_group is None else placement_group.id, 0.0)
        try:
            master_address, master_port = ray.get(ranks[0].address.remote())
            ray.get([r.join.remote(master_address, master_port) for r in ranks])
        except BaseException:
            gang.shutdown("its ranks could not join")
            raise
        gang.build_s = time.monotonic() - started
        logger.info("gang of %d ranks up in %.1f s", r.workers, gang.build_s)
        return gang

    def run(
        self, trial: TrialConfig, checkpoint: Any, relay: Callable[[dict[str, Any], str | None], None]
    ) -> list[RankOutcome]:
        """Run one trial on every rank (``trial``'s task sealed, from ``checkpoint`` if given: a directory or a
        ``ray.train.Checkpoint``); each report of rank 0 goes to ``relay(metrics, checkpoint_path)``
        (``checkpoint_path`` on rank 0's node, which is the caller's), and the ranks go on once it returns.

        If ``relay`` raises (a Tune stop arrives as ``SystemExit`` from ``tune.report``), the ranks are
        told to stop at that report and the exception propagates once they have left the loop.

        Raises:
            GangBroken: a rank died, or a stopped trial's ranks did not leave the loop in time.
            TrialStalled: no report came for ``settings.progress_s`` seconds (:class:`StallWatch`).
            Exception: what a rank raised (a Ray error that is also an instance of the rank's own).
            Either way the gang is retired.
        """

        def go_on(metrics: dict[str, Any], checkpoint_path: str | None) -> bool:
            relay(metrics, checkpoint_path)
            return True

        handed = checkpoint_for_ranks(checkpoint)
        return self._drive(lambda rank, token: rank.run_trial.remote(token, trial, handed), go_on)

    def run_bundle(
        self, configs: list[TrialConfig], relay: Callable[[int, dict[str, Any], str | None], bool]
    ) -> RankOutcome:
        """Train ``configs`` as one fused bundle on this gang's one rank
        (:meth:`~tune_service.execution.rank.RankWorker.run_bundle`). Each member's report goes to
        ``relay(member, metrics, checkpoint_path)``, which says whether that member goes on; a member told
        to stop leaves the bundle and the others go on. Raises as :meth:`run` does; the outcome's ``ends``
        say how each member left."""
        (outcome,) = self._drive(lambda rank, token: rank.run_bundle.remote(token, configs), relay)
        return outcome

    def _drive(self, start: Callable[[Any, str], Any], relay: Callable[..., bool]) -> list[RankOutcome]:
        """Start a run on every rank (``start(rank, token)``: the rank's call) and relay rank 0's reports
        until the run ends: ``relay(*report)`` says whether the trial (or bundle member) goes on. A relay
        that raises stops the run at that report; the error propagates once the ranks have left the loop."""
        import ray

        rank0 = self.ranks[0]
        token = uuid.uuid4().hex
        runs = [start(rank, token) for rank in self.ranks]
        pending_report = rank0.next_report.remote(token)
        running = list(runs)
        watch = StallWatch(self.settings.progress_s)
        try:
            while pending_report is not None or running:
                waited = ray.wait(
                    [*([pending_report] if pending_report is not None else []), *running],
                    num_returns=1,
                    timeout=watch.remaining_s(),
                )[0]
                if not waited:  # a stuck rank cannot be asked to stop: the gang is ended at once
                    self.shutdown(f"no report for {self.settings.progress_s:g} s")
                    raise watch.error("no report from the trial", ": a rank is stuck, stopped or far slower")
                ready = waited[0]
                if ready is pending_report:
                    item = ray.get(pending_report)
                    if item is None:  # rank 0's run has ended
                        pending_report = None
                        continue
                    go_on = relay(*item)
                    watch.progressed()  # from when the ranks go on: a slow copy of a checkpoint is not a stall
                    rank0.decide.remote(token, go_on)
                    pending_report = rank0.next_report.remote(token)
                else:
                    running.remove(ready)
                    self._raise_if_failed(ready, runs)
        except BaseException as stop:
            if self.retired is None:
                self._stop(token, runs, reason=stop)
            raise
        outcomes = ray.get(runs)
        self._judge(outcomes)
        return outcomes

    def _raise_if_failed(self, finished: Any, runs: list[Any]) -> None:
        """Raise the error of a finished run, if any: the first rank to fail, preferring a rank that died
        (its peers then fail in their collectives, a consequence, not the cause)."""
        import ray
        from ray.exceptions import RayActorError, RayTaskError

        try:
            ray.get(finished)
            return
        except (RayActorError, RayTaskError):
            pass
        ray.wait(runs, num_returns=len(runs), timeout=1.0)  # the others' errors, if they come at once
        # (precedence, rank, the error to raise, Ray's error: its cause)
        errors: list[tuple[int, int, BaseException, Exception]] = []
        for index, ref in enumerate(runs):
            try:
                ray.get(ref, timeout=0)
            except RayActorError as error:
                died = GangBroken(
                    f"rank {index} of the trial's DDP gang died (its process ended: killed, out of "
                    f"memory, or its node lost)"
                )
                errors.append((0, index, died, error))
            except RayTaskError as error:
                # The rank's own exception, as it raised it (its type and one-line message), with Ray's
                # error, which holds the rank's traceback, as its cause.
                own = error.cause if isinstance(error.cause, BaseException) else error.as_instanceof_cause()
                errors.append((1 if ref == finished else 2, index, own, error))
            except Exception:  # noqa: BLE001 - still running (a timeout): not an error of its own
                continue
        self.shutdown("a rank failed")
        _, _, raised, cause = min(errors, key=lambda e: (e[0], e[1]))
        raise raised from cause

    def _stop(self, token: str, runs: list[Any], reason: BaseException) -> None:
        """Tell the ranks to stop at the report they wait at, and wait for them to leave the loop."""
        import ray

        self.ranks[0].decide.remote(token, False)
        done, pending = ray.wait(runs, num_returns=len(runs), timeout=STOP_GRACE_S)
        failed = False
        for ref in done:
            try:
                ray.get(ref)
            except Exception:  # noqa: BLE001 - the trial is ending anyway; the gang is not reused
                failed = True
        if pending or failed:
            self.shutdown(f"its ranks did not leave the stopped trial cleanly ({type(reason).__name__})")
        else:
            self._judge(ray.get(runs))

    def _judge(self, outcomes: list[RankOutcome]) -> None:
        """Count the trial, and retire the gang if it is worn out."""
        self.trials_run += 1
        health = [o.health for o in outcomes]
        if self._first_health is None:
            self._first_health = health
        reason = worn_out(self.settings, self.trials_run, self._first_health, health)
        if reason is not None:
            self.shutdown(reason)

    def shutdown(self, reason: str) -> None:
        """End the gang's ranks (their placement-group bundles stay the trial actor's)."""
        import ray

        if self.retired is None:
            logger.info("gang of %d ranks given up: %s", len(self.ranks), reason)
        self.retired = reason
        for rank in self.ranks:
            ray.kill(rank)


def checkpoint_for_ranks(checkpoint: Any) -> Any:
    """``checkpoint`` as the ranks are handed it: the path of one on the local filesystem (as a
    ``ray.train.Checkpoint`` loads it), so that a rank never imports Ray Train to unpickle it (0.7 s of a
    core, 2-3 s of a restart on a node busy with other trials' ranks); a ``ray.train.Checkpoint`` on other
    storage as it is (it fetches its files)."""
    from pyarrow import fs

    if isinstance(getattr(checkpoint, "filesystem", None), fs.LocalFileSystem):
        return checkpoint.path
    return checkpoint


def worn_out(settings: GangSettings, trials_run: int, first: list[RankHealth], now: list[RankHealth]) -> str | None:
    """Why a gang should be rebuilt before its next trial, or None. ``first``: each rank's health after
    the gang's first trial; ``now``: after the last one."""
    if trials_run >= settings.execution.recycle_after_trials:
        return f"it ran {trials_run} trials (execution.recycle_after_trials)"
    for rank, (before, after) in enumerate(zip(first, now, strict=True)):
        if after.cuda_allocated_bytes > 0:
            return f"rank {rank} still holds {after.cuda_allocated_bytes} bytes of CUDA memory after its trial"
        growth = after.rss_mib - before.rss_mib
        if growth > settings.execution.max_memory_growth_mib:
            return (
                f"rank {rank}'s memory grew by {growth:.0f} MiB since its first trial "
                f"(execution.max_memory_growth_mib: {settings.execution.max_memory_growth_mib:g})"
            )
        if after.child_processes > before.child_processes:
            return f"rank {rank} kept {after.child_processes - before.child_processes} child process(es) of its trial"
    return None


#: The gang of this process's concurrency slot (this process is a Tune trial actor, reused across trials).
_slot_gang: Gang | None = None


def lease_gang(settings: GangSettings, secrets: Any = None) -> Gang:
    """The gang of the calling trial actor's slot: the one its last trial ran on, if that is still fit and
    in this actor's placement group, else a new one (the old one's ranks ended first)."""
    import ray

    global _slot_gang
    placement_group = ray.util.get_current_placement_group()
    group_id = None if placement_group is None else placement_group.id
    gang = _slot_gang
    if gang is not None and (gang.retired or gang.settings != settings or gang.placement_group_id != group_id):
        if not gang.retired:
            gang.shutdown("the trial's resources changed")
        gang = None
    if gang is None:
        gang = Gang.build(settings, placement_group, secrets)
    _slot_gang = gang
    return gang
