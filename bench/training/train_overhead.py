"""What the shared train loop costs against a bare, hand-written DDP loop, and what bf16 autocast buys.

Both loops train the same model (digits' BatchNorm CNN) on the same data with the same optimizer,
global batch and world size (2 gloo ranks, spawned like ``torchrun`` would, one core each), and both
evaluate on the whole validation set every epoch. The bare loop is what a careful user writes by hand
(DDP, DistributedSampler + set_epoch, all-reduced validation sums); the shared loop (``fit``) adds what
it carries (the training loss reduced over ranks, rank-0 checkpoints every epoch, reporting, per-epoch
seeds).

The two run in the same processes, epoch by epoch in alternation: after each epoch of ``fit`` reports,
the report runs one epoch of the bare loop. So every shared epoch has a bare epoch beside it, under
the same load of this shared machine, and the figure is the median of those paired ratios (a busy
second slows both of a pair alike, where separate runs seconds apart differed by 10% and more):

    ratio = median over epochs (bare epoch time / shared epoch time)      (target >= 0.97)

With ``--variant schedule_clip`` both loops also follow a cosine lr schedule over the run and clip the
gradients' norm to 1 before every step (torch's CosineAnnealingLR and clip_grad_norm_ in the bare loop;
``training.schedule: cosine`` and ``clip_grad_norm: 1`` in the shared one). ``--variant both`` runs the
two one after the other. ``--calibrate`` first times two identical bare loops the same way (an A/A
check: its median would be 1.000 if the pairing favoured neither slot, and its quartiles are the noise
each pair carries here), so the figures above can be read against it.

It also times one training step of the same model in one process at fp32 and under bf16 autocast on
this CPU (and, with a GPU, fp16 + GradScaler and bf16 against fp32 on it).

Usage: ``python bench/training/train_overhead.py [--epochs 150] [--warmup 3] [--variant plain|schedule_clip|both]
[--calibrate]``;
writes ``bench/results/train_overhead.json`` (the schedule_clip figures under ``schedule_clip``).
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

RESULTS = Path(__file__).resolve().parent.parent / "results" / "train_overhead.json"
TARGET_RATIO = 0.97
WORLD_SIZE = 2
VARIANTS = ("plain", "schedule_clip")
#: The A/A check: the bare loop in both slots.
CALIBRATION = "bare_vs_bare"
CLIP_NORM = 1.0
HPARAMS = {"model": "cnn", "hidden": 32, "layers": 1, "dropout": 0.0, "noise": 0.0, "lr": 3e-3,
           "batch_size": 64, "optimizer": "adam", "weight_decay": 0.0, "momentum": 0.9}


class BareLoop:
    """A hand-written DDP loop, one epoch per call; with ``schedule_clip``, a cosine schedule over
    ``epochs`` stepped every optimizer step, and gradient clipping."""

    def __init__(self, variant: str = "plain", epochs: int = 1) -> None:
        from torch.nn.parallel import DistributedDataParallel
        from torch.utils.data import DataLoader, DistributedSampler, Subset

        from tune_service.tasks.digits import Digits, load_digits_tensors

        rank, world = dist.get_rank(), dist.get_world_size()
        train_set, val_set = load_digits_tensors()
        torch.manual_seed(0)
        self.model = DistributedDataParallel(Digits().model(HPARAMS))
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=HPARAMS["lr"])
        self.sampler = DistributedSampler(train_set, num_replicas=world, rank=rank, shuffle=True, seed=0)
        batch = HPARAMS["batch_size"] // world
        self.train = DataLoader(train_set, batch_size=batch, sampler=self.sampler)
        self.validation = DataLoader(Subset(val_set, range(rank, len(val_set), world)), batch_size=batch)
        self.clip = variant == "schedule_clip"
        self.scheduler = (torch.optim.lr_scheduler.CosineAnnealingLR(self.optimizer, T_max=epochs * len(self.train))
                          if self.clip else None)

    def epoch(self, epoch: int) -> float:
        """Train and validate one epoch; returns the validation accuracy."""
        model, optimizer = self.model, self.optimizer
        model.train()
        self.sampler.set_epoch(epoch)
        for inputs, targets in self.train:
            optimizer.zero_grad(set_to_none=True)
            loss = torch.nn.functional.cross_entropy(model(inputs), targets)
            loss.backward()
            if self.clip:
                torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP_NORM)
            optimizer.step()
            if self.scheduler is not None:
                self.scheduler.step()
        model.eval()
        totals = torch.zeros(3, dtype=torch.float64)
        with torch.no_grad():
            for inputs, targets in self.validation:
                outputs = model(inputs)
                totals[0] += torch.nn.functional.cross_entropy(outputs, targets) * len(targets)
                totals[1] += (outputs.argmax(1) == targets).sum()
                totals[2] += len(targets)
        dist.all_reduce(totals)
        _, correct, samples = totals.tolist()
        return correct / samples


def interleaved_epochs(epochs: int, checkpoint_root: str, variant: str = "plain") -> dict[str, list[float]]:
    """Run ``fit`` for ``epochs`` epochs, with one bare epoch inside each of its reports; the seconds of
    every shared epoch (report to report, the bare epoch left out) and of every bare epoch."""
    from tune_service.tasks import ResolvedTask
    from tune_service.tasks.digits import Digits
    from tune_service.spec.training import ScheduleSettings, TrainingSettings
    from tune_service.training import LocalContext, TrialConfig, fit

    bare = BareLoop(variant, epochs)
    settings = (TrainingSettings(schedule=ScheduleSettings("cosine"), clip_grad_norm=CLIP_NORM)
                if variant == "schedule_clip" else TrainingSettings())
    times: dict[str, list[float]] = {"shared": [], "bare": [], "bare_accuracy": [], "shared_accuracy": []}

    class Interleaved(LocalContext):
        mark = time.perf_counter()

        def report(self, metrics, checkpoint_dir):
            super().report(metrics, checkpoint_dir)  # the shared loop's whole epoch ends here
            now = time.perf_counter()
            times["shared"].append(now - self.mark)
            times["shared_accuracy"].append(metrics["val_accuracy"])
            times["bare_accuracy"].append(bare.epoch(int(metrics["epoch"])))
            self.mark = time.perf_counter()
            times["bare"].append(self.mark - now)

    context = Interleaved(output_dir=checkpoint_root)
    fit(TrialConfig(ResolvedTask("digits", task=Digits()), HPARAMS, epochs=epochs, seed=0, settings=settings), context)
    return times


def bare_twice(epochs: int) -> dict[str, list[float]]:
    """Two identical bare loops timed as :func:`interleaved_epochs` times the shared and the bare one:
    an epoch of the first (in the slot of the shared loop), then one of the second."""
    first, second = BareLoop(), BareLoop()
    times: dict[str, list[float]] = {"shared": [], "bare": []}
    mark = time.perf_counter()
    for epoch in range(epochs):
        first.epoch(epoch)
        now = time.perf_counter()
        times["shared"].append(now - mark)
        second.epoch(epoch)
        mark = time.perf_counter()
        times["bare"].append(mark - now)
    return times


def _rank(rank: int, epochs: int, work: str, variant: str) -> None:
    torch.set_num_threads(1)  # one core per rank, as Ray gives a 1-CPU rank ...
    if hasattr(os, "sched_setaffinity") and rank < len(os.sched_getaffinity(0)):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[rank]})  # ... and the same core throughout
    dist.init_process_group("gloo", init_method=f"file://{work}/rendezvous", rank=rank, world_size=WORLD_SIZE)
    try:
        if variant == CALIBRATION:
            times = bare_twice(epochs)
        else:
            times = interleaved_epochs(epochs, os.path.join(work, f"rank{rank}"), variant)
        if rank == 0:
            Path(work, "times.json").write_text(json.dumps(times))
        dist.barrier()  # no rank tears gloo down while its peer still talks (a C++ abort otherwise)
    finally:
        dist.destroy_process_group()


def paired_epochs(epochs: int, warmup: int, variant: str = "plain") -> dict[str, list[float]]:
    """Epoch times of both loops, warm-up epochs dropped, from one spawned world."""
    with tempfile.TemporaryDirectory() as work:
        mp.spawn(_rank, args=(epochs + warmup, work, variant), nprocs=WORLD_SIZE)
        times = json.loads(Path(work, "times.json").read_text())
    return {name: values[warmup:] for name, values in times.items()}


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


def compare(epochs: int, warmup: int, variant: str, train_size: int) -> dict:
    """The paired comparison of the two loops for one variant, printed and returned."""
    times = paired_epochs(epochs, warmup, variant)
    paired = [b / s for b, s in zip(times["bare"], times["shared"])]
    bare = train_size / statistics.median(times["bare"])
    shared = train_size / statistics.median(times["shared"])
    result = {
        "variant": variant, "bare_samples_per_s": bare, "shared_samples_per_s": shared,
        "ratio": statistics.median(paired), "paired_ratio_quartiles": statistics.quantiles(paired, n=4),
        "target_ratio": TARGET_RATIO,
        "final_val_accuracy": {"bare": times["bare_accuracy"][-1], "shared": times["shared_accuracy"][-1]},
        "epoch_times_s": {"bare": times["bare"], "shared": times["shared"]},
    }
    print(f"DDP world {WORLD_SIZE}, digits CNN, global batch {HPARAMS['batch_size']}, {epochs} epochs of each loop, "
          f"interleaved ({variant})")
    print(f"  bare loop    {bare:10.0f} samples/s   (final val accuracy {result['final_val_accuracy']['bare']:.3f})")
    print(f"  shared loop  {shared:10.0f} samples/s   (final val accuracy {result['final_val_accuracy']['shared']:.3f})")
    status = "met" if result["ratio"] >= TARGET_RATIO else "MISSED"
    low, _, high = result["paired_ratio_quartiles"]
    print(f"  ratio        {result['ratio']:10.3f}   (median of {len(paired)} paired epochs, quartiles {low:.3f}-{high:.3f}; "
          f"target >= {TARGET_RATIO}: {status})")
    return result


def _calibrate(epochs: int, warmup: int) -> dict:
    times = paired_epochs(epochs, warmup, CALIBRATION)
    paired = [b / s for b, s in zip(times["bare"], times["shared"])]
    low, median, high = statistics.quantiles(paired, n=4)
    print(f"A/A check, two bare loops in the two slots: ratio {statistics.median(paired):.3f} "
          f"(quartiles {low:.3f}-{high:.3f}; 1.000 is no bias)")
    return {"ratio": statistics.median(paired), "paired_ratio_quartiles": [low, median, high]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=150)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--variant", choices=(*VARIANTS, "both"), default="both")
    parser.add_argument("--calibrate", action="store_true", help="first, the A/A check of two bare loops")
    args = parser.parse_args()

    from tune_service.tasks.digits import load_digits_tensors

    train_size = len(load_digits_tensors()[0])
    variants = VARIANTS if args.variant == "both" else (args.variant,)
    calibration = {CALIBRATION: _calibrate(args.epochs, args.warmup)} if args.calibrate else {}
    compared = {variant: compare(args.epochs, args.warmup, variant, train_size) for variant in variants}
    result = {"world_size": WORLD_SIZE, "epochs_timed": args.epochs, "warmup_epochs": args.warmup,
              **compared.get("plain", {}), **{v: compared[v] for v in variants if v != "plain"}, **calibration,
              "cpu": {p: step_time(p, torch.device("cpu")) for p in ("fp32", "bf16")}}
    result["cpu"]["bf16_vs_fp32_step_time"] = result["cpu"]["bf16"]["step_ms"] / result["cpu"]["fp32"]["step_ms"]
    if torch.cuda.is_available():
        gpu = torch.device("cuda", 0)
        result["gpu"] = {p: step_time(p, gpu) for p in ("fp32", "fp16", "bf16")}
        for p in ("fp16", "bf16"):
            result["gpu"][f"{p}_vs_fp32_step_time"] = result["gpu"][p]["step_ms"] / result["gpu"]["fp32"]["step_ms"]

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
