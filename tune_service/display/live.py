"""What a sweep prints while it runs: a header with the plan, a line for each trial that ends, and on a
terminal a live table of the running trials with a progress bar over the trial budget, redrawn in
place. Piped or in CI it prints the lines only, so a 10-trial sweep is a dozen lines, not hundreds.

:class:`LiveView` is a :class:`~tune_service.results.progress.ProgressObserver`: it needs no Ray and
is tested on records alone. The leaderboard after the run is the CLI's.
"""

from __future__ import annotations

import time
from typing import Any, Sequence

from rich.console import Console, Group
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from tune_service.results.progress import SweepProgress
from tune_service.results.sweep_result import TrialRecord, format_value
from tune_service.spec.sweep import PROGRAM_MAX_T

#: The fastest the live table is redrawn.
REDRAW_PERIOD_S = 0.25
#: Trials that ended, shown under the running ones in the live table.
RECENT = 3
STATUS_STYLE = {"completed": "green", "stopped": "yellow", "failed": "red", "running": "cyan"}


class LiveView:
    """Prints the sweep's progress to ``console`` (standard output by default).

    Args:
        header: the lines printed first (the plan's headline, where the experiment is written).
        rungs: the epochs at which the scheduler may stop trials, to show each running trial's rung.
        live: redraw a table in place; by default only when the console is a terminal.
    """

    def __init__(
        self, header: Sequence[str], rungs: Sequence[int] = (), console: Console | None = None, live: bool | None = None
    ):
        self.console = console or Console(highlight=False)
        self.header, self.rungs = list(header), tuple(rungs)
        self.live_enabled = self.console.is_terminal if live is None else live
        self._live: Live | None = None
        self._drawn_at = 0.0
        self._errors: dict[str | None, tuple[str, int]] = {}  # each error: its first trial, how many had it

    def __enter__(self) -> "LiveView":
        for line in self.header:
            self._print(line)
        if self.live_enabled:
            self._live = Live(Text(""), console=self.console, auto_refresh=False, transient=True)
            self._live.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    # -- ProgressObserver ----------------------------------------------------------------------------
    def trial_started(self, progress: SweepProgress, trial: TrialRecord) -> None:
        self._redraw(progress, force=True)

    def trial_reported(self, progress: SweepProgress, trial: TrialRecord) -> None:
        self._redraw(progress)

    def trial_ended(self, progress: SweepProgress, trial: TrialRecord) -> None:
        self._print(self.outcome_line(progress, trial))
        self._redraw(progress, force=True)

    def tick(self, progress: SweepProgress) -> None:
        self._redraw(progress)

    # -- what is shown -------------------------------------------------------------------------------
    def outcome_line(self, progress: SweepProgress, trial: TrialRecord) -> str:
        """``[ 3/10] 07d42480 completed  8/8 epochs  val_accuracy 0.9889  best  lr=0.02573 hidden=128``."""
        done = progress.ended_count
        width = len(str(progress.total))
        best = progress.best
        mark = "  best" if best is not None and best.trial_id == trial.trial_id else ""
        shown = "".join(f"  {name} {format_value(trial.metrics.get(name))}" for name in _shown_metrics(progress))
        shown += mark
        line = (
            f"[{done:>{width}}/{progress.total}] {trial.trial_id} {trial.status:<9} "
            f"{trial.progress(progress.time_unit)}{_budget(progress)} {progress.time_unit}s{shown}"
        )
        if trial.status == "failed":
            first, count = self._errors.get(trial.error, (trial.trial_id, 0))
            self._errors[trial.error] = (first, count + 1)
            if count:  # a failure seen before: said once, then counted
                return f"{line}  the same error as {first} ({count + 1} trials so far)"
            return f"{line}  {trial.error}"
        return f"{line}  {_config_text(trial.config)}"

    def table(self, progress: SweepProgress):
        """The live region: running trials, the last few that ended, and the budget's progress bar."""
        table = Table(box=None, pad_edge=False, header_style="bold")
        shown = progress.running + list(progress.recently_ended)[-RECENT:]
        keys = sorted({k for t in shown for k in t.config})
        metric = _shown_metrics(progress)
        for column in ("trial", "status", progress.time_unit, "rung", *metric, *keys):
            table.add_column(column)
        for t in shown:
            trained = t.progress(progress.time_unit)
            table.add_row(
                t.trial_id,
                Text(t.status, style=STATUS_STYLE.get(t.status, "")),
                f"{trained}{_budget(progress)}",
                self._rung(trained),
                *(format_value(t.metrics.get(m)) for m in metric),
                *(format_value(t.config.get(k)) for k in keys),
            )
        done = progress.ended_count
        best = progress.best
        elapsed = time.monotonic() - progress.started_at
        status = f" {done}/{progress.total} trials ended, {len(progress.running)} running, {elapsed:.0f} s" + (
            f"; best {progress.metric} {format_value(best.metrics.get(progress.metric))} ({best.trial_id})"
            if best and progress.metric is not None  # no best without a metric
            else ""
        )
        bar = ProgressBar(total=max(progress.total, 1), completed=done, width=30)
        line = Table.grid()
        line.add_row(bar, Text(status))
        return Group(table, line)

    def _rung(self, trained: int) -> str:
        passed = [r for r in self.rungs if r <= trained]
        return str(passed[-1]) if passed else "-"

    def _redraw(self, progress: SweepProgress, force: bool = False) -> None:
        if self._live is None:
            return
        now = time.monotonic()
        if force or now - self._drawn_at >= REDRAW_PERIOD_S:
            self._live.update(self.table(progress), refresh=True)
            self._drawn_at = now

    def _print(self, line: str) -> None:
        # soft_wrap: a long line stays one line when piped (rich would fold it at 80 columns).
        self.console.print(line, soft_wrap=True, markup=False, highlight=False)


def _config_text(config: dict[str, Any]) -> str:
    return " ".join(f"{k}={format_value(v)}" for k, v in sorted(config.items()))


def _budget(progress: SweepProgress) -> str:
    """``/max_t`` after a trial's progress; nothing for a program that decides its own length."""
    return "" if progress.max_t >= PROGRAM_MAX_T else f"/{progress.max_t}"


def _shown_metrics(progress: SweepProgress) -> list[str]:
    """The metrics a trial's line and row show: the sweep's objectives (its one metric; none without)."""
    if progress.objectives:
        return [name for name, _ in progress.objectives]
    return [progress.metric] if progress.metric is not None else []
