"""Parameter specs -> each searcher's native search space, built directly rather than through Ray's
converters (which drop quantization, bias integer ends, ignore bounds and hand back numpy scalars).

- :func:`sample_flat`, :func:`sample_value`: one random draw, for random search (inverse-CDF sampling of the
  declared law).
- :func:`grid_points`, :func:`grid_size`: a grid's points, drawn one at a time, and how many run.
- :func:`hyperopt_space`: a hyperopt space for TPE, conditions as nested choices.
- :class:`OptunaSpace`: a define-by-run space for Optuna's TPE, conditions as questions not asked.
- :func:`native_points`: the spec's known points (``points_to_evaluate``) as each searcher suggests its own.
- :class:`Decoder`: what any searcher suggested -> the config a trial receives: plain Python values,
  constants added, inactive parameters absent, dotted names nested.

A form a searcher cannot express is refused with a :class:`SpecError` naming the parameter, the reason
and the alternatives, never approximated silently.
"""

from __future__ import annotations

import itertools
import math
from typing import Any, Iterable, Iterator, Mapping, Sequence

from tune_service.errors import Problem, SpecError
from tune_service.spec.configs import nest, plain
from tune_service.spec.parameters import ParameterSpec, flat_names, multiples, round_to_q

#: A quantized range with more values than this is refused where the values must be listed.
MAX_ENUMERATED_VALUES = 10_000
#: Prefix of the hyperopt keys that hold a conditional parameter's branches (never a parameter name).
_BRANCH = "__branch__:"


def support(p: ParameterSpec) -> list | None:
    """The finite list of values ``p`` can take, or ``None`` when it is continuous or unbounded."""
    if p.distribution == "constant":
        return [p.value]
    if p.distribution == "categorical":
        return list(p.values)
    s = p.shape
    if s.q is None or not s.bounded:
        return None
    return multiples(s)


def _finite_support(p: ParameterSpec) -> list:
    """:func:`support` of a parameter whose values are known to be finite."""
    values = support(p)
    assert values is not None, f"{p.name}: a continuous or unbounded parameter has no list of values"
    return values


def masses(p: ParameterSpec) -> list[float]:
    """The probability of each value of :func:`support` (which must be finite), as the spec declares it.

    Equal for ``values`` without probabilities, ``int_uniform`` and ``q_uniform``; otherwise each
    multiple of ``q`` gets the mass of the law between the midpoints to its neighbours (the bounds at
    the ends), so rounding to the nearest multiple inside the bounds is exactly what is sampled.
    """
    values = _finite_support(p)
    if p.distribution == "categorical" and p.probabilities:
        return list(p.probabilities)
    if p.distribution in ("categorical", "constant") or p.shape.equal_mass:
        return [1.0 / len(values)] * len(values)
    s = p.shape
    law = s.law()
    edges: list[float | None] = [s.low, *((a + b) / 2 for a, b in itertools.pairwise(values)), s.high]
    cdf = law.cdf(edges)
    total = cdf[-1] - cdf[0]
    return [float((hi - lo) / total) for lo, hi in itertools.pairwise(cdf)]


def _refuse(p: ParameterSpec, searcher: str, reason: str, alternatives: str) -> SpecError:
    return SpecError(
        [Problem(f"parameters.{p.name}", f"{searcher} cannot sample {p.distribution}: {reason}; {alternatives}")]
    )


def _listed(p: ParameterSpec, searcher: str) -> list:
    values = _finite_support(p)
    if len(values) > MAX_ENUMERATED_VALUES:
        raise _refuse(p, searcher, f"{len(values)} values is too many to list", "narrow the range or raise q")
    return values


# -- random search ----------------------------------------------------------------------------------


def check_random(params: Iterable[ParameterSpec]) -> None:
    """Random search expresses every form; only over-long value lists are refused."""
    for p in params:
        if p.is_searched and support(p) is not None:
            _listed(p, "random")


