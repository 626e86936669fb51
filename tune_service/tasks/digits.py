"""The built-in ``digits`` task: the 8x8 handwritten digits scikit-learn bundles (1797 images, 10 classes;
UCI's Optical Recognition of Handwritten Digits, CC BY 4.0).

The split ships with this package (``data/digits.npz``, 47 KB): scikit-learn's ``load_digits()`` split by
``train_test_split(test_size=0.2, stratify=target, random_state=1234)``, pixels as stored (0-16). Nothing
is downloaded at run time, and a rank does not import scikit-learn (1.9 s of every new gang's first
trial); tests/unit/tasks/test_digits_data.py checks the file against scikit-learn's own split. The split
is fixed (it does not depend on the trial's seed) so every trial of a sweep is judged on the same
validation images.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import torch
from torch import nn
from torch.utils.data import TensorDataset

from tune_service.tasks.base import Task

SPLIT_SEED = 1234
VALIDATION_FRACTION = 0.2
#: The shipped split (see the module's docstring).
DATA_FILE = Path(__file__).parent / "data" / "digits.npz"


def load_digits_tensors() -> tuple[TensorDataset, TensorDataset]:
    """The fixed, stratified train/validation split of the digits, pixels scaled to [0, 1]."""
    import numpy as np

    with np.load(DATA_FILE) as data:

        def tensors(part: str) -> TensorDataset:
            return TensorDataset(
                torch.tensor(data[f"x_{part}"] / 16.0, dtype=torch.float32),
                torch.tensor(data[f"y_{part}"], dtype=torch.long),
            )

        return tensors("train"), tensors("val")


class Digits(Task):
    """An MLP (``model: mlp``) or a small CNN with BatchNorm (``model: cnn``) on the 8x8 digits.

    Hyperparameters: ``model``, ``hidden`` (units per hidden layer / CNN channels), ``layers``
    (MLP hidden layers), ``dropout``, ``noise`` (std of the Gaussian pixel noise added to training
    images as augmentation), plus the shared loop's ``lr``, ``batch_size``, ``optimizer``,
    ``weight_decay``, ``momentum``. The CNN has BatchNorm (SyncBatchNorm on multi-GPU trials).

    Reports (the shared loop's, :data:`~tune_service.tasks.base.LOOP_REPORTS`) ``val_accuracy`` beside what
    a model costs, ``n_params`` and ``latency_ms``: what ``search_spaces/multi_objective.yaml`` trades.
    """

    name = "digits"
    data_hparams = ()  # the fixed split: a warm gang builds it once
    defaults = {
        "model": "mlp",
        "hidden": 64,
        "layers": 1,
        "dropout": 0.0,
        "noise": 0.0,
        "lr": 3e-3,
        "batch_size": 64,
        "optimizer": "adam",
        "weight_decay": 0.0,
        "momentum": 0.9,
    }

    def datasets(self, config: Mapping[str, Any]):
        return load_digits_tensors()

    def augment(self, inputs: torch.Tensor, targets: torch.Tensor, config: Mapping[str, Any]):
        noise = float(config.get("noise", 0.0))
        if noise > 0:
            inputs = inputs + noise * torch.randn_like(inputs)
        return inputs, targets

    def model(self, config: Mapping[str, Any]) -> nn.Module:
        hidden, dropout = int(config["hidden"]), float(config["dropout"])
        if config["model"] == "cnn":
            return nn.Sequential(
                nn.Unflatten(1, (1, 8, 8)),
                nn.Conv2d(1, hidden, 3, padding=1),
                nn.BatchNorm2d(hidden),
                nn.ReLU(),
                nn.MaxPool2d(2),
                nn.Conv2d(hidden, hidden, 3, padding=1),
                nn.BatchNorm2d(hidden),
                nn.ReLU(),
                nn.AdaptiveAvgPool2d(1),
                nn.Flatten(),
                nn.Dropout(dropout),
                nn.Linear(hidden, 10),
            )
        if config["model"] != "mlp":
            raise ValueError(f"digits: model must be mlp or cnn, got {config['model']!r}")
        layers: list[nn.Module] = []
        width = 64
        for _ in range(int(config["layers"])):
            layers += [nn.Linear(width, hidden), nn.ReLU(), nn.Dropout(dropout)]
            width = hidden
        return nn.Sequential(*layers, nn.Linear(width, 10))
