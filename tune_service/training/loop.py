"""The shared train loop that runs on every rank of a trial: ``fit()`` with ``train_one_epoch()`` and
``evaluate()``, reporting metrics and a checkpoint every epoch (or every N optimizer steps).

``fit`` is the ``train_loop_per_worker`` of every trial that uses a :class:`~tune_service.tasks.Task`.
Ray Train has already started the process group (gloo on CPU, NCCL on GPU) when it is called; under
``torchrun`` or in a test, pass a :class:`~tune_service.training.context.LocalContext`.

What each rank does, and why, is the project's practices table (``PRACTICES.md``): DDP with one process
per device, a DistributedSampler reshuffled every epoch, a global batch split over the ranks, mixed
precision with the loss in fp32, no host syncs per step, gradient accumulation under ``no_sync``,
metrics reduced as sums over all ranks, rank-0 checkpoints of the unwrapped model, per-rank seeds.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, cast

import torch
from torch import nn
from torch.utils.data import DataLoader

from tune_service.errors import TaskError
from tune_service.tasks import Task
from tune_service.training.checkpoint import save_checkpoint
from tune_service.training.context import RayTrainContext, TrainContext
from tune_service.training.batches import count_samples, move_to_device
from tune_service.training.data import (
    BatchPlan,
    RankLoaders,
    build_loaders,
    loader_settings,
    plan_batches,
    steps_per_epoch_of,
)
from tune_service.training.distributed import (
    RankInfo,
    all_reduce_sum,
    log_from_main_rank_only,
    rank_epoch_seed,
    rank_info,
    rank_step_seed,
    seed_everything,
)
from tune_service.spec.training import TrainingSettings
from tune_service.training.guards import check_finite_losses
from tune_service.training.oom import hold_to_gpu_share, is_out_of_memory, out_of_memory_error, release_memory
from tune_service.training.optim import LearningRateSchedule, make_optimizer
from tune_service.training.precision import Precision, choose_precision
from tune_service.training.profiling import StepProfiler
from tune_service.training.trial_config import TrialConfig
from tune_service.training.wrapping import PreparedModel, prepare_model


@dataclass
class TrainingRun:
    """One rank's training state for one trial (built by :func:`setup_run`)."""

    task: Task
    hparams: Mapping[str, Any]
    ranks: RankInfo
    model: PreparedModel
    optimizer: torch.optim.Optimizer
    scaler: torch.amp.GradScaler
    precision: Precision
    device: torch.device
    loaders: RankLoaders
    #: The spec's warm-up and schedule; None when the task's configure_optimizers gave its own scheduler.
    schedule: LearningRateSchedule | None
    #: The task's own scheduler, stepped every optimizer step or epoch (``schedule_interval``).
    task_scheduler: Any
    schedule_interval: str
    clip_grad_norm: float
    seed: int
    epochs_done: int = 0  # whole epochs trained (restored from a checkpoint, then counted)
    epoch_batches: int = 0  # batches of the epoch after those already trained (a mid-epoch checkpoint's)
    steps_done: int = 0  # optimizer steps so far, over the whole trial (drives the schedule)
    lr: float = 0.0  # the lr of the latest optimizer step (the first group's)
    #: This rank's training since the last report: the sum of its losses (times their samples), on the
    #: device, and the samples (a number, or a tensor if the task counts them in one).
    train_loss_sum: torch.Tensor | None = None
    train_samples: Any = 0

    def reset_train_totals(self) -> None:
        self.train_loss_sum = torch.zeros((), device=self.device, dtype=torch.float64)
        self.train_samples = 0

    def train_totals(self) -> torch.Tensor:
        """``[loss_sum, samples]`` of this rank's training since the last report, on the device."""
        samples = torch.as_tensor(self.train_samples, device=self.device, dtype=torch.float64)
        assert self.train_loss_sum is not None, "reset_train_totals first"
        return torch.stack([self.train_loss_sum, samples])


