"""The outcome of a sweep: every trial, the best one, the leaderboard, and the files in the experiment
directory (``summary.json`` and ``best_config.yaml``, both written atomically, and
``ended_trials.jsonl``, appended to as each trial of a running sweep ends).

A trial's ``status`` is ``completed`` (trained all ``max_t`` epochs, or steps when the scheduler's time
unit is the step: the summary's ``time_unit``), ``stopped`` (ended earlier: the
scheduler stopped it), ``failed`` (raised; ``error`` says why) or ``interrupted`` (the sweep was stopped
while the trial ran or waited; ``resume`` continues it); a summary written while the sweep runs also
has ``running`` trials (see :mod:`~tune_service.results.progress`). A trial's ``metrics`` are its last
report. The best trial is the one whose last report is best on the sweep's metric; failed trials and
non-finite values are never chosen.

A trial that breaks one of the sweep's ``constraints`` (``summary.json``'s ``constraints``) is infeasible:
never the best, never on a front, ranked after every feasible trial.

A sweep of several objectives (``metrics:``; ``summary.json``'s ``objectives``) has no best trial: it
has a Pareto front (``pareto``), the trials whose last reports no other trial's beats on every
objective, among those with a finite value of each. Its leaderboard ranks the trials by front, then by
crowding distance (:mod:`~tune_service.search.pareto`).
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence, TypeGuard

import yaml

from tune_service.errors import TuneServiceError
from tune_service.experiment.remote import is_remote, read_remote_text
from tune_service.experiment.layout import (
    BEST_CONFIG_FILE,
    ENDED_TRIALS_FILE,
    SUMMARY_FILE,
    TRIAL_DIR_PREFIX,
    atomic_write,
    creation_number,
)
from tune_service.redaction import redact, redact_text
from tune_service.results.front import hypervolume, reference_point
from tune_service.search.pareto import fronts, non_dominated, pareto_order
from tune_service.spec.configs import plain
from tune_service.spec.sweep import METRIC_VALUES_KEY, ConstraintSpec

#: Tune's bookkeeping keys, left out of a trial's metrics.
TUNE_KEYS = frozenset(
    {
        "timestamp",
        "checkpoint_dir_name",
        "done",
        "training_iteration",
        "trial_id",
        "date",
        "time_this_iter_s",
        "time_total_s",
        "pid",
        "hostname",
        "node_ip",
        "time_since_restore",
        "iterations_since_restore",
        "config",
        "checkpoint_path",
        "should_checkpoint",
    }
)
#: The key of a summary whose sweep was stopped before its end, and why (``failure.max_failed_trials``).
STOPPED_KEY = "stopped"
#: The key of a summary whose sweep ran its time limit (``limits.sweep_s``): it can be resumed.
TIME_LIMIT_KEY = "time_limit"
#: The key of a summary whose sweep SIGTERM ended (:mod:`~tune_service.execution.termination`): ``SIGTERM``.
SIGNAL_KEY = "ended_by_signal"
#: The key of a summary written while the sweep ran (:mod:`~tune_service.results.progress`).
IN_PROGRESS_KEY = "in_progress"
#: The key of a W&B program trial's last report once its program has ended by itself (its exit code, 0):
#: such a trial is ``completed`` whatever its steps, as its program decides its own length.
PROGRAM_EXIT_KEY = "program_exit_code"
#: Bookkeeping of a program's reports, left out of the columns of a sweep without a metric.
UNRANKED_HIDDEN = ("step", "experiment_tag", METRIC_VALUES_KEY, PROGRAM_EXIT_KEY)
#: How many logged values the table of a sweep without a metric shows (summary.json holds them all).
LOGGED_COLUMNS = 6
#: The key of a summary whose sweep has several objectives: ``[{"name": ..., "mode": ...}, ...]`` in the
#: spec's order (absent with one objective).
OBJECTIVES_KEY = "objectives"
#: The key of such a summary's hypervolume, ``{"value": ..., "reference": [...]}``; derived, as ``pareto``.
HYPERVOLUME_KEY = "hypervolume"
#: The key of a summary whose sweep has constraints: ``[{"name": ..., "min": ..., "max": ...}, ...]``.
CONSTRAINTS_KEY = "constraints"
#: The key of such a summary's Pareto front, each trial as ``best`` is written; derived from the trials,
#: so it is written for the reader and worked out again when the summary is read.
PARETO_KEY = "pareto"


def ran_to_its_end(progress: int, max_t: int, last_report: Any) -> bool:
    """Whether a trial is ``completed``: it trained ``max_t`` (epochs or steps), or its program ended by
    itself (:data:`PROGRAM_EXIT_KEY`)."""
    return progress >= max_t or (isinstance(last_report, dict) and last_report.get(PROGRAM_EXIT_KEY) == 0)


@dataclass(frozen=True)
class TrialRecord:
    trial_id: str
    status: str  # completed | stopped | failed | interrupted | running
    config: dict[str, Any]
    metrics: dict[str, Any]
    epochs: int  # whole epochs trained
    error: str | None = None
    #: Optimizer steps trained (None: not reported, as by a plain train loop that does not say).
    steps: int | None = None
    #: Population-based training's exploits of this trial, in order: each ``{"epoch", "donor",
    #: "donor_exploits", "config"}`` (:mod:`~tune_service.results.lineage`); empty for any other trial, and
    #: left out of ``summary.json``.
    lineage: list[dict[str, Any]] = field(default_factory=list)
    #: The trial's number in its sweep, in the order the trials were created (from 1); None where unknown
    #: (a summary written before numbers were kept).
    number: int | None = None

    def progress(self, time_unit: str) -> int:
        """How far the trial trained, in the scheduler's ``time_unit``: ``epoch``, ``step``, or ``value``
        (the values of the sweep's metric a W&B program logged)."""
        if time_unit == "value":
            return int(self.metrics.get(METRIC_VALUES_KEY) or 0)
        return (self.steps or 0) if time_unit == "step" else self.epochs


def trained(reports: Any) -> tuple[int, int | None]:
    """The whole epochs and the optimizer steps (None when never reported) that ``reports`` (dicts, in
    order) show trained: their largest ``epoch`` and ``step``."""
    epochs = [r["epoch"] for r in reports if is_number(r.get("epoch"))]
    steps = [r["step"] for r in reports if is_number(r.get("step"))]
    return (int(max(epochs)) if epochs else 0), (int(max(steps)) if steps else None)


@dataclass(frozen=True)
class SweepResult:
    """What :func:`tune_service.run` returns and what ``summary.json`` holds."""

    experiment_dir: str
    metric: str | None  # None: a W&B program sweep without a metric (no trial ranked, none best)
    mode: str | None  # "min" | "max"; None without a metric
    trials: tuple[TrialRecord, ...]
    best: TrialRecord | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def time_unit(self) -> str:
        """What ``max_t`` and the trials' progress count: ``epoch`` or ``step``."""
        return str(self.extra.get("time_unit", "epoch"))

    @property
    def interrupted(self) -> bool:
        """True if the sweep was stopped before its end (``tune_service.resume`` finishes it)."""
        return any(t.status == "interrupted" for t in self.trials)

    @property
    def objectives(self) -> list[tuple[str, str]]:
        """The sweep's objectives as ``(name, mode)``: its several, else its one metric (none without)."""
        return objectives_of(self.extra) or ([(self.metric, self.mode or "min")] if self.metric else [])

    @property
    def multi_objective(self) -> bool:
        return len(self.objectives) > 1

    @property
    def constraints(self) -> tuple[ConstraintSpec, ...]:
        """The bounds a feasible trial keeps (``constraints:``); empty without."""
        return constraints_of(self.extra)

    @property
    def pareto(self) -> tuple[TrialRecord, ...]:
        """The trials on the Pareto front, by the first objective (one objective: the best trial)."""
        return pareto_front(self.trials, self.objectives, self.constraints)

    @property
    def hypervolume(self) -> tuple[float, tuple[float, ...]] | None:
        """A sweep of several objectives: its front's hypervolume and the reference point it is measured
        from (:mod:`~tune_service.results.front`); None with one objective or no scored trial."""
        if not self.multi_objective:
            return None
        _, points = _scored(self.trials, self.objectives, self.constraints)
        if not points:
            return None
        modes = [mode for _, mode in self.objectives]
        reference = reference_point(points, modes)
        return hypervolume(points, modes, reference), reference

    @property
    def best_config(self) -> dict[str, Any] | None:
        return self.best.config if self.best else None

    @property
    def best_metrics(self) -> dict[str, Any] | None:
        return self.best.metrics if self.best else None

    def to_dict(self) -> dict[str, Any]:
        best = self.best
        return {
            "experiment_dir": self.experiment_dir,
            "metric": self.metric,
            "mode": self.mode,
            "best": (
                None if best is None else {"trial_id": best.trial_id, "config": best.config, "metrics": best.metrics}
            ),
            "trials": [_trial_dict(t) for t in self.trials],
            **self.extra,
            **({PARETO_KEY: [_front_dict(t) for t in self.pareto]} if self.multi_objective else {}),
            **({HYPERVOLUME_KEY: _hypervolume_dict(measured)} if (measured := self.hypervolume) else {}),
        }

    def leaderboard(self, top: int = 10) -> str:
        """The best ``top`` trials as a text table, best first, then a count of the rest. Several
        objectives: ranked by front (the ``front`` column, 1 the Pareto front), a column each."""
        ranked = (
            pareto_ranked(self.trials, self.objectives, self.constraints, limit=top)
            if self.multi_objective
            else rank_trials(self.trials, self.metric, self.mode, self.constraints)
        )
        rows = ranked[:top]
        keys = sorted({k for t in rows for k in t.config})
        if self.multi_objective:
            names = [name for name, _ in self.objectives]
            front_of = _front_numbers(self.trials, self.objectives, self.constraints, limit=top)
            header = ["front", "trial", "status", f"{self.time_unit}s", *names, *keys]
            table = [header] + [
                [
                    str(front_of[t.trial_id] + 1) if t.trial_id in front_of else "-",
                    t.trial_id,
                    t.status,
                    str(t.progress(self.time_unit)),
                    *(format_value(t.metrics.get(name)) for name in names),
                    *(format_value(t.config.get(k)) for k in keys),
                ]
                for t in rows
            ]
        elif self.metric is None:  # nothing ranks the trials: in their order, with what each logged last
            keys += sorted({k for t in rows for k in t.metrics if k not in (*UNRANKED_HIDDEN, *keys)})[:LOGGED_COLUMNS]
            header = ["trial", "status", f"{self.time_unit}s", *keys]
            table = [header] + [
                [
                    t.trial_id,
                    t.status,
                    str(t.progress(self.time_unit)),
                    *(format_value(t.config.get(k, t.metrics.get(k))) for k in keys),
                ]
                for t in rows
            ]
        else:
            header = ["rank", "trial", "status", f"{self.time_unit}s", self.metric, *keys]
            table = [header] + [
                [
                    str(i + 1),
                    t.trial_id,
                    t.status,
                    str(t.progress(self.time_unit)),
                    format_value(t.metrics.get(self.metric)),
                    *(format_value(t.config.get(k)) for k in keys),
                ]
                for i, t in enumerate(rows)
            ]
        widths = [max(len(r[c]) for r in table) for c in range(len(header))]
        lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in table]
        counts = {s: sum(t.status == s for t in self.trials) for s in ("completed", "stopped", "failed")}
        for rare in ("interrupted", "running"):
            if n := sum(t.status == rare for t in self.trials):
                counts[rare] = n
        lines.append(f"{len(self.trials)} trials: " + ", ".join(f"{n} {s}" for s, n in counts.items()))
        return "\n".join(lines)


