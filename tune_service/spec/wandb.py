"""The spec's ``wandb:`` block, and which mode (online, offline, disabled) a sweep logs in.

Kept apart from :mod:`tune_service.tracking.wandb` so that reading a spec imports neither Ray nor wandb.
"""

from __future__ import annotations

import netrc
import os
from dataclasses import dataclass
from typing import Mapping
from urllib.parse import urlparse

MODES = ("auto", "online", "offline", "disabled")


@dataclass(frozen=True)
class WandbSettings:
    """The spec's ``wandb:`` block.

    - ``project`` (default: the sweep's name), ``entity`` (default: the key's default entity);
    - ``group`` (default: the experiment's name: one group per sweep); ``tags`` added to every run;
    - ``mode``: auto | online | offline | disabled. ``auto``: ``WANDB_MODE`` if set, else online with an
      API key (``WANDB_API_KEY``, or a ``wandb login`` in ``~/.netrc``), else offline;
    - ``log_checkpoints``: upload each trial's last checkpoint as a ``model`` artifact;
    - ``init_timeout``: seconds wandb may take to start a run before it is given up with a warning.
    """

    project: str | None = None
    entity: str | None = None
    group: str | None = None
    tags: tuple[str, ...] = ()
    mode: str = "auto"
    log_checkpoints: bool = False
    init_timeout: float = 90.0


def resolve_mode(requested: str, environ: Mapping[str, str] = os.environ) -> str:
    """``online``, ``offline`` or ``disabled``: ``auto`` resolved as :class:`WandbSettings` says."""
    if requested != "auto":
        return requested
    env = environ.get("WANDB_MODE", "").strip().lower()
    if env in ("online", "offline", "disabled"):
        return env
    if env == "dryrun":
        return "offline"
    return "online" if _has_api_key(environ) else "offline"


def _has_api_key(environ: Mapping[str, str]) -> bool:
    if environ.get("WANDB_API_KEY"):
        return True
    host = urlparse(environ.get("WANDB_BASE_URL", "https://api.wandb.ai")).hostname
    try:
        # a URL without a host matches no machine of the file (only its default entry, as None did)
        return netrc.netrc(environ.get("NETRC")).authenticators(host or "") is not None
    except (OSError, netrc.NetrcParseError):
        return False
