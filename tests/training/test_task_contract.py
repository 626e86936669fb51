"""What a task says it reports is what the shared loop reports: the names the spec is checked against
(tune_service.tasks.spec_check) cannot drift from the loop."""

from __future__ import annotations

from recording_tasks import ScoredDigits
from tune_service.tasks import resolve_task
from tune_service.tasks.digits import Digits
from tune_service.training import LocalContext, TrainingSettings, fit
from tune_service.training.loop import TrialConfig


def reported_names(task, tmp_path, **hparams) -> set[str]:
    context = LocalContext(output_dir=tmp_path)
    resolved = resolve_task(task)
    fit(TrialConfig(resolved, {**Digits.defaults, **hparams}, epochs=1, seed=0, settings=TrainingSettings()), context)
    return set(context.reports[-1])


def test_the_loop_reports_exactly_what_the_task_declares(tmp_path):
    assert reported_names(Digits(), tmp_path / "digits") == set(Digits().reported_metrics())
    scored = reported_names(ScoredDigits(), tmp_path / "scored", quality=0.5)
    assert scored == set(ScoredDigits().reported_metrics()) and "val_score" in scored
