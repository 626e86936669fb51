"""The shapes of a trial's config: nested (as the W&B grammar writes parameters) and flat (dotted keys,
as searchers and tables hold them), and plain (JSON-able: no numpy scalars or tuples)."""

from __future__ import annotations

import copy
from typing import Any, Collection, Mapping


def plain(value: Any) -> Any:
    """Recursively convert numpy scalars, tuples and other containers to plain JSON-able Python."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if hasattr(value, "item") and callable(value.item) and type(value).__module__ == "numpy":
        return value.item()
    return value


def nest(flat: dict[str, Any], keep_flat: Collection[str] = ()) -> dict[str, Any]:
    """``{"opt.lr": 1}`` -> ``{"opt": {"lr": 1}}``; keys without dots, and those in ``keep_flat``, stay
    as they are."""
    nested: dict[str, Any] = {}
    for name, value in flat.items():
        _set(nested, name, value, as_it_is=name in keep_flat)
    return nested


def with_values(config: Mapping[str, Any], values: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``config`` (a trial's, nested) with each of ``values`` set, by dotted name (a name the
    config holds as it is, dots and all, is set there)."""
    out = copy.deepcopy(dict(config))
    for name, value in values.items():
        _set(out, name, value, as_it_is=name in out)
    return out


def _set(nested: dict[str, Any], name: str, value: Any, as_it_is: bool) -> None:
    """Set ``name`` in ``nested``: under its dotted groups, or (``as_it_is``) as one key."""
    if as_it_is:
        nested[name] = value
        return
    *groups, leaf = name.split(".")
    for group in groups:
        nested = nested.setdefault(group, {})
    nested[leaf] = value


def flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """The inverse of :func:`nest`: nested mappings -> dotted keys."""
    flat: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, Mapping):
            flat.update(flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat
