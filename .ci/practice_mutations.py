"""Take each practice out of the shared loop, one at a time, and check that its test fails.

Not part of CI (it reruns the practices tests once per mutation, a few minutes). Usage:
``python .ci/practice_mutations.py [NAME-FRAGMENT ...]``; every line must say FAILS (good).
"""
import subprocess, sys
from pathlib import Path
ROOT = Path(__file__).resolve().parents[1]
T = "tune_service/training/"
MUTATIONS = [
    ("1 DDP wrapper", T+"wrapping.py", "    if world_size > 1:\n        knobs", "    if False:\n        knobs", "test_1_"),
    ("2 set_epoch", T+"data.py", "        self.shuffler.set_epoch(epoch)", "        pass", "test_2_"),
    ("3 global batch", T+"data.py", 'else max(1, int(batch_size) // world_size)', 'else int(batch_size)', "test_3_"),
    ("4 workers from cpus", T+"data.py", "workers = min(WORKERS_PER_GPU, max(0, int(cpus_per_rank) - 1)) if cuda else 0", "workers = 0", "test_4_loader_workers"),
    ("4 loaders use settings", T+"data.py", "common = dict(num_workers=settings.num_workers,", "common = dict(num_workers=0,", "test_4_loaders"),
    ("5 autocast", T+"loop.py", "            with run.precision.autocast():\n                loss, samples", "            with contextlib.nullcontext():\n                loss, samples", "test_5_bf16"),
    ("5 fp32 loss", "tune_service/tasks/base.py", "return self.loss(outputs.float(), targets), targets.shape[0]", "return self.loss(outputs, targets), targets.shape[0]", "test_5_bf16"),
    ("5 grad scaler", T+"precision.py", 'enabled=self.name == "fp16"', "enabled=False", "test_5_an_fp16"),
    ("5 scaler restored", T+"loop.py", "            run.scaler.load_state_dict(state[\"scaler\"])", "            pass", "test_5_the_grad"),
    ("6 no per-step sync", T+"loop.py", "run.train_loss_sum.add_(loss.detach(), alpha=samples)", "run.train_loss_sum.add_(loss.item(), alpha=samples)", "test_6_"),
    ("8 sync batchnorm", T+"wrapping.py", "return nn.SyncBatchNorm.convert_sync_batchnorm(model) if wanted and world_size > 1 else model", "return model", "test_8_"),
    ("9 per-rank seeds", T+"loop.py", "seed_everything(rank_epoch_seed(run.seed, run.ranks.rank, epoch))", "seed_everything(run.seed)", "test_9_"),
    ("10 unwrapped checkpoint", T+"loop.py", "save_checkpoint(directory, model=run.model.plain,", "save_checkpoint(directory, model=run.model.module,", "test_10_rank"),
    ("10 optimizer restored", T+"loop.py", "        optimizer.load_state_dict(state[\"optimizer\"])", "        pass", "test_10_a_resumed"),
    ("10 resume epoch", T+"loop.py", "        run.epochs_done = int(state[\"epoch\"])", "        pass", "test_10_a_resumed"),
    ("11 all-reduced metrics", T+"loop.py", "all_reduce_sum(torch.cat([run.train_totals(), val_sums])).tolist()", "torch.cat([run.train_totals(), val_sums]).tolist()", "test_11_"),
    ("12 no_grad eval", T+"loop.py", "@torch.no_grad()\ndef validation_sums", "def validation_sums", "test_12_"),
    ("13 detach", T+"loop.py", "run.train_loss_sum.add_(loss.detach(), alpha=samples)", "run.train_loss_sum.add_(loss, alpha=samples)", "test_13_"),
    ("14 OOM caught", T+"oom.py", "    if isinstance(error, torch.OutOfMemoryError):\n        return True\n    return isinstance", "    return False and isinstance", "test_14_out"),
    ("15 no_sync", T+"loop.py", "sync = ddp.no_sync() if ddp is not None and not steps_now else contextlib.nullcontext()", "sync = contextlib.nullcontext()", "test_15_"),
    ("16 DDP knobs", T+"wrapping.py", "            bucket_cap_mb=knobs.bucket_cap_mb,\n", "", "test_16_"),
    ("17 lr scaling", T+"loop.py", 'scale = batch.global_batch / int(hparams["batch_size"]) if settings.lr_scaling == "linear" else 1.0', "scale = 1.0", "test_17_"),
    ("18 profiler", T+"profiling.py", "        if steps > 0 and enabled and self.path is not None:", "        if False:", "test_18_"),
    ("21 clip unscaled", T+"loop.py", "        run.scaler.unscale_(run.optimizer)", "        pass", "test_21_"),
    ("21 clipping", T+"loop.py", "        torch.nn.utils.clip_grad_norm_(", "        (lambda *a: None)(", "test_21_"),
    ("19 rank-0 logs", T+"distributed.py", "        return self.is_main\n", "        return True\n", "test_19_"),
]
only = sys.argv[1:]
for name, file, old, new, selector in MUTATIONS:
    if only and not any(o in name for o in only):
        continue
    path = ROOT / file
    original = path.read_text()
    assert original.count(old) == 1, (name, original.count(old))
    path.write_text(original.replace(old, new))
    try:
        rc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "tests/training", "-k", selector],
                            cwd=ROOT, capture_output=True, text=True).returncode
    finally:
        path.write_text(original)
    print(f"{name:28s} -> {'FAILS (good)' if rc == 1 else 'rc=%d (BAD)' % rc}", flush=True)
