"""What a warm rank puts back between trials: the process-wide state a trial can change."""

from __future__ import annotations

import os
import sys
from typing import Any

import torch


class ProcessState:
    """The process-wide state a trial can change and the next trial must not inherit: torch's global
    flags, the environment variables, and torch.compile's caches. :meth:`restore` puts back what
    :meth:`capture` saw (taken once, when the rank is new)."""

    def __init__(self):
        self.environment = dict(os.environ)
        self.flags = self._flags()

    @staticmethod
    def _flags() -> dict[str, Any]:
        return {
            "deterministic": torch.are_deterministic_algorithms_enabled(),
            "deterministic_warn_only": torch.is_deterministic_algorithms_warn_only_enabled(),
            "cudnn_benchmark": torch.backends.cudnn.benchmark,
            "cudnn_deterministic": torch.backends.cudnn.deterministic,
            "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
            "matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
            "float32_matmul_precision": torch.get_float32_matmul_precision(),
            "default_dtype": torch.get_default_dtype(),
            "num_threads": torch.get_num_threads(),
            "grad_enabled": torch.is_grad_enabled(),
            "anomaly": torch.is_anomaly_enabled(),
        }

    def restore(self) -> None:
        flags = self.flags
        # Only when a trial changed it: the call imports torch's compiler (1.4 s, once per rank).
        if (
            torch.are_deterministic_algorithms_enabled() != flags["deterministic"]
            or torch.is_deterministic_algorithms_warn_only_enabled() != flags["deterministic_warn_only"]
        ):
            torch.use_deterministic_algorithms(flags["deterministic"], warn_only=flags["deterministic_warn_only"])
        torch.backends.cudnn.benchmark = flags["cudnn_benchmark"]
        torch.backends.cudnn.deterministic = flags["cudnn_deterministic"]
        torch.backends.cudnn.allow_tf32 = flags["cudnn_allow_tf32"]
        torch.set_float32_matmul_precision(flags["float32_matmul_precision"])
        torch.backends.cuda.matmul.allow_tf32 = flags["matmul_allow_tf32"]  # after the precision, which sets it
        torch.set_default_dtype(flags["default_dtype"])
        torch.set_num_threads(flags["num_threads"])
        torch.set_grad_enabled(flags["grad_enabled"])
        torch.autograd.set_detect_anomaly(flags["anomaly"])
        for key in set(os.environ) - set(self.environment):
            del os.environ[key]
        os.environ.update(self.environment)
        if "torch._dynamo" in sys.modules:  # a compiled model's guards and graphs belong to its trial
            sys.modules["torch._dynamo"].reset()

    def differences(self) -> dict[str, tuple[Any, Any]]:
        """The flags that differ from the captured ones (``{name: (captured, now)}``); for tests."""
        now = self._flags()
        return {k: (v, now[k]) for k, v in self.flags.items() if now[k] != v}
