"""The experiment directory: what is in it, where, and how it is written.

    EXPERIMENT_DIR/
      sweep.json          the spec as loaded, for resume (SWEEP_FILE)
      summary.json        every trial and the best (SUMMARY_FILE), best_config.yaml beside it
      ended_trials.jsonl  while the sweep runs: each trial as it ended, one line each (ENDED_TRIALS_FILE)
      report.html         the sweep's report, one self-contained page (REPORT_FILE; results.report)
      trial_<id>/         one per trial (TRIAL_DIR_PREFIX): Tune's result.json (TRIAL_RESULTS_FILE),
                          params.json (TRIAL_PARAMS_FILE), error.txt if it failed (TRIAL_ERROR_FILE),
                          its checkpoints (see :mod:`tune_service.experiment.checkpoints`)
      .last_good/         the newest complete copy of Tune's experiment state (see last_good)
      .driver.lock        held by the driver running the sweep (see lock)
      wandb/              the trials' offline wandb runs

Every file tune-service writes here is written whole or not at all (:func:`atomic_write`), the
append-only ``ended_trials.jsonl`` excepted: a line cut off by a crash is skipped when it is read.
"""

from __future__ import annotations

import json
import os
import posixpath
import tempfile
from pathlib import Path
from typing import Any

#: What resume() rebuilds the sweep from.
SWEEP_FILE = "sweep.json"
SUMMARY_FILE = "summary.json"
#: Appended to as each trial ends, one JSON line a trial: with a partial summary, the running sweep.
ENDED_TRIALS_FILE = "ended_trials.jsonl"
BEST_CONFIG_FILE = "best_config.yaml"
#: The driver's log: what Tune says of each failed trial, its traceback included (the console says one line).
DRIVER_LOG_FILE = "driver.log"
#: The sweep's report: one HTML page that opens offline (:mod:`tune_service.results.report`).
REPORT_FILE = "report.html"
#: A population's decisions (PBT, PB2), one JSON line each, as they are made
#: (:mod:`tune_service.search.population_journal`).
POPULATION_JOURNAL_FILE = "population.jsonl"
#: A trial's directory is this prefix and its Tune trial id.
TRIAL_DIR_PREFIX = "trial_"
#: Tune's per-trial record of every report, one JSON object a line, in the trial's directory.
TRIAL_RESULTS_FILE = "result.json"
#: Tune's record of a trial's config, written when the trial starts, in the trial's directory.
TRIAL_PARAMS_FILE = "params.json"
#: Tune's record of a trial's failures (each traceback in turn), in the trial's directory.
TRIAL_ERROR_FILE = "error.txt"
#: The report that came with a checkpoint, beside its state.
CHECKPOINT_REPORT_FILE = "report.json"
#: The key of every report that counts a trial's progress: the scheduler's time unit.
TIME_ATTR = "epoch"