def _hypervolume_dict(measured: tuple[float, tuple[float, ...]]) -> dict[str, Any]:
    value, reference = measured
    return {"value": value, "reference": list(reference)}


def _front_dict(trial: TrialRecord) -> dict[str, Any]:
    """A front member as ``summary.json``'s ``pareto`` lists it (as its ``best`` is written)."""
    return {"trial_id": trial.trial_id, "config": trial.config, "metrics": trial.metrics}


def _trial_dict(trial: TrialRecord) -> dict[str, Any]:
    """A trial as ``summary.json`` holds it (its lineage only where it has one)."""
    out = asdict(trial)
    if not out["lineage"]:
        del out["lineage"]
    return out


def format_value(value: Any) -> str:
    """A value as the tables show it: a float to 4 significant digits, None as ``-``."""
    if isinstance(value, float):
        return f"{value:.4g}"
    return "-" if value is None else str(value)


def is_number(value: Any) -> TypeGuard[int | float]:
    """An int or a float (a bool is neither, here)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def final_value(trial: TrialRecord, metric: str | None) -> float | None:
    """The trial's last reported value of ``metric``; None when it failed or has no finite value (such a
    trial is never the best), or when the sweep has no metric."""
    if metric is None:
        return None
    value = trial.metrics.get(metric)
    if trial.status == "failed" or not is_number(value) or not math.isfinite(value):
        return None
    return float(value)


def feasible(trial: TrialRecord, constraints: Sequence[ConstraintSpec] = ()) -> bool:
    """Whether the trial's last report keeps every constraint (a missing or non-finite value breaks it)."""
    return all(c.violation(trial.metrics.get(c.name)) <= 0 for c in constraints)


