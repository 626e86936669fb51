"""Where a GPU sweep's time goes (a diagnosis, not a figure with a target): run on a machine with a GPU.

- ``startup``: in fresh processes, the seconds of each step a warm gang's rank takes before its first
  trial: ``import torch``, the first optimizer, the CUDA context, cuBLAS's first matmul, cuDNN's first
  convolution, each in bf16 autocast too; twice (the second with the files in the page cache).
- ``trial``: one small-CNN and one digits trial alone, its set-up (``fit`` less its epochs) against its
  epochs; and the small CNN's training step alone and in a fused bundle of 8 under each of cuDNN's
  benchmark mode and precision (fp32, bf16), in ms per step.
- ``conv``: the small CNN's convolutions in bf16, forward and backward, as a fused bundle of 8 runs them
  (``vmap`` makes one grouped convolution of 8 groups) in torch's default layout and channels-last,
  against one member's dense convolution, in ms.

    python -m bench.gpu.gpu_anatomy [startup|trial|conv]...
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

STARTUP = r"""
import json, time
t = time.perf_counter(); marks = {}
def mark(name):
    global t
    now = time.perf_counter(); marks[name] = round(now - t, 3); t = now
import torch; mark("import torch")
torch.optim.SGD([torch.zeros(1, requires_grad=True)]); mark("first optimizer")
torch.cuda.set_device(0); torch.zeros(1, device="cuda"); torch.cuda.synchronize(); mark("CUDA context")
a = torch.randn(256, 256, device="cuda"); (a @ a).sum().item(); mark("cuBLAS first matmul")
with torch.autocast("cuda", torch.bfloat16):
    (a @ a).sum().item()
mark("bf16 matmul")
conv = torch.nn.Conv2d(3, 64, 3, padding=1).cuda(); x = torch.randn(8, 3, 32, 32, device="cuda")
conv(x).sum().backward(); torch.cuda.synchronize(); mark("cuDNN first conv fwd+bwd")
with torch.autocast("cuda", torch.bfloat16):
    conv(x).float().sum().backward()
torch.cuda.synchronize(); mark("bf16 conv fwd+bwd")
import tune_service.training.loop; mark("import tune_service.training.loop")
print("STARTUP", json.dumps(marks))
"""


def startup() -> None:
    for attempt in (1, 2):
        started = time.perf_counter()
        out = subprocess.run([sys.executable, "-c", STARTUP], capture_output=True, text=True)
        print(f"startup {attempt}: process {time.perf_counter() - started:.2f} s;",
              out.stdout.strip().splitlines()[-1] if out.stdout.strip() else out.stderr[-2000:], flush=True)


def _step_ms(step, device, steps: int = 20) -> float:
    import torch

    for _ in range(3):
        step()
    torch.cuda.synchronize(device)
    started = time.perf_counter()
    for _ in range(steps):
        step()
    torch.cuda.synchronize(device)
    return (time.perf_counter() - started) * 1000 / steps


def trial() -> None:
    import dataclasses

    import torch

    from bench.training.fused_bundles import sweep_configs
    from tune_service.training import LocalContext, fit
    from tune_service.training.batches import move_to_device
    from tune_service.training.fused import setup_bundle

    device = torch.device("cuda", 0)
    for model in ("digits MLP", "small CNN", "small CNN"):
        config = sweep_configs(model, 1, "cuda")[0]
        context = LocalContext(device=device)
        started = time.perf_counter()
        fit(config, context)
        torch.cuda.synchronize()
        total = time.perf_counter() - started
        epochs = [r["epoch_time_s"] for r in context.reports]
        print(f"trial {model}: {total:.3f} s in all, epochs {[round(e, 3) for e in epochs]}, "
              f"the rest (set-up, validation) {total - sum(epochs):.3f} s", flush=True)
    rows = {}
    for benchmark_mode in (False, True):
        torch.backends.cudnn.benchmark = benchmark_mode
        for precision in ("fp32", "bf16"):
            configs = [dataclasses.replace(c, settings=dataclasses.replace(c.settings, precision=precision))
                       for c in sweep_configs("small CNN", 8, "cuda")]
            run = setup_bundle(configs, device)
            batch = move_to_device(next(iter(run.loaders.train)), device)
            fused = _step_ms(lambda r=run, b=batch: train_epoch_one(r, b), device)
            alone = _step_ms(plain_step(run, configs[0], batch), device)
            rows[f"benchmark={benchmark_mode} {precision}"] = (round(alone, 2), round(fused, 2), round(fused / 8, 2))
            print(f"small CNN step, cudnn.benchmark={benchmark_mode} {precision}: one member {alone:.2f} ms, "
                  f"8 fused {fused:.2f} ms ({fused / 8:.2f} ms a member)", flush=True)
    print("TRIAL", json.dumps(rows))


def plain_step(run, config, batch):
    """One member's training step as it runs alone: its own module, torch's Adam."""
    import torch

    from tune_service.training.fused import step_loss

    model = run.task.model(dict(config.hparams)).to(run.device).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=float(config.hparams["lr"]))

    def step() -> None:
        with run.precision.autocast():
            loss = step_loss(run.task.training_step(model, batch, run.hparams))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def train_epoch_one(run, batch) -> None:
    """One fused training step on ``batch`` (train_epoch's body for one batch)."""
    from tune_service.training.fused import _optimizer_step, step_loss

    run.models.base.train()
    with run.precision.autocast():
        losses = run.models.vmapped(lambda model, b: step_loss(run.task.training_step(model, b, run.hparams)))(batch)
    losses.sum().backward()
    _optimizer_step(run)


def conv(members: int = 8, batch: int = 256) -> None:
    import torch

    device = torch.device("cuda", 0)
    rows = {}
    for channels, size in ((64, 32), (128, 16), (256, 8)):
        for layout in ("contiguous", "channels_last"):
            memory_format = torch.channels_last if layout == "channels_last" else torch.contiguous_format
            for name, groups in (("one member", 1), (f"{members} grouped", members)):
                inputs = torch.randn(batch, channels * groups, size, size, device=device, dtype=torch.bfloat16)
                inputs = inputs.to(memory_format=memory_format).requires_grad_()
                weight = torch.randn(channels * groups, channels, 3, 3, device=device, dtype=torch.bfloat16)
                weight = weight.to(memory_format=memory_format).requires_grad_()

                def step(x=inputs, w=weight, g=groups) -> None:
                    torch.nn.functional.conv2d(x, w, padding=1, groups=g).sum().backward()

                ms = _step_ms(step, device)
                rows[f"{channels}ch {size}px {layout} {name}"] = round(ms, 3)
                print(f"conv {channels} channels {size}x{size} {layout}, {name}: {ms:.3f} ms", flush=True)
    print("CONV", json.dumps(rows))


if __name__ == "__main__":
    for part in sys.argv[1:] or ["startup", "trial", "conv"]:
        {"startup": startup, "trial": trial, "conv": conv}[part]()
