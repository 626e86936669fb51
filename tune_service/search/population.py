"""Population-based training (``scheduler.type: pbt``): Ray Tune's ``PopulationBasedTraining`` over a
population drawn by our random or grid searcher, mutating the parameters the spec allows, within their
bounds.

How an exploit runs here: Ray's PBT pauses the weak trial, gives it the strong trial's config with the
mutations applied and the strong trial's latest checkpoint, and starts it again. A warm trial starts
again on the warm gang its slot already holds (the ranks stay up; only the checkpoint is loaded), takes
the handed checkpoint as where it starts (:meth:`~tune_service.execution.sweep_trial.SweepTrial.start_point`),
and the shared loop puts the trial's own hyperparameters into the restored optimizer
(:func:`~tune_service.training.loop.keep_own_hyperparameters`). The driver lets Tune create the whole
population at once (PBT compares trials that exist together), and the sweep's progress records each
exploit as the trial's lineage (:mod:`~tune_service.results.lineage`).

What PBT may change (:func:`mutable_parameters`): the parameters ``scheduler.mutate`` names, or by default
the searched ones among the optimizer's numbers (:data:`OPTIMIZER_NUMBERS`). :func:`check_population`
refuses, before anything runs, a parameter whose change a checkpoint cannot carry: one that changes the
model's shapes (the architecture), the batch size or the data, a conditional one; and a sweep PBT cannot
run: a model-based searcher (it would learn from results of configs PBT changed mid-trial), a W&B program
or a train loop (their checkpoints are not the shared loop's), fresh trials (``execution.gangs: fresh``),
fused bundles, and checkpoints rarer than the perturbations.

``scheduler.type: pb2`` (Parker-Holder et al., "Provably Efficient Online Hyperparameter Optimization with
Population-Based Bandits", NeurIPS 2020) is Ray Tune's ``PB2`` in the same place: it exploits as PBT
does, and picks the new values of the parameters it may change with a Gaussian-process bandit (GP-UCB,
on scikit-learn, over the population's reports so far) instead of perturbing them, so it takes only
ranges of real numbers with both bounds (each modelled on its linear scale, as Ray's PB2 does).

Its replay (``scheduler.type: pbt_replay``, :func:`build_replay`) trains one trial through a schedule PBT
found (``scheduler.schedule``, what ``best_spec()`` of a PBT sweep writes): paused at each change's epoch,
it goes on from its own checkpoint with the change's values, the way an exploited trial goes on from its
donor's; :func:`check_population` refuses what it refuses for PBT, the changes in place of ``mutate``.
"""

from __future__ import annotations

import contextlib
import hashlib
import posixpath
import random
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence, cast

from tune_service.errors import Problem, SpecError
from tune_service.experiment.checkpoints import ray_checkpoint
from tune_service.experiment.layout import trial_number
from tune_service.ray_internals import private, set_private
from tune_service.experiment.layout import trial_of_path
from tune_service.search.population_journal import (
    Decision,
    PopulationHistory,
    append_decision,
    checkpoint_name,
    checkpoint_path,
    journal_directory,
)
from tune_service.search.spaces import sample_flat, support
from tune_service.spec.configs import nest, plain, with_values
from tune_service.spec.parameters import round_to_q

if TYPE_CHECKING:
    from tune_service.spec import SweepSpec
    from tune_service.spec.parameters import ParameterSpec
    from tune_service.tasks import Task

#: The optimizer's numbers, which PBT changes by default (a subset of what a fused bundle's members may
#: differ in, :data:`tune_service.training.fused.FUSABLE`): the loop puts them into the restored optimizer.
OPTIMIZER_NUMBERS = ("lr", "weight_decay", "momentum", "dampening", "eps")
#: The searchers whose population PBT can start from: their suggestions never depend on results.
POPULATION_SEARCHERS = ("random", "grid")


def mutable_parameters(spec: SweepSpec) -> tuple[ParameterSpec, ...]:
    """The parameters PBT may change: ``scheduler.mutate``'s, else the searched optimizer numbers."""
    names = spec.scheduler.mutate
    if names is None:
        return tuple(p for p in spec.parameters if p.is_searched and p.name in OPTIMIZER_NUMBERS)
    by_name = {p.name: p for p in spec.parameters}
    return tuple(by_name[name] for name in names if name in by_name)


