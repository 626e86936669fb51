"""Fused bundles: K trials of one architecture trained as one job on one device, through ``torch.func``.

Each member's model is built exactly as it would be alone (the task's ``model(config)`` under the
trial's seed). Their parameters are then laid side by side in one flat ``[K, N]`` tensor, a row per
member and each parameter a view into its row, and their buffers (BatchNorm's running statistics) are
stacked. One ``vmap`` over ``functional_call`` runs every member's forward and backward on the same
batch, and one :class:`StackedOptimizer` steps every member with its own hyperparameters in a handful
of kernels over ``[K, N]``, whatever the number of tensors in the model. On a GPU that is what turns K
launch-bound trials into one job that keeps the device busy (HFTA, MLSys 2021, did it by rewriting
the models; ``torch.func`` does it for an unchanged one).

Members share everything but the hyperparameters of :data:`FUSABLE`: the data (and its order: the
sweep has one seed), the batch size, the architecture, the optimizer's kind, the schedule's shape.
:func:`bundle_key` is what must be equal. Everything else a member gets is its own: initial weights,
optimizer state, learning rate, schedule, clipping, validation metrics, and its end: a member that
diverges or is stopped leaves the bundle, and the rest go on.

A member trains to what it would alone up to float rounding: a batched matrix product and the
stacked optimizer's arithmetic round differently from K single ones (``tests/training/test_fused.py``
states the tolerance). Random draws inside the step (dropout, augmentation) are each member's own
(``vmap``'s ``randomness="different"``), equal in distribution to the alone run's, not draw for draw.
"""

from __future__ import annotations

import copy
import inspect
import itertools
import json
import math
import time
import types
import warnings
from pathlib import Path
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Mapping, Sequence, cast

import torch
from torch import nn
from torch.func import functional_call, stack_module_state, vmap

from tune_service.errors import first_line
from tune_service.spec.training import TrainingSettings
from tune_service.tasks import Task
from tune_service.training.batches import count_samples, move_to_device
from tune_service.training.checkpoint import write_state
from tune_service.training.data import RankLoaders, build_loaders, loader_settings, plan_batches, steps_per_epoch_of
from tune_service.training.distributed import RankInfo, rank_epoch_seed, seed_everything
from tune_service.training.guards import NonFiniteLoss, check_finite_losses
from tune_service.training.loop import (
    learning_rate_schedule,
    parameter_count,
    report_metrics,
    step_loss,
    validation_metrics,
)
from tune_service.training.oom import hold_to_gpu_share
from tune_service.training.optim import LearningRateSchedule, make_optimizer, optimizer_settings
from tune_service.training.precision import Precision, choose_precision
from tune_service.training.trial_config import TrialConfig

#: The hyperparameters in which members of one bundle may differ: the optimizer's.
FUSABLE = ("lr", "weight_decay", "momentum", "dampening", "nesterov", "betas", "eps")
#: The optimizers :class:`StackedOptimizer` steps (torch's arithmetic, a member per row).
FUSED_OPTIMIZERS = ("sgd", "adam", "adamw")


class NotFusable(ValueError):
    """A trial that cannot train in a bundle; the message says why (it then trains alone)."""


def bundle_key(hparams: Mapping[str, Any]) -> str:
    """What trials of one bundle share: every hyperparameter but those of :data:`FUSABLE`, canonically."""
    return json.dumps({k: v for k, v in hparams.items() if k not in FUSABLE}, sort_keys=True, default=repr)


def refusal(task: Task, config: TrialConfig, world_size: int = 1) -> str | None:
    """Why ``config``'s trial cannot train in a bundle, or None. What a trial's settings decide; whether
    torch.func can run the task's step is found by trying it (:func:`setup_bundle` raises
    :class:`NotFusable` then)."""
    if world_size != 1:
        return f"a bundle trains on one rank; the trial has {world_size}"
    if type(task).configure_optimizers is not Task.configure_optimizers:
        return "the task builds its own optimizer (configure_optimizers), which the bundle cannot stack"
    name = str(config.hparams.get("optimizer", "adam")).lower()
    if name not in FUSED_OPTIMIZERS:
        return f"optimizer {name!r} is not one a bundle stacks ({', '.join(FUSED_OPTIMIZERS)})"
    if config.settings.precision == "fp16":
        return "fp16's loss scaler skips a step for every member when one member's gradients overflow"
    if config.max_steps is not None:
        return "a bundle trains whole epochs; the trial counts optimizer steps (max_steps)"
    return None