def setup_run(config: TrialConfig, context: TrainContext) -> TrainingRun:
    """Build this rank's model, optimizer, scaler and loaders for the trial, restored from the
    context's latest checkpoint if there is one."""
    ranks = rank_info()
    settings, hparams, device = config.settings, dict(config.hparams), context.device
    resolved = config.resolved_task()
    task = resolved.task
    assert task is not None, "the shared loop runs a Task (a plain train_loop runs unchanged, without it)"
    seed_everything(config.seed)  # what the task draws while building its data, the same in any process
    if settings.deterministic:
        _use_deterministic_algorithms()
    precision = choose_precision(settings.precision, device)
    batch = plan_batches(hparams["batch_size"], ranks.world_size, settings.grad_accum_steps, settings.batch_size_scope)
    cache = getattr(context, "data_cache", None)  # a warm rank's; other contexts build the data every time
    train_set, val_set = (
        cache.datasets(task, resolved.reference, hparams) if cache is not None else task.datasets(hparams)
    )
    loading = loader_settings(settings, device, config.cpus_per_rank)
    loaders = build_loaders(train_set, val_set, batch, ranks, config.seed, loading, task.collate)
    steps = steps_per_epoch_of(train_set, batch, ranks.world_size, loading.num_workers)

    seed_everything(config.seed)  # identical initial weights on every rank
    model = prepare_model(task.model(hparams), device, ranks.world_size, settings, task.ddp_comm_hook())
    scale = batch.global_batch / int(hparams["batch_size"]) if settings.lr_scaling == "linear" else 1.0
    optimizer, task_scheduler = _optimizer_of(task, model.plain, hparams, float(hparams["lr"]) * scale)
    schedule = None if task_scheduler is not None else learning_rate_schedule(settings, steps, config, scale)
    run = TrainingRun(
        task,
        hparams,
        ranks,
        model,
        optimizer,
        precision.scaler(),
        precision,
        device,
        loaders,
        schedule,
        task_scheduler,
        settings.schedule.interval,
        settings.clip_grad_norm,
        config.seed,
        lr=optimizer.param_groups[0]["lr"],
    )
    state = context.restored_state()
    if state is not None:
        model.plain.load_state_dict(state["model"])
        own = [{k: v for k, v in group.items() if k != "params"} for group in optimizer.param_groups]
        optimizer.load_state_dict(state["optimizer"])
        keep_own_hyperparameters(optimizer, own)
        if state["scaler"]:  # empty when the scaler is disabled (fp32, bf16)
            run.scaler.load_state_dict(state["scaler"])
        if task_scheduler is not None and state.get("scheduler"):
            task_scheduler.load_state_dict(state["scheduler"])
            if hasattr(task_scheduler, "base_lrs"):  # a torch LR scheduler scales the trial's own lrs
                task_scheduler.base_lrs = [g.get("initial_lr", g["lr"]) for g in optimizer.param_groups]
        run.epochs_done = int(state["epoch"])
        run.epoch_batches = int(state.get("epoch_batches") or 0)  # absent before reports by steps existed
        step = state.get("step")  # absent from the checkpoints of earlier versions
        run.steps_done = int(step) if step is not None else run.epochs_done * (steps or 0)
        run.lr = optimizer.param_groups[0]["lr"]
    return run


def keep_own_hyperparameters(optimizer: torch.optim.Optimizer, own: list[dict[str, Any]]) -> None:
    """Put the trial's own optimizer hyperparameters (``own``: its param groups as built from its config,
    before the checkpoint was loaded) back over those a checkpoint restored, where they differ: a PBT
    exploit loads another trial's checkpoint, and goes on with its own (mutated) lr, weight decay,
    momentum, betas. A trial resumed from its own checkpoint has the same ones, and nothing changes.

    The lr a schedule scales is ``initial_lr`` where one is set (by our schedule's first step, or a task's
    LR scheduler), else ``lr``: the trial's own replaces the restored one, and the current lr keeps the
    schedule's factor at the checkpoint's step.
    """
    for group, mine in zip(optimizer.param_groups, own, strict=True):
        base, restored_base = mine.get("initial_lr", mine["lr"]), group.get("initial_lr", group["lr"])
        if base != restored_base:
            group["lr"] = base * (group["lr"] / restored_base) if restored_base else base
            if "initial_lr" in group:
                group["initial_lr"] = base
        for key, value in mine.items():
            if key not in ("lr", "initial_lr") and group.get(key) != value:
                group[key] = value


