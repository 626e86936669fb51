"""A trial's model as a wandb artifact: its checkpoint's files, or a reference where the driver cannot
read the checkpoint as files (remote storage)."""

from __future__ import annotations

import os
from typing import Any, Mapping

from tune_service.experiment.layout import CHECKPOINT_REPORT_FILE


def model_artifact(run_id: str, checkpoint: str, trained: Mapping[str, int], trial_id: str) -> Any:
    """The ``model`` artifact of run ``run_id``: the files of the checkpoint at ``trained`` (``{"epoch":
    8}``, or ``{"step": 1200}``; the report beside them is the service's, not the model's), or a reference
    to a checkpoint on remote storage."""
    import wandb

    artifact = wandb.Artifact(f"model-{run_id}", type="model", metadata={**trained, "trial_id": trial_id})
    if os.path.isdir(checkpoint):
        for entry in sorted(os.scandir(checkpoint), key=lambda e: e.name):
            if entry.name == CHECKPOINT_REPORT_FILE:
                continue
            if entry.is_dir():
                artifact.add_dir(entry.path, name=entry.name)
            else:
                artifact.add_file(entry.path, name=entry.name)
    else:  # on storage the driver cannot read as files (s3://...)
        artifact.add_reference(checkpoint)
    return artifact
