"""The last lines of W&B's PyTorch sweep example, run on every rank as torchrun runs a script: the model
saved into ``wandb.run.dir`` and ``wandb.save``d, ``wandb.run.config`` read, and ``wandb.run.summary``
written, with no rank check."""

import os

import torch
import wandb

wandb.init(config={"lr": 0.01})
for epoch in range(2):
    wandb.log({"epoch": epoch, "loss": wandb.config.lr * (2 - epoch)})
wandb.run.summary["rank"] = int(os.environ.get("RANK", "0"))
torch.save({"w": torch.zeros(2)}, os.path.join(wandb.run.dir, "model.pt"))
wandb.save(os.path.join(wandb.run.dir, "model.pt"))
print("saved into", wandb.run.dir, "sweep_id", wandb.run.sweep_id, flush=True)
wandb.finish()
