"""Experiments on remote storage: ``--storage s3://bucket/prefix`` (or any URI pyarrow opens: ``gs://``,
``hdfs://``, ...), so that a cluster without a shared disk can run, and resume, a sweep.

Tune keeps its own part there itself (its state, every trial's results and checkpoints: each node
writes straight to the storage). Our own files (``sweep.json``, ``summary.json``, ``best_config.yaml``,
wandb's offline runs) are written, as on a local disk, into a *mirror*: a temporary local directory
named like the experiment, which :class:`RemoteExperiment` uploads (``sweep.json`` and the partial
summary once, the log of ended trials at most every :data:`LOG_UPLOAD_PERIOD_S` while trials end,
everything at the end). An object store cannot append, so the log goes up whole: on a period, not at
each trial's end, so that a sweep of many short trials does not upload its history once per trial.
A resume downloads the experiment into a new mirror first, checkpoints excepted (a trial reads its own
from the storage).

Credentials come from where pyarrow (and so Ray) looks: ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY``
or a profile in ``~/.aws``, ``AWS_ENDPOINT_URL`` for an S3-compatible server; nothing here writes them.
One driver per experiment is not enforced on remote storage (object stores have no locks).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from tune_service.errors import TuneServiceError, first_line
from tune_service.experiment.layout import BEST_CONFIG_FILE, ENDED_TRIALS_FILE, SUMMARY_FILE, SWEEP_FILE
from tune_service.experiment.saving import FailingSaves

#: The directories of a trial that hold checkpoints (Tune's, and a fresh trial's Ray Train run): not
#: downloaded into the mirror.
_CHECKPOINT_DIRS = ("checkpoint_", "ddp")
#: What the driver writes besides Tune, uploaded at the end (wandb's offline runs included).
_OWN_FILES = (SWEEP_FILE, SUMMARY_FILE, ENDED_TRIALS_FILE, BEST_CONFIG_FILE, "wandb")
#: The longest the bucket's log of ended trials lags the mirror's while a sweep runs.
LOG_UPLOAD_PERIOD_S = 10.0


def is_remote(storage: str | os.PathLike) -> bool:
    """Whether ``storage`` names remote storage (a URI) rather than a directory."""
    return "://" in str(storage)


class RemoteExperiment:
    """The experiment ``uri`` (``STORAGE_URI/NAME``) and its local mirror, ``mirror`` (a directory named
    NAME in a new temporary directory, removed by :meth:`close`)."""

    def __init__(self, uri: str):
        from pyarrow import fs as pafs

        self.uri = uri.rstrip("/")
        self.storage_uri, _, self.name = self.uri.rpartition("/")
        try:
            self.filesystem, self.path = pafs.FileSystem.from_uri(self.uri)
        except (OSError, ValueError, TypeError) as error:
            raise TuneServiceError(f"storage: cannot open {self.storage_uri!r}: {first_line(error)}") from None
        self.mirror = Path(tempfile.mkdtemp(prefix="tune-service-mirror-")) / self.name
        self.mirror.mkdir()
        self._log_uploads = FailingSaves(f"{ENDED_TRIALS_FILE} to {self.uri}")
        self._log_uploaded_at = 0.0
        self._log_behind = False  # trials ended since the log was last uploaded

    @classmethod
    def new(cls, storage_uri: str, name: str) -> "RemoteExperiment":
        """A new experiment NAME in ``storage_uri``, which must not hold one of that name already.

        Raises:
            TuneServiceError: the storage cannot be reached, or the experiment exists there.
        """
        experiment = cls(f"{storage_uri.rstrip('/')}/{name}")
        if experiment._listing(allow_not_found=True):
            experiment.close()
            raise TuneServiceError(
                f"name: experiment {experiment.uri!r} already exists and is not empty; choose "
                f"another --name (a finished trial is never overwritten)"
            )
        return experiment

    @classmethod
    def existing(cls, uri: str) -> "RemoteExperiment":
        """The experiment at ``uri``, downloaded into its mirror (checkpoints excepted) to be resumed.

        Raises:
            TuneServiceError: the storage cannot be reached, or nothing is at ``uri``.
        """
        from pyarrow import fs as pafs

        experiment = cls(uri)
        try:
            entries = experiment._listing(allow_not_found=False)
            for entry in entries:
                relative = entry.path[len(experiment.path) :].lstrip("/")
                if entry.type != pafs.FileType.File or _in_checkpoint(relative):
                    continue
                target = experiment.mirror / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                with experiment.filesystem.open_input_stream(entry.path) as source, open(target, "wb") as out:
                    shutil.copyfileobj(source, out)
        except BaseException:
            experiment.close()
            raise
        return experiment

    def upload(self, *names: str) -> None:
        """Upload the mirror's files or directories ``names`` (relative to it) to the experiment, over
        what is there; a name the mirror does not have is skipped. Raises OSError when it fails."""
        from pyarrow import fs as pafs

        local = pafs.LocalFileSystem()
        for name in names:
            source = self.mirror / name
            if source.exists():  # a file, or a directory copied whole
                pafs.copy_files(
                    str(source), f"{self.path}/{name}", source_filesystem=local, destination_filesystem=self.filesystem
                )

    def upload_own_files(self) -> None:
        """Upload everything the driver wrote (the sweep file, the summary, wandb's runs)."""
        self.upload(*_OWN_FILES)

    def as_uploaded(self, outcome: Any) -> Any:
        """``outcome`` (a sweep's result, read from the mirror) naming the remote experiment instead:
        its directory, and where its wandb runs are."""
        from dataclasses import replace

        extra = dict(outcome.extra)
        if isinstance(extra.get("wandb"), dict) and extra["wandb"].get("dir"):
            extra["wandb"] = {**extra["wandb"], "dir": f"{self.uri}/wandb"}
        return replace(outcome, experiment_dir=self.uri, extra=extra)

    def close(self) -> None:
        """Remove the mirror (what it holds has been uploaded, or is Tune's to keep)."""
        shutil.rmtree(self.mirror.parent, ignore_errors=True)

    # -- a progress observer: the log of ended trials is uploaded on a period -------------------------
    def trial_started(self, progress: Any, trial: Any) -> None:
        pass

    def trial_reported(self, progress: Any, trial: Any) -> None:
        pass

    def trial_ended(self, progress: Any, trial: Any) -> None:
        self._log_behind = True
        self._upload_log_when_due()

    def tick(self, progress: Any) -> None:
        self._upload_log_when_due()

    @property
    def log_uploaded(self) -> bool:
        """Whether the bucket's log of ended trials holds every trial the mirror's does."""
        return not self._log_behind

    def _upload_log_when_due(self) -> None:
        now = time.monotonic()
        if self._log_behind and now - self._log_uploaded_at >= LOG_UPLOAD_PERIOD_S:
            self._log_uploaded_at = now
            if self._log_uploads.attempt(lambda: self.upload(ENDED_TRIALS_FILE)):
                self._log_behind = False

    def _listing(self, allow_not_found: bool) -> list:
        from pyarrow import fs as pafs

        try:
            return self.filesystem.get_file_info(
                pafs.FileSelector(self.path, recursive=True, allow_not_found=allow_not_found)
            )
        except FileNotFoundError:
            raise TuneServiceError(f"resume: nothing at {self.uri!r}") from None
        except OSError as error:
            raise TuneServiceError(f"storage: cannot read {self.uri!r}: {first_line(error)}") from None


def read_remote_text(uri: str) -> str:
    """The text of the file at ``uri``. Raises OSError when it cannot be read."""
    from pyarrow import fs as pafs

    try:
        filesystem, path = pafs.FileSystem.from_uri(uri)
    except (ValueError, TypeError) as error:
        raise OSError(str(error)) from None
    with filesystem.open_input_stream(path) as stream:
        return stream.readall().decode("utf-8")


def _in_checkpoint(relative: str) -> bool:
    """Whether a path inside the experiment is inside a trial's checkpoint directory."""
    parts = relative.split("/")
    return any(part.startswith(_CHECKPOINT_DIRS) for part in parts[1:-1])
