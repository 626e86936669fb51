"""The digits learning curves: a tabular problem with a fidelity and a known optimum, for the
search-quality benchmark.

The built-in task's digits MLP (one hidden layer, Adam, :class:`bench.workloads.DigitsRun`) is trained on
the bundled split for ``max_t`` epochs at every point of a grid of learning rate x hidden units x batch
size, and its validation loss after each epoch is kept: a table of learning curves, as LCBench (Zimmer,
Lindauer and Hutter, "Auto-PyTorch Tabular", TPAMI 2021) and HPOBench's tabular benchmarks (Eggensperger
et al., NeurIPS 2021 Datasets and Benchmarks) hold them. A searcher works on the continuous box of the
grid's exponents; a configuration is looked up at the nearest grid point, and its value at fidelity ``s``
is the loss after ``round(s * max_t)`` epochs. The known optimum is the table's lowest loss at
``max_t`` epochs. A loss that is not finite counts as ln 10, the loss of a uniform guess over the ten
classes.

The table is computed once per process (seed 0, one thread: about a minute here) and not stored.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from bench.search.search_simulation import Problem

#: The grid: each parameter's exponent (base 10 for the learning rate, 2 for the others), evenly spaced.
GRID = {
    "log10_lr": np.linspace(-4.0, -1.0, 7),
    "log2_hidden": np.linspace(4.0, 8.0, 5),
    "log2_batch_size": np.linspace(4.0, 8.0, 5),
}
#: The loss of a uniform guess over 10 classes: what a diverged run counts as.
CHANCE_LOSS = math.log(10)


def curves(max_t: int) -> np.ndarray:
    """The validation loss of every grid point after each epoch: shape (7, 5, 5, max_t)."""
    return _tables(max_t)[0]


def accuracy_curves(max_t: int) -> np.ndarray:
    """The validation accuracy of every grid point after each epoch, as :func:`curves` (a run whose loss is
    not finite counts as a uniform guess, 0.1)."""
    return _tables(max_t)[1]


@functools.cache
def _tables(max_t: int) -> tuple[np.ndarray, np.ndarray]:
    """The loss and accuracy tables, trained once per process."""
    from bench.workloads import DigitsRun

    loss_table = np.empty([len(values) for values in GRID.values()] + [max_t])
    accuracy_table = np.empty_like(loss_table)
    for index in np.ndindex(*loss_table.shape[:-1]):
        exponents = [values[i] for values, i in zip(GRID.values(), index)]
        run = DigitsRun({"lr": 10 ** exponents[0], "hidden": round(2 ** exponents[1]),
                         "batch_size": round(2 ** exponents[2])}, seed=0)
        for epoch in range(max_t):
            reported = run.train_epoch()
            finite = math.isfinite(reported["val_loss"])
            loss_table[index + (epoch,)] = reported["val_loss"] if finite else CHANCE_LOSS
            accuracy_table[index + (epoch,)] = reported["val_accuracy"] if finite else 0.1
    return loss_table, accuracy_table


def nearest(config: dict[str, float]) -> tuple[int, ...]:
    """The grid point nearest ``config`` (a value per exponent), each exponent rounded to its grid."""
    return tuple(int(np.abs(values - config[name]).argmin()) for name, values in GRID.items())


def problem(max_t: int) -> Problem:
    """The digits learning curves as a problem of ``max_t`` epochs (computing the table if it is not yet)."""
    table = curves(max_t)

    def f(config: dict[str, float], s: float) -> float:
        return float(table[nearest(config) + (max(1, round(s * max_t)) - 1,)])

    bounds = {name: (float(values[0]), float(values[-1])) for name, values in GRID.items()}
    return Problem("digits", f, bounds, float(table[..., -1].min()))