def _optimizer_of(task: Task, model: nn.Module, hparams: Mapping[str, Any], lr: float) -> tuple[Any, Any]:
    """The task's own optimizer (and scheduler) from ``configure_optimizers``, or the one the config names."""
    built = task.configure_optimizers(model, hparams)
    if built is None:
        return make_optimizer(model.parameters(), hparams, lr), None
    optimizer, scheduler = built if isinstance(built, (tuple, list)) else (built, None)
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(
            f"configure_optimizers must return an optimizer or (optimizer, lr_scheduler), got {type(built).__name__}"
        )
    return optimizer, scheduler


def learning_rate_schedule(
    settings: TrainingSettings, steps: int | None, config: TrialConfig, scale: float
) -> LearningRateSchedule:
    """The spec's warm-up and schedule over the trial's epochs of ``steps`` optimizer steps each (or its
    ``max_steps``)."""
    plain = settings.schedule.name == "constant" and not settings.warmup_epochs
    if steps is None and not plain:
        raise ValueError(
            f"training.schedule {settings.schedule.name!r} and warmup_epochs need the length of an "
            f"epoch: give the iterable training set a __len__"
        )
    steps = steps or 1
    warmup = settings.warmup_steps or round(settings.warmup_epochs * steps)
    # TrialConfig has epochs or max_steps, one of them
    total = config.max_steps if config.max_steps is not None else steps * cast(int, config.epochs)
    return LearningRateSchedule.for_trial(settings.schedule, steps, total, warmup, scale)


def train_one_epoch(run: TrainingRun, epoch: int, profiler: StepProfiler | None = None) -> torch.Tensor:
    """One pass over this rank's shard. Returns ``[loss_sum, samples]`` for this rank, on the device."""
    run.reset_train_totals()
    for _ in train_steps(run, epoch, profiler):
        pass
    return run.train_totals()


def train_steps(run: TrainingRun, epoch: int, profiler: StepProfiler | None = None) -> Iterator[None]:
    """Train ``epoch`` from where the run stands in it, yielding after every optimizer step (where the
    caller may validate, report and checkpoint, then go on or stop). The batches a mid-epoch checkpoint
    had trained are drawn and skipped, so the rest are the ones the uninterrupted epoch would train.

    Losses are added to ``run.train_loss_sum`` detached and on the device: no host sync per step, no graph
    kept alive.
    """
    model, ddp, loaders = run.model.module, run.model.ddp, run.loaders
    model.train()
    loaders.set_epoch(epoch)
    accum = loaders.batch.grad_accum_steps
    batches = _length(loaders.train)
    skip, run.epoch_batches = run.epoch_batches, 0
    stream: Iterator[Any] = iter(loaders.train) if batches is None or skip < batches else iter(())
    for _ in itertools.islice(stream, skip):
        pass  # drawn, not trained: samplers, workers and their augmentation stay on the same course
    if skip:
        seed_everything(rank_step_seed(run.seed, run.ranks.rank, run.steps_done))  # as after that report
    index = skip - 1
    for index, batch in enumerate(stream, start=skip):
        batch = move_to_device(batch, run.device)
        group_start = index - index % accum
        # The last group of an epoch may be shorter (its length is unknown for an iterable without one).
        group_size = min(accum, batches - group_start) if batches is not None else accum
        steps_now = index + 1 == group_start + group_size
        # Between optimizer steps gradients accumulate locally: one all-reduce per optimizer step.
        sync = ddp.no_sync() if ddp is not None and not steps_now else contextlib.nullcontext()
        with sync:
            with run.precision.autocast():
                loss, samples = _loss_and_samples(run.task.training_step(model, batch, run.hparams), batch)
            run.scaler.scale(loss / group_size if group_size > 1 else loss).backward()
        # One kernel per step for the loss sum; a count that is a plain number stays one.
        assert run.train_loss_sum is not None, "reset_train_totals first"
        if isinstance(samples, torch.Tensor):
            run.train_loss_sum += loss.detach() * samples
        else:
            run.train_loss_sum.add_(loss.detach(), alpha=samples)
        run.train_samples += samples
        if profiler is not None:
            profiler.step()
        if steps_now:
            _optimizer_step(run)
            run.epoch_batches = index + 1
            yield
            if not model.training:  # the caller validated (a walk over every module: not on every step)
                model.train()
    if batches is None and (index + 1) % accum:
        # A stream's short last group was never all-reduced: dropped (on every rank, whose counts are equal).
        run.optimizer.zero_grad(set_to_none=True)
    run.epochs_done, run.epoch_batches = epoch, 0
    if run.task_scheduler is not None and run.schedule_interval == "epoch":
        run.task_scheduler.step()


