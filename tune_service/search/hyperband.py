"""Synchronous HyperBand for trials that start a few at a time, and its brackets rebuilt after a crash.

Ray's HyperBand schedulers assume every trial is added up front. Here the concurrency that fits the
cluster adds them a few at a time, and Ray's brackets then misbehave: a bracket counts as filled while
its *live* trials number its size, so once trials end, new ones refill the first bracket (every trial
goes to ``max_t``), and ``HyperBandScheduler`` halves a bracket as soon as the trials added so far
reach the rung (each is judged alone). :class:`WaitingHyperBand`:

- counts a bracket as filled once its planned number of trials has been added (ever);
- waits for the bracket to fill before halving it, pausing the trials that reach the rung first, as
  ``HyperBandForBOHB`` does; the searcher hears of each pause (``RunningCap`` counts paused trials
  out of the concurrency cap, so the rest of the bracket can start) and Ray halves a bracket that can
  no longer fill once no trial is left running;
- keeps the bracket order of the scheduler it stands for: HyperBand-for-BOHB the most aggressive
  bracket first, HyperBand the bracket without early stopping first;
- over several objectives, halves a bracket by Pareto order (:class:`ParetoBracket`), as MO-ASHA ranks
  a rung: the bracket keeps as many trials as with one objective, the first of the order.

Tune saves its searcher with the experiment but not its scheduler, and adds a restored experiment's
trials back newest first: a resumed sweep would get fresh brackets, filled in the wrong order, holding
trials that ended long ago. :class:`ResumedHyperBand` puts the restored trials back into the brackets
they were created into and replays the recorded results through each bracket's halvings, so that its
decisions after the resume are the ones it would have made without the crash.
"""

from __future__ import annotations

import sys
from typing import Any, Mapping, Sequence

from ray.tune.experiment import Trial
from ray.tune.schedulers import HyperBandForBOHB, HyperBandScheduler, TrialScheduler
from ray.tune.schedulers.hyperband import _Bracket

from tune_service.experiment.layout import TIME_ATTR
from tune_service.ray_internals import private
from tune_service.search.asha import non_finite
from tune_service.search.pareto import pareto_order

_ENDED = (Trial.TERMINATED, Trial.ERROR)


