"""Sweeps as Ray Jobs: submit a sweep to a Ray cluster and follow it from a handle, from a notebook or a
laptop that need not stay connected.

``submit`` validates the spec here, then hands the cluster's Jobs API (the Ray dashboard, port 8265 of
the head) one entrypoint: ``tune-run SPEC_FILE --address auto`` with the experiment's storage and name.
The spec travels as a file (:data:`SPEC_FILE`) in the job's working directory, not in the entrypoint,
which the Jobs API keeps and its dashboard shows. The user's task code travels in the job's runtime
environment (``working_dir``, ``py_modules``, ``pip``), which Ray gives every process of the job: the
driver, the trials and every rank. The experiment directory must be on storage that every node sees and
that the caller of :meth:`SweepJob.results` can read (a shared path mounted at the same place everywhere).

Stopping: Ray sends the entrypoint SIGTERM; ``tune-run`` takes it as Ctrl+C, so Tune saves the
experiment's state, ends its trials and ``summary.json`` records what finished (the rest
``interrupted``, for ``tune-run --resume``). Ray waits :data:`STOP_GRACE_S` before it kills the job.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping

from tune_service.errors import ClusterRefused, ClusterUnreachable, TuneServiceError, first_line
from tune_service.experiment.layout import plain_name_problem
from tune_service.experiment.remote import is_remote
from tune_service.redaction import MIN_SECRET_LENGTH, environment_secrets, looks_secret, refuse_secrets_in_spec
from tune_service.results import sweep_result as results
from tune_service.spec import SweepSpec, load_spec

#: The Jobs API of a Ray cluster started on this machine (``ray start --head``).
DEFAULT_ADDRESS = "http://127.0.0.1:8265"
#: Seconds Ray waits, after the SIGTERM of a stop, before it kills the sweep's driver: time for Tune to
#: save the experiment's state and for ``summary.json`` to be written.
STOP_GRACE_S = 60
#: The job metadata key that holds the experiment directory (how ``attach`` finds the results).
EXPERIMENT_KEY = "tune_service.experiment_dir"
TERMINAL = frozenset({"SUCCEEDED", "FAILED", "STOPPED"})
#: The spec's file in the job's working directory (the entrypoint's current directory on the cluster).
SPEC_FILE = "tune_service_sweep.json"


def jobs_address(address: str | None) -> str:
    """The Jobs API address to use: the one given, else ``RAY_API_SERVER_ADDRESS`` or an
    ``http(s)://`` ``RAY_ADDRESS`` from the environment (Ray's own convention), else this machine's."""
    if address:
        return address
    for name in ("RAY_API_SERVER_ADDRESS", "RAY_ADDRESS"):
        value = os.environ.get(name, "")
        if value.startswith(("http://", "https://")):
            return value
    return DEFAULT_ADDRESS