def _member_arguments(hparams: Sequence[Mapping[str, Any]], lr_scale: float) -> tuple[str, list[dict[str, Any]]]:
    """The optimizer all members name, and each member's constructor arguments with torch's defaults
    filled in (so each is a number to stack), its lr times ``lr_scale`` (the loop's ``lr_scaling``)."""
    names = {str(h.get("optimizer", "adam")).lower() for h in hparams}
    if len(names) != 1:
        raise NotFusable(f"members of a bundle use one optimizer, got {', '.join(sorted(names))}")
    arguments = []
    for h in hparams:
        cls, given = optimizer_settings(h)
        defaults = {
            k: p.default for k, p in inspect.signature(cls.__init__).parameters.items() if p.default is not p.empty
        }
        arguments.append({**defaults, **given, "lr": float(h["lr"]) * lr_scale})
    return names.pop(), arguments


class StackedOptimizer:
    """SGD, Adam or AdamW over ``[K, N]`` parameters, member ``k`` a row with its own hyperparameters.

    The arithmetic is torch's single-tensor implementation's, with each per-member number a ``[K, 1]``
    column. Every number is put on the device once; a step launches a fixed handful of kernels and never
    waits on the device (the schedule's factor is a Python number common to all members).
    """

    def __init__(self, name: str, arguments: Sequence[Mapping[str, Any]], parameters: torch.Tensor):
        self.name = name
        self.parameters = parameters
        device = parameters.device

        def column(key: str, dtype: torch.dtype = torch.float32, index: int | None = None) -> torch.Tensor:
            values = [float(a[key] if index is None else a[key][index]) for a in arguments]
            return torch.tensor(values, dtype=dtype, device=device).unsqueeze(1)

        self.peak_lr = column("lr")
        self.weight_decay = column("weight_decay")
        if name == "sgd":
            if any(a.get("maximize") for a in arguments):
                raise NotFusable("a bundle does not stack SGD with maximize")
            self.momentum = column("momentum")
            # torch keeps no momentum buffer where momentum is 0, so dampening does not apply there
            self.dampening_complement = torch.where(self.momentum == 0, 1.0, 1 - column("dampening"))
            self.nesterov = column("nesterov").bool()
            self.momentum_buffer: torch.Tensor | None = None
        else:
            if any(a.get("amsgrad") or a.get("maximize") for a in arguments):
                raise NotFusable("a bundle does not stack Adam with amsgrad or maximize")
            self.decoupled = name == "adamw"
            self.beta1, self.beta2 = column("betas", torch.float64, 0), column("betas", torch.float64, 1)
            self.beta1_complement = (1 - self.beta1).float()
            self.beta2_f, self.beta2_complement = self.beta2.float(), (1 - self.beta2).float()
            self.eps = column("eps")
            self.exp_avg = torch.zeros_like(parameters)
            self.exp_avg_sq = torch.zeros_like(parameters)
        self.steps = 0
        self.lr = self.peak_lr
        #: Each member's lr of the latest step, as the loop reports it (a Python float, not float32).
        self.peak_lr_values = [float(a["lr"]) for a in arguments]
        self.factor = 1.0

    def set_factor(self, factor: float) -> None:
        """Every member's lr for the next step: its peak times the schedule's ``factor``."""
        self.factor = factor
        self.lr = self.peak_lr * factor if factor != 1.0 else self.peak_lr

    def lrs(self) -> list[float]:
        """Each member's lr of the latest step (the loop's report, computed as the loop computes it)."""
        return [peak * self.factor for peak in self.peak_lr_values]

    def keep(self, rows: torch.Tensor, parameters: torch.Tensor) -> None:
        """Keep the members at ``rows`` (the others left the bundle); ``parameters`` are the kept rows."""
        self.parameters = parameters
        for name, value in list(vars(self).items()):  # every per-member column and [K, N] state
            if isinstance(value, torch.Tensor) and value is not parameters and value.dim() == 2:
                setattr(self, name, value[rows])
        kept = rows.tolist()
        self.peak_lr_values = [self.peak_lr_values[row] for row in kept]

    def member_state(self, views: Callable[[torch.Tensor], list[torch.Tensor]]) -> dict[int, dict[str, Any]]:
        """One member's optimizer state in its torch optimizer's form (``state_dict()["state"]``), per
        parameter index; ``views`` cuts the member's row of a ``[K, N]`` state into its parameters."""
        if self.name == "sgd":
            buffers: list[Any] = (
                views(self.momentum_buffer)
                if self.momentum_buffer is not None
                else [None] * len(views(self.parameters))
            )
            return {i: {"momentum_buffer": b.clone() if b is not None else None} for i, b in enumerate(buffers)}
        step = torch.tensor(float(self.steps))  # torch keeps Adam's step as a float tensor
        return {
            i: {"step": step.clone(), "exp_avg": avg.clone(), "exp_avg_sq": sq.clone()}
            for i, (avg, sq) in enumerate(zip(views(self.exp_avg), views(self.exp_avg_sq), strict=True))
        }

    @torch.no_grad()
    def step(self, grad: torch.Tensor) -> None:
        param = self.parameters
        self.steps += 1
        if self.name == "sgd":
            d_p = grad.addcmul(param, self.weight_decay)
            if self.momentum_buffer is None:
                self.momentum_buffer = d_p.clone()
            else:
                self.momentum_buffer.mul_(self.momentum).addcmul_(d_p, self.dampening_complement)
            d_p = torch.where(self.nesterov, d_p.addcmul(self.momentum_buffer, self.momentum), self.momentum_buffer)
            param.addcmul_(d_p, self.lr, value=-1)
            return
        if self.decoupled:
            param.mul_(1 - self.lr * self.weight_decay)
        else:
            grad = grad.addcmul(param, self.weight_decay)
        self.exp_avg.lerp_(grad, self.beta1_complement)
        self.exp_avg_sq.mul_(self.beta2_f).addcmul_(grad, grad * self.beta2_complement)
        bias_correction1 = (1 - self.beta1**self.steps).float()
        bias_correction2_sqrt = (1 - self.beta2**self.steps).sqrt().float()
        denom = (self.exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(self.eps)
        param.addcdiv_(self.exp_avg * (-self.lr / bias_correction1), denom)


class _Member:
    """What a task's step calls as ``model(...)``: the shared module with one member's tensors (inside
    ``vmap``, a row of the bundle's)."""

    def __init__(self, base: nn.Module, tensors: tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]):
        self._base, self._tensors = base, tensors

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return functional_call(self._base, self._tensors, args, kwargs)


