"""The spec's priors (:mod:`tune_service.spec.priors`) in the searchers. Two published rules, combined:

- πBO's fading (Hvarfner et al., "πBO: Augmenting Acquisition Functions with User Beliefs for Bayesian
  Optimization", ICLR 2022): the belief weighs the searcher's n-th config of its own by
  ``prior(x) ** (beta / n)``, so it leads the first draws and fades as the sweep's own evidence grows;
  ``beta`` is πBO's choice, a tenth of the sweep's trials (:func:`decay`), and the power is capped at 1,
  so no draw is surer of the belief than the user said. Over a range, the belief to a power ``w`` is a
  normal ``sqrt(1 / w)`` times wider; over values, each value's odds to that power.
- PriorBand's mixture and test (Mallik et al., "PriorBand: Practical Hyperparameter Optimization in the
  Age of Deep Learning", NeurIPS 2023), as at its lowest rung: half the draws from the belief, half from
  the declared laws, and the belief dropped while the best configs so far are likelier under the declared
  laws than under it (:class:`PriorGuide`; PriorBand tests its prior against its incumbent).

Per searcher:

- random search draws each config of its own through a :class:`PriorGuide`;
- BOHB draws its random configs through one, and picks among its model's candidates the one that
  minimises ``g(x) / (l(x) * r(x) ** w)``, ``r`` the likelihood ratio of the belief to the declared laws
  (:meth:`PriorLaw.log_ratio`: the prior up to a constant, and 1 for a parameter inactive in ``x``), ``w``
  the guide's power (πBO's weighting of the acquisition; none once the belief is dropped);
- the TPEs (hyperopt's, Optuna's) take their random start-up configs half from the belief, half from the
  declared laws (:func:`start_up_draws`), and learn from them as from their own: the belief's share of
  what the model has seen fades as ``1 / n``, and where it is wrong the start-up's other half shows it.

A scheduler (ASHA, HyperBand) takes no prior of its own: it stops and promotes the trials the searcher
draws. Every draw comes from the searcher's seeded generator, and a guide's state is saved with its
searcher's, so a sweep with priors is reproducible and resumes exactly.
"""

from __future__ import annotations

import heapq
import math
from typing import Any, Sequence

import numpy as np

from tune_service.search.spaces import masses, sample_flat, sample_value, support
from tune_service.spec.parameters import ParameterSpec
from tune_service.spec.priors import PriorSpec

#: πBO's beta without a run cap: the tenth of a hundred trials.
DEFAULT_BETA = 10.0
#: The share of a searcher's own draws taken from the beliefs while they stand: PriorBand's at its lowest
#: rung (``1 - 1 / (1 + eta ** 0)``), the rest from the declared laws.
PRIOR_SHARE = 0.5
#: The beliefs are tested against the evidence once this many trials have reported ...
EVIDENCE_AFTER = 8
#: ... on at least this many of the best.
EVIDENCE_TOP = 3


def loss_of(result: dict, metric: str | None, mode: str | None) -> float | None:
    """A report's value of ``metric`` as a loss (lower is better: negated unless ``mode`` is min), or None
    when it reported no finite number."""
    value = result.get(metric or "")
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value) if mode == "min" else -float(value)
    return None


def decay(run_cap: int | None) -> float:
    """πBO's ``beta``: a tenth of the sweep's trials (at least 1), or :data:`DEFAULT_BETA` without a cap."""
    return max(1.0, run_cap / 10) if run_cap else DEFAULT_BETA


def prior_weight(n: int, beta: float) -> float:
    """The power of the belief on the searcher's ``n``-th own draw (1-based): ``min(1, beta / n)``."""
    return min(1.0, beta / max(n, 1))


class _Belief:
    """One parameter's prior: on the parameter's [0, 1] scale (the declared law's cumulative distribution
    within its bounds), or over its list of values."""

    def __init__(self, p: ParameterSpec, prior: PriorSpec):
        self.p = p
        self.spread = prior.spread
        self.values = support(p)
        if p.distribution == "categorical":
            assert self.values is not None
            self.log_belief = np.array([math.log(prior.odds) if v == prior.value else 0.0 for v in self.values])
            self.log_constant = self._log_mass()
            return
        s = p.shape
        assert s.low is not None and s.high is not None, f"{p.name}: a prior needs a bounded range"
        self.law, self.low, self.high = s.law(), s.low, s.high
        self.cdf_low, self.cdf_high = float(self.law.cdf(s.low)), float(self.law.cdf(s.high))
        self.centre = self._unit(prior.value)
        if self.values is not None:  # a quantized range: the normal at each of its values
            self.log_belief = np.array([self._log_normal(self._unit(v)) for v in self.values])
            self.log_constant = self._log_mass()
        else:  # the log of the truncated normal's constant on [0, 1]: its density is exp(_log_normal) over it
            from scipy.stats import norm

            inside = norm.cdf((1 - self.centre) / self.spread) - norm.cdf(-self.centre / self.spread)
            self.log_constant = math.log(self.spread * math.sqrt(2 * math.pi) * float(inside))

    def _log_mass(self) -> float:
        """Over values: the log of the declared masses times the belief, summed (what normalises them)."""
        return math.log(float(np.dot(masses(self.p), np.exp(self.log_belief))))

    def _unit(self, x: float) -> float:
        u = (float(self.law.cdf(x)) - self.cdf_low) / (self.cdf_high - self.cdf_low)
        return min(max(u, 0.0), 1.0)

    def _log_normal(self, u: float) -> float:
        return -0.5 * ((u - self.centre) / self.spread) ** 2

    def log_ratio(self, value: Any) -> float:
        """The log of how much likelier ``value`` is under the belief as stated than under the declared
        law alone (both normalised): above 0 where the belief expects values."""
        if self.values is not None:
            return float(self.log_belief[self.values.index(value)]) - self.log_constant
        return self._log_normal(self._unit(value)) - self.log_constant

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

    def log_ratio(self, config: dict[str, Any]) -> float:
        """The log of how much likelier ``config`` is under the beliefs than under the declared laws."""
        return sum(b.log_ratio(config[name]) for name, b in self.beliefs.items() if name in config)


