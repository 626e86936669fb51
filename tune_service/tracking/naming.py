"""What the wandb runs hold, apart from wandb itself: a stable id per experiment and trial (so a resumed
sweep or a retried trial appends to its run), a readable name, the metrics a result carries, and the
sweep summary run's table."""

from __future__ import annotations

import hashlib
import re
from typing import Any, Mapping

from tune_service.redaction import redact
from tune_service.results.sweep_result import TUNE_KEYS
from tune_service.spec.configs import flatten

#: The trial id part of the sweep's summary run's id.
SUMMARY_RUN = "summary"


def run_id(experiment: str, trial_id: str) -> str:
    """The wandb run id of ``trial_id`` in ``experiment``: the same every time, a valid wandb id."""
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", experiment).strip("-")
    if slug != experiment or len(slug) > 40:  # keep it unique when the name had to be shortened
        slug = f"{slug[:31]}-{hashlib.sha1(experiment.encode()).hexdigest()[:8]}"
    return f"{slug}-{trial_id}"


def run_name(number: int | None, trial_id: str, config: Mapping[str, Any], key_parameters: list[str]) -> str:
    """A readable run name: the trial's number and its key parameters, e.g. ``#003 lr=0.003 model=cnn``."""
    head = f"#{number:03d}" if number is not None else trial_id
    values = [
        f"{name}={_short(_lookup(config, name))}" for name in key_parameters[:4] if _lookup(config, name) is not None
    ]
    return " ".join([head, *values])


def _lookup(config: Mapping[str, Any], dotted: str) -> Any:
    value: Any = config
    for part in dotted.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return config.get(dotted) if isinstance(config, Mapping) else None
        value = value[part]
    return value


def _short(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def trial_metrics(result: Mapping[str, Any]) -> dict[str, float]:
    """The numeric metrics of a Tune result (Tune's bookkeeping and text values left out)."""
    return {
        k: v
        for k, v in result.items()
        if k not in TUNE_KEYS and isinstance(v, (int, float)) and not isinstance(v, bool)
    }


def trials_table(trials: Any) -> tuple[list[str], list[list[Any]]]:
    """The sweep summary run's table: one row per trial (its id, status, epochs, flattened config with
    secrets redacted, and final numeric metrics), and the column names."""
    trials = list(trials)
    config_keys = sorted({k for t in trials for k in flatten(t.config)})
    metric_keys = sorted({k for t in trials for k, v in t.metrics.items() if isinstance(v, (int, float))})
    columns = ["trial_id", "status", "epochs", *config_keys, *metric_keys]
    rows = [
        [
            t.trial_id,
            t.status,
            t.epochs,
            *(flatten(redact(t.config)).get(k) for k in config_keys),
            *(t.metrics.get(k) for k in metric_keys),
        ]
        for t in trials
    ]
    return columns, rows
