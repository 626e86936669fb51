"""Tune's per-trial result files (``result.json``, ``progress.csv``), kept whole when a trial starts again.

When a trial that has a checkpoint starts (a resumed sweep's, but also one unpaused by HyperBand or PBT,
or exploited by PBT), Tune's JSON and CSV loggers copy the trial's file from the experiment's storage over
the driver's own copy. Within one driver's run the driver's copy is the newest: the one in storage lags
by up to a state-save period (:data:`~tune_service.experiment.state_saves.STATE_SAVE_PERIOD_S`), so a trial
paused and started again within it lost the reports in between (a PBT sweep on two cores lost most of
its rows). These loggers copy a trial's file from storage once per trial in a driver's run (its first
start: a resumed sweep's trial gets its history back) and keep the driver's own copy after that.

The copy is Tune's own method (``LoggerCallback._restore_from_remote``), named in
:mod:`tune_service.ray_internals`.

The other way, :class:`EndedTrialFiles` puts a trial's files in storage as soon as it ends: Tune copies
them there with its next state save only, and a driver killed in between left an ended trial without its
history, which a resume reads (ASHA's rungs, the search rolled forward) and the results count epochs from.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ray.tune.logger import CSVLoggerCallback, JsonLoggerCallback

from tune_service.experiment.callbacks import DriverCallback
from tune_service.experiment.saving import FailingSaves
from tune_service.ray_internals import private

#: The files of a trial's reports that Tune's loggers write in the driver's staging copy of the trial.
REPORT_FILES = ("result.json", "progress.csv")


class _FromStorageOnce:
    """A Tune logger that copies each trial's file from storage at most once in this driver's run."""

    def __init__(self) -> None:
        super().__init__()
        self._copied: set[tuple[str, str]] = set()
        #: A resumed sweep's driver (it unpickles the Tuner's callbacks, :meth:`__getstate__`).
        self._resumed = False

    def _restore_from_remote(self, file_name: str, trial: Any) -> None:
        if (file_name, trial.trial_id) in self._copied:
            return  # started again in this run: the driver's copy is the newest
        self._copied.add((file_name, trial.trial_id))
        if not trial.checkpoint and getattr(self, "_resumed", True) and _checkpointed_in_storage(trial):
            # Tune copies the history of a trial its saved state names a checkpoint of; ours go on from
            # the newest checkpoint in storage, which may be newer than that state (a trial that
            # checkpointed or ended after Tune's last save)
            _copy_from_storage(file_name, trial)
            return
        private(super(), "_restore_from_remote")(file_name, trial)

    def forget_trial(self, trial: Any) -> None:
        """``trial`` has ended and left Tune's controller (:mod:`~tune_service.execution.retiring`)."""
        self._copied = {(name, trial_id) for name, trial_id in self._copied if trial_id != trial.trial_id}

    def __getstate__(self) -> dict[str, Any]:
        # Pickled with the Tuner, which a resumed sweep's driver unpickles: it starts with none copied.
        return {**self.__dict__, "_copied": set(), "_resumed": True}


def _checkpointed_in_storage(trial: Any) -> bool:
    from tune_service.experiment.checkpoints import checkpointed_report

    return checkpointed_report(trial.path, trial.storage.storage_filesystem) is not None


def _copy_from_storage(file_name: str, trial: Any) -> None:
    """The trial's ``file_name`` from storage over the driver's staging copy, as Tune's own copy does."""
    import pyarrow.fs

    try:
        pyarrow.fs.copy_files(
            f"{trial.path}/{file_name}",
            str(Path(trial.local_path, file_name)),
            source_filesystem=trial.storage.storage_filesystem,
        )
    except FileNotFoundError:
        pass  # no report before the checkpoint's: nothing to go on from


class TrialResultsLogger(_FromStorageOnce, JsonLoggerCallback):
    """Tune's ``result.json`` logger, its history copied from storage once per trial and run."""


class TrialProgressLogger(_FromStorageOnce, CSVLoggerCallback):
    """Tune's ``progress.csv`` logger, its history copied from storage once per trial and run."""


class EndedTrialFiles(DriverCallback):
    """When a trial ends, its report files (:data:`REPORT_FILES`) go from the driver's staging copy to
    the experiment's storage (a directory or a bucket), before the trial's line is added to the service's
    log of ended trials: give it to Tune before :class:`~tune_service.results.progress.SweepProgress`.
    A failed copy is warned of and left to Tune's next sync."""

    def __init__(self, key: str):
        super().__init__(key)
        self._copies = FailingSaves("an ended trial's result files")

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._copy(trial)

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._copy(trial)

    def _copy(self, trial: Any) -> None:
        self._copies.attempt(lambda: _copy_reports(trial))


def _copy_reports(trial: Any) -> None:
    filesystem = trial.storage.storage_filesystem
    for name in REPORT_FILES:
        staged = Path(trial.local_path) / name
        if staged.is_file():
            with filesystem.open_output_stream(f"{trial.path}/{name}") as stream:
                stream.write(staged.read_bytes())


def trial_loggers() -> list[Any]:
    """The loggers to give a Tuner (in place of Tune's defaults of the same kinds)."""
    return [TrialResultsLogger(), TrialProgressLogger()]
