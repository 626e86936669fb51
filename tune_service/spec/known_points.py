"""``points_to_evaluate``: configs the user knows to be good, run as the sweep's first trials (Ray Tune's
name and meaning). Each is read against the sweep's parameters here, so a point that no searcher could
suggest is refused in one line naming the point, the parameter, the rule and the value.

A point is a mapping of parameter names (dotted, or nested in groups as ``parameters:`` writes them) to
values. It names every searched parameter that is active under it, and no other (a constant may be given
its own value): the searchers that model the space (TPE, BOHB) take a known point as one of their own
suggestions, which has a value for each of its parameters. A value must be one the parameter can take:
one of its ``values``, inside its range, a multiple of its ``q``, an integer where the form is integral.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from tune_service.errors import nearest
from tune_service.spec.parameters import ParameterSpec, round_to_q
from tune_service.spec.rules import Checker

KEY = "points_to_evaluate"
_EXAMPLE = "[{lr: 0.0003, hidden: 64}]"


def read_known_points(
    check: Checker, raw: Any, parameters: Sequence[ParameterSpec], run_cap: int | None
) -> tuple[dict[str, Any], ...]:
    """The spec's known points, each flat (dotted names) with the searched parameters active under it,
    its values typed as a trial receives them. Problems go to ``check``."""
    if raw is None:
        return ()
    if not isinstance(raw, list) or not raw:
        check.fail(KEY, f"must be a list of configs such as {_EXAMPLE}, got {raw!r}")
        return ()
    by_name = {p.name: p for p in parameters}
    points = []
    for index, point in enumerate(raw):
        path = f"{KEY}[{index}]"
        if not isinstance(point, dict) or not point:
            check.fail(
                path,
                f"must be a config (a mapping of parameter names to values) such as {_EXAMPLE[1:-1]}, got {point!r}",
            )
            continue
        read = read_point(check, path, flat_point(point, by_name), parameters)
        if read is not None:
            points.append(read)
    if run_cap is not None and len(raw) > run_cap:
        check.fail(
            KEY, f"each point runs as one of the sweep's trials, so at most run_cap ({run_cap}) of them, got {len(raw)}"
        )
    return tuple(points)


def flat_point(point: Mapping[str, Any], by_name: Mapping[str, ParameterSpec], prefix: str = "") -> dict[str, Any]:
    """A point's dotted names: a nested mapping under a name that is not a parameter is a group."""
    flat: dict[str, Any] = {}
    for key, value in point.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and name not in by_name:
            flat.update(flat_point(value, by_name, f"{name}."))
        else:
            flat[name] = value
    return flat


def read_point(
    check: Checker, path: str, given: dict[str, Any], parameters: Sequence[ParameterSpec]
) -> dict[str, Any] | None:
    names = [p.name for p in parameters]
    ok = True
    for name in given:
        if name not in names:
            check.fail(
                f"{path}.{name}", f"not a parameter of this sweep{nearest(name, names)}; parameters: {', '.join(names)}"
            )
            ok = False
    known: dict[str, Any] = {}  # what the conditions test: constants and the point's values so far
    point: dict[str, Any] = {}
    for p in parameters:
        if not p.active(known):
            if p.name in given:
                condition = " and ".join(f"{k} in {list(v)}" for k, v in p.when)
                check.fail(
                    f"{path}.{p.name}",
                    f"is inactive under this point (it needs {condition}); leave it out, got {given[p.name]!r}",
                )
                ok = False
            continue
        if p.distribution == "constant":
            if p.name in given and given[p.name] != p.value:
                check.fail(f"{path}.{p.name}", f"is the constant {p.value!r}; leave it out, got {given[p.name]!r}")
                ok = False
            known[p.name] = p.value
            continue
        if p.name not in given:
            check.fail(
                path,
                f"gives no value for {p.name}: a known point names every searched parameter "
                f"active under it, got {dict(given)!r}",
            )
            ok = False
            continue
        value, reason = admitted(p, given[p.name])
        if reason is not None:
            check.fail(f"{path}.{p.name}", f"{reason}, got {given[p.name]!r}")
            ok = False
            continue
        known[p.name] = point[p.name] = value
    return point if ok else None


def admitted(p: ParameterSpec, value: Any) -> tuple[Any, str | None]:
    """``value`` as parameter ``p`` gives it to a trial (an int where the form is integral, the exact
    multiple of ``q``), and None; or, when ``p`` cannot take it, the rule it breaks."""
    if p.distribution == "categorical":
        for allowed in p.values:  # True is not 1 here, though Python says so
            if allowed == value and isinstance(allowed, bool) == isinstance(value, bool):
                return allowed, None
        return None, f"must be among its values {list(p.values)}"
    if isinstance(value, str):  # YAML 1.1 reads 1e-4 as a string
        try:
            value = float(value)
        except ValueError:
            pass
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None, "must be a finite number"
    s = p.shape
    tolerance = 1e-9 * max(1.0, abs(value))
    if s.low is not None and value < s.low - tolerance or s.high is not None and value > s.high + tolerance:
        return None, f"must be inside its range [{s.low:g}, {s.high:g}]"
    if s.base in ("loguniform", "lognormal") and value <= 0:
        return None, "must be > 0 (its law is over positive numbers)"
    if s.q is not None:
        steps = value / s.q
        if abs(steps - round(steps)) > 1e-6:
            integral = p.distribution == "int_uniform"
            return None, "must be an integer" if integral else f"must be a multiple of q={s.q:g}"
        return round_to_q(round(steps) * s.q, s.q), None
    if s.low is not None and s.high is not None:
        value = min(max(value, s.low), s.high)
    return float(value), None
