"""``train_loop_per_worker``: an ordinary Ray Train loop, nothing of tune-service imported.

It trains an MLP on scikit-learn's digits with DDP (``prepare_model``, ``prepare_data_loader``), reports
the validation accuracy every epoch with a checkpoint saved by rank 0, and starts from
``ray.train.get_checkpoint()`` when there is one: a trial whose rank died (retried under
``failure.max_failures``) or whose sweep was interrupted (``tune-run --resume``) continues from its
latest epoch instead of epoch 1.
"""

from __future__ import annotations

import os
import tempfile

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

STATE_FILE = "state.pt"


def digits() -> tuple[TensorDataset, TensorDataset]:
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    data = load_digits()
    x = torch.tensor(data.data / 16.0, dtype=torch.float32)
    y = torch.tensor(data.target)
    train_x, val_x, train_y, val_y = train_test_split(x, y, test_size=0.2, stratify=y, random_state=0)
    return TensorDataset(train_x, train_y), TensorDataset(val_x, val_y)


def train_loop_per_worker(config: dict) -> None:
    import ray.train
    import ray.train.torch

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, int(config["hidden"])), nn.ReLU(), nn.Linear(int(config["hidden"]), 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=float(config["lr"]), momentum=0.9)
    first_epoch = 1
    checkpoint = ray.train.get_checkpoint()
    if checkpoint is not None:  # a retried or resumed trial: continue after its latest checkpoint
        with checkpoint.as_directory() as directory:
            state = torch.load(os.path.join(directory, STATE_FILE), weights_only=True)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        first_epoch = state["epoch"] + 1
    model = ray.train.torch.prepare_model(model)  # DDP over the trial's ranks
    train_set, val_set = digits()
    per_rank = int(config["batch_size"]) // dist.get_world_size()
    train_loader = ray.train.torch.prepare_data_loader(DataLoader(train_set, batch_size=per_rank, shuffle=True))
    val_loader = ray.train.torch.prepare_data_loader(DataLoader(val_set, batch_size=per_rank))

    for epoch in range(first_epoch, int(config["epochs"]) + 1):
        if dist.get_world_size() > 1:
            train_loader.sampler.set_epoch(epoch)
        model.train()
        for inputs, targets in train_loader:
            optimizer.zero_grad()
            F.cross_entropy(model(inputs), targets).backward()
            optimizer.step()
        model.eval()
        totals = torch.zeros(2)
        with torch.no_grad():
            for inputs, targets in val_loader:
                totals += torch.tensor([(model(inputs).argmax(1) == targets).sum().item(), len(targets)])
        dist.all_reduce(totals)  # the whole validation set's accuracy, the same on every rank
        with tempfile.TemporaryDirectory() as directory:
            saved = None
            if dist.get_rank() == 0:
                torch.save({"model": model.module.state_dict() if hasattr(model, "module") else model.state_dict(),
                            "optimizer": optimizer.state_dict(), "epoch": epoch}, os.path.join(directory, STATE_FILE))
                saved = ray.train.Checkpoint.from_directory(directory)
            ray.train.report({"epoch": epoch, "val_accuracy": float(totals[0] / totals[1])}, checkpoint=saved)
