"""What a warm rank puts back between trials (see tune_service.execution.process_state.ProcessState)."""

from __future__ import annotations

from tune_service.execution.process_state import ProcessState


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


def test_process_state_restore_undoes_deterministic_algorithms():
    import torch

    state = ProcessState()
    try:
        torch.use_deterministic_algorithms(True, warn_only=True)
        assert set(state.differences()) == {"deterministic", "deterministic_warn_only"}
    finally:
        state.restore()
    assert state.differences() == {}


def test_restoring_unchanged_flags_does_not_import_torchs_compiler():
    """Setting the deterministic-algorithms flag imports torch._dynamo (1.4 s, once per process): a rank
    whose trials never change the flag must not pay it at every new gang's first trial."""
    import subprocess
    import sys

    code = ("import sys; from tune_service.execution.process_state import ProcessState; "
            "state = ProcessState(); state.restore(); print('torch._dynamo' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "False"