def _optimizer_step(run: TrainingRun) -> None:
    """The schedule's lr, the fp16 scaler's unscale and the clipping, the step, the task's scheduler."""
    if run.schedule is not None and not run.schedule.constant:
        run.lr = run.schedule.apply(run.optimizer, run.steps_done)
    if run.clip_grad_norm:
        run.scaler.unscale_(run.optimizer)  # clip the true gradients, not the fp16 scaler's multiples of them
        torch.nn.utils.clip_grad_norm_(run.model.plain.parameters(), run.clip_grad_norm)
    run.scaler.step(run.optimizer)  # skipped by the fp16 scaler when the gradients overflowed
    run.scaler.update()
    run.optimizer.zero_grad(set_to_none=True)
    run.steps_done += 1
    if run.task_scheduler is not None:
        run.lr = run.optimizer.param_groups[0]["lr"]  # the lr of the step just taken
        if run.schedule_interval == "step":
            run.task_scheduler.step()


def _loss_and_samples(result: Any, batch: Any) -> tuple[torch.Tensor, Any]:
    """A training step's ``loss`` or ``(loss, samples)``; the samples counted from the batch if not given."""
    loss, samples = split_step_result(result)
    return loss, samples if samples is not None else count_samples(batch)


def step_loss(result: Any) -> torch.Tensor:
    """The loss of a training step's result (``loss`` or ``(loss, samples)``)."""
    return split_step_result(result)[0]


def split_step_result(result: Any) -> tuple[torch.Tensor, Any]:
    """A training step's result as ``(loss, samples)``, the samples None when the step returned the loss
    alone. A tuple or list of another length is the task's error, said in one line (not a step that
    trains on whatever its second item is)."""
    if not isinstance(result, (tuple, list)):
        return result, None
    if len(result) != 2:
        raise TaskError(
            f"training_step returned a {type(result).__name__} of {len(result)} items; "
            "it returns the loss, or (loss, samples)"
        )
    return result[0], result[1]


def _length(loader: DataLoader) -> int | None:
    try:
        return len(loader)
    except TypeError:  # an iterable data set without a length
        return None


