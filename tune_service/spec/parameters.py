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

import functools
import math
from dataclasses import dataclass
from typing import Any, Sequence


#: Every distribution of the W&B grammar.
DISTRIBUTIONS = (
    "constant",
    "categorical",
    "uniform",
    "int_uniform",
    "q_uniform",
    "log_uniform",
    "q_log_uniform",
    "log_uniform_values",
    "q_log_uniform_values",
    "inv_log_uniform",
    "inv_log_uniform_values",
    "normal",
    "q_normal",
    "log_normal",
    "q_log_normal",
    "beta",
    "q_beta",
)
#: W&B forms whose bounds are natural-log exponents; W&B deprecates them for the ``_values`` forms.
EXPONENT_FORMS = {
    "log_uniform": "log_uniform_values",
    "q_log_uniform": "q_log_uniform_values",
    "inv_log_uniform": "inv_log_uniform_values",
}
RANGE_FORMS = (
    "uniform",
    "int_uniform",
    "q_uniform",
    "log_uniform",
    "q_log_uniform",
    "log_uniform_values",
    "q_log_uniform_values",
    "inv_log_uniform",
    "inv_log_uniform_values",
)
NORMAL_FORMS = ("normal", "q_normal", "log_normal", "q_log_normal")
BETA_FORMS = ("beta", "q_beta")
POSITIVE_BOUNDS = ("log_uniform_values", "q_log_uniform_values", "inv_log_uniform_values", "log_normal", "q_log_normal")
PARAMETER_KEYS = (
    "value",
    "values",
    "probabilities",
    "distribution",
    "min",
    "max",
    "q",
    "mu",
    "sigma",
    "a",
    "b",
    "when",
    "parameters",
)
FORM_KEYS = {
    **{d: ("min", "max") for d in RANGE_FORMS},
    **{d: ("mu", "sigma", "min", "max") for d in NORMAL_FORMS},
    **{d: ("a", "b") for d in BETA_FORMS},
    "constant": ("value",),
    "categorical": ("values", "probabilities"),
}


@dataclass(frozen=True)
class LinearLaw:
    """The uniform law on [``low``, ``high``], or with ``log`` the log-uniform one (uniform in log space),
    as ``scipy.stats.uniform`` and ``scipy.stats.loguniform`` compute them."""

    low: float
    high: float
    log: bool = False

    def _scale(self, x):
        import numpy as np  # here: the spec layer is imported by `tune-run --help`

        return np.log(x) if self.log else np.asarray(x, dtype=float)

    def cdf(self, x):
        import numpy as np

        low, high = self._scale(self.low), self._scale(self.high)
        return np.clip((self._scale(x) - low) / (high - low), 0.0, 1.0)

    def ppf(self, q):
        import numpy as np

        low, high = self._scale(self.low), self._scale(self.high)
        x = low + np.asarray(q, dtype=float) * (high - low)
        return np.exp(x) if self.log else x


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

    def law(self):
        """The untruncated continuous law, with ``cdf`` and ``ppf`` over numbers and numpy arrays: a
        :class:`LinearLaw` for the uniform and log-uniform laws, else a frozen ``scipy.stats``
        distribution. (scipy.stats takes 1.2 s to import, and the random searcher's first suggestion
        comes before any trial can start.) One law per shape: freezing a scipy distribution takes 0.6 ms,
        more than sampling from it, and the random searcher asks at every suggestion."""
        return _law(self)


@functools.lru_cache(maxsize=1024)
def _law(shape: Shape):
    if shape.base in ("uniform", "loguniform"):
        assert shape.low is not None and shape.high is not None  # only range forms have these laws
        return LinearLaw(shape.low, shape.high, log=shape.base == "loguniform")
    from scipy import stats

    if shape.base == "normal":
        return stats.norm(shape.mu, shape.sigma)
    if shape.base == "lognormal":
        return stats.lognorm(s=shape.sigma, scale=math.exp(shape.mu))
    return stats.beta(shape.a, shape.b)


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
            assert lo is not None and hi is not None  # a range form: both bounds (parameter_reading)
            return Shape("loguniform", math.exp(lo), math.exp(hi), q=q)
        if d == "inv_log_uniform":
            assert lo is not None and hi is not None  # a range form: both bounds (parameter_reading)
            return Shape("loguniform", math.exp(-hi), math.exp(-lo), q=q)
        if d in NORMAL_FORMS:
            return Shape("lognormal" if "log" in d else "normal", lo, hi, mu=self.mu, sigma=self.sigma, q=q)
        if d in BETA_FORMS:
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
            law = {
                "uniform": "uniform",
                "loguniform": "log-uniform",
                "normal": f"normal(mu={s.mu:g}, sigma={s.sigma:g})",
                "lognormal": f"exp(normal(mu={s.mu:g}, sigma={s.sigma:g}))",
                "beta": f"beta(a={s.a:g}, b={s.b:g})",
            }[s.base]
            bounds = f" on [{s.low:g}, {s.high:g}]" if s.bounded else ""
            q = ""
            if s.q is not None:
                q = (
                    ", every integer equally likely"
                    if d == "int_uniform"
                    else f", multiples of {s.q:g}{' equally likely' if s.equal_mass else ''}"
                )
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


def multiples(shape: Shape) -> list:
    """Every multiple of ``shape.q`` in [low, high], smallest first (ints when ``q`` is integral)."""
    assert shape.low is not None and shape.high is not None and shape.q is not None, "a bounded, quantized shape"
    first = math.ceil(shape.low / shape.q - 1e-9)
    last = math.floor(shape.high / shape.q + 1e-9)
    return [round_to_q(k * shape.q, shape.q) for k in range(first, last + 1)]


def round_to_q(x: float, q: float) -> float | int:
    """A multiple of q as an int when q is integral, else rounded to q's decimals (0.1*3 -> 0.3)."""
    if float(q).is_integer():
        return int(round(x))
    decimals = max(0, -math.floor(math.log10(abs(q)))) + 6
    return round(x, decimals)
