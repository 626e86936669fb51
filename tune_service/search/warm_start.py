"""``warm_start: DIR``: an earlier sweep's trials, told to a new sweep's searcher before its first trial.

:func:`read_warm_start` reads the earlier experiment (a directory, or a URI on remote storage, downloaded
without its checkpoints) when the sweep is planned. The rules, which the dry-run states:

- The two sweeps optimise the same metric in the same direction (several objectives: the same ones, each
  in the same direction, in any order): a model learns only from values of what it optimises.
- Every parameter this sweep searches has values in the earlier trials (a new searched parameter is
  refused: the earlier trials say nothing about it). Parameters that only the earlier sweep had are
  dropped from its trials: the new sweep's trials run with the task's defaults for them.
- An earlier trial is told when its values of this sweep's parameters are ones this sweep could suggest
  (inside the ranges, among the values, equal to the constants, by the rules of ``points_to_evaluate``),
  and it reported a value of the metric (of every objective) without failing. The others are left out
  and counted.

:func:`tell` replays each told trial through the searcher's stack as if it had run in this sweep: the
searcher suggests its config (given to it as its first known points, so the model records it as its
own), hears every report, then the trial's end. The stack below ``StopAtTarget`` hears them: a target
reached by an earlier trial does not end the new sweep, whose own trials have yet to run. A stopped
trial is corrected for its fidelity as this sweep's own would be (the new ``max_t`` is its budget).

The told trials are the searcher's state from then on (saved with the experiment): a resumed sweep
does not read the earlier experiment again, so it may be moved or deleted.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

from tune_service.errors import Problem, SpecError, TuneServiceError
from tune_service.experiment.layout import (
    TRIAL_RESULTS_FILE,
    read_sweep_file,
    read_trial_error,
    read_trial_params,
    read_trial_results,
    trial_dirs,
)
from tune_service.experiment.remote import RemoteExperiment, is_remote
from tune_service.spec import SweepSpec
from tune_service.spec.sweep import MetricSpec
from tune_service.spec.known_points import flat_point, read_point
from tune_service.spec.rules import Checker

KEY = "warm_start"


@dataclass(frozen=True)
class EarlierTrial:
    """One earlier trial as the new sweep's searcher hears it: its config (flat, typed as this sweep's
    parameters give values) and everything it reported, in order."""

    trial_id: str
    config: dict[str, Any]
    results: tuple[dict[str, Any], ...]


@dataclass(frozen=True)
class WarmStart:
    """What :func:`read_warm_start` found in ``source``: the trials to tell, and how many it left out."""

    source: str
    trials: tuple[EarlierTrial, ...]
    #: Earlier trials outside this sweep's space (with one example of why), failed, or without a value.
    outside_space: int = 0
    example_outside: str = ""
    without_value: int = 0
    #: Parameters of the earlier sweep that this one does not have (their values are dropped).
    dropped: tuple[str, ...] = ()

    def describe(self) -> str:
        """The plan's line about the warm start."""
        left = []
        if self.outside_space:
            left.append(f"{self.outside_space} outside this sweep's space, e.g. {self.example_outside}")
        if self.without_value:
            left.append(f"{self.without_value} failed or without a value of the metric")
        line = f"warm start: {len(self.trials)} trial(s) of {self.source} told to the searcher before the first trial"
        if left:
            line += f" ({'; '.join(left)}: left out)"
        if self.dropped:
            line += f"; their {', '.join(self.dropped)} dropped (not parameters of this sweep)"
        return line


def read_warm_start(spec: SweepSpec) -> WarmStart | None:
    """The earlier trials ``spec.warm_start`` names, read against ``spec``; None without a warm start.

    Raises:
        SpecError: no experiment there, another metric, a searched parameter the earlier trials lack, or no
            earlier trial to tell.
    """
    if spec.warm_start is None:
        return None
    source = spec.warm_start
    with _local_copy(source) as directory:
        saved = read_sweep_file(directory) if directory.is_dir() else None
        if saved is None:
            raise _refusal(f"no sweep's experiment at {source!r} (it has no sweep.json)")
        _check_metric(spec, saved.get("spec") or {}, source)
        read = [_read_trial(path) for path in trial_dirs(directory).values()]
    trials = sorted((t for t in read if t is not None), key=lambda t: (t.results[0].get("timestamp", 0), t.trial_id))
    return _told(spec, source, trials)


@contextlib.contextmanager
def _local_copy(source: str) -> Iterator[Path]:
    """The experiment's directory: ``source`` itself, or a download of it (removed afterwards)."""
    if not is_remote(source):
        yield Path(source).expanduser()
        return
    try:
        experiment = RemoteExperiment.existing(source)
    except TuneServiceError as error:  # nothing there, or storage that cannot be read: its own words
        raise _refusal(str(error).split(": ", 1)[-1]) from None
    try:
        yield experiment.mirror
    finally:
        experiment.close()


