"""Reading the ``parameters:`` block into :class:`~tune_service.spec.parameters.ParameterSpec` s: each
parameter's form and keys (one at a time), then the rules across parameters (names that collide once
nested, conditions on earlier parameters). The grammar itself is :mod:`tune_service.spec.parameters`.
"""

from __future__ import annotations

import math
from typing import Any

from tune_service.errors import nearest
from tune_service.spec.parameters import (
    DISTRIBUTIONS,
    EXPONENT_FORMS,
    FORM_KEYS,
    NORMAL_FORMS,
    PARAMETER_KEYS,
    POSITIVE_BOUNDS,
    RANGE_FORMS,
    ParameterSpec,
    multiples,
)
from tune_service.spec.rules import Checker


def read_parameters(check: Checker, raw: Any) -> tuple[ParameterSpec, ...]:
    """A ``parameters:`` mapping as flat, dotted :class:`ParameterSpec` s in file order; each problem is
    reported through ``check`` (a parameter with one is left out)."""
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        check.fail("parameters", f"must be a mapping of parameter names to their spec, got {raw!r}")
        return ()
    specs: list[ParameterSpec] = []
    _group(check, "parameters", "", raw, specs)
    _check_names(check, specs)
    return tuple(_with_conditions_that_hold(check, specs))


def _group(check: Checker, path: str, prefix: str, raw: dict, specs: list[ParameterSpec]) -> None:
    for key, body in raw.items():
        name = f"{prefix}{key}"
        where = f"{path}.{key}"
        if isinstance(body, dict) and "parameters" in body:
            extra = [k for k in body if k != "parameters"]
            if extra:
                check.fail(f"{where}.{extra[0]}", f"a `parameters:` group takes no other keys, got {extra[0]!r}")
            elif not isinstance(body["parameters"], dict) or not body["parameters"]:
                check.fail(f"{where}.parameters", f"must be a non-empty mapping, got {body['parameters']!r}")
            else:
                _group(check, f"{where}.parameters", f"{name}.", body["parameters"], specs)
            continue
        spec = _parameter(check, where, name, body)
        if spec is not None:
            specs.append(spec)


def _parameter(check: Checker, path: str, name: str, body: Any) -> ParameterSpec | None:
    if not isinstance(body, dict):
        check.fail(
            path,
            f"must be a mapping such as {{value: ...}}, {{values: [...]}} or "
            f"{{distribution: ..., min: ..., max: ...}}, got {body!r}",
        )
        return None
    unknown = [k for k in body if k not in PARAMETER_KEYS]
    if unknown:
        for key in unknown:
            check.fail(
                f"{path}.{key}", f"unknown key{nearest(key, PARAMETER_KEYS)}; valid keys: {', '.join(PARAMETER_KEYS)}"
            )
        return None  # its other problems would only echo the misspelt key
    distribution = body.get("distribution")
    if distribution is None:
        distribution = _infer(check, path, body)
        if distribution is None:
            return None
    elif distribution not in DISTRIBUTIONS:
        check.fail(
            f"{path}.distribution",
            f"must be one of {', '.join(DISTRIBUTIONS)}, got {distribution!r}{nearest(distribution, DISTRIBUTIONS)}",
        )
        return None
    allowed = (*FORM_KEYS[distribution], *(("q",) if distribution.startswith("q_") else ()), "distribution", "when")
    stray = [k for k in body if k not in allowed]
    if stray:
        check.fail(f"{path}.{stray[0]}", f"does not apply to {distribution}; its keys are {', '.join(allowed)}")
        return None
    when = _condition(check, f"{path}.when", body.get("when"))
    if when is None:
        return None
    if distribution == "constant":
        if "value" not in body:
            check.fail(path, "constant needs `value`")
            return None
        return ParameterSpec(name, "constant", value=body["value"], when=when)
    if distribution == "categorical":
        return _categorical(check, path, name, body, when)
    return _numeric(check, path, name, distribution, body, when)


def _infer(check: Checker, path: str, body: dict) -> str | None:
    if "value" in body:
        return "constant"
    if "values" in body:
        return "categorical"
    if "min" in body and "max" in body:
        ints = all(isinstance(body[k], int) and not isinstance(body[k], bool) for k in ("min", "max"))
        return "int_uniform" if ints else "uniform"
    check.fail(path, f"must give `value`, `values`, or `min` and `max` (with an optional `distribution`), got {body!r}")
    return None


def _condition(check: Checker, path: str, raw: Any) -> tuple | None:
    if raw is None:
        return ()
    if not isinstance(raw, dict) or len(raw) != 1:
        check.fail(
            path,
            f"must map one earlier parameter to a value or a list of values, such as {{optimizer: sgd}}, got {raw!r}",
        )
        return None
    return tuple((str(k), tuple(v) if isinstance(v, list) else (v,)) for k, v in raw.items())


