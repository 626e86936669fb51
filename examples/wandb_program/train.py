"""A plain W&B training script, as W&B's sweep agent runs it: argparse flags, wandb.init, wandb.log.
Nothing of tune-service is imported. It trains a small MLP on scikit-learn's digits with PyTorch DDP
when started as several ranks (torchrun's RANK / WORLD_SIZE / MASTER_ADDR environment), and in one
process otherwise.

    python train.py --lr 0.05 --hidden 64 --epochs 6
"""

import argparse
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
import wandb
from sklearn.datasets import load_digits
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--batch_size", type=int, default=64)
    args = parser.parse_args()

    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if world > 1:
        dist.init_process_group("gloo")  # MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE from the environment
    torch.manual_seed(0)

    digits = load_digits()
    x = torch.tensor(digits.data, dtype=torch.float32) / 16.0
    y = torch.tensor(digits.target)
    train, val = TensorDataset(x[:1400], y[:1400]), TensorDataset(x[1400:], y[1400:])
    sampler = DistributedSampler(train, world, rank) if world > 1 else None
    loader = DataLoader(train, batch_size=args.batch_size // world, sampler=sampler, shuffle=sampler is None)
    model = nn.Sequential(nn.Linear(64, args.hidden), nn.ReLU(), nn.Linear(args.hidden, 10))
    if world > 1:
        model = nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)

    run = wandb.init(project="digits-mlp", config=vars(args)) if rank == 0 else None
    for epoch in range(1, args.epochs + 1):
        if sampler is not None:
            sampler.set_epoch(epoch)
        model.train()
        for inputs, targets in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(inputs), targets)
            loss.backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            logits = model(val.tensors[0])
            val_loss = F.cross_entropy(logits, val.tensors[1]).item()
            accuracy = (logits.argmax(1) == val.tensors[1]).float().mean().item()
        if run is not None:
            wandb.log({"epoch": epoch, "val_accuracy": accuracy, "val": {"loss": val_loss}})
    if run is not None:
        run.finish()
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
