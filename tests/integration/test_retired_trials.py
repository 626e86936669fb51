"""Under FIFO and ASHA a trial that has ended leaves Tune's controller (tune_service.execution.retiring):
the final results read it back from the service's own records, in the order the trials were created,
Tune's saved state no longer lists it, and its directory moves from the driver's staging copy of the
experiment into storage (tune_service.experiment.staging). Resumes across retired trials: test_driver_crash.py (ASHA's
decisions after a SIGKILL), test_remote_storage.py (from a bucket), test_bundles.py (FIFO)."""

from __future__ import annotations

import json
import tempfile
import uuid
from pathlib import Path

import pytest

import tune_service
from tune_service.experiment import layout

pytestmark = [pytest.mark.integration, pytest.mark.timeout(400)]


def tune_state_trials(experiment: Path) -> list[str]:
    """The trial ids that Tune's newest saved state of the experiment lists."""
    state = json.loads(max(experiment.glob("experiment_state-*.json")).read_text())
    return [(json.loads(t) if isinstance(t, str) else t)["trial_id"] for t, _ in state["trial_data"]]


def staged_trial_dirs(experiment: str) -> list[str]:
    """The trial directories in the driver's staging copies of the experiment named ``experiment`` (a name
    no other Ray session on this machine used). Ray's layout: ``<temp>/ray/session_<id>/artifacts/<time>/
    <experiment>/driver_artifacts``, where ``<time>`` is the second each of Tune's storage contexts of the
    experiment was made in, so a slow machine may have more than one copy (the others empty); the newest
    session is also ``session_latest``, a link, read once."""
    ray_temp = Path(tempfile.gettempdir(), "ray")
    copies = {c.resolve() for c in ray_temp.glob(f"session_*/artifacts/*/{experiment}/driver_artifacts")}
    assert copies, f"no staging copy of {experiment}"
    return [d.name for copy in copies for d in copy.iterdir() if d.is_dir()]


def test_an_asha_sweep_lets_its_ended_trials_go_and_reports_every_one_in_creation_order(ray_cluster, tmp_path):
    name = f"retired-{uuid.uuid4().hex[:8]}"  # its staging directory is the only one of that name
    spec = {
        "name": name, "task": "user_tasks:TinyRegression", "method": "random", "run_cap": 14, "seed": 3,
        "metric": {"name": "val_loss", "goal": "minimize"},
        "parameters": {"lr": {"distribution": "log_uniform_values", "min": 0.01, "max": 0.3}, "width": {"value": 2}},
        "scheduler": {"type": "asha", "max_t": 2, "grace_period": 1, "reduction_factor": 2},
        "resources": {"workers": 1},
    }
    result = tune_service.run(spec, storage=tmp_path, name=name, verbose=0)
    experiment = tmp_path / name
    # Tune let go of every trial as it ended but the last (its restore needs one in its saved state)
    assert len(tune_state_trials(experiment)) == 1
    assert [t.number for t in result.trials] == list(range(1, 15))
    assert {t.status for t in result.trials} <= {"completed", "stopped"}
    assert {t.status for t in result.trials if t.epochs == 2} == {"completed"}
    assert len({t.trial_id for t in result.trials}) == 14
    # the first ten trials to leave moved out of staging together, whole: Tune's saves no longer copy them
    staged = staged_trial_dirs(name)
    assert len(staged) == 4, staged
    for trial in result.trials:
        kept = {f.name for f in layout.trial_dir(experiment, trial.trial_id).iterdir()}
        assert {"params.json", "params.pkl", "result.json", "progress.csv"} <= kept, (trial.trial_id, kept)
    assert tune_service.load_results(experiment).records == result.trials  # as summary.json holds them
    assert result.best is not None and result.best.trial_id in {t.trial_id for t in result.trials}
