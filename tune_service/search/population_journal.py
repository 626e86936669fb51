"""A population's decisions (PBT, PB2), written as they are made, so that a sweep resumed after its driver
died goes on from them: :func:`append_decision` in the driver, :func:`read_history` on the resume.

Why: Ray's PBT keeps, for each trial, the time of its last perturbation, its score and report then, and the
checkpoint it offers other trials; none of it is saved with the experiment. A PBT started afresh on a resume
would perturb each trial at its first report, off the schedule, with no donors to copy. And Tune's saved
state of a trial (its config and the checkpoint it starts from) is saved on a period, so it may predate the
last exploit: the trial would go on with a config its weights were not trained with.

Each line is one :class:`Decision`: a trial reached its perturbation time, and PBT recorded its score (and,
for a top trial, the checkpoint it offers), and may have made it exploit a donor. On the resume, the
population (:class:`~tune_service.search.population.Population`) puts each trial's last decision back into
Ray's PBT state and gives the trial the config it had after it and the checkpoint it goes on from
(:meth:`PopulationHistory.start_of`): the donor's, when that decision was an exploit (made again: the trial
trains again the epochs it trained since, to the same weights when training is deterministic); else its own
newest checkpoint up to its next perturbation, so that a perturbation that was due when the driver died is
made on the resume, from the same state, as it would have been. A decision not yet written when the driver
died is made again the same way; its random draws are the same (:func:`~tune_service.search.population.seeded_draws`).

The journal is in the experiment's directory (:func:`journal_directory`): on remote storage it goes up with
Tune's copies of the experiment's files, and a resume reads what the last copy held.
"""

from __future__ import annotations

import json
import os
import posixpath
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

from tune_service.experiment.checkpoints import StoredCheckpoint, newest_checkpoint, read_checkpoint
from tune_service.experiment.layout import POPULATION_JOURNAL_FILE, TRIAL_DIR_PREFIX


@dataclass(frozen=True)
class Decision:
    """What PBT decided for one trial at one report, and its state for that trial afterwards.

    Checkpoints are named relative to the experiment (``trial_<id>/checkpoint_000003``)."""

    trial_id: str
    #: The report's time (epoch or step) the decision was made at.
    time: float
    #: PBT's score of the trial then (the metric, signed by the mode).
    score: float | None
    #: PBT's ``last_perturbation_time`` and ``last_train_time`` of the trial afterwards (an exploit takes
    #: the donor's).
    perturbed_at: float
    trained_to: float
    #: The trial's own checkpoint PBT keeps for others to exploit (a top trial's), or None.
    offered: str | None
    #: The report PBT keeps with it (as Tune passed it on, the config the trial had then included).
    report: dict[str, Any]
    #: The trial's config afterwards.
    config: dict[str, Any]
    #: An exploit: the donor's trial id, and the donor's checkpoint the trial goes on from.
    donor: str | None = None
    donor_checkpoint: str | None = None


def checkpoint_name(trial_id: str, checkpoint_dir: str) -> str:
    """A trial's checkpoint as the journal names it: relative to the experiment."""
    return f"{TRIAL_DIR_PREFIX}{trial_id}/{posixpath.basename(posixpath.normpath(checkpoint_dir))}"


def checkpoint_path(experiment_path: str, name: str) -> str:
    """Where the checkpoint the journal names ``name`` (:func:`checkpoint_name`) is, in the experiment at
    ``experiment_path`` (a local directory, or a path on the storage's filesystem)."""
    return posixpath.join(experiment_path, name)


def append_decision(directory: str | os.PathLike, decision: Decision, earlier: Sequence[Decision] = ()) -> None:
    """Append ``decision`` to the journal in ``directory`` (:func:`journal_directory`), on disk before the
    decision takes effect (a decision the driver dies before writing is made again on the resume). A
    journal begun anew (a resumed driver's staging directory) starts with the ``earlier`` decisions."""
    path = Path(directory) / POPULATION_JOURNAL_FILE
    lines = [] if path.exists() else [json.dumps(asdict(d), default=str) + "\n" for d in earlier]
    lines.append(json.dumps(asdict(decision), default=str) + "\n")
    with open(path, "a", encoding="utf-8") as journal:
        journal.writelines(lines)
        journal.flush()
        os.fsync(journal.fileno())


