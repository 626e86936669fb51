"""BOHB's model (Falkner, Klein and Hutter, "BOHB: Robust and Efficient Hyperparameter Optimization at
Scale", ICML 2018), on numpy and scipy: the searcher of ``method: bohb``, run under HyperBand-for-BOHB.

It follows hpbandster's reference implementation (``hpbandster.optimizers.config_generators.bohb``, which
Ray's ``TuneBOHB`` wraps), rule for rule:

- every result at a HyperBand rung (``hyperband_info.budget``, which Ray's ``HyperBandForBOHB`` sets) is an
  observation at that budget, and so is a trial's last result when it ends (at its epoch, ``time_attr``),
  as hpbandster records every run it finishes: Tune gives a searcher no ``on_trial_result`` for the result
  its scheduler stops a trial on, so Ray's ``TuneBOHB`` never learns the results of its largest budget; a
  budget below the largest one that has a model is no longer recorded;
- a budget gets a model once it has more than ``d + 1`` observations (``d``: the searched parameters):
  its observations sorted by loss are split into the best ``top_n_percent`` (at least ``d + 1``) and the
  rest (at least ``d + 1``), and a kernel density estimate is fitted to each, with the normal-reference
  bandwidth (Scott's rule, as statsmodels' ``KDEMultivariate`` computes it), at least ``min_bandwidth``;
  an inactive (conditional) coordinate is filled from another observation that has it;
- a suggestion is random with probability ``random_fraction`` (and while no budget has a model); else
  ``num_samples`` candidates are drawn around the good points of the largest budget's model (continuous
  coordinates from a normal truncated to [0, 1] with ``bandwidth_factor`` times the bandwidth, choices kept
  with probability ``1 - bandwidth`` and redrawn otherwise), and the one with the smallest ``g(x) / l(x)``
  wins.

Where it differs: a choice's kernel (Aitchison and Aitken's) spreads its mass over the parameter's
choices, not over the values seen (statsmodels counts the levels in the data, and a level the data lacks
gets an infinite density); random suggestions are drawn from the declared laws exactly, as random search
draws them (:func:`~tune_service.search.spaces.sample_flat`); and the model's coordinates are each
parameter's cumulative distribution (a log-uniform range on its log scale, as ConfigSpace has it; a normal
law unbounded or truncated), or its index among its values for a quantized range. So BOHB takes every
form random search takes. Its state (the observations, the models, its random generator) saves and
restores exactly.

With the spec's priors (``prior``), its random configs are drawn by a
:class:`~tune_service.search.priors.PriorGuide` (half from the beliefs, to a power that fades with its
draws, while the evidence bears them out), and its model's pick is weighed by the beliefs to that power
(πBO's rule).
"""

from __future__ import annotations

import math
import pickle
from typing import Any, Sequence

import numpy as np
from ray.tune.search import Searcher

from tune_service.search.priors import DEFAULT_BETA, PriorGuide, PriorLaw, loss_of
from tune_service.search.spaces import sample_flat, support
from tune_service.spec.parameters import ParameterSpec, round_to_q


class Coordinate:
    """One searched parameter as a coordinate of BOHB's model: a number in [0, 1] (``choices == 0``:
    continuous), or the index of one of ``choices`` values (a categorical parameter)."""

    def __init__(self, p: ParameterSpec):
        self.p = p
        self.values = list(p.values) if p.distribution == "categorical" else support(p)
        self.choices = len(self.values) if p.distribution == "categorical" and self.values else 0
        if self.values is None:  # a continuous law: its CDF at the bounds, computed once
            s = p.shape
            self.law = s.law()
            self.cdf_low = float(self.law.cdf(s.low)) if s.low is not None else 0.0
            self.cdf_high = float(self.law.cdf(s.high)) if s.high is not None else 1.0

    def encode(self, value: Any) -> float:
        if self.values is not None:
            index = self.values.index(value)
            return float(index) if self.choices else (index + 0.5) / len(self.values)
        u = (self.law.cdf(value) - self.cdf_low) / (self.cdf_high - self.cdf_low)
        return float(min(max(u, 0.0), 1.0))

    def decode(self, u: float) -> Any:
        if self.values is not None:
            index = int(round(u)) if self.choices else int(math.floor(u * len(self.values)))
            return self.values[min(max(index, 0), len(self.values) - 1)]
        s = self.p.shape
        x = float(self.law.ppf(self.cdf_low + min(max(u, 0.0), 1.0) * (self.cdf_high - self.cdf_low)))
        if s.low is not None and s.high is not None:
            x = min(max(x, s.low), s.high)
        return round_to_q(round(x / s.q) * s.q, s.q) if s.q is not None else x


