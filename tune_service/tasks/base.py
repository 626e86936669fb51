"""The Task protocol: what the shared train loop needs to train a user's model.

A task is a small object (or class) with two required methods; the shared loop in
:mod:`tune_service.training.loop` brings DDP, data sharding, mixed precision, checkpoints, metric
reduction and reporting. Every method receives the trial's hyperparameters (``config``: the task's
``defaults`` overlaid with what the searcher sampled), is called on every rank, and must be
deterministic given ``config``.

Example::

    class MyTask(Task):
        defaults = {"lr": 1e-3, "batch_size": 64, "width": 128}

        def datasets(self, config):
            return train_dataset, val_dataset          # map-style torch Datasets of (input, target)

        def model(self, config):
            return torch.nn.Sequential(...)

        def loss(self, outputs, targets):              # optional: cross-entropy by default
            return torch.nn.functional.cross_entropy(outputs, targets)

A task whose batches are not ``(input, target)`` (dicts from a tokenizer, a detector's images and boxes)
overrides the steps instead of ``loss`` and ``metrics``::

    class MyTransformerTask(Task):
        metric_names = ("token_accuracy",)

        def training_step(self, model, batch, config):  # batch: on the rank's device, under autocast
            logits = model(batch["input_ids"])
            return F.cross_entropy(logits.float().flatten(0, 1), batch["labels"].flatten())

        def validation_step(self, model, batch, config):
            logits = model(batch["input_ids"]).float()
            labels = batch["labels"]
            return {"loss": F.cross_entropy(logits.flatten(0, 1), labels.flatten(), reduction="sum"),
                    "token_accuracy": (logits.argmax(-1) == labels).sum(), "samples": labels.numel()}
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Mapping, Sequence

import torch
import torch.nn.functional as F


#: What the shared loop reports every epoch for every task, beside ``val_<name>`` per task metric.
LOOP_REPORTS = (
    "epoch",
    "step",
    "train_loss",
    "val_loss",
    "world_size",
    "batch_per_rank",
    "grad_accum_steps",
    "global_batch",
    "lr",
    "precision",
    "epoch_time_s",
    "n_params",
    "latency_ms",
)
#: The loop's reports that are measured times: they differ between two runs of one config.
TIMED_REPORTS = ("epoch_time_s", "latency_ms")
#: The hyperparameters the shared loop reads for every task (and any argument of the torch optimizer
#: the config names: betas, eps, nesterov, ...; see tune_service.tasks.optimizers).
LOOP_HYPERPARAMETERS = ("lr", "batch_size", "optimizer", "weight_decay", "momentum")
#: A task's ``hyperparameters`` when it takes any config key.
ANY = "any"


class Task:
    """Base class of a trainable task. Subclasses override ``datasets`` and ``model``.

    Contract:
        - ``defaults``: hyperparameters the task understands, with the values used when the sweep does
          not search them. The shared loop reads ``lr``, ``batch_size`` (global, over all ranks, unless
          ``training.batch_size_scope`` is ``per_rank``), ``optimizer`` (any ``torch.optim`` optimizer
          by name, any case: adam, adamw, sgd, rmsprop, nadam, ...; adam by default) and that
          optimizer's arguments (``weight_decay``, ``momentum``, ``betas``, ``eps``, ...; SGD's momentum
          is 0.9 unless given).
        - ``datasets(config) -> (train, validation)``: torch Datasets, map-style (sharded over the ranks
          by a DistributedSampler) or iterable (each rank and loader worker takes its own share of the
          stream); of ``(input, target)`` pairs unless the steps below are overridden. The validation
          set must have at least as many samples as there are ranks.
        - ``model(config) -> nn.Module``: a fresh model; the loop moves it to the rank's device and
          wraps it in DDP. Seeded identically on every rank, so every rank starts from the same weights.
        - ``loss(outputs, targets) -> scalar tensor``: the mean loss of a batch, computed in fp32 (the
          loop casts the outputs); cross-entropy unless overridden.
        - ``metrics(outputs, targets) -> {name: tensor}``: *sums* over the batch (e.g. the number of
          correct predictions); each is reported as ``val_<name>`` = sum over the whole validation set
          / its size. Default: ``accuracy`` by argmax. Return ``{}`` for none.

    The general form, for batches of any structure (tuples, lists, dicts, dataclasses, any nesting; the
    loop moves every tensor in them to the rank's device):
        - ``training_step(model, batch, config) -> loss | (loss, samples)``: the mean loss of a training
          batch (the loop scales it for accumulation and calls backward), run under the trial's autocast;
          compute the loss in fp32 (``logits.float()``). ``samples`` (the batch's size, for the mean
          ``train_loss``) defaults to the leading dimension of the batch's first tensor.
        - ``validation_step(model, batch, config) -> {name: sum}``: *sums* over the batch, ``loss`` among
          them, and ``samples`` (the count the sums are divided by; the leading dimension of the batch's
          first tensor when absent). Run under ``no_grad`` and autocast; reported as ``val_<name>`` =
          total over the validation set / total samples.
        The defaults implement the short form above: ``augment``, the model on ``inputs``, ``loss`` and
        ``metrics`` on its outputs in fp32.

    Optional hooks:
        - ``augment(inputs, targets, config) -> (inputs, targets)``: applied to each training batch on the
          device. Random draws here differ per rank and per epoch (the loop seeds each rank apart).
        - ``collate(samples) -> batch``: the DataLoader's ``collate_fn`` (torch's default_collate when
          not defined).
        - ``configure_optimizers(model, config) -> optimizer | (optimizer, lr_scheduler)``: build them
          yourself, for the plain (unwrapped) ``model``'s parameters. A scheduler returned is stepped
          every optimizer step (or every epoch with ``training.schedule.interval: epoch``), and its state
          is checkpointed; without one, the spec's warm-up and schedule scale each group's lr. The
          trial's lr is yours to read from ``config``.
        - ``ddp_comm_hook() -> (state, hook) | None``: a DDP communication hook (e.g. PyTorch's
          ``fp16_compress_hook``) registered on the DDP wrapper at world size > 1.

    What it reports and takes (``--dry-run`` and ``run`` check a spec against them):
        - ``metric_names``: the names ``metrics`` returns (``("accuracy",)`` for the default); the
          task reports ``val_<name>`` for each, beside :data:`LOOP_REPORTS`. A subclass that overrides
          ``metrics`` without declaring them is not checked.
        - ``hyperparameters``: the config keys it reads. By default, those of ``defaults`` and
          ``data_hparams`` and the shared loop's (:data:`LOOP_HYPERPARAMETERS`, and any torch optimizer's
          argument while the loop builds the optimizer); :data:`ANY` takes any
          (a task that passes its config on whole). A searched parameter the task does not take would
          be searched for nothing, so a spec with one is refused.

    Optional attribute:
        - ``data_hparams``: the hyperparameters that shape what ``datasets`` returns. A warm gang keeps
          the data sets it built and hands them to the next trial whose values of these match; ``()``
          says the data never depend on the config. ``None`` (the default): built anew for every trial.
          The data sets are then shared by trials, so ``datasets`` must not return objects a trial
          changes.
    """

    name: str = "task"
    defaults: Mapping[str, Any] = {}
    #: The DataLoader's ``collate_fn``; a task may define it as a method ``collate(self, samples)``.
    collate: Callable[[list], Any] | None = None
    data_hparams: tuple[str, ...] | None = None
    metric_names: tuple[str, ...] = ("accuracy",)
    hyperparameters: tuple[str, ...] | str | None = None

    def reported_metrics(self) -> tuple[str, ...] | None:
        """Every name the task reports each epoch; None when it does not say (``metrics`` overridden
        and ``metric_names`` not declared)."""
        declared = any("metric_names" in vars(cls) for cls in type(self).__mro__ if cls not in (Task, object))
        own_metrics = type(self).metrics is not Task.metrics or type(self).validation_step is not Task.validation_step
        if own_metrics and not declared:
            return None
        return (*LOOP_REPORTS, *(f"val_{name}" for name in self.metric_names))

    def taken_hyperparameters(self) -> tuple[str, ...] | None:
        """Every config key the task reads, sorted; None when it takes any."""
        if self.hyperparameters == ANY:
            return None
        if self.hyperparameters is not None:
            return tuple(sorted({*self.hyperparameters, *LOOP_HYPERPARAMETERS}))
        return tuple(sorted({*self.defaults, *(self.data_hparams or ()), *LOOP_HYPERPARAMETERS}))

    def datasets(self, config: Mapping[str, Any]):
        raise NotImplementedError

    def model(self, config: Mapping[str, Any]) -> torch.nn.Module:
        raise NotImplementedError

    def loss(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(outputs, targets)

    def metrics(self, outputs: torch.Tensor, targets: torch.Tensor) -> Mapping[str, torch.Tensor]:
        return {"accuracy": (outputs.argmax(dim=1) == targets).sum()}

    def augment(
        self, inputs: torch.Tensor, targets: torch.Tensor, config: Mapping[str, Any]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return inputs, targets

    def ddp_comm_hook(self) -> tuple[Any, Callable] | None:
        return None

    def configure_optimizers(self, model: torch.nn.Module, config: Mapping[str, Any]) -> Any:
        return None  # the loop builds the optimizer the config names

    def training_step(
        self, model: torch.nn.Module, batch: Sequence[torch.Tensor], config: Mapping[str, Any]
    ) -> tuple[torch.Tensor, int]:
        inputs, targets = batch
        inputs, targets = self.augment(inputs, targets, config)
        outputs = model(inputs)
        with _without_autocast(outputs):  # the loss in fp32 whatever the autocast dtype
            return self.loss(outputs.float(), targets), targets.shape[0]

    def validation_step(
        self, model: torch.nn.Module, batch: Sequence[torch.Tensor], config: Mapping[str, Any]
    ) -> Mapping[str, torch.Tensor | int]:
        inputs, targets = batch
        outputs = model(inputs)
        with _without_autocast(outputs):  # loss and metrics in fp32
            return self._validation_sums(outputs.float(), targets)

    def _validation_sums(self, outputs: torch.Tensor, targets: torch.Tensor) -> dict[str, torch.Tensor | int]:
        samples = targets.shape[0]
        return {
            "loss": self.loss(outputs, targets).double() * samples,
            **self.metrics(outputs, targets),
            "samples": samples,
        }


def _without_autocast(outputs: torch.Tensor) -> Any:
    """A context with autocast off on ``outputs``' device where it is on (nothing to enter where it is off:
    the common fp32 case costs no context switch per step)."""
    device = outputs.device.type
    return torch.autocast(device, enabled=False) if torch.is_autocast_enabled(device) else contextlib.nullcontext()
