"""The one hierarchy of user-facing errors.

Every error a user can cause (a bad spec, a trial that cannot fit the cluster, a task that cannot be
imported) is a :class:`TuneServiceError`. Its ``str()`` is the complete message the CLI prints after
``error:``; the CLI exits with the error's ``exit_code`` (2, bad input; 3, Ray or the cluster cannot be
reached) and prints no traceback unless ``--debug`` is given.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any


def first_line(error: BaseException) -> str:
    """The first line of ``error``'s message (its type's name when it has none): what a one-line
    ``error:`` quotes of an error raised by a library."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


class TuneServiceError(Exception):
    """Base of every error caused by the user's input rather than by a bug in tune-service."""

    #: The CLI's exit code for this error: bad input.
    exit_code = 2


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a spec: where (a dotted path such as ``parameters.lr.min``) and what."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class SpecError(TuneServiceError):
    """The sweep spec is invalid. Carries every problem found, not only the first."""

    def __init__(self, problems: list[Problem]):
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


class CapacityError(TuneServiceError):
    """A single trial needs more resources than the cluster has, so the sweep could never start."""


class ClusterUnreachable(TuneServiceError):
    """The Ray cluster (or its Jobs API) named by an address does not answer."""

    exit_code = 3


class ClusterRefused(ClusterUnreachable):
    """The Ray cluster answered but refused the request: Ray's token authentication is on there and
    this process sent no token, or not its token."""


class StorageFull(TuneServiceError):
    """The sweep ran, but its storage would not take its last save (a full disk, an I/O error): the
    trials' results are kept; freeing space and resuming writes it."""

    exit_code = 1


class TaskError(TuneServiceError):
    """The task named by the spec cannot be found, imported or used."""


def nearest(word: Any, choices: tuple[str, ...] | list[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest valid choice (a prefix, or a near spelling), or ``""``."""
    word = str(word)
    prefixed = [c for c in choices if word and c.startswith(word)]
    # An abbreviation by initials, either way: learning_rate and lr, weight_decay and wd.
    abbreviated = [c for c in choices if word and (_initials(c) == word or _initials(word) == c)]
    match = prefixed[:1] or abbreviated[:1] or difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {match[0]!r}?)" if match else ""


def _initials(name: str) -> str:
    words = [w for w in name.split("_") if w]
    return "".join(w[0] for w in words) if len(words) > 1 else ""
