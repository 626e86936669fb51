"""Every private name of PyTorch that tune-service relies on, in one place, with why.

- ``torch._C._cuda_clearCublasWorkspaces`` (used in ``training/oom.py``'s ``release_memory``): cuBLAS
  keeps a workspace per (handle, stream), which torch allocates through its caching allocator and keeps
  for the life of the process, so ``torch.cuda.memory_allocated`` is never back to zero after a trial
  that multiplied matrices (64 MiB on an H200), and ``torch.cuda.empty_cache`` does not return it.
  A warm rank must end a trial holding no CUDA memory (its gang checks, and retires a rank that holds
  some); torch's own CUDA memory-leak check clears the workspaces the same way before it measures. The
  next trial's first product allocates them again (microseconds).

``tests/unit/test_torch_internals.py`` checks each name on a CUDA build of torch. Code calls them
through this module, never with a fallback: a torch without one fails with an error naming it.
"""

from __future__ import annotations

#: The names, on ``torch._C``.
CLEAR_CUBLAS_WORKSPACES = "_cuda_clearCublasWorkspaces"
NAMES = (CLEAR_CUBLAS_WORKSPACES,)


def clear_cublas_workspaces() -> None:
    """Give cuBLAS's cached workspaces back to the caching allocator (CUDA builds of torch only)."""
    import torch

    getattr(torch._C, CLEAR_CUBLAS_WORKSPACES)()