def sample_flat(params: Sequence[ParameterSpec], rng) -> dict[str, Any]:
    """One random config (flat, dotted names), parameters in file order, inactive ones left out, each
    value drawn by :func:`sample_value`."""
    config: dict[str, Any] = {}
    for p in params:
        if p.active(config):
            config[p.name] = sample_value(p, rng)
    return config


def sample_value(p: ParameterSpec, rng) -> Any:
    """One value of ``p`` drawn from its declared law with the numpy generator ``rng``.

    Continuous laws are drawn by inverse CDF inside their bounds (so a truncated normal is exact);
    finite ones by their :func:`masses`; unbounded quantized ones are drawn and rounded to ``q``.
    """
    values = support(p)
    if values is not None:
        return values[int(rng.choice(len(values), p=masses(p)))]
    s = p.shape
    law = s.law()
    lo = law.cdf(s.low) if s.low is not None else 0.0
    hi = law.cdf(s.high) if s.high is not None else 1.0
    x = float(law.ppf(rng.uniform(lo, hi)))
    if s.low is not None and s.high is not None:  # ppf's last ulp must not step outside the inclusive bounds
        x = min(max(x, s.low), s.high)
    return round_to_q(round(x / s.q) * s.q, s.q) if s.q is not None else x


# -- grid search ------------------------------------------------------------------------------------


#: The most points a grid may have without a ``run_cap`` (a bigger one would run for ever; with a
#: ``run_cap`` its first points run, drawn one at a time).
MAX_GRID_POINTS = 100_000


def grid_points(params: Sequence[ParameterSpec]) -> Iterator[dict[str, Any]]:
    """Every combination of the grid (flat, dotted names) in file order, the last parameter varying
    fastest, drawn one at a time (a grid of 20^7 points is never held whole). A conditional parameter
    varies only in the combinations where its condition holds.

    Raises:
        SpecError: a parameter has no finite grid (checked before the first point).
    """
    axes = []
    for p in params:
        if support(p) is None:
            reason = (
                "a continuous range has no finite grid" if p.shape.bounded else "an unbounded law has no finite grid"
            )
            raise _refuse(
                p,
                "grid",
                reason,
                "list the points with `values: [...]`, use a q_ form with bounds, or use method random, bayes or bohb",
            )
        axes.append((p, _listed(p, "grid")))

    def walk(index: int, partial: dict[str, Any]) -> Iterator[dict[str, Any]]:
        if index == len(axes):
            yield partial
            return
        p, values = axes[index]
        if not p.active(partial):
            yield from walk(index + 1, partial)
            return
        for value in values:
            yield from walk(index + 1, {**partial, p.name: value})

    return walk(0, {})


def grid_size(params: Sequence[ParameterSpec], cap: int | None) -> int:
    """How many trials a grid runs: its points, or ``cap`` of them; counted without building them, and
    by walking at most ``cap`` (or :data:`MAX_GRID_POINTS`) of them.

    Raises:
        SpecError: the grid has more than :data:`MAX_GRID_POINTS` points and no ``cap``.
    """
    points = grid_points(params)
    if all(not p.when for p in params):  # no condition: the product of the axes, exactly
        total = math.prod(len(_listed(p, "grid")) for p in params)
    else:
        total = sum(1 for _ in itertools.islice(points, (cap or MAX_GRID_POINTS) + 1))
    if cap is None and total > MAX_GRID_POINTS:
        shown = f"{total}" if all(not p.when for p in params) else f"more than {MAX_GRID_POINTS}"
        raise SpecError(
            [
                Problem(
                    "run_cap",
                    f"a grid of at most {MAX_GRID_POINTS} points runs whole; this one has "
                    f"{shown}: set run_cap to run its first N points, or use method random",
                )
            ]
        )
    return total if cap is None else min(cap, total)


# -- hyperopt (TPE) ---------------------------------------------------------------------------------


