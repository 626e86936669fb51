"""The spec loader: defaults, the W&B grammar subset, overrides, and every error message."""

from __future__ import annotations

from pathlib import Path

import pytest

from tune_service.errors import SpecError
from tune_service.spec import load_spec, parse_override
from tune_service.spec.training import DEFAULT_PROFILE_STEPS, DDPSettings, TrainingSettings

ROOT = Path(__file__).resolve().parents[3]


def minimal(**extra):
    spec = {"method": "random", "parameters": {"lr": {"min": 0.001, "max": 0.1}}}
    spec.update(extra)
    return spec


def problems(raw) -> list[str]:
    with pytest.raises(SpecError) as info:
        load_spec(raw)
    return [str(p) for p in info.value.problems]


def test_quickstart_loads_with_its_values():
    spec = load_spec(ROOT / "search_spaces" / "quickstart.yaml")
    assert spec.name == "quickstart"
    assert spec.searcher == "hyperopt"  # bayes means hyperopt TPE
    assert spec.metric.mode == "max"
    assert spec.resources.workers == 2
    lr = spec.parameter("lr")
    assert (lr.distribution, lr.min, lr.max) == ("log_uniform_values", 1e-4, 3e-2)  # "1e-4" read as a number


def test_defaults():
    spec = load_spec(minimal())
    assert spec.run_cap == 10
    assert (spec.metric.name, spec.metric.goal) == ("val_loss", "minimize")
    assert spec.scheduler.type == "asha" and spec.scheduler.max_t == 10
    assert spec.task == "digits"
    assert spec.parameter("lr").distribution == "uniform"  # float min/max


def test_inferred_distributions():
    spec = load_spec(minimal(parameters={
        "a": {"value": 3}, "b": {"values": [1, 2]}, "c": {"min": 1, "max": 4}, "d": {"min": 0.1, "max": 1},
    }))
    kinds = [p.distribution for p in spec.parameters]
    assert kinds == ["constant", "categorical", "int_uniform", "uniform"]


def test_bohb_defaults_to_hyperband_and_refuses_asha():
    assert load_spec(minimal(method="bohb")).scheduler.type == "hyperband"
    assert problems(minimal(method="bohb", scheduler={"type": "asha"})) == [
        "scheduler.type: must be hyperband when method is bohb (BOHB's brackets need HyperBand-for-BOHB), got 'asha'"
    ]


def test_overrides_are_dotted_and_typed():
    key, value = parse_override("scheduler.max_t=5")
    assert (key, value) == ("scheduler.max_t", 5)
    spec = load_spec(minimal(), {key: value, "run_cap": 3, "parameters.lr.min": 0.01})
    assert spec.scheduler.max_t == 5 and spec.run_cap == 3 and spec.parameter("lr").min == 0.01


def test_training_block_has_defaults_and_reads_every_setting():
    assert load_spec(minimal()).training == TrainingSettings()
    spec = load_spec(minimal(
        resources={"gpus_per_worker": 1},
        training={"precision": "bf16", "grad_accum_steps": 4, "batch_size_scope": "per_rank", "lr_scaling": "linear",
                  "warmup_epochs": 2, "sync_batchnorm": True, "num_workers": 2, "pin_memory": False, "compile": True,
                  "deterministic": True, "profile": True, "oom_retry": True, "checkpoint_every": 0,
                  "ddp": {"bucket_cap_mb": 50, "static_graph": True}}))
    t = spec.training
    assert (t.precision, t.grad_accum_steps, t.batch_size_scope, t.lr_scaling, t.warmup_epochs) == ("bf16", 4, "per_rank", "linear", 2)
    assert (t.sync_batchnorm, t.num_workers, t.pin_memory, t.compile, t.deterministic) == (True, 2, False, True, True)
    assert (t.profile_steps, t.oom_retry, t.checkpoint_every) == (DEFAULT_PROFILE_STEPS, True, 0)
    assert t.ddp == DDPSettings(bucket_cap_mb=50, static_graph=True)


def test_override_without_equals_is_refused():
    with pytest.raises(SpecError, match=r"--set: must be KEY=VALUE, got 'run_cap'"):
        parse_override("run_cap")


