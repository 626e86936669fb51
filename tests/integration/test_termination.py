"""SIGTERM as launchers send it (issue 38, 4): GNU ``timeout``, Slurm's ``scancel``, ``docker stop`` and a
pod's termination signal the driver, or its whole process group, embedded Ray included, and give it a
grace period (30 s at most). Either way the sweep ends within it: exit 143, ``summary.json`` with no trial
left running, the resume line; then the resume finishes the sweep, running no finished trial again."""

from __future__ import annotations

import json
import signal

import pytest

from tune_service import cli, load_results
from driver_process import command_line, signal_driver_when, still_running
from test_programs import three_trial_project
from wandb_files import offline_run_ids

pytestmark = [pytest.mark.integration, pytest.mark.timeout(420)]
#: The grace launchers commonly give before SIGKILL (Kubernetes' default; docker stop's is 10 s).
LAUNCHERS_GRACE_S = 30


@pytest.mark.parametrize("group", [False, True], ids=["driver", "process-group"])
def test_sigterm_ends_the_sweep_within_a_launchers_grace_and_the_resume_finishes_it(ray_cluster, tmp_path, group):
    spec = three_trial_project(tmp_path)
    experiment = tmp_path / "runs" / "terminated"

    def one_ended_and_another_running() -> bool:  # (its wandb run open: it has reported)
        ended = experiment / "ended_trials.jsonl"
        reporting = [f for f in experiment.glob("trial_*/result.json") if f.stat().st_size > 0]
        return ended.is_file() and len(reporting) >= 2

    ended = signal_driver_when(spec, tmp_path / "runs", "terminated", signum=signal.SIGTERM, timeout=300,
                               ready=one_ended_and_another_running, group=group)
    assert ended.returncode == cli.EXIT_TERMINATED, ended.output[-3000:]
    assert ended.ended_s < LAUNCHERS_GRACE_S, ended.ended_s
    assert f"resume with: tune-run --resume {experiment}" in ended.output
    assert "Traceback" not in ended.output
    summary = json.loads((experiment / "summary.json").read_text())
    statuses = {t["trial_id"]: t["status"] for t in summary["trials"]}
    assert "running" not in statuses.values() and "interrupted" in statuses.values(), statuses
    assert summary["ended_by_signal"] == "SIGTERM"
    assert not still_running([p for p in ended.descendants if "train.py" in command_line(p)], timeout=30)
    finished = {trial_id for trial_id, status in statuses.items() if status == "completed"}
    assert finished

    assert cli.main(["--resume", str(experiment)]) == cli.EXIT_OK
    result = load_results(experiment)
    assert sorted(t.config["lr"] for t in result.records) == [0.1, 0.2, 0.3]
    assert {t.status for t in result.records} == {"completed"}
    ids = [i.rsplit("-", 1)[-1] for i in offline_run_ids(experiment) if not i.endswith("-summary")]
    assert all(ids.count(trial_id) == 1 for trial_id in finished)  # a finished trial is not run again
