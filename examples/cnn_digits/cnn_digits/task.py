"""The task: what tune-service's shared train loop needs to train this model on every rank of a trial.

The loop brings the rest (DDP, sharding, bf16 autocast, the cosine schedule with warm-up, gradient
clipping, checkpoints, metrics reduced over the ranks); ``sweep.yaml`` says how.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import TensorDataset

from tune_service import Task


class DigitsCNN(Task):
    """Two convolution blocks and a linear head on the 1x8x8 digit images, 10 classes."""

    defaults = {"lr": 3e-3, "batch_size": 64, "optimizer": "adamw", "weight_decay": 0.01,
                "channels": 32, "dropout": 0.1}
    data_hparams = ()  # the data never depend on the config: a warm gang builds them once

    def datasets(self, config):
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split

        digits = load_digits()  # ships with scikit-learn: nothing to download
        images = torch.tensor(digits.images / 16.0, dtype=torch.float32).unsqueeze(1)  # N x 1 x 8 x 8
        labels = torch.tensor(digits.target)
        train_x, val_x, train_y, val_y = train_test_split(images, labels, test_size=0.2, stratify=labels,
                                                          random_state=0)
        return TensorDataset(train_x, train_y), TensorDataset(val_x, val_y)

    def model(self, config):
        channels, dropout = int(config["channels"]), float(config["dropout"])
        return nn.Sequential(
            nn.Conv2d(1, channels, 3, padding=1), nn.BatchNorm2d(channels), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(channels, channels, 3, padding=1), nn.BatchNorm2d(channels), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(dropout), nn.Linear(channels, 10),
        )
    # loss (cross-entropy) and metrics (accuracy, reported as val_accuracy) are the Task defaults.
