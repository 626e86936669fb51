"""A sweep read back as data: :func:`load_results` gives a :class:`SweepResults` of an experiment
directory, finished or still running.

The tables (pandas DataFrames), named as Ray Tune's ``ResultGrid.get_dataframe()`` names its columns:

- ``trials``: one row per trial, in the order the trials were created. Columns: ``trial_id``,
  ``status`` (see below), ``epochs`` (epochs trained), ``time_total_s`` (Tune's seconds of training at
  the trial's last report; NaN before its first), ``error`` (one line; missing when none); then the trial's final
  metrics under their own names (``val_loss``, ``val_accuracy``, ``epoch``, ...; the sweep's metric
  first); then its config, one column per hyperparameter, ``config/`` and the parameter's dotted name
  (``config/lr``, ``config/optimizer.momentum``). A metric named like one of the first five columns is
  left out.
- ``lineage``: population-based training's exploits (``scheduler.type: pbt``), one row each: ``trial_id``,
  ``epoch`` (the donor's checkpoint the trial went on from), ``donor``, then the trial's config from
  then on (``config/<name>``); empty for any other sweep.
- ``history``: one row per report of every trial: ``trial_id``, ``epoch``, the reported metrics
  (``step`` among them), ``time_total_s``; by trial (as in ``trials``), then by the scheduler's time unit
  (:attr:`SweepResults.time_unit`: epoch, or step). A resumed trial reports some epochs (steps) again
  (those after its last checkpoint): the last report of each is kept.

A trial's ``status`` is :mod:`~tune_service.results.sweep_result`'s: ``completed``, ``stopped``,
``failed``, ``interrupted``, or ``running`` (started, not ended: still training, or its sweep stopped
before recording it). While a sweep runs, ``summary.json`` is partial (written when the driver starts,
with the trials that ``ended_trials.jsonl`` says ended since; :attr:`SweepResults.partial`) or absent: a
trial they do not list, or list as running, is read from its directory instead (``params.json``, ``result.json``, Tune's
``error.txt``; ``completed`` once it reached the epoch budget, ``stopped`` when Tune marked its last
report done before that, ``failed`` when Tune recorded a failure after its last report), which needs
the sweep's ``sweep.json`` when there is no summary (the metric, the epoch budget). The best trial is
chosen as in ``sweep_result``: the best last report on the sweep's metric, failed trials and non-finite
values never; a running trial counts with its last report. A complete summary lists every trial of the
sweep: a directory it does not list is a lost attempt (:attr:`SweepResults.lost_attempts`), not a trial.

Only a local experiment directory is read (not one on remote storage).
"""

from __future__ import annotations

import copy
import itertools
import math
import os
import re
import weakref
from dataclasses import replace
from functools import cached_property
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd
import yaml

from tune_service.errors import TuneServiceError
from tune_service.experiment import layout
from tune_service.experiment.remote import RemoteExperiment, is_remote
from tune_service.experiment.checkpoints import latest_checkpoint_dir
from tune_service.redaction import redact_text
from tune_service.results.lineage import lineage_frame, schedule
from tune_service.results.sweep_result import (
    IN_PROGRESS_KEY,
    TUNE_KEYS,
    SweepResult,
    TrialRecord,
    best_trial,
    is_number,
    load as load_summary,
    constraints_of,
    objectives_of,
    pareto_ranked,
    rank_trials,
    ran_to_its_end,
    ranking_entry,
    trained,
)
from tune_service.spec.configs import flatten, plain

#: The columns of ``trials`` before the metrics, in order.
RECORD_COLUMNS = ("trial_id", "status", "epochs", "time_total_s", "error")
#: The prefix of a config column of ``trials`` (Ray Tune's: ``config/lr``).
CONFIG_PREFIX = "config/"
#: Tune's seconds of training so far, in every report.
TIME_COLUMN = "time_total_s"
#: The status of a trial that has started and not ended (as :mod:`~tune_service.results.progress` has it).
RUNNING = "running"

#: Keys of a report that are not the trial's metrics (Tune's bookkeeping; Tune adds ``experiment_tag``
#: to a finished trial's last metrics).
_NOT_METRICS = TUNE_KEYS | {"experiment_tag"}
#: Prefixes a model's state dict has when it was saved from the DDP or ``torch.compile`` wrapper.
_WRAPPER_PREFIXES = ("module.", "_orig_mod.")


