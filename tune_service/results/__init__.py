"""A sweep's results: every trial and the best (``SweepResult``), the leaderboard, ``summary.json`` and
``best_config.yaml`` (``sweep_result``), and the pictures (``plots``)."""

from tune_service.results.sweep_result import SweepResult, TrialRecord, load

__all__ = ["SweepResult", "TrialRecord", "load"]