def check_population(spec: SweepSpec, task: Task | None, runs_program: bool) -> None:
    """The dry-run's refusals of ``scheduler.type: pbt`` (see the module's docstring), each naming the key,
    the rule and the value.

    Raises:
        SpecError: every problem found.
    """
    problems: list[Problem] = []

    def refuse(path: str, rule: str) -> None:
        problems.append(Problem(path, rule))

    kind = spec.scheduler.type
    if spec.method not in POPULATION_SEARCHERS:
        refuse(
            "method",
            f"must be random or grid with scheduler.type {kind} (its population is drawn at random or from the "
            f"grid; a model-based searcher would learn from results of configs changed mid-trial), got "
            f"{spec.method}",
        )
    if task is None:
        what = "a W&B program" if runs_program else "a train_loop_per_worker"
        refuse(
            "scheduler.type",
            f"{kind} goes on from the shared loop's checkpoints with other hyperparameters; this sweep runs "
            f"{what}, whose checkpoints are its own: use asha, hyperband or fifo",
        )
    if task is not None and spec.execution.gangs != "warm":
        refuse(
            "execution.gangs",
            f"must be warm with scheduler.type {kind} (a trial goes on from a checkpoint on its warm gang; a "
            f"fresh Ray Train run each time is what warm gangs avoid), got {spec.execution.gangs}",
        )
    if spec.execution.bundle > 1 or spec.execution.bundle_auto:
        refuse(
            "execution.bundle",
            f"must be 1 with scheduler.type {kind} (a bundle's members are not changed one by one), got "
            f"{'auto' if spec.execution.bundle_auto else spec.execution.bundle}",
        )
    every = spec.training.checkpoint_every
    if kind == "pbt_replay":
        for i, change in enumerate(spec.scheduler.schedule):
            if every == 0 or change["epoch"] % every:
                refuse(
                    f"scheduler.schedule[{i}].epoch",
                    f"must be a multiple of training.checkpoint_every ({every}): the trial goes on from its "
                    f"checkpoint of that epoch, got {change['epoch']}",
                )
        problems += _replay_problems(spec, task)
    else:
        interval = spec.scheduler.perturbation_interval
        if every == 0 or interval % every:
            refuse(
                "training.checkpoint_every",
                f"must divide scheduler.perturbation_interval ({interval}): a trial that exploits another loads "
                f"its checkpoint of the perturbation's epoch, got {every}",
            )
        problems += _mutation_problems(spec, task)
        if kind == "pb2":
            problems += _bandit_problems(spec)
    if problems:
        raise SpecError(problems)


def _replay_problems(spec: SweepSpec, task: Task | None) -> list[Problem]:
    """A schedule's changes may name what PBT may change: parameters of the spec, not conditional, not
    the data's, not the architecture's."""
    by_name = {p.name: p for p in spec.parameters}
    data = set(getattr(task, "data_hparams", ()) or ()) | {"batch_size"}
    problems = []
    for i, change in enumerate(spec.scheduler.schedule):
        path = f"scheduler.schedule[{i}].config"
        for name, value in change["config"].items():
            p = by_name.get(name)
            if p is None:
                problems.append(Problem(path, f"names the spec's parameters ({', '.join(by_name)}), got {name!r}"))
            elif reason := _unchangeable(p, task, spec, data, (_two_values(p)[0], value)):
                problems.append(Problem(path, reason))
    return problems


def _unchangeable(
    p: ParameterSpec, task: Task | None, spec: SweepSpec, data: set[str], values: tuple[Any, Any]
) -> str | None:
    """Why a trial cannot go on from a checkpoint with ``p`` changed (between ``values``), or None."""
    if p.when:
        return f"{p.name} is conditional: a trial may not have it where it is inactive"
    if p.name in data:
        return f"{p.name} decides the data each rank is given, which a checkpoint cannot carry over"
    return _changes_shapes(task, spec, p, values) if task is not None else None


def _mutation_problems(spec: SweepSpec, task: Task | None) -> list[Problem]:
    by_name = {p.name: p for p in spec.parameters}
    searched = [p.name for p in spec.parameters if p.is_searched]
    if spec.scheduler.mutate is None:
        if not mutable_parameters(spec):
            return [
                Problem(
                    "scheduler.mutate",
                    f"none of the searched parameters ({', '.join(searched) or 'none'}) is the optimizer's "
                    f"({', '.join(OPTIMIZER_NUMBERS)}), which PBT changes by default: name the ones it may "
                    f"change",
                )
            ]
        return []
    problems = []
    data = set(getattr(task, "data_hparams", ()) or ()) | {"batch_size"}
    for name in spec.scheduler.mutate:
        p = by_name.get(name)
        path = "scheduler.mutate"
        if p is None or not p.is_searched:
            problems.append(Problem(path, f"names searched parameters ({', '.join(searched)}), got {name!r}"))
        elif reason := _unchangeable(p, task, spec, data, _two_values(p)):
            problems.append(Problem(path, reason))
    return problems


