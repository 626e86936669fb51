"""A trial that runs a W&B sweep's ``program`` unchanged, as N ranks started the way ``torchrun`` starts
them (see :mod:`tune_service.programs`).

The trial's Tune actor holds a placement group of one bundle per rank (as a warm trial's,
:func:`~tune_service.execution.warm_trial.trial_resources`); one :class:`~tune_service.programs.rank.ProgramRank`
actor per bundle starts the program with the rank's environment. Every ``wandb.log`` of rank 0 becomes a
report (with ``step``, its count of logs, the scheduler's clock unless the spec names another) from the
first that holds the sweep's metric on; the values last logged are carried on in later reports, as a W&B
run's summary holds them. When the
scheduler stops the trial, or a rank's program fails, every rank's program gets SIGTERM, then SIGKILL
after ``STOP_GRACE_S``. A program that ends by itself leaves its last report as the trial's one
checkpoint: a resumed sweep reports it again rather than running the program again. A trial that was
interrupted runs its program again from the start, under the same wandb run id (W&B's resume).
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tune_service.errors import TuneServiceError
from tune_service.execution.gang import GangSettings
from tune_service.execution.sweep_trial import SweepTrial
from tune_service.execution.warm_trial import THREAD_TIMEOUT_ENV, THREAD_TIMEOUT_S
from tune_service.experiment.checkpoints import newest_checkpoint, trial_storage
from tune_service.experiment.layout import CHECKPOINT_REPORT_FILE
from tune_service.programs.command import expand, flat_parameters
from tune_service.results.sweep_result import PROGRAM_EXIT_KEY
from tune_service.spec.configs import plain

logger = logging.getLogger(__name__)

#: How long a stopped program gets between SIGTERM and SIGKILL.
STOP_GRACE_S = 10.0
#: How often the trial looks for new reports and ended programs.
POLL_S = 0.2
#: What ``${args_json_file}`` names, in the trial's ``program`` directory on every rank's node.
ARGS_JSON_FILE = "args.json"


class ProgramFailed(TuneServiceError):
    """A rank's program exited non-zero, or ended without ever logging the sweep's metric."""


class ProgramStalled(TuneServiceError):
    """The program logged nothing for ``limits.progress_s`` seconds."""


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

    def __call__(self, config: dict[str, Any]) -> None:
        import ray
        from ray import tune
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        from tune_service.programs.rank import ProgramRank
        from tune_service.tracking.naming import run_id, run_name

        storage_path, filesystem = trial_storage()
        ended = newest_checkpoint(storage_path, filesystem, with_state=False)
        if ended is not None and ended.report.get(PROGRAM_EXIT_KEY) == 0:
            tune.report(ended.report)  # its program had ended before the driver died: it is not run again
            return
        os.environ.setdefault(THREAD_TIMEOUT_ENV, THREAD_TIMEOUT_S)  # the programs' end may take STOP_GRACE_S
        params = plain(config)
        context = tune.get_context()
        trial_id = context.get_trial_id()
        work = Path(context.get_trial_dir()) / "program"  # the same path on every rank's node
        run = {**self.wandb_run, "id": run_id(self.experiment, trial_id), "resume": "allow",
               "name": run_name(None, trial_id, params, list(self.key_parameters))}
        argv = expand(self.command, self.program, params, work / ARGS_JSON_FILE)
        r = self.gang.resources
        group = ray.util.get_current_placement_group()
        ranks = []
        for rank in range(r.workers):
            options: dict[str, Any] = {"num_cpus": r.cpus_per_worker, "num_gpus": r.gpus_per_worker}
            if group is not None:
                options["scheduling_strategy"] = PlacementGroupSchedulingStrategy(
                    group, placement_group_bundle_index=rank)
            ranks.append(ray.remote(ProgramRank).options(**options).remote(rank, r.workers, STOP_GRACE_S))
        try:
            master = ray.get(ranks[0].address.remote())
            nodes = ray.get([rank.node.remote() for rank in ranks])
            starts = []
            for index, rank in enumerate(ranks):
                local = [i for i, n in enumerate(nodes) if n == nodes[index]]
                hook = {"params": params, "run": run if index == 0 else {**run, "mode": "disabled"}}
                files = {ARGS_JSON_FILE: json.dumps(flat_parameters(params))}
                starts.append(rank.start.remote(argv, self.directory, json.dumps(hook), files, str(work), master,
                                                local.index(index), len(local)))
            ray.get(starts)
            self._follow(ranks)
        finally:
            ray.get([rank.end.remote() for rank in ranks])
            for rank in ranks:
                ray.kill(rank)

    def _follow(self, ranks: list[Any]) -> None:
        """Relay rank 0's logs as reports until every program has ended; fail on a failed rank."""
        import ray
        from ray import tune

        read, last, reported, metric_seen = 0, time.monotonic(), {}, False
        while True:
            polled = ray.get([rank.poll.remote(read if i == 0 else 0) for i, rank in enumerate(ranks)])
            lines, _ = polled[0]
            for line in lines:
                reported.update(json.loads(line))
                metric_seen = metric_seen or self.metric in reported
                if metric_seen:  # Tune refuses a report without the sweep's metric: those before it wait
                    tune.report(dict(reported))  # raises when the scheduler stops the trial
            read += len(lines)
            if lines:
                last = time.monotonic()
            codes = [code for _, code in polled]
            failed = next((i for i, code in enumerate(codes) if code not in (None, 0)), None)
            if failed is not None:
                tail = ray.get(ranks[failed].output_tail.remote()).splitlines()
                raise ProgramFailed(f"rank {failed}'s program exited with code {codes[failed]}; its last output: "
                                    + (" | ".join(line.strip() for line in tail if line.strip()) or "(none)"))
            if all(code == 0 for code in codes):
                if not ray.get(ranks[0].poll.remote(read))[0]:  # nothing left to relay
                    break
                continue
            progress_s = self.gang.progress_s
            if progress_s is not None and time.monotonic() - last > progress_s:
                raise ProgramStalled(f"the program logged nothing for {progress_s:g} s (limits.progress_s)")
            time.sleep(POLL_S)
        if not metric_seen:
            logged = ", ".join(sorted(k for k in reported if k != "step")) or "nothing"
            raise ProgramFailed(f"the program ended without ever logging the sweep's metric {self.metric!r} "
                                f"with wandb.log; it logged: {logged}")
        # It ended by itself: completed, whatever its steps. The report travels with a checkpoint that holds
        # only itself, so that a resumed sweep knows the trial ended even if the driver died right now.
        final = {**reported, PROGRAM_EXIT_KEY: 0}
        with tempfile.TemporaryDirectory(prefix="tune_service_program_") as directory:
            Path(directory, CHECKPOINT_REPORT_FILE).write_text(json.dumps(final), encoding="utf-8")
            tune.report(final, checkpoint=tune.Checkpoint.from_directory(directory))
