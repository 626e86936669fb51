"""The driver killed outright (SIGKILL) in the middle of an ASHA or a BOHB sweep, and the sweep resumed."""

from __future__ import annotations

import json
import math
import shutil
import signal
from pathlib import Path

import pytest
import yaml

import tune_service
from tune_service import cli
from tune_service.experiment.checkpoints import checkpointed_report, newest_checkpoint
from tune_service.experiment.stand_ins import STAND_IN_FILE
from tune_service.results import sweep_result
from tune_service.tasks.digits import load_digits_tensors
from driver_process import command_line, signal_driver_when, still_running

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

#: One trial at a time (2 ranks on 2 CPUs), in this order. ASHA (rungs at epochs 1 and 2, a trial going on
#: when among the floor(n / 2) best of the n at the rung, at least the best) stops 0.8 and 0.7 at epoch 1,
#: lets 0.95 through, and stops 0.92 at epoch 2 (among the 2 best of 5 at epoch 1, not the best of 3 at
#: epoch 2). The driver is killed while 0.95 trains, after its checkpoint of epoch 1 (or 2 or 3). Resumed,
#: it reports that epoch again; were its 0.95 all the first rung held, 0.92 would be stopped at epoch 1.
QUALITIES = [0.9, 0.8, 0.7, 0.95, 0.92]
EPOCHS_WITHOUT_A_CRASH = {0.9: 4, 0.8: 1, 0.7: 1, 0.95: 4, 0.92: 2}
KILLED_DURING = 0.95
RAY_AGENTS = ("ray::DashboardAgent", "ray::RuntimeEnvAgent")


def checkpoint_epochs(experiment: Path) -> dict[float, int]:
    """quality -> the epoch of the trial's latest checkpoint, for the trials that have one."""
    found = {}
    for trial_dir in experiment.glob("trial_*"):
        report = checkpointed_report(str(trial_dir))
        if report is not None:
            found[round(report["val_score"], 4)] = report["epoch"]  # a float32 sum, averaged
    return found


