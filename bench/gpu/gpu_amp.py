"""On a GPU: automatic mixed precision (bf16, and fp16 with a GradScaler) against fp32, step time and
peak memory of a small CNN, through the service's precision policy (``choose_precision``: autocast
around the forward pass, the loss in fp32, the GradScaler enabled for fp16 only), as the shared loop
trains.

The model: a small CIFAR-sized CNN (three conv blocks of 64, 128 and 256 channels with BatchNorm, a
linear head) on random 3x32x32 images, batch 256, Adam. Each precision gets a fresh model; step time is
the median over ``steps`` synchronised steps after warm-up, taken in rounds that cycle through the
precisions (fp32, bf16, fp16, then the next round starting one later) so a busy moment of the GPU falls
on all of them; peak memory is ``torch.cuda.max_memory_allocated`` over a precision's steps. Figures:
bf16 / fp32 and fp16 / fp32, for step time and for peak memory (no target set; fp32 is the anchor).

Without CUDA nothing runs and the result says ``not run: no CUDA``.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from bench.common import figure
from bench.workloads import small_cnn

NAME = "gpu_amp"
SIZES = {False: {"steps": 50, "rounds": 3, "batch": 256}, True: {"steps": 20, "rounds": 1, "batch": 256}}
PRECISIONS = ("fp32", "bf16", "fp16")


class Stepper:
    """One precision's model, optimizer, scaler and batch on ``device``."""

    def __init__(self, precision: str, device, batch: int):
        import torch

        from tune_service.training.precision import choose_precision

        self.device = device
        self.precision = choose_precision(precision, device)
        torch.manual_seed(0)
        self.model = small_cnn().to(device).to(memory_format=torch.channels_last)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-3)
        self.scaler = self.precision.scaler()
        self.inputs = torch.randn(batch, 3, 32, 32, device=device).to(memory_format=torch.channels_last)
        self.targets = torch.randint(0, 10, (batch,), device=device)

    def step(self) -> None:
        import torch

        self.optimizer.zero_grad(set_to_none=True)
        with self.precision.autocast():
            outputs = self.model(self.inputs)
        loss = torch.nn.functional.cross_entropy(outputs.float(), self.targets)
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()

    def timed(self, steps: int) -> list[float]:
        import torch

        times = []
        for _ in range(steps):
            started = time.perf_counter()
            self.step()
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
            times.append(time.perf_counter() - started)
        return times


def measure(device, size: dict[str, Any], precisions=PRECISIONS) -> dict[str, Any]:
    """Median step time (ms) and peak memory (MiB, CUDA only) per precision."""
    import torch

    out: dict[str, Any] = {}
    times: dict[str, list[float]] = {p: [] for p in precisions}
    steppers = {}
    if device.type == "cuda":
        torch.cuda.init()  # the allocator's statistics refuse a device until CUDA is initialised
    for p in precisions:  # peak memory: each precision alone, from a clean allocator
        if device.type == "cuda":
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(device)
        steppers[p] = Stepper(p, device, size["batch"])
        steppers[p].timed(5)  # warm-up (cuDNN autotuning, allocator)
        out[p] = {"peak_mib": torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else None}
        if device.type == "cuda":
            steppers[p] = None  # free it before the next precision's peak is measured
            torch.cuda.empty_cache()
    steppers = {p: Stepper(p, device, size["batch"]) for p in precisions}
    for s in steppers.values():
        s.timed(5)
    for index in range(size["rounds"]):
        order = precisions[index % len(precisions):] + precisions[:index % len(precisions)]
        for p in order:
            times[p] += steppers[p].timed(size["steps"])
    for p in precisions:
        out[p]["step_ms"] = 1000 * statistics.median(times[p])
    return out


def run(quick: bool) -> dict[str, Any]:
    import torch

    size = SIZES[quick]
    if not torch.cuda.is_available():
        rows = [figure(f"{what}, {p} / fp32", "fp32", None, None, None, "x", note="not run: no CUDA")
                for what in ("GPU step time", "GPU peak memory") for p in ("bf16", "fp16")]
        return {"figures": rows, "status": "not run: no CUDA", "sizes": size}
    device = torch.device("cuda", 0)
    results = measure(device, size)
    figures = []
    for what, key, unit in (("GPU step time", "step_ms", "ms"), ("GPU peak memory", "peak_mib", "MiB")):
        for p in ("bf16", "fp16"):
            figures.append(figure(f"{what}, {p} / fp32", "fp32", 1.0, results[p][key] / results["fp32"][key], None, "x",
                                  note=f"{results[p][key]:.1f} {unit} against {results['fp32'][key]:.1f} {unit}"))
    return {"figures": figures, "status": "run", "device": torch.cuda.get_device_name(device),
            "bf16_supported": torch.cuda.is_bf16_supported(), "sizes": size, "results": results}


if __name__ == "__main__":
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))
    from bench.run import main

    sys.exit(main([NAME] + sys.argv[1:]))
