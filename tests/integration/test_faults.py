"""Faults injected into real sweeps on the shared local Ray: each ends its trial with one clear line,
and the other trials go on."""

from __future__ import annotations

import json
import math

import pytest
import yaml

import tune_service
from tune_service import cli
from tune_service.results import sweep_result

pytestmark = [pytest.mark.integration, pytest.mark.timeout(400)]


def test_a_diverging_trial_fails_with_its_reason_and_is_never_the_best(ray_cluster, tmp_path):
    spec = {"name": "diverging", "task": "recording_tasks:DivergingDigits", "method": "grid",
            "metric": {"name": "val_loss", "goal": "minimize"}, "scheduler": {"type": "fifo", "max_t": 3},
            "parameters": {"diverge_at": {"values": [0, 2]}}, "resources": {"workers": 1}}
    result = tune_service.run(spec, storage=tmp_path, name="diverging", verbose=0)
    trials = {t.config["diverge_at"]: t for t in result.trials}
    assert (trials[0].status, trials[0].epochs) == ("completed", 3)
    diverged = trials[2]
    assert (diverged.status, diverged.epochs) == ("failed", 1)  # epoch 2 was never reported
    assert "NonFiniteLoss: non-finite loss at epoch 2: train_loss nan" in diverged.error
    assert "\n" not in diverged.error
    assert result.best.trial_id == trials[0].trial_id


def test_a_metric_the_task_never_reports_fails_the_trial_and_the_sweep_exits_1(ray_cluster, tmp_path, capsys):
    spec = {"name": "unreported", "method": "random", "run_cap": 1, "metric": {"name": "accuracy", "goal": "maximize"},
            "scheduler": {"type": "fifo", "max_t": 3}, "parameters": {"lr": {"value": 0.01}},
            "resources": {"workers": 1}}
    path = tmp_path / "unreported.yaml"
    path.write_text(yaml.safe_dump(spec))
    assert cli.main([str(path), "--storage", str(tmp_path), "--name", "unreported"]) == cli.EXIT_FAILED
    out = capsys.readouterr().out
    result = sweep_result.load(tmp_path / "unreported")
    (trial,) = result.trials
    assert trial.status == "failed" and trial.epochs <= 1
    assert trial.error.startswith("MissingMetric: metric.name: the task never reported 'accuracy'; its first report "
                                  "had: ") and "val_accuracy" in trial.error
    assert result.best is None
    # The live view's line for it (piped: one line a trial) carries the same error.
    assert f"[1/1] {trial.trial_id} failed    {trial.epochs}/3 epochs  accuracy -  {trial.error}" in out.splitlines()
    assert "no trial reported accuracy" in out


def test_a_killed_rank_restarts_the_trial_from_its_checkpoint_up_to_max_failures(ray_cluster, tmp_path):
    from tune_service.tasks.digits import load_digits_tensors

    records = tmp_path / "batches"
    records.mkdir()
    spec = {"name": "killed", "task": "recording_tasks:RankKillingDigits", "method": "grid",
            "metric": {"name": "val_accuracy", "goal": "maximize"}, "scheduler": {"type": "fifo", "max_t": 3},
            "failure": {"max_failures": 1},
            "parameters": {"kill": {"values": ["once", "always"]}, "record_dir": {"value": str(records)},
                           "kill_at_batch": {"value": 40}, "batch_size": {"value": 64}}}
    result = tune_service.run(spec, storage=tmp_path, name="killed", verbose=0)
    trials = {t.config["kill"]: t for t in result.trials}
    per_epoch = math.ceil(math.ceil(len(load_digits_tensors()[0]) / 2) / 32)  # batches per rank and epoch
    # The kill comes in epoch 2, well after epoch 1's checkpoint: Ray Train's controller registers a
    # reported checkpoint at its next poll, and a rank that dies before that poll restarts without it.
    assert per_epoch + 10 < 40 <= 2 * per_epoch

    once = trials["once"]
    assert (once.status, once.epochs) == ("completed", 3)
    first = sorted(f.stat().st_size for f in records.glob("kill=once-attempt=1-*"))
    second = sorted(f.stat().st_size for f in records.glob("kill=once-attempt=2-*"))
    assert len(first) == 2 and max(first) == 40  # both ranks of the first attempt; rank 1 died at batch 40
    assert second == [2 * per_epoch, 2 * per_epoch]  # the restarted ranks trained epochs 2 and 3 only

    always = trials["always"]
    # Killed in each of its 1 + max_failures attempts (each on a new gang), then failed with the reason.
    assert always.status == "failed" and "GangBroken: rank 1 of the trial's DDP gang died" in always.error
    assert len(list(records.glob("kill=always-attempt=2-*"))) == 2
    assert not list(records.glob("kill=always-attempt=3-*"))
    assert result.best.trial_id == once.trial_id


