"""A spec checked against its task, before anything runs: a metric the task never reports would fail
every trial at its first report, and a searched parameter the task does not take would be searched for
nothing (``learning_rate`` for a task that reads ``lr``).

The task says what it reports and takes (:meth:`Task.reported_metrics`, :meth:`Task.taken_hyperparameters`);
a plain ``train_loop_per_worker`` says neither and is not checked.
"""

from __future__ import annotations

from tune_service.errors import Problem, SpecError, nearest
from tune_service.spec import SweepSpec
from tune_service.tasks.base import Task
from tune_service.tasks.optimizers import all_optimizer_arguments, optimizer_class


def check_spec_against_task(spec: SweepSpec, task: Task, reference: str) -> list[str]:
    """Refuse what ``spec`` asks of ``task`` that the task cannot give; the notes to show otherwise.

    A spec without a ``task:`` key (a W&B sweep file: its program is not run, the built-in task stands
    in) gets notes instead of refusals for the parameters the stand-in does not take.

    Raises:
        SpecError: the metric (an objective, a constraint's metric) is one the task never reports, or a
            searched parameter is one it does not take; each problem names the task's nearest name and
            every name it has.
    """
    problems = []
    reported = task.reported_metrics()
    named = [
        *(
            (f"metrics[{i}].name" if spec.multi_objective else "metric.name", o.name)
            for i, o in enumerate(spec.metrics)
        ),
        *((f"constraints[{i}].name", c.name) for i, c in enumerate(spec.constraints)),
    ]
    for path, name in named:
        if reported is not None and name is not None and name not in reported:
            problems.append(
                Problem(
                    path,
                    f"the task {reference} never reports {name!r}{nearest(name, reported)}; "
                    f"it reports: {', '.join(reported)}",
                )
            )
    taken = task.taken_hyperparameters()
    for parameter in [p.name for p in spec.parameters if p.is_searched] if taken is not None else ():
        top = parameter.split(".")[0]
        assert taken is not None  # the loop runs only then
        if top not in taken and not (_loop_builds_optimizer(task) and top in all_optimizer_arguments()):
            problems.append(
                Problem(
                    f"parameters.{parameter}",
                    f"the task {reference} does not take {top!r}{nearest(top, taken)}; it takes: {', '.join(taken)}",
                )
            )
    problems += _unknown_optimizers(spec, task)
    if problems and "task" not in spec.source:  # a W&B file: the built-in task stands in for its program
        return [
            f"{p.path}: {p.message} (the built-in task trains in place of your program: name your model with `task:`)"
            for p in problems
        ]
    if problems:
        raise SpecError(problems)
    return []


def _unknown_optimizers(spec: SweepSpec, task: Task) -> list[Problem]:
    """A value of the ``optimizer`` parameter that names no optimizer the loop can step, for a task that
    leaves building the optimizer to the loop."""
    if not _loop_builds_optimizer(task):
        return []
    problems = []
    for parameter in spec.parameters:
        if parameter.name != "optimizer" or parameter.distribution not in ("constant", "categorical"):
            continue
        for value in (parameter.value,) if parameter.distribution == "constant" else parameter.values:
            try:
                optimizer_class(str(value))
            except ValueError as error:
                problems.append(Problem("parameters.optimizer", str(error)))
    return problems


def _loop_builds_optimizer(task: Task) -> bool:
    return type(task).configure_optimizers is Task.configure_optimizers