def hyperopt_space(params: Sequence[ParameterSpec]) -> dict[str, Any]:
    """A native hyperopt space of the searched parameters. A parameter with ``when`` lives inside its
    parent's ``hp.choice`` branch for each allowed value, so TPE samples it only there; :class:`Decoder`
    flattens the branches back. Integer ranges give every integer the same mass (hyperopt's own
    ``uniformint`` gives the two ends half as much)."""
    top, children = _hyperopt_levels([p for p in params if p.is_searched])
    return _hyperopt_level(top, children, "")


def _hyperopt_levels(searched: list[ParameterSpec]) -> tuple[list[ParameterSpec], dict[str, list[ParameterSpec]]]:
    """The top level of the hyperopt space, and each branching parameter's children."""
    children: dict[str, list[ParameterSpec]] = {}
    top = []
    for p in searched:
        parent = p.when[0][0] if p.when else None
        if parent is not None and any(q.name == parent and q.is_searched for q in searched):
            children.setdefault(parent, []).append(p)
        else:
            top.append(p)  # unconditional, or conditional on a constant (Decoder drops it if inactive)
    return top, children


def _hyperopt_level(level: list[ParameterSpec], children: dict, tag: str) -> dict[str, Any]:
    from hyperopt import hp

    space: dict[str, Any] = {}
    for p in level:
        label = p.name + tag
        kids = children.get(p.name)
        if not kids:
            space[p.name] = _hyperopt_expression(p, label)
            continue
        branches = [
            {p.name: v, **_hyperopt_level([k for k in kids if v in k.when[0][1]], children, f"{tag}|{p.name}={v}")}
            for v in p.values
        ]
        space[_BRANCH + p.name] = (
            hp.pchoice(label, list(zip(p.probabilities, branches, strict=True)))
            if p.probabilities
            else hp.choice(label, branches)
        )
    return space


def _hyperopt_expression(p: ParameterSpec, label: str):
    from hyperopt import hp
    from hyperopt.pyll import scope

    if p.distribution == "categorical":
        if p.probabilities:
            return hp.pchoice(label, list(zip(p.probabilities, p.values, strict=True)))
        return hp.choice(label, list(p.values))
    s = p.shape
    if p.distribution == "int_uniform":  # ordinal for TPE, every integer the same width
        assert s.low is not None and s.high is not None  # a range form: both bounds
        return scope.int(hp.quniform(label, s.low - 0.4999, s.high + 0.4999, 1))
    values = support(p)
    if values is not None:
        # hyperopt's quniform/qloguniform round past the bounds and give the ends half a cell; the exact
        # multiples with their declared masses keep every value inside [min, max].
        values = _listed(p, "hyperopt")
        if s.equal_mass:
            return hp.choice(label, values)
        return hp.pchoice(label, list(zip(masses(p), values, strict=True)))
    if s.base == "uniform":
        return hp.uniform(label, s.low, s.high)
    if s.base == "loguniform":
        assert s.low is not None and s.high is not None  # a range form: both bounds
        return hp.loguniform(label, math.log(s.low), math.log(s.high))
    if s.base == "beta":
        raise _refuse(p, "hyperopt", "hyperopt has no beta law", "use q_beta, or method random or bohb")
    if s.bounded:
        raise _refuse(
            p,
            "hyperopt",
            "hyperopt's normal laws cannot be truncated to min/max (clipping would pile mass on the bounds)",
            "drop min and max, or use method random or bohb",
        )
    normal = s.base == "normal"
    if s.q is not None:
        return (hp.qnormal if normal else hp.qlognormal)(label, s.mu, s.sigma, s.q)
    return (hp.normal if normal else hp.lognormal)(label, s.mu, s.sigma)


# -- Optuna (define-by-run) -------------------------------------------------------------------------

#: The values Optuna's ``suggest_categorical`` takes.
_OPTUNA_CHOICES = (type(None), bool, int, float, str)


