"""The cluster commands' refusals, without a cluster: a bad spec is refused before anything is
submitted, an unreachable Jobs API is one line; a spec can travel inline, and a job's working
directory carries the spec as a file beside the user's own files."""

from __future__ import annotations

import json

import pytest

from tune_service import cli
from tune_service.errors import SpecError
from tune_service.errors import TuneServiceError
from tune_service.jobs import SPEC_FILE, _working_dir_with_spec, jobs_address
from tune_service.spec import load_spec

UNREACHABLE = "http://127.0.0.1:9"  # the discard port: nothing listens there


def test_a_bad_spec_is_refused_before_the_cluster_is_contacted(tmp_path, capsys):
    spec = tmp_path / "bad.yaml"
    spec.write_text("method: random\nparameters: {lr: {min: 1, max: 0}}\n")
    assert cli.main(["submit", str(spec), "--storage", str(tmp_path), "--address", UNREACHABLE]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert "parameters.lr" in err and "Jobs API" not in err


@pytest.mark.parametrize("command", [["status", "raysubmit_x"], ["logs", "raysubmit_x"], ["stop", "raysubmit_x"],
                                     ["results", "raysubmit_x"]])
def test_an_unreachable_jobs_api_is_one_line_and_exit_code_3(command, capsys):
    assert cli.main([*command, "--address", UNREACHABLE]) == cli.EXIT_UNREACHABLE
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: address: cannot reach the Ray Jobs API at '{UNREACHABLE}': "
                   f"Failed to connect to Ray at address: {UNREACHABLE}."]


def test_a_spec_given_inline_loads_as_its_file_would(tmp_path):
    doc = {"method": "random", "run_cap": 3, "parameters": {"lr": {"min": 0.001, "max": 0.1}}}
    path = tmp_path / "sweep.yaml"
    path.write_text(json.dumps(doc))
    assert load_spec(json.dumps(doc)) == load_spec(path)
    with pytest.raises(SpecError, match="inline spec: invalid YAML at line 1"):
        load_spec('{"method": "random", ')


def test_the_jobs_address_follows_rays_environment_variables(monkeypatch):
    monkeypatch.delenv("RAY_API_SERVER_ADDRESS", raising=False)
    monkeypatch.setenv("RAY_ADDRESS", "auto")  # a GCS address, not the Jobs API: ignored
    assert jobs_address(None) == "http://127.0.0.1:8265"
    monkeypatch.setenv("RAY_ADDRESS", "http://head:8265")
    assert jobs_address(None) == "http://head:8265"
    assert jobs_address("http://other:8265") == "http://other:8265"


@pytest.mark.parametrize("env_vars, named", [({"WANDB_API_KEY": "0123456789abcdef0123"}, "WANDB_API_KEY"),
                                             ({"MY_SETTING": "s3cr3t-value-from-the-shell"}, "MY_SETTING")])
def test_a_secret_in_the_runtime_env_is_refused_before_the_cluster_is_contacted(env_vars, named, tmp_path,
                                                                                 monkeypatch):
    from tune_service import submit
    from tune_service.errors import TuneServiceError

    monkeypatch.setenv("HF_TOKEN", "s3cr3t-value-from-the-shell")  # a secret of this machine's
    spec = tmp_path / "sweep.yaml"
    spec.write_text("method: random\nparameters: {lr: {value: 0.1}}\n")
    with pytest.raises(TuneServiceError) as refused:
        submit(str(spec), UNREACHABLE, storage=str(tmp_path), runtime_env={"env_vars": env_vars})
    message = str(refused.value)
    assert message.startswith(f"runtime_env.env_vars.{named}: holds a secret in clear") and "Jobs API" in message
    assert all(value not in message for value in env_vars.values())


def test_a_secret_in_the_spec_is_refused_before_the_cluster_is_contacted(tmp_path, monkeypatch):
    from tune_service import submit

    monkeypatch.setenv("HF_TOKEN", "s3cr3t-value-from-the-shell")
    spec = tmp_path / "sweep.yaml"
    spec.write_text("method: random\nparameters: {token: {value: s3cr3t-value-from-the-shell}}\n")
    with pytest.raises(SpecError, match="parameters.token.value: holds the value of the environment variable HF_TOKEN"):
        submit(str(spec), UNREACHABLE, storage=str(tmp_path))


def test_the_jobs_working_directory_holds_the_spec_file_beside_the_users_files(tmp_path):
    source = tmp_path / "digits-search.yaml"
    source.write_text("method: random\nrun_cap: 3\nparameters: {lr: {min: 0.001, max: 0.1}}\n")
    spec = load_spec(source)
    user = tmp_path / "project"
    (user / "pkg").mkdir(parents=True)
    (user / "pkg" / "task.py").write_text("X = 1\n")
    (user / ".gitignore").write_text("data/\n")
    staging = tmp_path / "staging"
    staging.mkdir()
    assert _working_dir_with_spec(staging, str(user), spec) == str(staging)
    assert sorted(p.name for p in staging.iterdir()) == sorted([".gitignore", "pkg", SPEC_FILE])
    assert (staging / "pkg" / "task.py").read_text() == "X = 1\n"  # a link: nothing copied
    assert load_spec(staging / SPEC_FILE) == spec  # its name too (by default a spec's file's)
    assert list(user.iterdir()) != [] and not (user / SPEC_FILE).exists()  # the user's directory untouched

    alone = tmp_path / "alone"
    alone.mkdir()
    _working_dir_with_spec(alone, None, spec)
    assert [p.name for p in alone.iterdir()] == [SPEC_FILE]


@pytest.mark.parametrize("working_dir, says", [("s3://bucket/code.zip", "must be a local directory"),
                                               ("missing", "must be a local directory"),
                                               ("taken", f"holds {SPEC_FILE}")])
def test_a_working_dir_that_cannot_carry_the_spec_is_refused_naming_it(tmp_path, working_dir, says):
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / SPEC_FILE).write_text("{}")
    (tmp_path / "staging").mkdir()
    spec = load_spec({"method": "random", "run_cap": 1, "parameters": {"lr": {"value": 0.1}}})
    path = working_dir if "://" in working_dir else str(tmp_path / working_dir)
    with pytest.raises(TuneServiceError, match=f"runtime_env.working_dir: {says}"):
        _working_dir_with_spec(tmp_path / "staging", path, spec)