#: BatchNorm's modules, whose running statistics are a member's own (stacked like its parameters).
BATCH_NORMS = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)


def _batch_norm_in_its_statistics_dtype(module: nn.Module, input: torch.Tensor) -> torch.Tensor:
    """BatchNorm of a bf16 or fp16 input (autocast's output of the layer before) computed on the input cast
    to its running statistics' dtype (fp32), the result cast back. CUDA's kernel takes the mixed dtypes
    itself, as it runs alone; under ``vmap`` the batching rule refuses them."""
    statistics = getattr(module, "running_mean", None)
    forward = type(module).forward
    if statistics is None or input.dtype == statistics.dtype:
        return forward(module, input)
    with torch.autocast(input.device.type, enabled=False):
        return forward(module, input.to(statistics.dtype)).to(input.dtype)


class FusedModels:
    """K models of one architecture as one: a flat ``[K, N]`` parameter tensor with each parameter a
    view into it (gradients accumulate into ``grad``, equally flat), and stacked buffers."""

    def __init__(self, models: Sequence[nn.Module]):
        shapes = [[(n, p.shape, p.dtype) for n, p in m.named_parameters()] for m in models]
        if any(s != shapes[0] for s in shapes[1:]):
            raise NotFusable("the members' models differ in their parameters (names, shapes or dtypes)")
        if len({p.dtype for _, p in models[0].named_parameters()}) > 1:
            raise NotFusable("a bundle stacks models whose parameters have one dtype")
        stacked, self.buffers = stack_module_state(list(models))
        self.members = len(models)
        self.shapes = {name: tuple(t.shape[1:]) for name, t in stacked.items()}
        self.data = torch.cat([t.detach().reshape(self.members, -1) for t in stacked.values()], dim=1)
        self.grad = torch.zeros_like(self.data)
        self._make_views()
        # The shared module runs every member's tensors; its own are never used.
        self.base = copy.deepcopy(models[0]).to("meta")
        for module in self.base.modules():
            if isinstance(module, BATCH_NORMS):
                module.forward = types.MethodType(_batch_norm_in_its_statistics_dtype, module)  # type: ignore[method-assign]

    def _make_views(self) -> None:
        self.parameters: dict[str, torch.Tensor] = {}
        for name, (start, size, shape) in self.layout().items():
            leaf = self.data[:, start : start + size].view(self.members, *shape).requires_grad_()
            leaf.grad = self.grad[:, start : start + size].view(self.members, *shape)
            self.parameters[name] = leaf

    def layout(self) -> dict[str, tuple[int, int, tuple[int, ...]]]:
        """Where each parameter lies in a row: its start, size and shape, in the model's order."""
        layout, start = {}, 0
        for name, shape in self.shapes.items():
            layout[name] = (start, math.prod(shape), shape)
            start += math.prod(shape)
        return layout

    def row_views(self, flat: torch.Tensor, row: int) -> list[torch.Tensor]:
        """Row ``row`` of a ``[K, N]`` tensor laid out as the parameters (the data, or an optimizer's
        state), as one tensor per parameter in the model's order."""
        return [flat[row, start : start + size].view(shape) for start, size, shape in self.layout().values()]

    def keep(self, rows: torch.Tensor) -> None:
        """Keep the members at ``rows``, in that order."""
        self.data, self.grad = self.data[rows].clone(), self.grad[rows].clone()
        self.buffers = {name: b[rows].clone() for name, b in self.buffers.items()}
        self.members = len(rows)
        self._make_views()

    def member_state(self, row: int) -> dict[str, torch.Tensor]:
        """Member ``row``'s ``state_dict``, as its model alone would give it."""
        return {
            **{n: p.detach()[row].clone() for n, p in self.parameters.items()},
            **{n: b[row].clone() for n, b in self.buffers.items()},
        }

    def vmapped(self, step: Callable[[nn.Module, Any], Any]) -> Callable[[Any], Any]:
        """``step(model, batch)`` run for every member on the same batch; each output gains a leading
        member dimension."""

        def one(params: dict[str, torch.Tensor], buffers: dict[str, torch.Tensor], batch: Any) -> Any:
            # what the task's step calls as its model (it only calls it: the probe refuses a task that does more)
            return step(cast(nn.Module, _Member(self.base, (params, buffers))), batch)

        batched = vmap(one, in_dims=(0, 0, None), randomness="different")
        return lambda batch: batched(self.parameters, self.buffers, batch)