def rank_trials(
    trials, metric: str | None, mode: str | None, constraints: Sequence[ConstraintSpec] = ()
) -> list[TrialRecord]:
    """Trials best first; those without a usable metric value (failed, missing, non-finite) or that break
    a constraint last. Without a metric, in their order."""
    sign = 1.0 if mode == "min" else -1.0

    def key(t: TrialRecord) -> tuple[bool, float]:
        value = final_value(t, metric)
        return value is None or not feasible(t, constraints), sign * (value or 0.0)

    return sorted(trials, key=key)


def best_trial(
    trials,
    metric: str | None,
    mode: str | None,
    objectives: list[tuple[str, str]] | None = None,
    constraints: Sequence[ConstraintSpec] = (),
) -> TrialRecord | None:
    """The best trial by ``metric`` among those that keep ``constraints``; None when none has a usable
    value, or when ``objectives`` holds several (such a sweep has a front, :func:`pareto_front`)."""
    if objectives is not None and len(objectives) > 1:
        return None
    ranked = rank_trials(trials, metric, mode, constraints)
    if not ranked or final_value(ranked[0], metric) is None or not feasible(ranked[0], constraints):
        return None
    return ranked[0]


def objectives_of(extra: dict[str, Any]) -> list[tuple[str, str]]:
    """A summary's several objectives as ``(name, mode)`` (empty for one objective)."""
    return [(o["name"], o["mode"]) for o in extra.get(OBJECTIVES_KEY) or ()]


