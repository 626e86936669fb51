"""W&B programs run unchanged as trials (issue 22), on a real local Ray: real processes of a real
W&B-style script, real wandb offline runs. The example's sweep (2-rank trials, ASHA) is run from its
README line by tests/integration/test_examples.py; here, how a program's trial fails and what it logs."""

from __future__ import annotations

import json
import shutil
import signal
import time
from pathlib import Path

import psutil
import pytest
import yaml

import tune_service
from tune_service.results import sweep_result
from tune_service import cli
from tune_service.tracking.naming import run_id
from driver_process import command_line, signal_driver_when, still_running
from test_driver_crash import saved_trials
from wandb_files import offline_run_ids, offline_runs

pytestmark = [pytest.mark.integration, pytest.mark.timeout(400)]
PROGRAM = Path(__file__).resolve().parents[1] / "data" / "programs" / "logs_metrics.py"
PER_BATCH = PROGRAM.with_name("logs_per_batch.py")


def programs_running(script: str) -> list[psutil.Process]:
    """The processes still running ``script``."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        if any(part.endswith(script) for part in process.info["cmdline"] or []):
            found.append(process)
    return found


def sweep(**extra) -> dict:
    spec = {"program": str(PROGRAM), "method": "grid", "metric": {"name": "val.accuracy", "goal": "maximize"},
            "resources": {"workers": 1}, "wandb": {"mode": "offline"}}
    spec.update(extra)
    return spec


def test_a_program_that_crashes_or_hangs_fails_its_trial_saying_why_and_nested_metrics_arrive(ray_cluster,
                                                                                             tmp_path):
    spec = sweep(parameters={"exit-code": {"values": [0, 3]}, "sleep": {"values": [0, 600]}, "steps": {"value": 2}},
                 limits={"progress_s": 15})
    result = tune_service.run(spec, storage=tmp_path, name="programs", verbose=0)
    by_case = {(t.config["exit-code"], t.config["sleep"]): t for t in result.trials}
    fine, crashed = by_case[(0, 0)], by_case[(3, 0)]
    assert fine.status == "completed" and fine.metrics["val.accuracy"] == pytest.approx(0.6)  # nested, dotted
    assert fine.steps == 2 and fine.metrics["val_loss"] == pytest.approx(0.2)
    experiment = Path(result.experiment_dir)
    log = next(experiment.glob(f"trial_{crashed.trial_id}*")) / "program" / "rank_0.log"
    assert crashed.status == "failed" and f"exited with code 3; its output: {log}; its last lines:" in crashed.error
    assert log.is_file() and "finished" in crashed.error  # the program's own last line, and where all of it is
    for case in ((0, 600), (3, 600)):  # logged once, then slept: ended after limits.progress_s
        stalled = by_case[case]
        assert stalled.status == "failed" and "logged nothing for 15 s" in stalled.error
        assert "config {" in stalled.error  # what it printed last, so a hang says where it is
    assert not programs_running(PROGRAM.name)  # the sleeping programs were ended, not left behind
    # the program's own wandb run is the trial's: its id, the trial's config, its history; no second run
    runs = {run.run_id: run for run in offline_runs(experiment) if run.job_type == "trial"}
    assert set(runs) == {run_id("programs", t.trial_id) for t in result.trials}
    run = runs[run_id("programs", fine.trial_id)]
    assert run.config["exit-code"] == 0 and run.config["steps"] == 2 and run.group == "programs"
    assert [row["val_loss"] for row in run.history] == pytest.approx([0.1, 0.2])


def test_a_program_that_never_logs_the_metric_fails_naming_what_it_logged(ray_cluster, tmp_path):
    spec = sweep(metric={"name": "val_top5", "goal": "maximize"}, parameters={"steps": {"value": 1}})
    result = tune_service.run(spec, storage=tmp_path, name="no-metric", verbose=0)
    (trial,) = result.trials
    assert trial.status == "failed"
    assert ("without ever logging the sweep's metric 'val_top5' with wandb.log; it logged: train_loss, val.accuracy, "
            "val_loss") in trial.error
    summary = json.loads((Path(result.experiment_dir) / "summary.json").read_text())
    assert summary["trials"][0]["status"] == "failed"


def three_trial_project(tmp_path: Path) -> Path:
    """A sweep file beside its program, which it names relatively, as W&B users keep them: three 2-rank
    trials of about 4 s, one at a time on 2 CPUs, with offline wandb runs. The sweep file's path."""
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(PROGRAM, project / "train.py")
    spec = project / "sweep.yaml"
    spec.write_text(yaml.safe_dump({
        "program": "train.py", "method": "grid", "metric": {"name": "val_loss", "goal": "minimize"},
        "parameters": {"lr": {"values": [0.1, 0.2, 0.3]}, "steps": {"value": 4}, "sleep": {"value": 1.0}},
        "resources": {"workers": 2}, "wandb": {"mode": "offline"}}))
    return spec