def submit(
    spec: str | os.PathLike | Mapping[str, Any] | SweepSpec,
    address: str | None = None,
    *,
    storage: str | os.PathLike,
    name: str | None = None,
    runtime_env: Mapping[str, Any] | None = None,
    overrides: Mapping[str, Any] | None = None,
    **more_overrides: Any,
) -> SweepJob:
    """Submit a sweep to the Ray cluster whose Jobs API is at ``address`` and return its handle.

    Args:
        spec: a spec file path, a dict in the spec format, or a loaded :class:`SweepSpec`; validated here,
            so a bad spec is refused before anything is submitted.
        address: the cluster's Jobs API, ``http://HEAD:8265`` (default: see :func:`jobs_address`).
        storage: where the experiment is written, as the cluster's nodes see it: a path shared by every
            node (and by this machine, for ``results()``), or remote storage (``s3://bucket/prefix``:
            :mod:`~tune_service.experiment.remote`). A relative path is made absolute here.
        name: the experiment name; by default the spec's name and the submission time.
        runtime_env: Ray's runtime environment for the job: how the task's code and its pip packages
            reach the cluster, e.g. ``{"working_dir": "."}``. Its ``env_vars`` reach every rank.
        overrides / more_overrides: dotted spec keys to set, as in :func:`tune_service.run`.

    Raises:
        TuneServiceError: the spec is invalid, or the Jobs API cannot be reached or refuses the job.
    """
    from tune_service.execution.driver import experiment_name

    if not isinstance(spec, SweepSpec):
        spec = load_spec(spec, {**(overrides or {}), **more_overrides})
    elif overrides or more_overrides:
        raise TuneServiceError("overrides: apply them when loading the spec (load_spec(path, overrides))")
    name = name or experiment_name(spec)
    if problem := plain_name_problem(name):
        raise TuneServiceError(f"name: {problem}")
    # The Jobs API stores the entrypoint (the spec travels in it) and the runtime environment, and its
    # dashboard shows both: neither may carry a secret.
    refuse_secrets_in_spec(spec.source)
    _refuse_secrets_in_runtime_env(runtime_env or {})
    storage = str(storage) if is_remote(storage) else str(Path(storage).resolve())
    experiment_dir = f"{storage.rstrip('/')}/{name}"
    entrypoint = shlex.join(["tune-run", SPEC_FILE, "--address", "auto", "--storage", storage, "--name", name])
    env = dict(runtime_env or {})
    env["env_vars"] = {"RAY_JOB_STOP_WAIT_TIME_S": str(STOP_GRACE_S), **dict(env.get("env_vars") or {})}
    address = jobs_address(address)
    client = _client(address)
    with tempfile.TemporaryDirectory(prefix="tune-service-job-") as staging:
        env["working_dir"] = _working_dir_with_spec(Path(staging), env.get("working_dir"), spec)
        try:  # returns once the working directory is uploaded: the staging copy can go
            job_id = client.submit_job(
                entrypoint=entrypoint,
                runtime_env=env,
                metadata={EXPERIMENT_KEY: experiment_dir, "tune_service.sweep": spec.name},
            )
        except (RuntimeError, ValueError, OSError) as err:  # the Jobs API's refusal, or the runtime env's
            raise TuneServiceError(
                f"submit: the Ray Jobs API at {address} refused the sweep: {first_line(err)}"
            ) from None
    return SweepJob(job_id, address, experiment_dir)


def _working_dir_with_spec(staging: Path, working_dir: str | os.PathLike | None, spec: SweepSpec) -> str:
    """A directory to upload as the job's ``working_dir``: ``staging``, holding the spec as
    :data:`SPEC_FILE` and a link to every entry of the user's own ``working_dir`` (a local directory).

    Ray packs a working directory following links (files and directories), with the user's
    ``.gitignore``/``.rayignore`` and ``excludes`` applying as they would to the directory itself, so the
    job sees the user's files and the spec side by side, and nothing is copied here.

    Raises:
        TuneServiceError: ``working_dir`` is not a local directory (a remote package cannot take the
            spec's file), or it already has a file named :data:`SPEC_FILE`.
    """
    # Its name stated: a spec's default name is its file's, here and there.
    document = {**dict(spec.source), "name": spec.name}
    (staging / SPEC_FILE).write_text(json.dumps(document, default=str), encoding="utf-8")
    if working_dir is None:
        return str(staging)
    source = Path(working_dir)
    if "://" in str(working_dir) or not source.is_dir():
        raise TuneServiceError(
            f"runtime_env.working_dir: must be a local directory (the sweep's spec travels in "
            f"it as a file); got {str(working_dir)!r}"
        )
    for entry in source.resolve().iterdir():
        if entry.name == SPEC_FILE:
            raise TuneServiceError(
                f"runtime_env.working_dir: holds {SPEC_FILE}, the name submit gives the "
                f"sweep's spec on the cluster; rename it"
            )
        (staging / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())
    return str(staging)


def _refuse_secrets_in_runtime_env(runtime_env: Mapping[str, Any]) -> None:
    """Refuse ``env_vars`` that carry a secret in clear: a variable named like one, or holding the value of
    one of this machine's secrets.

    Raises:
        TuneServiceError: naming the variable (never its value) and how a cluster gets its secrets instead.
    """
    values = set(environment_secrets().values())
    for name, value in dict(runtime_env.get("env_vars") or {}).items():
        text = str(value)
        if (looks_secret(name) and len(text.strip()) >= MIN_SECRET_LENGTH) or any(v in text for v in values):
            raise TuneServiceError(
                f"runtime_env.env_vars.{name}: holds a secret in clear, which Ray's Jobs API stores and its "
                f"dashboard shows; give the cluster its secrets instead (a Kubernetes secret in the RayJob's "
                f"pods, or the head node's environment: docs/cluster.md)"
            )