def constraints_of(extra: dict[str, Any]) -> tuple[ConstraintSpec, ...]:
    """A summary's constraints (empty without)."""
    return tuple(ConstraintSpec(**c) for c in extra.get(CONSTRAINTS_KEY) or ())


def ranking_entry(objectives: list[tuple[str, str]], constraints: Sequence[ConstraintSpec] = ()) -> dict[str, Any]:
    """What a summary's ``extra`` holds of how its trials rank: several ``objectives`` (nothing for one)
    and the ``constraints`` (nothing without)."""
    entry: dict[str, Any] = {}
    if len(objectives) > 1:
        entry[OBJECTIVES_KEY] = [{"name": name, "mode": mode} for name, mode in objectives]
    if constraints:
        entry[CONSTRAINTS_KEY] = [asdict(c) for c in constraints]
    return entry


def _scored(
    trials, objectives: list[tuple[str, str]], constraints: Sequence[ConstraintSpec]
) -> tuple[list[TrialRecord], list[tuple[float, ...]]]:
    """The trials with a usable value of every objective that keep the constraints, and those values."""
    kept, points = [], []
    for t in trials:
        values = [final_value(t, name) for name, _ in objectives]
        if objectives and all(v is not None for v in values) and feasible(t, constraints):
            kept.append(t)
            points.append(tuple(float(v) for v in values if v is not None))
    return kept, points


def _front_numbers(
    trials, objectives: list[tuple[str, str]], constraints: Sequence[ConstraintSpec] = (), limit: int | None = None
) -> dict[str, int]:
    """Each scored trial's front (0: the Pareto front), by trial id (``limit``: of the fronts that hold
    the first ``limit`` trials only)."""
    kept, points = _scored(trials, objectives, constraints)
    modes = [mode for _, mode in objectives]
    return {kept[i].trial_id: number for number, front in enumerate(fronts(points, modes, limit)) for i in front}


def pareto_front(
    trials, objectives: list[tuple[str, str]], constraints: Sequence[ConstraintSpec] = ()
) -> tuple[TrialRecord, ...]:
    """The trials no other trial dominates, among those with a usable value of every objective that keep
    the constraints, by the first objective (best first)."""
    kept, points = _scored(trials, objectives, constraints)
    if not kept:
        return ()
    front = [kept[i] for i in non_dominated(points, [mode for _, mode in objectives])]
    return tuple(rank_trials(front, objectives[0][0], objectives[0][1]))


