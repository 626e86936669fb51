"""The rules a spec's values are checked against, each reporting a problem (the dotted path, the rule,
the value) instead of raising, so that one pass finds every problem in a file."""

from __future__ import annotations

import math
from typing import Any, Literal, overload

from tune_service.errors import Problem, nearest
from tune_service.spec.training import AUTO


class Checker:
    """Collects the problems and notes of one spec; every rule returns a usable value even when it
    reports one, so the reading goes on."""

    def __init__(self) -> None:
        self.problems: list[Problem] = []
        self.notes: list[str] = []

    def fail(self, path: str, message: str) -> None:
        self.problems.append(Problem(path, message))

    def note(self, text: str) -> None:
        self.notes.append(text)

    def mapping(self, path: str, value: Any, example: str = "") -> bool:
        """Whether ``value`` is a mapping; reports it when not."""
        if isinstance(value, dict):
            return True
        self.fail(path, f"must be a mapping{' such as ' + example if example else ''}, got {value!r}")
        return False

    def unknown_keys(self, path: str, mapping: dict, allowed: tuple[str, ...]) -> bool:
        """Report keys not in ``allowed``; True if there were any."""
        unknown = [key for key in mapping if key not in allowed]
        for key in unknown:
            where = f"{path}.{key}" if path else str(key)
            self.fail(where, f"unknown key{nearest(key, allowed)}; valid keys: {', '.join(allowed)}")
        return bool(unknown)

    def string(self, path: str, value: Any) -> str:
        if not isinstance(value, str):
            self.fail(path, f"must be a string, got {value!r}")
            return ""
        return value

    def choice(self, path: str, value: Any, choices: tuple[str, ...]) -> str:
        if value not in choices:
            self.fail(path, f"must be one of {', '.join(choices)}, got {value!r}{nearest(value, choices)}")
            return choices[0]
        return value

    def number(self, path: str, value: Any) -> float | int | None:
        """A real number. YAML 1.1 reads ``1e-4`` as a string, so numeric strings are accepted."""
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                pass
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            self.fail(path, f"must be a finite number, got {value!r}")
            return None
        return value

    @overload
    def boolean(self, path: str, value: Any, allow_auto: Literal[False] = False) -> bool: ...

    @overload
    def boolean(self, path: str, value: Any, allow_auto: bool) -> bool | str: ...

    def boolean(self, path: str, value: Any, allow_auto: bool = False) -> bool | str:
        """``value`` if it is true or false (or, with ``allow_auto``, ``auto``); False, reported, if not."""
        if isinstance(value, bool) or (allow_auto and value == AUTO):
            return value
        self.fail(path, f"must be {'auto, ' if allow_auto else ''}true or false, got {value!r}")
        return False

    def integer(self, path: str, value: Any, minimum: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(path, f"must be an integer, got {value!r}")
            return minimum
        if value < minimum:
            self.fail(path, f"must be >= {minimum}, got {value}")
        return value

    def at_least(self, path: str, value: float | int | None, minimum: float, *, strictly: bool = False):
        """``value`` if it is above ``minimum`` (or equal, unless ``strictly``); None, reported, if not."""
        if value is None:
            return None
        if value < minimum or (strictly and value == minimum):
            self.fail(path, f"must be {'>' if strictly else '>='} {minimum:g}, got {value}")
            return None
        return value
