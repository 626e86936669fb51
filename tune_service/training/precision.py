"""Mixed-precision policy: bf16 autocast where the device supports it (no loss scaling needed), fp16 with
a GradScaler on older GPUs, fp32 otherwise. The loss is always computed in fp32."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch

from tune_service.spec.training import PRECISIONS


@dataclass(frozen=True)
class Precision:
    name: str  # "bf16" | "fp16" | "fp32"
    device_type: str

    @property
    def dtype(self) -> torch.dtype | None:
        return {"bf16": torch.bfloat16, "fp16": torch.float16}.get(self.name)

    def autocast(self):
        if self.dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device_type, dtype=self.dtype)

    def scaler(self) -> torch.amp.GradScaler:
        """A GradScaler, enabled only for fp16 (bf16 has fp32's range and needs no loss scaling)."""
        return torch.amp.GradScaler(self.device_type, enabled=self.name == "fp16")


def choose_precision(requested: str, device: torch.device) -> Precision:
    """Resolve ``auto``: bf16 on GPUs that support it, fp16 on older GPUs, fp32 on CPU."""
    if requested not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {requested!r}")
    if requested == "auto":
        if device.type == "cuda":
            requested = "bf16" if torch.cuda.is_bf16_supported() else "fp16"
        else:
            requested = "fp32"
    return Precision(requested, device.type)
