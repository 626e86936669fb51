"""Sweeps submitted as Ray Jobs to a real 2-node Ray cluster on this machine: a head and a second node
started with ``ray start`` on loopback, one CPU each, so a 2-rank trial must put one rank on each node.

The task's code is not importable on the cluster: it travels in the job's runtime environment
(``tests/submitted_code`` as ``working_dir``). The cluster has a temp dir of its own, and every process
whose command line names it is killed at the end, whatever happens (``ray stop`` would also stop the
test session's own Ray and anyone else's).
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest
import yaml

import tune_service
from tune_service.execution.connect import free_listening_port
from tune_service.jobs import SPEC_FILE, SweepJob, attach

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
CODE = ROOT / "tests" / "submitted_code"
RECORD = re.compile(r"trial=(?P<trial>\w+)-rank=(?P<rank>\d)-node=(?P<node>\w+)-pid=(?P<pid>\d+)")


def _compose_ray_auth(token: str) -> dict[str, str]:
    """Ray's authentication settings as docker/compose.yaml gives every node, with the token it takes
    from the shell (``${RAY_AUTH_TOKEN:?...}``) filled in, as ``docker compose up`` does."""
    environment = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())["x-node"]["environment"]
    auth = {name: str(value) for name, value in environment.items() if name.startswith("RAY_AUTH")}
    assert auth["RAY_AUTH_TOKEN"].startswith("${RAY_AUTH_TOKEN:?"), auth  # taken from the shell, required
    return {**auth, "RAY_AUTH_TOKEN": token}


#: The ports of the two nodes, each chosen once (``free_listening_port`` may repeat itself).
_TAKEN: set[int] = set()


def _free_port() -> int:
    while (port := free_listening_port()) in _TAKEN:
        pass
    _TAKEN.add(port)
    return port


def _ports() -> list[str]:
    """Every port a node would otherwise take by default, chosen free, so two nodes and the test
    session's own Ray share this machine."""
    names = ("node-manager-port", "object-manager-port", "metrics-export-port", "dashboard-agent-listen-port",
             "dashboard-agent-grpc-port", "runtime-env-agent-port")
    return [f"--{name}={_free_port()}" for name in names]


def _cluster_processes(temp_dir: str) -> list[psutil.Process]:
    """The processes whose command line names ``temp_dir``, and all their descendants: Ray's agents
    rename themselves (``ray::DashboardAgent``) and would otherwise outlive the test."""
    found = {}
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if any(temp_dir in part for part in proc.info["cmdline"] or ()):
                found.update({p.pid: p for p in (proc, *proc.children(recursive=True))})
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return list(found.values())


@pytest.fixture(scope="module")
def two_nodes():
    """A head and a worker node, 1 CPU each, on 127.0.0.1, with Ray's token authentication on as
    docker/compose.yaml sets it (a token of their own); yields the Jobs API address and the token's path."""
    ray_bin = Path(sys.executable).parent / "ray"
    temp_dir = tempfile.mkdtemp(prefix="ts2n-")  # short: Ray's socket paths live under it
    token = Path(temp_dir) / "auth_token"
    token.write_text(secrets.token_hex(32))
    gcs_port, dashboard_port = _free_port(), _free_port()
    # The job's entrypoint `tune-run` resolves on the head's PATH, as it would in our image.
    env = {**os.environ, "PATH": f"{ray_bin.parent}{os.pathsep}{os.environ['PATH']}", "RAY_USAGE_STATS_ENABLED": "0",
           **_compose_ray_auth(token.read_text()),
           # Other Ray instances on this machine (the test session's own) must not confuse the
           # processes of this one that look their cluster up (Ray Train's placement-group cleaner).
           "RAY_ADDRESS": f"127.0.0.1:{gcs_port}"}
    common = ["--num-cpus=1", "--num-gpus=0", "--node-ip-address=127.0.0.1", "--disable-usage-stats"]
    try:
        subprocess.run([str(ray_bin), "start", "--head", f"--port={gcs_port}", f"--temp-dir={temp_dir}",
                        "--include-dashboard=true", "--dashboard-host=127.0.0.1", f"--dashboard-port={dashboard_port}",
                        f"--ray-client-server-port={_free_port()}", *common, *_ports()],
                       env=env, check=True, capture_output=True, timeout=120)
        # A temp dir of its own, as a second machine would have: nodes sharing one would share the cache
        # of the job's working_dir, and one node's cleanup would delete the other's copy.
        subprocess.run([str(ray_bin), "start", f"--address=127.0.0.1:{gcs_port}", f"--temp-dir={temp_dir}/w",
                        *common, *_ports()],
                       env=env, check=True, capture_output=True, timeout=120)
        address = f"http://127.0.0.1:{dashboard_port}"
        _wait_for_nodes(address, 2, token)
        yield address, token
    finally:
        for proc in _cluster_processes(temp_dir):
            try:
                proc.send_signal(signal.SIGKILL)
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(_cluster_processes(temp_dir), timeout=30)
        shutil.rmtree(temp_dir, ignore_errors=True)


def _node_ids(address: str, token: Path) -> set[str]:
    """The alive nodes, from the cluster's state API (asked with the cluster's token)."""
    import requests

    reply = requests.get(f"{address}/api/v0/nodes", params={"filter_keys": "state", "filter_predicates": "=",
                                                           "filter_values": "ALIVE"},
                         headers={"Authorization": f"Bearer {token.read_text()}"}, timeout=10)
    reply.raise_for_status()
    return {n["node_id"] for n in reply.json()["data"]["result"]["result"]}


