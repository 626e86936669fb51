"""Safety on the shared local Ray: the embedded Ray listens on loopback only and refuses requests
without its token, and a secret of the environment reaches no file of an experiment."""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from pathlib import Path

import pytest

import tune_service
from tune_service.tracking.naming import run_id
from addresses import unmapped
from wandb_files import offline_runs

pytestmark = [pytest.mark.integration, pytest.mark.timeout(400)]
SECRET = "s3cr3t-v4lue-123456"


def _ray_processes():
    """This process's children (Ray's GCS, raylet, dashboard, agents and workers), with what they
    listen on: every TCP socket in LISTEN and every bound UDP socket."""
    import psutil  # Ray's own copy (ray[default] brings it)

    listening = {}
    for child in psutil.Process().children(recursive=True):
        try:
            sockets = [c for c in child.net_connections(kind="inet")
                       if c.status == psutil.CONN_LISTEN or (c.type == 2 and not c.raddr)]  # 2: SOCK_DGRAM
            listening[child.pid] = (child.name(), child.cmdline(), [(c.laddr.ip, c.laddr.port) for c in sockets])
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return listening


def test_the_embedded_ray_listens_on_loopback_only(ray_cluster):
    node = ray_cluster._private.worker._global_node
    assert unmapped(node.node_ip_address).is_loopback
    processes = _ray_processes()
    ports = {port for _, _, sockets in processes.values() for _, port in sockets}
    gcs_port = int(node.gcs_address.rsplit(":", 1)[1])
    dashboard_port = int(node.address_info["webui_url"].rsplit(":", 1)[1])
    assert {gcs_port, dashboard_port, node.node_manager_port} <= ports  # GCS, dashboard, raylet are among them
    public = {(name, ip, port) for name, _, sockets in processes.values() for ip, port in sockets
              if not unmapped(ip).is_loopback}
    assert public == set()  # no 0.0.0.0, no ::, no address of the machine


def test_the_embedded_ray_refuses_requests_without_its_token(ray_cluster):
    import grpc
    from ray._raylet import AuthenticationTokenLoader
    from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc

    token = os.environ["RAY_AUTH_TOKEN"]  # generated for this process; never in a file
    assert AuthenticationTokenLoader.instance().get_raw_token(ignore_auth_mode=True) == token
    assert os.environ["RAY_AUTH_MODE"] == "token" and len(token) >= 32
    assert not any(token in " ".join(cmdline) for _, cmdline, _ in _ray_processes().values())

    node = ray_cluster._private.worker._global_node
    jobs_api = f"http://{node.address_info['webui_url']}/api/jobs/"  # the dashboard's job submission API

    def status(headers):
        try:
            with urllib.request.urlopen(urllib.request.Request(jobs_api, headers=headers), timeout=30) as reply:
                return reply.status
        except urllib.error.HTTPError as error:
            return error.code

    assert status({}) == 401
    assert status({"Authorization": "Bearer " + "0" * 64}) == 403
    assert status({"Authorization": f"Bearer {token}"}) == 200

    with grpc.insecure_channel(node.gcs_address) as channel:
        nodes = gcs_service_pb2_grpc.NodeInfoGcsServiceStub(channel).GetAllNodeInfo
        with pytest.raises(grpc.RpcError) as refused:
            nodes(gcs_service_pb2.GetAllNodeInfoRequest(), timeout=30)
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
        reply = nodes(gcs_service_pb2.GetAllNodeInfoRequest(), metadata=(("authorization", f"Bearer {token}"),),
                      timeout=30)
        assert len(reply.node_info_list) == 1


def test_a_secret_of_the_environment_reaches_no_file_of_the_experiment(ray_cluster, tmp_path, monkeypatch, capfd):
    monkeypatch.setenv("TS_TEST_API_TOKEN", SECRET)  # the driver's environment, set after Ray started
    secret_file = tmp_path / "secret"  # where the ranks read it (their environment is Ray's, from before)
    secret_file.write_text(SECRET)
    spec = {"name": "secrets", "task": "recording_tasks:SecretLeakingDigits", "method": "grid",
            "metric": {"name": "val_loss", "goal": "minimize"}, "scheduler": {"type": "fifo", "max_t": 1},
            "parameters": {"fail": {"values": [True, False]}, "secret_file": {"value": str(secret_file)},
                           "api_token": {"value": "named-like-a-token"}},
            "resources": {"workers": 1}}
    result = tune_service.run(spec, storage=tmp_path / "runs", name="secrets", verbose=0)
    trials = {t.config["fail"]: t for t in result.trials}
    assert (trials[False].status, trials[False].epochs) == ("completed", 1)
    failed = trials[True]
    assert (failed.status, failed.epochs) == ("failed", 0)
    assert failed.error.endswith("PermissionError: login refused: the server rejected token *** for this dataset")

    experiment = Path(result.experiment_dir)
    runs = {run.run_id: run for run in offline_runs(experiment)}
    failed_run = runs[run_id("secrets", failed.trial_id)]
    assert failed_run.summary["error"] == failed.error  # the error reached wandb, redacted
    assert failed_run.config["api_token"] == "***"  # a value named like a secret, in wandb's config
    assert (experiment / "best_config.yaml").read_text().count("api_token: '***'") == 1

    files = [p for p in experiment.rglob("*") if p.is_file()]
    ray_error = experiment / f"trial_{failed.trial_id}" / "error.txt"
    assert ray_error in files and "login refused: the server rejected token ***" in ray_error.read_text()
    assert len(files) > 20  # summary, sweep, best config, Ray's trial files, wandb's run files
    assert [p for p in files if SECRET.encode() in p.read_bytes()] == []
    output = capfd.readouterr()
    assert SECRET not in output.out and SECRET not in output.err  # nor in what the driver printed
    # Nor in what the rank printed, in Ray's log of the rank's process.
    (pid,) = [p.name.removeprefix("rank-pid-") for p in tmp_path.glob("rank-pid-*")]
    logs = list(Path("/tmp/ray").glob(f"session_*/logs/worker-*-{pid}.out"))  # Ray's default temp dir
    assert logs and any("connecting with token ***" in p.read_text() for p in logs)
    assert not any(SECRET in p.read_text() for p in logs)
