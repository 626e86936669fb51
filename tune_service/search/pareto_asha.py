"""ASHA over several objectives (MO-ASHA, Schmucker et al., "Multi-objective Asynchronous Successive
Halving", 2021), as a Tune trial scheduler.

The rungs, the budget and the promotion rule are :class:`~tune_service.search.asha.PromotingASHA`'s: a
trial reaching a rung goes on when it is among the ``floor(n / eta)`` best of the ``n`` trials recorded
there, itself included, and at least the best. What "best" means is the Pareto order of
:mod:`~tune_service.search.pareto`, MO-ASHA's NSGA-II selection: the trials' values of every objective
sorted into non-dominated fronts, a front ranked by crowding distance (its ends first), and trials equal
in both by trial id. The order depends on the rung's values alone, never on the order they arrived in,
so a sweep resumed after its driver died (its rungs replayed from ``recorded``) decides as it would have.

A result that lacks an objective is not judged; one with a non-finite value of any objective stops its
trial and never enters a rung, as for one objective.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from tune_service.search.asha import PromotingASHA, non_finite
from tune_service.search.pareto import pareto_order
from tune_service.search.replay import RecordedTrial


class ParetoASHA(PromotingASHA):
    """ASHA whose rungs rank trials by Pareto order over ``objectives`` (see the module's docstring).

    Args:
        objectives: ``(name, mode)`` of each objective, ``mode`` ``min`` or ``max``.
        the rest: :class:`~tune_service.search.asha.PromotingASHA`'s.
    """

    def __init__(
        self,
        objectives: Sequence[tuple[str, str]],
        time_attr: str,
        max_t: float,
        grace_period: float,
        reduction_factor: float,
        recorded: Mapping[str, RecordedTrial] | None = None,
    ):
        if len(objectives) < 2 or any(mode not in ("min", "max") for _, mode in objectives):
            raise ValueError(f"ParetoASHA needs two or more objectives, each min or max, got {objectives!r}")
        super().__init__(time_attr, max_t, grace_period, reduction_factor, recorded)
        self.objectives = tuple(objectives)
        self.modes = tuple(mode for _, mode in objectives)

    def _entry(self, result: dict[str, Any]) -> Any:
        """The result's value of every objective, as reported (None where one is missing)."""
        values = [result.get(name) for name, _ in self.objectives]
        if any(v is None for v in values):
            return None
        return tuple(math.nan if non_finite(v) else float(v) for v in values if v is not None)

    def _finite(self, entry: Any) -> bool:
        return all(math.isfinite(v) for v in entry)

    def _promotes(self, rung: dict[str, Any], trial_id: str) -> bool:
        ids = sorted(rung)  # by trial id: ties fall the same way whatever order the values came in
        order = pareto_order([rung[i] for i in ids], self.modes)
        kept = max(int(len(ids) // self.eta), 1)
        return ids.index(trial_id) in order[:kept]

    def debug_string(self) -> str:
        names = ", ".join(name for name, _ in self.objectives)
        return f"MO-ASHA over {names} (the top 1/{self.eta:g} of each rung by Pareto order): {self.stopped} stopped"
