"""The spec's priors (:mod:`tune_service.spec.priors`) in the searchers, by πBO's rule (Hvarfner et al.,
"πBO: Augmenting Acquisition Functions with User Beliefs for Bayesian Optimization", ICLR 2022): a belief
weighs the n-th config the searcher draws by ``prior(x) ** (beta / n)``, so it leads the first draws and
fades as the sweep's own evidence grows. ``beta`` is πBO's choice, a tenth of the sweep's trials
(:func:`decay`); the exponent is capped at 1, so no draw is surer of the belief than the user said.

- random search draws the n-th config from the declared laws times the tempered belief
  (:meth:`PriorLaw.sample` at :func:`prior_weight`): over a range, a normal around the value on the range's
  [0, 1] scale whose spread ``1 - confidence`` widens by ``sqrt(n / beta)`` once ``n > beta``; over a
  list of values, each value's mass times its belief to that power;
- BOHB draws its random configs the same way, and picks among its model's candidates the one that
  minimises ``g(x) / (l(x) * prior(x) ** (beta / n))``: πBO's weighting of the acquisition;
- the TPEs (hyperopt's, Optuna's) start from configs drawn from the belief in place of their random
  start-up configs (:func:`start_up_draws`), and learn from them as from their own. The belief's share of
  what the model has seen is then ``k / n`` after ``n`` trials (``k`` start-up draws): it fades at πBO's
  rate, though it never reweights the TPE's own choice.

A scheduler (ASHA, HyperBand) takes no prior of its own: it stops and promotes the trials the searcher
draws. Every draw comes from the searcher's seeded generator, so a sweep with priors is reproducible and
resumes exactly.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from tune_service.search.spaces import masses, sample_value, support
from tune_service.spec.parameters import ParameterSpec
from tune_service.spec.priors import PriorSpec

#: πBO's beta without a run cap: the tenth of a hundred trials.
DEFAULT_BETA = 10.0


def decay(run_cap: int | None) -> float:
    """πBO's ``beta``: a tenth of the sweep's trials (at least 1), or :data:`DEFAULT_BETA` without a cap."""
    return max(1.0, run_cap / 10) if run_cap else DEFAULT_BETA


def prior_weight(n: int, beta: float) -> float:
    """The power of the belief on the searcher's ``n``-th own draw (1-based): ``min(1, beta / n)``."""
    return min(1.0, beta / max(n, 1))


class _Belief:
    """One parameter's prior, as a log density (up to a constant) on the parameter's [0, 1] scale (the
    declared law's cumulative distribution within its bounds) or over its list of values."""

    def __init__(self, p: ParameterSpec, prior: PriorSpec):
        self.p = p
        self.spread = 1.0 - prior.strength
        self.values = support(p)
        if p.distribution == "categorical":
            assert self.values is not None
            k = len(self.values)
            others = math.log((1 - prior.strength) / (k - 1)) if k > 1 else 0.0
            self.log_belief = np.array([math.log(prior.strength) if v == prior.value else others for v in self.values])
            return
        s = p.shape
        assert s.low is not None and s.high is not None, f"{p.name}: a prior needs a bounded range"
        self.law, self.low, self.high = s.law(), s.low, s.high
        self.cdf_low, self.cdf_high = float(self.law.cdf(s.low)), float(self.law.cdf(s.high))
        self.centre = self._unit(prior.value)
        if self.values is not None:  # a quantized range: the normal at each of its values
            self.log_belief = np.array([self._log_normal(self._unit(v)) for v in self.values])

    def _unit(self, x: float) -> float:
        u = (float(self.law.cdf(x)) - self.cdf_low) / (self.cdf_high - self.cdf_low)
        return min(max(u, 0.0), 1.0)

    def _log_normal(self, u: float) -> float:
        return -0.5 * ((u - self.centre) / self.spread) ** 2

    def log_density(self, value: Any) -> float:
        if self.values is not None:
            return float(self.log_belief[self.values.index(value)])
        return self._log_normal(self._unit(value))

    def sample(self, rng: np.random.Generator, weight: float) -> Any:
        if self.values is not None:
            tilted = np.asarray(masses(self.p)) * np.exp(weight * (self.log_belief - self.log_belief.max()))
            return self.values[int(rng.choice(len(self.values), p=tilted / tilted.sum()))]
        if weight <= 0:
            return sample_value(self.p, rng)
        from scipy.stats import truncnorm

        scale = self.spread / math.sqrt(weight)  # the normal to the power `weight` is this wider normal
        u = float(
            truncnorm.rvs(
                -self.centre / scale, (1 - self.centre) / scale, loc=self.centre, scale=scale, random_state=rng
            )
        )
        x = float(self.law.ppf(self.cdf_low + u * (self.cdf_high - self.cdf_low)))
        return min(max(x, self.low), self.high)  # ppf's last ulp must not step outside the inclusive bounds


class PriorLaw:
    """The declared laws of a sweep's ``params`` with the ``priors`` on some of them: draws and weights of
    whole configs (flat, dotted names, inactive parameters left out, as
    :func:`~tune_service.search.spaces.sample_flat` gives them)."""

    def __init__(self, params: Sequence[ParameterSpec], priors: Sequence[PriorSpec]):
        self.params = tuple(params)
        by_name = {p.name: p for p in self.params}
        self.beliefs = {prior.name: _Belief(by_name[prior.name], prior) for prior in priors}

    def sample(self, rng: np.random.Generator, weight: float) -> dict[str, Any]:
        """A config drawn from the declared laws times each belief to the power ``weight`` (0: the
        declared laws alone, as :func:`~tune_service.search.spaces.sample_flat` draws; 1: the beliefs as
        stated)."""
        config: dict[str, Any] = {}
        for p in self.params:
            if p.active(config):
                belief = self.beliefs.get(p.name)
                config[p.name] = belief.sample(rng, weight) if belief else sample_value(p, rng)
        return config

    def log_weight(self, config: dict[str, Any], weight: float) -> float:
        """``weight`` times the log of the beliefs at ``config`` (up to a constant; a parameter inactive in
        ``config`` adds nothing): πBO's weight of a candidate, as a log."""
        return weight * sum(b.log_density(config[name]) for name, b in self.beliefs.items() if name in config)


def start_up_draws(law: PriorLaw, seed: int, count: int) -> list[dict[str, Any]]:
    """``count`` configs drawn from the beliefs as stated: a TPE's start-up configs. Their own stream of the
    sweep's ``seed``, so that the same spec draws the same ones (a resumed sweep rebuilds its searcher with
    them)."""
    rng = np.random.default_rng([seed, 0x9B0])
    return [law.sample(rng, 1.0) for _ in range(count)]
