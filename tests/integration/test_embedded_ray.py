"""The embedded Ray's workers get what they need from the driver (its search path, the state API's
address) through the environment they inherit, not through a job-level runtime environment: Ray gives a
job with a runtime environment none of the workers it starts ahead of demand, and every actor of such a
job (each trial's actor, each rank of a gang) waited for a Python process of its own."""

from __future__ import annotations

import os
import sys

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.quick, pytest.mark.timeout(120)]


def test_the_embedded_rays_job_has_no_runtime_environment_and_its_workers_inherit_the_variables(ray_cluster):
    ray = ray_cluster
    assert ray.get_runtime_context().runtime_env == {}

    @ray.remote(num_cpus=0)
    def worker_environment():
        return os.environ.get("RAY_API_SERVER_ADDRESS"), sys.path

    address, worker_path = ray.get(worker_environment.remote())
    assert address is not None and address.startswith("http://127.0.0.1:")
    here = [p for p in sys.path if p and os.path.isdir(p)]
    assert set(here) <= set(worker_path)
    # Set for Ray's processes while they started, and put back in the driver afterwards.
    assert os.environ.get("RAY_API_SERVER_ADDRESS") != address