class OptunaSpace:
    """A define-by-run space for Ray Tune's ``OptunaSearch``: called with each new trial, it asks the
    trial for the searched parameters in file order, and a parameter whose ``when`` does not hold is
    never asked, so Optuna's TPE models each parameter on the trials that had it. It returns the
    trial's values (flat, dotted names) in the spec's domain.

    Ranges keep their exact values: an integer range and an equally likely quantized range are ordered
    integers (a range's index into its multiples); a quantized log-uniform range is Optuna's
    log-uniform float snapped to the nearest multiple inside the bounds, which gives each multiple the
    mass the spec declares. Optuna has no normal or beta prior and no weighted choices: those forms are
    refused when the space is built (:func:`check_optuna`). Picklable (a searcher's state holds it).
    """

    def __init__(self, params: Sequence[ParameterSpec]):
        check_optuna(params)
        self.params = tuple(params)

    def __call__(self, trial) -> dict[str, Any]:
        known: dict[str, Any] = {}  # what a condition can test: constants and the values asked so far
        asked: dict[str, Any] = {}
        for p in self.params:
            if p.distribution == "constant":
                known[p.name] = p.value
            elif p.active(known):
                known[p.name] = asked[p.name] = _optuna_value(trial, p)
        return asked


def check_optuna(params: Iterable[ParameterSpec]) -> None:
    """Raise :class:`SpecError` for a form Optuna's TPE cannot sample exactly."""
    for p in params:
        if not p.is_searched:
            continue
        if p.distribution == "categorical":
            if p.probabilities:
                raise _refuse(
                    p,
                    "optuna",
                    "Optuna's choices cannot be weighted",
                    "drop probabilities, or use method random or bayes",
                )
            if not all(isinstance(v, _OPTUNA_CHOICES) for v in p.values):
                raise _refuse(
                    p, "optuna", "Optuna's choices must be scalars", "use scalar values, or method random or bayes"
                )
            continue
        s = p.shape
        if s.base not in ("uniform", "loguniform"):
            raise _refuse(
                p,
                "optuna",
                f"Optuna has no {s.base.replace('log', 'log-')} prior",
                "use a uniform or log-uniform form, or method random or bayes",
            )
        if not s.bounded:  # pragma: no cover - uniform and log-uniform forms always have bounds
            raise _refuse(p, "optuna", "Optuna needs bounds", "give min and max")
        if support(p) is not None:
            _listed(p, "optuna")


def _optuna_value(trial, p: ParameterSpec) -> Any:
    if p.distribution == "categorical":
        return trial.suggest_categorical(p.name, list(p.values))
    s = p.shape
    values = support(p)
    if values is None:
        return trial.suggest_float(p.name, s.low, s.high, log=s.base == "loguniform")
    if p.distribution == "int_uniform":
        return trial.suggest_int(p.name, s.low, s.high)
    if s.equal_mass:  # q_uniform: an ordered index into the multiples, every one the same mass
        return values[trial.suggest_int(p.name, 0, len(values) - 1)]
    x = trial.suggest_float(p.name, s.low, s.high, log=s.base == "loguniform")
    return min(values, key=lambda v: abs(v - x))  # the nearest multiple: the mass masses() gives it


# -- known points -----------------------------------------------------------------------------------


