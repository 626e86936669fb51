"""Pictures of a sweep for users without wandb at hand (offline, air-gapped): ``tune-run results DIR
--plot`` writes them next to ``summary.json``.

- ``learning_curves.png``: the sweep's metric per epoch for every trial, coloured by its final status,
  with the scheduler's rung epochs marked;
- ``parallel_coordinates.png``: one line per trial across the searched parameters and the metric,
  coloured by the metric (failed trials dashed grey).

Needs matplotlib (``pip install 'tune-service[plot]'``).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from tune_service.errors import TuneServiceError
from tune_service.experiment.layout import read_trial_results, trial_results_file
from tune_service.results.sweep_result import SweepResult, rank_trials

LEARNING_CURVES = "learning_curves.png"
PARALLEL_COORDINATES = "parallel_coordinates.png"
STATUS_COLOURS = {"completed": "tab:green", "stopped": "tab:orange", "failed": "tab:red", "interrupted": "tab:gray"}


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise TuneServiceError("--plot: needs matplotlib, which is not installed; "
                               "pip install 'tune-service[plot]'") from None
    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt

    return plt


def trial_history(experiment_dir: str | Path, trial_id: str, metric: str) -> list[tuple[int, float]]:
    """``(epoch, metric)`` of every report of a trial, from Tune's ``result.json`` in its directory. A
    resumed trial may repeat an epoch: the last report of each epoch counts."""
    by_epoch: dict[int, float] = {}
    for row in read_trial_results(trial_results_file(experiment_dir, trial_id)):
        value, epoch = row.get(metric), row.get("epoch", row.get("training_iteration"))
        if isinstance(value, (int, float)) and isinstance(epoch, (int, float)):
            by_epoch[int(epoch)] = float(value)
    return sorted(by_epoch.items())


def plot_learning_curves(result: SweepResult, path: Path) -> Path:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 5.5))
    for rung in result.extra.get("rungs", []):
        ax.axvline(rung, color="0.8", linestyle="--", linewidth=1, zorder=0)
    seen = set()
    for trial in result.trials:
        history = trial_history(result.experiment_dir, trial.trial_id, result.metric)
        if not history:
            continue
        epochs, values = zip(*history)
        label = trial.status if trial.status not in seen else None
        seen.add(trial.status)
        ax.plot(epochs, values, marker="o", markersize=3, linewidth=1.2, alpha=0.85,
                color=STATUS_COLOURS.get(trial.status, "black"), label=label)
    if result.best is not None:
        best = trial_history(result.experiment_dir, result.best.trial_id, result.metric)
        if best:
            ax.plot(*zip(*best), color="black", linewidth=2.2, label=f"best ({result.best.trial_id})")
    ax.set_xlabel("epoch" + (" (dashed: rungs)" if result.extra.get("rungs") else ""))
    ax.set_ylabel(result.metric)
    ax.set_title(f"{Path(result.experiment_dir).name}: {len(result.trials)} trials")
    ax.legend(loc="best", fontsize=8)
    ax.grid(alpha=0.3)
    return _save(fig, plt, path)


def _axis(values: list[Any]) -> tuple[list[float | None], list[tuple[float, str]]]:
    """Values mapped to [0, 1] for one axis, and its tick labels."""
    present = [v for v in values if v is not None]
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present)
    if present and numeric:
        low, high = min(present), max(present)
        log = low > 0 and high / low >= 100  # learning rates and the like: spread them out
        lo, hi = (math.log10(low), math.log10(high)) if log else (low, high)
        span = (hi - lo) or 1.0
        scale = [None if v is None else ((math.log10(v) if log else v) - lo) / span for v in values]
        return scale, [(0.0, f"{low:.3g}"), (1.0, f"{high:.3g}")]
    categories = sorted({str(v) for v in present})
    step = 1.0 / max(len(categories) - 1, 1)
    index = {c: i * step for i, c in enumerate(categories)}
    return [None if v is None else index[str(v)] for v in values], [(index[c], c) for c in categories]


def plot_parallel_coordinates(result: SweepResult, path: Path) -> Path:
    plt = _pyplot()
    trials = rank_trials(result.trials, result.metric, result.mode)[::-1]  # the best drawn last, on top
    keys = sorted(k for k in {k for t in trials for k in t.config}
                  if len({json.dumps(t.config.get(k), sort_keys=True, default=str) for t in trials}) > 1)
    columns = [*keys, result.metric]
    rows = [[t.config.get(k) for k in keys] + [t.metrics.get(result.metric)] for t in trials]
    axes = [_axis([row[i] for row in rows]) for i in range(len(columns))]
    fig, ax = plt.subplots(figsize=(max(6, 1.8 * len(columns)), 5.5))
    colour_map = plt.get_cmap("viridis_r" if result.mode == "min" else "viridis")
    scores, _ = axes[-1]
    for row_index, trial in enumerate(trials):
        points = [(i, axes[i][0][row_index]) for i in range(len(columns)) if axes[i][0][row_index] is not None]
        if not points:
            continue
        xs, ys = zip(*points)
        score = scores[row_index]
        if trial.status == "failed" or score is None:
            ax.plot(xs, ys, color="0.6", linestyle="--", linewidth=1)
        else:
            ax.plot(xs, ys, color=colour_map(score), linewidth=1.6, alpha=0.9)
    for i, (_, ticks) in enumerate(axes):
        ax.axvline(i, color="black", linewidth=0.8)
        for y, text in ticks:
            ax.text(i + 0.03, y, text, fontsize=7, va="center")
    ax.set_xticks(range(len(columns)), columns, rotation=20)
    ax.set_yticks([])
    ax.set_xlim(-0.2, len(columns) - 0.5)
    ax.set_title(f"{len(trials)} trials, coloured by {result.metric} ({result.mode}; failed: dashed)")
    return _save(fig, plt, path)


def _save(fig: Any, plt: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_plots(result: SweepResult) -> list[Path]:
    """Write both pictures into the experiment directory; their paths."""
    directory = Path(result.experiment_dir)
    return [plot_learning_curves(result, directory / LEARNING_CURVES),
            plot_parallel_coordinates(result, directory / PARALLEL_COORDINATES)]