def _check_metric(spec: SweepSpec, earlier: dict[str, Any], source: str) -> None:
    """Refuse an earlier sweep (its spec as written) that optimised other objectives, or the other way."""
    if isinstance(earlier.get("metrics"), list):
        theirs = {_name_and_goal(objective) for objective in earlier["metrics"]}
    elif isinstance(earlier.get("metric"), dict):
        theirs = {_name_and_goal(earlier["metric"])}
    else:  # the spec's default: a task's val_loss; a W&B program's file without one has none
        theirs = {(None if "program" in earlier else MetricSpec.name, MetricSpec.goal)}
    ours = {(o.name, o.goal) for o in spec.metrics} or {(None, MetricSpec.goal)}
    if theirs != ours:
        raise _refusal(
            f"the earlier sweep at {source!r} optimised {_objectives_named(theirs)}, this one "
            f"{_objectives_named(ours)}: a searcher learns only from values of what it optimises"
        )


def _name_and_goal(objective: Any) -> tuple[str | None, str]:
    if not isinstance(objective, dict):
        return None, MetricSpec.goal
    return objective.get("name"), objective.get("goal", MetricSpec.goal)


def _objectives_named(objectives: set[tuple[str | None, str]]) -> str:
    return " and ".join(f"{name or 'no metric'} ({goal})" for name, goal in sorted(objectives, key=str))


@dataclass(frozen=True)
class _Recorded:
    """What an earlier trial's directory holds: its reports, its config (None: unreadable), whether it failed."""

    trial_id: str
    results: tuple[dict[str, Any], ...]
    config: dict[str, Any] | None
    failed: bool


def _read_trial(path: Path) -> _Recorded | None:
    """A trial directory's record; None when the trial reported nothing."""
    results = tuple(read_trial_results(path / TRIAL_RESULTS_FILE))
    if not results:
        return None
    trial_id = str(results[0].get("trial_id", path.name))
    return _Recorded(trial_id, results, read_trial_params(path), read_trial_error(path) is not None)


def _told(spec: SweepSpec, source: str, trials: Sequence[_Recorded]) -> WarmStart:
    """Which earlier trials are told, by the module's rules."""
    parameters = spec.parameters
    by_name = {p.name: p for p in parameters}
    searched = [p.name for p in parameters if p.is_searched]
    told: list[EarlierTrial] = []
    seen_names: set[str] = set()
    outside, example, without_value = 0, "", 0
    objectives = [o.name or "" for o in spec.metrics]  # the spec refuses a warm start without a metric
    for trial in trials:
        flat = flat_point(trial.config or {}, by_name)
        seen_names |= set(flat)
        if trial.failed or trial.config is None or not all(_has_value(trial.results, m) for m in objectives):
            without_value += 1
            continue
        check = Checker()
        point = read_point(check, trial.trial_id, {k: v for k, v in flat.items() if k in by_name}, parameters)
        if point is None:
            outside += 1
            example = example or f"trial {check.problems[0]}"
            continue
        told.append(EarlierTrial(trial.trial_id, point, trial.results))
    missing = [name for name in searched if name not in seen_names]
    if missing:
        raise _refusal(
            f"the earlier trials at {source!r} have no values of {', '.join(missing)}: every parameter this "
            f"sweep searches needs them (warm start from a sweep that searched it, or make it a constant)"
        )
    if not told:
        raise _refusal(
            f"none of the {len(trials)} earlier trial(s) at {source!r} can be told: "
            f"{outside} outside this sweep's space{', e.g. ' + example if example else ''}; "
            f"{without_value} failed or without a value of {' and '.join(objectives)}"
        )
    dropped = tuple(sorted(seen_names - set(by_name)))
    return WarmStart(source, tuple(told), outside, example, without_value, dropped)


def _has_value(results: Sequence[dict[str, Any]], metric: str) -> bool:
    value = results[-1].get(metric)
    return isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value)


def _refusal(message: str) -> SpecError:
    return SpecError([Problem(KEY, message)])


def tell(searcher: Any, warm: WarmStart) -> None:
    """Replay ``warm``'s trials through ``searcher`` (a :func:`~tune_service.search.wrappers.trial_configs`
    stack whose model was given their configs as its first known points), below its target check."""
    from tune_service.search.wrappers import RunningCap, layer_of

    below_target = layer_of(searcher, RunningCap)
    if below_target is None:  # pragma: no cover - every sweep's searcher is such a stack
        raise TypeError("warm_start.tell: not a trial_configs stack")
    for index, trial in enumerate(warm.trials):
        trial_id = f"warm_start_{index:05d}"
        suggested = below_target.suggest(trial_id)
        if not isinstance(suggested, dict):  # pragma: no cover - the model suggests its known points first
            raise RuntimeError(f"warm_start.tell: the searcher suggested {suggested!r}, not trial {trial.trial_id}")
        for result in trial.results:
            below_target.on_trial_result(trial_id, result)
        below_target.on_trial_complete(trial_id, result=trial.results[-1])
