"""What a task says it reports is what the shared loop reports: the names the spec is checked against
(tune_service.tasks.spec_check) cannot drift from the loop."""

from __future__ import annotations

import time

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



class SlowValidationDigits(Digits):
    """Digits whose validation waits :data:`VALIDATION_WAIT_S` on each batch (counted, with its samples): a
    known floor under its latency."""

    def __init__(self):
        self.batches = self.samples = 0

    def validation_step(self, model, batch, config):
        time.sleep(VALIDATION_WAIT_S)
        self.batches, self.samples = self.batches + 1, self.samples + len(batch[0])
        return super().validation_step(model, batch, config)


VALIDATION_WAIT_S = 0.02


def test_latency_ms_is_the_validations_milliseconds_per_sample(tmp_path):
    context = LocalContext(output_dir=tmp_path)
    task = SlowValidationDigits()
    fit(TrialConfig(resolve_task(task), dict(Digits.defaults), epochs=1, seed=0, settings=TrainingSettings()),
        context)
    floor_ms = 1000 * VALIDATION_WAIT_S * task.batches / task.samples  # the waits alone, per sample
    # At least the waits' share of each sample, and not far above it (the model's own time per sample is a
    # small fraction of it): not the time per batch, nor the whole validation's.
    assert task.batches > 1 and floor_ms <= context.reports[-1]["latency_ms"] < 3 * floor_ms
