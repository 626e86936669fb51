"""Shared fixtures. Integration tests share one real local Ray (2 CPUs, dashboard on loopback), started
once per test session and shut down at its end, so no Ray process outlives the tests."""

from __future__ import annotations

import os
import sys

import pytest

# Python's default, put back for the tests and every process they start (Ray's workers, the ranks, the
# CLIs, the programs): this machine's environment sets PYTHONDONTWRITEBYTECODE=1, and each of those
# processes then compiled tune_service's modules from source again. With bytecode cached (in the
# __pycache__ directories git ignores) the integration tests of test_sweeps.py take 74 s, not 84.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False


@pytest.fixture(scope="session")
def ray_cluster():
    import ray

    _start_session_ray()
    try:
        yield ray
    finally:
        ray.shutdown()


#: How long a test's trials may take to hand their CPUs back to the session's Ray once the test has ended
#: (Tune removes its placement groups, Ray Train's cleaner its own, actors exit).
RESOURCES_RETURN_S = 30.0


@pytest.fixture(autouse=True)
def _session_ray_gets_its_cpus_back(request):
    """After each test on the session's Ray: every CPU is free again, else the test fails naming what holds
    them. A CPU held for good makes every later test of two-rank trials wait for it until its timeout
    (CI once lost 7 x 400 s so, far from the test that leaked it); this names that test."""
    yield
    if "ray_cluster" not in request.fixturenames:
        return
    import time

    import ray

    if not ray.is_initialized():
        return
    deadline = time.monotonic() + RESOURCES_RETURN_S
    while True:
        total, free = ray.cluster_resources().get("CPU", 0.0), ray.available_resources().get("CPU", 0.0)
        if free >= total or time.monotonic() >= deadline:
            break
        time.sleep(0.1)  # a test ends about when its trials do: poll often
    if free < total:
        holders = _what_holds_cpus()
        ray.shutdown()  # the next tests get a whole Ray again
        _start_session_ray()
        pytest.fail(f"{total - free:g} of the session Ray's {total:g} CPUs still held {RESOURCES_RETURN_S:g} s after "
                    f"the test: {holders}", pytrace=False)


def _start_session_ray() -> None:
    from tune_service.execution.connect import init_ray

    init_ray(num_cpus=2)  # the same embedded Ray that `tune-run` starts, sized like CI's machine


def _what_holds_cpus() -> str:
    """The session Ray's placement groups not removed, its actors not dead and its tasks running, one line."""
    import ray
    from ray.util.state import list_actors, list_tasks

    groups = [f"group {group_id[:8]} ({info['name'] or 'unnamed'}, {info['state']}, bundles {info['bundles']})"
              for group_id, info in ray.util.placement_group_table().items() if info["state"] != "REMOVED"]
    actors = [f"actor {a.class_name} {a.actor_id[:8]} ({a.state}, pid {a.pid}, {a.required_resources}, "
              f"group {(a.placement_group_id or '-')[:8]})"
              for a in list_actors(filters=[("state", "!=", "DEAD")], detail=True)]
    tasks = [f"task {t.name} ({t.state}, {t.type})" for t in list_tasks(filters=[("state", "=", "RUNNING")])]
    return "; ".join(groups + actors + tasks + [f"free: {ray.available_resources()}"])


@pytest.fixture
def forbid_ray_start(monkeypatch):
    """Fail the test if anything calls ``ray.init`` (robust even when the session's Ray is running)."""
    import ray

    def refuse(*args, **kwargs):
        raise AssertionError("ray.init was called")

    monkeypatch.setattr(ray, "init", refuse)


@pytest.fixture(scope="session")
def _exit_watches():
    """The session's :class:`driver_process.ExitWatch` es, each joined and checked at the end of the session."""
    watches = []
    yield watches
    failures = []
    for watch in watches:
        watch.join()
        if watch.left:
            failures.append(f"{watch.what}: still running {watch.timeout:g} s later: {watch.left}")
    assert not failures, "\n".join(failures)


@pytest.fixture
def expect_exit(request, _exit_watches):
    """``expect_exit(processes, timeout)``: assert that ``processes`` have all ended within ``timeout`` s
    from now (as ``assert not still_running(processes, timeout)``), checked in a thread and reported at
    the end of the test session, naming the test. For processes that take long to end on their own and
    need nothing from the test: the Ray agents of a driver killed with SIGKILL take 60 s (they tell the
    killed Ray's GCS that their raylet died, with a 60 s timeout), which the test need not sit through."""
    from driver_process import ExitWatch

    def expect(processes, timeout: float) -> None:
        _exit_watches.append(ExitWatch(list(processes), timeout, request.node.nodeid))

    return expect


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


#: What a Ray process of any kind looks like in the process table (its name or its command line).
_RAY_PROCESS_MARKS = ("ray::", "raylet", "gcs_server", "dashboard/agent.py", "runtime_env/agent", "default_worker.py")


#: Set in this test session's environment, so inherited by every process it starts (Ray's GCS, raylet and
#: workers, a ``ray start`` node, a ``tune-run`` child): a session counts only its own Ray processes, and two
#: sessions (pytest-xdist's workers) can share the machine.
_SESSION_VARIABLE = "TUNE_SERVICE_TEST_SESSION"


def _ray_processes() -> set[int]:
    """This session's Ray processes that are running now."""
    import psutil

    session = os.environ[_SESSION_VARIABLE]
    found = set()
    for proc in psutil.process_iter(["name", "cmdline"]):
        text = " ".join([proc.info["name"] or "", *(proc.info["cmdline"] or ())])
        if not any(mark in text for mark in _RAY_PROCESS_MARKS):
            continue
        try:
            if proc.environ().get(_SESSION_VARIABLE) == session:
                found.add(proc.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def pytest_sessionstart(session):
    os.environ[_SESSION_VARIABLE] = f"{os.getpid()}"
    session.config._ray_processes_before = _ray_processes()


def pytest_sessionfinish(session, exitstatus):
    """Fail the run if a Ray process started during it outlives it (30 s allowed to exit): the tests
    must leave the machine as they found it."""
    import time

    before = getattr(session.config, "_ray_processes_before", set())
    deadline = time.monotonic() + 30
    while (left := _ray_processes() - before) and time.monotonic() < deadline:
        time.sleep(1)
    if left:
        import psutil

        names = []
        for pid in sorted(left):
            try:
                names.append(f"{pid} {' '.join(psutil.Process(pid).cmdline())[:80]}")
            except psutil.NoSuchProcess:
                continue
        if names:
            writer = session.config.get_terminal_writer()
            writer.line("Ray processes left by the tests:\n  " + "\n  ".join(names), red=True)
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
