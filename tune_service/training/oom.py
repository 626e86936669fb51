"""Out-of-memory in a trial: recognised (CUDA's and the CPU allocator's), the memory released, and
re-raised as one clear error naming the batch and the device's memory, so the sweep's record says what
to change instead of holding a bare allocator traceback."""

from __future__ import annotations

import gc
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

# torch is imported in the functions that use it: a warm trial's actor catches TrialOutOfMemory and
# must not import torch for it (see tune_service.execution.warm_trial).

_CPU_ALLOCATOR_MESSAGES = ("can't allocate memory", "out of memory")


class TrialOutOfMemory(RuntimeError):
    """A rank ran out of memory at ``micro_batch`` samples per step. Picklable (it crosses Ray)."""

    def __init__(self, message: str, micro_batch: int, grad_accum_steps: int):
        super().__init__(message)
        self.micro_batch = micro_batch
        self.grad_accum_steps = grad_accum_steps

    def __reduce__(self):
        return (type(self), (str(self), self.micro_batch, self.grad_accum_steps))


def is_out_of_memory(error: BaseException) -> bool:
    """True for a CUDA OOM and for the CPU allocator failing to allocate."""
    import torch

    if isinstance(error, torch.OutOfMemoryError):
        return True
    return isinstance(error, RuntimeError) and any(m in str(error) for m in _CPU_ALLOCATOR_MESSAGES)


def device_memory(device: torch.device) -> str:
    """The device's total memory, for the error message (``cuda:0 with 79.2 GiB``)."""
    import torch

    if device.type == "cuda":
        total = torch.cuda.get_device_properties(device).total_memory
    else:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return f"{device} with {total / 2**30:.1f} GiB"


def hold_to_gpu_share(share: float, device: torch.device) -> None:
    """Hold this process to ``share`` of the GPU's memory when it was given less than the whole GPU (a
    packed trial's rank; ``share`` is its ``gpus_per_worker``): the caching allocator then raises an
    out-of-memory error past the share, so the trial that overreaches fails alone (and is retried under
    its OOM policy) instead of taking memory its neighbours on the GPU were promised. Nothing on a CPU
    device or at a share of 1 or more."""
    if device.type == "cuda" and 0 < share < 1:
        import torch

        torch.cuda.set_per_process_memory_fraction(share, device)


def release_memory(device: torch.device) -> None:
    """Free what can be freed after an OOM or at the end of a trial: unreachable tensors, cuBLAS's cached
    workspaces, then the CUDA caching allocator's blocks, so the next trial on this device starts with its
    memory free (``torch.cuda.memory_allocated`` zero unless something still holds a tensor)."""
    gc.collect()
    if device.type == "cuda":
        import torch

        from tune_service.torch_internals import clear_cublas_workspaces

        clear_cublas_workspaces()
        torch.cuda.empty_cache()


def out_of_memory_error(
    micro_batch: int, grad_accum_steps: int, world_size: int, device: torch.device, epoch: int, retry_enabled: bool
) -> TrialOutOfMemory:
    hint = (
        "the trial will be retried at half the per-rank batch"
        if retry_enabled and micro_batch > 1
        else "lower batch_size, raise training.grad_accum_steps, or set training.oom_retry: true"
    )
    when = f"at epoch {epoch}" if epoch else "while setting up the trial"  # epoch 0: before the first batch
    return TrialOutOfMemory(
        f"out of memory {when}: per-rank batch {micro_batch} (x{grad_accum_steps} accumulation, "
        f"{world_size} ranks) on {device_memory(device)}; {hint}",
        micro_batch,
        grad_accum_steps,
    )