def _categorical(check: Checker, path: str, name: str, body: dict, when: tuple) -> ParameterSpec | None:
    values = body.get("values")
    if not isinstance(values, list) or not values:
        check.fail(f"{path}.values", f"must be a non-empty list, got {values!r}")
        return None
    probabilities = body.get("probabilities")
    if probabilities is not None:
        if not isinstance(probabilities, list) or len(probabilities) != len(values):
            check.fail(
                f"{path}.probabilities",
                f"must be a list of {len(values)} numbers, one per value, got {probabilities!r}",
            )
            return None
        read = [check.number(f"{path}.probabilities", p) for p in probabilities]
        numbers = [p for p in read if p is not None]
        if len(numbers) != len(read):
            return None
        if any(p < 0 for p in numbers) or not math.isclose(sum(numbers), 1.0, abs_tol=1e-6):
            check.fail(
                f"{path}.probabilities", f"must be >= 0 and sum to 1, got {probabilities!r} (sum {sum(numbers):g})"
            )
            return None
        probabilities = tuple(float(p) for p in numbers)
    return ParameterSpec(name, "categorical", values=tuple(values), probabilities=probabilities, when=when)


def _numeric(check: Checker, path: str, name: str, d: str, body: dict, when: tuple) -> ParameterSpec | None:
    if d in RANGE_FORMS:
        missing = [k for k in ("min", "max") if k not in body]
        if missing:
            check.fail(path, f"{d} needs {' and '.join(missing)}")
            return None
    elif d in NORMAL_FORMS and ("min" in body) != ("max" in body):
        check.fail(path, f"{d} takes both min and max (a truncated {d}) or neither")
        return None
    checked = {
        k: check.number(f"{path}.{k}", body[k]) for k in ("min", "max", "q", "mu", "sigma", "a", "b") if k in body
    }
    read = {k: v for k, v in checked.items() if v is not None}
    if len(read) != len(checked):
        return None
    lo, hi = read.get("min"), read.get("max")  # both or neither (the checks above and the form's keys)
    for key in ("q", "sigma", "a", "b"):
        if read.get(key, 1) <= 0:
            check.fail(f"{path}.{key}", f"must be > 0, got {read[key]}")
            return None
    if d == "int_uniform":
        for key in ("min", "max"):
            if not float(read[key]).is_integer():
                check.fail(f"{path}.{key}", f"must be an integer for int_uniform, got {read[key]}")
                return None
        lo, hi = int(read["min"]), int(read["max"])
    if lo is not None and hi is not None and lo > hi:
        check.fail(f"{path}.min", f"must be <= max ({hi}), got {lo}")
        return None
    if d in POSITIVE_BOUNDS and lo is not None and lo <= 0:
        check.fail(f"{path}.min", f"must be > 0 for {d}, got {lo}")
        return None
    if d in EXPONENT_FORMS:
        check.note(
            f"parameters.{name}: {d} takes natural-log exponents (W&B deprecates it for "
            f"{EXPONENT_FORMS[d]}, which takes the values)"
        )
    q = read.get("q", 1) if d.startswith("q_") else None
    spec = ParameterSpec(
        name,
        d,
        min=lo,
        max=hi,
        q=q,
        mu=read.get("mu", 0.0),
        sigma=read.get("sigma", 1.0),
        a=read.get("a", 1.0),
        b=read.get("b", 1.0),
        when=when,
    )
    if q is not None and spec.shape.bounded and not multiples(spec.shape):
        check.fail(f"{path}.q", f"no multiple of q={q} lies in [{spec.shape.low:g}, {spec.shape.high:g}]")
        return None
    return spec


def _check_names(check: Checker, specs: list[ParameterSpec]) -> None:
    """Names must not collide once nested (``a`` and ``a.b`` cannot both be set)."""
    names = [p.name for p in specs]
    seen: set[str] = set()
    for p in specs:
        if p.name in seen:
            check.fail(f"parameters.{p.name}", "is declared twice (as a dotted name and in a group)")
        seen.add(p.name)
        prefixes = {p.name.rsplit(".", i)[0] for i in range(1, p.name.count(".") + 1)}
        for clash in sorted(prefixes & set(names)):
            check.note(
                f"parameters.{p.name}: kept as one flat key, as W&B passes it, since {clash!r} is itself a parameter"
            )


def _with_conditions_that_hold(check: Checker, specs: list[ParameterSpec]) -> list[ParameterSpec]:
    """The parameters whose conditions each name an earlier categorical (or constant) parameter and values it
    can take; each broken condition is reported."""
    earlier: dict[str, ParameterSpec] = {}
    kept = []
    for p in specs:
        ok = True
        for parent, allowed in p.when:
            where = f"parameters.{p.name}.when.{parent}"
            source = earlier.get(parent)
            if source is None:
                later = any(q.name == parent for q in specs)
                check.fail(
                    where,
                    f"must name a parameter declared before this one, got {parent!r}"
                    if later
                    else f"must name an earlier parameter, got {parent!r}{nearest(parent, list(earlier))}",
                )
                ok = False
            elif source.distribution not in ("categorical", "constant"):
                check.fail(where, f"must name a `values` parameter, got {parent!r} ({source.distribution})")
                ok = False
            else:
                choices = source.values if source.distribution == "categorical" else (source.value,)
                missing = [v for v in allowed if v not in choices]
                if missing:
                    check.fail(where, f"must be among {parent}'s values {list(choices)}, got {missing[0]!r}")
                    ok = False
        earlier[p.name] = p
        if ok:
            kept.append(p)
    return kept
