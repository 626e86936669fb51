"""A spec checked against its task before anything starts: a metric the task never reports, or a
searched parameter it does not take, is refused in one line naming both, exit code 2."""

from __future__ import annotations

import pytest
import yaml

from tune_service import cli
from tune_service.execution.plan import plan_sweep
from tune_service.spec import load_spec
from tune_service.tasks import Task
from tune_service.tasks.base import ANY
from tune_service.tasks.digits import Digits


def dry_run(tmp_path, capsys, spec: dict) -> tuple[int, str, str]:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    code = cli.main([str(path), "--dry-run"])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_a_metric_the_task_never_reports_is_refused_naming_the_nearest(tmp_path, capsys, forbid_ray_start):
    code, _, err = dry_run(tmp_path, capsys, {"task": "digits", "metric": {"name": "accuracy", "goal": "maximize"},
                                              "parameters": {"lr": {"min": 0.001, "max": 0.1}}})
    assert code == cli.EXIT_USAGE
    assert err == ("error: metric.name: the task digits never reports 'accuracy' (did you mean 'val_accuracy'?); "
                   "it reports: epoch, step, train_loss, val_loss, world_size, batch_per_rank, grad_accum_steps, "
                   "global_batch, lr, precision, epoch_time_s, n_params, latency_ms, val_accuracy\n")


def test_a_parameter_the_task_does_not_take_is_refused_naming_the_nearest(tmp_path, capsys, forbid_ray_start):
    code, _, err = dry_run(tmp_path, capsys, {"task": "digits", "metric": {"name": "val_loss"},
                                              "parameters": {"learning_rate": {"min": 0.001, "max": 0.1},
                                                             "hidden": {"values": [32, 64]}}})
    assert code == cli.EXIT_USAGE
    assert err == ("error: parameters.learning_rate: the task digits does not take 'learning_rate' (did you mean "
                   "'lr'?); it takes: batch_size, dropout, hidden, layers, lr, model, momentum, noise, optimizer, "
                   "weight_decay\n")


def test_a_wandb_file_without_a_task_runs_its_program_and_is_not_checked_against_a_task(tmp_path, capsys,
                                                                                         forbid_ray_start):
    (tmp_path / "train.py").write_text("import wandb\n")
    code, out, _ = dry_run(tmp_path, capsys, {"program": "train.py", "metric": {"name": "loss", "goal": "minimize"},
                                              "parameters": {"learning_rate": {"min": 0.001, "max": 0.1}}})
    assert code == cli.EXIT_OK
    assert "program      train.py, run as W&B's agent runs it" in out and "--learning_rate=" in out
    assert "the task digits" not in out


class Anything(Digits):
    hyperparameters = ANY


class OwnMetrics(Task):
    def metrics(self, outputs, targets):  # names not declared: not checked
        return {"f1": outputs.sum()}


@pytest.mark.parametrize("task, spec", [
    (Anything(), {"parameters": {"whatever": {"values": [1, 2]}}}),
    (OwnMetrics(), {"metric": {"name": "val_f1"}, "parameters": {"lr": {"values": [0.1, 0.01]}}}),
])
def test_a_task_that_takes_any_or_does_not_say_is_not_refused(task, spec):
    plan_sweep(load_spec({"method": "grid", **spec}), task)


def test_an_optimizer_torch_does_not_have_is_refused_and_its_arguments_are_taken(tmp_path, capsys, forbid_ray_start):
    code, _, err = dry_run(tmp_path, capsys, {"task": "digits", "metric": {"name": "val_loss"},
                                              "parameters": {"optimizer": {"values": ["adamw", "adamm"]},
                                                             "eps": {"values": [1e-8, 1e-6]}}})
    assert code == cli.EXIT_USAGE
    assert err.startswith("error: parameters.optimizer: optimizer must be one of torch.optim's ")
    assert err.endswith("got 'adamm'\n") and "adamw" in err and err.count("\n") == 1
    code, _, _ = dry_run(tmp_path, capsys, {"task": "digits", "metric": {"name": "val_loss"},
                                            "parameters": {"optimizer": {"values": ["adamw", "RMSprop"]},
                                                           "eps": {"values": [1e-8, 1e-6]}}})
    assert code == cli.EXIT_OK


def test_a_task_package_beside_the_spec_imports_and_a_broken_one_is_one_line(tmp_path, capsys, forbid_ray_start):
    package = tmp_path / "project" / "beside_the_spec"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "task.py").write_text("from tune_service.tasks.digits import Digits\n\nclass Mine(Digits):\n    pass\n")
    (package / "broken.py").write_text("def oops(:\n    pass\n")
    spec = {"task": "beside_the_spec.task:Mine", "metric": {"name": "val_loss"}, "parameters": {"lr": {"value": 0.1}}}
    code, out, _ = dry_run(tmp_path / "project", capsys, spec)
    assert code == cli.EXIT_OK and "task         beside_the_spec.task:Mine" in out
    code, _, err = dry_run(tmp_path / "project", capsys, {**spec, "task": "beside_the_spec.broken:Mine"})
    assert code == cli.EXIT_USAGE
    assert err == (f"error: task: importing module 'beside_the_spec.broken' failed: SyntaxError: invalid syntax "
                   f"({package / 'broken.py'}, line 1), got 'beside_the_spec.broken:Mine'\n")
