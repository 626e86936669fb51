"""The task: a 2-layer transformer encoder that labels every token of a sequence with the sum of it and
the token before it, modulo the vocabulary (the first token is labelled with itself), on sequences made
by a seeded generator. Learnable only by attending to the previous position.

Batches are dicts (``{"tokens": ..., "labels": ...}``), so the task gives its own ``training_step`` and
``validation_step``: the loop moves every tensor of a batch to the rank's device and calls them.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import Dataset

from tune_service import Task

VOCAB, LENGTH = 16, 12


class PairSums(Dataset):
    """``size`` sequences of ``LENGTH`` random tokens and their labels, drawn from ``seed``."""

    def __init__(self, size: int, seed: int):
        generator = torch.Generator().manual_seed(seed)
        self.tokens = torch.randint(0, VOCAB, (size, LENGTH), generator=generator)
        previous = torch.cat([torch.zeros(size, 1, dtype=torch.long), self.tokens[:, :-1]], dim=1)
        self.labels = (self.tokens + previous) % VOCAB

    def __len__(self):
        return len(self.tokens)

    def __getitem__(self, index):
        return {"tokens": self.tokens[index], "labels": self.labels[index]}


class TinyTransformer(nn.Module):
    def __init__(self, width: int, layers: int, heads: int, dropout: float):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, width)
        self.position = nn.Parameter(torch.zeros(LENGTH, width))
        layer = nn.TransformerEncoderLayer(width, heads, 2 * width, dropout, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(width, VOCAB)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(self.embed(tokens) + self.position))


class SequenceTransformer(Task):
    defaults = {"lr": 3e-3, "batch_size": 64, "optimizer": "adamw", "weight_decay": 0.01,
                "width": 32, "layers": 2, "heads": 4, "dropout": 0.0}
    data_hparams = ()  # the data are the same for every trial: a warm gang builds them once
    metric_names = ("token_accuracy",)  # reported as val_token_accuracy

    def datasets(self, config):
        return PairSums(4000, seed=0), PairSums(500, seed=1)

    def model(self, config):
        return TinyTransformer(int(config["width"]), int(config["layers"]), int(config["heads"]),
                               float(config["dropout"]))

    def training_step(self, model, batch, config):
        logits = model(batch["tokens"])  # under the trial's autocast
        loss = F.cross_entropy(logits.float().flatten(0, 1), batch["labels"].flatten())  # the loss in fp32
        return loss, batch["labels"].numel()  # train_loss is per token

    def validation_step(self, model, batch, config):
        logits = model(batch["tokens"]).float()
        labels = batch["labels"]
        return {"loss": F.cross_entropy(logits.flatten(0, 1), labels.flatten(), reduction="sum"),
                "token_accuracy": (logits.argmax(-1) == labels).sum(), "samples": labels.numel()}
