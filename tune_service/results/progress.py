"""A running sweep, trial by trial, as Tune reports it: what the live view shows, and the
``summary.json`` that is written each time a trial ends, so a running sweep can be read
(``tune-run results DIR``, ``tune_service.load_results``) before it finishes.

:class:`SweepProgress` is a Tune callback in the driver. It keeps one :class:`TrialRecord` per trial,
with the statuses of :mod:`~tune_service.results.sweep_result` plus ``running`` (started, not ended),
and tells its observers (:class:`ProgressObserver`, such as the live view) of every change. A partial
summary carries ``"in_progress": true``; the summary written when the sweep ends replaces it.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterable, Protocol

from tune_service.experiment.callbacks import DriverCallback
from tune_service.redaction import redact_text
from tune_service.experiment.layout import SUMMARY_FILE
from tune_service.experiment.saving import FailingSaves
from tune_service.results.lineage import exploit_of
from tune_service.results.sweep_result import (
    IN_PROGRESS_KEY,
    TUNE_KEYS,
    SweepResult,
    TrialRecord,
    best_trial,
    one_line_error,
    ran_to_its_end,
    trained,
    write,
)
from tune_service.spec.configs import plain

logger = logging.getLogger(__name__)


class ProgressObserver(Protocol):
    """What a view of a running sweep is told. ``progress`` holds every trial's record."""

    def trial_started(self, progress: "SweepProgress", trial: TrialRecord) -> None: ...

    def trial_reported(self, progress: "SweepProgress", trial: TrialRecord) -> None: ...

    def trial_ended(self, progress: "SweepProgress", trial: TrialRecord) -> None: ...

    def tick(self, progress: "SweepProgress") -> None:
        """Called once per step of Tune's loop (several times a second): a chance to redraw."""


class SweepProgress(DriverCallback):
    """Every trial's record while the sweep runs; ``summary.json`` rewritten when a trial ends.

    Args:
        experiment_dir: where ``summary.json`` goes.
        max_t: a trial that reached it is ``completed``; one that ended before it, ``stopped``.
        total: the trial budget (``run_cap`` or the grid's size).
        time_unit: what ``max_t`` counts, ``epoch`` or ``step``.
        previous: on resume, the summary the sweep had: its ended trials are kept as they were.
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
    ):
        super().__init__(f"{Path(experiment_dir).name}/progress")
        self.experiment_dir, self.metric, self.mode = str(experiment_dir), metric, mode
        self.max_t, self.total, self.time_unit = max_t, total, time_unit
        self.observers = list(observers)
        self.started_at = time.monotonic()
        self.trials: dict[str, TrialRecord] = {}
        for t in previous.trials if previous else ():
            if t.status in ENDED:
                self.trials[t.trial_id] = t
        self._summary_saves = FailingSaves(SUMMARY_FILE)

    # -- what the views read -------------------------------------------------------------------------
    @property
    def ended(self) -> list[TrialRecord]:
        return [t for t in self.trials.values() if t.status in ENDED]

    @property
    def running(self) -> list[TrialRecord]:
        return [t for t in self.trials.values() if t.status == "running"]

    @property
    def best(self) -> TrialRecord | None:
        return best_trial(self.ended, self.metric, self.mode)

    def snapshot(self) -> SweepResult:
        """The sweep so far, as a :class:`SweepResult` marked in progress."""
        return self._result(tuple(self.trials.values()), {IN_PROGRESS_KEY: True})

    def interrupted(self) -> SweepResult:
        """The sweep as it stands, its running trials ``interrupted``: what a driver that cannot wait for
        Tune to stop writes (:mod:`~tune_service.execution.termination`)."""
        trials = tuple(
            replace(t, status="interrupted") if t.status == "running" else t for t in list(self.trials.values())
        )
        return self._result(trials, {})

    def _result(self, trials: tuple[TrialRecord, ...], extra: dict[str, Any]) -> SweepResult:
        best = best_trial(trials, self.metric, self.mode)
        return SweepResult(
            self.experiment_dir,
            self.metric,
            self.mode,
            trials,
            best,
            {**extra, "max_t": self.max_t, "time_unit": self.time_unit},
        )

    # -- Tune's events -------------------------------------------------------------------------------
    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        record = self._update(trial, "running", getattr(trial, "last_result", None) or {})
        exploit = exploit_of(trial)  # a PBT exploit: it starts from another trial's checkpoint
        if exploit is not None:
            # The donor's exploits so far, which its checkpoint descends from (as Ray's PBT copies the
            # donor's policy to the trial's when it exploits): the trial's family tree (lineage.schedule).
            donor = self.trials.get(exploit["donor"])
            exploit["donor_exploits"] = len(donor.lineage) if donor else 0
            record = self.trials[trial.trial_id] = replace(record, lineage=[*record.lineage, exploit])
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
        old = self.trials.get(trial.trial_id)
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
        )
        self.trials[trial.trial_id] = record
        return record

    def _ended(self, record: TrialRecord) -> None:
        self.trials[record.trial_id] = record
        self._write_summary()
        for observer in self.observers:
            observer.trial_ended(self, record)

    def _write_summary(self) -> None:
        self._summary_saves.attempt(lambda: write(self.snapshot()))  # tried again when the next trial ends


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
