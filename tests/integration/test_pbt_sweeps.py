"""``scheduler.type: pbt`` on a real local Ray: the weak trials of a population take the strong ones'
checkpoints on the warm gang their slot holds, and train on with their own mutated hyperparameters."""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path

import pytest

import tune_service
from tune_service.experiment.layout import TRIAL_RESULTS_FILE, read_trial_results
from tune_service.spec.training import TrainingSettings
from tune_service.tasks import resolve_task
from tune_service.training.context import LocalContext
from tune_service.training.loop import fit
from tune_service.training.trial_config import TrialConfig
from wandb_files import offline_runs

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

MAX_T, INTERVAL = 6, 2


def population_spec(record_dir: Path) -> dict:
    """Four SGD trials of random lr, one at a time on one warm gang of one rank (it takes both CPUs); at every
    second epoch the worse half copy the better half. The task records every build of its data sets, by
    the rank's process (a new rank process builds them anew)."""
    return {
        "name": "population", "task": "gang_tasks:CountingDigits", "method": "random", "run_cap": 4, "seed": 3,
        "metric": {"name": "val_loss", "goal": "minimize"},
        "parameters": {
            "lr": {"distribution": "log_uniform_values", "min": 1e-3, "max": 0.3},
            "optimizer": {"value": "sgd"}, "record_dir": {"value": str(record_dir)}, "subset": {"value": 1.0},
        },
        "scheduler": {"type": "pbt", "max_t": MAX_T, "perturbation_interval": INTERVAL, "quantile_fraction": 0.5},
        "resources": {"workers": 1, "cpus_per_worker": 2},
        "training": {"deterministic": True},
        "failure": {"max_failures": 0},
    }


def reports(trial_dir: Path) -> list[dict]:
    return read_trial_results(trial_dir / TRIAL_RESULTS_FILE)


def exploits(experiment: Path) -> list[tuple[Path, dict]]:
    """Each (trial directory, its first report after an exploit). A trial started again from its own
    checkpoint first repeats that checkpoint's report; one started from another's checkpoint reports the
    epoch after it, which its own last report need not be (a trial runs ahead until its pause arrives)."""
    found = []
    for trial_dir in sorted(experiment.glob("trial_*")):
        rows = reports(trial_dir)
        for before, after in itertools.pairwise(rows):
            if after["iterations_since_restore"] == 1 and after["epoch"] != before["epoch"]:
                found.append((trial_dir, after))
    return found


def donor_checkpoints(experiment: Path, config: dict, epoch: int) -> list[Path]:
    """The checkpoints of epoch ``epoch`` of the trials whose config was ``config`` at that epoch."""
    found = []
    for trial_dir in experiment.glob("trial_*"):
        if any(r["epoch"] == epoch and r["config"] == config for r in reports(trial_dir)):
            found += [c for c in sorted(trial_dir.glob("checkpoint_*"))
                      if json.loads((c / "report.json").read_text())["epoch"] == epoch]
    return found


def one_epoch_from(checkpoint: Path, hparams: dict, epoch: int, work: Path) -> dict:
    """The report of a fresh trial of ``hparams`` started from ``checkpoint`` (epoch ``epoch - 1``),
    trained one epoch alone in this process."""
    shutil.copytree(checkpoint, work / "checkpoints" / f"epoch_{epoch - 1:04d}")
    task = resolve_task("gang_tasks:CountingDigits")
    context = LocalContext(output_dir=work)
    fit(TrialConfig(task, {**task.task.defaults, **hparams}, epochs=epoch, seed=3,
                    settings=TrainingSettings(deterministic=True)), context)
    (report,) = context.reports
    return report