@torch.no_grad()
def validation_sums(
    model: nn.Module,
    task: Task,
    validation: DataLoader,
    precision: Precision,
    device: torch.device,
    hparams: Mapping[str, Any] | None = None,
) -> tuple[list[str], torch.Tensor]:
    """This rank's validation sums, on the device: the metric names and ``[loss_sum, samples, *metric
    sums]`` in their order. Summed over the ranks, they give :func:`validation_metrics`."""
    model.eval()
    sums: dict[str, torch.Tensor] = {}
    samples: int | torch.Tensor = 0  # a Python int while the counts are (no kernel per batch for them)
    for batch in validation:
        batch = move_to_device(batch, device)
        with precision.autocast():
            step = dict(task.validation_step(model, batch, hparams if hparams is not None else task.defaults))
        count = step.pop("samples", None)
        samples = samples + (count if count is not None else count_samples(batch))
        for name, value in step.items():
            if not isinstance(value, torch.Tensor):
                value = torch.tensor(value, device=device)
            sums[name] = sums[name] + value if name in sums else value.double()  # float64 from the first
    if sums and "loss" not in sums:
        raise ValueError(
            f"validation_step must return 'loss' (the sum of the batch's losses) beside its metrics, "
            f"got {', '.join(sorted(sums))}"
        )
    names = sorted(name for name in sums if name != "loss")
    loss_sum = sums.get("loss", torch.zeros((), device=device, dtype=torch.float64))
    count = torch.as_tensor(samples, dtype=torch.float64, device=device)
    return names, torch.stack([loss_sum, count, *(sums[n] for n in names)])


def validation_metrics(names: list[str], totals: list[float]) -> dict[str, float]:
    """``val_loss`` and ``val_<metric>`` from :func:`validation_sums` summed over all ranks."""
    loss_total, count_total, *metric_totals = totals
    count_total = max(count_total, 1.0)
    return {
        "val_loss": loss_total / count_total,
        **{f"val_{n}": v / count_total for n, v in zip(names, metric_totals, strict=True)},
    }


def evaluate(
    model: nn.Module, task: Task, validation: DataLoader, precision: Precision, device: torch.device
) -> dict[str, float]:
    """``val_loss`` and ``val_<metric>`` over the whole validation set: this rank's shard, summed with
    every other rank's (sums and counts, so the result equals a single-process evaluation)."""
    names, sums = validation_sums(model, task, validation, precision, device)
    return validation_metrics(names, all_reduce_sum(sums).tolist())


def fit(config: TrialConfig | Mapping[str, Any], context: TrainContext | None = None) -> None:
    """Train ``config.task`` on this rank for ``config.epochs`` epochs, reporting once per epoch, or for
    ``config.max_steps`` optimizer steps, reporting every ``training.report_every_steps`` steps (at each
    epoch's end when that is 0) and at the last step.

    Resumes from the context's latest checkpoint, if there is one, where it was taken (in the middle of
    an epoch too). Reported metrics (identical on every rank, reduced over all of them): ``epoch``
    (1-based: the epochs trained, a fraction of one between an epoch's ends when the training set has a
    length), ``step`` (optimizer steps so far), ``train_loss`` (since the last report), ``val_loss``,
    ``val_<metric>`` per task metric, ``world_size``, ``batch_per_rank`` (the micro-batch),
    ``grad_accum_steps``, ``global_batch``, ``lr``, ``precision``, ``epoch_time_s`` (the seconds since
    the last report), ``n_params`` (the model's parameters) and ``latency_ms`` (the validation pass's
    milliseconds per sample on a rank, data loading included: inference latency at the validation's batch).

    Raises:
        TrialOutOfMemory: a rank ran out of memory; the message names the batch and the device's memory.
        NonFiniteLoss: the training or validation loss was NaN or infinite (it is not reported).
    """
    config = (config if isinstance(config, TrialConfig) else TrialConfig(**config)).opened()
    context = context if context is not None else RayTrainContext(config.output_dir, config.checkpoint_root)
    ranks = rank_info()
    log = log_from_main_rank_only(ranks)
    device, settings = context.device, config.settings
    out_of_memory = None
    run = None
    try:
        hold_to_gpu_share(config.gpus_per_rank, device)
        run = setup_run(config, context)
        if run.steps_done:
            log.info(
                "resuming from the checkpoint of step %d (epoch %d, batch %d)",
                run.steps_done,
                run.epochs_done + 1,
                run.epoch_batches,
            )
        for metrics, last in _training_reports(run, config, context.output_dir):
            check_finite_losses(metrics, metrics["epoch"], run.precision.name)  # same on every rank: all stop
            meta = {
                "task": config.task.reference,
                "hparams": dict(run.hparams),
                "precision": run.precision.name,
                "world_size": run.ranks.world_size,
                "batch": asdict(run.loaders.batch),
            }
            _report(context, run, metrics, meta, _due_checkpoint(run, config, last))
            progress = (
                f"step {run.steps_done}/{config.max_steps}"
                if config.max_steps is not None
                else f"epoch {run.epochs_done}/{config.epochs}"
            )
            log.info("%s: train_loss %.4f, val_loss %.4f", progress, metrics["train_loss"], metrics["val_loss"])
    except Exception as error:
        if not is_out_of_memory(error):
            raise
        epoch = run.epochs_done + 1 if run is not None else 0  # the epoch in progress (0: setting up)
        batch = plan_batches(
            config.hparams["batch_size"], ranks.world_size, settings.grad_accum_steps, settings.batch_size_scope
        )  # the run may not exist: an OOM while setting up
        out_of_memory = out_of_memory_error(
            batch.micro, batch.grad_accum_steps, ranks.world_size, device, epoch, settings.oom_retry
        )
    finally:
        run = None  # drop every reference to the trial's tensors ...
        release_memory(device)  # ... so the device is free for the next attempt or trial
    if out_of_memory is not None:
        raise out_of_memory  # raised outside the handler: the OOM's frames (and tensors) are gone