class KernelDensity:
    """A product-kernel density estimate of ``data`` (rows of coordinates), as statsmodels'
    ``KDEMultivariate(var_type=..., bw="normal_reference")`` estimates it: Gaussian kernels for continuous
    coordinates, Aitchison-Aitken kernels over ``choices`` for categorical ones; bandwidths at least
    ``min_bandwidth``."""

    def __init__(self, data: np.ndarray, choices: np.ndarray, min_bandwidth: float):
        self.data = data
        self.choices = choices
        n, d = data.shape
        self.bw = np.clip(1.06 * np.std(data, axis=0) * n ** (-1.0 / (4 + d)), min_bandwidth, None)

    def pdf(self, points: np.ndarray) -> np.ndarray:
        """The density at each row of ``points``."""
        points = np.atleast_2d(np.asarray(points, dtype=float))
        continuous = self.choices == 0
        # kernels[s, i, k]: coordinate k's kernel between point s and datum i
        kernels = np.empty((len(points), *self.data.shape))
        h = self.bw[continuous]
        standardised = (self.data[None, :, continuous] - points[:, None, continuous]) / h
        kernels[:, :, continuous] = np.exp(-0.5 * standardised**2) / math.sqrt(2 * math.pi)
        for k in np.flatnonzero(~continuous):
            h_k, others = self.bw[k], max(int(self.choices[k]) - 1, 1)
            kernels[:, :, k] = np.where(self.data[None, :, k] == points[:, None, k], 1 - h_k, h_k / others)
        return kernels.prod(axis=2).sum(axis=1) / np.prod(h) / len(self.data)