def journal_directory(trial: Any) -> str:
    """Where a population's journal is written, for Tune's ``trial`` of it: the experiment's directory
    itself when the experiment is on the local filesystem (each decision is on disk at once); on remote
    storage, Tune's staging directory of the driver's files, which Tune copies up with each save of the
    experiment's state (as it does Ray's ``pbt_global.txt``)."""
    from pyarrow.fs import LocalFileSystem

    storage = trial.storage
    if isinstance(storage.storage_filesystem, LocalFileSystem):
        return storage.experiment_fs_path
    return trial.local_experiment_path


@dataclass(frozen=True)
class PopulationHistory:
    """A resumed population's decisions so far, and where the experiment's checkpoints are."""

    decisions: tuple[Decision, ...]
    #: The experiment's directory in its storage, and that storage's pyarrow filesystem (None: local).
    storage_path: str
    filesystem: Any = None

    def last(self) -> dict[str, Decision]:
        """Each trial's last decision, by trial id."""
        return {d.trial_id: d for d in self.decisions}

    def checkpoint(self, name: str) -> StoredCheckpoint | None:
        """A checkpoint the journal names (None if it is gone or cut off)."""
        return read_checkpoint(checkpoint_path(self.storage_path, name), self.filesystem)

    def start_of(self, trial_id: str, interval: float, time_attr: str) -> StoredCheckpoint | None:
        """Where the trial goes on from: its last decision's donor checkpoint, if that was an exploit; else
        its own newest checkpoint whose report is not past its next perturbation (its last decision's
        perturbation time plus ``interval``, counted in ``time_attr``). None: nothing to go on from."""
        last = self.last().get(trial_id)
        if last is not None and last.donor_checkpoint is not None:
            return self.checkpoint(last.donor_checkpoint)
        due = (last.perturbed_at if last is not None else 0) + interval
        return newest_checkpoint(
            f"{self.storage_path}/{TRIAL_DIR_PREFIX}{trial_id}",
            self.filesystem,
            accept=lambda report: report.get(time_attr, 0) <= due,
        )

    def lineages(self) -> dict[str, list[dict[str, Any]]]:
        """Each trial's exploits that it went on from before the driver died, as the sweep's progress
        records them (:func:`tune_service.results.lineage.exploit_of`): all of them but an exploit that
        was a trial's last decision, which the trial takes again on the resume (and the progress records
        then). ``donor_exploits``: the donor's exploits decided before this one."""
        last = self.last()
        lineages: dict[str, list[dict[str, Any]]] = {}
        counts: dict[str, int] = {}
        for d in self.decisions:
            if d.donor is None or d.donor_checkpoint is None:
                continue
            if last[d.trial_id] is not d:
                donor_checkpoint = self.checkpoint(d.donor_checkpoint)
                epoch = donor_checkpoint.report.get("epoch") if donor_checkpoint is not None else None
                lineages.setdefault(d.trial_id, []).append(
                    {"epoch": epoch, "donor": d.donor, "config": d.config, "donor_exploits": counts.get(d.donor, 0)}
                )
            counts[d.trial_id] = counts.get(d.trial_id, 0) + 1
        return lineages


def read_history(
    experiment_dir: str | os.PathLike, storage_path: str | None = None, filesystem: Any = None
) -> PopulationHistory | None:
    """The decisions in the experiment's journal (a line cut off by a crash, the last, is skipped), or None
    when it has none. ``storage_path``/``filesystem``: where the experiment's checkpoints are, when not in
    ``experiment_dir`` (remote storage)."""
    try:
        lines = (Path(experiment_dir) / POPULATION_JOURNAL_FILE).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return None
    decisions = []
    for line in lines:
        try:
            decisions.append(Decision(**json.loads(line)))
        except (ValueError, TypeError):
            continue
    return PopulationHistory(tuple(decisions), storage_path or str(experiment_dir), filesystem)
