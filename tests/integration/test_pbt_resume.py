"""A population whose driver is killed outright (SIGKILL) mid-run, and resumed: it reaches the lineage and
the final weights of the same sweep run without the kill (``scheduler.type: pbt``, on one slot, so that its
reports arrive in one order and the uninterrupted run is itself reproducible)."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
import torch
import yaml

import tune_service
from tune_service import cli
from tune_service.experiment.checkpoints import newest_checkpoint
from tune_service.experiment.layout import POPULATION_JOURNAL_FILE, TRIAL_RESULTS_FILE, read_trial_results
from driver_process import command_line, signal_driver_when, still_running
from test_pbt_sweeps import population_spec
from wandb_files import read_run

pytestmark = [pytest.mark.integration, pytest.mark.timeout(400)]

MAX_T, EPOCH_S = 8, 0.15
RAY_AGENTS = ("ray::DashboardAgent", "ray::RuntimeEnvAgent")  # they outlive a killed driver by up to 60 s
WANDB_SERVICE_PROGRAMS = "wandb/bin/wandb-"  # wandb-core and its system monitor, which the driver started


def spec_of(record_dir: Path) -> dict:
    spec = population_spec(record_dir)
    spec["task"] = "gang_tasks:PacedDigits"
    spec["parameters"]["epoch_s"] = {"value": EPOCH_S}
    spec["scheduler"]["max_t"] = MAX_T
    return spec


def first_lr(trial_dir: Path) -> float:
    """The lr a trial was created with: the name it goes by in both runs (trial ids are drawn anew)."""
    return read_trial_results(trial_dir / TRIAL_RESULTS_FILE)[0]["config"]["lr"]


def outcome(experiment: Path) -> dict[float, tuple]:
    """Each trial (by its first lr): its lineage (the donor by its first lr, the donor checkpoint's epoch,
    the lr it went on with), its final val_loss and the weights of its newest checkpoint."""
    names = {d.name[len("trial_"):]: first_lr(d) for d in experiment.glob("trial_*")}
    found = {}
    for record in tune_service.load_results(experiment).records:
        lineage = [(names[e["donor"]], e["epoch"], e["config"]["lr"]) for e in record.lineage]
        stored = newest_checkpoint(str(experiment / f"trial_{record.trial_id}"))
        weights = torch.load(Path(stored.path) / "state.pt", map_location="cpu", weights_only=False)["model"]
        found[names[record.trial_id]] = (record.status, record.epochs, lineage, record.metrics["val_loss"], weights)
    return found


def checkpoints(experiment: Path) -> dict[str, str]:
    """Each checkpoint's report, by the checkpoint's path in the experiment."""
    return {str(c.relative_to(experiment)): (c / "report.json").read_text()
            for c in experiment.glob("trial_*/checkpoint_*") if (c / "report.json").is_file()}


def journal(experiment: Path) -> list[str]:
    """The population's decisions so far (its journal's lines)."""
    path = experiment / POPULATION_JOURNAL_FILE
    return path.read_text().splitlines() if path.is_file() else []


def exploits_so_far(experiment: Path) -> int:
    """The exploits the population's journal holds (its decisions with a donor)."""
    decided = []
    for line in journal(experiment):
        try:
            decided.append(json.loads(line))
        except ValueError:  # the line being written
            continue
    return sum(1 for decision in decided if decision.get("donor"))


def test_a_population_killed_mid_run_resumes_to_the_lineage_and_weights_of_the_uninterrupted_run(
    ray_cluster, tmp_path, expect_exit
):
    whole_records, records = tmp_path / "whole_builds", tmp_path / "builds"
    whole_records.mkdir()
    records.mkdir()
    tune_service.run(spec_of(whole_records), storage=tmp_path / "whole", name="population", verbose=0)
    uninterrupted = outcome(tmp_path / "whole" / "population")
    assert sum(len(t[2]) for t in uninterrupted.values()) >= 2, "too few exploits to compare"

    spec = tmp_path / "population.yaml"
    spec.write_text(yaml.safe_dump(spec_of(records), sort_keys=False))
    experiment = tmp_path / "runs" / "population"
    # Killed after the first exploit, while the population trains on (whichever trial is running then): read
    # from the population's journal, which the service writes as it decides (Tune's pbt_global.txt reaches
    # the experiment with its next state save, and a kill that waited on it once came after the last decision).
    killed = signal_driver_when(spec, tmp_path / "runs", "population", signum=signal.SIGKILL, timeout=300,
                                ready=lambda: exploits_so_far(experiment) >= 1)
    assert killed.returncode == -signal.SIGKILL, killed.output[-3000:]
    # The driver's embedded Ray and the trials' ranks die with it; Ray's dashboard and runtime-env agents
    # notice their raylet is gone more slowly, and the driver's wandb service its driver (checked at the
    # session's end).
    lingering = [p for p in killed.descendants
                 if command_line(p).startswith(RAY_AGENTS) or WANDB_SERVICE_PROGRAMS in command_line(p)]
    assert not still_running([p for p in killed.descendants if p not in lingering], timeout=60)
    decided_at_kill = len(journal(experiment))
    at_kill = checkpoints(experiment)

    killed_runs = set((experiment / "wandb").glob("offline-run-*"))  # cut off by the kill: not read
    assert cli.main(["--resume", str(experiment)]) == cli.EXIT_OK
    resumed = outcome(experiment)
    # The kill came mid-population: decisions were left to the resume, and it made as many as the whole run.
    assert 0 < decided_at_kill < len(journal(experiment)) == len(journal(tmp_path / "whole" / "population"))
    assert resumed.keys() == uninterrupted.keys()
    for lr, (status, epochs, lineage, val_loss, weights) in uninterrupted.items():
        again = resumed[lr]
        assert again[:3] == (status, epochs, lineage), (lr, decided_at_kill, again[:3], (status, epochs, lineage))
        assert again[3] == val_loss, lr
        assert weights.keys() == again[4].keys() and all(torch.equal(weights[k], again[4][k]) for k in weights), lr
    # No checkpoint written before the kill was written over after it (Tune numbers a resumed trial's
    # checkpoints from its last saved count): a donor's offered checkpoint must stay what it was.
    after = checkpoints(experiment)
    assert {name: after.get(name) for name in at_kill} == at_kill
    assert json.loads((experiment / "summary.json").read_text())["trials"]
    # Each trial's wandb run went on after the resume, to its last epoch (the driver, started from this
    # process, which uses wandb, opened its runs in a wandb service of its own, not in this process's).
    logged: dict[str, int] = {}
    for run in map(read_run, sorted(set((experiment / "wandb").glob("offline-run-*")) - killed_runs)):
        if run.job_type == "trial":
            trial_id = run.run_id.rsplit("-", 1)[-1]
            logged[trial_id] = max([logged.get(trial_id, 0), *(h["epoch"] for h in run.history if "epoch" in h)])
    assert sorted(logged.values()) == [MAX_T] * len(uninterrupted), logged
    expect_exit(lingering, timeout=180)
