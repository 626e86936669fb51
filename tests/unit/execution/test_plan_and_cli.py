"""The plan, the pure Tuner build, and the CLI's dry-run and error handling (no Ray started)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tune_service import cli
from tune_service.errors import TaskError
from tune_service.execution.driver import build_tuner
from tune_service.execution.plan import make_plan
from tune_service.execution.resources import ClusterResources
from tune_service.search import registry
from tune_service.spec import load_spec

ROOT = Path(__file__).resolve().parents[3]
SPACES = sorted((ROOT / "search_spaces").glob("*.yaml"))
TWO_CPUS = ClusterResources(2, 0, 2, 0)


def test_there_are_example_spaces():
    names = {p.stem for p in SPACES}
    assert {"quickstart", "bohb", "random_fifo"} <= names


@pytest.mark.parametrize("path", SPACES, ids=lambda p: p.name)
def test_dry_run_works_on_every_example_without_starting_ray(path, capsys, forbid_ray_start):
    assert cli.main([str(path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "trials" in out and "concurrency" in out and "parameters" in out


def test_plan_describes_rungs_resources_and_concurrency():
    plan = make_plan(load_spec(ROOT / "search_spaces" / "quickstart.yaml"), TWO_CPUS)
    assert plan.num_trials == 10 and plan.max_concurrent == 1 and plan.rungs == (1, 3)
    text = plan.describe()
    assert "epoch 1: 10 -> epoch 3: ~3.3 -> epoch 8: ~1.1 trial(s)" in text
    assert "~22 trial-epochs expected (at most 80 without early stopping)" in text
    assert "2 DDP ranks/trial x (1 CPU, 0 GPU) = 2 CPU, 0 GPU per trial" in text


def test_grid_trial_count_is_capped_by_run_cap():
    spec = load_spec({"method": "grid", "run_cap": 3, "parameters": {"a": {"values": [1, 2, 3, 4]}, "b": {"values": [0, 1]}}})
    assert make_plan(spec, TWO_CPUS).num_trials == 3
    uncapped = load_spec({"method": "grid", "parameters": {"a": {"values": [1, 2, 3, 4]}, "b": {"values": [0, 1]}}})
    assert make_plan(uncapped, TWO_CPUS).num_trials == 8


def test_build_tuner_is_pure_and_wires_searcher_and_scheduler(tmp_path, forbid_ray_start):
    from ray.tune.schedulers import HyperBandForBOHB
    from ray.tune.search import Searcher
    from ray.tune.search.hyperopt import HyperOptSearch

    from tune_service.search.asha import PromotingASHA
    from tune_service.search.bohb import BOHBSearch
    from tune_service.search.wrappers import innermost

    quick = make_plan(load_spec(ROOT / "search_spaces" / "quickstart.yaml"), TWO_CPUS)
    config = build_tuner(quick, tmp_path, "x").tune_config
    assert isinstance(innermost(config.search_alg), HyperOptSearch) and isinstance(config.scheduler, PromotingASHA)
    assert (config.metric, config.mode, config.num_samples, config.max_concurrent_trials) == ("val_accuracy", "max", 10, 1)

    bohb = make_plan(load_spec(ROOT / "search_spaces" / "bohb.yaml"), TWO_CPUS)
    config = build_tuner(bohb, tmp_path, "y").tune_config
    assert isinstance(innermost(config.search_alg), BOHBSearch)
    assert isinstance(config.scheduler, HyperBandForBOHB)

    # Random search is a Searcher too, so Tune's max_concurrent_trials caps it (Tune ignores that cap for
    # its BasicVariantGenerator: every trial would start at once and wait for CPUs the others hold).
    four_cpus = ClusterResources(4, 0, 4, 0)
    random_plan = make_plan(load_spec(ROOT / "search_spaces" / "random_fifo.yaml"), four_cpus)
    config = build_tuner(random_plan, tmp_path, "z").tune_config
    assert isinstance(config.search_alg, Searcher) and config.max_concurrent_trials == random_plan.max_concurrent == 2

    assert list(tmp_path.iterdir()) == []  # nothing written either


def test_unknown_task_is_a_task_error():
    spec = load_spec({"task": "no_such_module_xyz:Task", "parameters": {"lr": {"value": 0.1}}})
    with pytest.raises(TaskError, match="task: cannot import module 'no_such_module_xyz'"):
        make_plan(spec, TWO_CPUS)


@pytest.mark.parametrize("bad, error", [
    ({"task": "no_such_module_xyz:Task"}, "task: cannot import module"),
    ({"method": "grid", "parameters": {"lr": {"min": 0.1, "max": 1.0}}}, "grid"),  # the searcher refuses it
])
def test_run_refuses_a_bad_task_or_searcher_before_starting_ray(bad, error, tmp_path, monkeypatch, forbid_ray_start):
    import ray

    import tune_service

    monkeypatch.setattr(ray, "is_initialized", lambda: False)  # as in a fresh process: run() would start Ray
    with pytest.raises(tune_service.TuneServiceError, match=error):
        tune_service.run({"name": "refused", **bad}, storage=tmp_path)
    assert list(tmp_path.iterdir()) == []  # and no experiment directory


def test_task_attribute_must_exist_and_be_usable():
    with pytest.raises(TaskError, match="has no attribute 'Nope'"):
        make_plan(load_spec({"task": "tune_service.tasks.digits:Nope"}), TWO_CPUS)
    with pytest.raises(TaskError, match="must name a Task subclass, a Task instance or a train_loop_per_worker"):
        make_plan(load_spec({"task": "tune_service.tasks.digits:SPLIT_SEED"}), TWO_CPUS)


def write(tmp_path, text: str) -> str:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return str(path)


def test_cli_bad_spec_exits_2_with_one_line_per_problem_and_no_traceback(tmp_path, capsys):
    path = write(tmp_path, "method: random\nparameters:\n  lr: {distribution: log_uniform_values, min: 0, max: 1}\n")
    assert cli.main([path]) == 2
    err = capsys.readouterr().err
    assert err == "error: parameters.lr.min: must be > 0 for log_uniform_values, got 0\n"


def test_cli_trial_too_big_for_cluster_fails_before_starting(tmp_path, capsys, forbid_ray_start):
    path = write(tmp_path, "resources: {workers: 512}\nparameters: {lr: {value: 0.1}}\n")
    assert cli.main([path, "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: resources: one trial needs 512 workers x (1 CPU, 0 GPU) = 512 CPU")
    assert "Traceback" not in err


def test_cli_debug_shows_the_traceback(tmp_path):
    from tune_service.errors import SpecError

    path = write(tmp_path, "method: nope\n")
    with pytest.raises(SpecError):
        cli.main([path, "--debug"])


def test_cli_set_overrides_reach_the_plan(tmp_path, capsys):
    assert cli.main([str(ROOT / "search_spaces" / "quickstart.yaml"), "--dry-run", "--set", "run_cap=3",
                     "--set", "scheduler.max_t=4", "--set", "training.oom_retry=true"]) == 0
    out = capsys.readouterr().out
    assert "trials       3" in out and "max_t=4" in out
    assert "training     precision auto, oom_retry=True\n" in out


def test_cli_resume_of_a_directory_that_is_no_experiment_is_one_line_exit_2(tmp_path, capsys, forbid_ray_start):
    assert cli.main(["--resume", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err == f"error: resume: {str(tmp_path.resolve())!r} is not a tune-service experiment directory (no sweep.json)\n"


def test_cli_needs_a_spec_or_resume_but_not_both(tmp_path, capsys):
    for argv in ([], [write(tmp_path, "name: x\n"), "--resume", str(tmp_path)]):
        with pytest.raises(SystemExit) as exit_info:
            cli.main(argv)
        assert exit_info.value.code == 2
        assert "give a spec file, or --resume EXPERIMENT_DIR (not both)" in capsys.readouterr().err


def test_cli_results_of_a_directory_without_a_summary_is_one_line_exit_2(tmp_path, capsys):
    assert cli.main(["results", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: results: ") and "has neither summary.json nor sweep.json" in err and err.count("\n") == 1


def test_the_plans_first_command_comes_from_its_own_searcher_left_as_it_was(monkeypatch):
    """The plan builds the searcher once; the dry-run's first command is a copy's first suggestion, and
    the sweep's first trial is the same one."""
    spec = load_spec({"program": "train.py", "method": "bayes", "metric": {"name": "loss", "goal": "minimize"},
                      "parameters": {"lr": {"min": 0.001, "max": 0.1}}})
    plan = make_plan(spec, TWO_CPUS)
    monkeypatch.setattr(registry, "build_searcher", lambda *a: pytest.fail("a second searcher was built"))
    command = plan.first_command()
    first = plan.searcher.suggest("the first trial")
    assert command.endswith(f"--lr={first['lr']}")


@pytest.mark.parametrize("gangs, state_api", [("warm", False), ("fresh", True)])
def test_the_embedded_ray_serves_its_state_api_only_to_ray_trains_runs(gangs, state_api, tmp_path, monkeypatch):
    """Ray Train's placement-group cleanup needs the dashboard's state API; warm gangs and programs do
    not, and Ray starts 1.4 s sooner without it."""
    import ray

    import tune_service
    from tune_service.execution import driver

    class Started(Exception):
        pass

    asked = {}

    def init_ray(address=None, **kwargs):
        asked.update(kwargs)
        raise Started

    monkeypatch.setattr(ray, "is_initialized", lambda: False)  # as in `tune-run`'s own process
    monkeypatch.setattr(driver, "init_ray", init_ray)
    spec = load_spec(ROOT / "search_spaces" / "quickstart.yaml").source
    with pytest.raises(Started):
        tune_service.run({**spec, "execution": {"gangs": gangs}}, storage=tmp_path, verbose=0)
    assert asked["state_api"] is state_api