def _training_reports(
    run: TrainingRun, config: TrialConfig, output_dir: Path | None
) -> Iterator[tuple[dict[str, Any], bool]]:
    """Train the trial from where ``run`` stands, yielding each report's metrics (reduced over all
    ranks) and whether it is the trial's last, at the epoch's ends or every ``report_every_steps``."""
    every = config.settings.report_every_steps
    epoch = run.epochs_done
    run.reset_train_totals()
    started = time.perf_counter()
    while config.max_steps is not None or epoch < cast(int, config.epochs):  # one of them is set
        epoch += 1
        seed_everything(rank_epoch_seed(run.seed, run.ranks.rank, epoch))  # dropout, augmentation: per rank
        steps_before, resumed_within = run.steps_done, run.epoch_batches > 0
        profiler = StepProfiler(
            config.settings.profile_steps if epoch == 1 else 0, output_dir, run.device, enabled=run.ranks.is_main
        )
        try:
            for _ in train_steps(run, epoch, profiler):
                last = run.steps_done == config.max_steps
                if last or (every and run.steps_done % every == 0):
                    yield _evaluated(run, epoch, started), last
                    if last:
                        return
                    started = time.perf_counter()
                    # What the rest of the epoch draws, the same whether or not the trial resumed here.
                    seed_everything(rank_step_seed(run.seed, run.ranks.rank, run.steps_done))
        finally:
            profiler.stop()
        if run.steps_done == steps_before and config.max_steps is not None and not resumed_within:
            raise ValueError(
                f"epoch {epoch} of the training set gave no batch: it cannot reach {config.max_steps} steps"
            )
        if not every:
            yield _evaluated(run, epoch, started), epoch == config.epochs
            started = time.perf_counter()


