"""Warm gangs on a real local Ray: two rank actors joined by gloo, trial after trial.

The gang is driven directly here (as a warm trial drives it, without Tune), so each test can look at
what the ranks did: their reports, their process ids, what they kept between trials.
"""

from __future__ import annotations

import time
from pathlib import Path

import psutil
import pytest

from tune_service.execution.gang import Gang, GangBroken, GangSettings
from tune_service.spec import ExecutionSpec, ResourceSpec
from tune_service.spec.training import TrainingSettings
from tune_service.tasks import SealedTask, resolve_task
from tune_service.training.trial_config import TrialConfig
from addresses import unmapped
from gang_tasks import InspectedRankWorker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

#: The per-epoch numbers that must repeat exactly (the timings do not).
EXACT = ("train_loss", "val_loss", "val_accuracy")


def trial(task: str, epochs: int = 2, seed: int = 7, deterministic: bool = True, **hparams) -> TrialConfig:
    resolved = resolve_task(task)
    return TrialConfig(SealedTask.of(resolved), {**resolved.defaults, **hparams}, epochs=epochs, seed=seed,
                       settings=TrainingSettings(deterministic=deterministic), cpus_per_rank=1)


class Relay:
    """What a warm trial does with rank 0's reports: here, keep them (and stop at ``stop_at``)."""

    def __init__(self, stop_at: int | None = None):
        self.reports: list[dict] = []
        self.stop_at = stop_at

    def __call__(self, metrics, checkpoint_path):
        self.reports.append(metrics)
        if self.stop_at is not None and metrics["epoch"] >= self.stop_at:
            raise SystemExit(0)  # what tune.report raises when the scheduler stops the trial

    def exact(self) -> list[tuple]:
        return [tuple(r[k] for k in EXACT) for r in self.reports]


def run(gang: Gang, config: TrialConfig, stop_at: int | None = None) -> Relay:
    """Run ``config`` on ``gang``; with ``stop_at``, the trial is stopped at that epoch's report."""
    relay = Relay(stop_at)
    try:
        gang.run(config, None, relay)
    except SystemExit:
        assert stop_at is not None  # the stop reaches the caller as it reached the relay
    return relay


def pids(gang: Gang) -> list[int]:
    import ray

    return ray.get([r.pid.remote() for r in gang.ranks])


@pytest.fixture
def gang(ray_cluster):
    gang = Gang.build(GangSettings(ResourceSpec(workers=2)), worker=InspectedRankWorker)
    yield gang
    gang.shutdown("the test is over")


def test_the_same_trial_is_bit_identical_on_a_fresh_gang_and_as_the_fifth_on_a_reused_one(gang, tmp_path):
    first = run(gang, trial("digits", lr=0.01))
    run(gang, trial("digits", lr=0.002, hidden=32))
    run(gang, trial("gang_tasks:LeakyDigits", lr=0.02))  # changes torch's flags and the environment
    run(gang, trial("digits", lr=0.005, dropout=0.2), stop_at=1)  # stopped by the scheduler
    fifth = run(gang, trial("digits", lr=0.01))
    assert gang.trials_run == 5 and gang.retired is None
    assert len(first.reports) == 2 and fifth.exact() == first.exact()


def test_what_a_trial_changes_in_its_ranks_processes_is_put_back(gang):
    import ray

    run(gang, trial("gang_tasks:LeakyDigits", epochs=1))
    assert ray.get([r.flag_differences.remote() for r in gang.ranks]) == [{}, {}]
    assert ray.get([r.environment_has.remote("LEAKY_DIGITS_WAS_HERE") for r in gang.ranks]) == [False, False]


def test_data_sets_are_built_once_per_rank_while_the_data_hyperparameters_match(gang, tmp_path):
    before = pids(gang)
    for lr in (0.01, 0.02, 0.03):
        run(gang, trial("gang_tasks:CountingDigits", epochs=1, lr=lr, subset=1.0, record_dir=str(tmp_path)))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"build-{pid}-0" for pid in before)
    run(gang, trial("gang_tasks:CountingDigits", epochs=1, subset=0.5, record_dir=str(tmp_path)))
    assert len(list(tmp_path.iterdir())) == 4  # a new subset: each rank built it once more
    assert pids(gang) == before


def test_a_trial_stopped_at_a_report_leaves_its_gang_ready_for_the_next(gang):
    before = pids(gang)
    stopped = run(gang, trial("digits", epochs=5), stop_at=2)
    assert [r["epoch"] for r in stopped.reports] == [1, 2]
    assert len(run(gang, trial("digits", epochs=1)).reports) == 1
    assert pids(gang) == before and gang.retired is None


def test_a_rank_that_raises_fails_its_trial_with_its_own_error_and_retires_the_gang(gang):
    with pytest.raises(ValueError, match="rank 1 failed on purpose at batch 30"):
        run(gang, trial("gang_tasks:FailingDigits", epochs=3, how="raise"))
    assert gang.retired is not None


