"""Connecting this process to Ray: a cluster at an address, or an embedded local Ray started here
(loopback only, token authentication on, every worker able to import what this process imports).

Kept apart from the driver so that a process starting Ray (a benchmark, a test session) need not
import the driver's modules (torch among them).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from typing import Mapping

from tune_service.errors import ClusterUnreachable
from tune_service.execution.allocator import arena_environment, cap_arenas


def init_ray(
    address: str | None = None, num_cpus: int | None = None, log_to_driver: bool = True, state_api: bool = True
) -> None:
    """Connect to the Ray cluster at ``address``, or start an embedded local Ray bound to loopback.
    ``log_to_driver``: whether what Ray's workers print reaches this process's console. ``state_api``:
    whether the embedded Ray serves its dashboard (the state API), which only Ray Train's runs need
    (see :attr:`~tune_service.execution.plan.SweepPlan.runs_ray_train`); without it Ray starts in about
    1.4 s less (4.0 s against 5.4 s here) and two fewer processes keep running.

    Raises:
        ClusterUnreachable: nothing answers at ``address`` (checked first: Ray itself retries for minutes).

    The embedded Ray's workers get this process's ``sys.path``, so a task module the driver can
    import (``mypkg.tasks:MyTask``) imports on every rank too; Ray itself passes on only the script's
    directory and the working directory.

    The embedded Ray listens on loopback only (its GCS, raylet, workers, agents and any dashboard) and
    keeps Ray's token authentication on (see :func:`_embedded_ray_security`).

    This process's malloc arenas are capped first, before Ray starts its threads, and so are the embedded
    Ray's processes' (:mod:`~tune_service.execution.allocator`): a long sweep's driver grows less with the
    trials behind it.
    """
    import ray

    cap_arenas()
    if address:
        _refuse_unreachable(address)
        try:
            ray.init(address=address, logging_level=logging.WARNING, log_to_driver=log_to_driver)
        except ConnectionError as err:
            raise ClusterUnreachable(f"address: no Ray cluster at {address!r}: {str(err).splitlines()[0]}") from None
        return
    search_path = os.pathsep.join(p for p in sys.path if p and os.path.isdir(p))
    port = free_listening_port()
    # The state API's address, told to every worker: without it, Ray Train's placement-group cleaner
    # looks for the Ray instances of the machine and fails when there are several.
    workers_environment = {
        "PYTHONPATH": search_path,
        "RAY_API_SERVER_ADDRESS": f"http://127.0.0.1:{port}",
        **arena_environment(),
    }
    with _embedded_ray_security(), inherited_by_ray_processes(workers_environment):
        ray.init(
            address="local",
            num_cpus=num_cpus,
            include_dashboard=state_api,  # Ray Train's placement-group cleanup uses the state API it serves
            dashboard_host="127.0.0.1",
            dashboard_port=port,
            logging_level=logging.WARNING,
            log_to_driver=log_to_driver,
        )


@contextlib.contextmanager
def inherited_by_ray_processes(variables: Mapping[str, str]):
    """Around the ``ray.init`` that starts a local Ray: ``variables`` are set in this process's
    environment, which Ray's raylet and so every worker it starts inherit, and put back afterwards.

    Not Ray's job-level ``runtime_env={"env_vars": ...}``, which says the same: a job with a runtime
    environment gets none of the workers Ray starts ahead of demand, so every actor (each trial's actor
    and each rank of a gang) waited for a Python process of its own to start: 0.9 s an actor here,
    against 0.2-0.5 s (Ray 2.60, 2 CPUs).
    """
    before = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _refuse_unreachable(address: str, timeout_s: float = 5.0) -> None:
    """Refuse a ``HOST:PORT`` (or ``ray://HOST:PORT``) address where nothing accepts a connection."""
    import socket

    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return  # "auto", or a form Ray resolves itself; ray.init says if it finds nothing
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as err:
        raise ClusterUnreachable(
            f"address: nothing answers at {address!r} ({err.strerror or type(err).__name__}); "
            f"is the cluster's head node up, and is this its GCS address (port 6379)?"
        ) from None


#: Where a port for a Ray server is chosen: above Ray's worker ports (10002-19999) and below the ports
#: the kernel gives outgoing connections (see :func:`_outgoing_ports_start`).
LISTENING_PORTS_START = 20000


def _outgoing_ports_start() -> int:
    """The lowest port the kernel gives an outgoing connection: Linux's ``ip_local_port_range`` (32768
    by default), else 49152 (macOS's and Windows' default)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as ports:
            return int(ports.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 49152


def free_listening_port(candidates: range | None = None) -> int:
    """A loopback port that nothing listens on now, for a server of a Ray about to start (the embedded
    Ray's dashboard; a test cluster's nodes).

    Not a port from ``bind(("127.0.0.1", 0))``: those come from the range the kernel also gives
    outgoing connections, and the Ray that starts in the second before its dashboard binds opens many;
    one took the chosen port (CI, 2026-11-25: "Failed to bind to 127.0.0.1:38191 because it's already
    occupied"). A port below that range is taken only by a process that listens on it.
    """
    import random
    import socket

    if candidates is None:
        candidates = range(LISTENING_PORTS_START, max(_outgoing_ports_start(), LISTENING_PORTS_START + 1000))
    for port in random.sample(candidates, min(len(candidates), 200)):
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free loopback port in {candidates}")


@contextlib.contextmanager
def _embedded_ray_security():
    """Around the ``ray.init`` of the embedded Ray: loopback only, and token authentication on.

    Loopback: Ray 2.60 turns a node IP of ``127.0.0.1`` into the machine's address, except in its
    single-machine mode (its default on macOS and Windows, ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER``):
    there the node IP is loopback, and every server binds to it instead of all interfaces. That mode
    is switched on while this Ray starts, and back off afterwards (a later ``address`` connection
    must advertise the machine's address).

    Token: ``RAY_AUTH_MODE=token``, whatever the environment said; the token is ``RAY_AUTH_TOKEN``,
    or the user's ``RAY_AUTH_TOKEN_PATH``, else a new random one put in ``RAY_AUTH_TOKEN`` of this
    process (Ray's processes inherit it): it is never written to a file (Ray's default would write
    ``~/.ray/auth_token``), and as an environment variable named like a token it is redacted from
    everything tune-service writes.
    """
    import secrets

    from ray._private import ray_constants

    # ray/_raylet.pyi declares part of the compiled module only; both are in tune_service.ray_internals (tested)
    from ray._raylet import AuthenticationTokenLoader, Config  # type: ignore[attr-defined]

    if not (os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH")):
        os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
    os.environ["RAY_AUTH_MODE"] = "token"
    Config.initialize("")  # as Ray does when it turns token mode on: this process's config sees it
    AuthenticationTokenLoader.instance().reset_cache()
    cluster_mode, ray_constants.ENABLE_RAY_CLUSTER = ray_constants.ENABLE_RAY_CLUSTER, False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = cluster_mode
