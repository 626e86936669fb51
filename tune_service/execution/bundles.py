"""``execution: {bundle: K}``: trials of one architecture trained K at a time as one fused job, each still a
trial of its own to Tune, the searcher, the scheduler, wandb and the results.

Every member is a Tune trial (:class:`BundleMember`) that holds 1/K of a rank's CPUs: it hands its config
to the sweep's :class:`BundleBroker` (one Ray actor per sweep, started by the driver) and relays the
reports the broker hands back, as a warm trial relays its gang's. The broker keeps up to one warm gang of
one rank per concurrency slot (the rank holds its GPUs; the members its CPUs), and Tune runs K members
per slot. It groups waiting members
whose configs may share a bundle (:func:`~tune_service.training.fused.bundle_key`: they differ only in
the optimizer's hyperparameters), and trains each group on a free gang with
:func:`~tune_service.training.fused.fit_bundle`:

- A group starts once K members wait, or with fewer once no member has joined it for :data:`GATHER_S`
  (at most :data:`MOST_GATHER_S` after its first): fewer members rather than an idle slot. Members join
  a bundle when it starts; a bundle never takes new members. As members stop, Tune starts new trials,
  and they form the next bundle on the next free gang.
- Each member's report (and checkpoint, in the shared loop's format) reaches its own trial, and that
  trial's word (go on, or stopped by the scheduler) reaches the bundle before it trains on. Members
  report in the order Tune created their trials (:func:`member_name` carries it to the broker), so a
  scheduler that decides by order of arrival (ASHA) decides the same for the same bundle, whatever order
  the members' actors started in. A stopped member leaves the bundle; the others go on. A member whose
  losses are not finite leaves it too, and its trial fails with the reason.
- A member that starts from a checkpoint (retried, or resumed after the driver died) trains alone on a
  gang, with the shared loop, from that checkpoint, exactly as a warm trial resumes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import queue
import shutil
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

from tune_service.errors import Problem, SpecError
from tune_service.execution.gang import Gang, GangSettings
from tune_service.execution.rank import BUNDLE_MEMBERS
from tune_service.execution.sweep_trial import Attempt, SweepTrial
from tune_service.spec import ResourceSpec, SweepSpec
from tune_service.training.trial_config import TrialConfig

if TYPE_CHECKING:  # a member's actor imports this module: torch (the tasks' base) stays out of it
    from tune_service.tasks import Task

logger = logging.getLogger(__name__)

#: A group of fewer than K members starts once no member has joined it for this long (members arrive as
#: Tune starts their trials, one after another), or once its first has waited :data:`MOST_GATHER_S`.
GATHER_S = 1.0
MOST_GATHER_S = 10.0
#: How long a bundle waits for a member's word on its report; a member whose trial is gone (ended by the
#: sweep's end or a failure) is taken as stopped after it.
DECISION_TIMEOUT_S = 120.0


class MemberStopped(Exception):
    """A member trained alone was stopped by its scheduler (raised out of the gang's relay)."""


@dataclass
class _Member:
    """A member trial waiting for, or training in, a bundle: what the broker and the trial exchange."""

    trial_id: str
    config: TrialConfig
    checkpoint: Any
    key: str
    #: The trial's number in the sweep (:func:`member_number`): the order members report in.
    number: int = 0
    joined: float = field(default_factory=time.monotonic)
    #: To the trial: ``("report", metrics, files)``, ``("end",)`` or ``("failed", error)``.
    mailbox: queue.Queue = field(default_factory=queue.Queue)
    #: From the trial: its word on each report.
    words: queue.Queue = field(default_factory=queue.Queue)


def bundle_group(config: TrialConfig) -> str:
    """What members of one bundle share: the bundle key of their hyperparameters, their training settings
    and budget (a member retried out of memory trains with another accumulation, so in another bundle)."""
    from tune_service.training.fused import bundle_key

    return f"{bundle_key(config.hparams)}|{config.settings!r}|{config.epochs}|{config.seed}"


def member_name(trial: Any) -> str:
    """A bundle member's Tune trial name (``trial_name_creator``), which its actor can read: its number
    in the sweep, which Tune keeps in the driver only (the experiment tag), and its id."""
    from tune_service.experiment.layout import trial_number

    return f"member_{trial_number(trial) or 0:05d}_{trial.trial_id}"


def member_number(name: str) -> int:
    """The trial's number in a name :func:`member_name` made (0 for another name)."""
    parts = name.split("_")
    return int(parts[1]) if len(parts) == 3 and parts[0] == "member" and parts[1].isdigit() else 0


class BundleBroker:
    """The sweep's bundles: members join (:meth:`join`), take what their bundle hands them (:meth:`next`)
    and give their word on each report (:meth:`decide`). Run as a threaded Ray actor holding no resources;
    its gangs are of one rank each, holding the rank's GPUs (the members hold its CPUs).

    Args:
        gang: what each gang is made of (one rank).
        size: the most members in one bundle (``execution.bundle``).
        slots: the most gangs at once (the sweep's concurrency in slots).
        secrets: the driver's fingerprints, for the ranks (see :class:`~tune_service.execution.gang.Gang`).
    """

    def __init__(self, gang: GangSettings, size: int, slots: int, secrets: Any = None, gather_s: float = GATHER_S):
        self.gang_settings, self.size, self.slots, self.secrets, self.gather_s = gang, size, slots, secrets, gather_s
        self._changed = threading.Condition()
        self._waiting: list[_Member] = []
        self._members: dict[str, _Member] = {}
        self._free: list[Gang] = []
        self._busy = 0
        threading.Thread(target=self._schedule, name="bundles", daemon=True).start()

    def join(self, trial_id: str, config: TrialConfig, checkpoint: Any = None, number: int = 0) -> None:
        """The trial ``trial_id`` (the sweep's ``number``-th) waits for a bundle (alone, from ``checkpoint``,
        when one is given)."""
        key = "" if checkpoint is not None else bundle_group(config)
        member = _Member(trial_id, config, checkpoint, key, number)
        with self._changed:
            self._members[trial_id] = member
            self._waiting.append(member)
            self._changed.notify_all()

    def next(self, trial_id: str) -> tuple:
        """What the trial's bundle hands it next (see :class:`_Member`'s ``mailbox``); blocks until then."""
        return self._members[trial_id].mailbox.get()

    def decide(self, trial_id: str, go_on: bool) -> None:
        """The trial's word on the report it was handed last."""
        self._members[trial_id].words.put(go_on)

    def waiting(self) -> int:
        """Members waiting for a bundle now."""
        with self._changed:
            return len(self._waiting)

    def _schedule(self) -> None:
        """Start each group on a free gang as soon as it is ready (see the module's docstring)."""
        while True:
            with self._changed:
                group = self._ready_group() if self._free or self._busy < self.slots else None
                if group is None:
                    self._changed.wait(timeout=0.1)
                    continue
                for member in group:
                    self._waiting.remove(member)
                gang = self._free.pop() if self._free else None
                self._busy += 1
            threading.Thread(target=self._run, args=(gang, group), daemon=True).start()

    def _ready_group(self) -> list[_Member] | None:
        """The members to train next: a member from a checkpoint alone; else the ``size`` oldest members of
        one group, or fewer once none has joined it for ``gather_s`` (see :data:`GATHER_S`), in the order
        of their trials' numbers."""
        groups: dict[str, list[_Member]] = {}
        for member in self._waiting:
            if not member.key:
                return [member]
            groups.setdefault(member.key, []).append(member)
        now = time.monotonic()
        for members in groups.values():
            quiet = now - members[-1].joined >= self.gather_s
            if len(members) >= self.size or quiet or now - members[0].joined >= MOST_GATHER_S:
                return sorted(members[: self.size], key=lambda member: member.number)
        return None

    def _run(self, gang: Gang | None, group: list[_Member]) -> None:
        """Train ``group`` on ``gang`` (a new one when None or retired), and tell each member how it ended."""
        told: set[str] = set()
        ends: dict[int, BaseException | None]
        try:
            if gang is None or gang.retired:
                gang = Gang.build(self.gang_settings, None, self.secrets)
            if group[0].checkpoint is not None:
                self._run_alone(gang, group[0])
                ends = {0: None}
            else:
                outcome = gang.run_bundle(
                    [m.config for m in group], lambda i, metrics, path: self._relay(gang, group[i], metrics, path)
                )
                ends = {i: end.error if end.reason == "diverged" else None for i, end in (outcome.ends or {}).items()}
            for index, error in ends.items():
                member = group[index]
                member.mailbox.put(("end",) if error is None else ("failed", error))
                told.add(member.trial_id)
        except BaseException as error:  # noqa: BLE001 - every member still in the bundle fails with it
            logger.warning("a bundle of %d member(s) failed: %s", len(group), error)
            for member in group:
                if member.trial_id not in told:
                    member.mailbox.put(("failed", error))
        finally:
            with self._changed:
                self._busy -= 1
                if gang is not None and not gang.retired:
                    self._free.append(gang)
                self._changed.notify_all()

    def _run_alone(self, gang: Gang, member: _Member) -> None:
        def relay(metrics: dict[str, Any], path: str | None) -> None:
            if not self._relay(gang, member, {**metrics, BUNDLE_MEMBERS: 1}, path):
                raise MemberStopped()

        try:
            gang.run(member.config, member.checkpoint, relay)
        except MemberStopped:
            pass

    def _relay(self, gang: Gang, member: _Member, metrics: dict[str, Any], path: str | None) -> bool:
        """Hand a member its report (with its checkpoint's files) and return its word."""
        import ray

        files = None if path is None else ray.get(gang.ranks[0].checkpoint_files.remote(path))
        member.mailbox.put(("report", metrics, files))
        try:
            return member.words.get(timeout=DECISION_TIMEOUT_S)
        except queue.Empty:
            logger.warning(
                "trial %s gave no word on its report in %g s: taken as stopped", member.trial_id, DECISION_TIMEOUT_S
            )
            return False


@dataclass(frozen=True, kw_only=True)
class BundleMember(SweepTrial):
    """A trial trained in a bundle: it joins the sweep's broker (the named Ray actor ``broker``) and relays
    what its bundle hands it."""

    broker: str

    def attempt(self, attempt: Attempt) -> None:
        import ray
        from ray import tune

        broker = ray.get_actor(self.broker)
        context = tune.get_context()
        trial_id = context.get_trial_id()
        start = None if attempt.start is None else attempt.start.checkpoint
        ray.get(broker.join.remote(trial_id, attempt.config, start, member_number(context.get_trial_name())))
        while True:
            item = ray.get(broker.next.remote(trial_id))
            if item[0] == "end":
                return
            if item[0] == "failed":
                raise item[1]
            _, metrics, files = item
            directory = None if files is None else _write_checkpoint(attempt.trial_dir, files)
            try:
                attempt.reports(metrics, None if directory is None else str(directory))
            except BaseException:  # a stop from the scheduler (or a bad first report): the member leaves
                broker.decide.remote(trial_id, False)
                raise
            finally:
                if directory is not None:  # Tune has copied it into the trial's storage
                    shutil.rmtree(directory, ignore_errors=True)
            broker.decide.remote(trial_id, True)


def _write_checkpoint(trial_dir: str, files: dict[str, bytes]) -> Path:
    """A checkpoint handed over by a bundle, written into a new directory under ``trial_dir``."""
    os.makedirs(trial_dir, exist_ok=True)
    directory = Path(tempfile.mkdtemp(prefix="bundle_checkpoint_", dir=trial_dir))
    for name, data in files.items():
        (directory / name).write_bytes(data)
    return directory


def start_broker(spec: SweepSpec, size: int, slots: int, secrets: Any = None) -> tuple[Any, str]:
    """Start the sweep's :class:`BundleBroker` as a named Ray actor (its members find it by name); returns
    its handle and name. Its gangs are of one rank, as ``spec`` sizes it, holding the rank's GPUs but not
    its CPUs (the members hold those: :func:`member_resources`). It holds no resources itself; ``ray.kill``
    it at the sweep's end (its gangs go with it)."""
    import ray

    gang = GangSettings(spec.resources, spec.execution, spec.limits.progress_s, holds_cpus=False)
    name = f"tune_service_bundles_{uuid.uuid4().hex[:12]}"
    # Every member waits in a call of its own (next), beside its joins and words.
    calls = 3 * size * slots + 8
    broker: Any = (
        ray.remote(BundleBroker)
        .options(name=name, num_cpus=0, max_concurrency=calls)
        .remote(gang, size, slots, secrets)
    )
    ray.get(broker.waiting.remote())  # up before the first member looks for it
    return broker, name


def describe_bundles(spec: SweepSpec) -> str:
    """Which of the spec's searched parameters members of one bundle may differ in, and which split them."""
    from tune_service.training.fused import FUSABLE

    searched = [p.name for p in spec.parameters if p.is_searched]
    fused = [n for n in searched if n in FUSABLE]
    split = [n for n in searched if n not in FUSABLE]
    text = f"members differ in {', '.join(fused) or 'nothing searched'}"
    if split:
        text += f"; {', '.join(split)} split them into separate bundles"
    return text


def check_bundles(
    spec: SweepSpec, task: Task | None, runs_program: bool, first_trial: Callable[[], TrialConfig]
) -> str | None:
    """The dry-run's refusals of ``execution.bundle``, before anything runs: a sweep whose trials cannot be
    fused, with the reason. ``task``: the sweep's Task (None for a program or a train loop);
    ``first_trial``: the sweep's first trial as its ranks would get it (``SweepPlan.first_trial``).
    Whether torch.func can run the task's step is found by building that trial's bundle of two on the
    CPU, here (:func:`~tune_service.training.fused.setup_bundle`'s probe).

    Returns:
        Under ``bundle: auto``, why the task's trials cannot be fused (the sweep then trains each trial
        alone, saying why); None when they can.

    Raises:
        SpecError: on ``execution.bundle``, naming the rule and the value: a sweep the spec's settings keep
            from bundles (under ``auto`` too), or, under a number, a task that cannot be fused.
    """
    size = "auto" if spec.execution.bundle_auto else spec.execution.bundle

    def refuse(rule: str) -> None:
        raise SpecError([Problem("execution.bundle", f"{size}: {rule}")])

    if task is None:
        what = "a W&B program (a process of its own)" if runs_program else "a train_loop_per_worker"
        refuse(f"bundles fuse a Task's trials; this sweep runs {what}")
        return None
    if spec.execution.gangs != "warm":
        refuse("bundles train on warm gangs; execution.gangs is fresh")
    if spec.resources.workers != 1:
        refuse(f"a bundle trains on one rank; resources.workers is {spec.resources.workers}")
    if spec.resources.gpus_auto:
        refuse("give resources.gpus_per_worker as a number with bundles (auto measures one trial alone)")
    from tune_service.training.fused import NotFusable, refusal, setup_bundle

    config = bundle_trial(spec, first_trial)
    reason = refusal(task, config)
    if reason is None:
        with _random_state_kept():  # the probe seeds the process's generators, as a trial would
            try:
                setup_bundle([config, config], "cpu")
            except NotFusable as error:
                reason = str(error)
    if reason is not None and not spec.execution.bundle_auto:
        refuse(reason)
    return reason


def bundle_trial(spec: SweepSpec, first_trial: Callable[[], TrialConfig]) -> TrialConfig:
    """The sweep's first trial (``SweepPlan.first_trial``) as a bundle's member trains it: opened, and
    counted in epochs up to ``max_t`` where the sweep counts epochs."""
    config = first_trial().opened()
    if spec.scheduler.time_unit == "epoch":
        config = dataclasses.replace(config, epochs=spec.scheduler.max_t or 1, max_steps=None)
    return config


@contextlib.contextmanager
def _random_state_kept() -> Iterator[None]:
    """Python's, NumPy's and torch's global random states, put back afterwards."""
    import random

    import numpy as np
    import torch

    states = random.getstate(), np.random.get_state(), torch.get_rng_state()
    try:
        yield
    finally:
        random.setstate(states[0])
        np.random.set_state(states[1])
        torch.set_rng_state(states[2])


def member_resources(resources: ResourceSpec, size: int) -> Any:
    """Tune's resource request of a bundle member: its share (1 / ``size``) of one rank's CPUs. ``size``
    members hold the CPUs of the gang that trains them; its rank holds its GPUs itself, so that Ray gives
    it a GPU of its own (:class:`~tune_service.execution.gang.GangSettings`)."""
    from ray import tune

    return tune.PlacementGroupFactory([{"CPU": resources.cpus_per_worker / size}])
