"""Many small trials on one device: one trial at a time, packed (several trial processes on one GPU, each
held to its share of the GPU's memory), and fused (bundles of K trials as one job, ``tune_service.
training.fused``), in trials per hour of one sweep's trials, side by side in one run.

The sweep: ``trials`` configs of one task drawn at random (Adam; lr log-uniform in [1e-4, 1e-1], weight
decay uniform in [0, 1e-3]; one seed, as a sweep has), each trained for ``epochs`` whole epochs with
validation every epoch and no checkpoints (the same work in every row):

- ``alone``: each trial by the shared loop's ``fit``, one after another, as a sweep with one trial per
  device runs them.
- ``packed`` (GPU only): ``processes`` processes on the one GPU, each with
  ``torch.cuda.set_per_process_memory_fraction(1 / processes)``, each warmed by one trial (CUDA
  initialised, kernels loaded: a warm gang's state) and then training its share of the trials.
- ``fused``: bundles of ``bundle`` trials, one after another, each trained by ``fit_bundle``.

Also: the fused training step against a bare ``torch.func`` loop of the same K models (stacked
parameters, ``vmap(functional_call)``, ``torch.optim.Adam`` over the stacked tensors: what the PyTorch
tutorial on model ensembling writes, with one lr for all), in steps per second over the same batches;
and on a GPU, the ResNet's epoch time in bf16 against fp32 (alone). The GPU's utilisation (NVML, every
0.1 s) is recorded for each row.

Models: the digits MLP (the built-in task) everywhere; on a GPU also a small CNN and a ResNet-18-size
network on synthetic 32x32 images at batch 256 (``bench.workloads.SyntheticImages``).
"""

from __future__ import annotations

import os
import random
import statistics
import threading
import time
from pathlib import Path
from typing import Any

from bench.common import ROOT, figure

NAME = "fused_bundles"
#: Per model: the task, its fixed hyperparameters, the epochs of a trial.
MODELS = {
    "digits MLP": ("tune_service.tasks.digits:Digits", {"model": "mlp", "hidden": 64, "batch_size": 64}, 3),
    "small CNN": ("bench.workloads:SyntheticImages", {"model": "small_cnn", "images": 2048}, 2),
    "ResNet-18": ("bench.workloads:SyntheticImages", {"model": "resnet18", "images": 2048}, 2),
}
SIZES = {
    # device type -> quick -> sizes
    "cpu": {False: {"trials": 16, "bundle": 8, "models": ["digits MLP"], "step_epochs": 5},
            True: {"trials": 8, "bundle": 8, "models": ["digits MLP"], "step_epochs": 3}},
    "cuda": {False: {"trials": 32, "bundle": 8, "processes": 4, "models": list(MODELS), "step_epochs": 5},
             True: {"trials": 32, "bundle": 8, "processes": 4, "models": list(MODELS), "step_epochs": 3}},
}
#: Fused against alone, in trials per hour: at least this (the issue's goals).
TARGETS = {("cpu", "digits MLP"): 2.0, ("cuda", "digits MLP"): 5.0, ("cuda", "small CNN"): 5.0,
           ("cuda", "ResNet-18"): 1.5}


def sweep_configs(model: str, trials: int, device_type: str, seed: int = 0) -> list:
    """The sweep's trial configs: random optimizer numbers, everything else fixed."""
    from tune_service.spec.training import TrainingSettings
    from tune_service.tasks import resolve_task
    from tune_service.training.trial_config import TrialConfig

    reference, fixed, epochs = MODELS[model]
    task = resolve_task(reference)
    draw = random.Random(seed)
    settings = TrainingSettings(checkpoint_every=0, num_workers=0)
    configs = []
    for _ in range(trials):
        hparams = {**task.task.defaults, **fixed, "optimizer": "adam", "lr": 10 ** draw.uniform(-4, -1),
                   "weight_decay": draw.uniform(0, 1e-3)}
        configs.append(TrialConfig(task, hparams, epochs=epochs, seed=0, settings=settings))
    return configs


