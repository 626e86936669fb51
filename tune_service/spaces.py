"""Parameter specs -> each searcher's native search space, built directly rather than through Ray's
converters (which drop quantization, bias integer ends and hand back numpy scalars).

- ``tune_domains``: Ray Tune domains, for random search.
- ``grid_points``: every point of a grid, enumerated here so ``run_cap`` can cap it.
- ``hyperopt_space``: a hyperopt space, for TPE.
- ``config_space``: a ConfigSpace, for BOHB.

All bounds are inclusive, as in the W&B grammar. A form a searcher cannot express is refused with a
:class:`SpecError` naming the parameter, the reason and the alternatives. ``plain`` turns whatever a
searcher samples into plain Python values, so every config is JSON-serialisable.
"""

from __future__ import annotations

import itertools
import math
from typing import Any, Iterable

from tune_service.errors import Problem, SpecError
from tune_service.spec import ParameterSpec

#: A quantized range with more grid points than this is refused for grid search and BOHB.
MAX_ENUMERATED_VALUES = 10_000


def plain(value: Any) -> Any:
    """Recursively convert numpy scalars, tuples and other containers to plain JSON-able Python."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if hasattr(value, "item") and callable(value.item) and type(value).__module__ == "numpy":
        return value.item()
    return value


def quantized_values(p: ParameterSpec) -> list:
    """Every value a ``q_*`` or ``int_uniform`` parameter can take, smallest first."""
    if p.distribution == "int_uniform":
        values = list(range(int(p.min), int(p.max) + 1))
    elif p.distribution in ("q_uniform", "q_log_uniform_values"):
        first = math.ceil(p.min / p.q - 1e-9)
        last = math.floor(p.max / p.q + 1e-9)
        values = [_round_q(k * p.q, p.q) for k in range(first, last + 1)]
    else:
        raise ValueError(p.distribution)
    if not values:
        raise SpecError([Problem(f"parameters.{p.name}", f"no multiple of q={p.q} lies in [{p.min}, {p.max}]")])
    return values


def _round_q(x: float, q: float) -> float | int:
    """A multiple of q as an int when q is integral, else rounded to q's decimals (0.1*3 -> 0.3)."""
    if float(q).is_integer():
        return int(round(x))
    decimals = max(0, -math.floor(math.log10(abs(q)))) + 6
    return round(x, decimals)


def _refuse(p: ParameterSpec, searcher: str, reason: str, alternatives: str) -> SpecError:
    return SpecError([Problem(f"parameters.{p.name}", f"{searcher} cannot sample {p.distribution}: {reason}; {alternatives}")])


# -- random search: Ray Tune domains ----------------------------------------------------------------


def tune_domains(params: Iterable[ParameterSpec]) -> dict[str, Any]:
    """A Ray Tune ``param_space`` for random search (BasicVariantGenerator)."""
    from ray import tune

    space: dict[str, Any] = {}
    for p in params:
        d = p.distribution
        if d == "constant":
            space[p.name] = p.value
        elif d == "categorical":
            if p.probabilities:
                space[p.name] = tune.sample_from(_weighted_choice(p.values, p.probabilities))
            else:
                space[p.name] = tune.choice(list(p.values))
        elif d == "uniform":
            space[p.name] = tune.uniform(p.min, p.max)
        elif d == "int_uniform":
            space[p.name] = tune.randint(p.min, p.max + 1)  # randint's upper end is exclusive
        elif d == "log_uniform_values":
            space[p.name] = tune.loguniform(p.min, p.max)
        elif d == "log_uniform":
            space[p.name] = tune.loguniform(math.exp(p.min), math.exp(p.max))
        elif d in ("q_uniform", "q_log_uniform_values"):
            space[p.name] = tune.choice(quantized_values(p)) if d == "q_uniform" else \
                tune.sample_from(_quantized_log(p))
        else:  # pragma: no cover - spec validation admits only known distributions
            raise ValueError(d)
    return space


class _weighted_choice:
    """A picklable sampler for ``values`` with ``probabilities`` under random search."""

    def __init__(self, values, probabilities):
        self.values, self.probabilities = list(values), list(probabilities)

    def __call__(self, _spec=None):
        import numpy as np

        return self.values[int(np.random.choice(len(self.values), p=self.probabilities))]


class _quantized_log:
    """A picklable sampler: log-uniform in [min, max], rounded to a multiple of q inside the bounds."""

    def __init__(self, p: ParameterSpec):
        self.values = quantized_values(p)
        self.lo, self.hi, self.q = p.min, p.max, p.q

    def __call__(self, _spec=None):
        import numpy as np

        x = math.exp(np.random.uniform(math.log(self.lo), math.log(self.hi)))
        k = min(range(len(self.values)), key=lambda i: abs(self.values[i] - x))
        return self.values[k]


