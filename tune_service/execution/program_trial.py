"""A trial that runs a W&B sweep's ``program`` unchanged, as N ranks started the way ``torchrun`` starts
them (see :mod:`tune_service.programs`).

The trial's Tune actor holds a placement group of one bundle per rank (as a warm trial's,
:func:`~tune_service.execution.warm_trial.trial_resources`); one :class:`~tune_service.programs.rank.ProgramRank`
actor per bundle starts the program with the rank's environment. Every ``wandb.log`` of rank 0 becomes a
report (:class:`ReportRelay`: the scheduler's clock is the count of the metric's values, as W&B's
hyperband counts) from the first that holds the sweep's metric on (from the first, without a metric);
the values last logged are carried on in later reports, as a W&B run's summary holds them. When the
scheduler stops the trial, or a rank's program fails, every rank's program gets SIGTERM, then SIGKILL
after ``STOP_GRACE_S``. A program that ends by itself leaves its last report as the trial's one
checkpoint: a resumed sweep reports it again rather than running the program again. A trial that was
interrupted runs its program again from the start, under the same wandb run id (W&B's resume).
"""

from __future__ import annotations

import json
import logging
import math
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tune_service.errors import TuneServiceError
from tune_service.execution.gang import GangSettings
from tune_service.execution.resources import place_ranks
from tune_service.execution.sweep_trial import STOP_GRACE_S, Attempt, StallWatch, StartPoint, SweepTrial, TrialReports
from tune_service.experiment.checkpoints import newest_checkpoint, trial_storage
from tune_service.experiment.layout import CHECKPOINT_REPORT_FILE
from tune_service.programs.command import expand, flat_parameters
from tune_service.results.sweep_result import PROGRAM_EXIT_KEY
from tune_service.spec.sweep import METRIC_VALUES_KEY

logger = logging.getLogger(__name__)

#: How often the trial looks for new reports and ended programs.
POLL_S = 0.2
#: How long a program that raised gets to exit before its trial says it did not (and ends it).
EXIT_AFTER_RAISE_S = 3.0
#: What ``${args_json_file}`` names, in the trial's ``program`` directory on every rank's node.
ARGS_JSON_FILE = "args.json"


class ReportRelay:
    """Rank 0's ``wandb.log`` lines as the trial's reports. A report carries the values last logged (as a
    W&B run's summary holds them), W&B's ``step``, and the scheduler's clock: how many values of the
    sweep's metric have been logged (:data:`METRIC_VALUES_KEY`), non-finite ones left out, as W&B's
    hyperband counts a run's ``metric_history``. With a metric, the lines before its first value wait (Tune
    refuses a report without the sweep's metric); without one (``metric`` None), every line is a report."""

    def __init__(self, metric: str | None):
        self.metric = metric
        self.reported: dict[str, Any] = {}
        self.values = 0

    @property
    def metric_seen(self) -> bool:
        return self.values > 0

    def add(self, logged: dict[str, Any]) -> dict[str, Any] | None:
        """Take one logged line; the report to make now, or None (the metric not logged yet)."""
        self.reported.update(logged)
        value = logged.get(self.metric) if self.metric is not None else None
        if isinstance(value, (int, float)) and math.isfinite(value):
            self.values += 1
        if self.metric is not None and self.metric not in self.reported:
            return None
        return {**self.reported, METRIC_VALUES_KEY: self.values}


def _uri(path: str, filesystem: Any) -> str:
    """A path on a pyarrow filesystem as the user names it: a local path, or ``s3://...``."""
    kind = getattr(filesystem, "type_name", "local")
    return path if kind == "local" else f"{kind}://{path}"


def _output(tail: str, log_path: str) -> str:
    """What a failed or stalled program's error quotes: where its whole output is (``log_path``, in the
    experiment), then its last lines (an error is cut at 500 characters: the path comes first)."""
    lines = " | ".join(line.strip() for line in tail.splitlines() if line.strip()) or "(none)"
    return f"; its output: {log_path}; its last lines: {lines}"


class ProgramFailed(TuneServiceError):
    """A rank's program exited non-zero, or ended without ever logging the sweep's metric."""


