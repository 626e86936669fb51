"""Tracking: one wandb run per trial, grouped by sweep, and the sweep's summary run (``wandb``)."""

from tune_service.tracking.wandb import WandbTracker, create_tracker

__all__ = ["WandbTracker", "create_tracker"]
