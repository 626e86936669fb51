"""A sweep on remote storage: ``--storage s3://...`` against a real S3-compatible server (moto's, started
by the tests on the loopback address), its driver killed with SIGKILL mid-sweep and resumed from the
bucket alone, to the decisions it would have made. Credentials come from the environment only."""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

import tune_service
from tune_service import cli
from tune_service.experiment.checkpoints import checkpointed_report
from driver_process import ROOT, command_line, signal_driver_when, still_running
from test_driver_crash import EPOCHS_WITHOUT_A_CRASH, KILLED_DURING, QUALITIES, RAY_AGENTS

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

BUCKET = "sweeps"


@pytest.fixture(scope="module")
def s3_environment():
    """moto's S3 server on a free loopback port, a bucket in it, and the environment variables a user
    would set for it (the secret a random one, to be looked for afterwards)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=2)
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise
                time.sleep(0.2)
        env = {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "tune-service-tests",
               "AWS_SECRET_ACCESS_KEY": f"secret-{secrets.token_hex(16)}", "AWS_REGION": "us-east-1"}
        from pyarrow import fs as pafs

        pafs.S3FileSystem(endpoint_override=endpoint, scheme="http", access_key=env["AWS_ACCESS_KEY_ID"],
                          secret_key=env["AWS_SECRET_ACCESS_KEY"], region="us-east-1",
                          allow_bucket_creation=True).create_dir(BUCKET)
        yield env
    finally:
        server.terminate()
        server.wait(timeout=30)


def _s3(env):
    from pyarrow import fs as pafs

    return pafs.S3FileSystem(endpoint_override=env["AWS_ENDPOINT_URL"], scheme="http", region="us-east-1",
                             access_key=env["AWS_ACCESS_KEY_ID"], secret_key=env["AWS_SECRET_ACCESS_KEY"])


def _keys(env, prefix: str) -> list[str]:
    from pyarrow import fs as pafs

    infos = _s3(env).get_file_info(pafs.FileSelector(prefix, recursive=True, allow_not_found=True))
    return [i.path for i in infos if i.type == pafs.FileType.File]


def _checkpoint_epochs(env, experiment: str) -> dict[float, int]:
    """quality -> the epoch of the trial's latest checkpoint in the bucket, for the trials that have one."""
    from pyarrow import fs as pafs

    found, s3 = {}, _s3(env)
    for info in s3.get_file_info(pafs.FileSelector(experiment, allow_not_found=True)):
        if info.type == pafs.FileType.Directory and info.base_name.startswith("trial_"):
            report = checkpointed_report(info.path, s3)
            if report is not None:
                found[round(report["val_score"], 4)] = report["epoch"]
    return found


def _saved_trials(env, experiment: str) -> int:
    """How many trials the sweep's records in the bucket hold: Tune's newest state (the trials not ended)
    and ``ended_trials.jsonl`` (an ended trial leaves Tune's controller: tune_service.execution.retiring)."""
    keys = _keys(env, experiment)
    states = sorted(k for k in keys if k.rsplit("/", 1)[-1].startswith("experiment_state-"))
    if not states:
        return 0
    with _s3(env).open_input_stream(states[-1]) as stream:
        try:
            trials = json.loads(stream.readall())["trial_data"]
        except ValueError:
            return 0
    held = {(json.loads(t) if isinstance(t, str) else t)["trial_id"] for t, _ in trials}
    ended = set()
    if f"{experiment}/ended_trials.jsonl" in keys:
        with _s3(env).open_input_stream(f"{experiment}/ended_trials.jsonl") as stream:
            ended = {json.loads(line)["trial_id"] for line in stream.readall().decode().splitlines() if line.strip()}
    return len(held | ended)


def _trials_with_results(env, experiment: str) -> int:
    """How many trials have a result file with something in it in the bucket."""
    from pyarrow import fs as pafs

    infos = _s3(env).get_file_info(pafs.FileSelector(experiment, recursive=True, allow_not_found=True))
    return sum(1 for i in infos if i.type == pafs.FileType.File and i.base_name == "result.json" and i.size)