def _bandit_problems(spec: SweepSpec) -> list[Problem]:
    """PB2's model picks each value it changes within ``[min, max]`` as a real number: a parameter with
    listed values, an integer or quantized range, or a range open on one side is PBT's alone."""
    problems = []
    for p in mutable_parameters(spec):
        if support(p) is not None:
            why = "a choice among values" if p.distribution == "categorical" else f"a range of steps ({p.distribution})"
        elif p.shape.low is None or p.shape.high is None:
            why = f"a law without both min and max ({p.distribution})"
        else:
            continue
        problems.append(
            Problem(
                "scheduler.mutate",
                f"pb2 picks new values of real numbers within a min and a max; {p.name} is {why}: use "
                f"scheduler.type pbt, or leave {p.name} out of mutate",
            )
        )
    return problems


def _changes_shapes(task: Task, spec: SweepSpec, p: ParameterSpec, values: tuple[Any, Any]) -> str | None:
    """Why ``p`` is the architecture's (the task's model has other parameter shapes at its two ``values``),
    or None. The models are built on torch's meta device: shapes only, no memory, no time."""
    import torch

    constants = {q.name: q.value for q in spec.parameters if q.distribution == "constant"}
    shapes = []
    try:
        with torch.device("meta"):
            for value in values:  # the config as a trial gets it: dotted names nested
                model = task.model({**task.defaults, **nest({**constants, **_first_values(spec), p.name: value})})
                shapes.append({n: tuple(t.shape) for n, t in model.state_dict().items()})
    except Exception:  # noqa: BLE001 - a model the meta device cannot build is not refused here: a shape
        # change then fails the exploited trial, when it loads the donor's checkpoint, with torch's error
        return None
    if shapes[0] != shapes[1]:
        return (
            f"{p.name} changes the model's shapes ({p.name}={values[0]!r} and {values[1]!r} build different "
            f"models): PBT copies weights between trials, so it can change only what the weights do not depend on"
        )
    return None


def _two_values(p: ParameterSpec) -> tuple[Any, Any]:
    values = support(p)
    if values is not None:
        return values[0], values[-1]
    s = p.shape
    low = s.low if s.low is not None else s.law().ppf(0.05)
    high = s.high if s.high is not None else s.law().ppf(0.95)
    return (int(low), int(high)) if s.integral else (float(low), float(high))


def _first_values(spec: SweepSpec) -> dict[str, Any]:
    """A value of every searched parameter (its first), so the model is built as a trial's would be."""
    out = {}
    for p in spec.parameters:
        if p.is_searched and not p.when:
            out[p.name] = _two_values(p)[0]
    return out


def build_population(spec: SweepSpec, takes_turns: bool = False, history: PopulationHistory | None = None) -> Any:
    """Ray's PBT, or its PB2, for ``spec`` (its metric and mode come from the Tune config);
    ``takes_turns``: the population is larger than the trials that run at once; ``history``: a resumed
    sweep's decisions so far (:func:`~tune_service.search.population_journal.read_history`)."""
    from ray.tune.schedulers import PopulationBasedTraining

    s = spec.scheduler
    mutable = mutable_parameters(spec)
    shared = dict(
        time_attr=s.time_attr,
        perturbation_interval=s.perturbation_interval,
        quantile_fraction=s.quantile_fraction,
        custom_explore_fn=within_bounds(mutable),
        log_config=True,
    )
    if s.type == "pb2":
        from ray.tune.schedulers.pb2 import PB2  # pandas and scikit-learn: imported for pb2 alone

        bounds = _nested({p.name: [p.shape.low, p.shape.high] for p in mutable})
        return _population_class(PB2, spec, takes_turns, history)(hyperparam_bounds=bounds, **shared)
    return _population_class(PopulationBasedTraining, spec, takes_turns, history)(
        resample_probability=s.resample_probability,
        perturbation_factors=cast(Any, s.perturbation_factors),  # Ray types two; it takes any number
        hyperparam_mutations=_nested({p.name: _mutation(p) for p in mutable}),
        **shared,
    )