class FillOnceBracket(_Bracket):
    """A bracket that is filled once its planned number of trials has been added, whatever has ended."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.added = 0

    def add_trial(self, trial: Trial) -> None:
        super().add_trial(trial)
        self.added += 1

    def filled(self) -> bool:
        return self.added >= self._n0


class ParetoBracket(FillOnceBracket):
    """A bracket that halves by Pareto order over ``objectives`` (:func:`~tune_service.search.pareto.pareto_order`:
    non-dominated fronts, then crowding distance, then trial id), keeping as many trials as Ray's halving
    by one metric keeps. The order depends on the trials' values alone, not on the order they were added,
    so a bracket replayed after a crash (:func:`replay_bracket`) halves as it did."""

    def __init__(self, objectives: Sequence[tuple[str, str]], *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.objectives = tuple(objectives)

    def successive_halving(self, metric: str, metric_op: float) -> tuple[list[Trial], list[Trial]]:
        good, bad = super().successive_halving(metric, metric_op)  # Ray's bookkeeping and how many stay
        if not bad:
            return good, bad
        last_results = private(self, "_live_trials")  # Ray's record of each trial's last result
        live = sorted(last_results, key=lambda t: t.trial_id)
        values = [tuple(float(last_results[t][name]) for name, _ in self.objectives) for t in live]
        kept = {live[i] for i in pareto_order(values, [mode for _, mode in self.objectives])[: len(good)]}
        return [t for t in live if t in kept], [t for t in live if t not in kept]


class WaitingHyperBand(HyperBandForBOHB):
    """Synchronous HyperBand (``bohb``: HyperBand-for-BOHB) for trials added a few at a time; over several
    ``objectives`` (``(name, mode)`` each; Tune's metric is the first), its brackets halve by Pareto order."""

    def __init__(self, bohb: bool, objectives: Sequence[tuple[str, str]] = (), **hyperband_args: Any):
        if len(objectives) == 1 or any(mode not in ("min", "max") for _, mode in objectives):
            raise ValueError(f"HyperBand over objectives needs two or more, each min or max, got {objectives!r}")
        super().__init__(**hyperband_args)
        self.bohb = bohb
        self.objectives = tuple(objectives)

    @property
    def judged_metrics(self) -> tuple[str, ...]:
        """The metrics a result is judged by: every objective, or Tune's one metric."""
        return tuple(name for name, _ in self.objectives) or (str(self._metric),)

    def on_trial_add(self, tune_controller, trial: Trial) -> None:
        if self.bohb:
            super().on_trial_add(tune_controller, trial)
        else:
            HyperBandScheduler.on_trial_add(self, tune_controller, trial)

    def on_trial_result(self, tune_controller, trial: Trial, result: dict) -> str:
        if any(non_finite(result.get(name)) for name in self.judged_metrics):
            return TrialScheduler.STOP  # never in the bracket: Tune then removes the trial from it
        return super().on_trial_result(tune_controller, trial, result)

    def _process_bracket(self, tune_controller, bracket: _Bracket) -> str:
        paused = [t for t in bracket.current_trials() if t.status == Trial.PAUSED]
        action = super()._process_bracket(tune_controller, bracket)
        for trial in paused:
            if trial.status == Trial.TERMINATED:
                save_status(tune_controller, trial)
        return action

    def _create_bracket(self, s: int) -> FillOnceBracket:
        shape: dict[str, Any] = dict(
            time_attr=self._time_attr,
            max_trials=self._get_n0(s),
            init_t_attr=self._get_r0(s),
            max_t_attr=self._max_t_attr,
            eta=self._eta,
            s=s,
            stop_last_trials=self._stop_last_trials,
        )
        return ParetoBracket(self.objectives, **shape) if self.objectives else FillOnceBracket(**shape)


class ResumedHyperBand(WaitingHyperBand):
    """:class:`WaitingHyperBand` whose brackets are rebuilt from ``recorded``
    (:func:`tune_service.search.replay.read_recorded`) for the trials Tune adds back on a resume.

    Tune adds every restored trial before it asks the scheduler anything else. The trials are held
    until then, and then added in the order they were created (the counter that begins each trial's
    ``experiment_tag``), which puts each into the bracket it was created into; a new trial goes on
    filling the bracket the crash interrupted.
    """

    def __init__(self, recorded: Mapping[str, Any], bohb: bool, **hyperband_args: Any):
        super().__init__(bohb, **hyperband_args)  # objectives among them
        self._recorded = dict(recorded)
        self._held: list[Trial] | None = []  # None once the brackets are rebuilt

    def on_trial_add(self, tune_controller, trial: Trial) -> None:
        if self._held is None:
            super().on_trial_add(tune_controller, trial)
        else:
            self._held.append(trial)

    def choose_trial_to_run(self, tune_controller, allow_recurse: bool = True):
        self._rebuild(tune_controller)
        return super().choose_trial_to_run(tune_controller, allow_recurse)

    def on_trial_result(self, tune_controller, trial: Trial, result: dict) -> str:
        self._rebuild(tune_controller)
        return super().on_trial_result(tune_controller, trial, result)

    def on_trial_remove(self, tune_controller, trial: Trial) -> None:
        self._rebuild(tune_controller)
        super().on_trial_remove(tune_controller, trial)

    def _rebuild(self, tune_controller) -> None:
        if self._held is None:
            return
        held, self._held = sorted(self._held, key=creation_index), None
        for trial in held:
            super().on_trial_add(tune_controller, trial)
        brackets = {id(bracket): bracket for bracket, _ in self._trial_info.values()}
        for bracket in brackets.values():
            # set: Ray's HyperBand takes no trial before its metric and mode
            assert self._metric is not None and self._metric_op is not None
            replay_bracket(
                bracket,
                self._recorded,
                self._metric,
                self._metric_op,
                self._max_t_attr,
                self._time_attr,
                judged=self.judged_metrics,
            )
        # A trial halved out just before the crash, whose stop the saved state had not caught up with:
        # it would wait, pending, for a bracket that no longer holds it.
        for trial in held:
            bracket, _ = self._trial_info[trial]
            if trial.status not in _ENDED and trial not in bracket.current_trials():
                tune_controller.stop_trial(trial)
                save_status(tune_controller, trial)


def save_status(tune_controller, trial: Trial) -> None:
    """Have Tune save ``trial``'s status with the experiment's state. Tune does so by itself only when
    it stops a trial's actor: a trial stopped while paused or pending has none, so it would be saved
    as paused or pending, and be run again when the experiment is resumed."""
    private(tune_controller, "_mark_trial_to_checkpoint")(trial)


def creation_index(trial: Trial) -> int:
    """The order Tune created ``trial`` in: the counter its searcher put at the start of its tag."""
    counter = str(trial.experiment_tag or "").split("_", 1)[0]
    return int(counter) if counter.isdigit() else sys.maxsize


def replay_bracket(
    bracket: _Bracket,
    recorded: Mapping[str, Any],
    metric: str,
    metric_op: float,
    max_t: int,
    time_attr: str = TIME_ATTR,
    judged: Sequence[str] = (),
) -> None:
    """Bring ``bracket``, freshly filled with its restored trials, to the state it had when the driver died.
    ``judged``: the metrics a non-finite value of stops a trial (every objective; default ``metric``).

    Each halving the recorded results show to have happened is made again (the same trials compared at
    the same milestone: the result the bracket held of each when it halved), and the trials that had
    ended leave the bracket, as they did then. A trial that resumes is left holding its last result
    before its checkpoint: its results from the checkpoint on are delivered again.
    """
    results = {
        t: _finite_prefix(recorded[t.trial_id].results, tuple(judged) or (metric,)) if t.trial_id in recorded else ()
        for t in bracket.current_trials()
    }

    def at_milestone(trial: Trial) -> dict | None:
        return next((r for r in results[trial] if r.get(time_attr, 0) >= private(bracket, "_cumul_r")), None)

    while private(bracket, "_halves") > 0:
        reached = {t: at_milestone(t) for t in bracket.current_trials()}
        for trial, result in list(reached.items()):
            if result is None and trial.status in _ENDED:  # ended before the milestone: it left then
                bracket.cleanup_trial(trial)
                del reached[trial]
        if (
            not reached
            or None in reached.values()
            or not (bracket.filled() or _halved(bracket, results, max_t, time_attr))
        ):
            break  # the halving is still to come
        private(bracket, "_live_trials").update(reached)  # the bracket's record of each trial's last result
        _, stopped = bracket.successive_halving(metric, metric_op)
        for trial in stopped:
            bracket.cleanup_trial(trial)
    for trial in bracket.current_trials():
        if trial.status in _ENDED:
            bracket.cleanup_trial(trial)
        else:
            again = recorded[trial.trial_id].reported_once(resumes=True) if trial.trial_id in recorded else ()
            private(bracket, "_live_trials")[trial] = again[-1] if again else None


def _finite_prefix(results: tuple, metrics: Sequence[str]) -> tuple:
    """The results before the first non-finite value of any of ``metrics``, where its trial was stopped
    and left its bracket (:meth:`WaitingHyperBand.on_trial_result`)."""
    end = next((i for i, r in enumerate(results) if any(non_finite(r.get(m)) for m in metrics)), len(results))
    return tuple(results[:end])


def _halved(bracket: _Bracket, results: Mapping[Trial, tuple], max_t: int, time_attr: str) -> bool:
    """Whether a bracket that never filled was halved at its current milestone anyway (Ray halves it
    once no trial is left running): a trial went past the milestone, or one ended there."""
    milestone = private(bracket, "_cumul_r")
    for trial, reported in results.items():
        times = [r.get(time_attr, 0) for r in reported]
        if any(t > milestone for t in times):
            return True
        if trial.status == Trial.TERMINATED and times and times[-1] == milestone < max_t:
            return True
    return False