def load_results(experiment_dir: str | os.PathLike) -> "SweepResults":
    """Read the sweep in ``experiment_dir`` (what :func:`tune_service.run` wrote), finished or running.

    On remote storage (``s3://...``) the experiment is read from a temporary copy, its checkpoints
    excepted (so ``best_checkpoint`` is None there), removed once the returned object is.

    Raises:
        TuneServiceError: the directory is not a tune-service experiment directory, or it has no
            ``summary.json`` and no ``sweep.json`` to read its trials' directories by.
    """
    if is_remote(experiment_dir):
        downloaded = RemoteExperiment.existing(str(experiment_dir))
        results = load_results(downloaded.mirror)
        results.location = downloaded.uri
        weakref.finalize(results, downloaded.close)
        return results
    directory = Path(experiment_dir).resolve()
    if not directory.is_dir():
        raise TuneServiceError(f"results: {str(directory)!r} is not a directory")
    summary = load_summary(directory) if (directory / layout.SUMMARY_FILE).is_file() else None
    saved = _read_sweep_file(directory)
    if summary is None and saved is None:
        raise TuneServiceError(
            f"results: {str(directory)!r} has neither {layout.SUMMARY_FILE} nor "
            f"{layout.SWEEP_FILE}; is it the directory of a tune-service sweep?"
        )
    return SweepResults(directory, summary, saved)


