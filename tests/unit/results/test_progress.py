"""A running sweep's records, fed with Tune's own Trial objects: a partial summary is written once when
the driver starts and each trial that ends is appended to the ended-trials log (one line, whatever
came before), the statuses follow the epochs, and a resumed sweep keeps the trials its earlier run
ended."""

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


def ended_lines(directory) -> list[dict]:
    return [json.loads(line) for line in (directory / "ended_trials.jsonl").read_text().splitlines()]


def test_each_trial_that_ends_is_one_line_appended_and_the_summary_is_not_rewritten(tmp_path):
    recorder = Recorder()
    progress = SweepProgress(tmp_path, "val_accuracy", "max", max_t=3, total=4, observers=[recorder])
    progress.start()
    summary_file = tmp_path / "summary.json"
    header = json.loads(summary_file.read_text())
    assert header[IN_PROGRESS_KEY] is True and header["trials"] == [] and header["max_t"] == 3
    written = summary_file.stat().st_mtime_ns, summary_file.stat().st_ino
    a, b = trial("aaa", 0.1), trial("bbb", 0.01)
    progress.on_trial_start(0, [], a)
    progress.on_trial_start(0, [], b)
    assert not (tmp_path / "ended_trials.jsonl").exists()  # nothing has ended yet

    for epoch in (1, 2, 3):
        report(progress, a, epoch, 0.5 + epoch / 10)
    report(progress, b, 1, 0.3)
    progress.on_trial_complete(0, [], a)
    assert [(t["trial_id"], t["status"], t["epochs"]) for t in ended_lines(tmp_path)] == [("aaa", "completed", 3)]
    loaded = sweep_result.load(tmp_path)  # the partial summary and the log, read together
    assert [(t.trial_id, t.status) for t in loaded.trials] == [("aaa", "completed")]
    assert loaded.best.trial_id == "aaa" and loaded.extra[IN_PROGRESS_KEY] is True
    assert progress.ended_count == 1 and [t.trial_id for t in progress.running] == ["bbb"]

    progress.on_trial_complete(0, [], b)  # ended before max_t: the scheduler stopped it
    assert [(t["trial_id"], t["status"]) for t in ended_lines(tmp_path)] == [("aaa", "completed"), ("bbb", "stopped")]
    assert (summary_file.stat().st_mtime_ns, summary_file.stat().st_ino) == written
    assert progress.best.trial_id == "aaa" and progress.running == []
    assert recorder.events == [
        ("started", "aaa", "running"), ("started", "bbb", "running"), ("reported", "aaa", 1), ("reported", "aaa", 2),
        ("reported", "aaa", 3), ("reported", "bbb", 1), ("ended", "aaa", "completed"), ("ended", "bbb", "stopped"),
    ]


def two_running(progress: SweepProgress) -> tuple[Trial, Trial]:
    """The sweep started (its partial summary written) and two trials running in it."""
    progress.start()
    a, b = trial("aaa", 0.1), trial("bbb", 0.2)
    for t in (a, b):
        progress.on_trial_start(0, [], t)
    return a, b


def test_a_line_cut_off_by_a_full_disk_is_ended_before_the_next_and_skipped_when_read(tmp_path):
    progress = SweepProgress(tmp_path, "val_accuracy", "max", max_t=3, total=3)
    a, b = two_running(progress)
    report(progress, a, 3, 0.8)
    progress.on_trial_complete(0, [], a)
    with (tmp_path / "ended_trials.jsonl").open("a") as log:
        log.write('{"trial_id": "torn", "status": "comp')  # a write the disk cut short
    report(progress, b, 3, 0.9)
    progress.on_trial_complete(0, [], b)
    loaded = sweep_result.load(tmp_path)
    assert [(t.trial_id, t.status) for t in loaded.trials] == [("aaa", "completed"), ("bbb", "completed")]
    assert loaded.best.trial_id == "bbb"


def test_the_log_is_read_only_while_the_summary_is_partial(tmp_path):
    progress = SweepProgress(tmp_path, "val_accuracy", "max", max_t=3, total=1)
    progress.start()
    a = trial("aaa", 0.1)
    progress.on_trial_start(0, [], a)
    report(progress, a, 3, 0.8)
    progress.on_trial_complete(0, [], a)
    final = sweep_result.SweepResult(str(tmp_path), "val_accuracy", "max", (
        sweep_result.TrialRecord("aaa", "completed", {"lr": 0.1}, {"val_accuracy": 0.85}, 3),), None, {})
    sweep_result.write(final)  # the sweep's end: the whole summary, as Tune's results give it
    assert [t.metrics["val_accuracy"] for t in sweep_result.load(tmp_path).trials] == [0.85]


