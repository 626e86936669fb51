"""The task: an MLP that predicts disease progression a year on from 10 baseline measurements (442
patients, scikit-learn's bundled ``load_diabetes``), judged by the validation mean squared error.

Features and target are standardised with the training split's statistics; ``val_mse`` is reported in
the target's own units (squared progression points), so it reads like scikit-learn's ``mean_squared_error``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import TensorDataset

from tune_service import Task


def split() -> tuple[TensorDataset, TensorDataset, float]:
    """The fixed train/validation split, standardised; and the target's standard deviation."""
    from sklearn.datasets import load_diabetes
    from sklearn.model_selection import train_test_split

    x, y = load_diabetes(return_X_y=True)
    train_x, val_x, train_y, val_y = train_test_split(x, y, test_size=0.25, random_state=0)
    x_mean, x_std = train_x.mean(0), train_x.std(0)
    y_mean, y_std = train_y.mean(), train_y.std()

    def tensors(features, target):
        return TensorDataset(torch.tensor((features - x_mean) / x_std, dtype=torch.float32),
                             torch.tensor((target - y_mean) / y_std, dtype=torch.float32).unsqueeze(1))

    return tensors(train_x, train_y), tensors(val_x, val_y), float(y_std)


class DiabetesRegression(Task):
    """An MLP of ``layers`` hidden layers of ``width`` units, trained on the mean squared error."""

    defaults = {"lr": 1e-2, "batch_size": 32, "optimizer": "adam", "weight_decay": 0.0, "width": 64,
                "layers": 2, "dropout": 0.0}
    data_hparams = ()  # a warm gang builds the data once
    metric_names = ("mse",)  # reported as val_mse

    def __init__(self):
        self.target_std = split()[2]

    def datasets(self, config):
        train, validation, _ = split()
        return train, validation

    def model(self, config):
        width, inputs = int(config["width"]), 10
        layers: list[nn.Module] = []
        for _ in range(int(config["layers"])):
            layers += [nn.Linear(inputs, width), nn.ReLU(), nn.Dropout(float(config["dropout"]))]
            inputs = width
        return nn.Sequential(*layers, nn.Linear(inputs, 1))

    def loss(self, outputs, targets):
        return F.mse_loss(outputs, targets)  # on the standardised target

    def metrics(self, outputs, targets):
        # A sum over the batch: the loop divides the total by the number of validation samples.
        return {"mse": ((outputs - targets) ** 2).sum() * self.target_std ** 2}
