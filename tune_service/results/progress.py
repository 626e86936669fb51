"""A running sweep, trial by trial, as Tune reports it: what the live view shows, and the files that let
a running sweep be read (``tune-run results DIR``, ``tune_service.load_results``) before it finishes.

:class:`SweepProgress` is a Tune callback in the driver. It keeps a :class:`TrialRecord` of each running
trial, with the statuses of :mod:`~tune_service.results.sweep_result` plus ``running`` (started, not
ended), and tells its observers (:class:`ProgressObserver`, such as the live view) of every change.

Its cost per event does not grow with the sweep's history, so a sweep of thousands of trials pays for
its ten-thousandth trial what it paid for its first: a partial summary (``"in_progress": true``) is
written once, when the driver starts, and each trial that ends is appended to ``ended_trials.jsonl``
as one line (:func:`~tune_service.results.sweep_result.append_ended`); reading the two together gives
the sweep so far. Of the ended trials only counts, the best, the few last and those with a PBT lineage
stay in memory. The summary written when the sweep ends replaces the partial one.
"""

from __future__ import annotations

import logging
import os
import time
from collections import deque
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterable, Mapping, Protocol, Sequence

from tune_service.experiment.callbacks import DriverCallback
from tune_service.redaction import redact_text
from tune_service.experiment.layout import ENDED_TRIALS_FILE, creation_number
from tune_service.experiment.saving import FailingSaves
from tune_service.results.lineage import exploit_of
from tune_service.results.sweep_result import (
    IN_PROGRESS_KEY,
    TUNE_KEYS,
    SweepResult,
    TrialRecord,
    append_ended,
    best_trial,
    in_creation_order,
    ranking_entry,
    one_line_error,
    ran_to_its_end,
    read_ended,
    trained,
    write,
)
from tune_service.spec.configs import plain
from tune_service.spec.sweep import ConstraintSpec

logger = logging.getLogger(__name__)

#: How many of the trials that ended last the progress keeps (for the views).
RECENTLY_ENDED = 10


class ProgressObserver(Protocol):
    """What a view of a running sweep is told: ``progress`` holds the running trials' records, counts the
    ended ones and knows the best."""

    def trial_started(self, progress: "SweepProgress", trial: TrialRecord) -> None: ...

    def trial_reported(self, progress: "SweepProgress", trial: TrialRecord) -> None: ...

    def trial_ended(self, progress: "SweepProgress", trial: TrialRecord) -> None: ...

    def tick(self, progress: "SweepProgress") -> None:
        """Called once per step of Tune's loop (several times a second): a chance to redraw."""


