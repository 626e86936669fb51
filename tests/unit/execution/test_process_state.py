"""What a warm rank puts back between trials (see tune_service.execution.rank.ProcessState)."""

from __future__ import annotations

from tune_service.execution.rank import ProcessState


def test_process_state_restore_undoes_flags_and_environment(monkeypatch):
    import os

    import torch

    monkeypatch.setenv("TUNE_SERVICE_TEST_VARIABLE", "before")
    state = ProcessState()
    try:
        torch.set_float32_matmul_precision("medium")
        torch.backends.cudnn.benchmark = not torch.backends.cudnn.benchmark
        os.environ["TUNE_SERVICE_TEST_VARIABLE"] = "changed"
        os.environ["TUNE_SERVICE_TEST_ADDED"] = "1"
        assert set(state.differences()) == {"float32_matmul_precision", "matmul_allow_tf32", "cudnn_benchmark"}
    finally:
        state.restore()
    assert state.differences() == {}
    assert os.environ["TUNE_SERVICE_TEST_VARIABLE"] == "before" and "TUNE_SERVICE_TEST_ADDED" not in os.environ
