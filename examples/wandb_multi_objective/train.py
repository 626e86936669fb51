"""A plain W&B training script that logs two objectives: the validation accuracy of a small MLP on
scikit-learn's digits, and its parameter count. Nothing of tune-service is imported.

    python train.py --lr 0.05 --hidden 16 --epochs 3
"""

import argparse

import torch
import torch.nn.functional as F
import wandb
from sklearn.datasets import load_digits
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--hidden", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()
    torch.manual_seed(0)

    digits = load_digits()
    x = torch.tensor(digits.data, dtype=torch.float32) / 16.0
    y = torch.tensor(digits.target)
    loader = DataLoader(TensorDataset(x[:1400], y[:1400]), batch_size=64, shuffle=True)
    model = nn.Sequential(nn.Linear(64, args.hidden), nn.ReLU(), nn.Linear(args.hidden, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    n_params = sum(p.numel() for p in model.parameters())

    run = wandb.init(project="digits-pareto", config=vars(args))
    for epoch in range(1, args.epochs + 1):
        model.train()
        for inputs, targets in loader:
            optimizer.zero_grad()
            F.cross_entropy(model(inputs), targets).backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            accuracy = (model(x[1400:]).argmax(1) == y[1400:]).float().mean().item()
        wandb.log({"epoch": epoch, "val_accuracy": accuracy, "n_params": n_params})
    run.finish()


if __name__ == "__main__":
    main()
