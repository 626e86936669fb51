"""A small file system made for a test: a tmpfs of a given size, which needs root (as CI and this
project's machines run); the test is skipped where it cannot be mounted."""

from __future__ import annotations

import contextlib
import subprocess
from pathlib import Path
from typing import Iterator

import pytest


@contextlib.contextmanager
def mounted_tmpfs(mount: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` (``16m``) mounted at ``mount`` (created), unmounted when the block ends."""
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)], capture_output=True,
                          text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "--lazy", str(mount)], check=True)  # wandb's service may hold a file a while
