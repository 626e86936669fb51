"""wandb: one run per trial, grouped by the sweep, and a summary run when the sweep ends.

The driver writes every run (a Tune callback): never the ranks, so a 4-rank trial is one run, logged
once. Run ids are derived from the experiment's name and the trial's id, so a resumed sweep or a
retried trial appends to its run instead of creating a second one.

All wandb calls happen on one background thread, in order. A slow init never holds up Tune's event
loop, and any wandb failure (a bad key, a full disk, an init timeout) becomes one warning for that run,
whose later calls are skipped: the sweep itself goes on. Nothing of ours passes the environment to
wandb, so an API key is never written into a config, summary or artifact.

Mode ``auto`` (the default): ``WANDB_MODE`` if set, else online with an API key (``WANDB_API_KEY`` or a
``wandb login`` in ``~/.netrc``), else offline: runs are written under ``EXPERIMENT/wandb/`` and
``wandb sync`` uploads them later. ``disabled`` creates no callback and imports nothing.
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Literal, Mapping, Sequence, cast

from ray.tune.integration.ray_train import CHECKPOINT_PATH_KEY  # set by the trial's relay of reports

from tune_service.experiment.callbacks import DriverCallback
from tune_service.redaction import redact, redact_text
from tune_service.results.lineage import exploit_of
from tune_service.results.progress import trial_error_line
from tune_service.results.sweep_result import is_number
from tune_service.spec.configs import flatten, plain
from tune_service.spec.wandb import WandbSettings, resolve_mode
from tune_service.tracking.artifacts import model_artifact
from tune_service.experiment.layout import trial_number
from tune_service.tracking.naming import SUMMARY_RUN, run_id, run_name, trial_metrics, trials_table
from tune_service.tracking.writer import OrderedWriter

log = logging.getLogger("tune_service.tracking")

#: How long the end of a sweep waits for wandb to write what is queued.
CLOSE_TIMEOUT_S = 120.0


def _is_better(value: float, best: float | None, mode: str) -> bool:
    if not math.isfinite(value):
        return False
    return best is None or (value < best if mode == "min" else value > best)


@dataclass
class _TrialRun:
    run_id: str
    run: Any = None
    last_time: int = 0
    best: float | None = None
    best_time: int | None = None
    described: bool = False  # the first result's settings (precision, world size) are in the config
    checkpoint_path: str | None = None  # the latest checkpoint reported with a result
    #: The epochs PBT's exploits sent the trial back, summed: its wandb step is its epoch plus these, so
    #: the step only grows though the trial goes on from a donor's earlier epoch.
    rewound: int = 0
    exploit: dict[str, Any] | None = None  # an exploit whose first report is yet to be logged


class WandbTracker(DriverCallback):
    """The Tune callback that mirrors a sweep into wandb (see the module's docstring).

    Args:
        settings: the spec's ``wandb`` block, with ``project`` and ``group`` filled in.
        mode: ``online`` or ``offline`` (resolved; ``disabled`` never builds a tracker).
        experiment: the experiment's name (run ids derive from it).
        experiment_dir: where offline runs are written (``experiment_dir/wandb``).
        metric, metric_mode, max_t: the sweep's metric, ``min``/``max``, and the epochs of a full trial
            (or its steps, when ``time_attr`` is ``step``).
        time_attr: the report key that counts a trial's progress (``epoch`` or ``step``): each run's
            wandb step, so a resumed trial continues its curve.
        trial_runs: whether the tracker writes each trial's run; a W&B program's trials write their own
            (:meth:`program_run` is what their ``wandb.init`` gets), and the tracker the sweep's summary.
        key_parameters: the searched parameters, named in run names.
        changing: the parameters PBT or its replay change mid-trial: each report also logs their values
            then (``hparams/<name>``, the schedule as a chart), and the first after an exploit the donor and
            its epoch (``exploit/donor``, ``exploit/epoch``); the run's config takes the new values.
        trial_config: what every trial's config also holds (resources, training settings).
    """

    def __init__(
        self,
        settings: WandbSettings,
        mode: str,
        *,
        experiment: str,
        experiment_dir: str | os.PathLike,
        metric: str,
        metric_mode: str,
        max_t: int,
        key_parameters: list[str],
        trial_config: Mapping[str, Any],
        time_attr: str = "epoch",
        trial_runs: bool = True,
        changing: Sequence[str] = (),
    ):
        super().__init__(f"{experiment}/wandb")
        self.settings, self.mode, self.experiment = settings, mode, experiment
        self.experiment_dir = Path(experiment_dir)
        self.metric, self.metric_mode, self.max_t, self.time_attr = metric, metric_mode, max_t, time_attr
        self.trial_runs, self.changing = trial_runs, list(changing)
        self.key_parameters, self.trial_config = list(key_parameters), dict(trial_config)
        self._runs: dict[str, _TrialRun] = {}
        self._writer = OrderedWriter()
        #: Each run's page, by run name (online runs only: an offline run has none until synced).
        self.urls: dict[str, str] = {}

    @property
    def runs_dir(self) -> Path:
        return self.experiment_dir / "wandb"

    # -- wandb calls, made on the writer thread -----------------------------------------------------

    def _init(self, run_id_: str, name: str, config: Mapping[str, Any], job_type: str, tags: tuple[str, ...]):
        import wandb

        self.runs_dir.mkdir(parents=True, exist_ok=True)
        s = self.settings
        run = wandb.init(
            project=s.project,
            entity=s.entity,
            group=s.group,
            job_type=job_type,
            tags=list(tags),
            name=redact_text(name),
            id=run_id_,
            resume="allow",
            config=redact(dict(config)),
            dir=str(self.experiment_dir),
            mode=cast(Literal["online", "offline", "disabled"], self.mode),  # resolve_mode's
            reinit="create_new",
            settings=wandb.Settings(
                silent=True,
                console="off",
                init_timeout=s.init_timeout,
                save_code=False,
                disable_git=True,
                x_disable_stats=True,
                # The environment's package list (requirements.txt) is the driver's, the same for every
                # run of the sweep: listing it costs ~0.08 s of the driver's CPU a run, so only the
                # sweep's summary run keeps it (10,000 trials would spend 15 minutes on it).
                x_save_requirements=job_type != "trial",
            ),
        )
        if self.mode == "online" and run.url:  # (wandb warns when an offline run is asked for its URL)
            self.urls[redact_text(name)] = run.url
        return run

    # -- Tune callback hooks (driver thread: they only queue work) ---------------------------------

    def program_run(self) -> dict[str, Any]:
        """What a W&B program's ``wandb.init`` is given (besides the trial's id and name): its run then
        is the trial's, in the sweep's project and group, where the tracker would have written it."""
        s = self.settings
        return {
            "project": s.project,
            "entity": s.entity,
            "group": s.group,
            "dir": str(self.experiment_dir),
            "mode": self.mode,
            "tags": list(s.tags),
            "job_type": "trial",
        }

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        trial_id = trial.trial_id
        if not self.trial_runs:
            return
        if trial_id in self._runs:  # restarted (after a failure, a pause, an exploit): the run is still open
            exploit = exploit_of(trial) if self.changing else None
            if exploit is not None and exploit["epoch"] is not None:
                state = self._runs[trial_id]
                state.rewound += state.last_time - exploit["epoch"]
                state.last_time, state.exploit = exploit["epoch"], exploit
            return
        state = self._runs[trial_id] = _TrialRun(run_id(self.experiment, trial_id))
        # A trial resumed from an earlier session: its run already holds the epochs Tune recorded, and
        # the best value so far is in Tune's restored analysis of the metric.
        state.last_time = int((trial.last_result or {}).get(self.time_attr, 0) or 0)
        state.best = (getattr(trial, "metric_analysis", {}) or {}).get(self.metric, {}).get(self.metric_mode)
        config = {**plain(dict(trial.config or {})), **self.trial_config, "trial_id": trial_id}
        name = run_name(trial_number(trial), trial_id, trial.config or {}, self.key_parameters)

        def start() -> None:
            state.run = self._init(state.run_id, name, config, "trial", self.settings.tags)

        self._writer.submit(state.run_id, "init", start)

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict, **info: Any) -> None:
        state = self._runs.get(trial.trial_id)
        if state is None:
            return
        metrics = trial_metrics(result)
        time = int(metrics.get(self.time_attr, result.get("training_iteration", state.last_time + 1)))
        if time <= state.last_time:  # a report made again after a resume: it is in the run already
            return
        state.last_time = time
        step = time + state.rewound
        exploit, state.exploit = state.exploit, None
        if self.changing:
            # The config the trial trained this report with (Tune's trainable adds it to each result): by
            # now the scheduler may have given the trial the next one, which takes effect when it restarts.
            trained_with = result.get("config") if isinstance(result.get("config"), dict) else trial.config
            config = flatten(plain(dict(trained_with or {})))
            metrics.update({f"hparams/{k}": config[k] for k in self.changing if is_number(config.get(k))})
            if exploit is not None:
                metrics.update({"exploit/donor": exploit["donor"], "exploit/epoch": exploit["epoch"]})
        state.checkpoint_path = _reported_checkpoint(trial, result) or state.checkpoint_path
        value = metrics.get(self.metric)
        if isinstance(value, (int, float)) and _is_better(float(value), state.best, self.metric_mode):
            state.best, state.best_time = float(value), time
        best, best_time = state.best, state.best_time
        settings = None
        if not state.described:  # what the trial chose at run time (precision auto -> bf16, ...)
            state.described = True
            settings = {
                k: result[k]
                for k in ("precision", "world_size", "global_batch", "batch_per_rank", "grad_accum_steps")
                if k in result
            }

        def write() -> None:
            if settings:
                state.run.config.update(settings, allow_val_change=True)
            if exploit is not None:
                state.run.config.update(redact(exploit["config"]), allow_val_change=True)
            # The epoch (or step) is wandb's, plus the epochs exploits went back: a resumed trial continues
            # its curve, and an exploited one goes on after the step it was at.
            state.run.log(metrics, step=step)
            if best is not None:
                state.run.summary[f"best_{self.metric}"] = best
                state.run.summary[f"best_{self.time_attr}"] = best_time

        self._writer.submit(state.run_id, "log", write)

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        state = self._runs.get(trial.trial_id)
        if state is not None:
            status = "completed" if state.last_time >= self.max_t else "stopped"
            self._finish(trial, state, status, None)

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        state = self._runs.get(trial.trial_id)
        if state is not None:
            self._finish(trial, state, "failed", trial_error_line(trial))

    def _finish(self, trial: Any, state: _TrialRun, status: str, error: str | None) -> None:
        checkpoint = state.checkpoint_path if self.settings.log_checkpoints else None
        trained, unit = state.last_time, f"{self.time_attr}s"
        del self._runs[trial.trial_id]

        def finish() -> None:
            run = state.run
            run.summary.update({"status": status, unit: trained, **({"error": error} if error else {})})
            if status == "stopped":
                run.tags = tuple(run.tags or ()) + ("stopped-early",)
            if checkpoint is not None:
                run.log_artifact(model_artifact(state.run_id, checkpoint, {self.time_attr: trained}, trial.trial_id))
            run.finish(exit_code=1 if status == "failed" else 0)  # failed runs show as failed in wandb

        self._writer.submit(state.run_id, "finish", finish)

    # -- the end of the sweep ----------------------------------------------------------------------

    def log_sweep(self, outcome: Any) -> None:
        """The sweep's summary run: a table of every trial (config, final metrics, status, epochs) and
        the best config (several objectives: the Pareto front's trials and configs), for
        parallel-coordinates and parameter-importance panels."""
        summary_id = run_id(self.experiment, SUMMARY_RUN)
        columns, rows = trials_table(outcome.trials)
        best = outcome.best
        counts = {s: sum(t.status == s for t in outcome.trials) for s in ("completed", "stopped", "failed")}
        config = {"metric": outcome.metric, "mode": outcome.mode, "trials": len(outcome.trials)}
        if outcome.multi_objective:
            config["objectives"] = [{"name": name, "mode": mode} for name, mode in outcome.objectives]
        front = {t.trial_id: redact(t.config) for t in outcome.pareto} if outcome.multi_objective else None

        def write() -> None:
            import wandb

            run = self._init(
                summary_id,
                f"{self.experiment} summary",
                config,
                "sweep-summary",
                (*self.settings.tags, "sweep-summary"),
            )
            run.log({"trials": wandb.Table(columns=list(columns), data=rows)})
            run.summary.update(
                {
                    "trial_counts": counts,
                    "best_trial_id": best.trial_id if best else None,
                    "best_config": redact(best.config) if best else None,
                }
            )
            if front is not None:
                run.summary["pareto_front"] = front
            elif outcome.metric is not None:
                run.summary[f"best_{outcome.metric}"] = best.metrics.get(outcome.metric) if best else None
            run.finish()

        self._writer.submit(summary_id, "sweep summary", write)

    def close(self, timeout: float = CLOSE_TIMEOUT_S) -> None:
        """Finish what is queued. Runs left open by an interrupted sweep end as ``interrupted``; a resumed
        sweep appends to them."""
        for trial_id, state in list(self._runs.items()):

            def finish(state: _TrialRun = state) -> None:
                state.run.summary.update({"status": "interrupted", f"{self.time_attr}s": state.last_time})
                state.run.finish()

            self._writer.submit(state.run_id, "finish", finish)
            del self._runs[trial_id]
        self.release()
        if not self._writer.close(timeout):
            log.warning("wandb: still writing after %.0f s; giving up on what is left", timeout)

    def describe(self) -> dict[str, Any]:
        """Where the runs went, for the sweep's summary (and the ``wandb sync`` hint when offline)."""
        s = self.settings
        return {
            "mode": self.mode,
            "project": s.project,
            "entity": s.entity,
            "group": s.group,
            "dir": str(self.runs_dir),
            "urls": dict(self.urls),
        }


def create_tracker(
    spec: Any, experiment: str, experiment_dir: str | os.PathLike, environ: Mapping[str, str] = os.environ
) -> WandbTracker | None:
    """The sweep's tracker, or ``None`` when wandb is disabled (then wandb is not even imported)."""
    mode = resolve_mode(spec.wandb.mode, environ)
    if mode == "disabled":
        return None
    settings = replace(spec.wandb, project=spec.wandb.project or spec.name, group=spec.wandb.group or experiment)
    trial_config = {"resources": spec.resources.as_spec(), "training": asdict(spec.training)}
    return WandbTracker(
        settings,
        mode,
        experiment=experiment,
        experiment_dir=experiment_dir,
        metric=spec.metric.name,
        metric_mode=spec.metric.mode,
        max_t=spec.scheduler.max_t,
        key_parameters=[p.name for p in spec.parameters if p.is_searched],
        trial_config=trial_config,
        time_attr=spec.scheduler.time_attr,
        trial_runs=not spec.runs_program,
        changing=changing_parameters(spec),
    )


def changing_parameters(spec: Any) -> list[str]:
    """The parameters whose values change during a trial: those PBT may mutate, or a replay's schedule
    names; none under any other scheduler."""
    if spec.scheduler.population:
        from tune_service.search.population import mutable_parameters

        return [p.name for p in mutable_parameters(spec)]
    if spec.scheduler.type == "pbt_replay":
        return list(dict.fromkeys(name for change in spec.scheduler.schedule for name in change["config"]))
    return []


def _reported_checkpoint(trial: Any, result: dict) -> str | None:
    """The checkpoint reported with ``result``: a fresh trial's relay names it (``CHECKPOINT_PATH_KEY``);
    a warm trial's is the Tune checkpoint directory the result names, in the trial's directory."""
    if result.get(CHECKPOINT_PATH_KEY):
        return result[CHECKPOINT_PATH_KEY]
    name, trial_path = result.get("checkpoint_dir_name"), getattr(trial, "path", None)
    return os.path.join(trial_path, name) if name and trial_path else None
