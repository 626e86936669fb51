"""The command line's habits: --version, every command's own --help, and one exit code per outcome
(0 done, 1 the sweep failed, 2 bad input, 3 Ray unreachable, 130 interrupted; the last two that need
a real sweep are in tests/integration: test_faults, test_wandb)."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from tune_service import cli

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = str(ROOT / "search_spaces" / "quickstart.yaml")


def test_version_prints_the_installed_version(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--version"])
    assert exit_info.value.code == cli.EXIT_OK
    assert capsys.readouterr().out == f"tune-run {version('tune-service')}\n"


def test_help_lists_every_command_and_exit_code(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--help"])
    assert exit_info.value.code == cli.EXIT_OK
    out = capsys.readouterr().out
    for name, (summary, _, _) in cli.COMMANDS.items():
        assert f"  {name:<9} {summary}" in out
    for code in cli.EXIT_CODES:
        assert f"\n  {code:<4} " in out


@pytest.mark.parametrize("command", sorted(cli.COMMANDS))
def test_every_command_has_its_own_help(command, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main([command, "--help"])
    assert exit_info.value.code == cli.EXIT_OK
    assert capsys.readouterr().out.startswith(f"usage: tune-run {command} ")


def test_dry_run_as_a_command_and_as_a_flag_print_the_same_plan(capsys, forbid_ray_start):
    assert cli.main(["dry-run", QUICKSTART, "--set", "run_cap=3"]) == cli.EXIT_OK
    as_command = capsys.readouterr().out
    assert cli.main([QUICKSTART, "--dry-run", "--set", "run_cap=3"]) == cli.EXIT_OK
    assert capsys.readouterr().out == as_command and "trials       3" in as_command


def test_a_usage_error_exits_2(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main([QUICKSTART, "--no-such-flag"])
    assert exit_info.value.code == cli.EXIT_USAGE
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["-q", "-v", QUICKSTART])
    assert exit_info.value.code == cli.EXIT_USAGE
    assert "not allowed with argument" in capsys.readouterr().err


def test_an_unreachable_ray_address_exits_3_in_one_line_and_writes_nothing(tmp_path):
    # In its own process: this test session's Ray may be running, and a connected process ignores --address.
    done = subprocess.run([sys.executable, "-m", "tune_service.cli", QUICKSTART, "--address", "127.0.0.1:9",
                           "--storage", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == cli.EXIT_UNREACHABLE, done.stderr[-2000:]
    assert done.stderr.startswith("error: address: nothing answers at '127.0.0.1:9' (")
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("missing", ["hpbandster", "ConfigSpace", "statsmodels"])
def test_bohb_needs_no_extra(missing, monkeypatch, capsys, forbid_ray_start):
    monkeypatch.setitem(sys.modules, missing, None)  # as if not installed: importing it raises ImportError
    assert cli.main([str(ROOT / "search_spaces" / "bohb.yaml"), "--dry-run"]) == cli.EXIT_OK
    assert "method       bohb" in capsys.readouterr().out


def test_optuna_without_its_extra_is_refused_in_one_line(monkeypatch, capsys, forbid_ray_start):
    monkeypatch.setitem(sys.modules, "optuna", None)
    assert cli.main([QUICKSTART, "--set", "method=optuna", "--dry-run"]) == cli.EXIT_USAGE
    assert capsys.readouterr().err == ("error: method: optuna needs the package optuna (not installed): "
                                       "pip install 'tune-service[optuna]'\n")


def test_quiet_prints_only_the_result_and_verbose_levels_map_to_the_driver(tmp_path, capsys):
    from tune_service.execution.driver import VERBOSE_LIVE, VERBOSE_RAY
    from tune_service.results.sweep_result import SweepResult, TrialRecord

    trials = (TrialRecord("aaa", "completed", {"lr": 0.1}, {"val_loss": 0.5}, 3),
              TrialRecord("bbb", "stopped", {"lr": 0.2}, {"val_loss": 0.9}, 1))
    outcome = SweepResult(str(tmp_path), "val_loss", "min", trials, trials[0])
    assert cli._finish(outcome, quiet=True) == cli.EXIT_OK
    assert capsys.readouterr().out.splitlines() == [
        "best val_loss: 0.5 (trial aaa)", f"results: {tmp_path}/summary.json, best config: {tmp_path}/best_config.yaml"]
    assert cli._finish(outcome, quiet=False) == cli.EXIT_OK
    assert "rank  trial  status" in capsys.readouterr().out  # the leaderboard, by default
    parse = cli._main_parser().parse_args
    assert [cli._verbosity(parse([QUICKSTART, *flags])) for flags in ([], ["-q"], ["-v"])] == [VERBOSE_LIVE, 0, VERBOSE_RAY]


def test_an_online_sweep_prints_each_runs_page(tmp_path, capsys):
    from tune_service.results.sweep_result import SweepResult, TrialRecord

    trial = TrialRecord("aaa", "completed", {"lr": 0.1}, {"val_loss": 0.5}, 3)
    urls = {"t0-aaa lr=0.1": "https://wandb.ai/me/quick/runs/quick-aaa", "x summary": "https://wandb.ai/me/quick/runs/s"}
    wandb = {"mode": "online", "project": "quick", "entity": "me", "group": "g", "dir": "d", "urls": urls}
    cli._print_outcome(SweepResult(str(tmp_path), "val_loss", "min", (trial,), trial, {"wandb": wandb}))
    out = capsys.readouterr().out.splitlines()
    assert out[-3:] == ["wandb: project me/quick, group g", "wandb: t0-aaa lr=0.1: https://wandb.ai/me/quick/runs/quick-aaa",
                        "wandb: x summary: https://wandb.ai/me/quick/runs/s"]


@pytest.mark.parametrize("flags, error", [
    (["--set", "scheduler.max_t=5"], "--set scheduler.max_t: a resume can change only run_cap (the rest of the spec "
                                     "is what the sweep's trials ran under), got scheduler.max_t=5"),
    (["--set", "run_cap=3"], "run_cap: a resume can raise run_cap above the sweep's 3, not keep or lower it, got 3"),
    (["--set", "run_cap=lots"], "run_cap: a resume can raise run_cap above the sweep's 3, not keep or lower it, "
                                "got 'lots'"),
], ids=["another key", "not larger", "not a number"])
def test_a_resume_can_only_raise_run_cap(flags, error, tmp_path, capsys, forbid_ray_start):
    from tune_service.experiment import layout

    experiment = tmp_path / "sweep"
    layout.write_sweep_file(experiment, {"method": "random", "run_cap": 3}, None)
    before = sorted(p.name for p in experiment.iterdir())
    for argv in (["resume", str(experiment), *flags], ["--resume", str(experiment), *flags]):
        assert cli.main(argv) == cli.EXIT_USAGE
        assert capsys.readouterr().err.splitlines() == [f"error: {error}"]
    assert sorted(p.name for p in experiment.iterdir()) == before


def test_a_resume_cannot_add_trials_to_a_whole_grid(tmp_path, capsys, forbid_ray_start):
    from tune_service.experiment import layout

    experiment = tmp_path / "grid"
    layout.write_sweep_file(experiment, {"method": "grid", "parameters": {"lr": {"values": [0.1, 0.01]}}}, None)
    assert cli.main(["resume", str(experiment), "--set", "run_cap=4"]) == cli.EXIT_USAGE
    assert capsys.readouterr().err == "error: run_cap: this sweep runs its whole grid: it has no more trials to add, got 4\n"


@pytest.mark.parametrize("scheduler, how", [
    ("asha", "a rung ranks its trials by Pareto order over val_accuracy, n_params"),
    ("hyperband", "a bracket halving ranks its trials by Pareto order over val_accuracy, n_params"),
])
def test_the_dry_run_of_several_objectives_says_how_the_scheduler_compares_trials(capsys, forbid_ray_start,
                                                                                  scheduler, how):
    spec = str(Path(QUICKSTART).parent / "multi_objective.yaml")
    assert cli.main(["dry-run", spec, "--set", f"scheduler.type={scheduler}"]) == cli.EXIT_OK
    out = capsys.readouterr().out
    assert how in out and "non-dominated fronts, then crowding distance, then trial id" in out