def _wait_for_nodes(address: str, count: int, token: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if len(_node_ids(address, token)) == count:
                return
        except Exception:  # the dashboard is still starting
            if time.monotonic() > deadline:
                raise
        if time.monotonic() > deadline:
            raise TimeoutError(f"{count} nodes not alive at {address} after {timeout} s")
        time.sleep(1)


def _sweep(record_dir: Path, **more) -> dict:
    return {"name": "submitted", "task": "node_tasks:NodeDigits", "method": "grid",
            "metric": {"name": "val_accuracy", "goal": "maximize"},
            "resources": {"workers": 2, "cpus_per_worker": 1},
            "wandb": {"mode": "offline"},
            "parameters": {"record_dir": {"value": str(record_dir)}, **more.pop("parameters", {})}, **more}


def _records(record_dir: Path) -> list[dict]:
    return [RECORD.fullmatch(p.name).groupdict() for p in record_dir.iterdir() if RECORD.fullmatch(p.name)]


@pytest.fixture
def cluster(two_nodes, monkeypatch):
    """The 2-node cluster's Jobs API address, with its token where docs/cluster.md puts it for a user."""
    address, token = two_nodes
    monkeypatch.setenv("RAY_AUTH_TOKEN", token.read_text())
    monkeypatch.delenv("RAY_AUTH_TOKEN_PATH", raising=False)
    return address


@pytest.mark.parametrize("token", [None, "not-the-clusters-token"])
def test_the_cluster_refuses_a_client_without_its_token_in_one_line(two_nodes, token, tmp_path):
    import requests

    address, _ = two_nodes
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    assert requests.get(f"{address}/api/jobs/", headers=headers, timeout=10).status_code == (403 if token else 401)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    env.update({"HOME": str(tmp_path), **({"RAY_AUTH_TOKEN": token} if token else {})})  # no ~/.ray/auth_token
    done = subprocess.run([sys.executable, "-m", "tune_service.cli", "status", "raysubmit_x", "--address", address],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 3, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert "refused the request" in done.stderr and "RAY_AUTH_TOKEN" in done.stderr, done.stderr


def test_a_submitted_sweep_runs_each_trials_ranks_on_two_nodes(cluster, two_nodes, tmp_path):
    records = tmp_path / "records"
    records.mkdir()
    spec = _sweep(records, scheduler={"type": "fifo", "max_t": 2}, parameters={"tag": {"values": ["a", "b"]}})
    job = tune_service.submit(spec, cluster, storage=tmp_path / "runs", name="two-nodes",
                              runtime_env={"working_dir": str(CODE)})
    assert job.wait(timeout=400) == "SUCCEEDED", job.logs()[-3000:]

    result = job.results()
    assert result.experiment_dir == str(tmp_path / "runs" / "two-nodes")
    assert [(t.status, t.epochs) for t in result.trials] == [("completed", 2), ("completed", 2)]
    assert result.best is not None and result.best.metrics["val_accuracy"] > 0.5

    nodes = _node_ids(*two_nodes)
    seen = _records(records)
    for tag in ("a", "b"):
        ranks = {r["rank"]: r["node"] for r in seen if r["trial"] == tag}
        assert set(ranks) == {"0", "1"}, seen
        assert ranks["0"] != ranks["1"] and set(ranks.values()) == nodes  # one rank on each node
    # The same handle rebuilt from the job id, as `tune-run status|results JOB_ID` does.
    again = attach(job.job_id, cluster)
    assert again == job and again.status() == "SUCCEEDED"
    assert "2 trials: 2 completed" in job.logs()
    # The spec travelled as a file in the job's working directory, beside the task's code: the entrypoint
    # that the Jobs API keeps and its dashboard shows holds no value of it.
    from ray.job_submission import JobSubmissionClient

    entrypoint = JobSubmissionClient(cluster, headers={"Authorization": f"Bearer {os.environ['RAY_AUTH_TOKEN']}"}
                                     ).get_job_info(job.job_id).entrypoint
    assert entrypoint.startswith(f"tune-run {SPEC_FILE} --address auto"), entrypoint
    assert str(records) not in entrypoint and "val_accuracy" not in entrypoint, entrypoint


def test_stop_ends_a_running_sweep_and_its_rank_processes_and_keeps_what_finished(cluster, tmp_path):
    records = tmp_path / "records"
    records.mkdir()
    spec = _sweep(records, scheduler={"type": "fifo", "max_t": 3},
                  parameters={"tag": {"values": ["first", "second", "third"]}, "epoch_sleep_s": {"value": 1.5}})
    experiment = tmp_path / "runs" / "stopped"
    job = tune_service.submit(spec, cluster, storage=tmp_path / "runs", name="stopped",
                              runtime_env={"working_dir": str(CODE)})
    try:
        _wait_until(lambda: {r["trial"] for r in _records(records)} >= {"first", "second"}, job, timeout=300)
        assert job.stop() == "STOPPED"
    finally:
        if job.status() not in ("SUCCEEDED", "FAILED", "STOPPED"):
            job.stop()

    pids = [int(r["pid"]) for r in _records(records)]
    _wait_until(lambda: not any(_running(pid) for pid in pids), None, timeout=60)

    result = job.results()
    statuses = {t.config["tag"]: (t.status, t.epochs) for t in result.trials}
    assert statuses["first"] == ("completed", 3)  # finished before the stop: kept as it was
    assert statuses["second"][0] == "interrupted" and statuses["second"][1] < 3
    assert "third" not in {r["trial"] for r in _records(records)}  # never started
    assert f"tune-run --resume {experiment}" in job.logs()


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _wait_until(condition, job: SweepJob | None, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if job is not None and job.status() in ("SUCCEEDED", "FAILED", "STOPPED"):
            raise AssertionError(f"the sweep ended first: {job.status()}\n{job.logs()[-3000:]}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"not reached after {timeout} s")
        time.sleep(0.5)
