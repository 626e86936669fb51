"""Population-based training's lineage: where each trial's weights came from.

A trial that PBT exploits starts again from another trial's checkpoint (the donor's) with a config of its
own. When it starts, Tune's trial hands over that checkpoint (``Trial.checkpoint``, a checkpoint in the
donor's directory of the experiment); :func:`exploit_of` reads from it the donor and the epoch it went on
from, and the sweep's progress (:mod:`~tune_service.results.progress`) keeps them in the trial's record
(``TrialRecord.lineage``, in ``summary.json``). :func:`lineage_frame` is ``load_results().lineage``.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from tune_service.experiment.layout import CHECKPOINT_REPORT_FILE, trial_of_path
from tune_service.spec.configs import flatten, plain

if TYPE_CHECKING:
    import pandas as pd

    from tune_service.results.sweep_result import SweepResult, TrialRecord


def exploit_of(trial: Any) -> dict[str, Any] | None:
    """What a trial starting now took from another (``{"epoch": the donor checkpoint's epoch, "donor":
    its trial id, "config": the trial's config from now on}``), or None when it starts from scratch or
    from a checkpoint of its own."""
    checkpoint = getattr(trial, "checkpoint", None)
    if checkpoint is None:
        return None
    donor = trial_of_path(checkpoint.path)
    if donor is None or donor == trial.trial_id:
        return None
    try:
        with checkpoint.filesystem.open_input_stream(f"{checkpoint.path}/{CHECKPOINT_REPORT_FILE}") as stream:
            epoch = json.loads(stream.readall()).get("epoch")
    except (OSError, ValueError):  # a checkpoint without our report: a train loop's own
        epoch = None
    return {"epoch": epoch, "donor": donor, "config": plain(trial.config or {})}


def schedule(
    trial_id: str, records: Mapping[str, TrialRecord], initial_config: Callable[[str], dict[str, Any]]
) -> list[dict[str, Any]]:
    """The hyperparameters a trial's final weights were trained with, its family tree: one segment per
    trial that trained them, oldest first, each ``{"trial_id", "from_epoch", "to_epoch", "config"}``
    (epochs inclusive; ``to_epoch`` None: to the trial's end). It follows the trial's last exploit to the
    donor, then the donor's last exploit before its checkpoint was taken (``donor_exploits``), and so on;
    ``initial_config(trial_id)`` is the config a trial started with (its first report's).

    As Ray's PBT policy files, which its replay reads, it takes a donor's checkpoint to descend from the
    donor's exploits made before the exploit that took it."""
    segments: list[dict[str, Any]] = []
    current: str | None = trial_id
    counted: int | None = None  # how many of the current trial's exploits its weights descend from
    to_epoch: int | None = None
    while current is not None:
        exploits = records[current].lineage if current in records else []
        # Of those, the last at or before the epoch its weights were handed on at (one made later, after
        # the trial ran ahead, sent it back to an earlier checkpoint: not these weights' history).
        earlier = [e for e in exploits[:counted] if to_epoch is None or e["epoch"] <= to_epoch]
        if not earlier:
            segments.append(
                {"trial_id": current, "from_epoch": 1, "to_epoch": to_epoch, "config": initial_config(current)}
            )
            break
        last = earlier[-1]
        if to_epoch is None or last["epoch"] < to_epoch:  # else it trained none of them: the donor's weights
            segments.append(
                {"trial_id": current, "from_epoch": last["epoch"] + 1, "to_epoch": to_epoch, "config": last["config"]}
            )
        current, counted, to_epoch = last["donor"], last.get("donor_exploits"), last["epoch"]
    return segments[::-1]


def lineage_frame(records: Iterable[TrialRecord]) -> pd.DataFrame:
    """One row per exploit: ``trial_id``, ``epoch`` (the donor's checkpoint it went on from), ``donor``, then
    the trial's config from then on, ``config/<name>`` as in the trials table; by trial, then epoch."""
    import pandas as pd

    rows = [
        {
            "trial_id": r.trial_id,
            "epoch": e["epoch"],
            "donor": e["donor"],
            **{f"config/{k}": v for k, v in flatten(e["config"]).items()},
        }
        for r in records
        for e in r.lineage
    ]
    return pd.DataFrame(rows, columns=None if rows else ["trial_id", "epoch", "donor"])


def with_lineage(result: SweepResult, records: Mapping[str, TrialRecord]) -> SweepResult:
    """``result`` (built from Tune's results, which know nothing of exploits) with each trial's lineage as
    the sweep's progress recorded it (``records``, by trial id)."""
    trials = tuple(
        replace(t, lineage=records[t.trial_id].lineage) if t.trial_id in records and records[t.trial_id].lineage else t
        for t in result.trials
    )
    return replace(result, trials=trials)