# -- grid search ------------------------------------------------------------------------------------


def grid_points(params: Iterable[ParameterSpec]) -> list[dict[str, Any]]:
    """Every combination of the grid, in file order (the last parameter varies fastest)."""
    axes: list[tuple[str, list]] = []
    for p in params:
        d = p.distribution
        if d == "constant":
            axes.append((p.name, [p.value]))
        elif d == "categorical":
            axes.append((p.name, list(p.values)))
        elif d in ("int_uniform", "q_uniform", "q_log_uniform_values"):
            values = quantized_values(p)
            if len(values) > MAX_ENUMERATED_VALUES:
                raise _refuse(p, "grid", f"{len(values)} grid values is too many", "narrow the range or raise q")
            axes.append((p.name, values))
        else:
            raise _refuse(p, "grid", "a continuous range has no finite grid",
                          "list the points with `values: [...]`, use q_uniform, or use method random, bayes or bohb")
    names = [name for name, _ in axes]
    return [dict(zip(names, combo)) for combo in itertools.product(*(values for _, values in axes))]


# -- hyperopt (TPE) ---------------------------------------------------------------------------------


def hyperopt_space(params: Iterable[ParameterSpec]) -> dict[str, Any]:
    """A native hyperopt space. Integer ranges give every integer in [min, max] the same mass
    (hyperopt's own ``uniformint`` gives the two ends half as much)."""
    from hyperopt import hp
    from hyperopt.pyll import scope

    space: dict[str, Any] = {}
    for p in params:
        d, n = p.distribution, p.name
        if d == "constant":
            space[n] = p.value
        elif d == "categorical":
            if p.probabilities:
                space[n] = hp.pchoice(n, list(zip(p.probabilities, p.values)))
            else:
                space[n] = hp.choice(n, list(p.values))
        elif d == "uniform":
            space[n] = hp.uniform(n, p.min, p.max)
        elif d == "int_uniform":
            space[n] = scope.int(hp.quniform(n, p.min - 0.4999, p.max + 0.4999, 1))
        elif d == "log_uniform_values":
            space[n] = hp.loguniform(n, math.log(p.min), math.log(p.max))
        elif d == "log_uniform":
            space[n] = hp.loguniform(n, p.min, p.max)
        elif d in ("q_uniform", "q_log_uniform_values"):
            # hyperopt's quniform rounds past the bounds (q_uniform 0..1, q=0.3 can give 1.2);
            # choosing among the exact multiples keeps every value inside [min, max].
            space[n] = hp.choice(n, quantized_values(p))
        else:  # pragma: no cover
            raise ValueError(d)
    return space


# -- BOHB (ConfigSpace) -----------------------------------------------------------------------------

_CS_SCALARS = (str, int, float, bool)


def config_space(params: Iterable[ParameterSpec], seed: int):
    """A native ConfigSpace for BOHB. Quantized ranges become ordinal hyperparameters of their exact
    values (ConfigSpace 1.x has no ``q``, and Ray's converter silently drops it)."""
    import ConfigSpace as CS

    cs = CS.ConfigurationSpace(seed=seed)
    for p in params:
        d, n = p.distribution, p.name
        if d == "constant":
            if not isinstance(p.value, _CS_SCALARS):
                raise _refuse(p, "bohb", "ConfigSpace constants must be scalars", "use a scalar value")
            hp = CS.Constant(n, p.value)
        elif d == "categorical":
            if not all(isinstance(v, _CS_SCALARS) for v in p.values):
                raise _refuse(p, "bohb", "ConfigSpace choices must be scalars", "use scalar values")
            hp = CS.CategoricalHyperparameter(n, list(p.values), weights=list(p.probabilities) if p.probabilities else None)
        elif d == "uniform":
            hp = CS.UniformFloatHyperparameter(n, p.min, p.max)
        elif d == "int_uniform":
            hp = CS.UniformIntegerHyperparameter(n, p.min, p.max)
        elif d == "log_uniform_values":
            hp = CS.UniformFloatHyperparameter(n, p.min, p.max, log=True)
        elif d == "log_uniform":
            hp = CS.UniformFloatHyperparameter(n, math.exp(p.min), math.exp(p.max), log=True)
        elif d in ("q_uniform", "q_log_uniform_values"):
            values = quantized_values(p)
            if len(values) > MAX_ENUMERATED_VALUES:
                raise _refuse(p, "bohb", f"{len(values)} quantized values is too many", "narrow the range or raise q")
            hp = CS.OrdinalHyperparameter(n, values)
        else:  # pragma: no cover
            raise ValueError(d)
        cs.add(hp)
    return cs
