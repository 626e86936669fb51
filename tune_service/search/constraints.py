"""The spec's ``constraints:`` as Optuna's samplers hear them.

Optuna's TPE and NSGA-II take a ``constraints_func(trial)``: each constraint's violation, ``<= 0`` where
the trial keeps it. They call it once per finished trial, inside ``study.tell``, and keep what it returned
with the trial. Ray's ``OptunaSearch`` tells its study from ``on_trial_complete`` and gives the function
nothing but Optuna's own trial, so :class:`~tune_service.search.wrappers.Constrained` (a searcher
wrapper, outside the one that may tell a stopped trial as pruned, without its result) holds the finished
trial's violations while it passes the call on (:func:`telling`), and :func:`violations_being_told` (the
``constraints_func``) returns them. They are held per
thread, not on an object: a searcher restored from its saved state has a new copy of the sampler, and of
anything the sampler points to.

The other searchers have no notion of a constraint: for them a constraint is a matter of the results
(an infeasible trial is never the best), which the plan says.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator, Sequence

from tune_service.spec.sweep import ConstraintSpec

_told = threading.local()


def violations_being_told(trial: Any) -> Sequence[float]:
    """Optuna's ``constraints_func``: the violations of the trial being told now (see the module's
    docstring).

    Raises:
        RuntimeError: asked outside :class:`Constrained`'s call (Optuna asks only inside it).
    """
    violations = getattr(_told, "violations", None)
    if violations is None:
        raise RuntimeError(f"constraints: Optuna asked for trial {getattr(trial, 'number', '?')}'s outside a tell")
    return violations


def violations(constraints: Sequence[ConstraintSpec], result: dict | None) -> tuple[float, ...]:
    """Each constraint's violation by ``result`` (infinite where the result lacks its metric)."""
    return tuple(c.violation((result or {}).get(c.name)) for c in constraints)


@contextlib.contextmanager
def telling(constraints: Sequence[ConstraintSpec], result: dict | None) -> Iterator[None]:
    """Within the block, :func:`violations_being_told` returns ``result``'s violations of ``constraints``."""
    _told.violations = violations(constraints, result)
    try:
        yield
    finally:
        _told.violations = None
