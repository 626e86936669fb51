"""Guards on what a trial reports: a non-finite loss ends the trial at its epoch, unreported."""

from __future__ import annotations

import pytest

from recording_tasks import DivergingDigits
from tune_service.tasks import ResolvedTask
from tune_service.tasks.digits import Digits
from tune_service.training import LocalContext, fit
from tune_service.training.guards import MissingMetric, NonFiniteLoss, check_metric_reported
from tune_service.training.loop import TrialConfig

pytestmark = pytest.mark.training


def test_a_non_finite_loss_ends_the_trial_at_that_epoch_before_it_is_reported():
    context = LocalContext()
    config = TrialConfig(ResolvedTask("diverging", task=DivergingDigits()), {**Digits.defaults, "diverge_at": 2},
                         epochs=3, seed=0)
    with pytest.raises(NonFiniteLoss, match=r"^non-finite loss at epoch 2: train_loss nan"):
        fit(config, context)
    assert [r["epoch"] for r in context.reports] == [1]  # epoch 2 never reached Tune, so never the best


def test_a_missing_metric_names_what_the_task_did_report():
    with pytest.raises(MissingMetric, match=r"never reported 'accuracy'; its first report had: epoch, val_accuracy"):
        check_metric_reported("accuracy", {"val_accuracy": 0.5, "epoch": 1})
    check_metric_reported("val_accuracy", {"val_accuracy": 0.5})  # present: no error


def test_under_fp16_an_overflowing_training_step_is_the_scalers_to_skip_but_validation_still_counts():
    from tune_service.training.guards import check_finite_losses

    check_finite_losses({"train_loss": float("inf"), "val_loss": 0.5}, 1, precision="fp16")  # skipped steps
    with pytest.raises(NonFiniteLoss, match="at epoch 4: val_loss nan"):
        check_finite_losses({"train_loss": 0.5, "val_loss": float("nan")}, 4, precision="fp16")
    with pytest.raises(NonFiniteLoss, match="at epoch 1: train_loss inf"):
        check_finite_losses({"train_loss": float("inf"), "val_loss": 0.5}, 1, precision="bf16")