class BOHBSearch(Searcher):
    """BOHB's model-based search (the module's docstring), with the known ``points`` first.

    ``metric`` and ``mode``: the value a result's loss is (negated for ``max``). ``time_attr``: the
    result's clock, whose value at a trial's end is the budget its last result is recorded at (None: only
    HyperBand's rung results are). The hyperparameters of the model are hpbandster's defaults and names.
    """

    def __init__(
        self,
        params: Sequence[ParameterSpec],
        metric: str | None,
        mode: str | None,
        seed: int,
        time_attr: str | None = None,
        points: Sequence[dict[str, Any]] = (),
        top_n_percent: int = 15,
        num_samples: int = 64,
        random_fraction: float = 1 / 3,
        bandwidth_factor: float = 3,
        min_bandwidth: float = 1e-3,
        prior: PriorLaw | None = None,
        beta: float = DEFAULT_BETA,
    ):
        super().__init__(metric=metric, mode=mode)
        self.params = tuple(params)
        self.time_attr = time_attr
        self.coordinates = [Coordinate(p) for p in self.params if p.is_searched]
        self.coordinate_of = {c.p.name: c for c in self.coordinates}
        self.choices = np.array([c.choices for c in self.coordinates], dtype=int)
        self.min_points_in_model = len(self.coordinates) + 1
        self.top_n_percent = top_n_percent
        self.num_samples = num_samples
        self.random_fraction = random_fraction
        self.bandwidth_factor = bandwidth_factor
        self.min_bandwidth = min_bandwidth
        self.guide = PriorGuide(prior, beta) if prior is not None else None
        self.state: dict[str, Any] = {
            "rng": np.random.default_rng(seed),
            # Saved with the state: a resumed sweep's searcher is built without a warm start's earlier
            # trials (they were told at the start), and its count of points given counts them.
            "points": [dict(point) for point in points],
            "points_given": 0,
            "prior": self.guide.state if self.guide else None,  # the priors' draws and evidence
            "live": {},  # trial id -> its config (flat) and the budgets it has been recorded at
            "observations": {},  # budget -> [(coordinates, loss)]
            "models": {},  # budget -> (good, bad) KernelDensity
        }

    # -- Tune's calls ------------------------------------------------------------------------------

    def suggest(self, trial_id: str) -> dict[str, Any]:
        state = self.state
        if state["points_given"] < len(state["points"]):
            config = dict(state["points"][state["points_given"]])
            state["points_given"] += 1
        else:
            weight = self.guide.next_weight() if self.guide else 0.0
            config = self._model_pick(weight) or self._random_config(weight)
        state["live"][trial_id] = (config, set())
        return dict(config)

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        self._record(trial_id, result, (result.get("hyperband_info") or {}).get("budget"))

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        if result and not error and self.time_attr is not None:
            self._record(trial_id, result, result.get(self.time_attr))
        self.state["live"].pop(trial_id, None)

    def _record(self, trial_id: str, result: dict, budget: float | None) -> None:
        """``result`` as an observation of the trial's config at ``budget``, once per trial and budget."""
        live = self.state["live"].get(trial_id)
        if budget is None or live is None or budget in live[1]:
            return
        config, recorded = live
        recorded.add(budget)
        loss = loss_of(result, self.metric, self.mode)
        self._observe(self._vector(config), budget, math.inf if loss is None else loss)
        if self.guide is not None and loss is not None:
            self.guide.record(trial_id, config, budget, loss)

    def save(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "wb") as f:
            pickle.dump(self.state, f)

    def restore(self, checkpoint_path: str) -> None:
        points = self.state["points"]
        with open(checkpoint_path, "rb") as f:
            self.state = pickle.load(f)
        self.state.setdefault("points", points)  # saved before the points were part of the state
        if self.guide is not None:  # the guide works on the restored state's record (saved before priors: none)
            self.guide.restore(self.state.get("prior") or self.guide.state)
            self.state["prior"] = self.guide.state

    # -- the model ---------------------------------------------------------------------------------

    def _vector(self, config: dict[str, Any]) -> np.ndarray:
        """A config's coordinates (NaN where a parameter is inactive)."""
        return np.array([c.encode(config[c.p.name]) if c.p.name in config else np.nan for c in self.coordinates])

    def _config(self, vector: Sequence[float]) -> dict[str, Any]:
        """The config of ``vector``, inactive parameters left out (as :func:`sample_flat` gives one)."""
        u_of = {c.p.name: u for c, u in zip(self.coordinates, vector, strict=True)}
        config: dict[str, Any] = {}
        for p in self.params:
            if p.active(config):
                config[p.name] = (
                    p.value if p.distribution == "constant" else self.coordinate_of[p.name].decode(u_of[p.name])
                )
        return config

    def _observe(self, vector: np.ndarray, budget: float, loss: float) -> None:
        """hpbandster's ``new_result``: record, and refit the budget's model."""
        observations, models = self.state["observations"], self.state["models"]
        seen = observations.setdefault(budget, [])
        if models and max(models) > budget:
            return
        seen.append((vector, loss))
        if len(seen) <= self.min_points_in_model - 1:
            return
        data = np.array([v for v, _ in seen])
        order = np.argsort(np.array([loss for _, loss in seen]), kind="stable")
        n = len(seen)
        n_good = max(self.min_points_in_model, (self.top_n_percent * n) // 100)
        n_bad = max(self.min_points_in_model, ((100 - self.top_n_percent) * n) // 100)
        good = self._imputed(data[order[:n_good]])
        bad = self._imputed(data[order[n_good : n_good + n_bad]])
        if good.shape[0] <= good.shape[1] or bad.shape[0] <= bad.shape[1]:
            return
        models[budget] = (
            KernelDensity(good, self.choices, self.min_bandwidth),
            KernelDensity(bad, self.choices, self.min_bandwidth),
        )

    def _imputed(self, rows: np.ndarray) -> np.ndarray:
        """hpbandster's ``impute_conditional_data``: an inactive coordinate takes the value of another row
        that has it (all of its inactive ones from that row), or a random one."""
        rng = self.state["rng"]
        filled = np.empty_like(rows)
        for i, row in enumerate(rows):
            datum = row.copy()
            missing = np.flatnonzero(np.isnan(datum))
            while missing.size:
                k = missing[0]
                donors = np.flatnonzero(np.isfinite(rows[:, k]))
                if donors.size:
                    datum[missing] = rows[rng.choice(donors), missing]
                else:
                    datum[k] = rng.random() if self.choices[k] == 0 else rng.integers(self.choices[k])
                missing = np.flatnonzero(np.isnan(datum))
            filled[i] = datum
        return filled

    def _random_config(self, weight: float) -> dict[str, Any]:
        """A random config: from the declared laws, or with priors as their guide draws it."""
        if self.guide is None:
            return sample_flat(self.params, self.state["rng"])
        return self.guide.sample(self.state["rng"], weight)

    def _model_pick(self, weight: float) -> dict[str, Any] | None:
        """hpbandster's ``get_config``, its candidates drawn at once: a config from the largest budget's
        model, or None for a random one. With a prior, the candidate that minimises ``g(x) / l(x)`` divided
        by the prior's likelihood ratio to the power ``weight`` (πBO's weighting)."""
        from scipy.stats import truncnorm

        rng, models = self.state["rng"], self.state["models"]
        if not models or rng.random() < self.random_fraction:
            return None
        good, bad = models[max(models)]
        around = good.data[rng.integers(len(good.data), size=self.num_samples)]  # a good point each
        candidates = np.empty_like(around)
        bandwidths = np.maximum(good.bw, self.min_bandwidth)
        for k, (bw, choices) in enumerate(zip(bandwidths, self.choices, strict=True)):
            m = around[:, k]
            if choices == 0:
                bw *= self.bandwidth_factor
                candidates[:, k] = truncnorm.rvs(-m / bw, (1 - m) / bw, loc=m, scale=bw, random_state=rng)
            else:  # the good point's choice, kept with probability 1 - bandwidth
                kept = rng.random(self.num_samples) < 1 - bw
                candidates[:, k] = np.where(kept, np.floor(m), rng.integers(choices, size=self.num_samples))
        ratio = np.maximum(bad.pdf(candidates), 1e-32) / np.maximum(good.pdf(candidates), 1e-32)
        if self.guide is None or weight == 0:
            return self._config(candidates[int(np.argmin(ratio))])
        configs = [self._config(candidate) for candidate in candidates]
        score = np.log(ratio) - weight * np.array([self.guide.law.log_ratio(config) for config in configs])
        return configs[int(np.argmin(score))]
