"""Tasks that record what the shared loop does to them, so the practices tests can check it.

They are ordinary Tasks (the loop treats them like a user's); recording happens through forward hooks,
the optional ``augment`` and ``ddp_comm_hook`` hooks, and the loss, so model state dicts stay plain.
"""

from __future__ import annotations

import logging
import os
import signal
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
from torch.optim.optimizer import register_optimizer_step_post_hook
from torch.utils.data import Subset, TensorDataset

from tune_service.spec.training import DDPSettings
from tune_service.tasks import ResolvedTask
from tune_service.tasks.digits import Digits
from tune_service.training import LocalContext, TrainingSettings, fit
from tune_service.training.loop import TrialConfig
from tune_service.training.wrapping import prepare_model

#: An odd number of validation images: the two ranks' shards differ in size (180 and 179).
ODD_VALIDATION_SIZE = 359


class RecordingDigits(Digits):
    """Digits that records, on its rank, the parameters seen by every training step, the augmentation
    draws, the grad/eval state during evaluation, autocast state, loss input dtypes, and all-reduces."""

    def __init__(self):
        self.record = {"params": [], "draws": [], "eval_states": [], "autocast": [], "loss_dtypes": [],
                       "allreduces": 0, "deterministic": []}

    def datasets(self, config):
        train, validation = super().datasets(config)
        return train, Subset(validation, range(ODD_VALIDATION_SIZE))

    def model(self, config):
        model = super().model(config)
        model.register_forward_pre_hook(self._before_forward)
        return model

    def _before_forward(self, module, args):
        if module.training:
            self.record["params"].append(torch.cat([p.detach().flatten() for p in module.parameters()]).clone())
        else:
            self.record["eval_states"].append((torch.is_grad_enabled(), module.training))
        self.record["autocast"].append((torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu")))
        self.record["deterministic"].append(torch.are_deterministic_algorithms_enabled())

    def augment(self, inputs, targets, config):
        self.record["draws"].append(torch.rand(()))
        return super().augment(inputs, targets, config)

    def loss(self, outputs, targets):
        self.record["loss_dtypes"].append(outputs.dtype)
        return super().loss(outputs, targets)

    def ddp_comm_hook(self):
        record = self.record

        def counting_allreduce(state, bucket):
            record["allreduces"] += 1
            return allreduce_hook(None, bucket)

        return None, counting_allreduce


class IndexedTask(Digits):
    """Inputs are the sample indices themselves (one feature), so the order each rank sees is recorded."""

    size = 100

    def __init__(self):
        self.seen: list[list[int]] = []

    def datasets(self, config):
        x = torch.arange(self.size, dtype=torch.float32).unsqueeze(1)
        y = torch.zeros(self.size, dtype=torch.long)
        return TensorDataset(x, y), TensorDataset(x[:10], y[:10])

    def model(self, config):
        model = nn.Linear(1, 2)
        model.register_forward_pre_hook(self._record)
        return model

    def _record(self, module, args):
        if module.training:
            self.seen[-1].extend(int(i) for i in args[0][:, 0])

    def augment(self, inputs, targets, config):
        return inputs, targets


class OverflowingDigits(Digits):
    """A training loss whose gradients are never finite: fp16 loss scaling must skip every step (the
    weights, so the validation loss, stay finite)."""

    def loss(self, outputs, targets):
        return F.cross_entropy(outputs, targets) * (float("inf") if outputs.requires_grad else 1.0)


class OutOfMemoryDigits(Digits):
    """Runs out of memory for real (a CPU allocation far beyond any machine) whenever a training
    micro-batch holds more than ``max_micro_batch`` samples."""

    max_micro_batch = 16

    def model(self, config):
        model = super().model(config)
        limit = self.max_micro_batch

        def allocate(module, args):
            if module.training and args[0].shape[0] > limit:
                torch.empty(2**50, dtype=torch.uint8)  # 1 PiB: the allocator fails
        model.register_forward_pre_hook(allocate)
        return model


class OutOfMemoryModel(Digits):
    """Runs out of memory for real while building its model, before the first batch."""

    def model(self, config):
        torch.empty(2**50, dtype=torch.uint8)  # 1 PiB: the allocator fails


def resolved(task) -> ResolvedTask:
    return ResolvedTask(type(task).__name__, task=task)


def world_two_session(output_dir: str) -> dict:
    """What each rank of a 2-rank trial records (run it with ``ddp_harness.run_ranks``).

    The trial accumulates gradients over 2 micro-batches, scales lr per rank, checkpoints every epoch,
    and logs to one file shared by both ranks. Afterwards it wraps a model with explicit DDP settings.
    """
    import torch.distributed as dist

    rank = dist.get_rank()
    Path(output_dir).mkdir(parents=True, exist_ok=True)
    log_file = logging.FileHandler(Path(output_dir) / "trial.log")
    logger = logging.getLogger("tune_service.training")
    logger.addHandler(log_file)
    logger.setLevel(logging.INFO)
    steps = []
    hook = register_optimizer_step_post_hook(lambda *args: steps.append(1))

    task = RecordingDigits()
    hparams = {**task.defaults, "dropout": 0.1, "noise": 0.1, "batch_size": 32}
    settings = TrainingSettings(grad_accum_steps=2, batch_size_scope="per_rank", lr_scaling="linear")
    context = LocalContext(output_dir=output_dir)
    fit(TrialConfig(resolved(task), hparams, epochs=2, seed=0, settings=settings), context)
    hook.remove()
    log_file.close()

    cpu = torch.device("cpu")
    knobs = DDPSettings(bucket_cap_mb=1, gradient_as_bucket_view=False, static_graph=True, find_unused_parameters=True)
    ddp = prepare_model(Digits().model(Digits.defaults), cpu, 2, TrainingSettings(ddp=knobs)).ddp
    return {
        "rank": rank, "pid": os.getpid(), "reports": context.reports, "optimizer_steps": len(steps),
        "record": task.record,
        "ddp_knobs": {"bucket_bytes_cap": ddp.bucket_bytes_cap, "gradient_as_bucket_view": ddp.gradient_as_bucket_view,
                      "static_graph": ddp.static_graph, "find_unused_parameters": ddp.find_unused_parameters},
    }


class OutOfMemoryAfterFirstEpoch(OutOfMemoryDigits):
    """Fits for one epoch at any batch, then runs out of memory at micro-batches above 16: the retried
    trial must resume from the epoch-1 checkpoint at a smaller micro-batch."""

    def model(self, config):
        model = Digits.model(self, config)
        limit, forwards = self.max_micro_batch, []

        def allocate(module, args):
            if module.training:
                forwards.append(1)
                if len(forwards) > 30 and args[0].shape[0] > limit:  # 23 steps make epoch 1 at batch 32
                    torch.empty(2**50, dtype=torch.uint8)
        model.register_forward_pre_hook(allocate)
        return model


def _is_running(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie (a killed process not yet reaped holds no memory)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


class AuditedDigits(Digits):
    """Digits whose ranks, as each trial starts, record their pid and which rank processes of earlier
    trials are still running (hyperparameter ``audit_dir``: where the records go)."""

    def model(self, config):
        import json

        import torch.distributed as dist

        audit = Path(config["audit_dir"])
        audit.mkdir(parents=True, exist_ok=True)
        trial = [os.getpid()]
        dist.broadcast_object_list(trial, src=0)  # the trial's key: its rank 0's pid
        earlier = [json.loads(p.read_text()) for p in audit.glob("*.json")]
        alive = [r["pid"] for r in earlier if r["trial"] != trial[0] and _is_running(r["pid"])]
        record = {"pid": os.getpid(), "trial": trial[0], "alive_from_earlier_trials": alive}
        tmp = audit / f"{os.getpid()}.tmp"
        tmp.write_text(json.dumps(record))
        tmp.rename(audit / f"{os.getpid()}.json")  # the other rank never reads half a record
        return super().model(config)


class SlowDigits(Digits):
    """Digits with epochs of about a second (each batch waits 50 ms), so a test can interrupt a sweep
    while a trial is between two epochs. With hyperparameter ``record_dir``, every rank process appends
    one byte per training batch to ``record_dir/lr=LR-pid=PID``: what each attempt of a trial trained."""

    def augment(self, inputs, targets, config):
        import time

        time.sleep(0.05)
        if config.get("record_dir"):
            with open(Path(config["record_dir"]) / f"{self.recorded_as(config)}-pid={os.getpid()}", "ab") as record:
                record.write(b".")
        return super().augment(inputs, targets, config)

    def recorded_as(self, config) -> str:
        """What names the trial in its record files."""
        return f"lr={config['lr']}"


class DivergingDigits(Digits):
    """Digits whose training loss turns NaN from epoch ``diverge_at`` on (0: never), as a trial whose
    learning rate is far too high would."""

    hyperparameters = (*Digits.defaults, "diverge_at")

    def __init__(self):
        self.epoch, self.evaluating, self.diverge_at = 1, False, 0

    def model(self, config):
        self.diverge_at = int(config.get("diverge_at", 0))
        return super().model(config)

    def loss(self, outputs, targets):
        loss = super().loss(outputs, targets)
        if not outputs.requires_grad:  # validation: the next training step starts a new epoch
            self.evaluating = True
            return loss
        if self.evaluating:
            self.epoch, self.evaluating = self.epoch + 1, False
        return loss * float("nan") if 0 < self.diverge_at <= self.epoch else loss


class RankKillingDigits(Digits):
    """Digits whose rank 1 kills its own process with SIGKILL at training batch ``kill_at_batch`` of an
    attempt, in the first attempt only (``kill: once``) or in every attempt (``kill: always``). Every rank
    process appends one byte per training batch to ``record_dir/kill=MODE-attempt=N-pid=PID``."""

    hyperparameters = (*Digits.defaults, "record_dir", "kill", "kill_at_batch")

    #: (mode, pid) -> the attempt it belongs to (decided at its first batch); a warm rank process runs
    #: the trials of both modes.
    attempts: dict[tuple[str, int], int] = {}

    SIGNAL = signal.SIGKILL

    def augment(self, inputs, targets, config):
        import torch.distributed as dist

        record_dir, mode = Path(config["record_dir"]), config["kill"]
        killed = record_dir / f"kill={mode}-killed"
        attempt = self.attempts.setdefault((mode, os.getpid()), 1 + (len(killed.read_bytes()) if killed.exists() else 0))
        record = record_dir / f"kill={mode}-attempt={attempt}-pid={os.getpid()}"
        with open(record, "ab") as f:
            f.write(b".")
        last_attempt_to_kill = 1 if mode == "once" else 10**6
        if dist.get_rank() == 1 and record.stat().st_size == config["kill_at_batch"] and attempt <= last_attempt_to_kill:
            with open(killed, "ab") as f:
                f.write(b"x")  # one byte per kill: the next attempt's number
            os.kill(os.getpid(), self.SIGNAL)
        return super().augment(inputs, targets, config)


class RankStoppingDigits(RankKillingDigits):
    """RankKillingDigits whose rank 1 stops (SIGSTOP) instead of dying: alive, holding its connections,
    and silent, as a rank hung in a driver call or a deadlock would be. Records under ``kill=MODE``."""

    SIGNAL = signal.SIGSTOP


class SecretLeakingDigits(Digits):
    """Digits that fails with an error quoting a secret, as a task whose login is refused would: the
    secret is read from the file ``secret_file`` (the ranks of the shared test Ray do not see
    environment variables set after it started), so no config holds it. ``fail: false`` trains."""

    hyperparameters = (*Digits.defaults, "fail", "secret_file")

    def model(self, config):
        if config.get("fail", True):
            secret = Path(config["secret_file"]).read_text().strip()
            (Path(config["secret_file"]).parent / f"rank-pid-{os.getpid()}").touch()  # where its output goes
            print(f"connecting with token {secret}")  # a task's own print, as a debugging user writes
            raise PermissionError(f"login refused: the server rejected token {secret} for this dataset")
        return super().model(config)


class ScoredDigits(SlowDigits):
    """SlowDigits whose validation ``score`` is its hyperparameter ``quality`` at every epoch, so a
    scheduler's decisions follow from the configs alone. Every rank process appends one byte per
    training batch to ``record_dir/quality=Q-pid=PID``."""

    hyperparameters = (*Digits.defaults, "record_dir", "quality")
    metric_names = ("accuracy", "score")

    def model(self, config):
        self.quality = float(config["quality"])
        return super().model(config)

    def metrics(self, outputs, targets):
        return {**super().metrics(outputs, targets), "score": torch.tensor(self.quality * targets.shape[0])}

    def recorded_as(self, config) -> str:
        return f"quality={config['quality']}"


class DiskFillingDigits(Digits):
    """Digits whose trials with ``disk: fill`` or ``top-up`` fill the file system of the file ``ballast`` when their
    model is built (topping it up), and whose trial with ``disk: free`` deletes that file then: the
    sweep's storage is full in between (saves there fail with ENOSPC), as a disk shared with other jobs
    fills and frees."""

    hyperparameters = (*Digits.defaults, "disk", "ballast")

    def model(self, config):
        import torch.distributed as dist

        ballast = Path(config["ballast"])
        if dist.get_rank() == 0 and config["disk"] in ("fill", "top-up"):
            fd = os.open(ballast, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
            try:
                while os.write(fd, b"\0" * 4096):
                    pass
            except OSError:  # full
                pass
            finally:
                os.close(fd)
        elif dist.get_rank() == 0 and config["disk"] == "free":
            ballast.unlink()
        return super().model(config)


class GpuMemoryGrabbingDigits(Digits):
    """Each training step holds ``grab`` x the GPU's whole memory for its duration (0: nothing): a packed
    trial that asks for more than its share of the GPU."""

    defaults = {**Digits.defaults, "grab": 0.0}

    def training_step(self, model, batch, config):
        grab = float(config["grab"])
        held = None
        if grab > 0:
            total = torch.cuda.get_device_properties(batch[0].device).total_memory
            held = torch.empty(int(grab * total), dtype=torch.uint8, device=batch[0].device)
        loss = super().training_step(model, batch, config)
        del held
        return loss