def test_max_failed_trials_stops_a_sweep_whose_trials_all_fail(ray_cluster, tmp_path, capsys):
    spec = {"name": "all_fail", "task": "recording_tasks:DivergingDigits", "method": "random", "run_cap": 8,
            "metric": {"name": "val_loss", "goal": "minimize"}, "scheduler": {"type": "fifo", "max_t": 3},
            "parameters": {"diverge_at": {"value": 1}, "lr": {"min": 0.001, "max": 0.1}},
            "failure": {"max_failed_trials": 0.25}}  # 2 of the 8
    path = tmp_path / "all_fail.yaml"
    path.write_text(yaml.safe_dump(spec))
    assert cli.main([str(path), "--storage", str(tmp_path), "--name", "all_fail"]) == cli.EXIT_FAILED
    out = capsys.readouterr().out
    result = sweep_result.load(tmp_path / "all_fail")
    failed = [t for t in result.trials if t.status == "failed"]
    assert len(failed) == 2 and len(result.trials) <= 3  # one more may have started before the stop: interrupted
    assert {t.status for t in result.trials} <= {"failed", "interrupted"}
    error = failed[0].error
    assert error.startswith("NonFiniteLoss: non-finite loss at epoch 1")
    assert f"stopped: 2 trials failed (failure.max_failed_trials allows 2): 2 x {error}" in out.splitlines()
    assert f"the same error as {failed[0].trial_id} (2 trials so far)" in out  # said once, then counted


def test_the_time_limits_stop_a_trial_and_end_the_sweep_resumably(ray_cluster, tmp_path, capsys):
    lrs = [0.01, 0.003, 0.001, 0.03, 0.02]
    spec = {"name": "limited", "task": "recording_tasks:SlowDigits", "method": "grid",  # epochs of about 1 s
            "metric": {"name": "val_accuracy", "goal": "maximize"}, "scheduler": {"type": "fifo", "max_t": 5},
            "parameters": {"lr": {"values": lrs}}, "limits": {"trial_s": 2.5, "sweep_s": 12}}
    path = tmp_path / "limited.yaml"
    path.write_text(yaml.safe_dump(spec))
    experiment = tmp_path / "limited"
    # Five trials of 2.5 s or more each, one at a time, after a gang's start: more than the sweep's 12 s.
    code = cli.main([str(path), "--storage", str(tmp_path), "--name", "limited"])
    out = capsys.readouterr().out
    first = sweep_result.load(experiment)
    assert code == (cli.EXIT_OK if first.best is not None else cli.EXIT_FAILED)
    assert f"time limit: the sweep ran its limit of 12 s (limits.sweep_s); continue with: tune-run --resume " \
           f"{experiment}" in out
    assert len(first.trials) < len(lrs) or any(t.status == "interrupted" for t in first.trials)  # limits.sweep_s
    ended = {t.trial_id: t.epochs for t in first.trials if t.status == "stopped"}

    # As a user who wants the rest without the limit: the saved spec, less its sweep limit, resumed.
    saved = json.loads((experiment / "sweep.json").read_text())
    del saved["spec"]["limits"]["sweep_s"]
    (experiment / "sweep.json").write_text(json.dumps(saved))
    assert cli.main(["--resume", str(experiment)]) == cli.EXIT_OK
    final = sweep_result.load(experiment)
    assert len(final.trials) == len(lrs) and {t.status for t in final.trials} == {"stopped"}
    seconds = tune_service.load_results(experiment).trials.set_index("trial_id")["time_total_s"]
    assert all(t.epochs < 5 and seconds[t.trial_id] >= 2.5 for t in final.trials)  # limits.trial_s
    assert {t.trial_id: t.epochs for t in final.trials if t.trial_id in ended} == ended  # never run again


def test_a_stopped_rank_is_caught_by_the_progress_limit_and_the_trial_retried(ray_cluster, tmp_path):
    records = tmp_path / "batches"
    records.mkdir()
    spec = {"name": "stalled", "task": "recording_tasks:RankStoppingDigits", "method": "grid",
            "metric": {"name": "val_accuracy", "goal": "maximize"}, "scheduler": {"type": "fifo", "max_t": 3},
            "failure": {"max_failures": 1}, "limits": {"progress_s": 8},
            "parameters": {"kill": {"values": ["once", "always"]}, "record_dir": {"value": str(records)},
                           "kill_at_batch": {"value": 40}, "batch_size": {"value": 64}}}
    result = tune_service.run(spec, storage=tmp_path, name="stalled", verbose=0)
    trials = {t.config["kill"]: t for t in result.trials}
    once = trials["once"]
    assert (once.status, once.epochs) == ("completed", 3)  # retried on a new gang, from its checkpoint
    stopped_at = (records / "kill=once-killed").stat().st_mtime  # rank 1 stopped itself right after
    retried_at = min(f.stat().st_ctime for f in records.glob("kill=once-attempt=2-*"))
    assert retried_at - stopped_at < 8 + 20  # the limit, then a new gang's start (a few seconds; slack for CI)
    always = trials["always"]
    assert always.status == "failed"
    assert "TrialStalled: no report from the trial for 8 s (limits.progress_s)" in always.error