class SweepResults:
    """A sweep's trials and reports as DataFrames, its best trial, that trial's checkpoint and model, and
    a spec that trains the best configuration again. Built by :func:`load_results`; read-only."""

    def __init__(self, experiment_dir: Path, summary: SweepResult | None, saved: Mapping[str, Any] | None):
        #: Where the experiment's files are read from (on remote storage: a temporary copy).
        self.experiment_dir = Path(experiment_dir)
        #: Where the experiment is, as its user names it: ``experiment_dir``, or its URI on remote storage.
        self.location = str(self.experiment_dir)
        self._saved = saved
        if summary is not None:
            self.metric, self.mode = summary.metric, summary.mode
            self._extra = dict(summary.extra)
        else:
            self.metric, self.mode = self.spec.metric.name, self.spec.metric.mode
            self._extra = ranking_entry(self.spec.objective_modes, self.spec.constraints)
        #: True when ``summary.json`` is absent or was written while the sweep ran.
        self.partial: bool = summary is None or bool(summary.extra.get(IN_PROGRESS_KEY))
        records = list(summary.trials) if summary is not None else []
        directories = layout.trial_dirs(self.experiment_dir)
        listed = {r.trial_id for r in records}
        unlisted = [trial_id for trial_id in directories if trial_id not in listed]
        #: The trial directories that a complete ``summary.json`` does not list (it lists every trial of the
        #: sweep): not trials but the first attempts of trials a killed driver had started after Tune's last
        #: save of its state, which the resume started again under another id (docs/how-it-runs.md). Left
        #: on disk, not read. While the summary is partial (the sweep running, or killed), every directory
        #: is a trial.
        self.lost_attempts: tuple[str, ...] = () if self.partial else tuple(unlisted)
        read = [*listed, *unlisted] if self.partial else list(listed)
        reports = {
            trial_id: layout.read_trial_results(layout.trial_results_file(self.experiment_dir, trial_id))
            for trial_id in read
        }
        # A running trial's record in a partial summary is as old as the summary: its directory is newer.
        records = [
            self._record_from_files(r.trial_id, reports[r.trial_id], r.config)
            if r.status == RUNNING and r.trial_id in directories
            else r
            for r in records
        ]
        if self.partial:
            unlisted.sort(key=lambda trial_id: (_started(reports[trial_id]), trial_id))
            records += [self._record_from_files(trial_id, reports[trial_id]) for trial_id in unlisted]
        #: Every trial as a :class:`~tune_service.results.sweep_result.TrialRecord`, as in ``trials``.
        self.records: tuple[TrialRecord, ...] = tuple(records)
        #: The best trial (None while no trial has a finite value of the metric, and for a sweep of
        #: several objectives: see :attr:`pareto`).
        self.best: TrialRecord | None = best_trial(
            self.records, self.metric, self.mode, objectives_of(self._extra), constraints_of(self._extra)
        )
        #: One row per trial (see the module's docstring for the columns).
        self.trials: pd.DataFrame = self._trials_frame(reports)
        #: One row per report of every trial, the last of each epoch (see the module's docstring).
        self.history: pd.DataFrame = _history_frame(self.records, reports, self.time_unit)
        #: Population-based training's exploits, one row each (:func:`~tune_service.results.lineage.lineage_frame`);
        #: empty for any other sweep.
        self.lineage: pd.DataFrame = lineage_frame(self.records)
        self._first_configs = {  # each trial's config at its first report (PBT changes it later)
            trial_id: rows[0]["config"]
            for trial_id, rows in reports.items()
            if rows and isinstance(rows[0].get("config"), dict)
        }

    def __repr__(self) -> str:
        counts = pd.Series([r.status for r in self.records], dtype=object).value_counts().to_dict()
        return (
            f"SweepResults({self.location!r}, {len(self.records)} trials {counts}, "
            f"best {None if self.best is None else self.best.trial_id})"
        )

    # -- the best trial -------------------------------------------------------------------------------

    @property
    def pareto(self) -> tuple[TrialRecord, ...]:
        """A sweep of several objectives: the trials on its Pareto front, by the first objective (one
        objective: the best trial)."""
        return self.result.pareto

    @property
    def best_config(self) -> dict[str, Any] | None:
        return self.result.best_config

    @property
    def best_metrics(self) -> dict[str, Any] | None:
        return self.result.best_metrics

    @property
    def result(self) -> SweepResult:
        """The same trials as a :class:`~tune_service.results.sweep_result.SweepResult` (what ``run`` returns)."""
        return SweepResult(self.location, self.metric, self.mode, self.records, self.best, self._extra)

    def leaderboard(self, top: int = 10) -> str:
        """The best ``top`` trials as a text table (see :meth:`SweepResult.leaderboard`)."""
        return self.result.leaderboard(top)

    def ranked(self) -> list[TrialRecord]:
        """Every trial, best first (several objectives: by front and crowding distance); those without a
        usable value of the metric (of every objective) last."""
        objectives, constraints = objectives_of(self._extra), constraints_of(self._extra)
        if len(objectives) > 1:
            return pareto_ranked(self.records, objectives, constraints)
        return rank_trials(self.records, self.metric, self.mode, constraints)

    @property
    def best_checkpoint(self) -> Path | None:
        """The newest complete checkpoint directory of the best trial (it holds ``state.pt``), or None."""
        if self.best is None:
            return None
        return latest_checkpoint_dir(layout.trial_dir(self.experiment_dir, self.best.trial_id))

    def load_best_model(self, task: Any = None):
        """The best trial's model: built by the sweep's task (from ``sweep.json``) with the trial's config
        over the task's defaults, its weights loaded from :attr:`best_checkpoint` onto the CPU, in eval
        mode. A state saved from a DDP (``module.``) or compiled (``_orig_mod.``) wrapper loads too.

        Args:
            task: the task object, if the sweep was run with one (``run(..., task=...)``).

        Raises:
            TuneServiceError: no best trial, no checkpoint of it, or a task that cannot rebuild the model.
        """
        from tune_service.tasks import resolve_task
        from tune_service.training.checkpoint import load_state

        best = self._require_best("load its model")
        checkpoint = self.best_checkpoint
        if checkpoint is None:
            raise TuneServiceError(
                f"results: the best trial {best.trial_id} of {str(self.experiment_dir)!r} has no "
                f"checkpoint (training.checkpoint_every: 0?)"
            )
        if task is None and self._saved is not None and self._saved.get("task_object"):
            raise TuneServiceError(
                f"task: this sweep ran with a task object ({self._saved['task_object']}); "
                f"pass the same task to load_best_model(task=...)"
            )
        resolved = resolve_task(task if task is not None else self.spec.task)
        if resolved.task is None:
            raise TuneServiceError(
                f"task: {resolved.reference} is a train_loop_per_worker, whose checkpoints are "
                f"its own; load {str(checkpoint)!r} with your own code"
            )
        model = resolved.task.model({**resolved.task.defaults, **best.config})
        model.load_state_dict(_unwrapped_state(load_state(checkpoint, map_location="cpu")["model"]))
        return model.eval()

    def best_spec(self, path: str | os.PathLike | None = None, trial: str | None = None) -> dict[str, Any]:
        """A spec that trains the best configuration once: the sweep's own (from ``sweep.json``), named
        ``<name>-best``, with every parameter fixed to the best trial's value (``{value: ...}``; a
        conditional parameter the trial did not receive is left out), ``method: grid``, ``run_cap: 1``
        and a FIFO scheduler over the sweep's epoch budget (``scheduler.max_t``), no early stopping.
        Of a PBT sweep whose best trial's weights were trained with changing values (it, or a donor, was
        exploited): the values they started with, and ``scheduler.type: pbt_replay`` with the changes at
        their epochs (:meth:`family`), as Ray's PBT replay runs a trial's policy.

        Any other trial's configuration is trained the same way when ``trial`` names it (the spec is then
        named ``<name>-<trial id>``); a sweep of several objectives has no one best trial, so the user
        picks one, usually of its front (:attr:`pareto`).

        Args:
            path: where to write it as YAML (``tune-run PATH`` then runs it); not written when None.
            trial: the id of the trial to train again (any of the sweep's); None: the best trial, which a
                sweep of several objectives does not have (pick one of :attr:`pareto`).

        Returns:
            The spec as a mapping (what :func:`tune_service.load_spec` takes).

        Raises:
            TuneServiceError: no best trial yet (several objectives: ``trial`` not given), no trial called
                ``trial``, or no ``sweep.json`` in the experiment directory.
        """
        best = self._chosen(trial, "write its spec")
        spec = self.spec
        source = copy.deepcopy(dict(spec.source))
        source.pop("early_terminate", None)  # W&B's early stopping, read as the scheduler: none now
        family = self.family(best.trial_id) if best.lineage else []
        fixed = {}
        for parameter in spec.parameters:
            found, value = _lookup(family[0]["config"] if family else best.config, parameter.name)
            if found:
                fixed[parameter.name] = {"value": value}
        scheduler: dict[str, Any] = {"type": "fifo", "max_t": spec.scheduler.max_t}
        changes = _changes(family, [p.name for p in spec.parameters])
        if changes:  # PBT changed the values the best trial's weights were trained with: replay them
            scheduler = {"type": "pbt_replay", "max_t": spec.scheduler.max_t, "schedule": changes}
        objectives = [name for name, _ in objectives_of(self._extra)] or [self.metric or ""]
        scores = ", ".join(f"{name} {best.metrics.get(name)!r}" for name in objectives if name)
        which = (
            "the best trial"
            if self.best is not None and best.trial_id == self.best.trial_id
            else "a trial on the Pareto front"
            if best in self.pareto
            else "a trial"
        )
        source.update(
            name=f"{spec.name}-{'best' if which == 'the best trial' else best.trial_id}",
            method="grid",
            run_cap=1,
            parameters=fixed,
            scheduler=scheduler,
            description=f"{which} ({best.trial_id}) of sweep {spec.name}: {scores}",
        )
        from tune_service.spec import load_spec

        load_spec(source)  # what it writes runs
        if path is not None:
            header = [
                f"# The configuration of {which} ({best.trial_id}) of the sweep in {self.experiment_dir}, "
                f"trained once: tune-run this file."
            ]
            task_object = (self._saved or {}).get("task_object")
            if task_object:
                header.append(
                    f"# The sweep ran with a task object ({task_object}): pass it again, "
                    f"tune_service.run(this file, task=...)."
                )
            text = "\n".join(header) + "\n" + yaml.safe_dump(plain(source), sort_keys=False)
            layout.atomic_write(Path(path), text)
        return source

    def family(self, trial_id: str) -> list[dict[str, Any]]:
        """The schedule trial ``trial_id``'s weights were trained with, through its donors
        (:func:`tune_service.results.lineage.schedule`): one segment for a trial PBT never exploited."""
        records = {r.trial_id: r for r in self.records}
        return schedule(trial_id, records, lambda t: self._first_configs.get(t) or records[t].config)

    @cached_property
    def spec(self):
        """The sweep's spec, from ``sweep.json`` (a :class:`~tune_service.spec.SweepSpec`).

        Raises:
            TuneServiceError: the experiment directory has no ``sweep.json``.
        """
        from tune_service.spec import load_spec

        if self._saved is None:
            raise TuneServiceError(
                f"results: {str(self.experiment_dir)!r} has no {layout.SWEEP_FILE}, which holds the sweep's spec"
            )
        return load_spec(self._saved["spec"])

    # -- reading ---------------------------------------------------------------------------------------

    def _chosen(self, trial: str | None, what: str) -> TrialRecord:
        """Trial ``trial`` of the sweep; None: the best trial (several objectives have none: the user
        picks one, and the error names the front)."""
        if trial is not None:
            for record in self.records:
                if record.trial_id == trial:
                    return record
            raise TuneServiceError(f"trial: no trial of {str(self.experiment_dir)!r} is called {trial!r}")
        if len(objectives_of(self._extra)) > 1:
            front = ", ".join(t.trial_id for t in self.pareto) or "none yet"
            raise TuneServiceError(
                f"trial: a sweep of several objectives has no one best trial; choose one to {what}, "
                f"such as a trial on its Pareto front ({front}), got None"
            )
        return self._require_best(what)

    def _require_best(self, what: str) -> TrialRecord:
        if self.best is None:
            raise TuneServiceError(
                f"results: no trial of {str(self.experiment_dir)!r} has a finite {self.metric} "
                f"yet, so there is no best trial to {what}"
            )
        return self.best

    @property
    def time_unit(self) -> str:
        """What ``max_t``, the rungs and the history's order count: ``epoch`` or ``step``."""
        unit = self._extra.get("time_unit")
        return str(unit) if isinstance(unit, str) else self.spec.scheduler.time_unit

    def _max_t(self) -> int:
        max_t = self._extra.get("max_t")
        return int(max_t) if isinstance(max_t, int) else self.spec.scheduler.max_t

    def _record_from_files(
        self, trial_id: str, reports: list[dict[str, Any]], config: dict[str, Any] | None = None
    ) -> TrialRecord:
        """A trial's record from its directory and its ``reports`` (for a trial ``summary.json`` does not
        list, or lists as running); ``config``: the summary's, if it has one."""
        trial_dir = layout.trial_dir(self.experiment_dir, trial_id)
        last = reports[-1] if reports else {}
        if config is None:
            config = layout.read_trial_params(trial_dir)
            config = config if config is not None else last.get("config", {})
        epochs, steps = trained(reports)
        if not any("epoch" in r for r in reports):  # reports without epochs: Tune's count of them
            epochs = max(
                (int(r["training_iteration"]) for r in reports if is_number(r.get("training_iteration"))), default=0
            )
        failure = layout.read_trial_error(trial_dir)
        # A failure the trial has reported after (Tune's timestamps are whole seconds) was retried.
        failed = failure is not None and not (is_number(last.get("timestamp")) and last["timestamp"] > failure[1])
        error = None
        record = TrialRecord(trial_id, RUNNING, plain(config), {}, epochs, None, steps)
        if ran_to_its_end(record.progress(self.time_unit), self._max_t(), last):
            status = "completed"
        elif last.get("done") is True:
            status = "stopped"
        elif failed and failure is not None:
            status, error = "failed", _one_line(failure[0])
        else:
            status = RUNNING
        metrics = {k: v for k, v in last.items() if k not in _NOT_METRICS}
        return replace(record, status=status, metrics=plain(metrics), error=error)

    def _trials_frame(self, reports: Mapping[str, list[dict[str, Any]]]) -> pd.DataFrame:
        rows: list[dict[str, Any]] = []
        metric_columns: dict[str | None, None] = {self.metric: None}
        config_columns: dict[str, None] = {}
        for record in self.records:
            times = [r[TIME_COLUMN] for r in reports[record.trial_id] if is_number(r.get(TIME_COLUMN))]
            row = {
                "trial_id": record.trial_id,
                "status": record.status,
                "epochs": record.epochs,
                TIME_COLUMN: float(times[-1]) if times else math.nan,
                "error": record.error,
            }
            for key, value in record.metrics.items():
                if key not in _NOT_METRICS and key not in row:
                    row[key] = value
                    metric_columns.setdefault(key)
            for key, value in flatten(record.config).items():
                row[CONFIG_PREFIX + key] = value
                config_columns.setdefault(CONFIG_PREFIX + key)
            rows.append(row)
        if not any(self.metric in row for row in rows):
            metric_columns.pop(self.metric)
        return pd.DataFrame(rows, columns=[*RECORD_COLUMNS, *metric_columns, *config_columns])


