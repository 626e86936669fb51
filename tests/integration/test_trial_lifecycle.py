"""The trial lifecycle (:class:`~tune_service.execution.sweep_trial.SweepTrial`) on a real Ray: a
checkpoint that Tune hands a trial from another trial is where the trial starts.

Ray's own PopulationBasedTraining hands it: at the perturbation, the weaker trial of two exploits the
stronger one, so Tune restarts it with the stronger trial's checkpoint (``tune.get_checkpoint()``) and
config. The two trials differ in batch size, so the optimizer steps a trial reports tell from which
checkpoint it went on: the donor's epoch of 32-sample steps, or its own epoch of 64-sample ones.
"""

from __future__ import annotations

import pytest

from tune_service.execution.gang import GangSettings
from tune_service.execution.warm_trial import WarmTrial, trial_resources
from tune_service.ray_internals import set_tune_trial_environment
from tune_service.spec import ResourceSpec
from tune_service.tasks import SealedTask, resolve_task

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def test_a_warm_trial_starts_from_the_checkpoint_tune_hands_it_from_another_trial(ray_cluster, tmp_path):
    from ray import tune
    from ray.tune.schedulers import PopulationBasedTraining

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

    tuner = tune.Tuner(
        tune.with_resources(trainable, trial_resources(gang)), param_space=space,
        tune_config=tune.TuneConfig(metric="val_loss", mode="min", scheduler=pbt, reuse_actors=True,
                                    max_concurrent_trials=2),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="pbt", verbose=0, callbacks=[Recorder()]))
    results = tuner.fit()
    assert not results.errors
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