def test_a_rank_that_dies_fails_its_trial_and_retires_the_gang(gang):
    import ray

    with pytest.raises(GangBroken, match="rank 1 of the trial's DDP gang died"):
        run(gang, trial("gang_tasks:FailingDigits", epochs=3, how="exit"))
    assert gang.retired is not None
    # Its survivors were ended too. ray.kill is asynchronous: a call sent just after it may still be
    # served, so ask until the actor is gone.
    deadline = time.monotonic() + 30
    with pytest.raises(ray.exceptions.RayActorError):
        while time.monotonic() < deadline:
            ray.get(gang.ranks[0].pid.remote(), timeout=30)
            time.sleep(0.2)


def test_a_rank_that_starts_removes_the_checkpoints_of_ranks_that_died_on_its_node(ray_cluster):
    """A rank killed with a checkpoint in hand cannot remove it; the next rank to start does."""
    import ray

    gang = Gang.build(GangSettings(ResourceSpec(workers=1)), worker=InspectedRankWorker)
    dead = Path(ray.get(gang.ranks[0].scratch_path.remote()))
    (dead / "epoch_0001_x").mkdir()
    (dead / "epoch_0001_x" / "state.pt").write_bytes(b"a checkpoint in hand")
    pid = pids(gang)[0]
    gang.shutdown("the test kills it")
    deadline = time.monotonic() + 30
    while psutil.pid_exists(pid) and time.monotonic() < deadline:  # ray.kill returns before the process ends
        time.sleep(0.1)
    new = Gang.build(GangSettings(ResourceSpec(workers=1)), worker=InspectedRankWorker)
    try:
        assert not dead.exists()
        assert Path(ray.get(new.ranks[0].scratch_path.remote())).is_dir()
    finally:
        new.shutdown("the test is over")


def test_a_gang_is_rebuilt_after_its_trial_budget(ray_cluster):
    gang = Gang.build(GangSettings(ResourceSpec(workers=2), ExecutionSpec(recycle_after_trials=2)),
                      worker=InspectedRankWorker)
    try:
        run(gang, trial("digits", epochs=1))
        assert gang.retired is None
        run(gang, trial("digits", epochs=1))
        assert gang.retired == "it ran 2 trials (execution.recycle_after_trials)"
    finally:
        gang.shutdown("the test is over")


@pytest.mark.gpu
def test_on_a_gpu_a_reused_gang_repeats_a_trial_bit_for_bit_and_keeps_none_of_its_cuda_memory(ray_cluster):
    """One rank on one GPU (a world of two NCCL ranks needs two GPUs): the rank's CUDA context outlives
    its trials; their tensors do not."""
    import ray

    gang = Gang.build(GangSettings(ResourceSpec(workers=1, gpus_per_worker=1)), worker=InspectedRankWorker)
    try:
        first = run(gang, trial("digits", lr=0.01))
        assert gang.retired is None  # the gang retires a rank that still holds CUDA memory
        run(gang, trial("digits", lr=0.002, hidden=32), stop_at=1)
        assert gang.retired is None
        again = run(gang, trial("digits", lr=0.01))
        assert gang.retired is None and ray.get(gang.ranks[0].health.remote()).cuda_allocated_bytes == 0
        assert first.reports[0]["precision"] in ("bf16", "fp16")  # it ran on CUDA, under autocast
        assert len(first.reports) == 2 and again.exact() == first.exact()
    finally:
        gang.shutdown("the test is over")


@pytest.mark.gpu
def test_on_two_gpus_a_reused_nccl_gang_repeats_a_trial_bit_for_bit(ray_cluster):
    """Two ranks of one GPU each, joined by NCCL, on the same processes trial after trial (skipped where the
    machine has one GPU: NCCL refuses two ranks on one device)."""
    import torch

    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs: NCCL refuses two ranks on one GPU")
    gang = Gang.build(GangSettings(ResourceSpec(workers=2, gpus_per_worker=1)), worker=InspectedRankWorker)
    try:
        assert gang.settings.backend == "nccl"
        ranks = pids(gang)
        first = run(gang, trial("digits", lr=0.01))
        run(gang, trial("digits", lr=0.002, hidden=32), stop_at=1)
        again = run(gang, trial("digits", lr=0.01))
        assert gang.retired is None and pids(gang) == ranks
        assert first.reports[0]["world_size"] == 2 and first.reports[0]["precision"] in ("bf16", "fp16")
        assert len(first.reports) == 2 and again.exact() == first.exact()
    finally:
        gang.shutdown("the test is over")


def test_a_gangs_ranks_listen_on_the_nodes_address_only(gang):
    """torch's own rendezvous store listens on every interface (``::``): any host reaching the machine could
    join a trial's process group. The gang's rank 0 serves it on the node's address instead."""
    import ray

    run(gang, trial("digits", epochs=1))
    node = ray.util.get_node_ip_address()
    listening = {(c.laddr.ip, c.laddr.port) for pid in pids(gang)
                 for c in psutil.Process(pid).net_connections(kind="inet") if c.status == psutil.CONN_LISTEN}
    assert listening  # the store, at least, and gloo's listeners
    assert {str(unmapped(ip)) for ip, _ in listening} == {node}