def _population_class(base: type, spec: SweepSpec, takes_turns: bool, history: PopulationHistory | None) -> type:
    """``base`` (Ray's PBT or PB2) as a sweep of ours runs it."""
    time_attr, max_t, interval = spec.scheduler.time_attr, spec.scheduler.max_t, spec.scheduler.perturbation_interval
    resumed = history.last() if history is not None else {}

    class Population(base):
        """Ray's PBT (or PB2) with the population drawn by our unguided searcher. Ray refuses any search
        algorithm but its own variant generator beside PBT, because a model-based searcher would learn from
        results of configs PBT changed; ours draw without looking at results (:data:`POPULATION_SEARCHERS`,
        checked by :func:`check_population`), as Ray's variant generator does.

        Its random choices (the donor, the factors, the resamples, PB2's bandit) are drawn for each
        decision afresh (:func:`seeded_draws`), from the sweep's seed, the trial's place in the population
        and the report's time: they do not depend on what was drawn before, so a population whose reports
        arrive in the same order (one that takes turns on one slot) makes the same decisions on the same
        seed, and a resumed one draws what the uninterrupted one would have.

        Each decision is written to the experiment's journal as it is made (:func:`append_decision`); a
        resumed population puts each trial's last one back (:meth:`go_on_from_history`)."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            #: Each trial's place in the population: the order Tune created the trials in (its number),
            #: which a resumed sweep keeps (Tune restores its trials in another order).
            self.places: dict[str, int] = {}
            #: How many decisions have been made, and the number of each trial's last (in the journal's
            #: order, so a resumed population knows them too).
            self.decisions_made = len(history.decisions) if history is not None else 0
            self.last_decided: dict[str, int] = (
                {d.trial_id: i for i, d in enumerate(history.decisions)} if history is not None else {}
            )

        def on_trial_add(self, tune_controller: Any, trial: Any) -> None:
            self.places[trial.trial_id] = trial_number(trial) or len(self.places) + 1
            super().on_trial_add(cast(Any, _WithoutSearcher(tune_controller)), trial)
            # Ray's PBT ranks trials of equal scores in the order it was told of them: creation order.
            states = private(self, "_trial_state")
            ranked = sorted(states.items(), key=lambda item: self.places.get(item[0].trial_id, 0))
            states.clear()
            states.update(ranked)
            if history is not None and not trial.is_finished():
                self.go_on_from_history(trial, history)

        def choose_trial_to_run(self, tune_controller: Any) -> Any:
            # Ray's PBT runs the paused trial that has trained least, the first of equals in Tune's list of
            # trials. Of equals, ours runs the one decided on longest ago, then the one created first: an
            # exploited trial takes its donor's training time, and were it first of the two, it would run,
            # exploit the paused donor's same checkpoint again at its next perturbation, and so on for
            # ever. (The order also holds on a resume, whose list of trials Tune keeps in another order.)
            def turn(trial: Any) -> tuple[int, int]:
                return self.last_decided.get(trial.trial_id, -1), self.places.get(trial.trial_id, 0)

            return super().choose_trial_to_run(cast(Any, _InTurnOrder(tune_controller, turn)))

        def go_on_from_history(self, trial: Any, past: PopulationHistory) -> None:
            """A restored trial as its last decision left it: PBT's state of it, its config, and the
            checkpoint it goes on from (:meth:`PopulationHistory.start_of`)."""
            last = resumed.get(trial.trial_id)
            if last is not None:
                state = private(self, "_trial_state")[trial]
                state.last_score, state.last_result = last.score, last.report
                state.last_perturbation_time, state.last_train_time = last.perturbed_at, last.trained_to
                offered = past.checkpoint(last.offered) if last.offered is not None else None
                state.last_checkpoint = offered.as_ray_checkpoint() if offered is not None else None
                trial.set_config(last.config)
            start = past.start_of(trial.trial_id, interval, time_attr)
            hand_checkpoint(trial, start.as_ray_checkpoint() if start else None, start.report if start else {})

        def on_trial_result(self, tune_controller: Any, trial: Any, result: dict) -> str:
            # A trial's report of its last epoch (max_t) ends it: Tune would stop a trial there before
            # asking the scheduler, but ours ends by returning. Exploiting now would only restart it from
            # the donor's last checkpoint with nothing left to train, its result the donor's.
            if result.get(time_attr, 0) >= max_t:
                return self.CONTINUE
            handed = trial.checkpoint.path if trial.checkpoint is not None else None
            with seeded_draws(spec.seed, self.places.get(trial.trial_id, -1), result.get(time_attr, 0)):
                decision = super().on_trial_result(tune_controller, trial, result)
            state = private(self, "_trial_state").get(trial)
            if state is not None and state.last_result is result:  # PBT decided at this report (it keeps it)
                made = _decision(trial, result, state, handed, time_attr)
                if made.offered is not None:
                    # The checkpoint of this report, not Ray's save of the trial scheduled now, which comes
                    # to nothing if the trial pauses first (then no trial could copy this one).
                    offered = checkpoint_path(posixpath.dirname(trial.path), made.offered)
                    state.last_checkpoint = ray_checkpoint(offered, trial.storage.storage_filesystem)
                earlier = history.decisions if history is not None else ()
                append_decision(journal_directory(trial), made, earlier)
                self.last_decided[trial.trial_id] = self.decisions_made
                self.decisions_made += 1
            # Ray's PBT pauses a trial at its perturbation while another is paused or pending, so that
            # trials take turns. In a population that runs at once the other is only starting again (an
            # exploit): the pause would cost this trial a restart and gain no one a turn.
            if decision == self.PAUSE and not takes_turns:
                return self.CONTINUE
            return decision

    return Population


def _decision(trial: Any, result: dict, state: Any, handed_before: str | None, time_attr: str) -> Decision:
    """The journal's record of the decision PBT just made at ``result`` (``state``: its state of the
    trial now; ``handed_before``: the path of the checkpoint the trial had before)."""
    offered = None
    if state.last_checkpoint is not None:  # a top trial: its checkpoint of this report is kept for others
        own = result.get("checkpoint_dir_name")
        if own is None and trial.checkpoint is not None and trial_of_path(trial.checkpoint.path) == trial.trial_id:
            own = trial.checkpoint.path  # a report without a checkpoint: the trial's newest recorded one
        offered = checkpoint_name(trial.trial_id, own) if own else None
    donor = donor_checkpoint = None
    now = trial.checkpoint.path if trial.checkpoint is not None else None
    if now is not None and now != handed_before and trial_of_path(now) not in (None, trial.trial_id):
        donor = trial_of_path(now)  # an exploit: PBT handed the trial the donor's checkpoint
        donor_checkpoint = checkpoint_name(cast(str, donor), now)
    return Decision(
        trial.trial_id,
        result.get(time_attr, 0),
        state.last_score,
        state.last_perturbation_time,
        state.last_train_time,
        offered,
        result,
        plain(trial.config or {}),
        donor,
        donor_checkpoint,
    )


def hand_checkpoint(trial: Any, checkpoint: Any, metrics: dict[str, Any]) -> None:
    """Make ``checkpoint`` (a ``ray.train.Checkpoint``, or None: none) the one Tune starts ``trial`` from
    next, with the report that came with it, as Ray's PBT hands an exploiting trial its donor's (Tune has
    no public way to)."""
    from ray.train._internal.session import _TrainingResult

    manager = trial.run_metadata.checkpoint_manager
    latest = None if checkpoint is None else _TrainingResult(checkpoint, metrics)
    set_private(manager, "_latest_checkpoint_result", latest)


def build_replay(spec: SweepSpec) -> Any:
    """The scheduler of ``scheduler.type: pbt_replay``: each trial trains with its config, and at each
    change's epoch is paused (Tune keeps its checkpoint of that epoch), given the change's values, and goes
    on from that checkpoint on its warm gang, as a trial PBT exploits goes on from its donor's. It does what
    Ray Tune's ``PopulationBasedTrainingReplay`` does, by epoch, for any number of trials."""
    from ray.tune.schedulers import FIFOScheduler

    changes = spec.scheduler.schedule
    time_attr = spec.scheduler.time_attr

    class Replay(FIFOScheduler):
        """FIFO, but each trial is changed at the schedule's epochs (FIFO runs a paused trial again)."""

        def __init__(self) -> None:
            super().__init__()
            self.made: dict[str, int] = {}  # by trial id: how many changes it has had

        def on_trial_result(self, tune_controller: Any, trial: Any, result: dict) -> str:
            made = self.made.get(trial.trial_id, 0)
            if made == len(changes) or result.get(time_attr, 0) < changes[made]["epoch"]:
                return self.CONTINUE
            self.made[trial.trial_id] = made + 1
            trial.set_config(with_values(trial.config, changes[made]["config"]))
            return self.PAUSE

    return Replay()


