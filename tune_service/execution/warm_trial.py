"""A trial on a warm gang: lease the slot's gang, run the shared loop on it, and relay rank 0's per-epoch
reports (with their checkpoints) to Tune.

Tune runs it with ``reuse_actors=True`` and :func:`trial_resources`, so the trial actor, its placement
group and its gang serve trial after trial. A stop or pause from the scheduler reaches the trial inside
``tune.report`` (function trainables report synchronously), where the gang's ranks wait at the same
report: they leave the loop together and the gang is free for the next trial at once. Where the trial
starts, and its retries, are the lifecycle's (:class:`~tune_service.execution.sweep_trial.SweepTrial`).
"""

from __future__ import annotations

from dataclasses import dataclass

from tune_service.execution.gang import GangSettings, lease_gang
from tune_service.execution.sweep_trial import Attempt, SweepTrial


def trial_resources(settings: GangSettings):
    """Tune's resource request of a warm trial: one placement-group bundle per rank, packed onto as few
    nodes as they fit. The leading empty bundle puts the trial actor in bundle 0, beside rank 0, with
    no resources of its own (so rank 0's checkpoints are on the trial actor's disk)."""
    from ray import tune

    return tune.PlacementGroupFactory([{}, *settings.bundles], strategy="PACK")


@dataclass(frozen=True, kw_only=True)
class WarmTrial(SweepTrial):
    """A trial on its concurrency slot's warm gang (a new gang after a failed attempt: the failed one
    was given up)."""

    gang: GangSettings

    def attempt(self, attempt: Attempt) -> None:
        gang = lease_gang(self.gang, self.secrets)
        gang.run(attempt.config, None if attempt.start is None else attempt.start.checkpoint, attempt.reports)