def test_weak_trials_take_the_strong_ones_weights_on_their_warm_gang_and_train_on_with_their_own_lr(
    ray_cluster, tmp_path
):
    record_dir = tmp_path / "builds"
    record_dir.mkdir()
    result = tune_service.run(population_spec(record_dir), storage=tmp_path, name="population", verbose=0)
    assert [t.status for t in result.trials] == ["completed"] * 4
    assert all(t.epochs == MAX_T for t in result.trials)
    experiment = tmp_path / "population"
    # Each trial's result is its own: none ends as a copy of a donor (PBT never exploits a trial's last
    # epoch, after which it would restart from the donor's checkpoint with nothing left to train).
    assert sorted(t.trial_id for t in result.trials) == sorted(
        d.name[len("trial_"):] for d in experiment.glob("trial_*"))
    found = exploits(experiment)
    assert found, "no trial exploited another"
    # One rank process trained the whole population: every exploit was a checkpoint load in it.
    assert len({build.name.split("-")[1] for build in record_dir.iterdir()}) == 1

    # Every epoch of every trial is in its results, though trials paused and started again (each file is
    # Tune's, kept whole: tune_service.experiment.trial_logs).
    for trial_dir in experiment.glob("trial_*"):
        assert {r["epoch"] for r in reports(trial_dir)} == set(range(1, MAX_T + 1)), trial_dir.name

    # The first epoch after an exploit is the donor's checkpoint trained one more epoch with the trial's new
    # config, as a fresh trial started from that checkpoint trains it (bit for bit: deterministic, one rank).
    # Ray's PBT records every exploit: [trial, donor, their iterations, the donor's config, the new one].
    policy = [json.loads(line) for line in (experiment / "pbt_global.txt").read_text().splitlines()]
    trial_dir, after = found[0]
    epoch = after["epoch"]
    donor_config = next(p[4] for p in policy if p[5] == after["config"])
    assert after["lr"] == after["config"]["lr"]  # the trial's own lr, not the donor's
    alone = [one_epoch_from(checkpoint, after["config"], epoch, tmp_path / f"alone{i}")
             for i, checkpoint in enumerate(donor_checkpoints(experiment, donor_config, epoch - 1))]
    keys = ("epoch", "lr", "train_loss", "val_loss", "val_accuracy")
    assert {k: after[k] for k in keys} in [{k: a[k] for k in keys} for a in alone]

    # The lineage: each exploit the results show is in its trial's record, with the donor's epoch and the
    # config it went on with, and each recorded one is an exploit Ray's PBT made.
    lineage = {t.trial_id: t.lineage for t in result.trials}
    for trial_dir, row in found:
        trial_id = trial_dir.name[len("trial_"):]
        assert {"epoch": row["epoch"] - 1, "config": row["config"]} in [
            {"epoch": e["epoch"], "config": e["config"]} for e in lineage[trial_id]]
    for trial_id, exploits_of_trial in lineage.items():
        for e in exploits_of_trial:
            assert e["donor"] in lineage and e["donor"] != trial_id and e["epoch"] < MAX_T
            assert any(p[5] == e["config"] for p in policy)
    table = tune_service.load_results(experiment).lineage
    assert len(table) == sum(len(e) for e in lineage.values()) >= len(found)

    # wandb: each trial's run logs every epoch it trained, on steps that only grow though an exploit sends
    # the trial back to the donor's epoch; each report carries the trial's lr then, and the first after an
    # exploit names the donor and its epoch.
    runs = {run.config["trial_id"]: run for run in offline_runs(experiment) if run.job_type == "trial"}
    for trial_dir, row in found:
        trial_id = trial_dir.name[len("trial_"):]
        history = runs[trial_id].history
        steps = [h["_step"] for h in history]
        assert steps == sorted(set(steps)), steps
        logged = [(h["epoch"], h["hparams/lr"]) for h in history]
        assert (row["epoch"], row["lr"]) in logged
        first = next(h for h in history if h["epoch"] == row["epoch"] and h["hparams/lr"] == row["lr"])
        assert first["exploit/epoch"] == row["epoch"] - 1 and first["exploit/donor"] in lineage


def last_per_epoch(rows: list[dict]) -> dict[int, dict]:
    return {r["epoch"]: r for r in rows}