def pareto_ranked(
    trials, objectives: list[tuple[str, str]], constraints: Sequence[ConstraintSpec] = (), limit: int | None = None
) -> list[TrialRecord]:
    """Every trial best first: the scored ones by front and crowding distance, then the others in order
    (``limit``: at least the first ``limit`` in order, the rest after them unordered)."""
    kept, points = _scored(trials, objectives, constraints)
    order = pareto_order(points, [mode for _, mode in objectives], limit)
    ranked = [kept[i] for i in order]
    placed = {t.trial_id for t in ranked}
    scored = {t.trial_id for t in kept}
    return [*ranked, *(t for t in kept if t.trial_id not in placed), *(t for t in trials if t.trial_id not in scored)]


_TRIAL_ID = re.compile(rf"^{re.escape(TRIAL_DIR_PREFIX)}([0-9a-f_]+)")


def collect(
    result_grid,
    experiment_dir: str,
    metric: str | None,
    mode: str | None,
    max_t: int,
    unfinished: set[str] | frozenset[str] = frozenset(),
    time_unit: str = "epoch",
    objectives: list[tuple[str, str]] | None = None,
    constraints: Sequence[ConstraintSpec] = (),
    numbers: Mapping[str, int | None] | None = None,
) -> SweepResult:
    """Build the :class:`SweepResult` from Tune's ResultGrid, trials in Tune's order;
    ``unfinished``: the ids of trials an interrupted sweep left running or pending (``interrupted``);
    ``numbers``: trials' numbers (:attr:`TrialRecord.number`) by id, for those whose reports do not say;
    ``max_t`` counts ``time_unit``s; ``objectives``: a sweep's several, as ``(name, mode)``; ``constraints``:
    its bounds on reported metrics."""
    trials = []
    for r in result_grid:
        history = r.metrics_dataframe
        last = dict(r.metrics or {})
        trial_id = last.get("trial_id") or _trial_id_from_path(r.path)
        reports = history.to_dict("records") if history is not None else []
        epochs, steps = trained([*reports, last])
        error = None if r.error is None else one_line_error(r.error)
        metrics = {k: v for k, v in last.items() if k not in TUNE_KEYS}
        number = creation_number(last.get("experiment_tag")) or (numbers or {}).get(trial_id)
        record = TrialRecord(
            trial_id, "stopped", plain(r.config or {}), plain(metrics), epochs, error, steps, number=number
        )
        if error:
            status = "failed"
        elif trial_id in unfinished:
            status = "interrupted"
        else:
            status = "completed" if ran_to_its_end(record.progress(time_unit), max_t, last) else "stopped"
        trials.append(replace(record, status=status))
    return SweepResult(
        experiment_dir,
        metric,
        mode,
        tuple(trials),
        best_trial(trials, metric, mode, objectives, constraints),
        {"time_unit": time_unit, **ranking_entry(objectives or [], constraints)},
    )


def in_creation_order(trials: Iterable[TrialRecord]) -> tuple[TrialRecord, ...]:
    """``trials`` by their numbers; those without one after, in the order given."""
    return tuple(sorted(trials, key=lambda t: (t.number is None, t.number or 0)))


def _trial_id_from_path(path: str | None) -> str:
    match = _TRIAL_ID.search(os.path.basename(path or ""))
    return match.group(1) if match else os.path.basename(path or "?")


def one_line_error(error: BaseException) -> str:
    """The root cause of a trial's error, on one line (Ray wraps it in several layers)."""
    cause = error
    while True:
        # A RayTaskError carries the trial's exception as .cause; Ray Train's ControllerError carries
        # what a Train callback raised (our MissingMetric) as .controller_failure.
        inner = getattr(cause, "cause", None)
        inner = inner if isinstance(inner, BaseException) else getattr(cause, "controller_failure", None)
        inner = inner if isinstance(inner, BaseException) else getattr(cause, "__cause__", None)
        if inner is None:
            break
        cause = inner
    text = str(cause).strip().splitlines()
    last = next((line for line in reversed(text) if line.strip()), type(cause).__name__)
    return redact_text(f"{type(cause).__name__}: {last.strip()}")[:500]