@pytest.mark.parametrize("raw, expected", [
    (minimal(parameters={"lr": {"distribution": "log_uniform_values", "min": 0, "max": 1}}),
     "parameters.lr.min: must be > 0 for log_uniform_values, got 0"),
    (minimal(parameters={"lr": {"min": 0.5, "max": 0.1}}), "parameters.lr.min: must be <= max (0.1), got 0.5"),
    (minimal(parameters={"h": {"values": []}}), "parameters.h.values: must be a non-empty list, got []"),
    (minimal(parameters={"h": {"values": [1, 2], "probabilities": [0.5, 0.6]}}),
     "parameters.h.probabilities: must be >= 0 and sum to 1, got [0.5, 0.6] (sum 1.1)"),
    (minimal(parameters={"h": {"distribution": "uniformm", "min": 0, "max": 1}}),
     "parameters.h.distribution: must be one of constant, categorical, uniform, int_uniform, q_uniform, "
     "log_uniform, q_log_uniform, log_uniform_values, q_log_uniform_values, inv_log_uniform, "
     "inv_log_uniform_values, normal, q_normal, log_normal, q_log_normal, beta, q_beta, got 'uniformm' "
     "(did you mean 'uniform'?)"),
    (minimal(parameters={"h": {"distribution": "int_uniform", "min": 1.5, "max": 4}}),
     "parameters.h.min: must be an integer for int_uniform, got 1.5"),
    (minimal(parameters={"h": {"distribution": "uniform", "min": "abc", "max": 4}}),
     "parameters.h.min: must be a finite number, got 'abc'"),
    (minimal(parameters={"h": {"mn": 1, "max": 4}}),
     "parameters.h.mn: unknown key (did you mean 'min'?); valid keys: value, values, probabilities, distribution, "
     "min, max, q, mu, sigma, a, b, when, parameters"),
    (minimal(parameters={"h": 5}),
     "parameters.h: must be a mapping such as {value: ...}, {values: [...]} or {distribution: ..., min: ..., max: ...}, got 5"),
    (minimal(method="tpe"), "method: must be one of random, grid, bayes, hyperopt, bohb, optuna, custom, got 'tpe'"),
    (minimal(metric={"name": "acc", "goal": "max"}),
     "metric.goal: must be one of minimize, maximize, got 'max' (did you mean 'maximize'?)"),
    (minimal(run_cap=0), "run_cap: must be >= 1, got 0"),
    (minimal(run_cap="ten"), "run_cap: must be an integer, got 'ten'"),
    (minimal(scheduler={"type": "median"}), "scheduler.type: must be one of asha, hyperband, fifo, pbt, pb2, pbt_replay, got 'median'"),
    (minimal(scheduler={"max_t": 3, "grace_period": 5}), "scheduler.grace_period: must be <= scheduler.max_t (3), got 5"),
    (minimal(scheduler={"reduction_factor": 1}), "scheduler.reduction_factor: must be > 1, got 1"),
    (minimal(resources={"workers": 0}), "resources.workers: must be >= 1, got 0"),
    (minimal(resources={"cpus_per_worker": -1}), "resources.cpus_per_worker: must be > 0, got -1"),
    (minimal(resources={"gpus": 1}),
     "resources.gpus: unknown key (did you mean 'gpus_per_worker'?); valid keys: workers, cpus_per_worker, gpus_per_worker"),
    (minimal(schedular={}), "schedular: unknown key (did you mean 'scheduler'?); valid keys: name, description, "
     "method, metric, metrics, constraints, run_cap, parameters, early_terminate, task, scheduler, resources, training, wandb, seed, project, entity, failure, execution, limits, points_to_evaluate, warm_start, optuna, priors, program, command, controller, job, image_uri"),
    (minimal(task=""), "task: must be a built-in task name or 'package.module:attr', got ''"),
    (minimal(wandb={"mode": "sync"}), "wandb.mode: must be one of auto, online, offline, disabled, got 'sync'"),
    (minimal(wandb={"tags": [1]}), "wandb.tags: must be a list of non-empty strings, got [1]"),
    (minimal(wandb={"projet": "x"}), "wandb.projet: unknown key (did you mean 'project'?); valid keys: project, "
     "entity, group, tags, mode, log_checkpoints, init_timeout"),
    (minimal(wandb={"init_timeout": 0}), "wandb.init_timeout: must be > 0 seconds, got 0"),
    (minimal(wandb="offline"), "wandb: must be a mapping, got 'offline'"),
    (minimal(training={"precision": "fp8"}), "training.precision: must be one of auto, bf16, fp16, fp32, got 'fp8'"),
    (minimal(training={"grad_accum_steps": 0}), "training.grad_accum_steps: must be >= 1, got 0"),
    (minimal(training={"num_workers": "many"}), "training.num_workers: must be auto or an integer >= 0, got 'many'"),
    (minimal(training={"pin_memory": "yes"}), "training.pin_memory: must be auto, true or false, got 'yes'"),
    (minimal(training={"sync_batchnorm": True}),
     "training.sync_batchnorm: true needs GPU ranks (PyTorch's SyncBatchNorm runs only on GPUs; "
     "resources.gpus_per_worker is 0), got true; use auto or false"),
    (minimal(training={"ddp": {"bucket_cap_mb": 0}}), "training.ddp.bucket_cap_mb: must be > 0, got 0"),
    (minimal(training={"ddp": {"bucket_cap": 5}}), "training.ddp.bucket_cap: unknown key (did you mean "
     "'bucket_cap_mb'?); valid keys: bucket_cap_mb, gradient_as_bucket_view, static_graph, find_unused_parameters"),
    (minimal(training={"lr_scaling": "sqrt"}), "training.lr_scaling: must be one of none, linear, got 'sqrt'"),
    (minimal(training={"profile": -1}), "training.profile: must be >= 0, got -1"),
    (minimal(method="bohb", parameters={"lr": {"value": 0.1}}),
     "parameters: method bohb needs at least one searched parameter (`values` or a `distribution`), got only "
     "constants; use method random or grid"),
])
def test_each_error_names_path_rule_and_value(raw, expected):
    assert problems(raw) == [expected]