def _one_line(line: str) -> str:
    """The last line of Tune's ``error.txt`` as ``Type: message`` (as
    :func:`~tune_service.results.sweep_result.one_line_error` writes a trial's error), redacted."""
    head, sep, message = line.partition(": ")
    if sep and re.fullmatch(r"[A-Za-z_][\w.]*", head):
        line = f"{head.rsplit('.', 1)[-1]}: {message}"
    return redact_text(line)[:500]


def _history_frame(records, reports: Mapping[str, list[dict[str, Any]]], time_attr: str) -> pd.DataFrame:
    rows: list[dict[str, Any]] = []
    metric_columns: dict[str, None] = {}
    for record in records:
        by_time: dict[Any, tuple[Any, dict[str, Any]]] = {}
        for index, report in enumerate(reports[record.trial_id]):
            time = _time_of(report, time_attr)
            row = {"trial_id": record.trial_id, "epoch": time if time_attr == "epoch" else report.get("epoch")}
            for key, value in report.items():
                if key not in _NOT_METRICS and key not in row:
                    row[key] = value
                    metric_columns.setdefault(key)
            row[TIME_COLUMN] = report.get(TIME_COLUMN, math.nan)
            at = time if time is not None else ("report", index)
            by_time.pop(at, None)  # the newest is kept, in order
            by_time[at] = (time, row)
        rows += [row for _, row in sorted(by_time.values(), key=lambda pair: (pair[0] is None, pair[0] or 0))]
    return pd.DataFrame(rows, columns=["trial_id", "epoch", *metric_columns, TIME_COLUMN])


