"""Fused against alone on a GPU, the digits CNN with BatchNorm, fp32 and bf16: per-epoch differences."""
import sys
import tempfile

sys.path[:0] = ["tests", "tests/training"]
from test_fused import TrainingSettings, alone, bundled, config  # noqa: E402

for precision in ("bf16", "fp32"):
    trials = [config(settings=TrainingSettings(precision=precision), optimizer="sgd", model="cnn", hidden=16, lr=lr)
              for lr in (0.05, 0.1)]
    reports, _, weights = bundled(trials, device="cuda")
    for member, trial in enumerate(trials):
        theirs, their_weights = alone(trial, tempfile.mkdtemp(), device="cuda")
        for ours, t in zip(reports[member], theirs, strict=True):
            print(precision, member, ours["epoch"], *(f"{k} {ours[k]:.6f}/{t[k]:.6f}" for k in
                                                     ("train_loss", "val_loss", "val_accuracy")))
        print(precision, member, "max weight diff",
              max((weights[member][n].float().cpu() - w.float().cpu()).abs().max().item() for n, w in their_weights.items()))
