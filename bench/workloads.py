"""What the benchmarks' trials run. Importable by Ray's workers (``bench.workloads``), so nothing here is
pickled by value.

- :func:`sleep_epochs`: a trivial timed trial, a plain Ray Train ``train_loop_per_worker`` whose epochs
  sleep ``epoch_s`` seconds and report; :func:`sleep_epochs_tune` is the same loop as a plain Tune
  function trainable (no Ray Train).
- :class:`SleepEpochsTask`: the same trivial timed trial as a Task, so that it runs on the shared loop
  (and so on warm gangs): one tiny batch per rank and epoch, which sleeps ``epoch_s`` seconds.
- :class:`TiledDigits`: the built-in digits task with its training set repeated ``repeat`` times, so an
  epoch of the digits CNN lasts about a second instead of a tenth of one.
- :func:`digits_trial`: one process trains the digits MLP epoch by epoch and reports validation
  accuracy: the light trainable of the search-efficiency benchmark.

The closed-form functions of the known-optimum benchmark are in :mod:`bench.search.functions` (numpy only, so
their trials start without importing torch).
"""

from __future__ import annotations

import math
import os
import tempfile
import time
from typing import Any


from tune_service.tasks.digits import Digits, load_digits_tensors

# ---------------------------------------------------------------------------- trivial timed trials


def sleep_epochs(config: dict[str, Any]) -> None:
    """``epochs`` epochs of ``epoch_s`` seconds of sleep, each reported (a plain Ray Train loop)."""
    import ray.train

    for epoch in range(1, int(config["epochs"]) + 1):
        time.sleep(float(config["epoch_s"]))
        ray.train.report({"epoch": epoch, "score": float(config.get("x", 0.0))})


def sleep_epochs_tune(config: dict[str, Any]) -> None:
    """:func:`sleep_epochs` as a plain Tune function trainable, in the Tune trial's own process."""
    from ray import tune

    for epoch in range(1, int(config["epochs"]) + 1):
        time.sleep(float(config["epoch_s"]))
        tune.report({"epoch": epoch, "score": float(config.get("x", 0.0))})


class SleepEpochsTask(Digits):
    """Epochs of ``epoch_s`` seconds of sleep on the shared loop: each rank trains one batch of one
    digit per epoch (the sleep is in ``augment``) and the sweep's metric is ``val_score`` = ``x``."""

    name = "sleep_epochs"
    defaults = {**Digits.defaults, "batch_size": 2, "epoch_s": 1.0, "x": 0.0}
    data_hparams = ()

    def datasets(self, config):
        from torch.utils.data import Subset

        train, validation = load_digits_tensors()
        return Subset(train, range(2)), Subset(validation, range(2))

    def augment(self, inputs, targets, config):
        time.sleep(float(config["epoch_s"]))
        self.x = float(config["x"])
        return inputs, targets

    def metrics(self, outputs, targets):
        import torch

        return {"score": torch.tensor(getattr(self, "x", 0.0) * targets.shape[0])}


# ---------------------------------------------------------------------------- digits, longer epochs

class TiledDigits(Digits):
    """Digits with the training set repeated ``repeat`` times (validation unchanged)."""

    name = "tiled_digits"
    defaults = {**Digits.defaults, "model": "cnn", "hidden": 32, "repeat": 16}

    def datasets(self, config):
        from torch.utils.data import TensorDataset

        train, validation = load_digits_tensors()
        repeat = int(config.get("repeat", 1))
        inputs, targets = train.tensors
        return TensorDataset(inputs.repeat(repeat, 1), targets.repeat(repeat)), validation


# ---------------------------------------------------------------------------- digits, one process

_DIGITS: dict[str, Any] = {}


def _digits_tensors():
    if not _DIGITS:
        from tune_service.tasks.digits import load_digits_tensors

        train, validation = load_digits_tensors()
        _DIGITS.update(train=train.tensors, validation=validation.tensors)
    return _DIGITS["train"], _DIGITS["validation"]


