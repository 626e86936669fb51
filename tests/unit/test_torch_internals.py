"""The private PyTorch names of ``tune_service/torch_internals.py`` are there in the installed torch."""

import pytest
import torch

from tune_service import torch_internals


@pytest.mark.skipif(not torch.backends.cuda.is_built(), reason="a CPU build of torch has no CUDA names")
@pytest.mark.parametrize("name", torch_internals.NAMES)
def test_each_private_torch_name_exists(name):
    assert callable(getattr(torch._C, name, None)), f"torch {torch.__version__} has no torch._C.{name}"