def write(result: SweepResult, directory: str | os.PathLike | None = None) -> None:
    """Write ``summary.json`` and ``best_config.yaml`` into ``directory`` (default: the experiment
    directory; on remote storage, its local mirror), secrets redacted (:mod:`tune_service.redaction`)."""
    directory = Path(result.experiment_dir if directory is None else directory)
    directory.mkdir(parents=True, exist_ok=True)
    atomic_write(directory / SUMMARY_FILE, json.dumps(redact(result.to_dict()), indent=2, sort_keys=False) + "\n")
    if result.best is not None:
        atomic_write(directory / BEST_CONFIG_FILE, yaml.safe_dump(redact(result.best.config), sort_keys=True))


def append_ended(trials: list[TrialRecord], directory: str | os.PathLike) -> None:
    """Append ``trials``, which have just ended, to ``ended_trials.jsonl`` in ``directory``, one JSON line
    each, secrets redacted. A running sweep's summary is written once, when its driver starts; each trial
    that ends then costs one line, however many ended before it. Raises OSError when the write fails (a
    line it cut off is ended before the next is written, and skipped when read)."""
    text = "".join(json.dumps(redact(_trial_dict(t)), sort_keys=False) + "\n" for t in trials)
    with open(Path(directory) / ENDED_TRIALS_FILE, "a+b") as log:
        if log.tell() > 0:  # "a+" starts at the end
            log.seek(-1, os.SEEK_END)
            if log.read(1) != b"\n":  # an earlier write failed part-way (a full disk)
                text = "\n" + text
        log.write(text.encode("utf-8"))
        log.flush()
        os.fsync(log.fileno())  # as durable as the summary's atomic writes


def load(experiment_dir: str | os.PathLike) -> SweepResult:
    """Read a sweep back from its experiment directory (or its URI on remote storage): a finished or
    interrupted sweep's summary, or a running sweep's partial one with the trials its log says ended
    since (a later record of a trial replaces an earlier one).

    Raises:
        TuneServiceError: there is no readable summary in the directory.
    """
    remote = is_remote(experiment_dir)
    summary = _in_experiment(experiment_dir, SUMMARY_FILE)
    try:
        data = json.loads(_read_text(summary))
    except (OSError, json.JSONDecodeError) as err:
        raise TuneServiceError(
            f"experiment: cannot read {str(summary)!r} ({type(err).__name__}); "
            f"is it the directory of a finished or interrupted sweep?"
        ) from None
    records = {t["trial_id"]: TrialRecord(**t) for t in data["trials"]}
    if data.get(IN_PROGRESS_KEY):
        records.update((t.trial_id, t) for t in read_ended(_in_experiment(experiment_dir, ENDED_TRIALS_FILE)))
    trials = tuple(records.values())
    derived = {"experiment_dir", "metric", "mode", "best", "trials", PARETO_KEY, HYPERVOLUME_KEY}
    extra = {k: v for k, v in data.items() if k not in derived}
    # The directory it was read from: an experiment directory may have been moved or copied.
    where = str(experiment_dir).rstrip("/") if remote else str(Path(experiment_dir).resolve())
    best = best_trial(trials, data["metric"], data["mode"], objectives_of(extra), constraints_of(extra))
    return SweepResult(where, data["metric"], data["mode"], trials, best, extra)


def _in_experiment(experiment_dir: str | os.PathLike, name: str) -> str | Path:
    """The file ``name`` of the experiment: a URI (a str) on remote storage, else a Path."""
    if is_remote(experiment_dir):
        return f"{str(experiment_dir).rstrip('/')}/{name}"
    return Path(experiment_dir) / name


def _read_text(file: str | Path) -> str:
    return read_remote_text(file) if isinstance(file, str) else file.read_text(encoding="utf-8")


def read_ended(file: str | Path) -> list[TrialRecord]:
    """The trials in an ended-trials log (a path, or a URI on remote storage), in the order they ended;
    none if there is no log. A line cut off by a crash or a full disk is skipped (``load_results`` reads
    that trial from its directory instead)."""
    try:
        text = _read_text(file)
    except FileNotFoundError:
        return []
    records = []
    for line in text.splitlines():
        try:
            records.append(TrialRecord(**json.loads(line)))
        except (ValueError, TypeError):
            continue
    return records