def plain_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name an experiment directory inside the storage directory (None when it can)."""
    if not name or "/" in name or "\\" in name or "\0" in name or name.startswith("."):
        return (
            f"must be a plain name (no '/', '\\' or leading '.': the experiment directory is storage/name), "
            f"got {name!r}"
        )
    return None


def plain_name(text: str) -> str:
    """``text`` (a sweep's display name, which W&B lets hold anything) made a plain directory name."""
    name = "".join("_" if c in "/\\\0" else c for c in text).lstrip(".")
    return name or "sweep"


def atomic_write(path: Path, content: str | bytes) -> None:
    """Write via a temporary file and rename, so a crash leaves the old file or the new one, never half."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    data = content.encode("utf-8") if isinstance(content, str) else content
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_trial_results(path: str | os.PathLike) -> list[dict[str, Any]]:
    """Every report in a trial's ``result.json`` (:data:`TRIAL_RESULTS_FILE`), in order; none if the
    file is missing. A line cut off by a crash is skipped."""
    path = Path(path)
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict):
            rows.append(row)
    return rows


def trial_results_file(experiment_dir: str | os.PathLike, trial_id: str) -> Path:
    """Where Tune records the reports of trial ``trial_id``."""
    return Path(experiment_dir) / f"{TRIAL_DIR_PREFIX}{trial_id}" / TRIAL_RESULTS_FILE


def trial_results_files(experiment_dir: str | os.PathLike) -> list[Path]:
    """Every trial's results file in the experiment directory, sorted by path."""
    return sorted(Path(experiment_dir).glob(f"{TRIAL_DIR_PREFIX}*/{TRIAL_RESULTS_FILE}"))


def trial_dir(experiment_dir: str | os.PathLike, trial_id: str) -> Path:
    """The directory of trial ``trial_id``: its results, params, error and checkpoints."""
    return Path(experiment_dir) / f"{TRIAL_DIR_PREFIX}{trial_id}"


def trial_dirs(experiment_dir: str | os.PathLike) -> dict[str, Path]:
    """Every trial's directory in the experiment directory, by trial id, sorted by path."""
    found = sorted(p for p in Path(experiment_dir).glob(f"{TRIAL_DIR_PREFIX}*") if p.is_dir())
    return {p.name[len(TRIAL_DIR_PREFIX) :]: p for p in found}


def read_trial_params(trial_dir: str | os.PathLike) -> dict[str, Any] | None:
    """The config Tune recorded for the trial in ``trial_dir`` (:data:`TRIAL_PARAMS_FILE`), or None when
    the file is missing or unreadable."""
    try:
        params = json.loads((Path(trial_dir) / TRIAL_PARAMS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return params if isinstance(params, dict) else None


def read_trial_error(trial_dir: str | os.PathLike) -> tuple[str, float] | None:
    """The trial's latest failure from Tune's record of them (:data:`TRIAL_ERROR_FILE`): its exception
    (the file's last line, ``module.Type: message``) and when it was recorded (the file's modification
    time, seconds since the epoch); None when the trial has not failed."""
    path = Path(trial_dir) / TRIAL_ERROR_FILE
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
        recorded = path.stat().st_mtime
    except OSError:
        return None
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return (lines[-1], recorded) if lines else None


def write_sweep_file(
    experiment_dir: Path, spec_source: dict[str, Any], task_object: str | None, directory: str | None = None
) -> None:
    """What resume needs: the spec as loaded (overrides applied), the task object's repr if one was
    used (it must be passed again), and the spec file's directory (where a W&B program runs). Values
    are kept as they are: resume runs them."""
    experiment_dir.mkdir(parents=True, exist_ok=True)
    saved = {"spec": spec_source, "task_object": task_object, "directory": directory}
    atomic_write(experiment_dir / SWEEP_FILE, json.dumps(saved, indent=2, default=str) + "\n")


def read_sweep_file(experiment_dir: Path) -> dict[str, Any] | None:
    """What :func:`write_sweep_file` wrote, or None when the directory has no sweep file."""
    sweep_file = experiment_dir / SWEEP_FILE
    if not sweep_file.is_file():
        return None
    return json.loads(sweep_file.read_text(encoding="utf-8"))


def trial_number(trial: Any) -> int | None:
    """The trial's number in the sweep (1, 2, ...), in the order Tune created the trials: Tune's experiment
    tag starts with it (``3_lr=0.01``), and keeps it through a resume and a PBT exploit's new tag."""
    head = str(getattr(trial, "experiment_tag", "") or "").split("_", 1)[0]
    return int(head) if head.isdigit() else None


def trial_of_path(path: str) -> str | None:
    """The trial whose directory holds ``path`` (``.../trial_<id>/checkpoint_000003``), or None."""
    for part in reversed(posixpath.normpath(str(path)).split("/")):
        if part.startswith(TRIAL_DIR_PREFIX):
            return part[len(TRIAL_DIR_PREFIX) :]
    return None


def creation_number(experiment_tag: Any) -> int | None:
    """A trial's number in its sweep (from 1, in the order Tune's searcher created the trials): the count
    its ``experiment_tag`` starts with; None where it has none."""
    number = str(experiment_tag or "").partition("_")[0]
    return int(number) if number.isdigit() else None
