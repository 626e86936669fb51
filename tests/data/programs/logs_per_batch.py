"""A W&B-style training script that logs a gradient norm every batch and its validation accuracy once an
epoch (as many W&B users' scripts do); the accuracy grows with the epoch, scaled by --lr."""

import argparse

import wandb

parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=0.1)
parser.add_argument("--epochs", type=int, default=6)
parser.add_argument("--batches", type=int, default=5)
args = parser.parse_args()

run = wandb.init(project="per-batch", config=vars(args))
for epoch in range(1, args.epochs + 1):
    for batch in range(args.batches):
        wandb.log({"grad_norm": 1.0 / (epoch * args.batches + batch)})
    wandb.log({"epoch": epoch, "val_accuracy": run.config["lr"] * epoch})
run.finish()
