"""What the shared train loop costs against a bare, hand-written DDP loop, and what bf16 autocast buys.

Both loops train the same model (digits' BatchNorm CNN) on the same data with the same optimizer,
global batch and world size (2 gloo ranks, spawned like ``torchrun`` would), and both evaluate on the
whole validation set every epoch. The bare loop is what a careful user writes by hand (DDP,
DistributedSampler + set_epoch, all-reduced validation sums); the shared loop adds what it carries
(metric reduction of the training loss, rank-0 checkpoints, reporting, per-epoch seeds). After warm-up
epochs, the two are timed in alternation, ``--repeats`` times each; each shared run is compared with the
bare run beside it, and the median of those paired ratios is the figure:

    ratio = median(shared samples/s / bare samples/s)        (target >= 0.97)

It also times one training step of the same model in one process at fp32 and under bf16 autocast on
this CPU (and, with a GPU, fp16 + GradScaler and bf16 against fp32 on it).

Usage: ``python bench/train_overhead.py [--epochs 20] [--warmup 3] [--repeats 3]``; writes
``bench/results/train_overhead.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

RESULTS = Path(__file__).resolve().parent / "results" / "train_overhead.json"
TARGET_RATIO = 0.97
WORLD_SIZE = 2
HPARAMS = {"model": "cnn", "hidden": 32, "layers": 1, "dropout": 0.0, "noise": 0.0, "lr": 3e-3,
           "batch_size": 64, "optimizer": "adam", "weight_decay": 0.0, "momentum": 0.9}


def bare_loop(epochs: int) -> list[float]:
    """A hand-written DDP loop; returns the time at the end of every epoch."""
    from torch.nn.parallel import DistributedDataParallel
    from torch.utils.data import DataLoader, DistributedSampler, Subset

    from tune_service.tasks.digits import Digits, load_digits_tensors

    rank, world = dist.get_rank(), dist.get_world_size()
    train_set, val_set = load_digits_tensors()
    torch.manual_seed(0)
    model = DistributedDataParallel(Digits().model(HPARAMS))
    optimizer = torch.optim.Adam(model.parameters(), lr=HPARAMS["lr"])
    sampler = DistributedSampler(train_set, num_replicas=world, rank=rank, shuffle=True, seed=0)
    batch = HPARAMS["batch_size"] // world
    train = DataLoader(train_set, batch_size=batch, sampler=sampler)
    validation = DataLoader(Subset(val_set, range(rank, len(val_set), world)), batch_size=batch)
    ends = []
    for epoch in range(1, epochs + 1):
        model.train()
        sampler.set_epoch(epoch)
        for inputs, targets in train:
            optimizer.zero_grad(set_to_none=True)
            loss = torch.nn.functional.cross_entropy(model(inputs), targets)
            loss.backward()
            optimizer.step()
        model.eval()
        totals = torch.zeros(3, dtype=torch.float64)
        with torch.no_grad():
            for inputs, targets in validation:
                outputs = model(inputs)
                totals[0] += torch.nn.functional.cross_entropy(outputs, targets) * len(targets)
                totals[1] += (outputs.argmax(1) == targets).sum()
                totals[2] += len(targets)
        dist.all_reduce(totals)
        totals.tolist()
        ends.append(time.perf_counter())
    return ends


def shared_loop(epochs: int) -> list[float]:
    """The service's loop (``fit``) on the same trial; returns the time of every epoch's report."""
    from tune_service.tasks import ResolvedTask
    from tune_service.tasks.digits import Digits
    from tune_service.training import LocalContext, TrialConfig, fit

    class Timed(LocalContext):
        def report(self, metrics, checkpoint_dir):
            super().report(metrics, checkpoint_dir)
            self.ends.append(time.perf_counter())

    with tempfile.TemporaryDirectory() as out:
        context = Timed(output_dir=out)
        context.ends = []
        fit(TrialConfig(ResolvedTask("digits", task=Digits()), HPARAMS, epochs=epochs, seed=0), context)
    return context.ends


def _rank(rank: int, loop: str, epochs: int, rendezvous: str, result: str) -> None:
    torch.set_num_threads(1)  # one core per rank, as Ray gives a 1-CPU rank
    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank, world_size=WORLD_SIZE)
    try:
        ends = {"bare": bare_loop, "shared": shared_loop}[loop](epochs)
        if rank == 0:
            Path(result).write_text(json.dumps(ends))
    finally:
        dist.destroy_process_group()


def samples_per_second(loop: str, epochs: int, warmup: int) -> float:
    from tune_service.tasks.digits import load_digits_tensors

    train_size = len(load_digits_tensors()[0])
    with tempfile.TemporaryDirectory() as work:
        result = os.path.join(work, "ends.json")
        mp.spawn(_rank, args=(loop, epochs + warmup, os.path.join(work, "rendezvous"), result), nprocs=WORLD_SIZE)
        ends = json.loads(Path(result).read_text())
    timed = ends[warmup - 1:]
    epoch_times = [b - a for a, b in zip(timed, timed[1:])]
    return train_size / statistics.median(epoch_times)  # the median epoch: robust to a busy moment


def step_time(precision: str, device: torch.device, steps: int = 30) -> dict:
    """Median time of one training step of the CNN at a global batch of 256, and peak GPU memory."""
    from tune_service.tasks.digits import Digits
    from tune_service.training.precision import choose_precision

    p = choose_precision(precision, device)
    torch.manual_seed(0)
    model = Digits().model({**HPARAMS, "hidden": 64}).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    scaler = p.scaler()
    inputs = torch.rand(256, 64, device=device)
    targets = torch.randint(0, 10, (256,), device=device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    times = []
    for _ in range(steps + 5):
        started = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        with p.autocast():
            outputs = model(inputs)
        scaler.scale(torch.nn.functional.cross_entropy(outputs.float(), targets)).backward()
        scaler.step(optimizer)
        scaler.update()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - started)
    peak = torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else None
    return {"step_ms": 1000 * statistics.median(times[5:]), "peak_mib": peak}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    runs = {"bare": [], "shared": []}
    for _ in range(args.repeats):
        for loop in ("bare", "shared"):  # alternated, so drifts of the machine hit both alike
            runs[loop].append(samples_per_second(loop, args.epochs, args.warmup))
    bare, shared = statistics.median(runs["bare"]), statistics.median(runs["shared"])
    paired = [s / b for s, b in zip(runs["shared"], runs["bare"])]  # neighbours share the machine's state
    result = {
        "world_size": WORLD_SIZE, "epochs_timed": args.epochs, "repeats": args.repeats,
        "bare_samples_per_s": bare, "shared_samples_per_s": shared, "ratio": statistics.median(paired),
        "paired_ratios": paired,
        "target_ratio": TARGET_RATIO, "runs": runs,
        "cpu": {p: step_time(p, torch.device("cpu")) for p in ("fp32", "bf16")},
    }
    result["cpu"]["bf16_vs_fp32_step_time"] = result["cpu"]["bf16"]["step_ms"] / result["cpu"]["fp32"]["step_ms"]
    if torch.cuda.is_available():
        gpu = torch.device("cuda", 0)
        result["gpu"] = {p: step_time(p, gpu) for p in ("fp32", "fp16", "bf16")}
        for p in ("fp16", "bf16"):
            result["gpu"][f"{p}_vs_fp32_step_time"] = result["gpu"][p]["step_ms"] / result["gpu"]["fp32"]["step_ms"]

    print(f"DDP world {WORLD_SIZE}, digits CNN, global batch {HPARAMS['batch_size']}, {args.epochs} epochs x {args.repeats}")
    print(f"  bare loop    {bare:10.0f} samples/s")
    print(f"  shared loop  {shared:10.0f} samples/s")
    status = "met" if result["ratio"] >= TARGET_RATIO else "MISSED"
    print(f"  ratio        {result['ratio']:10.3f}   (median of paired runs {', '.join(f'{r:.3f}' for r in paired)}; "
          f"target >= {TARGET_RATIO}: {status})")
    cpu = result["cpu"]
    print(f"CPU step, batch 256: fp32 {cpu['fp32']['step_ms']:.2f} ms, bf16 autocast {cpu['bf16']['step_ms']:.2f} ms "
          f"(bf16/fp32 {cpu['bf16_vs_fp32_step_time']:.2f})")
    for p in ("fp16", "bf16"):
        if "gpu" in result:
            g = result["gpu"]
            print(f"GPU step: {p} {g[p]['step_ms']:.2f} ms vs fp32 {g['fp32']['step_ms']:.2f} ms "
                  f"({g[f'{p}_vs_fp32_step_time']:.2f}); peak {g[p]['peak_mib']:.0f} vs {g['fp32']['peak_mib']:.0f} MiB")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