def native_points(
    searcher: str, params: Sequence[ParameterSpec], points: Sequence[Mapping[str, Any]], key: str = "points_to_evaluate"
) -> list[dict]:
    """The spec's known points (flat, typed: ``SweepSpec.points_to_evaluate``) as ``searcher`` suggests
    its own configs from the space built here, which :class:`Decoder` turns back into the points: the
    index of a value where Optuna's space asks for one (an equally likely quantized range), the value
    everywhere else (random, grid and BOHB suggest flat configs of values).

    hyperopt's points are keyed by its labels, its parameters' names: in a space without conditions on
    searched parameters, which it alone can take points in. Ray's ``HyperOptSearch`` turns the value of a
    choice into its index itself, so those stay values.

    Raises:
        SpecError: hyperopt cannot take known points in a space with conditions on searched parameters,
            or for a choice among values that are not scalars; named by ``key``, the spec's key the
            points come from (``warm_start``: an earlier sweep's trials).
    """
    if searcher == "hyperopt":
        return [_hyperopt_point(params, point, key) for point in points]
    # Optuna asks an equally likely quantized range for an index (OptunaSpace)
    indexed = {p.name for p in params if p.distribution == "q_uniform"} if searcher == "optuna" else set()
    return [
        {name: _finite_support(_named(params, name)).index(v) if name in indexed else v for name, v in point.items()}
        for point in points
    ]


#: The values Ray's HyperOptSearch can find among a choice's (literals) for a known point.
_SCALARS = (str, int, float, bool, type(None))


def _named(params: Sequence[ParameterSpec], name: str) -> ParameterSpec:
    return next(p for p in params if p.name == name)


def _hyperopt_point(params: Sequence[ParameterSpec], point: Mapping[str, Any], key: str) -> dict[str, Any]:
    top, children = _hyperopt_levels([p for p in params if p.is_searched])
    if children:  # hyperopt's TPE reads every label of a known point, and a branch not taken has none
        conditional = ", ".join(f"{k.name} when {parent}" for parent, kids in children.items() for k in kids)
        raise SpecError(
            [
                Problem(
                    key,
                    f"bayes (hyperopt) cannot start from known points in a space "
                    f"with conditions on searched parameters ({conditional}); use method optuna"
                    f"{' or random' if key == 'points_to_evaluate' else ''}, or drop {key}",
                )
            ]
        )
    labels: dict[str, Any] = {}
    for p in top:  # no branches: each label is the parameter's name
        choices = list(p.values) if p.distribution == "categorical" else support(p)
        if p.name not in point:
            # conditional on a constant that rules it out: still in hyperopt's space (Decoder drops it)
            labels[p.name] = choices[0] if choices else p.shape.low if p.shape.low is not None else p.shape.mu
        elif choices is None or p.distribution == "int_uniform" or all(isinstance(c, _SCALARS) for c in choices):
            labels[p.name] = point[p.name]  # a number as it is, or a choice whose index Ray's HyperOptSearch looks up
        else:
            raise _refuse(p, "bayes", "a known point cannot name a value that is not a scalar", "drop the points")
    return labels


# -- what the trial receives ------------------------------------------------------------------------


class Decoder:
    """Turns whatever a searcher suggested into the config a trial receives.

    Plain Python values (ints where the form is integral), the spec's constants added, every parameter
    whose ``when`` does not hold left out, hyperopt's branches flattened, and dotted names nested.
    Picklable, so a restored experiment decodes the same way.
    """

    def __init__(self, params: Sequence[ParameterSpec]):
        self.params = tuple(params)
        self.keep_flat = flat_names(self.params)

    def flat(self, suggested: dict[str, Any]) -> dict[str, Any]:
        raw = _flatten_branches(suggested)
        config: dict[str, Any] = {}
        for p in self.params:
            if not p.active(config):
                continue
            if p.distribution == "constant":
                config[p.name] = p.value
            elif p.name in raw:
                value = plain(raw[p.name])
                config[p.name] = _typed(p, value)
        return config

    def __call__(self, suggested: dict[str, Any]) -> dict[str, Any]:
        return nest(self.flat(suggested), self.keep_flat)


def _flatten_branches(suggested: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in suggested.items():
        if key.startswith(_BRANCH):
            out.update(_flatten_branches(value))
        else:
            out[key] = value
    return out


def _typed(p: ParameterSpec, value: Any) -> Any:
    if p.distribution in ("categorical", "constant"):
        return value
    if p.shape.integral:
        return int(round(value))
    return float(value)