def metric_by_time(
    reports: Sequence[Mapping[str, Any]], metric: str | None, time_attr: str = "epoch"
) -> list[tuple[int, float]]:
    """``(time, metric)`` of a trial's ``reports`` (its ``result.json``, as the layout reads it), by the
    scheduler's time (``time_attr``: ``epoch`` or ``step``). A resumed trial may repeat a report: the
    last of each time counts; none without a metric."""
    if metric is None:
        return []
    by_time: dict[int, float] = {}
    for report in reports:
        value, time = report.get(metric), _time_of(report, time_attr)
        if is_number(value) and time is not None:
            by_time[time] = float(value)
    return sorted(by_time.items())


def _time_of(report: Mapping[str, Any], time_attr: str) -> int | None:
    """A report's time in the scheduler's unit (``time_attr``), or Tune's count of reports when it has none."""
    for key in (time_attr, "training_iteration"):
        if is_number(report.get(key)):
            return int(report[key])
    return None


def _started(reports: list[dict[str, Any]]) -> float:
    """When a trial first reported (Tune's ``timestamp``), to order the trials the summary does not list;
    those yet to report come last."""
    first = reports[0].get("timestamp") if reports else None
    return float(first) if is_number(first) else math.inf


def _read_sweep_file(directory: Path) -> dict[str, Any] | None:
    try:
        saved = layout.read_sweep_file(directory)
    except (OSError, ValueError) as err:
        raise TuneServiceError(
            f"results: cannot read {str(directory / layout.SWEEP_FILE)!r} ({type(err).__name__})"
        ) from None
    if saved is not None and not isinstance(saved.get("spec"), dict):
        raise TuneServiceError(f"results: {str(directory / layout.SWEEP_FILE)!r} holds no spec")
    return saved