def test_all_errors_are_reported_at_once():
    found = problems(minimal(method="tpe", run_cap=0, resources={"workers": 0}))
    assert [p.split(":")[0] for p in found] == ["method", "resources.workers", "run_cap"]


def test_a_wandb_program_without_a_task_is_what_the_trials_run():
    spec = load_spec(minimal(program="train.py", command="${env} ${interpreter} ${program} --fast ${args}"))
    assert spec.runs_program and spec.task == "" and spec.program == "train.py"
    assert spec.command == ("${env}", "${interpreter}", "${program}", "--fast", "${args}")
    # as under W&B's agent: no early stopping unless asked, the program's own length, counted as W&B's
    # hyperband counts (values of the metric; without one, its logs), one process per trial
    assert (spec.scheduler.type, spec.scheduler.time_unit, spec.scheduler.max_t) == ("fifo", "step", 1_000_000)
    with_metric = load_spec(minimal(program="train.py", metric={"name": "acc", "goal": "maximize"})).scheduler
    assert (with_metric.time_unit, with_metric.time_attr, with_metric.open_ended) == ("value", "metric_values", True)
    assert spec.resources.workers == 1
    hyperband = load_spec(minimal(program="train.py", metric={"name": "acc", "goal": "maximize"},
                                  early_terminate={"type": "hyperband", "min_iter": 2}))
    assert (hyperband.scheduler.type, hyperband.scheduler.grace_period, hyperband.scheduler.max_t,
            hyperband.scheduler.time_unit) == ("asha", 2, 1_000_000, "value")
    assert load_spec(minimal(program="train.py", resources={"workers": 2})).resources.workers == 2  # asked for
    assert load_spec(minimal()).resources.workers == 2  # a task's trials: 2 DDP ranks by default


def test_a_wandb_program_sweep_without_a_metric_runs_as_wandb_runs_it_and_refuses_what_needs_one():
    """W&B accepts random and grid sweeps with no metric (its boolean-flags example has none): every run
    goes to its end. It refuses bayes and hyperband without one; so do we (issue 38, 1)."""
    spec = load_spec(minimal(program="train.py", method="grid", parameters={"a": {"values": [True, False]}}))
    assert spec.metric.name is None and not spec.metric.declared and spec.metric.mode is None
    assert spec.scheduler.type == "fifo"
    assert problems(minimal(program="train.py", method="optuna"))[0].startswith("method: optuna needs a metric")
    assert problems(minimal(program="train.py", scheduler={"type": "asha"})) == [
        "scheduler.type: asha needs a metric to compare trials by: add metric: {name: ..., goal: ...}, or use "
        "fifo, got 'asha'"]
    assert load_spec(minimal()).metric.name == "val_loss"  # a task's sweep keeps its default metric


