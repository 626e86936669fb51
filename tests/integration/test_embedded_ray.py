"""The embedded Ray's workers get what they need from the driver (its search path, the state API's
address) through the environment they inherit, not through a job-level runtime environment: Ray gives a
job with a runtime environment none of the workers it starts ahead of demand, and every actor of such a
job (each trial's actor, each rank of a gang) waited for a Python process of its own. Among the variables,
``MALLOC_ARENA_MAX`` caps their malloc arenas, as the driver's own are capped (issue 43)."""

from __future__ import annotations

import os
import sys

import pytest

from tune_service.execution.allocator import ARENA_LIMIT

pytestmark = [pytest.mark.integration, pytest.mark.quick, pytest.mark.timeout(120)]


def test_the_embedded_rays_job_has_no_runtime_environment_and_its_workers_inherit_the_variables(ray_cluster):
    ray = ray_cluster
    assert ray.get_runtime_context().runtime_env == {}

    @ray.remote(num_cpus=0)
    def worker_environment():
        return os.environ.get("RAY_API_SERVER_ADDRESS"), sys.path, os.environ.get("MALLOC_ARENA_MAX")

    address, worker_path, arenas = ray.get(worker_environment.remote())
    assert address is not None and address.startswith("http://127.0.0.1:")
    here = [p for p in sys.path if p and os.path.isdir(p)]
    assert set(here) <= set(worker_path)
    assert arenas == os.environ.get("MALLOC_ARENA_MAX", str(ARENA_LIMIT))  # a user's own value passes through
    # Set for Ray's processes while they started, and put back in the driver afterwards.
    assert os.environ.get("RAY_API_SERVER_ADDRESS") != address