def attach(job_id: str, address: str | None = None) -> SweepJob:
    """The handle of a sweep submitted earlier (``tune-run submit`` prints its job id).

    Raises:
        TuneServiceError: the cluster has no such job, or the job is not a tune-service sweep.
    """
    address = jobs_address(address)
    info = _job_info(_client(address), job_id, address)
    experiment_dir = (info.metadata or {}).get(EXPERIMENT_KEY)
    if not experiment_dir:
        raise TuneServiceError(
            f"job: {job_id!r} at {address} is not a tune-service sweep (no {EXPERIMENT_KEY} in its metadata)"
        )
    return SweepJob(job_id, address, experiment_dir)


@dataclass(frozen=True)
class SweepJob:
    """A submitted sweep. Every method asks the cluster afresh, so a handle can be rebuilt anywhere
    from its job id (:func:`attach`)."""

    job_id: str
    address: str
    experiment_dir: str

    def status(self) -> str:
        """The job's state: ``PENDING``, ``RUNNING``, ``SUCCEEDED``, ``FAILED`` or ``STOPPED``."""
        return str(_job_info(_client(self.address), self.job_id, self.address).status.value)

    def logs(self, follow: bool = False) -> str | Iterator[str]:
        """The driver's output so far (a string), or, with ``follow``, an iterator of chunks that ends
        when the job does."""
        client = _client(self.address)
        if not follow:
            return client.get_job_logs(self.job_id)
        return _follow(client, self.job_id)

    def wait(self, timeout: float | None = None, poll_s: float = 1.0) -> str:
        """Block until the job ends and return its final status.

        Raises:
            TimeoutError: it was still running after ``timeout`` seconds.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while (state := self.status()) not in TERMINAL:
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"job {self.job_id} still {state} after {timeout:g} s")
            time.sleep(poll_s)
        return state

    def stop(self, timeout: float | None = STOP_GRACE_S + 30) -> str:
        """Stop the sweep: its trials end, what finished is kept (``results()`` shows it), and
        ``tune-run --resume`` on the experiment directory continues it. Returns the final status."""
        if self.status() not in TERMINAL:
            _client(self.address).stop_job(self.job_id)
        return self.wait(timeout)

    def results(self) -> results.SweepResult:
        """The sweep's results from its experiment directory, as :func:`tune_service.run` returns them.

        Raises:
            TuneServiceError: the sweep has written no results yet (it is still running, or was killed
                before it could), or the directory cannot be read from here.
        """
        return results.load(self.experiment_dir)


def _client(address: str):
    from ray.exceptions import AuthenticationError
    from ray.job_submission import JobSubmissionClient

    try:
        return JobSubmissionClient(address, headers=_auth_headers())
    except AuthenticationError as err:  # the client's first request (Ray's version) needs the token too
        raise ClusterRefused(
            f"address: the Ray Jobs API at {address!r} refused the request "
            f"({first_line(err)}); set RAY_AUTH_TOKEN to the cluster's token "
            f"(docs/cluster.md)"
        ) from None
    except (ConnectionError, RuntimeError, ValueError) as err:
        raise ClusterUnreachable(f"address: cannot reach the Ray Jobs API at {address!r}: {first_line(err)}") from None


def _auth_headers() -> dict[str, str]:
    """The bearer token of a cluster with Ray's token authentication, found where Ray's own nodes look
    (``RAY_AUTH_TOKEN``, the file at ``RAY_AUTH_TOKEN_PATH``, ``~/.ray/auth_token``), unless
    ``RAY_AUTH_MODE=disabled``. Ray's client sends it only when this process itself runs in token mode;
    a notebook that never started Ray does not."""
    if os.environ.get("RAY_AUTH_MODE", "").lower() == "disabled":
        return {}
    token = os.environ.get("RAY_AUTH_TOKEN", "").strip()
    if not token:
        path = Path(os.environ.get("RAY_AUTH_TOKEN_PATH") or Path.home() / ".ray" / "auth_token")
        token = path.read_text(encoding="utf-8").strip() if path.is_file() else ""
    return {"Authorization": f"Bearer {token}"} if token else {}


def _job_info(client, job_id: str, address: str):
    try:
        return client.get_job_info(job_id)
    except RuntimeError as err:
        raise TuneServiceError(f"job: no job {job_id!r} at {address} ({first_line(err)})") from None


def _follow(client, job_id: str) -> Iterator[str]:
    """Ray's log tail is an async generator; this drives it from plain code."""
    loop = asyncio.new_event_loop()
    tail = client.tail_job_logs(job_id)
    try:
        while True:
            try:
                yield loop.run_until_complete(tail.__anext__())
            except StopAsyncIteration:
                return
    finally:
        loop.run_until_complete(tail.aclose())
        loop.close()