class _InTurnOrder:
    """The Tune controller as :meth:`Population.choose_trial_to_run` shows it to Ray's PBT: its trials
    ordered by ``turn``."""

    def __init__(self, controller: Any, turn: Callable[[Any], Any]):
        self._controller, self._turn = controller, turn

    def get_trials(self) -> list:
        return sorted(self._controller.get_trials(), key=self._turn)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._controller, name)


class _WithoutSearcher:
    """The Tune controller as :meth:`Population.on_trial_add` shows it to Ray's PBT: without a searcher."""

    search_alg = None

    def __init__(self, controller: Any):
        self._controller = controller

    def __getattr__(self, name: str) -> Any:
        return getattr(self._controller, name)


def _nested(by_name: dict[str, Any]) -> dict[str, Any]:
    """Dotted names as the nested groups a trial's config has them in (``optimizer.momentum`` under
    ``optimizer``), which is how Ray's PBT finds a nested parameter."""
    out: dict[str, Any] = {}
    for name, value in by_name.items():
        *groups, last = name.split(".")
        node = out
        for group in groups:
            node = node.setdefault(group, {})
        node[last] = value
    return out


def _mutation(p: ParameterSpec) -> list | Callable[[], Any]:
    """What Ray's PBT mutates ``p`` by: its list of values (a perturbation steps to a neighbour), or a draw
    from its own distribution (a perturbation multiplies by a factor, :func:`within_bounds` then clips).
    The draw takes its seed from Python's ``random``, which :func:`seeded_draws` seeds for each decision."""
    import numpy as np

    values = support(p)
    if values is not None:
        return list(values)
    return lambda: sample_flat([p], np.random.default_rng(random.getrandbits(64)))[p.name]


