"""Ended trials leave Tune's controller, so the driver's memory does not grow with the sweep's history.

Ray Tune keeps every trial it ever ran in its controller: the Trial object, its cached JSON state for the
experiment's state file, and the per-trial maps of its loggers and console reporter
(ray-project/ray#64231, by design). A sweep of ten thousand trials holds ten thousand of them.
The service already keeps what a trial that ended needs elsewhere: its record in ``ended_trials.jsonl``
(:mod:`~tune_service.results.progress`), its reports in its ``result.json`` (from which a resumed ASHA
replays its rungs, :mod:`~tune_service.search.replay`) and the searcher's own state. So after each step of
Tune's loop, :class:`RetiredTrials` lets go of every trial that has ended for good (``TERMINATED`` or
``ERROR``; its actor stopped, or reused by a later trial) and whose record the progress has saved:

- the final results read it back from ``ended_trials.jsonl`` (:meth:`SweepProgress.final`);
- Tune's saved experiment state no longer lists it, so a resume restores only the trials still to run
  (and the last trial, which stays while no other is in the controller: Tune's restore needs one);
  the searcher's state and the replayed rungs carry the ended ones;
- its directory leaves the driver's staging copy of the experiment for storage
  (:mod:`~tune_service.experiment.staging`), so Tune's saves no longer copy it each time.

A resumed sweep's first step is preceded by :meth:`RetiredTrials.stop_restored_ended`: Tune's state lags
behind the service's records, and a trial it restores unfinished may have ended before the driver died.

Only where nothing in Tune's loop needs an ended trial again: under FIFO and ASHA (:func:`retires`).
HyperBand's brackets and a population's exploits (PBT, PB2) read ended trials through Tune, and keep them.

It replaces ``TuneController.step`` while the sweep runs (:func:`retiring`), through
:mod:`tune_service.ray_internals`, as does every private name it clears.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Callable, Iterator

from tune_service.experiment.callbacks import DriverCallback, FinalStatuses
from tune_service.experiment.staging import StagedTrialDirs
from tune_service.ray_internals import private, replaced

if TYPE_CHECKING:
    from tune_service.results.progress import SweepProgress
    from tune_service.spec.sweep import SweepSpec

#: Per Tune callback class (module, name), the per-trial maps and sets it keeps until the experiment ends.
_CALLBACK_MAPS = {
    ("ray.tune.progress_reporter", "TrialProgressCallback"): (
        "_last_print",
        "_last_print_iteration",
        "_completed_trials",
        "_last_result_str",
    ),
    ("ray.tune.logger.json", "JsonLoggerCallback"): ("_trial_configs",),
    ("ray.tune.logger.csv", "CSVLoggerCallback"): ("_trial_continue",),
}
#: The controller's sets that hold an ended trial (besides its list of trials and its maps to actors).
_CONTROLLER_SETS = ("_trials_to_cache", "_stopped_trials", "_failed_trials")


def retires(spec: SweepSpec) -> bool:
    """Whether the sweep's ended trials may leave Tune's controller: nothing in its scheduler reads an
    ended trial through Tune again (FIFO and ASHA, whose rungs a resume replays from the trials' own files)."""
    return spec.scheduler.type in ("fifo", "asha")


class RetiredTrials(DriverCallback):
    """After each step of Tune's loop, the trials that have ended and whose record ``progress`` has saved
    leave the controller; ``statuses`` is told how many left its list. ``uploaded``: whether the saved
    records are where a resume reads them too (a remote experiment's log in its bucket; until then the
    trials stay). ``retired``: how many have left. ``staged``: their directories in the driver's staging
    copy of the experiment, which move into storage as they leave."""

    def __init__(
        self,
        experiment: str,
        progress: SweepProgress,
        statuses: FinalStatuses,
        uploaded: Callable[[], bool] = lambda: True,
    ):
        super().__init__(f"{experiment}/retired")
        self.progress, self.statuses, self.uploaded = progress, statuses, uploaded
        self.retired = 0
        self.staged = StagedTrialDirs()
        self._restored_checked = False
        #: Trials Tune restored ended that the service's records lack: they stay in Tune (see below).
        self._restored_unrecorded: frozenset[str] = frozenset()

    def stop_restored_ended(self, controller: Any) -> None:
        """Once, before a resumed sweep's first step: the trials that Tune restored unfinished (its state
        was saved before they ended and the driver was killed) but that the service's records have ended
        are stopped before they start again (Tune's ``stop_trial``); the searcher hears what they reported
        (:class:`~tune_service.search.continued.ContinuedSearch`), ASHA replayed them whole.

        The converse: a trial Tune restored ended whose line the resume did not read (the log in a bucket
        lags the trials' files) is never retired, so Tune's final results, and the summary, hold it."""
        if self._restored_checked:
            return
        self._restored_checked = True
        trials: list[Any] = private(controller, "_trials")
        for trial in list(trials):
            if trial.status == trial.PENDING and self.progress.ended_before(trial.trial_id):
                controller.stop_trial(trial)
        self._restored_unrecorded = frozenset(
            t.trial_id
            for t in trials
            if t.status in (t.TERMINATED, t.ERROR) and not self.progress.ended_before(t.trial_id)
        )

    def retire(self, controller: Any) -> None:
        """Let go of ``controller``'s ended trials (after its step, whose callbacks have seen them)."""
        if not self.uploaded():
            return
        trials: list[Any] = private(controller, "_trials")
        actor_of, trial_of = private(controller, "_trial_to_actor"), private(controller, "_actor_to_trial")
        ended = [
            t
            for t in trials
            if _ended(t, actor_of, trial_of)
            and self.progress.saved(t.trial_id)
            and t.trial_id not in self._restored_unrecorded
        ]
        if len(ended) == len(trials):
            # Tune's restore needs a trial in its saved state (it takes the driver's staging directory from
            # the first): the last one stays until another comes
            ended = ended[:-1]
        if not ended:
            return
        gone = set(ended)
        trials[:] = [t for t in trials if t not in gone]  # in place: Tune and the callbacks share the list
        metadata: dict[str, str] = private(controller, "_trial_metadata")
        for name in _CONTROLLER_SETS:
            private(controller, name).difference_update(gone)
        callbacks = private(private(controller, "_callbacks"), "_callbacks")
        for trial in ended:
            # Tune leaves a trial whose actor it reused for the next trial mapped to that actor
            actor_of.pop(trial, None)
            metadata.pop(trial.trial_id, None)
            for callback in callbacks:
                _forget_in_callback(callback, trial)
        self.statuses.left(len(ended))
        self.retired += len(ended)
        self.staged.retired(ended)


def _ended(trial: Any, actor_of: dict[Any, Any], trial_of: dict[Any, Any]) -> bool:
    """Whether ``trial`` has ended for good and Tune no longer needs it: its actor, if Tune cached it for
    reuse (``actor_of``, ``trial_of``: the controller's maps between trials and their actors), has gone on
    to another trial or been let go of (until then Tune stops it through the trial)."""
    from ray.tune.experiment import Trial

    if trial.status not in (Trial.TERMINATED, Trial.ERROR):
        return False
    actor = actor_of.get(trial)
    return actor is None or trial_of.get(actor) is not trial


def _forget_in_callback(callback: Any, trial: Any) -> None:
    forget = getattr(callback, "forget_trial", None)  # ours (experiment.trial_logs) say what they keep
    if forget is not None:
        forget(trial)
    for (module, name), kept in _CALLBACK_MAPS.items():
        if any(k.__module__ == module and k.__name__ == name for k in type(callback).__mro__):
            for attribute in kept:
                held = private(callback, attribute)
                if isinstance(held, dict):
                    held.pop(trial, None)
                else:
                    held.discard(trial)


@contextlib.contextmanager
def retiring() -> Iterator[None]:
    """While the block runs, each step of a Tune controller that has a :class:`RetiredTrials` among its
    callbacks ends with its :meth:`~RetiredTrials.retire` (other controllers' steps are Tune's own)."""
    from ray.tune.execution.tune_controller import TuneController

    def stepping(step: Callable[[Any], None]) -> Callable[[Any], None]:
        def step_and_retire(controller: Any) -> None:
            retired = [
                c for c in private(private(controller, "_callbacks"), "_callbacks") if isinstance(c, RetiredTrials)
            ]
            for callback in retired:
                callback.stop_restored_ended(controller)
            step(controller)
            for callback in retired:
                callback.retire(controller)

        return step_and_retire

    with replaced(TuneController, "step", stepping):
        yield