def test_the_best_spec_of_a_population_replays_the_schedule_its_best_weights_were_trained_with(ray_cluster, tmp_path):
    record_dir = tmp_path / "builds"
    record_dir.mkdir()
    tune_service.run(population_spec(record_dir), storage=tmp_path, name="population", verbose=0)
    results = tune_service.load_results(tmp_path / "population")
    family = results.family(results.best.trial_id)
    spec = results.best_spec()
    assert spec["scheduler"]["type"] == ("pbt_replay" if len(family) > 1 else "fifo"), family

    replayed = tune_service.run(spec, storage=tmp_path, name="replay", verbose=0)
    (trial,) = replayed.trials
    assert trial.status == "completed"
    rows = last_per_epoch(reports(tmp_path / "replay" / f"trial_{trial.trial_id}"))
    # Each epoch trained with the lr the best trial's weights were trained with at that epoch.
    expected = {epoch: segment["config"]["lr"] for segment in family
                for epoch in range(segment["from_epoch"], (segment["to_epoch"] or MAX_T) + 1)}
    assert {epoch: row["lr"] for epoch, row in rows.items()} == expected
    if len(family) > 1:  # a replay (not a plain FIFO trial: the best was never exploited, nor its donors)
        (run,) = [r for r in offline_runs(tmp_path / "replay") if r.job_type == "trial"]
        assert {h["epoch"]: h["hparams/lr"] for h in run.history} == expected  # its wandb run shows the schedule
    # Every trial of the sweep starts from the same weights and sees the same data order each epoch (one
    # seed, deterministic, one rank): the replay trains what the best trial's weights went through, bit
    # for bit.
    assert trial.metrics["val_loss"] == results.best.metrics["val_loss"], family


def test_pb2_exploits_as_pbt_does_and_its_bandit_picks_each_new_lr_within_the_bounds(ray_cluster, tmp_path):
    """Ray's PB2 in PBT's place: the same exploits on the warm gang; each new lr is the Gaussian-process
    bandit's pick within lr's min and max, not a perturbation of the donor's."""
    record_dir = tmp_path / "builds"
    record_dir.mkdir()
    spec = population_spec(record_dir)
    spec["scheduler"] = {**spec["scheduler"], "type": "pb2"}
    result = tune_service.run(spec, storage=tmp_path, name="bandit", verbose=0)
    assert [t.status for t in result.trials] == ["completed"] * 4 and all(t.epochs == MAX_T for t in result.trials)
    experiment = tmp_path / "bandit"
    found = exploits(experiment)
    assert found, "no trial exploited another"
    assert len({build.name.split("-")[1] for build in record_dir.iterdir()}) == 1  # one rank process throughout
    policy = [json.loads(line) for line in (experiment / "pbt_global.txt").read_text().splitlines()]
    low, high = spec["parameters"]["lr"]["min"], spec["parameters"]["lr"]["max"]
    for _trial_dir, after in found:
        assert low <= after["lr"] <= high and after["lr"] == after["config"]["lr"]
        donor_config = next(p[4] for p in policy if p[5] == after["config"])
        assert after["lr"] not in [donor_config["lr"] * f for f in (0.8, 1.2)]  # not PBT's perturbation
    lineage = {t.trial_id: t.lineage for t in result.trials}
    assert sum(len(e) for e in lineage.values()) >= len(found)  # each exploit in its trial's lineage


def test_a_population_that_runs_at_once_exploits_on_the_gangs_it_started_on(ray_cluster, tmp_path):
    """Four trials of one rank and half a CPU: the population runs at once on this 2-CPU machine. Every
    exploit is a checkpoint load on a gang already up, and no trial is paused only to take a turn: a trial
    starts again only for its exploits. (That Tune keeps an exploited trial's actor at all is
    PopulationSearch's contract, tests/unit/search/test_population_search.py; which actor the trial goes on
    in depends on when the others end, so it is not asserted here.)"""
    record_dir = tmp_path / "builds"
    record_dir.mkdir()
    spec = population_spec(record_dir)
    # Perturbed every epoch: a trial is compared (and may exploit) only once others have reported.
    spec.update(resources={"workers": 1, "cpus_per_worker": 0.5},
                scheduler={**spec["scheduler"], "perturbation_interval": 1, "max_t": 12})
    result = tune_service.run(spec, storage=tmp_path, name="at_once", verbose=0)
    assert [t.status for t in result.trials] == ["completed"] * 4
    assert exploits(tmp_path / "at_once"), "no trial exploited another"
    # Four rank processes built the data, one per trial's slot: every exploit was a checkpoint load in one.
    assert len({build.name.split("-")[1] for build in record_dir.iterdir()}) == 4
    for trial in result.trials:
        rows = reports(tmp_path / "at_once" / f"trial_{trial.trial_id}")
        exploited = [(e["epoch"] + 1, e["config"]) for e in trial.lineage]
        restarts = [row for row in rows[1:] if row["iterations_since_restore"] == 1]
        assert all((row["epoch"], row["config"]) in exploited for row in restarts), trial.trial_id  # no turns