def test_a_killed_driver_resumes_a_program_sweep_restarting_the_interrupted_program_under_its_run_id(
        ray_cluster, tmp_path):
    spec = three_trial_project(tmp_path)
    experiment = tmp_path / "runs" / "resumed"

    def one_ended_and_another_reporting() -> bool:
        ended = experiment / "ended_trials.jsonl"
        reporting = [f for f in experiment.glob("trial_*/result.json") if f.stat().st_size > 0]
        return ended.is_file() and len(reporting) >= 2 and saved_trials(experiment) >= 2

    killed = signal_driver_when(spec, tmp_path / "runs", "resumed", signum=signal.SIGKILL, timeout=300,
                                ready=one_ended_and_another_reporting)
    assert killed.returncode == -signal.SIGKILL, killed.output[-3000:]
    assert not still_running([p for p in killed.descendants if "train.py" in command_line(p)], timeout=30)
    before = {t.trial_id: t.status for t in sweep_result.load(experiment).trials}  # the summary and its log

    assert cli.main(["--resume", str(experiment)]) == 0  # from another directory than the spec's
    result = tune_service.load_results(experiment)
    assert sorted(t.config["lr"] for t in result.records) == [0.1, 0.2, 0.3]
    assert {(t.status, t.steps) for t in result.records} == {("completed", 4)}
    ids = [i for i in offline_run_ids(experiment) if not i.endswith("-summary")]
    restarted = {i.rsplit("-", 1)[-1] for i in ids if ids.count(i) > 1}  # a restarted program: the same run id
    ended = {trial_id for trial_id, status in before.items() if status == "completed"}
    assert len(set(ids)) == 3 and restarted and ended and not restarted & ended  # a finished trial is not run again
    assert {run.run_id for run in offline_runs(experiment) if run.job_type == "trial"} == set(ids)


def test_a_program_whose_trial_actor_is_killed_still_ends_cleanly_so_its_wandb_run_keeps_its_logs(
        ray_cluster, tmp_path):
    """Tune may drop a stopped trial's actor before the trial's function has ended its programs; Ray then
    kills the actor's rank actors and their child processes. The program must still get its SIGTERM
    (the hook's clean exit), not a SIGKILL, so that its wandb run is flushed."""
    import ray

    from tune_service.programs.rank import ProgramRank

    @ray.remote(num_cpus=0)
    class Trial:  # stands for a trial's Tune actor: it owns its ranks' actors
        def start(self, argv, hook, work):
            self.rank = ray.remote(ProgramRank).options(num_cpus=0).remote(0, 1, 10.0)
            ray.get(self.rank.start.remote(argv, str(work), hook, {}, str(work), ("127.0.0.1", 29500), 0, 1))

        def reports(self):
            return len(ray.get(self.rank.poll.remote(0))[0])

    run = {"id": "killed-trial", "project": "p", "dir": str(tmp_path), "mode": "offline", "resume": "allow"}
    trial = Trial.remote()
    argv = ["python", str(PROGRAM), "--steps", "1000", "--sleep", "0.2"]
    ray.get(trial.start.remote(argv, json.dumps({"params": {}, "run": run}), tmp_path))
    deadline = time.monotonic() + 60
    while ray.get(trial.reports.remote()) < 3:
        assert time.monotonic() < deadline, "the program never logged"
        time.sleep(0.2)
    ray.kill(trial)
    deadline = time.monotonic() + 30
    while programs_running(PROGRAM.name):
        assert time.monotonic() < deadline, "the program outlived its trial's actors"
        time.sleep(0.2)
    (wandb_run,) = offline_runs(tmp_path)
    assert wandb_run.run_id == "killed-trial" and len(wandb_run.history) >= 3  # flushed: it exited cleanly


