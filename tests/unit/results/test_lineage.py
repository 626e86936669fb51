"""Population-based training's lineage: a trial that starts from another trial's checkpoint records the
donor, the epoch and its config from then on, in summary.json and ``load_results().lineage``; a trial
that starts from scratch or from its own checkpoint records nothing."""

from __future__ import annotations

import json
from types import SimpleNamespace

from ray import tune

from tune_service.results.analysis import load_results
from tune_service.experiment.layout import trial_of_path
from tune_service.results.lineage import exploit_of, schedule, with_lineage
from tune_service.results.sweep_result import SweepResult, TrialRecord
from tune_service.results.progress import SweepProgress


def checkpoint_of(experiment, trial_id: str, index: int, epoch: int) -> tune.Checkpoint:
    """A checkpoint in trial ``trial_id``'s directory, as the shared loop writes one (its report beside it)."""
    path = experiment / f"trial_{trial_id}" / f"checkpoint_{index:06d}"
    path.mkdir(parents=True)
    (path / "report.json").write_text(json.dumps({"epoch": epoch, "val_loss": 0.5}))
    return tune.Checkpoint.from_directory(str(path))


def trial(trial_id: str, config: dict, checkpoint=None, epoch: int = 0) -> SimpleNamespace:
    """What the progress reads of Tune's Trial: its id, config, last result and the checkpoint it starts from."""
    return SimpleNamespace(trial_id=trial_id, config=config, checkpoint=checkpoint,
                           last_result={"epoch": epoch, "val_loss": 1.0} if epoch else {})


def test_a_trial_started_from_another_ones_checkpoint_is_an_exploit(tmp_path):
    donor_checkpoint = checkpoint_of(tmp_path, "donor", 3, epoch=4)
    exploit = exploit_of(trial("weak", {"lr": 0.024, "optimizer": {"momentum": 0.9}}, donor_checkpoint))
    assert exploit == {"epoch": 4, "donor": "donor", "config": {"lr": 0.024, "optimizer": {"momentum": 0.9}}}
    assert exploit_of(trial("weak", {"lr": 0.1})) is None  # from scratch
    assert exploit_of(trial("weak", {"lr": 0.1}, checkpoint_of(tmp_path, "weak", 1, epoch=2))) is None  # its own
    assert trial_of_path("s3://bucket/sweeps/pbt/trial_ab12/checkpoint_000001") == "ab12"


def test_the_lineage_goes_to_the_summary_and_the_results_table(tmp_path):
    progress = SweepProgress(tmp_path, "val_loss", "min", max_t=6, total=2)
    progress.start()
    progress.on_trial_start(0, [], trial("strong", {"lr": 0.03}))
    progress.on_trial_start(0, [], trial("weak", {"lr": 0.001}))
    exploited = trial("weak", {"lr": 0.036}, checkpoint_of(tmp_path, "strong", 1, epoch=2), epoch=2)
    progress.on_trial_start(0, [], exploited)
    again = trial("weak", {"lr": 0.0288}, checkpoint_of(tmp_path, "strong", 3, epoch=4), epoch=4)
    progress.on_trial_start(0, [], again)
    paused = trial("weak", {"lr": 0.0288}, checkpoint_of(tmp_path, "weak", 5, epoch=5), epoch=5)
    progress.on_trial_start(0, [], paused)  # unpaused from its own checkpoint: no exploit
    for t in ("strong", "weak"):
        progress.on_trial_complete(0, [], trial(t, {"lr": 0.0288}, epoch=6))

    ended = [json.loads(line) for line in (tmp_path / "ended_trials.jsonl").read_text().splitlines()]
    summary = {t["trial_id"]: t for t in ended}
    assert "lineage" not in summary["strong"]
    assert summary["weak"]["lineage"] == [
        {"epoch": 2, "donor": "strong", "donor_exploits": 0, "config": {"lr": 0.036}},
        {"epoch": 4, "donor": "strong", "donor_exploits": 0, "config": {"lr": 0.0288}}]
    table = load_results(tmp_path).lineage
    assert table.to_dict("records") == [{"trial_id": "weak", "epoch": 2, "donor": "strong", "config/lr": 0.036},
                                        {"trial_id": "weak", "epoch": 4, "donor": "strong", "config/lr": 0.0288}]


def test_the_final_results_built_from_tunes_keep_the_lineage_the_progress_saw():
    from_tune = SweepResult("x", "val_loss", "min", (TrialRecord("a", "completed", {"lr": 0.1}, {}, 6),
                                                     TrialRecord("b", "completed", {"lr": 0.2}, {}, 6)))
    seen = {"b": TrialRecord("b", "running", {"lr": 0.2}, {}, 5, lineage=[{"epoch": 2, "donor": "a", "config": {}}])}
    kept = with_lineage(from_tune, seen)
    assert [t.lineage for t in kept.trials] == [[], [{"epoch": 2, "donor": "a", "config": {}}]]
    assert [t.status for t in kept.trials] == ["completed", "completed"]


def test_the_schedule_follows_the_weights_back_through_each_donor_as_it_was_when_it_gave_them(tmp_path):
    progress = SweepProgress(tmp_path, "val_loss", "min", max_t=8, total=3)
    for t, lr in (("a", 0.03), ("b", 0.001), ("c", 0.002)):
        progress.on_trial_start(0, [], trial(t, {"lr": lr}))
    progress.on_trial_start(0, [], trial("b", {"lr": 0.036}, checkpoint_of(tmp_path, "a", 1, epoch=2), epoch=2))
    progress.on_trial_start(0, [], trial("c", {"lr": 0.0288}, checkpoint_of(tmp_path, "b", 2, epoch=4), epoch=4))
    # b, later weak in its turn, takes a's weights again: c's weights, taken before, do not come from that
    progress.on_trial_start(0, [], trial("b", {"lr": 0.024}, checkpoint_of(tmp_path, "a", 3, epoch=6), epoch=6))
    initial = {"a": {"lr": 0.03}, "b": {"lr": 0.001}, "c": {"lr": 0.002}}.__getitem__

    assert schedule("c", progress.trials, initial) == [
        {"trial_id": "a", "from_epoch": 1, "to_epoch": 2, "config": {"lr": 0.03}},
        {"trial_id": "b", "from_epoch": 3, "to_epoch": 4, "config": {"lr": 0.036}},
        {"trial_id": "c", "from_epoch": 5, "to_epoch": None, "config": {"lr": 0.0288}},
    ]
    assert schedule("b", progress.trials, initial) == [
        {"trial_id": "a", "from_epoch": 1, "to_epoch": 6, "config": {"lr": 0.03}},
        {"trial_id": "b", "from_epoch": 7, "to_epoch": None, "config": {"lr": 0.024}},
    ]
    assert schedule("a", progress.trials, initial) == [
        {"trial_id": "a", "from_epoch": 1, "to_epoch": None, "config": {"lr": 0.03}}]
