"""Tasks for the warm-gang tests: one that leaves global state behind in its rank's process, one that
records every time its data sets are built, one that fails on one rank; and a rank the tests look inside."""

from __future__ import annotations

import os
import time
from pathlib import Path

import torch

from tune_service.execution.rank import RankWorker
from tune_service.tasks.digits import Digits


class InspectedRankWorker(RankWorker):
    """A warm rank the tests can look inside: its process, scratch directory, environment and torch flags."""

    def pid(self) -> int:
        return os.getpid()

    def scratch_path(self) -> str:
        """Where this rank writes its checkpoints before its trial takes them."""
        return str(self.scratch)

    def environment_has(self, name: str) -> bool:
        """Whether the variable is set in this rank's environment now."""
        return name in os.environ

    def flag_differences(self) -> dict:
        """Torch flags that differ from this rank's baseline now (empty between trials)."""
        return self.state.differences()


class LeakyDigits(Digits):
    """Digits that changes process-wide state while it builds its model (what a careless user task
    does): torch's flags, the default thread count, an environment variable."""

    def model(self, config):
        torch.backends.cudnn.benchmark = not torch.backends.cudnn.benchmark
        torch.set_num_threads(max(1, torch.get_num_threads() + 1))
        torch.set_float32_matmul_precision("medium")
        os.environ["LEAKY_DIGITS_WAS_HERE"] = "1"
        return super().model(config)


class CountingDigits(Digits):
    """Digits whose data depend on ``subset`` only; every build of its data sets is recorded in
    ``record_dir`` as a file named after the rank's process and a counter."""

    defaults = {**Digits.defaults, "subset": 1.0, "record_dir": ""}
    data_hparams = ("subset",)

    def datasets(self, config):
        record_dir = Path(config["record_dir"])
        builds = len(list(record_dir.glob(f"build-{os.getpid()}-*")))
        (record_dir / f"build-{os.getpid()}-{builds}").write_text(str(config["subset"]))
        train, validation = super().datasets(config)
        keep = int(len(train) * float(config["subset"]))
        return torch.utils.data.Subset(train, range(keep)), validation


class PacedDigits(CountingDigits):
    """CountingDigits whose epochs take at least ``epoch_s`` more seconds (its validation sleeps): a sweep
    slow enough to be interrupted at a chosen point. The sleep changes no number it trains or reports."""

    defaults = {**CountingDigits.defaults, "epoch_s": 0.0}

    def validation_step(self, model, batch, config):
        time.sleep(float(config["epoch_s"]) / 6)  # the digits' validation set is 6 batches of 64
        return super().validation_step(model, batch, config)


class FailingDigits(Digits):
    """Digits whose rank ``fail_rank`` fails at its ``fail_at_batch``-th training batch (counted from 1,
    over the trial): by raising (``how: raise``) or by dying (``how: exit``)."""

    defaults = {**Digits.defaults, "fail_rank": 1, "fail_at_batch": 30, "how": "raise"}

    def __init__(self):
        self.batches = 0

    def augment(self, inputs, targets, config):
        import torch.distributed as dist

        self.batches += 1
        rank = dist.get_rank() if dist.is_initialized() else 0
        if rank == int(config["fail_rank"]) and self.batches == int(config["fail_at_batch"]):
            if config["how"] == "exit":
                os._exit(17)
            raise ValueError(f"rank {rank} failed on purpose at batch {self.batches}")
        return super().augment(inputs, targets, config)


class EnvironmentRecordingDigits(Digits):
    """Digits whose every rank writes, in ``record_dir``, the runtime environment Ray gave its process
    and the environment variables Tune's runtime environment would set (``rank-<pid>.json``)."""

    defaults = {**Digits.defaults, "record_dir": ""}

    def datasets(self, config):
        import json

        import ray

        from tune_service.ray_internals import TUNE_TRIAL_ENVIRONMENT

        record = {"runtime_env": dict(ray.get_runtime_context().runtime_env),
                  "variables": {name: os.environ.get(name) for name in TUNE_TRIAL_ENVIRONMENT}}
        (Path(config["record_dir"]) / f"rank-{os.getpid()}.json").write_text(json.dumps(record))
        return super().datasets(config)
