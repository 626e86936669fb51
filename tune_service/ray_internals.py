"""Every private name of Ray that tune-service relies on, in one place, with why.

Ray's public API does not cover a few things the service must do (rebuild a scheduler's brackets after
a crash, start an embedded Ray on loopback with token auth, start trial actors on Ray's ready workers,
let ended trials leave Tune's controller).
Each private name those need is listed in :data:`INTERNALS`; ``tests/unit/test_ray_internals.py``
checks every one against the installed Ray and fails naming it when Ray changes. Code that uses one
at run time goes through :func:`private` (an attribute that must be there), never ``getattr`` with a
default: a changed Ray is an error that says what changed, not a silent fallback.

Besides names, one log message: Tune's error when its copy of the experiment's state into storage fails
(logger ``ray.tune.execution.experiment_state``, ``Saving experiment state to storage at ...``), which
:class:`tune_service.experiment.saving.TuneStateSaveErrors` says once as a warning instead;
``tests/unit/execution/test_saving.py`` fails when Ray's text or logger changes.

The supported Ray versions are ``pyproject.toml``'s range; a new Ray is taken into it once this
module's test and the suite pass on it.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterator


@dataclass(frozen=True)
class Internal:
    """A private name: ``owner`` (an importable module, or ``module:Class``), the ``name`` on it, and
    whether it is set on instances (``instance``: checked in the class's source) rather than defined on
    the class or module."""

    owner: str
    name: str
    used_in: str
    why: str
    instance: bool = False

    def __str__(self) -> str:
        return f"{self.owner}.{self.name}"


_HYPERBAND = "ray.tune.schedulers.hyperband:HyperBandScheduler"
_BRACKET = "ray.tune.schedulers.hyperband:_Bracket"
_BRACKET_WHY = "ResumedHyperBand replays a restored bracket's halvings"
_STATE_SAVES = "ray.tune.execution.experiment_state:_ExperimentCheckpointManager"
_CONTROLLER = "ray.tune.execution.tune_controller:TuneController"
_RETIRING_WHY = "an ended trial's entry is removed once the service's own records hold the trial"

INTERNALS: tuple[Internal, ...] = (
    # Schedulers: our HyperBand subclasses, and their rebuild after a crash.
    Internal(
        _HYPERBAND,
        "_process_bracket",
        "search.hyperband",
        "WaitingHyperBand saves the statuses of the paused trials a halving stops",
    ),
    *(
        Internal(
            _HYPERBAND, name, "search.hyperband", "the scheduler's settings, for the brackets it makes", instance=True
        )
        for name in (
            "_get_n0",
            "_get_r0",
            "_time_attr",
            "_max_t_attr",
            "_eta",
            "_stop_last_trials",
            "_metric",
            "_metric_op",
        )
    ),
    Internal(_HYPERBAND, "_trial_info", "search.hyperband", "the bracket each restored trial is in", instance=True),
    Internal("ray.tune.schedulers.hyperband", "_Bracket", "search.hyperband", "FillOnceBracket subclasses it"),
    *(
        Internal(_BRACKET, name, "search.hyperband", _BRACKET_WHY, instance=True)
        for name in ("_n0", "_cumul_r", "_halves", "_live_trials")
    ),
    Internal(
        _CONTROLLER,
        "_mark_trial_to_checkpoint",
        "search.hyperband",
        "a trial stopped while paused is saved as stopped (Tune saves only trials whose actor it stops)",
    ),
    # Tuner.restore keeps the pickled scheduler and searcher; the resumed ones must be ours.
    Internal(
        "ray.tune.tuner:Tuner",
        "_local_tuner",
        "execution.driver",
        "a restored Tuner's scheduler is set "
        "to the one rebuilt from the recorded results, and its searcher to one that may go on past the "
        "run_cap it began with (Ray 2.60 has no public setter)",
        instance=True,
    ),
    Internal(
        "ray.tune.impl.tuner_internal:TunerInternal", "_tune_config", "execution.driver", "as above", instance=True
    ),
    # Tune's trial actor classes, registered without a runtime environment of their own.
    *(
        Internal(
            "ray.tune.execution.class_cache",
            name,
            "execution.trial_actors",
            "what Tune would give a trial actor's environment",
        )
        for name in ("DEFAULT_ENV_VARS", "ENV_VARS_TO_PROPAGATE")
    ),
    Internal(
        "ray.tune.execution.class_cache",
        "_ActorClassCache",
        "execution.trial_actors",
        "its registration "
        "of a warm trial's actor class is replaced while the sweep runs, so the actor starts on a Python "
        "worker Ray started ahead of demand",
    ),
    Internal("ray.tune.execution.class_cache:_ActorClassCache", "get", "execution.trial_actors", "as above"),
    Internal(
        "ray.tune.execution.class_cache:_ActorClassCache", "_cache", "execution.trial_actors", "as above", instance=True
    ),
    # Tune's per-trial result files, kept whole when a trial starts again.
    Internal(
        "ray.tune.logger.logger:LoggerCallback",
        "_restore_from_remote",
        "experiment.trial_logs",
        "a trial's result.json and progress.csv are copied from storage once per trial and driver run, not "
        "over the driver's newer copy at every restart (a pause, a PBT exploit)",
    ),
    # Tune's saves of the experiment's state: on their period, never forced by trial checkpoints.
    Internal(
        "ray.tune.execution.experiment_state",
        "_ExperimentCheckpointManager",
        "experiment.state_saves",
        "its forcing of a save every num_to_keep checkpoints of a trial is switched off, and its period "
        "keeps the saves to a share of the driver's time, while a sweep runs",
    ),
    *(
        Internal(_STATE_SAVES, name, "experiment.state_saves", "as above", instance=instance)
        for name, instance in (
            ("on_trial_checkpoint", False),
            ("_update_auto_checkpoint_time", False),
            ("_checkpoint_period", True),
        )
    ),
    # Ended trials leave Tune's controller (execution.retiring): the driver does not grow with the history.
    Internal(
        _CONTROLLER,
        "step",
        "execution.retiring",
        "each step of Tune's loop ends with the ended trials let go of (public, but replaced while a sweep runs)",
    ),
    *(
        Internal(_CONTROLLER, name, "execution.retiring", _RETIRING_WHY, instance=True)
        for name in (
            "_trials",
            "_trial_metadata",
            "_trials_to_cache",
            "_stopped_trials",
            "_failed_trials",
            "_callbacks",
            "_trial_to_actor",
            "_actor_to_trial",
        )
    ),
    Internal("ray.tune.callback:CallbackList", "_callbacks", "execution.retiring", _RETIRING_WHY, instance=True),
    *(
        Internal("ray.tune.progress_reporter:TrialProgressCallback", name, "execution.retiring", _RETIRING_WHY, True)
        for name in ("_last_print", "_last_print_iteration", "_completed_trials", "_last_result_str")
    ),
    Internal("ray.tune.logger.json:JsonLoggerCallback", "_trial_configs", "execution.retiring", _RETIRING_WHY, True),
    Internal("ray.tune.logger.csv:CSVLoggerCallback", "_trial_continue", "execution.retiring", _RETIRING_WHY, True),
    # Population-based training: a resumed population goes on from its journal (search.population).
    Internal(
        "ray.tune.schedulers.pbt:PopulationBasedTraining",
        "_trial_state",
        "search.population",
        "each trial's perturbation time, score and offered checkpoint are read after a decision (into the "
        "population's journal) and put back on a resume (Ray saves no scheduler state)",
        instance=True,
    ),
    Internal(
        "ray.train._internal.checkpoint_manager:_CheckpointManager",
        "_latest_checkpoint_result",
        "search.population",
        "a resumed population's trial starts from the checkpoint its last decision gives it, as Ray's PBT "
        "hands an exploiting trial its donor's (Tune has no public setter)",
        instance=True,
    ),
    Internal("ray.train._internal.session", "_TrainingResult", "search.population", "as above: what it holds"),
    # Ray Train sessions, in a trial.
    Internal(
        "ray.train._internal.session",
        "get_storage",
        "experiment.checkpoints",
        "the trial's directory in the experiment's storage and its filesystem",
    ),
    # The embedded Ray: loopback only, token authentication on.
    Internal(
        "ray._private.ray_constants",
        "ENABLE_RAY_CLUSTER",
        "execution.connect",
        "off while the embedded Ray starts, so its servers bind to loopback",
    ),
    Internal(
        "ray._raylet",
        "AuthenticationTokenLoader",
        "execution.connect",
        "the token Ray's processes read is the one just set",
    ),
    Internal("ray._raylet", "Config", "execution.connect", "this process's Ray config sees token mode"),
)


#: What Tune (Ray 2.60, ``class_cache.DEFAULT_ENV_VARS``) puts in every trial actor's environment:
#: Lightning must not fork in a Ray worker (ray-project/ray#28197). Where the service registers a trial
#: actor without it (:mod:`tune_service.execution.trial_actors`), the trial's processes set it themselves.
TUNE_TRIAL_ENVIRONMENT = {"PL_DISABLE_FORK": "1"}


def set_tune_trial_environment() -> None:
    """In a trial actor or a rank: the environment variables Tune's runtime environment would have set."""
    import os

    for name, value in TUNE_TRIAL_ENVIRONMENT.items():
        os.environ.setdefault(name, value)


class RayInternalsChanged(RuntimeError):
    """A private name of Ray that tune-service relies on is not there: the installed Ray is not one the
    service supports (see ``pyproject.toml``)."""


def private(obj: Any, name: str) -> Any:
    """``obj``'s private attribute ``name``, one of :data:`INTERNALS` (``obj`` may be a Ray object that
    forwards to the owner, as the TrialRunnerWrapper a scheduler is given forwards to the TuneController).

    Raises:
        RayInternalsChanged: it is not there, naming it.
    """
    listed = [i for i in INTERNALS if i.name == name]
    if not listed:
        raise AssertionError(f"ray_internals: {name} is not in INTERNALS; add it there")
    try:
        return getattr(obj, name)
    except AttributeError:
        import ray

        owners = " or ".join(str(i) for i in listed)
        raise RayInternalsChanged(
            f"Ray {ray.__version__} has no {owners} (used in {listed[0].used_in} because "
            f"{listed[0].why}); install a Ray in tune-service's supported range"
        ) from None


def set_private(obj: Any, name: str, value: Any) -> None:
    """Set ``obj``'s private attribute ``name``, one of :data:`INTERNALS`, that ``obj`` already has.

    Raises:
        RayInternalsChanged: ``obj`` has no such attribute, naming it.
    """
    private(obj, name)
    setattr(obj, name, value)


#: How many blocks of :func:`replaced` are inside now, for each (owner, name), and what it was before the
#: first of them. Sweeps run from threads may overlap: the original is put back when the last one ends.
_replacements: dict[tuple[int, str], tuple[int, Any]] = {}
_replacements_lock = threading.Lock()


@contextlib.contextmanager
def replaced(owner: Any, name: str, replacement: Callable[[Any], Any]) -> Iterator[None]:
    """While the block runs, ``owner.name`` (a class's or module's attribute in :data:`INTERNALS`) is
    ``replacement(original)``; after the last overlapping block for it ends, it is the original again.

    Raises:
        RayInternalsChanged: ``owner`` has no such attribute, naming it.
    """
    key = (id(owner), name)
    with _replacements_lock:
        inside, original = _replacements.get(key, (0, None))
        if inside == 0:
            original = private(owner, name)
            setattr(owner, name, replacement(original))
        _replacements[key] = (inside + 1, original)
    try:
        yield
    finally:
        with _replacements_lock:
            inside, original = _replacements.pop(key)
            if inside == 1:
                setattr(owner, name, original)
            else:
                _replacements[key] = (inside - 1, original)