@dataclass
class MemberEnd:
    """How a member left the bundle: ``reason`` is ``finished``, ``stopped`` or ``diverged`` (with ``error``)."""

    reason: str
    error: BaseException | None = None


@dataclass
class FusedRun:
    """One bundle's training state on its device (built by :func:`setup_bundle`)."""

    task: Task
    configs: list[TrialConfig]
    models: FusedModels
    optimizer: StackedOptimizer
    loaders: RankLoaders
    precision: Precision
    device: torch.device
    schedule: LearningRateSchedule
    clip_grad_norm: float
    #: Each member's optimizer ``param_groups`` as its own torch optimizer gives them (what its checkpoint
    #: holds beside the state), by its index in the bundle as it was built.
    param_groups: list[list[dict[str, Any]]] = field(default_factory=list)
    #: The members still training, by their index in the bundle as it was built.
    active: list[int] = field(default_factory=list)
    epochs_done: int = 0
    steps_done: int = 0

    def member_checkpoint(self, member: int) -> dict[str, Any]:
        """The checkpoint state of ``member`` (still in the bundle) as the shared loop writes a trial's: the
        same trial run alone resumes from it (``fit``), and so does a member of a new bundle."""
        row = self.active.index(member)
        config = self.configs[member]
        optimizer = self.optimizer
        groups = []
        for group in self.param_groups[member]:
            peak = optimizer.peak_lr_values[row]
            scheduled = {} if self.schedule.constant else {"initial_lr": peak}  # as LearningRateSchedule.apply
            groups.append({**group, **scheduled, "lr": peak * optimizer.factor})
        return {
            "model": self.models.member_state(row),
            "optimizer": {
                "state": optimizer.member_state(lambda flat: self.models.row_views(flat, row)),
                "param_groups": groups,
            },
            "scaler": self.precision.scaler().state_dict(),  # empty: a bundle runs fp32 or bf16
            "epoch": self.epochs_done,
            "epoch_batches": 0,
            "step": self.steps_done,
            "scheduler": None,
            "meta": {
                "task": config.task.reference,
                "hparams": dict(config.hparams),
                "precision": self.precision.name,
                "world_size": 1,
                "batch": asdict(self.loaders.batch),
            },
        }

    @property
    def hparams(self) -> Mapping[str, Any]:
        """The members' common config for the task's steps (they differ only in the optimizer's numbers)."""
        return self.configs[self.active[0]].hparams

    def leave(self, members: Sequence[int]) -> None:
        """Take ``members`` out of the bundle; the others train on."""
        kept = [row for row, member in enumerate(self.active) if member not in members]
        if not kept:
            self.active = []
            return
        rows = torch.tensor(kept, device=self.device)
        self.models.keep(rows)
        self.optimizer.keep(rows, self.models.data)
        self.active = [self.active[row] for row in kept]