def test_a_sweep_on_s3_killed_with_sigkill_resumes_from_the_bucket_to_completion(ray_cluster, s3_environment,
                                                                                 tmp_path, monkeypatch, capsys,
                                                                                 expect_exit):
    env = s3_environment
    records = tmp_path / "batches"
    records.mkdir()
    spec = tmp_path / "scored.yaml"
    spec.write_text(yaml.safe_dump({
        "name": "on-s3", "method": "grid", "task": "recording_tasks:ScoredDigits",
        "metric": {"name": "val_score", "goal": "maximize"}, "wandb": {"mode": "offline"},
        "scheduler": {"type": "asha", "max_t": 4, "grace_period": 1, "reduction_factor": 2},
        "parameters": {"quality": {"values": QUALITIES}, "record_dir": {"value": str(records)}},
    }))
    storage, experiment = f"s3://{BUCKET}/runs", f"{BUCKET}/runs/crashed"
    killed = signal_driver_when(spec, storage, "crashed", signum=signal.SIGKILL, timeout=400, env=env,
                                ready=lambda: 1 <= _checkpoint_epochs(env, experiment).get(KILLED_DURING, 0) < 4
                                and _saved_trials(env, experiment) == 4
                                # Tune uploads its state and the trials' results with threads, in no order:
                                # killed between the two, a resume would replay rungs that miss the results
                                # of trials that had ended (and decide otherwise), so the kill waits for them.
                                and _trials_with_results(env, experiment) == 4)
    assert killed.returncode == -signal.SIGKILL, killed.output[-3000:]
    agents = [p for p in killed.descendants if command_line(p).startswith(RAY_AGENTS)]
    assert killed.descendants and not still_running([p for p in killed.descendants if p not in agents], timeout=60)
    keys = _keys(env, experiment)
    assert f"{experiment}/sweep.json" in keys and f"{experiment}/summary.json" in keys  # as the sweep began
    assert not (tmp_path / "s3:").exists() and not os.path.exists("s3:")
    trained_before = {f.name: f.stat().st_size for f in records.iterdir()}

    # Resumed from the bucket alone, as from another machine: its own process and embedded Ray.
    resumed = subprocess.run([sys.executable, "-m", "tune_service.cli", "--resume", f"s3://{experiment}"],
                             env={**os.environ, **env, "PYTHONPATH": str(ROOT / "tests")}, capture_output=True,
                             text=True, timeout=400)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert f"s3://{experiment}" in resumed.stdout

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    result = tune_service.load_results(f"s3://{experiment}")
    assert result.result.experiment_dir == f"s3://{experiment}"
    epochs = {t.config["quality"]: t.epochs for t in result.records}
    assert epochs == EPOCHS_WITHOUT_A_CRASH  # ASHA decided as it would have without the crash
    assert result.best.config["quality"] == KILLED_DURING
    trained_after = {f.name: f.stat().st_size for f in records.iterdir()}
    for name, size in trained_after.items():
        if float(name.split("-")[0].split("=")[1]) in (0.9, 0.8, 0.7):  # finished before the kill: never rerun
            assert trained_before.get(name) == size, name

    # The credentials reached no file of the experiment; the wandb runs are in the bucket.
    keys = _keys(env, experiment)
    assert any("/wandb/offline-run-" in k for k in keys)
    s3 = _s3(env)
    for key in keys:
        with s3.open_input_stream(key) as stream:
            assert env["AWS_SECRET_ACCESS_KEY"].encode() not in stream.readall(), key
    # The results and the report from the bucket, as from any machine with its credentials.
    assert cli.main(["results", f"s3://{experiment}"]) == cli.EXIT_OK
    printed = capsys.readouterr().out
    assert f"results: s3://{experiment}/summary.json" in printed, printed
    assert f"wandb: runs saved offline in s3://{experiment}/wandb" in printed, printed
    report = tmp_path / "report.html"
    assert cli.main(["report", f"s3://{experiment}", "--output", str(report)]) == cli.EXIT_OK
    assert report.stat().st_size > 100_000 and "val_score" in report.read_text()
    expect_exit(agents, timeout=60)  # checked at the session's end: they take 60 s after the kill


def test_a_warm_start_reads_the_earlier_sweep_from_the_bucket(s3_environment, tmp_path, monkeypatch):
    """``warm_start: s3://...``: the earlier experiment is read from the bucket (its local copy removed
    afterwards); a URI where no experiment is is refused in one line."""
    from pyarrow import fs as pafs

    from earlier_sweeps import earlier_sweep, new_spec, random_configs
    from tune_service.errors import SpecError
    from tune_service.search.warm_start import read_warm_start

    for name, value in s3_environment.items():
        monkeypatch.setenv(name, value)
    local = earlier_sweep(tmp_path / "earlier", random_configs(6))
    pafs.copy_files(str(local), f"{BUCKET}/warm/earlier", destination_filesystem=_s3(s3_environment))
    mirrors = set(Path(tempfile.gettempdir()).glob("tune-service-mirror-*"))
    warm = read_warm_start(new_spec("bayes", f"s3://{BUCKET}/warm/earlier"))
    assert [t.trial_id for t in warm.trials] == [f"{i:08x}" for i in range(6)]
    assert warm.source == f"s3://{BUCKET}/warm/earlier"
    with pytest.raises(SpecError, match=f"^warm_start: nothing at 's3://{BUCKET}/warm/nothing'$"):
        read_warm_start(new_spec("bayes", f"s3://{BUCKET}/warm/nothing"))
    assert set(Path(tempfile.gettempdir()).glob("tune-service-mirror-*")) == mirrors  # the downloads were removed


def test_a_retired_trials_directory_moves_whole_into_the_bucket(s3_environment, tmp_path):
    """A trial that left Tune's controller: its staging directory goes into the bucket, then leaves staging
    (tune_service.experiment.staging; the sweep's own staging directory: test_retired_trials.py)."""
    from types import SimpleNamespace

    from tune_service.experiment.staging import StagedTrialDirs

    class TuneCopies:  # Tune's syncer, which has no copy in flight here
        def wait(self) -> None:
            pass

    staged = tmp_path / "trial_a"
    (staged / "checkpoint_000001").mkdir(parents=True)
    (staged / "params.json").write_text('{"quality": 0.9}')
    (staged / "checkpoint_000001" / "model.pt").write_bytes(b"weights")
    trial = SimpleNamespace(local_path=str(staged), path=f"{BUCKET}/moved/trial_a",
                            storage=SimpleNamespace(storage_filesystem=_s3(s3_environment), syncer=TuneCopies()))
    moves = StagedTrialDirs(batch=1)
    moves.retired([trial])
    assert moves.moved == 1 and not staged.exists()
    assert sorted(_keys(s3_environment, f"{BUCKET}/moved")) == [
        f"{BUCKET}/moved/trial_a/checkpoint_000001/model.pt", f"{BUCKET}/moved/trial_a/params.json"]
    with _s3(s3_environment).open_input_stream(f"{BUCKET}/moved/trial_a/params.json") as stream:
        assert stream.readall() == b'{"quality": 0.9}'
