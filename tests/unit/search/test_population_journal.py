"""The population's journal: its decisions as they were made, read back on a resume, and where each trial
goes on from. tests/integration/test_pbt_resume.py kills a population's driver and resumes it on a real Ray."""

from __future__ import annotations

import json
from pathlib import Path

from tune_service.experiment.layout import POPULATION_JOURNAL_FILE
from tune_service.search.population_journal import Decision, append_decision, checkpoint_name, read_history


def decision(trial_id: str, time: int, **more) -> Decision:
    return Decision(trial_id, time, score=-1.0, perturbed_at=time, trained_to=time, offered=None,
                    report={"epoch": time}, config={"lr": 0.1}, **more)


def checkpoint(experiment: Path, trial_id: str, index: int, epoch: int, complete: bool = True) -> str:
    """A checkpoint directory as a warm trial leaves it in storage; its name as the journal gives it."""
    directory = experiment / f"trial_{trial_id}" / f"checkpoint_{index:06d}"
    directory.mkdir(parents=True)
    (directory / "report.json").write_text(json.dumps({"epoch": epoch}))
    if complete:
        (directory / "state.pt").write_bytes(b"state")
    return checkpoint_name(trial_id, str(directory))


def test_the_decisions_are_read_back_in_order_and_a_line_cut_off_by_a_crash_is_skipped(tmp_path):
    made = [decision("a", 2), decision("b", 2, donor="a", donor_checkpoint="trial_a/checkpoint_000001")]
    for d in made:
        append_decision(tmp_path, d)
    with open(tmp_path / POPULATION_JOURNAL_FILE, "a") as journal:
        journal.write('{"trial_id": "a", "ti')
    history = read_history(tmp_path)
    assert history is not None and history.decisions == tuple(made)
    assert history.last() == {"a": made[0], "b": made[1]}
    assert read_history(tmp_path / "elsewhere") is None


def test_a_journal_begun_anew_starts_with_the_decisions_before_it(tmp_path):
    """A resumed driver on remote storage writes into a new staging directory: its journal must hold the
    earlier decisions too, since Tune's copy of it replaces the one in storage."""
    earlier = (decision("a", 2), decision("b", 2))
    append_decision(tmp_path, decision("a", 4), earlier)
    append_decision(tmp_path, decision("b", 4), earlier)  # the journal exists now: appended to
    history = read_history(tmp_path)
    assert history is not None and [(d.trial_id, d.time) for d in history.decisions] == [
        ("a", 2), ("b", 2), ("a", 4), ("b", 4)]


def test_a_trial_goes_on_from_its_donor_after_an_exploit_else_from_its_own_checkpoint_not_past_its_perturbation(
    tmp_path
):
    donor = checkpoint(tmp_path, "d", 1, epoch=2)
    # "a" was last decided at epoch 2 and ran on to epoch 5 before the driver died, its report of epoch 4 (a
    # perturbation, interval 2) not yet decided on: it goes on from epoch 4, where the decision is due.
    for index, epoch in enumerate([1, 2, 3, 4, 5]):
        checkpoint(tmp_path, "a", index, epoch)
    checkpoint(tmp_path, "a", 5, epoch=6, complete=False)
    # "b" exploited "d" at its last decision: it takes the donor's checkpoint again, whatever it wrote after.
    checkpoint(tmp_path, "b", 0, epoch=3)
    for d in (decision("a", 2), decision("b", 2, donor="d", donor_checkpoint=donor)):
        append_decision(tmp_path, d)
    history = read_history(tmp_path)
    assert history is not None
    assert history.start_of("a", interval=2, time_attr="epoch").report == {"epoch": 4}
    assert history.start_of("a", interval=4, time_attr="epoch").report == {"epoch": 5}  # 6 is cut off
    assert history.start_of("b", interval=2, time_attr="epoch").path == str(tmp_path / donor)
    # Not decided on yet: its own newest up to its first perturbation; none at all: from scratch.
    checkpoint(tmp_path, "c", 0, epoch=1)
    checkpoint(tmp_path, "c", 1, epoch=3)
    assert history.start_of("c", interval=2, time_attr="epoch").report == {"epoch": 1}
    assert history.start_of("e", interval=2, time_attr="epoch") is None


def test_the_lineage_read_back_leaves_out_the_exploit_a_trial_takes_again_on_the_resume(tmp_path):
    first = checkpoint(tmp_path, "d", 0, epoch=2)
    second = checkpoint(tmp_path, "b", 0, epoch=4)
    decisions = [
        decision("b", 2, donor="d", donor_checkpoint=first),
        decision("b", 4),
        decision("a", 4, donor="b", donor_checkpoint=second),  # a's last decision: taken again on resume
        decision("c", 4, donor="b", donor_checkpoint=second),
        decision("c", 6),
    ]
    for d in decisions:
        append_decision(tmp_path, d)
    history = read_history(tmp_path)
    assert history is not None
    assert history.lineages() == {
        "b": [{"epoch": 2, "donor": "d", "config": {"lr": 0.1}, "donor_exploits": 0}],
        "c": [{"epoch": 4, "donor": "b", "config": {"lr": 0.1}, "donor_exploits": 1}],
    }
    assert history.last()["a"] == decisions[2]  # what the resume hands it again
