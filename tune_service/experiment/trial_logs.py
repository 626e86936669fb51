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
"""

from __future__ import annotations

from typing import Any

from ray.tune.logger import CSVLoggerCallback, JsonLoggerCallback

from tune_service.ray_internals import private


class _FromStorageOnce:
    """A Tune logger that copies each trial's file from storage at most once in this driver's run."""

    def __init__(self) -> None:
        super().__init__()
        self._copied: set[tuple[str, str]] = set()

    def _restore_from_remote(self, file_name: str, trial: Any) -> None:
        if (file_name, trial.trial_id) in self._copied:
            return  # started again in this run: the driver's copy is the newest
        self._copied.add((file_name, trial.trial_id))
        private(super(), "_restore_from_remote")(file_name, trial)

    def forget_trial(self, trial: Any) -> None:
        """``trial`` has ended and left Tune's controller (:mod:`~tune_service.execution.retiring`)."""
        self._copied = {(name, trial_id) for name, trial_id in self._copied if trial_id != trial.trial_id}

    def __getstate__(self) -> dict[str, Any]:
        # Pickled with the Tuner: a resumed sweep's driver starts with none copied.
        return {**self.__dict__, "_copied": set()}


class TrialResultsLogger(_FromStorageOnce, JsonLoggerCallback):
    """Tune's ``result.json`` logger, its history copied from storage once per trial and run."""


class TrialProgressLogger(_FromStorageOnce, CSVLoggerCallback):
    """Tune's ``progress.csv`` logger, its history copied from storage once per trial and run."""


def trial_loggers() -> list[Any]:
    """The loggers to give a Tuner (in place of Tune's defaults of the same kinds)."""
    return [TrialResultsLogger(), TrialProgressLogger()]
