"""A sweep warm-started from an earlier one (``warm_start: DIR``), on a real local Ray: its plan names
the earlier trials told to its searcher, and once started it no longer needs the earlier experiment: it
resumes and goes on with more trials after that experiment is gone."""

from __future__ import annotations

import shutil

import pytest
import yaml

import tune_service
from tune_service import cli

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

BASE = {"task": "digits", "metric": {"name": "val_loss", "goal": "minimize"}, "scheduler": {"type": "fifo", "max_t": 1},
        "resources": {"workers": 1}, "wandb": {"mode": "disabled"},
        "parameters": {"lr": {"distribution": "log_uniform_values", "min": 1e-3, "max": 0.3}, "hidden": {"value": 32}}}


def test_a_warm_started_sweep_tells_the_earlier_trials_and_resumes_without_them(ray_cluster, tmp_path, capsys):
    earlier = tune_service.run({**BASE, "name": "earlier", "method": "random", "run_cap": 3},
                               storage=tmp_path, name="earlier", verbose=0)
    lrs = sorted(t.config["lr"] for t in earlier.trials)
    spec = tmp_path / "later.yaml"
    spec.write_text(yaml.safe_dump({**BASE, "name": "later", "method": "bayes", "run_cap": 1,
                                    "warm_start": earlier.experiment_dir}))
    assert cli.main([str(spec), "--storage", str(tmp_path), "--name", "later"]) == cli.EXIT_OK
    out = capsys.readouterr().out
    assert f"warm start: 3 trial(s) of {earlier.experiment_dir} told to the searcher before the first trial" in out
    later = tmp_path / "later"
    shutil.rmtree(earlier.experiment_dir)  # a resumed sweep does not read it again
    assert cli.main(["resume", str(later), "--set", "run_cap=2", "--quiet"]) == cli.EXIT_OK
    result = tune_service.load_results(later)
    assert [t.status for t in result.records] == ["completed", "completed"]
    # the earlier trials were told, not run again: both trials are the searcher's own suggestions
    assert not {t.config["lr"] for t in result.records} & set(lrs)
