"""A sweep's results: every trial and the best (``SweepResult``), the leaderboard, ``summary.json`` and
``best_config.yaml`` (``sweep_result``); the records of a running sweep, written as its trials end
(``progress``); a sweep read back as DataFrames, its best model and spec (``analysis``); the HTML
report (``report``)."""

from tune_service.results.sweep_result import SweepResult, TrialRecord, load

__all__ = ["SweepResult", "TrialRecord", "load"]