class PriorGuide:
    """How a searcher that draws configs of its own (random search, BOHB) uses the priors, as PriorBand does
    at its lowest rung (Mallik et al., "PriorBand: Practical Hyperparameter Optimization in the Age of Deep
    Learning", NeurIPS 2023): each draw is from the beliefs with probability :data:`PRIOR_SHARE`, else from
    the declared laws; the beliefs to πBO's fading power (:func:`prior_weight` of the draws so far); and only
    while the evidence bears them out (:meth:`believed`). Its state (draws so far, what each trial reported)
    is plain data, saved with the searcher's."""

    def __init__(self, law: PriorLaw, beta: float):
        self.law, self.beta = law, beta
        # Draws so far; each trial's last report; believed()'s verdict and the reports since it.
        self.state: dict[str, Any] = {"drawn": 0, "seen": {}, "verdict": None, "unjudged": 0}

    def restore(self, state: dict[str, Any]) -> None:
        """Go on from ``state`` (a saved :attr:`state`)."""
        self.state = state

    def next_weight(self) -> float:
        """The power of the beliefs on the searcher's next config of its own, counted as drawn: πBO's
        :func:`prior_weight`, or 0 once the evidence is against them."""
        self.state["drawn"] += 1
        return prior_weight(self.state["drawn"], self.beta) if self.believed() else 0.0

    def sample(self, rng: np.random.Generator, weight: float) -> dict[str, Any]:
        """A config (flat): from the beliefs to the power ``weight`` with probability :data:`PRIOR_SHARE`
        (none once ``weight`` is 0), else from the declared laws."""
        if weight > 0 and rng.random() < PRIOR_SHARE:
            return self.law.sample(rng, weight)
        return sample_flat(self.law.params, rng)

    def record(self, trial_id: str, config: dict[str, Any], time: float, loss: float) -> None:
        """A report of ``trial_id`` (``config`` flat): its ``loss`` (lower is better) at ``time`` (its
        epoch or step); a later report replaces an earlier one. Kept as the time, the loss and the
        config's log likelihood ratio (:meth:`PriorLaw.log_ratio`), computed once."""
        self.state["seen"][trial_id] = (float(time), float(loss), self.law.log_ratio(config))
        self.state["unjudged"] += 1

    def believed(self) -> bool:
        """Whether the configs that did best are likelier under the beliefs than under the declared laws
        (PriorBand's test of its prior, with the declared laws in place of its incumbent): the best quarter
        (at least :data:`EVIDENCE_TOP`) of the trials that reported, those that went furthest first (a
        scheduler promotes the better), then by loss, must have a mean log likelihood ratio above 0. Until
        :data:`EVIDENCE_AFTER` trials have reported, the beliefs stand.

        Judged again after each report while fewer than 200 trials have reported, then once the reports
        since the last judgement are a hundredth of the trials: a draw's cost stays flat as a sweep grows
        to thousands of trials. The verdict is part of the state, so a resumed sweep judges as the
        uninterrupted one."""
        state = self.state
        seen = state["seen"]
        if state["verdict"] is None or state["unjudged"] >= max(1, len(seen) // 100):
            if len(seen) < EVIDENCE_AFTER:
                state["verdict"] = True
            else:
                best = heapq.nsmallest(max(EVIDENCE_TOP, len(seen) // 4), seen.values(), key=lambda r: (-r[0], r[1]))
                state["verdict"] = sum(ratio for _, _, ratio in best) > 0
            state["unjudged"] = 0
        return state["verdict"]


def start_up_draws(law: PriorLaw, seed: int, count: int) -> list[dict[str, Any]]:
    """``count`` start-up configs of a TPE: every other one drawn from the beliefs as stated, the others
    from the declared laws (PriorBand's half and half at its lowest rung), so that the TPE's model sees
    where the beliefs are wrong too. Their own stream of the sweep's ``seed``, so that the same spec draws
    the same ones (a resumed sweep rebuilds its searcher with them)."""
    rng = np.random.default_rng([seed, 0x9B0])
    return [law.sample(rng, 1.0 if index % 2 == 0 else 0.0) for index in range(count)]
