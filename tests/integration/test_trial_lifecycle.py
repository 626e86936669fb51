"""The trial lifecycle (:class:`~tune_service.execution.sweep_trial.SweepTrial`) on a real Ray: a
checkpoint that Tune hands a trial from another trial is where the trial starts.

Ray's own PopulationBasedTraining hands it: at the perturbation, the weaker trial of two exploits the
stronger one, so Tune restarts it with the stronger trial's checkpoint (``tune.get_checkpoint()``) and
config. The two trials differ in batch size, so the optimizer steps a trial reports tell from which
checkpoint it went on: the donor's epoch of 32-sample steps, or its own epoch of 64-sample ones.
"""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor

import pytest

from tune_service.execution.gang import GangSettings
from tune_service.execution.warm_trial import WarmTrial, trial_resources
from tune_service.ray_internals import set_tune_trial_environment
from tune_service.spec import ResourceSpec
from tune_service.tasks import SealedTask, resolve_task

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def pbt_reports(storage: str) -> tuple[dict[str, list[dict]], list[str]]:
    """Run the two trials under Ray's PBT on a Ray of its own (started and shut down here), and return
    every report as the driver received it, by trial, and the trials' errors."""
    import ray
    from ray import tune
    from ray.tune.schedulers import PopulationBasedTraining

    from tune_service.execution.connect import init_ray

    task = resolve_task("digits")
    gang = GangSettings(ResourceSpec(workers=1, cpus_per_worker=1))
    template = WarmTrial(task=SealedTask.of(task), epochs=3, seed=0, metric="val_loss", gang=gang)

    def trainable(config):
        set_tune_trial_environment()
        template(config)

    pbt = PopulationBasedTraining(time_attr="epoch", perturbation_interval=1, quantile_fraction=0.5, synch=True,
                                  hyperparam_mutations={"lr": [0.05]}, resample_probability=1.0)
    # The learner (lr 0.05, batches of 32) leads after epoch 1; the other (lr 0, batches of 64) learns
    # nothing, and exploits it.
    space = {"lr": tune.grid_search([0.05, 0.0]),
             "batch_size": tune.sample_from(lambda spec: 32 if spec.config.lr > 0 else 64)}
    # Every report as the driver received it: Tune rewrites a trial's progress.csv when PBT restarts it,
    # so the results' metrics_dataframe may hold only the rows after the exploit (or none).
    reports: dict[str, list[dict]] = {}

    class Recorder(tune.Callback):
        def on_trial_result(self, iteration, trials, trial, result, **info):
            reports.setdefault(trial.trial_id, []).append(
                {key: result[key] for key in ("epoch", "step", "global_batch")}
            )

    init_ray(num_cpus=2)
    try:
        tuner = tune.Tuner(
            tune.with_resources(trainable, trial_resources(gang)), param_space=space,
            tune_config=tune.TuneConfig(metric="val_loss", mode="min", scheduler=pbt, reuse_actors=True,
                                        max_concurrent_trials=2),
            run_config=tune.RunConfig(storage_path=storage, name="pbt", verbose=0, callbacks=[Recorder()]))
        results = tuner.fit()
        return reports, [repr(error) for error in results.errors]
    finally:
        ray.shutdown()


def test_a_warm_trial_starts_from_the_checkpoint_tune_hands_it_from_another_trial(tmp_path):
    # On a Ray of its own, not the session's: Tune's PBT pausing and reusing the trial actors at every
    # epoch left one of the session Ray's two CPUs held after the fit, with no placement group and no live
    # actor needing a CPU listed, once in about 100 runs here; every later test of two-rank trials then
    # waited for that CPU until its timeout (CI of 2026-11-28: 7 x 400 s).
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        reports, errors = pool.submit(pbt_reports, str(tmp_path)).result(timeout=240)
    assert not errors
    histories = list(reports.values())
    assert len(histories) == 2, reports
    steps_per_epoch = {32: None, 64: None}
    for history in histories:
        first = history[0]
        steps_per_epoch[int(first["global_batch"])] = int(first["step"])  # epoch 1, from scratch
    learner_steps = steps_per_epoch[32]
    assert learner_steps and steps_per_epoch[64] and learner_steps > steps_per_epoch[64], reports
    exploiter = next(h for h in histories if int(h[0]["global_batch"]) == 64)
    after = [row for row in exploiter if row["global_batch"] == 32]  # its epochs on the donor's config
    assert after, exploiter
    first_after = after[0]
    # From the donor's checkpoint: the donor's epoch 1 (its steps), then one more of 32-sample steps. From
    # its own, it would be 64-sample steps of epoch 1 and one epoch of 32.
    assert int(first_after["step"]) == int(first_after["epoch"]) * learner_steps, exploiter
