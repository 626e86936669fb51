"""A running sweep's records, fed with Tune's own Trial objects: summary.json is written each time a
trial ends (marked in progress), the statuses follow the epochs, and a resumed sweep keeps the trials
its earlier run ended."""

from __future__ import annotations

import json

from ray.tune.experiment import Trial

from tune_service.results import sweep_result
from tune_service.results.progress import SweepProgress
from tune_service.results.sweep_result import IN_PROGRESS_KEY


def trial(trial_id: str, lr: float) -> Trial:
    return Trial("run_trial", config={"lr": lr}, trial_id=trial_id, stub=True)


class Recorder:
    def __init__(self):
        self.events = []

    def trial_started(self, progress, record):
        self.events.append(("started", record.trial_id, record.status))

    def trial_reported(self, progress, record):
        self.events.append(("reported", record.trial_id, record.epochs))

    def trial_ended(self, progress, record):
        self.events.append(("ended", record.trial_id, record.status))

    def tick(self, progress):
        pass


def report(progress, t, epoch, accuracy):
    result = {"epoch": epoch, "val_accuracy": accuracy, "training_iteration": epoch, "time_total_s": 1.0}
    t.update_last_result(result)  # as Tune does before it calls the callbacks
    progress.on_trial_result(0, [], t, result)


def test_the_summary_is_written_as_trials_end_and_marked_in_progress(tmp_path):
    recorder = Recorder()
    progress = SweepProgress(tmp_path, "val_accuracy", "max", max_t=3, total=4, observers=[recorder])
    a, b = trial("aaa", 0.1), trial("bbb", 0.01)
    progress.on_trial_start(0, [], a)
    progress.on_trial_start(0, [], b)
    assert not (tmp_path / "summary.json").exists()  # nothing has ended yet

    for epoch in (1, 2, 3):
        report(progress, a, epoch, 0.5 + epoch / 10)
    report(progress, b, 1, 0.3)
    progress.on_trial_complete(0, [], a)

    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary[IN_PROGRESS_KEY] is True
    statuses = {t["trial_id"]: (t["status"], t["epochs"]) for t in summary["trials"]}
    assert statuses == {"aaa": ("completed", 3), "bbb": ("running", 1)}
    assert summary["best"]["trial_id"] == "aaa"
    loaded = sweep_result.load(tmp_path)  # what `tune-run results DIR` reads while the sweep runs
    assert "1 running" in loaded.leaderboard()

    progress.on_trial_complete(0, [], b)  # ended before max_t: the scheduler stopped it
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert {t["trial_id"]: t["status"] for t in summary["trials"]} == {"aaa": "completed", "bbb": "stopped"}
    assert recorder.events == [
        ("started", "aaa", "running"), ("started", "bbb", "running"), ("reported", "aaa", 1), ("reported", "aaa", 2),
        ("reported", "aaa", 3), ("reported", "bbb", 1), ("ended", "aaa", "completed"), ("ended", "bbb", "stopped"),
    ]


def test_a_resumed_sweep_keeps_the_trials_its_earlier_run_ended(tmp_path):
    earlier = sweep_result.SweepResult(str(tmp_path), "val_accuracy", "max", (
        sweep_result.TrialRecord("old", "completed", {"lr": 0.1}, {"val_accuracy": 0.9}, 3),
        sweep_result.TrialRecord("cut", "interrupted", {"lr": 0.2}, {"val_accuracy": 0.5}, 1),
    ))
    progress = SweepProgress(tmp_path, "val_accuracy", "max", max_t=3, total=3, previous=earlier)
    assert [t.trial_id for t in progress.ended] == ["old"]  # the interrupted one runs again
    cut = trial("cut", 0.2)
    progress.on_trial_start(0, [], cut)
    report(progress, cut, 3, 0.95)
    progress.on_trial_complete(0, [], cut)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert {t["trial_id"]: t["status"] for t in summary["trials"]} == {"old": "completed", "cut": "completed"}
    assert summary["best"]["trial_id"] == "cut"


def test_a_sweep_by_steps_counts_its_trials_in_steps(tmp_path):
    progress = SweepProgress(tmp_path, "val_accuracy", "max", max_t=300, total=2, time_unit="step")
    a, b = trial("aaa", 0.1), trial("bbb", 0.01)
    for t in (a, b):
        progress.on_trial_start(0, [], t)
    for step in (100, 200, 300):  # three reports in the first two epochs
        result = {"epoch": round(step / 240, 4), "step": step, "val_accuracy": step / 1000, "training_iteration": 1}
        a.update_last_result(result)
        progress.on_trial_result(0, [], a, result)
    result = {"epoch": 0.4167, "step": 100, "val_accuracy": 0.05, "training_iteration": 1}
    b.update_last_result(result)
    progress.on_trial_result(0, [], b, result)
    progress.on_trial_complete(0, [], a)
    progress.on_trial_complete(0, [], b)

    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["time_unit"] == "step"
    assert {t["trial_id"]: (t["status"], t["epochs"], t["steps"]) for t in summary["trials"]} == {
        "aaa": ("completed", 1, 300), "bbb": ("stopped", 0, 100)}
    board = sweep_result.load(tmp_path).leaderboard().splitlines()
    assert board[0].split()[:4] == ["rank", "trial", "status", "steps"] and board[1].split()[3] == "300"
