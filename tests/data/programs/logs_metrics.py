"""A W&B-style program, as its users write it (nothing of tune-service imported): argparse defaults
into wandb.init, a few wandb.log calls, one of them nested and one uncommitted (the metric NaN at step
--nan-at); exits with --exit-code."""

import argparse
import sys
import time

import wandb

parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=0.1)
parser.add_argument("--steps", type=int, default=3)
parser.add_argument("--exit-code", type=int, default=0)
parser.add_argument("--sleep", type=float, default=0.0)
parser.add_argument("--log", default="val_loss")
parser.add_argument("--nan-at", type=int, default=-1)
args = parser.parse_args()

run = wandb.init(project="someone-elses", config={**vars(args), "model": {"depth": 1, "width": 8}})
print("config", dict(run.config), flush=True)
for step in range(args.steps):
    wandb.log({"train_loss": 1.0 / (step + 1)}, commit=False)
    value = float("nan") if step == args.nan_at else run.config["lr"] * (step + 1)
    wandb.log({args.log: value, "val": {"accuracy": 0.5 + step / 10}})
    time.sleep(args.sleep)
run.finish()
print("finished", flush=True)
sys.exit(args.exit_code)