def test_with_a_task_the_program_is_read_but_not_run():
    spec = load_spec(minimal(program="train.py", task="digits"))
    assert not spec.runs_program and any(n.startswith("program: read but not run") for n in spec.notes)


def test_a_malformed_program_or_command_is_refused_naming_it():
    assert problems(minimal(program=3)) == ["program: must be the path of the training script W&B's agent runs, got 3"]
    assert problems(minimal(program="t.py", command={"a": 1}))[0].startswith("command: must be a list of strings")
    assert problems(minimal(command=["${program}"])) == [
        "command: uses ${program} but the spec has no program, got ['${program}']"]


def test_yaml_errors_name_the_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("method: random\nparameters:\n  lr: {min: 1, max: [\n")
    with pytest.raises(SpecError, match=r"bad.yaml: invalid YAML at line \d+, column \d+"):
        load_spec(path)


def test_non_mapping_document_is_refused(tmp_path):
    path = tmp_path / "list.yaml"
    path.write_text("- a\n- b\n")
    with pytest.raises(SpecError, match="list.yaml: must be a mapping of keys to values, got list"):
        load_spec(path)


def test_missing_file_is_refused(tmp_path):
    with pytest.raises(SpecError, match="spec file not found"):
        load_spec(tmp_path / "nope.yaml")


def test_yaml_is_read_safely(tmp_path):
    path = tmp_path / "evil.yaml"
    path.write_text("method: !!python/object/apply:os.system ['echo pwned']\n")
    with pytest.raises(SpecError, match="invalid YAML"):
        load_spec(path)


def test_every_top_level_key_of_wandbs_sweep_configuration_is_accepted_one_note_each():
    spec = load_spec(minimal(program="train.py", controller={"type": "local"}, job="me/project/job:v1",
                             image_uri="img:1", project="p", entity="e", description="d", run_cap=3,
                             early_terminate={"type": "hyperband", "min_iter": 1}, name="n",
                             metric={"name": "loss", "goal": "minimize"}, command=["${program}"]))
    notes = [n for n in spec.notes if n.split(":")[0] in ("controller", "job", "image_uri")]
    assert [n.split(":")[0] for n in notes] == ["controller", "job", "image_uri"]
    assert notes[0] == ("controller: read, not used: W&B's sweep controller (local or cloud); here the tune-run "
                        "driver is the controller")


def test_a_programs_directory_is_the_spec_files_or_else_the_working_directory_as_wandbs_agent_runs_it(
        tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    (repo / "analysis").mkdir(parents=True)
    (repo / "analysis" / "train.py").write_text("")
    beside = repo / "analysis" / "beside.yaml"
    beside.write_text("program: train.py\nmethod: random\nparameters: {a: {values: [1]}}\n")
    from_root = repo / "analysis" / "from_root.yaml"
    from_root.write_text("program: analysis/train.py\nmethod: random\nparameters: {a: {values: [1]}}\n")
    monkeypatch.chdir(repo)
    assert load_spec(beside).directory == str(repo / "analysis")
    assert load_spec(from_root).directory == str(repo)  # where W&B's agent runs it
    monkeypatch.chdir(tmp_path)
    nowhere = load_spec(from_root)  # the dry-run says so
    assert nowhere.directory == str(repo / "analysis")
    assert (f"program: 'analysis/train.py' is neither beside the spec file ({repo / 'analysis'}) nor in the working "
            f"directory ({tmp_path}), where W&B's agent would look; trials run it from {repo / 'analysis'}"
            in nowhere.notes)


def test_a_command_without_a_program_runs_the_command_as_wandbs_agent_does():
    spec = load_spec(minimal(command=["${env}", "python", "src/train.py", "--hidden_size", "128", "${args}"]))
    assert spec.runs_program and spec.program is None and spec.task == ""