def setup_bundle(configs: Sequence[TrialConfig], device: torch.device | str = "cpu") -> FusedRun:
    """Build the bundle of ``configs``' trials on ``device``: each member's model as it would be built
    alone, then stacked.

    Raises:
        NotFusable: a trial cannot train in a bundle, or the members do not share :func:`bundle_key`.
    """
    device = torch.device(device)
    configs = [c.opened() for c in configs]
    hold_to_gpu_share(configs[0].gpus_per_rank, device)
    first = configs[0]
    task = first.resolved_task().task
    assert task is not None, "a bundle trains a Task"
    for config in configs:
        if (reason := refusal(task, config)) is not None:
            raise NotFusable(reason)
        if bundle_key(config.hparams) != bundle_key(first.hparams) or config.seed != first.seed:
            raise NotFusable("the members of a bundle differ only in the optimizer's hyperparameters")
        if config.settings != first.settings or config.epochs != first.epochs:
            raise NotFusable("the members of a bundle share their training settings and epochs")
    settings: TrainingSettings = first.settings
    hparams = dict(first.hparams)
    ranks = RankInfo(rank=0, world_size=1)
    seed_everything(first.seed)
    batch = plan_batches(hparams["batch_size"], 1, settings.grad_accum_steps, settings.batch_size_scope)
    train_set, val_set = task.datasets(hparams)
    loading = loader_settings(settings, device, first.cpus_per_rank)
    loaders = build_loaders(train_set, val_set, batch, ranks, first.seed, loading, task.collate)
    steps = steps_per_epoch_of(train_set, batch, 1, loading.num_workers) or 1

    scale = batch.global_batch / int(hparams["batch_size"]) if settings.lr_scaling == "linear" else 1.0
    models, param_groups = [], []
    for config in configs:
        seed_everything(config.seed)  # each member's initial weights are those it would have alone
        model = task.model(dict(config.hparams)).to(device)
        models.append(model)
        lr = float(config.hparams["lr"]) * scale
        param_groups.append(make_optimizer(model.parameters(), config.hparams, lr).state_dict()["param_groups"])
    fused = FusedModels(models)
    name, arguments = _member_arguments([c.hparams for c in configs], scale)
    optimizer = StackedOptimizer(name, arguments, fused.data)
    schedule = learning_rate_schedule(settings, steps, first, scale)
    run = FusedRun(
        task,
        configs,
        fused,
        optimizer,
        loaders,
        choose_precision(settings.precision, device),
        device,
        schedule,
        settings.clip_grad_norm,
        param_groups=param_groups,
        active=list(range(len(configs))),
    )
    _probe(run)
    return run