def test_a_driver_killed_with_sigkill_resumes_to_the_decisions_it_would_have_made(ray_cluster, tmp_path,
                                                                                   expect_exit):
    records = tmp_path / "batches"
    records.mkdir()
    spec = tmp_path / "scored.yaml"
    spec.write_text(yaml.safe_dump({
        "name": "crashed", "method": "grid", "task": "recording_tasks:ScoredDigits",
        "metric": {"name": "val_score", "goal": "maximize"},
        "scheduler": {"type": "asha", "max_t": 4, "grace_period": 1, "reduction_factor": 2},
        "parameters": {"quality": {"values": QUALITIES}, "record_dir": {"value": str(records)}},
    }))
    experiment = tmp_path / "runs" / "crashed"
    # Killed once the trial's first checkpoint is written and Tune's saved state holds the trial: a trial
    # started within the last state save (2 s) before a kill is started anew on resume (docs/tutorial.md, "When
    # things go wrong"), which warm trials, starting in 0.02 s, can reach their first checkpoint within.
    killed = signal_driver_when(spec, tmp_path / "runs", "crashed", signum=signal.SIGKILL, timeout=400,
                                ready=lambda: 1 <= checkpoint_epochs(experiment).get(KILLED_DURING, 0) < 4
                                and saved_trials(experiment) == 4)
    assert killed.returncode == -signal.SIGKILL, killed.output[-3000:]
    # The embedded Ray and the trial's ranks die with their driver; Ray's dashboard and runtime-env
    # agents notice their raylet is gone more slowly (they are checked again at the end).
    agents = [p for p in killed.descendants if command_line(p).startswith(RAY_AGENTS)]
    assert killed.descendants and not still_running([p for p in killed.descendants if p not in agents], timeout=60)

    before = checkpoint_epochs(experiment)
    checkpointed = before[KILLED_DURING]
    trained_before = {f.name: f.stat().st_size for f in records.iterdir()}
    assert set(before) == {0.9, 0.8, 0.7, 0.95}
    # As if the driver had died while Ray copied its state into the experiment: the newest state file
    # is cut in half. Resuming needs the last good copy of it.
    state = max(experiment.glob("experiment_state-*.json"))
    state.write_bytes(state.read_bytes()[: state.stat().st_size // 2])
    # As if Tune's num_to_keep had deleted the checkpoint that its saved state names for the killed trial (a
    # fast trial writes several between two saves of the state): only the newest is left, at a later index.
    # Tune's restore checks that the checkpoint it names exists (tune_service.experiment.stand_ins).
    trial_dir = next(d for d in experiment.glob("trial_*") if (checkpointed_report(str(d)) or {}).get(
        "val_score", 0) == pytest.approx(KILLED_DURING, abs=1e-4))
    newest = Path(newest_checkpoint(str(trial_dir)).path)
    for stale in set(trial_dir.glob("checkpoint_*")) - {newest}:
        shutil.rmtree(stale)
    newest.rename(trial_dir / f"checkpoint_{int(newest.name.split('_')[1]) + 8:06d}")

    assert cli.main(["--resume", str(experiment)]) == 0
    assert not list(experiment.glob(f"trial_*/checkpoint_*/{STAND_IN_FILE}"))  # removed at the sweep's end
    result = tune_service.load_results(experiment)
    epochs = {t.config["quality"]: t.epochs for t in result.records}
    assert epochs == EPOCHS_WITHOUT_A_CRASH  # ASHA decided as it would have without the crash
    assert len(list(experiment.glob("trial_*"))) == len(QUALITIES)  # run_cap trials, no more
    assert {t.status for t in result.records if t.epochs < 4} == {"stopped"}
    assert {t.status for t in result.records if t.epochs == 4} == {"completed"}
    assert result.best.config["quality"] == KILLED_DURING

    trained_after = {f.name: f.stat().st_size for f in records.iterdir()}
    per_epoch = math.ceil(math.ceil(len(load_digits_tensors()[0]) / 2) / 32)  # batches per rank and epoch
    for name, size in trained_after.items():
        quality = float(name.split("-")[0].split("=")[1])
        if quality in (0.9, 0.8, 0.7):  # finished before the crash: never trained again
            assert trained_before.get(name) == size, name
    resumed = [size for name, size in trained_after.items() if name not in trained_before
               and name.startswith(f"quality={KILLED_DURING}-")]
    # The interrupted trial's resumed ranks trained only the epochs after its checkpoint.
    assert resumed == [(4 - checkpointed) * per_epoch] * 2
    expect_exit(agents, timeout=60)  # checked at the session's end: they take 60 s after the kill


def saved_trials(experiment: Path) -> int:
    """How many trials the sweep's records hold: the last complete copy of Tune's saved state (the trials not
    ended, and ended ones Tune still held) and ``ended_trials.jsonl`` (a trial that ended leaves Tune's
    controller under FIFO and ASHA: tune_service.execution.retiring)."""
    try:
        state = json.loads(max((experiment / ".last_good").glob("experiment_state-*.json")).read_text())
    except (ValueError, OSError):  # none yet (max of nothing), or being replaced
        return 0
    held = {(json.loads(t) if isinstance(t, str) else t)["trial_id"] for t, _ in state["trial_data"]}
    return len(held | {t.trial_id for t in sweep_result.read_ended(experiment / "ended_trials.jsonl")})


def creation_order(experiment: Path) -> list[str]:
    """The experiment's trial ids in the order Tune created them (the counter that starts each tag)."""
    state = json.loads(max(experiment.glob("experiment_state-*.json")).read_text())
    trials = [json.loads(trial) if isinstance(trial, str) else trial for trial, _ in state["trial_data"]]
    return [t["trial_id"] for t in sorted(trials, key=lambda t: int(t["experiment_tag"].split("_")[0]))]


def test_a_bohb_sweep_killed_in_its_second_bracket_resumes_to_the_decisions_it_would_have_made(ray_cluster,
                                                                                                tmp_path):
    records = tmp_path / "batches"
    records.mkdir()
    spec = tmp_path / "bohb.yaml"
    spec.write_text(yaml.safe_dump({
        "name": "bohb", "method": "bohb", "run_cap": 4, "task": "recording_tasks:ScoredDigits",
        "metric": {"name": "val_score", "goal": "maximize"},
        "scheduler": {"type": "hyperband", "max_t": 3, "reduction_factor": 3},
        "parameters": {"quality": {"min": 0.5, "max": 1.0}, "record_dir": {"value": str(records)}},
    }))
    experiment = tmp_path / "runs" / "bohb"
    # The first bracket (three trials, halved at epoch 1 to one that goes on to 3) has ended when the
    # fourth trial, alone in the second bracket (to epoch 3), has checkpointed epoch 1: the driver dies
    # then. Tune adds the restored trials back newest first, so fresh brackets would put the fourth
    # into the first bracket, with trials that ended long ago.
    # The kill waits for Tune's saved state to hold the fourth trial too: a trial started within the last
    # state-save period (2 s) before a crash is not in it, and a resume would start another in its place.
    killed = signal_driver_when(spec, tmp_path / "runs", "bohb", signum=signal.SIGKILL, timeout=400,
                                ready=lambda: len(checkpoint_epochs(experiment)) >= 4 and saved_trials(experiment) >= 4)
    assert killed.returncode == -signal.SIGKILL, killed.output[-3000:]
    trained_before = {f.name: f.stat().st_size for f in records.iterdir()}

    assert cli.main(["--resume", str(experiment)]) == 0
    result = tune_service.load_results(experiment)
    by_id = {t.trial_id: t for t in result.records}
    first, second = creation_order(experiment)[:3], creation_order(experiment)[3:]
    assert len(result.records) == len(list(experiment.glob("trial_*"))) == 4 and len(second) == 1
    trained_again = {f.name.split("-")[0] for f in records.iterdir() if trained_before.get(f.name) != f.stat().st_size}
    assert trained_again == {f"quality={by_id[second[0]].config['quality']}"}  # the first bracket's never
    best = max(first, key=lambda trial_id: by_id[trial_id].config["quality"])
    epochs = {trial_id: by_id[trial_id].epochs for trial_id in first + second}
    assert epochs == {trial_id: 3 if trial_id in (best, *second) else 1 for trial_id in epochs}
    assert result.best.config["quality"] == max(t.config["quality"] for t in result.records)
