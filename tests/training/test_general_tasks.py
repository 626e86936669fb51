"""The shared loop's general contract (issue 21): batches of any structure with a task's own training
and validation steps, a custom collate, iterable data sharded over ranks and loader workers, any
torch.optim optimizer by name, schedules with warm-up that resume on the same curve, and a task's own
optimizer and scheduler. Gradient clipping is a practice: tests/training/test_practices.py, row 21."""

from __future__ import annotations

import collections
import dataclasses
import math

import pytest
import torch
from torch.optim.optimizer import register_optimizer_step_pre_hook

from ddp_harness import run_ranks
from general_tasks import (
    DictDigits, DigitBatch, Encoding, IndexStream, Interrupted, StepLRDigits, StreamedIndices, train,
)
from tune_service.spec.training import ScheduleSettings, TrainingSettings
from tune_service.tasks.base import TIMED_REPORTS
from tune_service.tasks.digits import Digits
from tune_service.training import load_state
from tune_service.training.batches import count_samples, move_to_device
from tune_service.training.data import BatchPlan, LoaderSettings, build_loaders
from tune_service.training.distributed import RankInfo
from tune_service.training.optim import LearningRateSchedule, make_optimizer

META = torch.device("meta")
Pair = collections.namedtuple("Pair", "first second")


# batches ------------------------------------------------------------------------------------------
def test_every_tensor_of_a_nested_batch_moves_and_every_container_keeps_its_type():
    batch = {"encoding": Encoding(ids=torch.zeros(4, 3), mask=[torch.ones(4), (torch.ones(4), "text")]),
             "pair": Pair(torch.zeros(4), 7), "boxes": DigitBatch(torch.zeros(4, 2), torch.zeros(4))}
    moved = move_to_device(batch, META)
    assert type(moved["encoding"]) is Encoding and type(moved["pair"]) is Pair
    assert type(moved["boxes"]) is DigitBatch and type(moved["encoding"]["mask"][1]) is tuple
    tensors = [moved["encoding"]["ids"], *moved["encoding"]["mask"][:1], moved["encoding"]["mask"][1][0],
               moved["pair"].first, moved["boxes"].pixels, moved["boxes"].labels]
    assert all(t.device == META for t in tensors)
    assert moved["pair"].second == 7 and moved["encoding"]["mask"][1][1] == "text"
    assert count_samples(batch) == 4 and count_samples([3, {"x": torch.zeros(5, 2)}]) == 5
    with pytest.raises(ValueError, match="cannot count the samples"):
        count_samples({"text": ["a", "b"]})


def test_a_task_with_dict_batches_its_own_steps_and_collate_trains_and_reports_its_metric():
    task = DictDigits()
    reports = train(task, epochs=2, lr=0.01).reports
    assert {"Encoding"} == {kind for kind, _ in task.batch_types} and {"DigitBatch"} == {k for _, k in task.batch_types}
    assert set(reports[-1]) == set(task.reported_metrics())  # what it declares is what it reports
    assert reports[-1]["val_error"] < reports[0]["val_error"] < 0.5 and reports[-1]["val_loss"] < reports[0]["val_loss"]


def test_validation_step_without_a_loss_is_refused_naming_what_it_gave():
    class NoLoss(DictDigits):
        def validation_step(self, model, batch, config):
            return {"error": torch.tensor(0.0)}

    with pytest.raises(ValueError, match="validation_step must return 'loss'.*got error"):
        train(NoLoss())