class Utilisation:
    """The GPU's mean utilisation (%) while the block runs, sampled by NVML every 0.1 s; None without NVML."""

    def __enter__(self):
        self.samples: list[int] = []
        self._stop = threading.Event()
        try:
            import pynvml

            pynvml.nvmlInit()
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        except Exception:  # no NVML (a CPU machine): nothing to sample
            self._handle = None
            return self
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self):
        import pynvml

        while not self._stop.wait(0.1):
            self.samples.append(pynvml.nvmlDeviceGetUtilizationRates(self._handle).gpu)

    def __exit__(self, *exc):
        self._stop.set()
        if self._handle is not None:
            self._thread.join()

    @property
    def mean(self) -> float | None:
        return round(statistics.fmean(self.samples), 1) if self.samples else None


def synchronise(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run_alone(configs: list, device) -> float:
    from tune_service.training import LocalContext, fit

    started = time.perf_counter()
    for config in configs:
        fit(config, LocalContext(device=device))
    synchronise(device)
    return time.perf_counter() - started


def run_fused(configs: list, device, bundle: int) -> float:
    from tune_service.training.fused import fit_bundle, setup_bundle

    started = time.perf_counter()
    for start in range(0, len(configs), bundle):
        fit_bundle(setup_bundle(configs[start : start + bundle], device), lambda member, metrics, checkpoint: True)
    synchronise(device)
    return time.perf_counter() - started


def _packed_process(index: int, configs: list, processes: int, barrier, results) -> None:
    """One packed process: its memory share, a warm-up trial, then its trials; its seconds into ``results``."""
    import torch

    torch.cuda.set_per_process_memory_fraction(1 / processes, 0)
    device = torch.device("cuda", 0)
    run_alone(configs[:1], device)  # warm: CUDA initialised, kernels loaded, as a warm gang's rank is
    barrier.wait()
    results[index] = run_alone(configs, device)


def run_packed(configs: list, processes: int) -> float:
    """The configs shared out over ``processes`` processes on one GPU; the wall time from when all are warm."""
    import torch.multiprocessing as mp

    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    context = mp.get_context("spawn")
    barrier = context.Barrier(processes + 1)
    results = context.Manager().dict()
    workers = [context.Process(target=_packed_process, args=(i, configs[i::processes], processes, barrier, results))
               for i in range(processes)]
    for worker in workers:
        worker.start()
    barrier.wait()
    started = time.perf_counter()
    for worker in workers:
        worker.join()
    if any(worker.exitcode for worker in workers):
        raise RuntimeError(f"a packed process failed: exit codes {[w.exitcode for w in workers]}")
    return time.perf_counter() - started


def step_throughput(configs: list, device, epochs: int) -> dict[str, float]:
    """Optimizer steps per second of the fused bundle's training and of a bare torch.func loop of the same
    models on the same loader, each the median over ``epochs`` epochs, taken alternately."""
    import torch
    import torch.nn.functional as F
    from torch.func import functional_call, stack_module_state, vmap

    from tune_service.training.batches import move_to_device
    from tune_service.training.distributed import seed_everything
    from tune_service.training.fused import setup_bundle, train_epoch

    run = setup_bundle(configs, device)
    task, hparams = run.task, dict(configs[0].hparams)
    models = []
    for _ in configs:
        seed_everything(0)
        models.append(task.model(hparams).to(device))
    params, buffers = stack_module_state(models)
    base = run.models.base
    optimizer = torch.optim.Adam(list(params.values()), lr=float(hparams["lr"]))

    def member_loss(p, b, inputs, targets):
        return F.cross_entropy(functional_call(base, (p, b), (inputs,)).float(), targets)

    batched = vmap(member_loss, in_dims=(0, 0, None, None), randomness="different")

    def bare_epoch(epoch: int) -> None:
        base.train()
        run.loaders.set_epoch(epoch)
        for batch in run.loaders.train:
            inputs, targets = move_to_device(batch, device)
            with run.precision.autocast():
                losses = batched(params, buffers, inputs, targets)
            losses.sum().backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

    steps = len(run.loaders.train)
    times: dict[str, list[float]] = {"fused": [], "bare": []}
    for epoch in range(1, epochs + 2):  # the first of each is a warm-up
        for name, one in (("fused", lambda e: train_epoch(run, e)), ("bare", bare_epoch)):
            synchronise(device)
            started = time.perf_counter()
            one(epoch)
            synchronise(device)
            if epoch > 1:
                times[name].append(time.perf_counter() - started)
    return {name: steps / statistics.median(values) for name, values in times.items()}


def precision_epoch_times(model: str, device) -> dict[str, float]:
    """The median epoch time (s) of one trial alone in fp32 and in bf16."""
    import dataclasses

    from tune_service.training import LocalContext, fit

    out = {}
    for precision in ("fp32", "bf16"):
        config = sweep_configs(model, 1, device.type)[0]
        config = dataclasses.replace(config, epochs=4,
                                     settings=dataclasses.replace(config.settings, precision=precision))
        context = LocalContext(device=device)
        fit(config, context)
        out[precision] = statistics.median(r["epoch_time_s"] for r in context.reports[1:])
    return out


def run(quick: bool) -> dict[str, Any]:
    import torch

    device = torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")
    size = SIZES[device.type][quick]
    figures, raw = [], {}
    for model in size["models"]:
        configs = sweep_configs(model, size["trials"], device.type)
        rows = {}
        with Utilisation() as use:
            seconds = run_alone(configs, device)
        rows["alone"] = {"s": seconds, "gpu_util_pct": use.mean}
        if device.type == "cuda":
            with Utilisation() as use:
                seconds = run_packed(configs, size["processes"])
            rows["packed"] = {"s": seconds, "gpu_util_pct": use.mean}
        with Utilisation() as use:
            seconds = run_fused(configs, device, size["bundle"])
        rows["fused"] = {"s": seconds, "gpu_util_pct": use.mean}
        for row in rows.values():
            row["trials_per_hour"] = round(size["trials"] * 3600 / row["s"])
        steps = step_throughput(configs[: size["bundle"]], device, size["step_epochs"])
        raw[model] = {"rows": rows, "steps_per_s": steps}
        print(f"  {model}: " + ", ".join(f"{k} {v['trials_per_hour']} trials/h (GPU {v['gpu_util_pct']} %)"
                                        for k, v in rows.items()) +
              f"; fused step {steps['fused']:.1f}/s against bare torch.func {steps['bare']:.1f}/s", flush=True)
        alone = rows["alone"]["trials_per_hour"]
        for kind in [k for k in ("packed", "fused") if k in rows]:
            target = TARGETS.get((device.type, model)) if kind == "fused" else None
            figures.append(figure(f"{model}, {kind} / one trial at a time, trials per hour", "one at a time",
                                  1.0, rows[kind]["trials_per_hour"] / alone, f">= {target}" if target else None,
                                  "x", note=f"{rows[kind]['trials_per_hour']} against {alone} trials/h"))
        figures.append(figure(f"{model}, fused step / bare torch.func step", "bare torch.func", 1.0,
                              steps["fused"] / steps["bare"], ">= 0.95", "x"))
    if device.type == "cuda":
        epoch_s = precision_epoch_times("ResNet-18", device)
        raw["ResNet-18 epoch_s"] = epoch_s
        figures.append(figure("ResNet-18 epoch time, bf16 / fp32", "fp32", 1.0, epoch_s["bf16"] / epoch_s["fp32"],
                              None, "x", note=f"{epoch_s['bf16']:.3f} s against {epoch_s['fp32']:.3f} s"))
    return {"figures": figures, "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
            "sizes": size, "results": raw}


if __name__ == "__main__":
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))
    from bench.run import main

    sys.exit(main([NAME] + sys.argv[1:]))
