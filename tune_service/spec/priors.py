"""``priors:``: what the user believes of a parameter before the sweep starts, as a most likely value and a
confidence in it (NePS's ``prior`` and ``prior_confidence``). A block of its own beside ``parameters:``, so
that ``parameters:`` stays in W&B's grammar and a W&B file stays valid with the block removed::

    priors:
      lr: {value: 3.0e-4, confidence: high}
      optimizer: adamw                       # a value alone: confidence medium

A prior names a searched parameter of the sweep (dotted where it is nested: ``optimizer.lr``; a mapping is
always a belief, never a group) and a value that parameter can take (the rules of ``points_to_evaluate``).
Its confidence is low, medium or high, read as NePS read it for PriorBand (``neps`` 0.x, whose figures
PriorBand's paper reports): over a range, a normal around the value whose spread is 0.5, 0.25 or 0.125 of
the range (on the range's own scale: a log-uniform range's log, as the declared law maps it to [0, 1]); over
``values``, the value 1.1, 1.75 or 2.5 times as likely as each other value. A parameter whose distribution
is itself a belief (normal, log_normal, beta) takes no prior: its law already says it. How each searcher
uses a prior is :mod:`tune_service.search.priors`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from tune_service.errors import nearest
from tune_service.spec.known_points import admitted
from tune_service.spec.parameters import BETA_FORMS, NORMAL_FORMS, ParameterSpec
from tune_service.spec.rules import Checker

KEY = "priors"
#: Each confidence as NePS 0.x reads it (``FloatParameter``, ``CategoricalParameter``): over a range, the
#: normal's spread as a share of the range; over values, how many times as likely as each other value the
#: believed one is.
SPREADS = {"low": 0.5, "medium": 0.25, "high": 0.125}
ODDS = {"low": 1.1, "medium": 1.75, "high": 2.5}
CONFIDENCES = tuple(SPREADS)
DEFAULT_CONFIDENCE = "medium"
#: The methods whose searcher draws configs and so can weigh its draws by a prior (grid runs its points).
METHODS = ("random", "bayes", "hyperopt", "optuna", "bohb")
_EXAMPLE = "{lr: {value: 0.0003, confidence: high}}"


@dataclass(frozen=True)
class PriorSpec:
    """A belief about one parameter: its most likely ``value`` (typed as a trial receives it) and the
    ``confidence`` in it (a key of :data:`CONFIDENCES`)."""

    name: str
    value: Any
    confidence: str = DEFAULT_CONFIDENCE

    @property
    def spread(self) -> float:
        """Over a range: the belief's normal spread, a share of the range on its [0, 1] scale."""
        return SPREADS[self.confidence]

    @property
    def odds(self) -> float:
        """Over values: how many times as likely as each other value the believed one is."""
        return ODDS[self.confidence]

    def describe(self) -> str:
        return f"{self.name}={self.value!r} ({self.confidence} confidence)"


def read_priors(check: Checker, raw: Any, parameters: Sequence[ParameterSpec], method: str) -> tuple[PriorSpec, ...]:
    """The spec's priors, in the order of ``parameters``; problems go to ``check``."""
    if raw is None:
        return ()
    if not isinstance(raw, dict) or not raw:
        check.fail(KEY, f"must be a mapping of parameter names to beliefs such as {_EXAMPLE}, got {raw!r}")
        return ()
    if method not in METHODS:
        check.fail(
            KEY,
            f"method {method} runs every point of its grid, so a prior weighs nothing: use method "
            f"random, bayes, optuna or bohb, got priors on {', '.join(raw)}",
        )
        return ()
    by_name = {p.name: p for p in parameters}
    priors = {}
    for name, belief in raw.items():
        path = f"{KEY}.{name}"
        p = by_name.get(name)
        if p is None:
            names = list(by_name)
            check.fail(path, f"not a parameter of this sweep{nearest(name, names)}; parameters: {', '.join(names)}")
            continue
        prior = _read_belief(check, path, p, belief)
        if prior is not None:
            priors[name] = prior
    return tuple(priors[p.name] for p in parameters if p.name in priors)


def _read_belief(check: Checker, path: str, p: ParameterSpec, belief: Any) -> PriorSpec | None:
    if p.distribution == "constant":
        check.fail(path, f"is the constant {p.value!r}, which takes no prior; leave it out, got {belief!r}")
        return None
    if p.distribution in NORMAL_FORMS + BETA_FORMS:
        check.fail(
            path,
            f"its distribution {p.distribution} is already a belief about its value; give it a range "
            f"(uniform, log_uniform_values, ...) and the prior here, or drop the prior, got {belief!r}",
        )
        return None
    if isinstance(belief, dict):
        unknown = sorted(set(belief) - {"value", "confidence"})
        if unknown or "value" not in belief:
            check.fail(path, f"must be a value, or {{value: V, confidence: low|medium|high}}, got {belief!r}")
            return None
        raw_value, confidence = belief["value"], belief.get("confidence", DEFAULT_CONFIDENCE)
    else:
        raw_value, confidence = belief, DEFAULT_CONFIDENCE
    ok = True
    if confidence not in CONFIDENCES:
        check.fail(f"{path}.confidence", f"must be one of {', '.join(CONFIDENCES)}, got {confidence!r}")
        ok = False
    value, reason = admitted(p, raw_value)
    if reason is not None:
        check.fail(f"{path}.value" if isinstance(belief, dict) else path, f"{reason}, got {raw_value!r}")
        ok = False
    return PriorSpec(p.name, value, confidence) if ok else None