class DigitsRun:
    """The digits MLP (the built-in task's model and optimizers) trained in this one process, one thread,
    epoch by epoch: :meth:`train_epoch` trains the next epoch and returns ``epoch``, ``val_accuracy`` and
    ``val_loss`` (not finite when training diverged: callers decide what that counts as). Each epoch's
    order of the training images depends only on ``seed`` and the epoch, so a run resumed from
    :meth:`state` goes on as it would have."""

    def __init__(self, config: dict[str, Any], seed: int, state: dict[str, Any] | None = None):
        import torch

        from tune_service.tasks.digits import Digits
        from tune_service.training.optim import make_optimizer

        torch.set_num_threads(1)
        self.hparams = {**Digits.defaults, **config}
        self.seed = seed
        torch.manual_seed(seed)
        self.model = Digits().model(self.hparams)
        self.optimizer = make_optimizer(self.model.parameters(), self.hparams, float(self.hparams["lr"]))
        self.epoch = 0
        if state is not None:
            self.model.load_state_dict(state["model"])
            self.optimizer.load_state_dict(state["optimizer"])
            self.epoch = int(state["epoch"])

    def train_epoch(self) -> dict[str, float]:
        import torch
        from torch.nn.functional import cross_entropy

        (x_train, y_train), (x_val, y_val) = _digits_tensors()
        self.epoch += 1
        batch = int(self.hparams["batch_size"])
        self.model.train()
        order = torch.randperm(len(x_train), generator=torch.Generator().manual_seed(self.seed * 1000 + self.epoch))
        for index in range(0, len(order), batch):
            rows = order[index:index + batch]
            self.optimizer.zero_grad(set_to_none=True)
            cross_entropy(self.model(x_train[rows]), y_train[rows]).backward()
            self.optimizer.step()
        self.model.eval()
        with torch.no_grad():
            outputs = self.model(x_val)
            return {"epoch": self.epoch, "val_accuracy": float((outputs.argmax(1) == y_val).float().mean()),
                    "val_loss": float(cross_entropy(outputs, y_val))}

    def state(self) -> dict[str, Any]:
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(), "epoch": self.epoch}


def digits_trial(config: dict[str, Any], seed: int = 0, checkpointing: bool = False) -> None:
    """A Tune trial of :class:`DigitsRun`, one report per epoch: ``epoch``, ``val_accuracy``, ``val_loss``
    (1e9 when not finite). With ``checkpointing`` every epoch carries a checkpoint and the trial resumes
    from it (HyperBand pauses trials at its rungs)."""
    import torch
    from ray import tune

    state = None
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as directory:
            state = torch.load(os.path.join(directory, "state.pt"), weights_only=False)
    run = DigitsRun(config, seed, state)
    while True:
        metrics = run.train_epoch()
        if not math.isfinite(metrics["val_loss"]):
            metrics["val_loss"] = 1e9
        if checkpointing:
            with tempfile.TemporaryDirectory() as directory:
                torch.save(run.state(), os.path.join(directory, "state.pt"))
                tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(directory))
        else:
            tune.report(metrics)


# ---------------------------------------------------------------------------- image models of GPU sizes


def small_cnn():
    """A small CIFAR-sized CNN: three conv blocks of 64, 128 and 256 channels with BatchNorm, a linear head."""
    from torch import nn

    def block(cin, cout):
        return [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
                nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
                nn.MaxPool2d(2)]

    return nn.Sequential(*block(3, 64), *block(64, 128), *block(128, 256),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(256, 10))


def resnet18():
    """ResNet-18 for 32x32 images (the CIFAR form: a 3x3 stem, no max-pool; 11.2 M parameters)."""
    from torch import nn

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.shortcut = nn.Sequential()
            if stride != 1 or cin != cout:
                self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            out = self.bn1(self.conv1(x)).relu()
            return (self.bn2(self.conv2(out)) + self.shortcut(x)).relu()

    layers, cin = [], 64
    for cout, stride in ((64, 1), (64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2), (512, 1)):
        layers.append(Block(cin, cout, stride))
        cin = cout
    return nn.Sequential(nn.Conv2d(3, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU(), *layers,
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 10))


class SyntheticImages(Digits):
    """Random 3x32x32 images in 10 classes (fixed by a seed): ``model`` ``small_cnn`` or ``resnet18``,
    ``images`` training images (a quarter as many to validate); the shared loop's hyperparameters."""

    name = "synthetic_images"
    data_hparams = ("images",)
    defaults = {"model": "small_cnn", "images": 2048, "lr": 1e-3, "batch_size": 256, "optimizer": "adam",
                "weight_decay": 0.0, "momentum": 0.9}

    def datasets(self, config):
        import torch
        from torch.utils.data import TensorDataset

        generator = torch.Generator().manual_seed(0)
        count = int(config["images"])
        images = torch.randn(count + count // 4, 3, 32, 32, generator=generator)
        labels = torch.randint(0, 10, (count + count // 4,), generator=generator)
        return TensorDataset(images[:count], labels[:count]), TensorDataset(images[count:], labels[count:])

    def augment(self, inputs, targets, config):
        return inputs, targets

    def model(self, config):
        return {"small_cnn": small_cnn, "resnet18": resnet18}[config["model"]]()
