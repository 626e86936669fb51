"""Shared fixtures. Integration tests share one real local Ray (2 CPUs, dashboard on loopback), started
once per test session and shut down at its end, so no Ray process outlives the tests."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def ray_cluster():
    import ray

    from tune_service.execution.driver import init_ray

    init_ray(num_cpus=2)  # the same embedded Ray that `tune-run` starts, sized like CI's machine
    try:
        yield ray
    finally:
        ray.shutdown()


@pytest.fixture
def forbid_ray_start(monkeypatch):
    """Fail the test if anything calls ``ray.init`` (robust even when the session's Ray is running)."""
    import ray

    def refuse(*args, **kwargs):
        raise AssertionError("ray.init was called")

    monkeypatch.setattr(ray, "init", refuse)


@pytest.fixture(autouse=True)
def _wandb_offline(monkeypatch):
    """Tests never talk to a wandb server."""
    monkeypatch.setenv("WANDB_MODE", "offline")


def pytest_collection_modifyitems(config, items):
    """The tiers: a test on a real Ray (``integration``) is ``slow`` unless it is marked ``quick``, so
    ``pytest -m "not slow"`` runs the unit and training tests and a couple of tiny real sweeps.

    Tests marked ``gpu`` need CUDA: skipped, with the reason, on machines without it (CI)."""
    import torch

    for item in items:
        if "integration" in item.keywords and "quick" not in item.keywords:
            item.add_marker(pytest.mark.slow)
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
