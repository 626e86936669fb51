"""The last good copy of Tune's experiment state, so that a driver killed at any moment can be resumed.

Tune saves its state (``experiment_state-<session>.json``: the trials, their statuses and checkpoints;
``searcher-state-<session>.pkl`` and ``search_gen_state-<session>.json``: the searcher) into a staging
directory, then copies the staging directory into the experiment directory in a background thread, file
by file. A driver killed during that copy leaves a truncated state file in the experiment directory, and
``Tuner.restore`` then fails.

:class:`LastGoodState` copies the session's state files, as soon as Tune has written them, into
``EXPERIMENT/.last_good/``, each by a write to a temporary file and a rename: whenever the driver dies,
that directory holds the last complete state. :func:`reinstate` puts it back before a resume.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

from tune_service.experiment.callbacks import DriverCallback
from tune_service.experiment.layout import atomic_write
from tune_service.experiment.saving import FailingSaves

logger = logging.getLogger(__name__)

LAST_GOOD_DIR = ".last_good"

_STATE_FILE = re.compile(r"^experiment_state-(?P<session>.+)\.json$")


class LastGoodState(DriverCallback):
    """Keeps the last complete copy of Tune's state files in ``experiment_dir/.last_good``."""

    def __init__(self, experiment_dir: Path):
        super().__init__(f"{experiment_dir.name}/last_good")
        self.target = Path(experiment_dir) / LAST_GOOD_DIR
        self._staging: Path | None = None
        self._saves = FailingSaves("the experiment's state (.last_good)")

    def on_step_begin(self, iteration: int, trials: list, **info: Any) -> None:
        if self._staging is None and trials:
            self._staging = Path(trials[0].local_experiment_path)  # Tune's staging directory

    def get_state(self) -> None:
        """Tune asks its callbacks for their state right after it has written its own (and before
        copying it to the experiment directory): the moment to keep a copy. Stateless: returns None."""
        staging = self._staging
        if staging is not None:  # a full disk keeps the copy before (atomic writes) until the next save
            self._saves.attempt(lambda: keep_state_files(staging, self.target))
        return None


def keep_state_files(staging: Path, target: Path) -> None:
    """Copy the newest session's state files from ``staging`` into ``target``, each atomically."""
    state_files = (_STATE_FILE.match(p.name) for p in staging.glob("experiment_state-*.json"))
    sessions = sorted(m["session"] for m in state_files if m)
    if not sessions:
        return
    target.mkdir(parents=True, exist_ok=True)
    for path in staging.glob(f"*-{sessions[-1]}.*"):
        if path.is_file() and path.suffix in (".json", ".pkl"):
            atomic_write(target / path.name, path.read_bytes())


def reinstate(experiment_dir: Path) -> None:
    """Put the last good state files back into ``experiment_dir`` (over whatever a killed copy left
    there); a directory without them (an older experiment, a sweep stopped with Ctrl+C) is left alone."""
    kept = Path(experiment_dir) / LAST_GOOD_DIR
    for path in sorted(kept.glob("*")) if kept.is_dir() else ():
        if path.is_file() and not path.name.startswith("."):
            atomic_write(Path(experiment_dir) / path.name, path.read_bytes())
            logger.debug("reinstated %s", path.name)