# iterable data ------------------------------------------------------------------------------------
@pytest.mark.parametrize("workers", [0, 2])
def test_an_iterable_is_sharded_over_ranks_and_loader_workers_without_duplicates(workers):
    plan = BatchPlan(global_batch=6, per_rank=3, micro=3, grad_accum_steps=1)
    size, shards = 103, 2 * max(1, workers)
    train_seen, validation_seen = [], []
    for rank in range(2):
        loaders = build_loaders(IndexStream(size), IndexStream(size), plan, RankInfo(rank, 2), seed=0,
                                settings=LoaderSettings(workers, False))
        train_seen.append([int(i) for inputs, _ in loaders.train for i in inputs.flatten()])
        validation_seen += [int(i) for inputs, _ in loaders.validation for i in inputs.flatten()]
    assert len(train_seen[0]) == len(train_seen[1]) == size // shards * shards // 2  # equal: no rank waits
    everything = train_seen[0] + train_seen[1]
    assert len(set(everything)) == len(everything) and set(everything) == set(range(size // shards * shards))
    assert sorted(validation_seen) == list(range(size))  # validation: every sample once


@pytest.mark.parametrize("accumulation", [1, 2])
def test_a_stream_trains_on_two_ranks_with_equal_steps_and_reshuffles_per_epoch(tmp_path, accumulation):
    ranks = run_ranks("general_tasks:streamed_ranks", 2, tmp_path, size=101, accumulation=accumulation)
    first, second = (r["trained"] for r in ranks)
    assert len(first) == len(second) == 50 and not set(first) & set(second)  # 101: one sample left out
    reports = [{k: v for k, v in r["reports"][0].items() if k not in TIMED_REPORTS} for r in ranks]
    assert reports[0] == reports[1] and reports[0]["epoch"] == 1  # reduced over both ranks
    task = StreamedIndices(with_length=False)  # one rank, no length: the loop counts as it goes
    train(task, epochs=2)
    assert sorted(task.trained) == sorted(2 * list(range(101))) and task.stream.epochs == [1, 2]


# optimizers ---------------------------------------------------------------------------------------
def test_any_torch_optimizer_is_named_by_the_config_with_its_arguments():
    model = torch.nn.Linear(2, 2)
    rmsprop = make_optimizer(model.parameters(), {"optimizer": "RMSprop", "alpha": 0.9, "momentum": 0.1}, 0.01)
    assert isinstance(rmsprop, torch.optim.RMSprop) and rmsprop.defaults["alpha"] == 0.9
    adamw = make_optimizer(model.parameters(), {"optimizer": "adamw", "betas": [0.8, 0.95], "weight_decay": 0.1}, 0.1)
    assert adamw.defaults["betas"] == (0.8, 0.95) and adamw.defaults["weight_decay"] == 0.1
    assert make_optimizer(model.parameters(), {"optimizer": "sgd"}, 0.1).defaults["momentum"] == 0.9
    with pytest.raises(ValueError, match="optimizer must be one of torch.optim's .*adamw.*got 'adamm'"):
        make_optimizer(model.parameters(), {"optimizer": "adamm"}, 0.1)
    with pytest.raises(ValueError, match="closure"):
        make_optimizer(model.parameters(), {"optimizer": "lbfgs"}, 0.1)
    assert train(Digits(), optimizer="nadam").reports[0]["val_accuracy"] > 0.5


# schedules ----------------------------------------------------------------------------------------
def lrs_of_steps(settings: TrainingSettings, epochs: int, **hparams) -> list[float]:
    seen = []
    hook = register_optimizer_step_pre_hook(lambda optimizer, *args: seen.append(optimizer.param_groups[0]["lr"]))
    try:
        train(Digits(), epochs=epochs, settings=settings, **hparams)
    finally:
        hook.remove()
    return seen


def test_a_cosine_schedule_with_warm_up_follows_its_curve_step_by_step():
    steps_per_epoch = math.ceil(1437 / 256)  # digits' training set at batch 256
    settings = TrainingSettings(checkpoint_every=0, warmup_steps=3,
                                schedule=ScheduleSettings("cosine", min_lr_ratio=0.1))
    lrs = lrs_of_steps(settings, epochs=2, lr=0.1, batch_size=256)
    total = 2 * steps_per_epoch
    expected = [0.1 * s / 3 if s < 3 else 0.1 * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (s - 3) / (total - 3))))
                for s in range(total)]
    assert lrs == pytest.approx(expected)


def test_an_epoch_interval_holds_the_decay_for_each_epoch():
    settings = TrainingSettings(checkpoint_every=0, schedule=ScheduleSettings("cosine", interval="epoch"))
    lrs = lrs_of_steps(settings, epochs=3, lr=0.1, batch_size=512)  # 3 steps an epoch
    assert lrs == pytest.approx([0.1] * 3 + [0.075] * 3 + [0.025] * 3)


def test_the_step_and_one_cycle_schedules():
    step = LearningRateSchedule.for_trial(ScheduleSettings("step", every_epochs=2, gamma=0.5), 10, 60, 0, 1.0)
    assert [step.factor(s) for s in (0, 19, 20, 45)] == [1.0, 1.0, 0.5, 0.25]
    one_cycle = LearningRateSchedule.for_trial(ScheduleSettings("one_cycle"), 10, 100, 0, 1.0)
    assert one_cycle.factor(0) == pytest.approx(1 / 25) and one_cycle.factor(30) == 1.0
    assert one_cycle.factor(100) == pytest.approx(1 / 2.5e5)


