"""Tasks in the shared loop's general form (tests/training/test_general_tasks.py): dict and dataclass
batches with their own steps, an iterable stream of samples, a custom collate, a task's own optimizer and
scheduler. Small, on the digits data, so that each trains in a second. And a task whose step torch.func
cannot batch (fused bundles refuse it)."""

from __future__ import annotations

import dataclasses
from collections import UserDict

import torch
import torch.nn.functional as F
from torch.utils.data import Dataset, IterableDataset

from tune_service.tasks import ResolvedTask
from tune_service.tasks.digits import Digits, load_digits_tensors
from tune_service.training import LocalContext, TrainingSettings, fit
from tune_service.training.loop import TrialConfig


class DigitDicts(Dataset):
    """The digits as ``{"pixels": ..., "label": ...}`` samples."""

    def __init__(self, tensors):
        self.pixels, self.labels = tensors.tensors

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, index):
        return {"pixels": self.pixels[index], "label": self.labels[index]}


class Encoding(UserDict):
    """A mapping that is not a dict, as a tokenizer's BatchEncoding is."""


@dataclasses.dataclass
class DigitBatch:
    pixels: torch.Tensor
    labels: torch.Tensor


class DictDigits(Digits):
    """Dict samples, collated into an :class:`Encoding` whose ``inputs`` is a :class:`DigitBatch`; the
    task's own training and validation steps, and a metric of its own (``error``)."""

    metric_names = ("error",)

    def __init__(self):
        self.batch_types = []

    def datasets(self, config):
        train, validation = load_digits_tensors()
        return DigitDicts(train), DigitDicts(validation)

    def collate(self, samples):
        stacked = torch.utils.data.default_collate(samples)
        return Encoding(inputs=DigitBatch(stacked["pixels"], stacked["label"]), size=len(samples))

    def training_step(self, model, batch, config):
        self.batch_types.append((type(batch).__name__, type(batch["inputs"]).__name__))
        logits = model(batch["inputs"].pixels)
        return F.cross_entropy(logits.float(), batch["inputs"].labels)

    def validation_step(self, model, batch, config):
        logits = model(batch["inputs"].pixels).float()
        labels = batch["inputs"].labels
        return {"loss": F.cross_entropy(logits, labels, reduction="sum"),
                "error": (logits.argmax(1) != labels).sum(), "samples": batch["size"]}


class IndexStream(IterableDataset):
    """``size`` samples ``(index, 0)`` as a stream (no random access); it remembers its epochs."""

    def __init__(self, size: int, with_length: bool = True):
        self.size, self.with_length, self.epochs = size, with_length, []

    def set_epoch(self, epoch):
        self.epochs.append(epoch)

    def __iter__(self):
        for index in range(self.size):
            yield torch.tensor([float(index)]), torch.tensor(0)

    def __len__(self):
        if not self.with_length:
            raise TypeError("a stream of unknown length")
        return self.size


class StreamedIndices(Digits):
    """An iterable training and validation stream of indices; records every index its rank trains on."""

    metric_names = ()
    data_hparams = None

    def __init__(self, size: int = 101, with_length: bool = True):
        self.stream = IndexStream(size, with_length)
        self.validation = IndexStream(size, with_length)
        self.trained = []

    def datasets(self, config):
        return self.stream, self.validation

    def model(self, config):
        return torch.nn.Linear(1, 2)

    def metrics(self, outputs, targets):
        return {}

    def training_step(self, model, batch, config):
        inputs, targets = batch
        self.trained.extend(int(i) for i in inputs.flatten().tolist())
        return F.cross_entropy(model(inputs).float(), targets)


class StepLRDigits(Digits):
    """Its own SGD and StepLR from ``configure_optimizers``, halving the lr every 4 optimizer steps."""

    def configure_optimizers(self, model, config):
        optimizer = torch.optim.SGD(model.parameters(), lr=float(config["lr"]), momentum=0.5)
        return optimizer, torch.optim.lr_scheduler.StepLR(optimizer, step_size=4, gamma=0.5)


def resolved(task) -> ResolvedTask:
    return ResolvedTask(type(task).__name__, task=task)


class Interrupted(Exception):
    """The trial's process stopped (as a killed one would) after a report."""


class InterruptingContext(LocalContext):
    """A LocalContext that stops the trial right after the report (and checkpoint) whose ``key`` (``epoch``
    or ``step``) is ``value``."""

    def __init__(self, output_dir, key: str, value: int):
        super().__init__(output_dir=output_dir)
        self.key, self.value = key, value

    def report(self, metrics, checkpoint_dir):
        super().report(metrics, checkpoint_dir)
        if metrics[self.key] == self.value:
            raise Interrupted(f"stopped after {self.key} {self.value}")


def train(task, epochs=1, settings=None, output_dir=None, interrupt_after=None, max_steps=None,
          **hparams) -> LocalContext:
    """``task`` trained in this process for ``epochs``, or ``max_steps`` optimizer steps when given
    (stopped after the report of epoch, or step, ``interrupt_after`` if given); the context holds its
    reports."""
    key = "step" if max_steps is not None else "epoch"
    context = LocalContext(output_dir=output_dir) if interrupt_after is None else InterruptingContext(
        output_dir, key, interrupt_after)
    fit(TrialConfig(resolved(task), {**Digits.defaults, **hparams}, epochs=None if max_steps else epochs, seed=0,
                    settings=settings or TrainingSettings(checkpoint_every=0), max_steps=max_steps), context)
    return context


def streamed_ranks(size: int, accumulation: int) -> dict:
    """A 2-rank trial on :class:`StreamedIndices` (run it with ``ddp_harness.run_ranks``): what this rank
    trained on, and its reports."""
    import torch.distributed as dist

    task = StreamedIndices(size)
    context = train(task, epochs=1, settings=TrainingSettings(checkpoint_every=0, grad_accum_steps=accumulation),
                    batch_size=8)
    return {"rank": dist.get_rank(), "trained": task.trained, "reports": context.reports}


class BranchingDigits(Digits):
    """A training step whose control flow depends on the data: torch.func cannot batch it."""

    def training_step(self, model, batch, config):
        inputs, targets = batch
        outputs = model(inputs)
        if outputs.sum() > 0:
            outputs = outputs * 2
        return self.loss(outputs.float(), targets)
