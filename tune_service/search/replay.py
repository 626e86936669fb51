"""What a sweep's trials reported, read back for a sweep resumed after its driver died.

Ray Tune saves its searcher with the experiment but not its scheduler: a restored Tuner starts ASHA with
empty rungs, so after a resume every trial reaching a rung would be judged against the results since
the resume alone (the first to arrive never stopped). :func:`read_recorded` reads what each trial
reported from its ``result.json`` in the experiment directory; ASHA
(:class:`tune_service.search.asha.PromotingASHA`) and HyperBand (:mod:`tune_service.search.hyperband`)
replay it as Tune adds the trials back, so that their decisions after the resume are the ones they would
have made without the crash.

A resumed trial reports again from its latest checkpoint on (the checkpoint's report is delivered again,
the epochs after it are trained again): those results are left out of the replay, so none counts twice.
Results reported within Tune's last state-save period before the driver died may be missing from
``result.json`` (see :mod:`tune_service.experiment.last_good`); the replay then lacks them too.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Collection

from tune_service.experiment.checkpoints import checkpointed_report
from tune_service.experiment.layout import TIME_ATTR, read_trial_results, trial_results_files


@dataclass(frozen=True)
class RecordedTrial:
    """What one trial reported before the driver stopped, and the time (epoch or step, the scheduler's
    ``time_attr``) of its latest checkpoint."""

    results: tuple[dict[str, Any], ...]
    checkpoint_time: float = 0  # 0: no checkpoint, a resumed attempt starts from the beginning
    time_attr: str = TIME_ATTR
    #: The trial had ended by the service's records: Tune may not add it back (its controller let it go).
    ended: bool = False

    def reported_once(self, resumes: bool) -> tuple[dict[str, Any], ...]:
        """The results the scheduler saw and will not see again: all of a trial that ended; of a trial
        that resumes, those before its checkpoint's time."""
        if not resumes:
            return self.results
        return tuple(r for r in self.results if r.get(self.time_attr, 0) < self.checkpoint_time)


def read_recorded(
    experiment_dir: Path,
    storage: tuple[Any, str] | None = None,
    time_attr: str = TIME_ATTR,
    ended: Collection[str] = frozenset(),
) -> dict[str, RecordedTrial]:
    """Every trial's recorded results in ``experiment_dir``, by trial id. A line cut off by the crash
    (the last one of a file) is skipped. ``storage``: the experiment's (pyarrow filesystem, path) where
    the trials' checkpoints are, when not in ``experiment_dir`` (remote storage, whose local mirror has none);
    ``time_attr``: the report key the scheduler counts (``epoch`` or ``step``); ``ended``: the ids of the
    trials that had ended by the service's records (:attr:`RecordedTrial.ended`)."""
    recorded = {}
    for result_file in trial_results_files(experiment_dir):
        results = tuple(read_trial_results(result_file))
        if not results or "trial_id" not in results[0]:
            continue
        trial = result_file.parent
        stored = (f"{storage[1]}/{trial.name}", storage[0]) if storage else (str(trial),)
        checkpoint = checkpointed_report(*stored) or {}
        trial_id = results[0]["trial_id"]
        recorded[trial_id] = RecordedTrial(results, checkpoint.get(time_attr, 0), time_attr, trial_id in ended)
    return recorded
