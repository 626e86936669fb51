"""An ordered background writer for wandb calls: a slow or failing wandb never holds up Tune's loop."""

from __future__ import annotations

import logging
import queue
import threading
from typing import Callable

from tune_service.redaction import redact_text

log = logging.getLogger("tune_service.tracking")


class OrderedWriter:
    """One thread that runs wandb calls in order. A call that raises marks its run as broken: one
    warning, and the run's later calls are skipped."""

    def __init__(self) -> None:
        self._queue: queue.Queue = queue.Queue()
        self._broken: set[str] = set()
        self._thread = threading.Thread(target=self._work, name="tune-service-wandb", daemon=True)
        self._thread.start()

    def submit(self, key: str, action: str, call: Callable[[], None]) -> None:
        self._queue.put((key, action, call))

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            key, action, call = item
            if key in self._broken:
                continue
            try:
                call()
            except BaseException as error:  # noqa: BLE001 - wandb may raise anything; the sweep goes on
                self._broken.add(key)
                reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
                log.warning(
                    "wandb: %s of run %s failed (%s: %s); the sweep goes on without this run",
                    action,
                    key,
                    type(error).__name__,
                    redact_text(reason)[:300],
                )

    def close(self, timeout: float) -> bool:
        """Wait for the queued calls; False if they did not finish within ``timeout`` seconds."""
        self._queue.put(None)
        self._thread.join(timeout)
        return not self._thread.is_alive()
