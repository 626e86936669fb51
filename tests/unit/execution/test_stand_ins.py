"""Stand-ins for deleted checkpoints (tune_service.experiment.stand_ins): put before a resume where Tune
may name a checkpoint it deleted, passed over by a trial's own start, removed at the sweep's end."""

from __future__ import annotations

import json

from tune_service.experiment.checkpoints import newest_checkpoint
from tune_service.experiment.layout import CHECKPOINT_REPORT_FILE
from tune_service.experiment.stand_ins import STAND_IN_FILE, WINDOW, put_stand_ins, remove_stand_ins


def complete_checkpoint(trial, index: int, epoch: int) -> None:
    path = trial / f"checkpoint_{index:06d}"
    path.mkdir(parents=True)
    (path / "state.pt").write_bytes(b"state")
    (path / CHECKPOINT_REPORT_FILE).write_text(json.dumps({"epoch": epoch}))


def test_every_missing_index_below_the_newest_gets_a_stand_in_that_the_trials_own_start_passes_over(tmp_path):
    trial = tmp_path / "trial_a"
    complete_checkpoint(trial, 5, epoch=6)  # num_to_keep=2 deleted 0..4; Tune's state may name any of them
    complete_checkpoint(trial, 6, epoch=7)
    (tmp_path / "trial_b").mkdir()  # a trial with no checkpoint yet: nothing to stand in for
    assert put_stand_ins(str(tmp_path)) == 5
    assert sorted(p.name for p in trial.iterdir()) == [f"checkpoint_{i:06d}" for i in range(7)]
    assert (trial / "checkpoint_000002" / STAND_IN_FILE).read_text() == "checkpoint_000006\n"
    assert newest_checkpoint(str(trial)).report == {"epoch": 7}  # the stand-ins are not checkpoints
    assert put_stand_ins(str(tmp_path)) == 0  # a second resume finds them in place

    # Tune numbers a resumed trial's checkpoints from its state: the next one may land in a stand-in's place
    (trial / "checkpoint_000003" / "state.pt").write_bytes(b"state")
    (trial / "checkpoint_000003" / CHECKPOINT_REPORT_FILE).write_text(json.dumps({"epoch": 8}))
    assert remove_stand_ins(str(tmp_path)) == 5
    assert sorted(p.name for p in trial.iterdir()) == ["checkpoint_000003", "checkpoint_000005", "checkpoint_000006"]
    assert sorted(p.name for p in (trial / "checkpoint_000003").iterdir()) == [CHECKPOINT_REPORT_FILE, "state.pt"]


def test_stand_ins_reach_back_a_window_only(tmp_path):
    trial = tmp_path / "trial_a"
    complete_checkpoint(trial, WINDOW + 10, epoch=1)
    assert put_stand_ins(str(tmp_path)) == WINDOW
    assert not (trial / f"checkpoint_{9:06d}").exists() and (trial / f"checkpoint_{10:06d}").exists()
