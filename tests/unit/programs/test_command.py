"""A W&B program's command line: every macro of W&B's agent expanded as W&B expands it."""

from __future__ import annotations

import json

import pytest

from tune_service.programs.command import CommandError, expand, flat_parameters, shown

PARAMS = {"lr": 0.01, "layers": 2, "amp": True, "cache": False, "optimizer": {"name": "adam", "beta": 0.9},
          "sizes": [1, 2]}


def test_without_a_command_it_is_wandbs_default():
    assert expand(None, "train.py", {"lr": 0.01, "layers": 2}) == [
        "/usr/bin/env", "python", "train.py", "--lr=0.01", "--layers=2"]


def test_args_pass_every_parameter_nested_ones_by_dotted_names():
    assert expand(["${args}"], "p.py", PARAMS) == [
        "--lr=0.01", "--layers=2", "--amp=True", "--cache=False", "--optimizer.name=adam", "--optimizer.beta=0.9",
        "--sizes=[1, 2]"]


def test_args_no_boolean_flags_make_true_a_flag_and_leave_false_out():
    assert expand(["${args_no_boolean_flags}"], "p.py", PARAMS) == [
        "--lr=0.01", "--layers=2", "--amp", "--optimizer.name=adam", "--optimizer.beta=0.9", "--sizes=[1, 2]"]


def test_args_no_hyphens_are_hydra_style():
    assert expand(["python", "${program}", "${args_no_hyphens}"], "train.py", {"lr": 0.01, "model": {"depth": 3}}) == [
        "python", "train.py", "lr=0.01", "model.depth=3"]


def test_args_json_is_one_argument_and_args_json_file_a_path_to_the_same(tmp_path):
    argv = expand(["${interpreter}", "${program}", "--config", "${args_json}"], "t.py", {"lr": 0.1, "m": {"d": 2}})
    assert argv[:3] == ["python", "t.py", "--config"] and json.loads(argv[3]) == {"lr": 0.1, "m.d": 2}
    path = tmp_path / "args.json"
    assert expand(["${program}", "--from=${args_json_file}"], "t.py", {}, args_json_file=path) == [
        "t.py", f"--from={path}"]
    with pytest.raises(CommandError, match="args_json_file"):
        expand(["${args_json_file}"], "t.py", {})


def test_envvar_reads_the_environment_and_an_unset_one_is_named():
    assert expand(["${env}", "${envvar:DATA}/x", "--seed=${envvar:SEED}"], "t.py", {},
                  environ={"DATA": "/data", "SEED": "7"}) == ["/usr/bin/env", "/data/x", "--seed=7"]
    with pytest.raises(CommandError, match=r"\$\{envvar:MISSING\} names an environment variable that is not set"):
        expand(["${envvar:MISSING}"], "t.py", {}, environ={})


def test_a_string_command_is_split_as_a_shell_would_and_plain_tokens_stay():
    assert expand("${interpreter} -u ${program} --name 'a b' ${args}", "t.py", {"x": 1}) == [
        "python", "-u", "t.py", "--name", "a b", "--x=1"]


def test_an_unknown_macro_is_refused_naming_it():
    with pytest.raises(CommandError, match=r"unknown macro \$\{argz\}"):
        expand(["${argz}"], "t.py", {})


def test_flat_parameters_and_the_shown_line():
    assert flat_parameters({"a": {"b": {"c": 1}}, "d": 2}) == {"a.b.c": 1, "d": 2}
    assert shown(["python", "t.py", "--name=a b"]) == "python t.py '--name=a b'"