def _probe(run: FusedRun) -> None:
    """One forward of the task's training step under ``vmap`` on a first batch, nothing updated: a task
    torch.func cannot run (data-dependent control flow, an unsupported operator, a module the step
    reaches into) is refused here with torch's reason, before any member trains."""
    batch = move_to_device(next(iter(run.loaders.validation)), run.device)
    buffers = {name: b.clone() for name, b in run.models.buffers.items()}  # BatchNorm updates them
    saved, run.models.buffers = run.models.buffers, buffers
    try:
        with torch.no_grad(), run.precision.autocast():
            run.models.vmapped(lambda model, b: step_loss(run.task.training_step(model, b, run.hparams)))(batch)
    except Exception as error:
        raise NotFusable(f"torch.func cannot run the task's training_step under vmap: {first_line(error)}") from error
    finally:
        run.models.buffers = saved


def train_epoch(run: FusedRun, epoch: int, max_batches: int | None = None) -> torch.Tensor:
    """One pass over the training data for every member (``max_batches``: its first batches only, as
    :mod:`~tune_service.execution.bundle_sizing`'s probe times it). Returns each member's summed loss
    ``[K]`` (times the samples) and the samples, as ``[K, 2]`` on the device; no host sync per step."""
    models = run.models
    models.base.train()
    run.loaders.set_epoch(epoch)
    accum = run.loaders.batch.grad_accum_steps
    batches = len(run.loaders.train)
    loss_sum = torch.zeros(models.members, device=run.device, dtype=torch.float64)
    samples = 0
    step = models.vmapped(lambda model, batch: step_loss(run.task.training_step(model, batch, run.hparams)))
    for index, batch in enumerate(itertools.islice(run.loaders.train, max_batches)):
        batch = move_to_device(batch, run.device)
        group_start = index - index % accum
        group_size = min(accum, batches - group_start)
        with run.precision.autocast():
            losses = step(batch)
        with warnings.catch_warnings():
            # The gradients are rows of one flat tensor by design (see FusedModels), not torch's layout.
            warnings.filterwarnings("ignore", message="grad and param do not obey the gradient layout contract")
            (losses.sum() / group_size if group_size > 1 else losses.sum()).backward()
        count = count_samples(batch)
        loss_sum += losses.detach() * count
        samples += count
        if index + 1 == group_start + group_size:
            _optimizer_step(run)
    run.epochs_done = epoch
    return torch.stack([loss_sum, torch.full_like(loss_sum, samples)], dim=1)


def _optimizer_step(run: FusedRun) -> None:
    """The schedule's lr, each member's clipping, the step, the gradients zeroed (in place: the
    parameters' gradients are views of the flat one)."""
    grad = run.models.grad
    if not run.schedule.constant:
        run.optimizer.set_factor(run.schedule.factor(run.steps_done))
    if run.clip_grad_norm:
        norms = torch.linalg.vector_norm(grad, dim=1, keepdim=True)
        grad.mul_(torch.clamp(run.clip_grad_norm / (norms + 1e-6), max=1.0))
    run.optimizer.step(grad)
    grad.zero_()
    run.steps_done += 1


