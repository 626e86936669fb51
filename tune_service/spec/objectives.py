"""The sweep's objectives: W&B's ``metric:`` (one) or ``metrics:`` (two to four, W&B's multi-objective key
since its sweep schema of July 2026), each ``{name, goal, target}``; and its ``constraints:``, bounds on
reported metrics (``[{name: n_params, max: 2e6}]``) that a feasible trial keeps, as Optuna's constraints
say (a trial that breaks one is never the best, never on the front, and Optuna's samplers hear it so).

W&B's rules hold here too: ``metrics:`` has at least two entries, and ``metric:`` and ``metrics:`` do not
go together. W&B also asks ``metrics:`` for ``method: custom`` (a search run by an engine); here the
searchers that take several objectives do too (:data:`MULTI_OBJECTIVE_METHODS`), and those that cannot
are refused with the others named, never given a weighted sum in secret.

Several objectives and early stopping: ASHA compares the trials at a rung by Pareto order (MO-ASHA,
:mod:`~tune_service.search.pareto_asha`), and is the default for a task's sweep as with one objective;
HyperBand halves its brackets by the same order (:class:`~tune_service.search.hyperband.ParetoBracket`);
FIFO runs every trial to its budget. The populations (PBT, PB2) copy the best trials' weights into the
worst, which needs one order of the trials, and are refused in one line.
"""

from __future__ import annotations

from typing import Any

from tune_service.spec.rules import Checker
from tune_service.spec.sweep import GOALS, ConstraintSpec, MetricSpec

#: The keys of one objective. W&B's ``impute`` and ``impute_while_running`` (what its Bayesian search
#: assumes of a crashed or running run) are read and noted: a failed trial here is a failed point to the
#: searcher, never an imputed value.
OBJECTIVE_KEYS = ("name", "goal", "target", "impute", "impute_while_running")
NOTED_OBJECTIVE_KEYS = ("impute", "impute_while_running")
MIN_OBJECTIVES, MAX_OBJECTIVES = 2, 4
#: The methods whose searcher takes several objectives: Optuna's multi-objective TPE (``method: custom``
#: runs it too), and random and grid search, which model nothing.
MULTI_OBJECTIVE_METHODS = ("optuna", "random", "grid")
#: The schedulers a sweep of several objectives may use.
MULTI_OBJECTIVE_SCHEDULERS = ("asha", "hyperband", "fifo")


def read_metric(check: Checker, raw: Any, path: str = "metric") -> MetricSpec:
    """One objective, ``{name, goal, target}``; ``path`` names it in a problem."""
    d = MetricSpec()
    if not isinstance(raw, dict):
        check.fail(path, f"must be a mapping with name and goal, got {raw!r}")
        return d
    check.unknown_keys(path, raw, OBJECTIVE_KEYS)
    for key in NOTED_OBJECTIVE_KEYS:
        if key in raw:
            check.note(f"{path}.{key}: read, not used: a failed trial is a failed point to the searcher here")
    name = check.string(f"{path}.name", raw.get("name", d.name))
    goal = check.choice(f"{path}.goal", raw.get("goal", d.goal), GOALS)
    target = check.number(f"{path}.target", raw["target"]) if "target" in raw else None
    return MetricSpec(name=name, goal=goal, target=target)


def read_objectives(check: Checker, raw: dict) -> tuple[MetricSpec, ...]:
    """``metrics:``, two to four objectives with names of their own; () when the document has none (it
    then has one objective, ``metric:``). ``metric:`` beside ``metrics:`` is refused, as W&B does."""
    metrics = raw.get("metrics")
    if metrics is None:
        return ()
    if "metric" in raw:
        check.fail(
            "metrics",
            "cannot be used together with metric (W&B refuses both too): metric for one objective, metrics for several",
        )
    if not isinstance(metrics, list) or not MIN_OBJECTIVES <= len(metrics) <= MAX_OBJECTIVES:
        check.fail(
            "metrics",
            f"must be a list of {MIN_OBJECTIVES} to {MAX_OBJECTIVES} objectives, each {{name, goal}}, got {metrics!r}",
        )
        return ()
    objectives = tuple(read_metric(check, entry, f"metrics[{i}]") for i, entry in enumerate(metrics))
    names = [o.name for o in objectives]
    for i, name in enumerate(names):
        if name in names[:i]:
            check.fail(f"metrics[{i}].name", f"names an objective twice (each objective once), got {name!r}")
    return objectives


def check_method(check: Checker, method: str) -> None:
    """Refuse a searcher that cannot take several objectives, naming those that can."""
    if method not in MULTI_OBJECTIVE_METHODS:
        check.fail(
            "method",
            f"{method} optimises one objective and would need the metrics weighted into one: with "
            f"metrics use method custom or optuna (Optuna's multi-objective TPE), random or grid, got {method!r}",
        )


def check_scheduler(check: Checker, kind: str) -> None:
    """Refuse a scheduler that needs one order of the trials (the module's docstring)."""
    if kind not in MULTI_OBJECTIVE_SCHEDULERS:
        check.fail(
            "scheduler.type",
            f"{kind} compares trials by one objective; with several objectives use asha or hyperband (they "
            f"compare them by Pareto order) or fifo, got {kind!r}",
        )


CONSTRAINT_KEYS = ("name", "min", "max")


def read_constraints(check: Checker, raw: object, objectives: tuple[MetricSpec, ...]) -> tuple[ConstraintSpec, ...]:
    """``constraints:``, each ``{name, min, max}`` with at least one bound, ``min <= max``, on a metric
    that is not an objective (bounding what is optimised would hide the trade the sweep is made to show:
    give the objective a ``target`` instead) and named once."""
    if raw is None:
        return ()
    if not isinstance(raw, list) or not raw:
        check.fail("constraints", f"must be a list of bounds such as [{{name: n_params, max: 2.0e+6}}], got {raw!r}")
        return ()
    found: list[ConstraintSpec] = []
    for i, entry in enumerate(raw):
        path = f"constraints[{i}]"
        if not check.mapping(path, entry, "{name: n_params, max: 2.0e+6}"):
            continue
        check.unknown_keys(path, entry, CONSTRAINT_KEYS)
        name = check.string(f"{path}.name", entry.get("name"))
        low = check.number(f"{path}.min", entry["min"]) if "min" in entry else None
        high = check.number(f"{path}.max", entry["max"]) if "max" in entry else None
        if "min" not in entry and "max" not in entry:
            check.fail(path, f"needs min, max or both, got {entry!r}")
        elif low is not None and high is not None and low > high:
            check.fail(f"{path}.min", f"must be <= {path}.max ({high:g}), got {low:g}")
        if name and name in (o.name for o in objectives):
            check.fail(f"{path}.name", f"is an objective; bound what the sweep does not optimise, got {name!r}")
        if name and name in (c.name for c in found):
            check.fail(f"{path}.name", f"is bounded twice (give both bounds in one entry), got {name!r}")
        found.append(ConstraintSpec(name=name, min=low, max=high))
    return tuple(found)