@pytest.mark.parametrize("task, settings", [
    (Digits, TrainingSettings(warmup_epochs=0.5, schedule=ScheduleSettings("cosine"), clip_grad_norm=0.5)),
    (StepLRDigits, TrainingSettings()),
], ids=["cosine", "task_scheduler"])
def test_a_resumed_trial_continues_the_same_lr_curve_to_the_same_weights(tmp_path, task, settings):
    straight = train(task(), epochs=3, settings=settings, output_dir=tmp_path / "straight", batch_size=256)
    with pytest.raises(Interrupted):
        train(task(), epochs=3, settings=settings, output_dir=tmp_path / "resumed", batch_size=256, interrupt_after=1)
    resumed = train(task(), epochs=3, settings=settings, output_dir=tmp_path / "resumed", batch_size=256)
    assert [r["lr"] for r in resumed.reports] == [r["lr"] for r in straight.reports[1:]]
    assert len({r["lr"] for r in straight.reports}) == 3  # the lr did move
    final = [load_state(tmp_path / run / "checkpoints" / "epoch_0003") for run in ("straight", "resumed")]
    assert all(torch.equal(a, b) for a, b in zip(final[0]["model"].values(), final[1]["model"].values()))
    assert final[0]["step"] == final[1]["step"] == 3 * 6


# reports by steps ----------------------------------------------------------------------------------
def test_a_trial_by_steps_reports_every_n_steps_and_at_its_last_step(tmp_path):
    settings = TrainingSettings(report_every_steps=4)  # digits at batch 256: 6 steps an epoch
    context = train(Digits(), max_steps=14, settings=settings, output_dir=tmp_path, batch_size=256)
    assert [r["step"] for r in context.reports] == [4, 8, 12, 14]
    assert [r["epoch"] for r in context.reports] == [0.6667, 1.3333, 2.0, 2.3333]
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == [
        "step_00000004", "step_00000008", "step_00000012", "step_00000014"]
    state = load_state(tmp_path / "checkpoints" / "step_00000008")
    assert (state["epoch"], state["epoch_batches"], state["step"]) == (1, 2, 8)
    assert len({r["train_loss"] for r in context.reports}) == 4  # each over its own steps


def test_a_trial_by_steps_reports_at_each_epochs_end_without_report_every_steps():
    reports = train(Digits(), max_steps=14, batch_size=256).reports
    assert [(r["epoch"], r["step"]) for r in reports] == [(1, 6), (2, 12), (2.3333, 14)]


@pytest.mark.parametrize("stop_at", [8, 12], ids=["mid_epoch", "at_an_epochs_last_step"])
def test_a_trial_resumed_mid_epoch_trains_what_it_would_have_trained(tmp_path, stop_at):
    # dropout and input noise draw per rank; the cosine schedule and clipping follow the step
    settings = TrainingSettings(report_every_steps=4, warmup_steps=3, clip_grad_norm=0.5,
                                schedule=ScheduleSettings("cosine"))
    hparams = dict(batch_size=256, dropout=0.3, noise=0.2)
    straight = train(Digits(), max_steps=22, settings=settings, output_dir=tmp_path / "straight", **hparams)
    with pytest.raises(Interrupted):
        train(Digits(), max_steps=22, settings=settings, output_dir=tmp_path / "resumed", interrupt_after=stop_at,
              **hparams)
    resumed = train(Digits(), max_steps=22, settings=settings, output_dir=tmp_path / "resumed", **hparams)
    after = [r for r in straight.reports if r["step"] > stop_at]
    keys = ("step", "epoch", "train_loss", "val_loss", "lr")
    assert [[r[k] for k in keys] for r in resumed.reports] == [[r[k] for k in keys] for r in after]
    final = [load_state(tmp_path / run / "checkpoints" / "step_00000022") for run in ("straight", "resumed")]
    assert all(torch.equal(a, b) for a, b in zip(final[0]["model"].values(), final[1]["model"].values()))


def test_a_tasks_own_scheduler_is_stepped_every_optimizer_step():
    stepped = []
    hook = register_optimizer_step_pre_hook(lambda optimizer, *args: stepped.append(optimizer.param_groups[0]["lr"]))
    try:
        train(StepLRDigits(), epochs=2, lr=0.1, batch_size=512)
    finally:
        hook.remove()
    assert stepped == pytest.approx([0.1] * 4 + [0.05] * 2)


def test_a_dataclass_batch_is_rebuilt_with_its_fields():
    @dataclasses.dataclass
    class WithDefault:
        x: torch.Tensor
        n: int = 3

    moved = move_to_device(WithDefault(torch.zeros(2)), META)
    assert moved.x.device == META and moved.n == 3