def test_a_program_gets_no_wandb_service_of_another_process(ray_cluster, tmp_path):
    """The driver's wandb service reaches Ray's processes through their environment (an embedded Ray
    started after the driver's first wandb run): a program must start its own, or its run lives in the
    driver's and an ended program's run is flushed only when the driver ends (a CI failure: a stopped
    trial's run read back empty)."""
    import ray

    from tune_service.programs.rank import ProgramRank

    service = "3-1-unix-/tmp/a-wandb-service-of-another-process/socket"
    rank = ray.remote(ProgramRank).options(num_cpus=0, runtime_env={"env_vars": {"WANDB_SERVICE": service}}).remote(
        0, 1, 10.0)
    argv = ["python", "-c", "import os; print('service:', os.environ.get('WANDB_SERVICE'))"]
    hook = json.dumps({"params": {}, "run": None})
    ray.get(rank.start.remote(argv, str(tmp_path), hook, {}, str(tmp_path), ("127.0.0.1", 29500), 0, 1))
    deadline = time.monotonic() + 60
    while ray.get(rank.poll.remote(0))[1] is None:
        assert time.monotonic() < deadline, "the program never ended"
        time.sleep(0.2)
    assert ray.get(rank.poll.remote(0))[1] == 0
    assert "service: None" in (tmp_path / "rank_0.log").read_text()
    ray.kill(rank)


def test_a_two_rank_programs_process_group_meets_at_its_rank_actors_store_on_the_nodes_address_only(
        ray_cluster, tmp_path):
    """A program's rank 0 would start torch's own store, which listens on every interface (``::``). As under
    torchrun, whose agent serves it, rank 0's actor serves the store, on the node's address only, and every
    rank of the program is its client: a program that started its own would find the port taken."""
    import ray

    from tune_service.programs.rank import ProgramRank

    ranks = [ray.remote(ProgramRank).options(num_cpus=0).remote(rank, 2, 10.0) for rank in range(2)]
    master = ray.get(ranks[0].address.remote())
    program = ("import torch, torch.distributed as dist; dist.init_process_group('gloo'); t = torch.ones(1); "
               "dist.all_reduce(t); print('sum', int(t.item())); dist.destroy_process_group()")
    hook = json.dumps({"params": {}, "run": None})
    ray.get([r.start.remote(["python", "-c", program], str(tmp_path), hook, {}, str(tmp_path), master, rank, 2)
             for rank, r in enumerate(ranks)])
    deadline = time.monotonic() + 120
    while None in (codes := [code for _, code, _ in ray.get([r.poll.remote(0) for r in ranks])]):
        assert time.monotonic() < deadline, "the program never ended"
        time.sleep(0.2)
    logs = [(tmp_path / f"rank_{rank}.log").read_text() for rank in range(2)]
    assert codes == [0, 0], logs
    assert all("sum 2" in log for log in logs)
    store = {c.laddr.ip for child in psutil.Process().children(recursive=True)
             for c in child.net_connections(kind="inet")
             if c.status == psutil.CONN_LISTEN and c.laddr.port == master[1]}
    assert store == {master[0]} and master[0] == ray.util.get_node_ip_address()
    for r in ranks:
        ray.kill(r)


def test_wandb_hyperband_counts_the_values_of_the_metric_not_the_logs(ray_cluster, tmp_path):
    """W&B's hyperband judges a run at its n-th value of the metric (``run.metric_history``): a script that
    logs per-batch values before each epoch's metric is compared at its 2nd and 4th epoch with
    ``min_iter: 2``, never after its first (issue 38, 3)."""
    spec = {"program": str(PER_BATCH), "method": "grid", "metric": {"name": "val_accuracy", "goal": "maximize"},
            "parameters": {"lr": {"values": [0.4, 0.3, 0.2, 0.1, 0.05, 0.01]}, "epochs": {"value": 6}},
            "early_terminate": {"type": "hyperband", "min_iter": 2, "eta": 2}, "wandb": {"mode": "disabled"}}
    result = tune_service.run(spec, storage=tmp_path, name="per-batch", verbose=0)
    assert result.time_unit == "value"
    stopped = [t for t in result.trials if t.status == "stopped"]
    assert stopped and {t.status for t in result.trials} <= {"completed", "stopped"}
    for trial in stopped:  # at a rung: the 2nd or 4th epoch's accuracy, after 10 or 20 per-batch logs before it
        assert trial.progress("value") in (2, 4) and trial.metrics["epoch"] == trial.progress("value")
        assert trial.metrics["step"] == trial.metrics["epoch"] * 6
    assert all(t.progress("value") == 6 for t in result.trials if t.status == "completed")
