"""What gets trained: the Task protocol, the built-in tasks, and resolving a task by name or import path.

This module does not import torch (``Task`` is imported on first use), so that a process that only
passes a task on, sealed (:class:`SealedTask`), never imports it.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping

from tune_service.errors import TaskError, first_line

if TYPE_CHECKING:
    from tune_service.tasks.base import Task

BUILTIN_TASKS = {"digits": "tune_service.tasks.digits:Digits"}


def __getattr__(name: str) -> Any:
    if name == "Task":
        from tune_service.tasks.base import Task

        return Task
    raise AttributeError(f"module 'tune_service.tasks' has no attribute {name!r}")


@dataclass(frozen=True)
class ResolvedTask:
    """A task ready to run in a trial: either a :class:`Task` for the shared loop, or a user's plain
    Ray Train ``train_loop_per_worker(config)`` function that is run unchanged on every rank."""

    reference: str
    task: Task | None = None
    train_loop: Callable[[dict], Any] | None = None

    @property
    def defaults(self) -> dict[str, Any]:
        return dict(self.task.defaults) if self.task is not None else {}


@dataclass(frozen=True)
class SealedTask:
    """A :class:`ResolvedTask` in transit: pickled by the driver (with Ray's cloudpickle, so a task
    defined in a notebook travels too) and opened only where it runs, on a gang's ranks. A warm trial's
    actor, which passes the task on to its ranks, thereby never imports the task's module nor torch
    (1.3 s of every trial actor's start, and about 250 MiB of its memory)."""

    reference: str
    #: The task's default hyperparameters, which the trial's actor lays under the searcher's values.
    defaults: Mapping[str, Any] = field(default_factory=dict)
    payload: bytes = b""

    @classmethod
    def of(cls, task: ResolvedTask) -> SealedTask:
        from ray import cloudpickle

        return cls(task.reference, task.defaults, cloudpickle.dumps(task))

    def open(self) -> ResolvedTask:
        from ray import cloudpickle

        return cloudpickle.loads(self.payload)


def resolve_task(reference: str | Task | Callable) -> ResolvedTask:
    """Find the task a spec names.

    Args:
        reference: a built-in name (``digits``), an import path ``package.module:attr`` naming a Task
            subclass, a Task instance or a function, or such an object itself (Python API).

    Raises:
        TaskError: the module or attribute does not exist, or is neither a Task nor a function.
    """
    if not isinstance(reference, str):
        return _from_object(reference, repr(reference))
    path = BUILTIN_TASKS.get(reference, reference)
    module_name, sep, attr = path.partition(":")
    if not sep or not module_name or not attr:
        raise TaskError(
            f"task: must be a built-in task ({', '.join(BUILTIN_TASKS)}) or 'package.module:attr', got {reference!r}"
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise TaskError(f"task: cannot import module {module_name!r} ({err}), got {reference!r}") from None
    except Exception as err:  # the module itself is broken (a syntax error, an error while it runs)
        what = f"{err.msg} ({err.filename}, line {err.lineno})" if isinstance(err, SyntaxError) else first_line(err)
        raise TaskError(
            f"task: importing module {module_name!r} failed: {type(err).__name__}: {what}, got {reference!r}"
        ) from None
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise TaskError(f"task: module {module_name!r} has no attribute {attr!r}, got {reference!r}")
        obj = getattr(obj, part)
    return _from_object(obj, reference)


def _from_object(obj: Any, reference: str) -> ResolvedTask:
    from tune_service.tasks.base import Task

    if inspect.isclass(obj) and issubclass(obj, Task):
        return ResolvedTask(reference, task=obj())
    if isinstance(obj, Task):
        return ResolvedTask(reference, task=obj)
    if callable(obj) and not inspect.isclass(obj):
        _check_train_loop(obj, reference)
        return ResolvedTask(reference, train_loop=obj)
    raise TaskError(
        f"task: must name a Task subclass, a Task instance or a train_loop_per_worker(config) "
        f"function, got {type(obj).__name__} for {reference!r}"
    )


def _check_train_loop(fn: Callable, reference: str) -> None:
    """A train loop is a Python function of the user's that Ray Train calls with the trial's config, or
    with nothing: one that needs other arguments, or one of the standard library's (``os:system``,
    ``shutil:rmtree``), is no train loop, and running it on every rank could do harm."""
    plain = inspect.isfunction(fn) or inspect.ismethod(fn) or inspect.isbuiltin(fn)
    owner = fn if plain else type(fn)  # a callable object: its class
    top_module = (getattr(owner, "__module__", None) or "builtins").partition(".")[0]
    name = getattr(fn, "__qualname__", type(fn).__qualname__)
    if top_module in sys.stdlib_module_names:
        raise TaskError(
            f"task: must be a Task or a train_loop_per_worker(config) function of your own, got the "
            f"standard library's {top_module}.{name} for {reference!r}"
        )
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        raise TaskError(
            f"task: a train_loop_per_worker must be a Python function, got {name} for {reference!r}"
        ) from None
    required = [p for p in parameters if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    positional = [p for p in required if p.kind != p.KEYWORD_ONLY]
    if len(positional) > 1 or len(required) > len(positional):
        names = ", ".join(p.name for p in required)
        raise TaskError(
            f"task: a train_loop_per_worker takes the trial's config or nothing, got {name}({names}) for {reference!r}"
        )


__all__ = ["Task", "ResolvedTask", "SealedTask", "resolve_task", "BUILTIN_TASKS"]
