"""Users' own tasks, imported by path (``user_tasks:...``) the way a user's package would be."""

from __future__ import annotations

import os
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import TensorDataset

from tune_service import Task
from tune_service.tasks.base import ANY
from tune_service.tasks.digits import Digits


class TinyRegression(Task):
    """A linear regression task with an MSE loss and no accuracy."""

    name = "tiny_regression"
    defaults = {"lr": 0.05, "batch_size": 16, "optimizer": "sgd", "width": 4}

    def datasets(self, config):
        g = torch.Generator().manual_seed(0)
        x = torch.randn(96, 3, generator=g)
        y = x @ torch.tensor([1.0, -2.0, 0.5]) + 0.1 * torch.randn(96, generator=g)
        return TensorDataset(x[:64], y[:64]), TensorDataset(x[64:], y[64:])

    def model(self, config):
        return nn.Sequential(nn.Linear(3, int(config["width"])), nn.Linear(int(config["width"]), 1), nn.Flatten(0))

    def loss(self, outputs, targets):
        return F.mse_loss(outputs, targets)

    def metrics(self, outputs, targets):
        return {}


#: The hyperparameters of ``search_spaces/conditional.yaml``; :class:`ConfigReporting` reports which it got.
CONDITIONAL_NAMES = ("model", "layers", "dropout", "hidden", "optimizer", "lr", "momentum")


class ConfigReporting(TinyRegression):
    """A Task that reports which of :data:`CONDITIONAL_NAMES` its ranks received (``val_received``: bit
    ``i`` set for ``CONDITIONAL_NAMES[i]``) and a score that depends on them (``val_score``), so a
    model-based searcher has something to fit. Takes any hyperparameter; its defaults hold none of those
    names, so what the ranks received is what the searcher proposed."""

    name = "config_reporting"
    hyperparameters = ANY
    defaults = {"batch_size": 16, "width": 4}
    metric_names = ("received", "score")

    def validation_step(self, model, batch, config):
        sums = super().validation_step(model, batch, config)
        samples = batch[1].shape[0]
        received = sum(2**i for i, name in enumerate(CONDITIONAL_NAMES) if name in config)
        score = float(config.get("lr", 0.0)) + (0.5 if config.get("optimizer") == "sgd" else 0.0)
        return {**sums, "received": received * samples, "score": score * samples, "samples": samples}


def shard_reporting_loop(config):
    """A plain Ray Train ``train_loop_per_worker``: reports its own rank's numbers and no ``epoch``."""
    import ray.train
    import torch.distributed as dist

    for step in range(int(config["steps"])):
        rank = dist.get_rank()
        ray.train.report({"score": float(config["offset"] + step + rank), "rank_seen": rank,
                          "world_size": dist.get_world_size()})


def config_reporting_loop(config):
    """A plain train loop that reports which hyperparameters its rank received (dotted, sorted) and a
    score that depends on them, so a model-based searcher has something to fit."""
    import ray.train

    from tune_service.spec.configs import flatten

    received = flatten(config)
    score = float(received.get("lr", 0.0)) + (0.5 if received.get("optimizer") == "sgd" else 0.0)
    ray.train.report({"score": score, "received": ",".join(sorted(received))})


def diverging_loop(config):
    """A plain train loop that reports ``quality * epoch`` each epoch, NaN at epoch 2 when ``diverge``."""
    import ray.train

    for epoch in range(1, 4):
        score = float("nan") if config["diverge"] and epoch == 2 else float(config["quality"] * epoch)
        ray.train.report({"epoch": epoch, "score": score})


def two_argument_loop(config, dataset):
    """Not a train loop: Ray Train would call it with the config alone (a spec naming it is refused)."""
    raise AssertionError("never called")


def checkpointing_loop(config):
    """A plain Ray Train loop that reports ``epoch`` with a checkpoint (rank 0's) every epoch and starts
    after the epoch of ``ray.train.get_checkpoint()``. Rank 0 appends that epoch (0: none) to
    ``record_dir/starts`` at every start; rank 1 dies once at epoch ``die_at``, before reporting it; each
    epoch lasts ``epoch_s``."""
    import json
    import tempfile
    import time

    import ray.train
    import torch.distributed as dist

    record, rank = Path(config["record_dir"]), dist.get_rank()
    start = 0
    checkpoint = ray.train.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as directory:
            start = json.loads((Path(directory) / "epoch.json").read_text())["epoch"]
    if rank == 0:
        with open(record / "starts", "a") as starts:
            starts.write(f"{start}\n")
    for epoch in range(start + 1, int(config["epochs"]) + 1):
        time.sleep(float(config.get("epoch_s", 0)))
        if epoch == config.get("die_at") and rank == 1 and not (record / "died").exists():
            (record / "died").touch()
            os._exit(1)
        with tempfile.TemporaryDirectory() as directory:
            saved = None
            if rank == 0:
                (Path(directory) / "epoch.json").write_text(json.dumps({"epoch": epoch}))
                saved = ray.train.Checkpoint.from_directory(directory)
            ray.train.report({"epoch": epoch, "score": float(epoch)}, checkpoint=saved)


class DigitsTakingAnything(Digits):
    """The built-in digits task, declared to take any hyperparameter (a W&B file's own parameters pass
    through to its config unchecked)."""

    hyperparameters = ANY