class SweepProgress(DriverCallback):
    """The running trials' records, the ended ones' count and best, and the sweep's files so far.

    Args:
        experiment_dir: where ``summary.json`` and ``ended_trials.jsonl`` go.
        max_t: a trial that reached it is ``completed``; one that ended before it, ``stopped``.
        total: the trial budget (``run_cap`` or the grid's size).
        time_unit: what ``max_t`` counts, ``epoch`` or ``step``.
        previous: on resume, the summary the sweep had: its ended trials are kept as they were.
        lineages: on resume, the PBT exploits each unended trial went on from before the driver died (by
            trial id: :meth:`~tune_service.search.population_journal.PopulationHistory.lineages`).
        objectives: a sweep's several objectives, ``(name, mode)`` each: it then has a front, no best.
        constraints: the sweep's bounds on reported metrics: a trial that breaks one is never the best.
    """

    def __init__(
        self,
        experiment_dir: str | Path,
        metric: str | None,
        mode: str | None,
        max_t: int,
        total: int,
        observers: Iterable[ProgressObserver] = (),
        previous: SweepResult | None = None,
        time_unit: str = "epoch",
        lineages: Mapping[str, list[dict[str, Any]]] | None = None,
        objectives: list[tuple[str, str]] | None = None,
        constraints: Sequence[ConstraintSpec] = (),
    ):
        super().__init__(f"{Path(experiment_dir).name}/progress")
        self.experiment_dir, self.metric, self.mode = str(experiment_dir), metric, mode
        self.max_t, self.total, self.time_unit = max_t, total, time_unit
        self.objectives = list(objectives or [])
        self.constraints = tuple(constraints)
        self.observers = list(observers)
        self.started_at = time.monotonic()
        #: The trials started and not yet ended, by id.
        self.trials: dict[str, TrialRecord] = {}
        #: How many trials have ended (a resumed sweep's earlier ones included).
        self.ended_count = 0
        #: The best ended trial (None while none has a finite value of the metric).
        self.best: TrialRecord | None = None
        #: The last trials to end, the newest last.
        self.recently_ended: deque[TrialRecord] = deque(maxlen=RECENTLY_ENDED)
        #: Every trial with a PBT lineage (running or ended), by id: the final results take theirs from here.
        self.exploited: dict[str, TrialRecord] = {}
        self._previous = tuple(t for t in (previous.trials if previous else ()) if t.status in ENDED)
        for t in self._previous:
            self._count_ended(t)
        ended = self._previously_ended = frozenset(t.trial_id for t in self._previous)
        for trial_id, lineage in (lineages or {}).items():
            if trial_id not in ended:  # the record is the trial's once it starts again (_update keeps its lineage)
                self.exploited[trial_id] = TrialRecord(trial_id, "running", {}, {}, 0, lineage=list(lineage))
        self._ended_saves = FailingSaves(ENDED_TRIALS_FILE)
        self._unsaved: list[TrialRecord] = []  # ended trials whose line could not be written yet

    def start(self) -> None:
        """Write the partial summary: the sweep's metric and budget, and the trials an earlier run of a
        resumed sweep ended. Call it once, before the sweep runs."""
        FailingSaves("summary.json").attempt(lambda: write(self._result(self._previous, {IN_PROGRESS_KEY: True})))

    # -- what the views read -------------------------------------------------------------------------
    @property
    def running(self) -> list[TrialRecord]:
        return list(self.trials.values())  # a trial leaves ``trials`` when it ends

    @property
    def last_ended(self) -> TrialRecord | None:
        return self.recently_ended[-1] if self.recently_ended else None

    def ended_before(self, trial_id: str) -> bool:
        """Whether the trial had ended in an earlier run of a resumed sweep (by the service's records)."""
        return trial_id in self._previously_ended

    def saved(self, trial_id: str) -> bool:
        """Of a trial that Tune has ended: whether its line is in ``ended_trials.jsonl`` (False while a
        failed write keeps it in memory, to be tried again, or before this callback has heard it end)."""
        return trial_id not in self.trials and all(t.trial_id != trial_id for t in self._unsaved)

    def interrupted(self) -> SweepResult:
        """The sweep as it stands, its running trials ``interrupted``: what a driver that cannot wait for
        Tune to stop writes (:mod:`~tune_service.execution.termination`). Reads the ended trials back."""
        trials = self._ended_records()
        for t in self.running:
            trials[t.trial_id] = replace(t, status="interrupted")
        return self._result(in_creation_order(trials.values()), {})

    def final(self, held: SweepResult) -> SweepResult:
        """The sweep's results once Tune's loop has ended: ``held``, what Tune still holds (collected from
        its ResultGrid), over every trial that ended before (this run's, read back from
        ``ended_trials.jsonl``, and an earlier run's), in the order the trials were created. Trials that
        left Tune's controller as they ended (:mod:`~tune_service.execution.retiring`) are in the log only."""
        trials = self._ended_records()
        for t in held.trials:  # Tune's own record of a trial it still holds, as before trials retired
            known = trials.get(t.trial_id)
            trials[t.trial_id] = t if t.number is not None or known is None else replace(t, number=known.number)
        ordered = in_creation_order(trials.values())
        best = best_trial(ordered, held.metric, held.mode, held.objectives, held.constraints)
        return replace(held, trials=ordered, best=best)

    def _ended_records(self) -> dict[str, TrialRecord]:
        """Every trial that has ended (an earlier run's, then this run's from the log and those whose line
        is not written yet), by id; a later record of a trial replaces an earlier one."""
        trials = {t.trial_id: t for t in self._previous}
        trials.update((t.trial_id, t) for t in read_ended(Path(self.experiment_dir) / ENDED_TRIALS_FILE))
        trials.update((t.trial_id, t) for t in self._unsaved)
        return trials

    def _result(self, trials: tuple[TrialRecord, ...], extra: dict[str, Any]) -> SweepResult:
        best = best_trial(trials, self.metric, self.mode, self.objectives, self.constraints)
        return SweepResult(
            self.experiment_dir,
            self.metric,
            self.mode,
            trials,
            best,
            {
                **extra,
                "max_t": self.max_t,
                "time_unit": self.time_unit,
                **ranking_entry(self.objectives, self.constraints),
            },
        )

    # -- Tune's events -------------------------------------------------------------------------------
    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        record = self._update(trial, "running", getattr(trial, "last_result", None) or {})
        exploit = exploit_of(trial)  # a PBT exploit: it starts from another trial's checkpoint
        if exploit is not None:
            # The donor's exploits so far, which its checkpoint descends from (as Ray's PBT copies the
            # donor's policy to the trial's when it exploits): the trial's family tree (lineage.schedule).
            donor = self.trials.get(exploit["donor"]) or self.exploited.get(exploit["donor"])
            exploit["donor_exploits"] = len(donor.lineage) if donor else 0
            record = self.trials[trial.trial_id] = replace(record, lineage=[*record.lineage, exploit])
            self.exploited[trial.trial_id] = record
        for observer in self.observers:
            observer.trial_started(self, record)

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict, **info: Any) -> None:
        record = self._update(trial, "running", result)
        for observer in self.observers:
            observer.trial_reported(self, record)

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        record = self._update(trial, None, getattr(trial, "last_result", None) or {})
        completed = ran_to_its_end(record.progress(self.time_unit), self.max_t, getattr(trial, "last_result", None))
        self._ended(replace(record, status="completed" if completed else "stopped"))

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        record = self._update(trial, None, getattr(trial, "last_result", None) or {})
        self._ended(replace(record, status="failed", error=trial_error_line(trial)))

    def on_step_end(self, iteration: int, trials: list, **info: Any) -> None:
        for observer in self.observers:
            observer.tick(self)

    # -- bookkeeping ---------------------------------------------------------------------------------
    def _update(self, trial: Any, status: str | None, result: dict) -> TrialRecord:
        old = self.trials.get(trial.trial_id) or self.exploited.get(trial.trial_id)
        metrics = {k: v for k, v in result.items() if k not in TUNE_KEYS}
        epochs, steps = trained([result])
        if "epoch" not in result:  # a report without epochs: Tune's count of them
            epochs = int(result.get("training_iteration") or (old.epochs if old else 0))
        record = TrialRecord(
            trial.trial_id,
            status or (old.status if old else "running"),
            plain(trial.config or {}),
            plain(metrics) or (old.metrics if old else {}),
            epochs,
            steps=steps if steps is not None else (old.steps if old else None),
            lineage=old.lineage if old else [],
            number=creation_number(getattr(trial, "experiment_tag", None)),
        )
        self.trials[trial.trial_id] = record
        if record.lineage:
            self.exploited[trial.trial_id] = record
        return record

    def _ended(self, record: TrialRecord) -> None:
        self.trials.pop(record.trial_id, None)
        if record.trial_id in self._previously_ended:
            # Tune's state, saved before the trial ended and the driver was killed, had it running: it was
            # stopped before it started again (or went on from its last checkpoint and ended there again,
            # where ended trials stay in Tune). It is in the records already.
            return
        self._count_ended(record)
        self._unsaved.append(record)
        if self._ended_saves.attempt(lambda: append_ended(self._unsaved, self.experiment_dir)):
            self._unsaved = []  # else tried again, with the next trial's line, when the next trial ends
        for observer in self.observers:
            observer.trial_ended(self, record)

    def _count_ended(self, record: TrialRecord) -> None:
        self.ended_count += 1
        self.recently_ended.append(record)
        if record.lineage:
            self.exploited[record.trial_id] = record
        if best_trial([record], self.metric, self.mode, self.objectives, self.constraints) is not None:
            # the earlier of two equal values stays the best, as best_trial ranks a whole sweep
            self.best = best_trial([t for t in (self.best, record) if t is not None], self.metric, self.mode)


def trial_error_line(trial: Any) -> str:
    """A failed trial's error on one line, read back from what Tune stored: when a trial errs, Tune has
    written its error into the trial's local directory (before it calls the callbacks), and copies it
    to storage only later."""
    try:
        local = getattr(trial, "pickled_error_file", None)
        if local and os.path.isfile(local):
            import ray.cloudpickle

            with open(local, "rb") as f:
                return one_line_error(ray.cloudpickle.load(f))
        error = trial.get_pickled_error()
        if error is not None:
            return one_line_error(error)
        text = trial.get_error() or ""
    except Exception:  # noqa: BLE001 - reading the error back must not fail the sweep
        text = ""
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return redact_text(lines[-1])[:500] if lines else "failed"


#: The statuses of a trial that has ended (for this run of the driver).
ENDED = frozenset({"completed", "stopped", "failed"})