def test_a_resumed_sweep_keeps_the_trials_its_earlier_run_ended(tmp_path):
    earlier = sweep_result.SweepResult(str(tmp_path), "val_accuracy", "max", (
        sweep_result.TrialRecord("old", "completed", {"lr": 0.1}, {"val_accuracy": 0.9}, 3),
        sweep_result.TrialRecord("cut", "interrupted", {"lr": 0.2}, {"val_accuracy": 0.5}, 1),
    ))
    progress = SweepProgress(tmp_path, "val_accuracy", "max", max_t=3, total=3, previous=earlier)
    assert progress.ended_count == 1 and progress.best.trial_id == "old"  # the interrupted one runs again
    progress.start()
    assert [t["trial_id"] for t in json.loads((tmp_path / "summary.json").read_text())["trials"]] == ["old"]
    cut = trial("cut", 0.2)
    progress.on_trial_start(0, [], cut)
    report(progress, cut, 3, 0.95)
    progress.on_trial_complete(0, [], cut)
    loaded = sweep_result.load(tmp_path)
    assert {t.trial_id: t.status for t in loaded.trials} == {"old": "completed", "cut": "completed"}
    assert loaded.best.trial_id == "cut" and progress.best.trial_id == "cut"


def test_a_trial_that_ended_before_a_kill_and_ends_again_on_resume_is_counted_and_logged_once(tmp_path):
    """Tune's state, saved before "old" ended, had it running: resumed, it ends again from its checkpoint."""
    earlier = sweep_result.SweepResult(str(tmp_path), "val_accuracy", "max", (
        sweep_result.TrialRecord("old", "stopped", {"lr": 0.1}, {"val_accuracy": 0.9}, 1),
    ))
    recorder = Recorder()
    progress = SweepProgress(tmp_path, "val_accuracy", "max", max_t=3, total=3, previous=earlier,
                             observers=[recorder])
    old = trial("old", 0.1)
    progress.on_trial_start(0, [], old)
    report(progress, old, 1, 0.9)  # the checkpointed report, delivered again
    progress.on_trial_complete(0, [], old)
    assert progress.ended_count == 1 and not progress.running and progress.saved("old")
    assert not (tmp_path / "ended_trials.jsonl").exists()  # its line is the earlier run's
    assert ("ended", "old", "stopped") not in recorder.events


def test_a_driver_that_cannot_wait_writes_every_trial_read_back_and_the_running_ones_interrupted(tmp_path):
    earlier = sweep_result.SweepResult(str(tmp_path), "val_accuracy", "max", (
        sweep_result.TrialRecord("old", "completed", {"lr": 0.1}, {"val_accuracy": 0.9}, 3),))
    progress = SweepProgress(tmp_path, "val_accuracy", "max", max_t=3, total=3, previous=earlier)
    a, b = two_running(progress)
    report(progress, a, 1, 0.4)
    progress.on_trial_complete(0, [], a)
    report(progress, b, 2, 0.6)
    outcome = progress.interrupted()
    assert [(t.trial_id, t.status, t.epochs) for t in outcome.trials] == [
        ("old", "completed", 3), ("aaa", "stopped", 1), ("bbb", "interrupted", 2)]
    assert not outcome.extra.get(IN_PROGRESS_KEY) and outcome.best.trial_id == "old"


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
    progress.start()
    progress.on_trial_complete(0, [], a)
    progress.on_trial_complete(0, [], b)

    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["time_unit"] == "step"
    assert {t["trial_id"]: (t["status"], t["epochs"], t["steps"]) for t in ended_lines(tmp_path)} == {
        "aaa": ("completed", 1, 300), "bbb": ("stopped", 0, 100)}
    board = sweep_result.load(tmp_path).leaderboard().splitlines()
    assert board[0].split()[:4] == ["rank", "trial", "status", "steps"] and board[1].split()[3] == "300"


def numbered(trial_id: str, lr: float, number: int) -> Trial:
    t = trial(trial_id, lr)
    t.experiment_tag = f"{number}_lr={lr}"  # as Tune's searcher tags the trials it creates
    return t


def test_the_final_results_hold_the_trials_that_left_tune_read_back_in_the_order_they_were_created(tmp_path):
    """The trials that ended and left Tune's controller (tune_service.execution.retiring) are in the final
    results from the log, those Tune still holds from Tune, all in the order they were created."""
    earlier = sweep_result.SweepResult(str(tmp_path), "val_accuracy", "max", (
        sweep_result.TrialRecord("old", "completed", {"lr": 0.1}, {"val_accuracy": 0.7}, 3, number=1),))
    progress = SweepProgress(tmp_path, "val_accuracy", "max", max_t=3, total=4, previous=earlier)
    late, early, held = numbered("late", 0.3, 4), numbered("early", 0.2, 2), numbered("held", 0.4, 3)
    for t, accuracy in ((late, 0.9), (early, 0.8)):  # ended in the other order than created
        progress.on_trial_start(0, [], t)
        report(progress, t, 3, accuracy)
        progress.on_trial_complete(0, [], t)
    assert progress.saved("late") and progress.saved("early")
    tune_held = sweep_result.SweepResult(str(tmp_path), "val_accuracy", "max", (
        sweep_result.TrialRecord("held", "interrupted", {"lr": 0.4}, {"val_accuracy": 0.5}, 1, number=3),
        sweep_result.TrialRecord("early", "completed", {"lr": 0.2}, {"val_accuracy": 0.8}, 3),
    ), extra={"time_unit": "epoch"})
    outcome = progress.final(tune_held)
    assert [(t.trial_id, t.number, t.status) for t in outcome.trials] == [
        ("old", 1, "completed"), ("early", 2, "completed"), ("held", 3, "interrupted"), ("late", 4, "completed")]
    assert outcome.best.trial_id == "late"  # among the trials only the log holds
    assert outcome.extra == {"time_unit": "epoch"}
