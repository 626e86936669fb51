"""Real W&B sweep files from public projects (``tests/data/wandb_sweeps/``, each with its source) are
valid specs as they are: ``tune-run --dry-run`` plans every one of them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tune_service import cli
from tune_service.search import spaces
from tune_service.spec import load_spec

SWEEP_FILES = sorted((Path(__file__).resolve().parents[2] / "data" / "wandb_sweeps").glob("*.yaml"))


def test_the_collection_is_a_varied_dozen():
    specs = [load_spec(path) for path in SWEEP_FILES]
    assert len(specs) >= 12
    assert {s.method for s in specs} == {"random", "grid", "bayes"}
    assert {s.metric.goal for s in specs} == {"minimize", "maximize"}
    assert any(len(s.source.get("early_terminate", {})) for s in specs)
    assert any("command" in s.source for s in specs) and any("." in p.name for s in specs for p in s.parameters)


@pytest.mark.parametrize("path", SWEEP_FILES, ids=lambda p: p.stem)
def test_a_real_wandb_sweep_file_passes_dry_run_showing_the_command_its_first_trial_runs(path, capsys,
                                                                                         forbid_ray_start):
    spec = load_spec(path)
    assert cli.main([str(path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    command = next(line for line in out.splitlines() if line.startswith("command "))
    assert spec.runs_program and "trials" in out and spec.program in command and "(the first trial's)" in command
    passes_args = any("${args" in token for token in (spec.command or ("${args}",)))
    # with an args macro every parameter is on the line, by name; without one the program reads wandb.config
    assert all(p.name in command for p in spec.parameters) == passes_args


def test_a_hydra_style_dotted_name_under_a_parameter_stays_one_flat_key_as_in_wandb():
    spec = load_spec(next(p for p in SWEEP_FILES if p.stem.startswith("03_")))
    config = spaces.Decoder(spec.parameters)({"optimizer": "adam", "experiment": "expt001",
                                              "optimizer.config.learning_rate": 0.01})
    assert config == {"optimizer": "adam", "experiment": "expt001", "optimizer.config.learning_rate": 0.01}
    assert any("kept as one flat key" in note for note in spec.notes)


def test_hyperband_with_only_min_iter_gets_three_brackets_of_epochs():
    spec = load_spec({"early_terminate": {"type": "hyperband", "min_iter": 2, "eta": 3}})
    assert (spec.scheduler.type, spec.scheduler.grace_period, spec.scheduler.max_t) == ("asha", 2, 54)
    assert load_spec({"early_terminate": {"type": "hyperband", "min_iter": 2}, "scheduler": {"max_t": 6}}
                     ).scheduler.max_t == 6  # scheduler.max_t wins
