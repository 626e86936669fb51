"""What a task says it reports is what the shared loop reports: the names the spec is checked against
(tune_service.tasks.spec_check) cannot drift from the loop."""

from __future__ import annotations

import pytest

from recording_tasks import ScoredDigits
from tune_service.errors import TaskError
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


class ThreeItemsDigits(Digits):
    """A training step that returns (loss, samples, something else): not the contract."""

    def training_step(self, model, batch, config):
        loss, samples = super().training_step(model, batch, config)
        return loss, samples, {"aux": 0}


def test_a_training_step_that_returns_neither_a_loss_nor_loss_and_samples_is_the_tasks_error_in_one_line(tmp_path):
    with pytest.raises(TaskError) as raised:
        reported_names(ThreeItemsDigits(), tmp_path)
    assert str(raised.value) == "training_step returned a tuple of 3 items; it returns the loss, or (loss, samples)"
