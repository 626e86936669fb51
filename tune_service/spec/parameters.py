"""The ``parameters:`` block of a sweep spec: the whole W&B parameter grammar, plus conditions.

Every parameter resolves to a :class:`ParameterSpec` whose :attr:`~ParameterSpec.shape` says exactly
what it samples, in one vocabulary that every searcher's space is built from (:mod:`tune_service.search.spaces`):

=========================  =====================================================================
form                       what it samples (bounds inclusive)
=========================  =====================================================================
``value``/constant         that value
``values``/categorical     one of the values, equally likely or with ``probabilities``
uniform                    uniform on [min, max] (bare float ``min``/``max`` mean this)
int_uniform                every integer in [min, max] equally likely (bare int ``min``/``max``)
q_uniform                  every multiple of ``q`` in [min, max] equally likely
log_uniform_values         log-uniform on [min, max]
log_uniform                log-uniform on [exp(min), exp(max)] (W&B deprecates this form)
inv_log_uniform_values     X with log(1/X) uniform on [log(1/max), log(1/min)]: log-uniform on [min, max]
inv_log_uniform            X with log(1/X) uniform on [min, max]: log-uniform on [exp(-max), exp(-min)]
normal / log_normal        N(mu, sigma) / exp(N(mu, sigma)), truncated to [min, max] when given
beta                       Beta(a, b) on [0, 1]
q_<form>                   the form, rounded to the nearest multiple of ``q`` in its bounds
=========================  =====================================================================

``q`` defaults to 1; an integral ``q`` gives ints. A ``parameters:`` group nests, and a dotted name
(``optimizer.lr``) is the same as a group: either way the trial's config is nested. ``when: {optimizer:
sgd}`` (or a list of values) samples a parameter only when an earlier ``values`` parameter has one of
those values; otherwise the parameter is absent from the trial's config. Conditions chain (the earlier
parameter may have its own ``when``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from tune_service.errors import nearest

#: Every distribution of the W&B grammar.
DISTRIBUTIONS = (
    "constant", "categorical", "uniform", "int_uniform", "q_uniform", "log_uniform", "q_log_uniform",
    "log_uniform_values", "q_log_uniform_values", "inv_log_uniform", "inv_log_uniform_values",
    "normal", "q_normal", "log_normal", "q_log_normal", "beta", "q_beta",
)
#: W&B forms whose bounds are natural-log exponents; W&B deprecates them for the ``_values`` forms.
EXPONENT_FORMS = {"log_uniform": "log_uniform_values", "q_log_uniform": "q_log_uniform_values",
                  "inv_log_uniform": "inv_log_uniform_values"}
_RANGE_FORMS = ("uniform", "int_uniform", "q_uniform", "log_uniform", "q_log_uniform", "log_uniform_values",
                "q_log_uniform_values", "inv_log_uniform", "inv_log_uniform_values")
_NORMAL_FORMS = ("normal", "q_normal", "log_normal", "q_log_normal")
_BETA_FORMS = ("beta", "q_beta")
_POSITIVE_BOUNDS = ("log_uniform_values", "q_log_uniform_values", "inv_log_uniform_values", "log_normal",
                    "q_log_normal")
PARAMETER_KEYS = ("value", "values", "probabilities", "distribution", "min", "max", "q", "mu", "sigma",
                  "a", "b", "when", "parameters")
_FORM_KEYS = {
    **{d: ("min", "max") for d in _RANGE_FORMS},
    **{d: ("mu", "sigma", "min", "max") for d in _NORMAL_FORMS},
    **{d: ("a", "b") for d in _BETA_FORMS},
    "constant": ("value",), "categorical": ("values", "probabilities"),
}


@dataclass(frozen=True)
class Shape:
    """What a numeric parameter samples, in the terms every searcher needs.

    ``base`` is the continuous law (``uniform``, ``loguniform``, ``normal``, ``lognormal``, ``beta``)
    restricted to [``low``, ``high``] (``None``: unbounded). With ``q``, the value is rounded to the nearest
    multiple of ``q`` inside the bounds; ``equal_mass`` instead makes every multiple equally likely
    (``int_uniform`` and ``q_uniform``, so that the ends come up as often as the middle).
    """

    base: str
    low: float | None
    high: float | None
    mu: float = 0.0
    sigma: float = 1.0
    a: float = 1.0
    b: float = 1.0
    q: float | None = None
    equal_mass: bool = False

    @property
    def bounded(self) -> bool:
        return self.low is not None and self.high is not None

    @property
    def integral(self) -> bool:
        """Values are ints: quantized by an integral ``q``."""
        return self.q is not None and float(self.q).is_integer()

    def scipy(self):
        """The untruncated continuous law as a frozen ``scipy.stats`` distribution."""
        from scipy import stats

        if self.base == "uniform":
            return stats.uniform(self.low, self.high - self.low)
        if self.base == "loguniform":
            return stats.loguniform(self.low, self.high)
        if self.base == "normal":
            return stats.norm(self.mu, self.sigma)
        if self.base == "lognormal":
            return stats.lognorm(s=self.sigma, scale=math.exp(self.mu))
        return stats.beta(self.a, self.b)


@dataclass(frozen=True)
class ParameterSpec:
    """One searched (or fixed) hyperparameter, as the spec file declares it.

    ``name`` is the full dotted name (``optimizer.lr`` for ``lr`` in an ``optimizer`` group).
    ``distribution`` is always resolved (``value:`` gives ``constant``, ``values:`` ``categorical``, bare
    ``min``/``max`` ``int_uniform`` or ``uniform``). ``when`` holds at most one ``(parameter, allowed values)`` pair
    that must hold for this parameter to be sampled.
    """

    name: str
    distribution: str
    value: Any = None
    values: tuple = ()
    probabilities: tuple | None = None
    min: float | int | None = None
    max: float | int | None = None
    q: float | int | None = None
    mu: float = 0.0
    sigma: float = 1.0
    a: float = 1.0
    b: float = 1.0
    when: tuple[tuple[str, tuple], ...] = ()

    @property
    def is_searched(self) -> bool:
        return self.distribution != "constant"

    @property
    def shape(self) -> Shape:
        """The numeric law this parameter samples (not for constant or categorical)."""
        d, lo, hi = self.distribution, self.min, self.max
        q = self.q if d.startswith("q_") else (1 if d == "int_uniform" else None)
        equal = d in ("int_uniform", "q_uniform")
        if d in ("uniform", "int_uniform", "q_uniform"):
            return Shape("uniform", lo, hi, q=q, equal_mass=equal)
        if d in ("log_uniform_values", "q_log_uniform_values", "inv_log_uniform_values"):
            return Shape("loguniform", lo, hi, q=q)
        if d in ("log_uniform", "q_log_uniform"):
            return Shape("loguniform", math.exp(lo), math.exp(hi), q=q)
        if d == "inv_log_uniform":
            return Shape("loguniform", math.exp(-hi), math.exp(-lo), q=q)
        if d in _NORMAL_FORMS:
            return Shape("lognormal" if "log" in d else "normal", lo, hi, mu=self.mu, sigma=self.sigma, q=q)
        if d in _BETA_FORMS:
            return Shape("beta", 0.0, 1.0, a=self.a, b=self.b, q=q)
        raise ValueError(f"{d} has no numeric shape")

    def active(self, config: dict[str, Any]) -> bool:
        """Whether this parameter is sampled, given the (flat) values sampled before it."""
        return all(parent in config and config[parent] in allowed for parent, allowed in self.when)

    def describe(self) -> str:
        """A one-line human description, as ``--dry-run`` prints it."""
        d = self.distribution
        if d == "constant":
            text = f"constant {self.value!r}"
        elif d == "categorical":
            weights = f" p={list(self.probabilities)}" if self.probabilities else ""
            text = f"categorical {list(self.values)}{weights}"
        else:
            s = self.shape
            law = {"uniform": "uniform", "loguniform": "log-uniform", "normal": f"normal(mu={s.mu:g}, sigma={s.sigma:g})",
                   "lognormal": f"exp(normal(mu={s.mu:g}, sigma={s.sigma:g}))",
                   "beta": f"beta(a={s.a:g}, b={s.b:g})"}[s.base]
            bounds = f" on [{s.low:g}, {s.high:g}]" if s.bounded else ""
            q = ""
            if s.q is not None:
                q = ", every integer equally likely" if d == "int_uniform" else \
                    f", multiples of {s.q:g}{' equally likely' if s.equal_mass else ''}"
            text = f"{d}: {law}{bounds}{q}"
        if self.when:
            text += "  when " + " and ".join(f"{k} in {list(v)}" for k, v in self.when)
        return text


def flat_names(specs: Sequence[ParameterSpec]) -> frozenset[str]:
    """Dotted names that a trial receives as one flat key, as W&B passes every name, rather than
    nested: those under a name that is itself a parameter (Hydra-style ``optimizer`` beside
    ``optimizer.config.lr``), which could not nest."""
    names = {p.name for p in specs}
    return frozenset(n for n in names if any(n.rsplit(".", i)[0] in names for i in range(1, n.count(".") + 1)))


def parse_parameters(raw: Any, fail: Callable[[str, str], None], note: Callable[[str], None],
                     number: Callable[[str, Any], float | int | None]) -> tuple[ParameterSpec, ...]:
    """Validate a ``parameters:`` mapping into flat, dotted :class:`ParameterSpec` s in file order.

    ``fail(path, message)`` records a problem, ``note(text)`` a remark for the plan, and
    ``number(path, value)`` reads a finite number (recording a problem and returning None otherwise).
    """
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        fail("parameters", f"must be a mapping of parameter names to their spec, got {raw!r}")
        return ()
    reader = _ParameterReader(fail, note, number)
    reader.group("parameters", "", raw)
    reader.check_names()
    reader.check_conditions()
    return tuple(reader.specs)


class _ParameterReader:
    def __init__(self, fail, note, number):
        self.fail, self.note, self.number = fail, note, number
        self.specs: list[ParameterSpec] = []

    def group(self, path: str, prefix: str, raw: dict) -> None:
        for key, body in raw.items():
            name = f"{prefix}{key}"
            where = f"{path}.{key}"
            if isinstance(body, dict) and "parameters" in body:
                extra = [k for k in body if k != "parameters"]
                if extra:
                    self.fail(f"{where}.{extra[0]}", "a `parameters:` group takes no other keys, got "
                                                     f"{extra[0]!r}")
                elif not isinstance(body["parameters"], dict) or not body["parameters"]:
                    self.fail(f"{where}.parameters", f"must be a non-empty mapping, got {body['parameters']!r}")
                else:
                    self.group(f"{where}.parameters", f"{name}.", body["parameters"])
                continue
            spec = self.parameter(where, name, body)
            if spec is not None:
                self.specs.append(spec)

    def parameter(self, path: str, name: str, body: Any) -> ParameterSpec | None:
        if not isinstance(body, dict):
            self.fail(path, f"must be a mapping such as {{value: ...}}, {{values: [...]}} or "
                            f"{{distribution: ..., min: ..., max: ...}}, got {body!r}")
            return None
        unknown = [k for k in body if k not in PARAMETER_KEYS]
        if unknown:
            for key in unknown:
                self.fail(f"{path}.{key}", f"unknown key{nearest(key, PARAMETER_KEYS)}; valid keys: "
                                           f"{', '.join(PARAMETER_KEYS)}")
            return None  # its other problems would only echo the misspelt key
        distribution = body.get("distribution")
        if distribution is None:
            distribution = self.infer(path, body)
            if distribution is None:
                return None
        elif distribution not in DISTRIBUTIONS:
            self.fail(f"{path}.distribution", f"must be one of {', '.join(DISTRIBUTIONS)}, got "
                                              f"{distribution!r}{nearest(distribution, DISTRIBUTIONS)}")
            return None
        allowed = (*_FORM_KEYS[distribution], *(("q",) if distribution.startswith("q_") else ()), "distribution", "when")
        stray = [k for k in body if k not in allowed]
        if stray:
            self.fail(f"{path}.{stray[0]}", f"does not apply to {distribution}; its keys are {', '.join(allowed)}")
            return None
        when = self.condition(f"{path}.when", body.get("when"))
        if when is None:
            return None
        if distribution == "constant":
            if "value" not in body:
                self.fail(path, "constant needs `value`")
                return None
            return ParameterSpec(name, "constant", value=body["value"], when=when)
        if distribution == "categorical":
            return self.categorical(path, name, body, when)
        return self.numeric(path, name, distribution, body, when)

    def infer(self, path: str, body: dict) -> str | None:
        if "value" in body:
            return "constant"
        if "values" in body:
            return "categorical"
        if "min" in body and "max" in body:
            ints = all(isinstance(body[k], int) and not isinstance(body[k], bool) for k in ("min", "max"))
            return "int_uniform" if ints else "uniform"
        self.fail(path, f"must give `value`, `values`, or `min` and `max` (with an optional `distribution`), "
                        f"got {body!r}")
        return None

    def condition(self, path: str, raw: Any) -> tuple | None:
        if raw is None:
            return ()
        if not isinstance(raw, dict) or len(raw) != 1:
            self.fail(path, f"must map one earlier parameter to a value or a list of values, such as "
                            f"{{optimizer: sgd}}, got {raw!r}")
            return None
        return tuple((str(k), tuple(v) if isinstance(v, list) else (v,)) for k, v in raw.items())

    def categorical(self, path: str, name: str, body: dict, when: tuple) -> ParameterSpec | None:
        values = body.get("values")
        if not isinstance(values, list) or not values:
            self.fail(f"{path}.values", f"must be a non-empty list, got {values!r}")
            return None
        probabilities = body.get("probabilities")
        if probabilities is not None:
            if not isinstance(probabilities, list) or len(probabilities) != len(values):
                self.fail(f"{path}.probabilities", f"must be a list of {len(values)} numbers, one per value, "
                                                   f"got {probabilities!r}")
                return None
            numbers = [self.number(f"{path}.probabilities", p) for p in probabilities]
            if None in numbers:
                return None
            if any(p < 0 for p in numbers) or not math.isclose(sum(numbers), 1.0, abs_tol=1e-6):
                self.fail(f"{path}.probabilities", f"must be >= 0 and sum to 1, got {probabilities!r} "
                                                   f"(sum {sum(numbers):g})")
                return None
            probabilities = tuple(float(p) for p in numbers)
        return ParameterSpec(name, "categorical", values=tuple(values), probabilities=probabilities, when=when)

    def numeric(self, path: str, name: str, d: str, body: dict, when: tuple) -> ParameterSpec | None:
        if d in _RANGE_FORMS:
            missing = [k for k in ("min", "max") if k not in body]
            if missing:
                self.fail(path, f"{d} needs {' and '.join(missing)}")
                return None
        elif d in _NORMAL_FORMS and ("min" in body) != ("max" in body):
            self.fail(path, f"{d} takes both min and max (a truncated {d}) or neither")
            return None
        read = {k: self.number(f"{path}.{k}", body[k]) for k in ("min", "max", "q", "mu", "sigma", "a", "b") if k in body}
        if None in read.values():
            return None
        lo, hi = read.get("min"), read.get("max")
        for key in ("q", "sigma", "a", "b"):
            if read.get(key, 1) <= 0:
                self.fail(f"{path}.{key}", f"must be > 0, got {read[key]}")
                return None
        if d == "int_uniform":
            for key, v in (("min", lo), ("max", hi)):
                if not float(v).is_integer():
                    self.fail(f"{path}.{key}", f"must be an integer for int_uniform, got {v}")
                    return None
            lo, hi = int(lo), int(hi)
        if lo is not None and lo > hi:
            self.fail(f"{path}.min", f"must be <= max ({hi}), got {lo}")
            return None
        if d in _POSITIVE_BOUNDS and lo is not None and lo <= 0:
            self.fail(f"{path}.min", f"must be > 0 for {d}, got {lo}")
            return None
        if d in EXPONENT_FORMS:
            self.note(f"parameters.{name}: {d} takes natural-log exponents (W&B deprecates it for "
                      f"{EXPONENT_FORMS[d]}, which takes the values)")
        q = read.get("q", 1) if d.startswith("q_") else None
        spec = ParameterSpec(name, d, min=lo, max=hi, q=q, mu=read.get("mu", 0.0), sigma=read.get("sigma", 1.0),
                             a=read.get("a", 1.0), b=read.get("b", 1.0), when=when)
        if q is not None and spec.shape.bounded and not multiples(spec.shape):
            self.fail(f"{path}.q", f"no multiple of q={q} lies in [{spec.shape.low:g}, {spec.shape.high:g}]")
            return None
        return spec

    def check_names(self) -> None:
        """Names must not collide once nested (``a`` and ``a.b`` cannot both be set)."""
        names = [p.name for p in self.specs]
        seen: set[str] = set()
        for p in self.specs:
            if p.name in seen:
                self.fail(f"parameters.{p.name}", "is declared twice (as a dotted name and in a group)")
            seen.add(p.name)
            prefixes = {p.name.rsplit(".", i)[0] for i in range(1, p.name.count(".") + 1)}
            for clash in sorted(prefixes & set(names)):
                self.note(f"parameters.{p.name}: kept as one flat key, as W&B passes it, since {clash!r} is "
                          f"itself a parameter")

    def check_conditions(self) -> None:
        """Each condition names an earlier categorical (or constant) parameter and values it can take."""
        earlier: dict[str, ParameterSpec] = {}
        kept = []
        for p in self.specs:
            ok = True
            for parent, allowed in p.when:
                where = f"parameters.{p.name}.when.{parent}"
                source = earlier.get(parent)
                if source is None:
                    later = any(q.name == parent for q in self.specs)
                    self.fail(where, f"must name a parameter declared before this one, got {parent!r}" if later
                              else f"must name an earlier parameter, got {parent!r}{nearest(parent, list(earlier))}")
                    ok = False
                elif source.distribution not in ("categorical", "constant"):
                    self.fail(where, f"must name a `values` parameter, got {parent!r} ({source.distribution})")
                    ok = False
                else:
                    choices = source.values if source.distribution == "categorical" else (source.value,)
                    missing = [v for v in allowed if v not in choices]
                    if missing:
                        self.fail(where, f"must be among {parent}'s values {list(choices)}, got {missing[0]!r}")
                        ok = False
            earlier[p.name] = p
            if ok:
                kept.append(p)
        self.specs = kept


def multiples(shape: Shape) -> list:
    """Every multiple of ``shape.q`` in [low, high], smallest first (ints when ``q`` is integral)."""
    first = math.ceil(shape.low / shape.q - 1e-9)
    last = math.floor(shape.high / shape.q + 1e-9)
    return [round_to_q(k * shape.q, shape.q) for k in range(first, last + 1)]


def round_to_q(x: float, q: float) -> float | int:
    """A multiple of q as an int when q is integral, else rounded to q's decimals (0.1*3 -> 0.3)."""
    if float(q).is_integer():
        return int(round(x))
    decimals = max(0, -math.floor(math.log10(abs(q)))) + 6
    return round(x, decimals)
