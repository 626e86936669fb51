"""The data sets a warm rank keeps between trials (see :attr:`tune_service.tasks.Task.data_hparams`)."""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    from tune_service.tasks import Task


class DataCache:
    """Built ``(train, validation)`` data sets by task and by the values of the task's data
    hyperparameters; the ``capacity`` most recently used are kept.

    A task that declares no ``data_hparams`` gets its data sets built for every trial, as without a cache.
    """

    def __init__(self, capacity: int = 1):
        self.capacity = capacity
        self.hits = 0
        self.misses = 0
        self._entries: OrderedDict[tuple, Any] = OrderedDict()

    def datasets(self, task: Task, reference: str, hparams: Mapping[str, Any]) -> Any:
        """``task.datasets(hparams)``, or the data sets built for an earlier trial with the same data."""
        names = getattr(task, "data_hparams", None)
        if names is None:
            return task.datasets(hparams)
        # repr: hyperparameter values may be lists or dicts; equal values print alike
        key = (reference, tuple((name, repr(hparams.get(name))) for name in sorted(names)))
        if key in self._entries:
            self.hits += 1
            self._entries.move_to_end(key)
            return self._entries[key]
        self.misses += 1
        built = task.datasets(hparams)
        self._entries[key] = built
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)
        return built
