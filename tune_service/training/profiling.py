"""Profiling on demand: a ``torch.profiler`` trace of a few training steps of the first epoch, recorded
on rank 0 and written into the trial's directory (open it in Perfetto or chrome://tracing)."""

from __future__ import annotations

from pathlib import Path

import torch

TRACE_FILE = "profile_rank0.json"


class StepProfiler:
    """Call :meth:`step` after every training step; a no-op unless ``steps`` > 0 and ``enabled``.

    One warm-up step is skipped (it holds one-off allocations), then ``steps`` steps are recorded and
    the trace is exported as soon as they are done; the rest of the trial runs unprofiled.
    """

    def __init__(self, steps: int, output_dir: str | Path | None, device: torch.device, enabled: bool):
        self.path = Path(output_dir) / TRACE_FILE if output_dir is not None else None
        self._profiler = None
        if steps > 0 and enabled and self.path is not None:
            activities = [torch.profiler.ProfilerActivity.CPU]
            if device.type == "cuda":
                activities.append(torch.profiler.ProfilerActivity.CUDA)
            self._profiler = torch.profiler.profile(
                activities=activities,
                schedule=torch.profiler.schedule(wait=0, warmup=1, active=steps, repeat=1),
                on_trace_ready=self._export,
            )
            self._profiler.start()

    def _export(self, profiler) -> None:
        assert self.path is not None  # a profiler is made only with a path
        self.path.parent.mkdir(parents=True, exist_ok=True)
        profiler.export_chrome_trace(str(self.path))

    def step(self) -> None:
        if self._profiler is not None:
            self._profiler.step()

    def stop(self) -> None:
        if self._profiler is not None:
            self._profiler.stop()
            self._profiler = None
