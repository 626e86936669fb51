"""A driver killed outright after trials ended but before Tune saved its state again: the resume rolls the
search forward over them (tune_service.search.continued), and runs none of them again."""

from __future__ import annotations

import json
import signal
from collections import Counter

import pytest
import yaml

import tune_service
from tune_service import cli
from tune_service.results import sweep_result
from driver_process import signal_driver_when

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

#: One trial at a time, in this order; ASHA (rungs at epochs 1 and 2) decides as in test_driver_crash.py.
QUALITIES = [0.9, 0.8, 0.7, 0.95, 0.92]
EPOCHS_WITHOUT_A_CRASH = {0.9: 4, 0.8: 1, 0.7: 1, 0.95: 4, 0.92: 2}


def test_trials_that_ended_after_the_last_state_save_are_not_run_again(ray_cluster, tmp_path, expect_exit):
    records = tmp_path / "batches"
    records.mkdir()
    spec = tmp_path / "scored.yaml"
    spec.write_text(yaml.safe_dump({
        "name": "rolled", "method": "grid", "task": "recording_tasks:ScoredDigits",
        "metric": {"name": "val_score", "goal": "maximize"},
        "scheduler": {"type": "asha", "max_t": 4, "grace_period": 1, "reduction_factor": 2},
        "parameters": {"quality": {"values": QUALITIES}, "record_dir": {"value": str(records)}},
    }))
    experiment = tmp_path / "runs" / "rolled"
    ended_log = experiment / "ended_trials.jsonl"

    def ended() -> list[str]:
        return [t.trial_id for t in sweep_result.read_ended(ended_log)]

    def started() -> int:
        return len(list(experiment.glob("trial_*")))

    # Tune saves its state once, at its first step, and not again for an hour: the three trials that end
    # before the kill are in the service's log only, and the fourth, running, is in neither.
    killed = signal_driver_when(spec, tmp_path / "runs", "rolled", signum=signal.SIGKILL, timeout=400,
                                env={"TUNE_GLOBAL_CHECKPOINT_S": "3600"},
                                ready=lambda: len(ended()) >= 3 and started() >= 4)
    assert killed.returncode == -signal.SIGKILL, killed.output[-3000:]
    expect_exit(killed.descendants, timeout=90)
    saved = json.loads(max(experiment.glob("experiment_state-*.json")).read_text())
    saved_ids = {(json.loads(t) if isinstance(t, str) else t)["trial_id"] for t, _ in saved["trial_data"]}
    ended_before = ended()
    at_kill = {p.name.removeprefix("trial_") for p in experiment.glob("trial_*")}
    assert len(ended_before) >= 3 and not set(ended_before[1:]) & saved_ids  # ended after the state's save
    trained_before = {f.name: f.stat().st_size for f in records.iterdir()}

    assert cli.main(["--resume", str(experiment)]) == 0
    log = Counter(ended())
    assert sum(log.values()) == len(QUALITIES) and set(log.values()) == {1}  # each trial ended once
    result = tune_service.load_results(experiment)
    # The trial running at the kill, created after the save, is created again under another id: its first
    # directory stays, a lost attempt (docs/how-it-runs.md), not a trial of the sweep.
    trials = result.records
    assert sorted(t.number for t in trials) == list(range(1, len(QUALITIES) + 1))
    lost = at_kill - set(ended_before) - saved_ids  # in neither Tune's state nor the service's log
    assert lost and set(result.lost_attempts) == lost
    assert all((experiment / f"trial_{trial_id}").is_dir() for trial_id in lost)  # kept on disk
    assert {t.config["quality"]: t.epochs for t in trials} == EPOCHS_WITHOUT_A_CRASH
    for trial in trials:  # each with its whole history in storage (Tune's copy lags its state saves)
        assert len((experiment / f"trial_{trial.trial_id}" / "result.json").read_text().splitlines()) == trial.epochs
    by_id = {t.trial_id: t for t in trials}
    for name, size in trained_before.items():  # no trial that had ended trained again
        if any(name.startswith(f"quality={by_id[trial_id].config['quality']}-") for trial_id in ended_before):
            assert (records / name).stat().st_size == size, name
    assert result.best.config["quality"] == 0.95
