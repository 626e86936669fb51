"""Input a reliability review found holes in: a file that is not UTF-8, and names that would put an
experiment outside its storage directory. (Alias bombs, deep nesting and task references that are no
task are among tests/data/bad_specs.)"""

from __future__ import annotations

import re

import pytest

import tune_service
from tune_service import cli
from tune_service.execution.driver import experiment_name
from tune_service.spec import load_spec


def test_a_spec_file_that_is_not_utf8_is_one_line_exit_2(tmp_path, capsys, forbid_ray_start):
    path = tmp_path / "latin1.yaml"
    path.write_bytes("name: café\nmethod: random\n".encode("latin-1"))
    assert cli.main([str(path), "--dry-run"]) == cli.EXIT_USAGE
    assert capsys.readouterr().err == "error: latin1.yaml: must be UTF-8 text, got byte 0xe9 at offset 9\n"


@pytest.mark.parametrize("name", ["../escaped", "/tmp/absolute", "a/b", ".hidden", "..", "a\\b"])
def test_a_name_that_leaves_the_storage_directory_is_refused_before_anything_starts(name, tmp_path, capsys,
                                                                                   forbid_ray_start):
    spec = tmp_path / "sweep.yaml"
    spec.write_text("method: random\nparameters: {lr: {value: 0.1}}\n")
    storage = tmp_path / "storage"
    assert cli.main([str(spec), "--storage", str(storage), "--name", name]) == cli.EXIT_USAGE
    assert capsys.readouterr().err.startswith("error: name: must be a plain name (no '/', '\\' or leading '.'")
    with pytest.raises(tune_service.TuneServiceError, match="name: must be a plain name"):
        tune_service.submit(str(spec), "http://127.0.0.1:9", storage=str(storage), name=name)
    assert list(tmp_path.iterdir()) == [spec]


def test_a_wandb_display_name_with_a_slash_becomes_a_plain_directory_name():
    spec = load_spec({"name": "../imbal_prop/leq0.1", "method": "random", "parameters": {"lr": {"value": 0.1}}})
    assert spec.name == "../imbal_prop/leq0.1"  # W&B's name is free text, kept for wandb
    assert re.fullmatch(r"_imbal_prop_leq0\.1-\d{8}-\d{6}-\d{3}", experiment_name(spec))  # to the millisecond


@pytest.mark.parametrize("storage", ["nosuch://bucket/prefix", "hdfs://namenode:8020/x"])
def test_a_storage_uri_that_cannot_be_opened_is_one_line_never_a_local_directory(storage, tmp_path, monkeypatch,
                                                                                capsys, forbid_ray_start):
    spec = tmp_path / "sweep.yaml"
    spec.write_text("method: random\nparameters: {lr: {value: 0.1}}\n")
    monkeypatch.chdir(tmp_path)
    assert cli.main([str(spec), "--storage", storage, "--name", "x"]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith(f"error: storage: cannot open {storage!r}: ") and err.count("\n") == 1, err
    assert list(tmp_path.iterdir()) == [spec]  # no directory named 'nosuch:' (or anything else)