@dataclass(frozen=True, kw_only=True)
class ProgramTrial(SweepTrial):
    """Runs ``program`` with ``command`` (W&B's, macros and all) from ``directory`` on every rank."""

    #: The ranks' resources (a warm gang's shape: one placement-group bundle per rank) and the progress limit.
    gang: GangSettings
    program: str
    command: tuple[str, ...] | None = None
    #: Where the program runs (the spec file's directory); None: the ranks' working directory.
    directory: str | None = None
    #: What the program's ``wandb.init`` is given besides the trial's id and name: project, entity,
    #: group, dir, mode, tags (mode ``disabled`` when the sweep has no wandb).
    wandb_run: dict[str, Any] = field(default_factory=lambda: {"mode": "disabled"})
    #: The experiment's name, from which the trial's wandb run id is made.
    experiment: str = ""
    key_parameters: tuple[str, ...] = ()

    def own_start(self, storage_path: str, filesystem: Any) -> StartPoint | None:
        """The report of a program that had ended by itself before the driver died (it is not run again);
        None otherwise: an interrupted program runs again from its start."""
        ended = newest_checkpoint(storage_path, filesystem, with_state=False)
        if ended is None or not self.ended(ended.report):
            return None
        return StartPoint(None, ended.report)

    def ended(self, report: dict[str, Any]) -> bool:
        return report.get(PROGRAM_EXIT_KEY) == 0

    def attempt(self, attempt: Attempt) -> None:
        import ray
        from ray import tune

        from tune_service.programs.rank import ProgramRank
        from tune_service.tracking.naming import run_id, run_name

        storage_path, filesystem = trial_storage()
        params = dict(attempt.config.hparams)
        trial_id = tune.get_context().get_trial_id()
        work = Path(attempt.trial_dir) / "program"  # the same path on every rank's node
        run = {
            **self.wandb_run,
            "id": run_id(self.experiment, trial_id),
            "resume": "allow",
            "name": run_name(None, trial_id, params, list(self.key_parameters)),
        }
        argv = expand(self.command, self.program, params, work / ARGS_JSON_FILE)
        r = self.gang.resources
        ranks = place_ranks(
            ProgramRank, r, ray.util.get_current_placement_group(), lambda rank: (rank, r.workers, STOP_GRACE_S)
        )
        try:
            master = ray.get(ranks[0].address.remote())
            nodes = ray.get([rank.node.remote() for rank in ranks])
            starts = []
            for index, rank in enumerate(ranks):
                local = [i for i, n in enumerate(nodes) if n == nodes[index]]
                # another rank's run is a stand-in that logs nothing, in a directory of its own
                stand_in = {**run, "mode": "disabled", "dir": str(work / f"rank_{index}_wandb")}
                hook = {"params": params, "run": run if index == 0 else stand_in}
                files = {ARGS_JSON_FILE: json.dumps(flat_parameters(params))}
                starts.append(
                    rank.start.remote(
                        argv, self.directory, json.dumps(hook), files, str(work), master, local.index(index), len(local)
                    )
                )
            ray.get(starts)
            self._follow(ranks, _uri(storage_path, filesystem) + "/program", attempt.reports)
        finally:
            ray.get([rank.end.remote() for rank in ranks])
            for rank in ranks:
                ray.kill(rank)

    def _follow(self, ranks: list[Any], logs: str, reports: TrialReports) -> None:
        """Relay rank 0's logs as reports until every program has ended; fail on a failed rank, naming
        its output's file under ``logs`` (the trial's ``program`` directory in the experiment)."""
        import ray

        relay = ReportRelay(self.metric)
        watch = StallWatch(self.gang.progress_s)
        read = 0
        while True:
            polled = ray.get([rank.poll.remote(read if i == 0 else 0) for i, rank in enumerate(ranks)])
            lines = polled[0][0]
            for line in lines:
                report = relay.add(json.loads(line))
                if report is not None:
                    reports(report)  # raises when the scheduler stops the trial
            read += len(lines)
            if lines:
                watch.progressed()
            codes = [code for _, code, _ in polled]
            failed = next((i for i, (_, code, raised) in enumerate(polled) if code not in (None, 0) or raised), None)
            if failed is not None:
                _, code, raised = polled[failed]
                deadline = time.monotonic() + EXIT_AFTER_RAISE_S
                while code is None and time.monotonic() < deadline:  # it is likely exiting now
                    time.sleep(POLL_S)
                    code = ray.get(ranks[failed].poll.remote(0))[1]
                how = f"exited with code {code}" if code is not None else "did not exit after it (it was ended)"
                what = f"raised {raised} and {how}" if raised else how
                raise ProgramFailed(
                    f"rank {failed}'s program {what}"
                    + _output(ray.get(ranks[failed].output_tail.remote()), f"{logs}/rank_{failed}.log")
                )
            if all(code == 0 for code in codes):
                if not ray.get(ranks[0].poll.remote(read))[0]:  # nothing left to relay
                    break
                continue
            if watch.stalled():
                raise watch.error(
                    "the program logged nothing", _output(ray.get(ranks[0].output_tail.remote()), f"{logs}/rank_0.log")
                )
            time.sleep(POLL_S)
        reported = relay.reported
        if self.metric is not None and not relay.metric_seen:
            logged = ", ".join(sorted(k for k in reported if k != "step")) or "nothing"
            raise ProgramFailed(
                f"the program ended without ever logging the sweep's metric {self.metric!r} "
                f"with wandb.log; it logged: {logged}"
            )
        # It ended by itself: completed, whatever its steps. The report travels with a checkpoint that holds
        # only itself, so that a resumed sweep knows the trial ended even if the driver died right now.
        final = {**reported, METRIC_VALUES_KEY: relay.values, PROGRAM_EXIT_KEY: 0}
        with tempfile.TemporaryDirectory(prefix="tune_service_program_") as directory:
            Path(directory, CHECKPOINT_REPORT_FILE).write_text(json.dumps(final), encoding="utf-8")
            reports(final, directory)
