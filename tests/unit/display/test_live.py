"""The live view on records alone: piped, one line per ended trial (the metric, the best so far, a
failed trial's error, said once and then counted) and no table; on a terminal, a table of running trials with their rung."""

from __future__ import annotations

import io

from rich.console import Console

from tune_service.display import LiveView
from tune_service.results.progress import SweepProgress
from tune_service.results.sweep_result import TrialRecord


def piped() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=80, highlight=False), out


def progress_with(tmp_path, view, total: int = 3) -> SweepProgress:
    return SweepProgress(tmp_path, "val_accuracy", "max", max_t=8, total=total, observers=[view])


def end(progress: SweepProgress, record: TrialRecord) -> None:
    progress._ended(record)  # as on_trial_complete/on_trial_error do, with a record made here


def test_piped_output_is_the_header_and_one_unwrapped_line_per_ended_trial(tmp_path):
    console, out = piped()
    view = LiveView(["sweep x: 4 trials", "experiment /tmp/x"], rungs=(1, 3), console=console)
    assert view.live_enabled is False  # a StringIO is no terminal
    progress = progress_with(tmp_path, view, total=4)
    long_config = {"lr": 0.012345678, "hidden": 128, "a_rather_long_parameter_name": "a rather long value " * 3}
    with view:
        end(progress, TrialRecord("aaa", "completed", long_config, {"val_accuracy": 0.91}, 8))
        end(progress, TrialRecord("bbb", "stopped", {"lr": 0.1}, {"val_accuracy": 0.2}, 1))
        end(progress, TrialRecord("ccc", "failed", {"lr": 9.0}, {}, 0, error="NonFiniteLoss: loss nan"))
        end(progress, TrialRecord("ddd", "failed", {"lr": 8.0}, {}, 0, error="NonFiniteLoss: loss nan"))
    lines = out.getvalue().splitlines()
    assert lines[:2] == ["sweep x: 4 trials", "experiment /tmp/x"]
    assert len(lines) == 6  # no line folded at the console's 80 columns, no table
    assert lines[2].startswith("[1/4] aaa completed 8/8 epochs  val_accuracy 0.91  best  ")
    assert "lr=0.01235" in lines[2] and "a rather long value a rather long value" in lines[2]
    assert lines[3].startswith("[2/4] bbb stopped   1/8 epochs  val_accuracy 0.2  lr=0.1")
    assert lines[4] == "[3/4] ccc failed    0/8 epochs  val_accuracy -  NonFiniteLoss: loss nan"
    assert lines[5] == "[4/4] ddd failed    0/8 epochs  val_accuracy -  the same error as ccc (2 trials so far)"


def test_the_live_table_shows_running_trials_with_their_rung_and_the_budget(tmp_path):
    console, out = piped()
    view = LiveView([], rungs=(1, 3), console=console, live=True)
    progress = progress_with(tmp_path, view)
    progress.trials["run"] = TrialRecord("run", "running", {"lr": 0.1}, {"val_accuracy": 0.7}, 4)
    end(progress, TrialRecord("done", "completed", {"lr": 0.2}, {"val_accuracy": 0.9}, 8))
    Console(file=out, width=120).print(view.table(progress))
    text = out.getvalue()
    row = next(line for line in text.splitlines() if line.startswith("run "))
    assert row.split() == ["run", "running", "4/8", "3", "0.7", "0.1"]  # rung 3 passed, rung 8 not yet
    assert "1/3 trials ended, 1 running" in text and "best val_accuracy 0.9 (done)" in text
