"""Where the shared loop runs: the rank's device, where its reports and checkpoints go, and the
checkpoint it resumes from.

:class:`RayTrainContext` is the context of every trial (Ray Train's ``report`` and ``get_checkpoint``:
a worker group restarted by Ray Train, or a run relaunched under the same name, resumes from the latest
checkpoint). :class:`LocalContext` runs the same loop without Ray, under ``torchrun`` or in a test, and
keeps its reports in memory and its checkpoints in a directory.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any, Protocol

import torch

from tune_service.training.checkpoint import STATE_FILE, load_state


class TrainContext(Protocol):
    """A context may also carry a ``data_cache`` (a :class:`~tune_service.training.data_cache.DataCache`
    that outlives the trial, as a warm gang's rank does); without one the data sets are built every trial."""

    device: torch.device
    #: Where rank 0 writes the trial's artifacts (profiler traces); ``None``: nowhere.
    output_dir: Path | None

    def restored_state(self) -> dict[str, Any] | None:
        """The latest checkpoint's state (see :mod:`~tune_service.training.checkpoint`), or ``None``."""

    def checkpoint_dir(self, name: str) -> Path:
        """A new directory for rank 0 to write a checkpoint into, then pass to ``report``. ``name`` says
        where in the trial it is (``epoch_0003``, ``step_00001200``)."""

    def report(self, metrics: dict[str, Any], checkpoint_dir: Path | None) -> None:
        """Report one epoch, called by every rank; rank 0 passes the checkpoint (others ``None``). The
        context owns the directory from then on."""


class RayTrainContext:
    """The context of a rank in a Ray Train worker group."""

    def __init__(self, output_dir: str | None = None, checkpoint_root: str | None = None):
        import ray.train.torch

        self.device = ray.train.torch.get_device()
        self.output_dir = Path(output_dir) if output_dir else None
        self.checkpoint_root = Path(checkpoint_root) if checkpoint_root else None

    def restored_state(self) -> dict[str, Any] | None:
        """The checkpoint Ray Train hands back, or else the newest complete one in the run's storage.

        Ray Train registers a reported checkpoint at its controller's next poll of the ranks; a rank
        that dies before that poll gets a restarted worker group with no checkpoint, although rank 0
        had already written it to storage. Reading storage (on a local or shared path) closes that gap.
        """
        import ray.train

        checkpoint = ray.train.get_checkpoint()
        if checkpoint is not None:
            return load_state(checkpoint, map_location=self.device)
        if self.checkpoint_root is None or not self.checkpoint_root.is_dir():
            return None
        # Ray names checkpoint directories by time, so the newest is last; one whose copy into storage
        # was cut off does not load, and the one before it is used.
        for state_file in sorted(self.checkpoint_root.glob(f"checkpoint_*/{STATE_FILE}"), reverse=True):
            try:
                return load_state(state_file.parent, map_location=self.device)
            except Exception:  # noqa: BLE001 - a truncated file raises whatever torch.load meets
                continue
        return None

    def checkpoint_dir(self, name: str) -> Path:
        return Path(tempfile.mkdtemp(prefix=f"tune_service_{name}_"))

    def report(self, metrics: dict[str, Any], checkpoint_dir: Path | None) -> None:
        import ray.train

        checkpoint = ray.train.Checkpoint.from_directory(str(checkpoint_dir)) if checkpoint_dir else None
        try:
            ray.train.report(metrics, checkpoint=checkpoint)
        finally:
            if checkpoint_dir is not None:  # Ray Train has copied it into the run's storage by now
                shutil.rmtree(checkpoint_dir, ignore_errors=True)


class LocalContext:
    """A context without Ray. Reports are kept in ``reports``; checkpoints are written to
    ``output_dir/checkpoints/epoch_NNNN`` (``step_NNNNNNNN`` mid-epoch) (discarded without an
    ``output_dir``), and the latest complete
    one is what a new run resumes from."""

    def __init__(self, device: torch.device | str = "cpu", output_dir: str | Path | None = None):
        self.device = torch.device(device)
        self.output_dir = Path(output_dir) if output_dir is not None else None
        self.reports: list[dict[str, Any]] = []
        self.checkpoints: list[Path] = []

    @property
    def _checkpoint_root(self) -> Path | None:
        return self.output_dir / "checkpoints" if self.output_dir is not None else None

    def restored_state(self) -> dict[str, Any] | None:
        root = self._checkpoint_root
        # Only directories whose state file was written to the end (see save_checkpoint) count.
        # A trial's checkpoints are all epoch_* or all step_*, numbered with leading zeros: the last is the latest.
        saved = sorted(root.glob(f"*/{STATE_FILE}")) if root is not None and root.is_dir() else []
        return load_state(saved[-1].parent, map_location=self.device) if saved else None

    def checkpoint_dir(self, name: str) -> Path:
        root = self._checkpoint_root
        if root is None:
            return Path(tempfile.mkdtemp(prefix=f"tune_service_{name}_"))
        return root / name

    def report(self, metrics: dict[str, Any], checkpoint_dir: Path | None) -> None:
        self.reports.append(dict(metrics))
        if checkpoint_dir is None:
            return
        if self._checkpoint_root is None:
            shutil.rmtree(checkpoint_dir, ignore_errors=True)
        else:
            self.checkpoints.append(checkpoint_dir)