def _changes(family: list[dict[str, Any]], names: list[str]) -> list[dict[str, Any]]:
    """``scheduler.schedule`` of a replay of ``family`` (:meth:`SweepResults.family`): after each segment,
    the parameters (``names``) whose values the next one changed."""
    changes = []
    for before, after in itertools.pairwise(family):
        old, new = flatten(before["config"]), flatten(after["config"])
        changed = {k: new[k] for k in names if k in new and new[k] != old.get(k)}
        if changed:
            changes.append({"epoch": after["from_epoch"] - 1, "config": changed})
    return changes


def _lookup(config: Mapping[str, Any], name: str) -> tuple[bool, Any]:
    """The value of the parameter with dotted ``name`` in a trial's ``config`` (nested, or with the name as
    one flat key, as :func:`tune_service.spec.configs.nest` leaves some), and whether it is there."""
    if name in config:
        return True, config[name]
    parts = name.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        head = ".".join(parts[:cut])
        if isinstance(config.get(head), Mapping):
            found, value = _lookup(config[head], ".".join(parts[cut:]))
            if found:
                return True, value
    return False, None


def _unwrapped_state(state: Mapping[str, Any]) -> dict[str, Any]:
    """A model's state dict without the prefixes of the wrappers it may have been saved from."""
    state = dict(state)
    while state:
        prefix = next((p for p in _WRAPPER_PREFIXES if all(k.startswith(p) for k in state)), None)
        if prefix is None:
            break
        state = {k[len(prefix) :]: v for k, v in state.items()}
    return state