def _evaluated(run: TrainingRun, epoch: int, started: float) -> dict[str, Any]:
    """The training since the last report and a validation now: the report's metrics, over all ranks."""
    validating = time.perf_counter()
    names, val_sums = validation_sums(
        run.model.module, run.task, run.loaders.validation, run.precision, run.device, run.hparams
    )
    if run.device.type == "cuda":
        torch.cuda.synchronize(run.device)  # the validation's kernels done: its time is the latency's
    seconds = torch.tensor([time.perf_counter() - validating], dtype=val_sums.dtype, device=val_sums.device)
    # One collective and one host sync per report, for the training and the validation sums together.
    totals = all_reduce_sum(torch.cat([run.train_totals(), val_sums, seconds])).tolist()
    loss_sum, samples, *val_totals, validation_seconds = totals
    run.reset_train_totals()
    batches = _length(run.loaders.train)
    progress = (
        epoch
        if not run.epoch_batches
        else (round(run.epochs_done + run.epoch_batches / batches, 4) if batches else run.epochs_done)
    )
    return report_metrics(
        validation_metrics(names, val_totals),
        run.loaders.batch,
        epoch=progress,
        step=run.steps_done,
        train_loss=loss_sum / max(samples, 1),
        world_size=run.ranks.world_size,
        lr=run.lr,
        precision=run.precision.name,
        started=started,
        n_params=parameter_count(run.model.module),
        latency_ms=1000 * validation_seconds / max(val_totals[1], 1.0),  # the ranks' seconds over their samples
    )


def report_metrics(
    validation: dict[str, float],
    batch: BatchPlan,
    *,
    epoch: float,
    step: int,
    train_loss: float,
    world_size: int,
    lr: float,
    precision: str,
    started: float,
    n_params: int,
    latency_ms: float,
) -> dict[str, Any]:
    """One report in the loop's form (:data:`~tune_service.tasks.base.LOOP_REPORTS` and the validation's
    ``val_loss`` and ``val_<metric>``); ``started``: when the time since the last report began;
    ``n_params``: the model's parameters; ``latency_ms``: the validation's milliseconds per sample on a
    rank (what a quality-against-cost sweep trades, :mod:`~tune_service.spec.objectives`)."""
    return {
        **validation,
        "epoch": epoch,
        "step": step,
        "train_loss": train_loss,
        "world_size": world_size,
        "batch_per_rank": batch.micro,
        "grad_accum_steps": batch.grad_accum_steps,
        "global_batch": batch.global_batch,
        "lr": lr,
        "precision": precision,
        "epoch_time_s": time.perf_counter() - started,
        "n_params": n_params,
        "latency_ms": latency_ms,
    }


def parameter_count(model: nn.Module) -> int:
    """The number of the model's parameters (each tensor once, however often it is shared)."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())


def _due_checkpoint(run: TrainingRun, config: TrialConfig, last: bool) -> str | None:
    """The name of the checkpoint due with this report, or None: every ``checkpoint_every``-th report
    (counted from the trial's start) and the last one. A trial by steps names its checkpoints by step."""
    every, by_steps = config.settings.checkpoint_every, config.max_steps is not None
    per_steps = by_steps and config.settings.report_every_steps
    number = run.steps_done // config.settings.report_every_steps if per_steps else run.epochs_done
    if every <= 0 or not (last or number % every == 0):
        return None
    return f"step_{run.steps_done:08d}" if by_steps else f"epoch_{run.epochs_done:04d}"


def _report(
    context: TrainContext, run: TrainingRun, metrics: dict[str, Any], meta: dict[str, Any], checkpoint: str | None
) -> None:
    """Report, with the checkpoint named ``checkpoint`` if one is due; rank 0 alone writes it.

    No barrier waits for the write: a rank that goes on meets rank 0 at its next collective, and the
    contexts' reports already keep the ranks together (a gang's rank 0 broadcasts its trial's word,
    Ray Train's report is a barrier)."""
    directory = None
    if checkpoint is not None and run.ranks.is_main:
        directory = context.checkpoint_dir(checkpoint)  # written in place: no copy on the way
        save_checkpoint(
            directory,
            model=run.model.plain,
            optimizer=run.optimizer,
            scaler=run.scaler,
            epoch=run.epochs_done,
            epoch_batches=run.epoch_batches,
            meta=meta,
            step=run.steps_done,
            scheduler=run.task_scheduler.state_dict() if run.task_scheduler is not None else None,
        )
    context.report(metrics, directory)


def _use_deterministic_algorithms() -> None:
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # required by deterministic cuBLAS
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