@contextlib.contextmanager
def seeded_draws(seed: int, place: int, time: float) -> Iterator[None]:
    """Python's and NumPy's global random generators seeded from ``(seed, place, time)`` while the block
    runs, and put back as they were afterwards (nothing else in the driver sees the reseeding).

    Ray's PBT draws its donor, factors and resamples from Python's ``random`` module, and PB2's bandit
    from NumPy's global generator; neither takes a seed (``ray/tune/schedulers/pbt.py``, ``pb2_utils.py``).
    A test fails if they stop drawing from there (``tests/unit/search/test_population.py``)."""
    import numpy as np

    states = random.getstate(), np.random.get_state()
    key = f"{seed}:{place}:{time}"
    random.seed(key)
    np.random.seed(int.from_bytes(hashlib.sha256(key.encode()).digest()[:4], "little"))
    try:
        yield
    finally:
        random.setstate(states[0])
        np.random.set_state(states[1])


def within_bounds(parameters: Sequence[ParameterSpec]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A config's mutated parameters put back within their bounds and types (a continuous value multiplied
    by a perturbation factor may leave its range, or an integer become a float)."""
    continuous = [p for p in parameters if support(p) is None]

    def clip(config: dict[str, Any]) -> dict[str, Any]:
        for p in continuous:
            *groups, last = p.name.split(".")
            node = config
            for group in groups:
                node = node.get(group, {})
            if last not in node:
                continue
            s = p.shape
            value = float(node[last])
            if s.low is not None:
                value = max(value, s.low)
            if s.high is not None:
                value = min(value, s.high)
            if s.q is not None:
                value = round_to_q(round(value / s.q) * s.q, s.q)
            node[last] = int(round(value)) if s.integral else value
        return config

    return clip


def describe_population(spec: SweepSpec) -> str:
    """The plan's line: what PBT (or PB2) compares, how often, and what it may change, and how."""
    s = spec.scheduler
    mutable = ", ".join(p.name for p in mutable_parameters(spec)) or "nothing"
    factors = "/".join(f"{f:g}" for f in s.perturbation_factors)
    how = (
        "picked by a Gaussian-process bandit (GP-UCB) within min and max"
        if s.type == "pb2"
        else f"resampled with probability {s.resample_probability:g}, else x{factors} within bounds"
    )
    return (
        f"every {s.perturbation_interval} {s.time_unit}(s) the bottom {s.quantile_fraction:.0%} of the population "
        f"copy a top {s.quantile_fraction:.0%} trial's weights and optimizer state on their own warm gang, then "
        f"change {mutable} ({how})"
    )