@torch.no_grad()
def evaluate(run: FusedRun) -> tuple[list[dict[str, float]], float]:
    """Each active member's ``val_loss`` and ``val_<metric>`` over the validation set, and the pass's
    milliseconds per sample and member (the fused pass shared evenly among the members it evaluated)."""
    started = time.perf_counter()
    run.models.base.eval()
    step = run.models.vmapped(lambda model, batch: _sums_tensor(run.task.validation_step(model, batch, run.hparams)))
    totals: dict[str, torch.Tensor] = {}
    samples = 0
    for batch in run.loaders.validation:
        batch = move_to_device(batch, run.device)
        with run.precision.autocast():
            sums = step(batch)
        counted = sums.pop("samples", None)
        samples += int(counted[0]) if counted is not None else count_samples(batch)
        for name, value in sums.items():
            totals[name] = totals[name] + value.double() if name in totals else value.double()
    names = sorted(n for n in totals if n != "loss")
    stacked = torch.stack([totals["loss"], *(totals[n] for n in names)], dim=1).tolist()  # one host sync
    latency_ms = 1000 * (time.perf_counter() - started) / max(samples, 1) / max(len(stacked), 1)
    return [validation_metrics(names, [loss, samples, *metrics]) for loss, *metrics in stacked], latency_ms


def _sums_tensor(sums: Mapping[str, Any]) -> dict[str, torch.Tensor]:
    """A validation step's sums as tensors (vmap returns tensors only)."""
    return {name: torch.as_tensor(value, dtype=torch.float64) for name, value in sums.items()}


#: What a bundle's report callback is called with: the member, its metrics, its checkpoint (or None).
BundleReport = Callable[[int, dict[str, Any], "Path | None"], bool]


def fit_bundle(
    run: FusedRun, report: BundleReport, checkpoints: Callable[[int], Path] | None = None
) -> dict[int, MemberEnd]:
    """Train the bundle ``run`` (from :func:`setup_bundle`) to its last epoch, reporting each member's
    metrics every epoch through ``report(member, metrics, checkpoint)``, in the shared loop's form. A
    member whose ``report`` returns False (its scheduler stopped it) leaves the bundle, and so does one
    whose losses are not finite (it is not reported); the others train on. Returns how each member
    ended, by its index in the bundle's configs.

    With ``checkpoints`` (a member's checkpoint directory, by member), each member's checkpoint is written
    as the loop writes a trial's, at the epochs ``training.checkpoint_every`` says and the last, into
    ``checkpoints(member) / epoch_NNNN``, and handed to ``report`` with that epoch's metrics.
    """
    ends: dict[int, MemberEnd] = {}
    batch, first = run.loaders.batch, run.configs[0]
    last_epoch, every = int(first.epochs or 0), first.settings.checkpoint_every
    for epoch in range(run.epochs_done + 1, last_epoch + 1):
        if not run.active:
            break
        seed_everything(rank_epoch_seed(first.seed, 0, epoch))  # dropout, augmentation: as the loop draws
        started = time.perf_counter()
        train = train_epoch(run, epoch).tolist()
        validation, latency_ms = evaluate(run)
        lrs = run.optimizer.lrs()
        leaving = []
        for row, member in enumerate(list(run.active)):
            loss_sum, samples = train[row]
            metrics = report_metrics(
                validation[row],
                batch,
                epoch=epoch,
                step=run.steps_done,
                train_loss=loss_sum / max(samples, 1),
                world_size=1,
                lr=lrs[row],
                precision=run.precision.name,
                started=started,
                n_params=parameter_count(run.models.base),
                latency_ms=latency_ms,
            )
            try:
                check_finite_losses(metrics, epoch, run.precision.name)  # as the loop ends a trial alone
            except NonFiniteLoss as error:
                ends[member] = MemberEnd("diverged", error)
                leaving.append(member)
                continue
            checkpoint = None
            if checkpoints is not None and every > 0 and (epoch == last_epoch or epoch % every == 0):
                checkpoint = write_state(checkpoints(member) / f"epoch_{epoch:04d}", run.member_checkpoint(member))
            if not report(member, metrics, checkpoint):
                ends[member] = MemberEnd("stopped")
                leaving.append(member)
        if leaving:
            run.leave(leaving)
    for member in run.active:
        ends[member] = MemberEnd("finished")
    return ends
