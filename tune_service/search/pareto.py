"""Pareto order over several objectives: non-dominated sorting and crowding distance (Deb et al. 2002, as
NSGA-II and MO-ASHA rank a population).

Points are tuples of objective values in the objectives' order, each with its mode (``min`` or
``max``). A point dominates another when it is no worse on every objective and better on one. Fronts
are numbered from 0 (the non-dominated points); within a front, a larger crowding distance (the points
at a front's ends have an infinite one) ranks first, so the front stays spread.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

Point = Sequence[float]


def as_losses(point: Point, modes: Sequence[str]) -> tuple[float, ...]:
    """``point`` with each objective turned so that smaller is better."""
    return tuple(-v if mode == "max" else v for v, mode in zip(point, modes, strict=True))


def dominates(a: Point, b: Point, modes: Sequence[str]) -> bool:
    """Whether ``a`` is no worse than ``b`` on every objective and better on at least one."""
    la, lb = as_losses(a, modes), as_losses(b, modes)
    return all(x <= y for x, y in zip(la, lb, strict=True)) and any(x < y for x, y in zip(la, lb, strict=True))


def non_dominated(points: Sequence[Point], modes: Sequence[str]) -> list[int]:
    """The indices of the points no other point dominates (the first of :func:`fronts`), in index order."""
    return _peel(_losses(points, modes), np.arange(len(points)))[0].tolist()


def fronts(points: Sequence[Point], modes: Sequence[str], limit: int | None = None) -> list[list[int]]:
    """The indices of ``points`` by front: the first front is the non-dominated points, the next those
    dominated only by the first, and so on; each front in index order. Equal points share a front.
    ``limit``: the fronts that hold the first ``limit`` points only (each front costs a comparison of
    every point left with every other: a leaderboard needs its top few, not all)."""
    losses, remaining, result, taken = _losses(points, modes), np.arange(len(points)), [], 0
    while remaining.size and (limit is None or taken < limit):
        front, remaining = _peel(losses, remaining)
        result.append(front.tolist())
        taken += len(front)
    return result


#: Rows of the dominance comparison made at once: bounds its memory (rows x points x objectives).
_CHUNK = 256


def _losses(points: Sequence[Point], modes: Sequence[str]) -> np.ndarray:
    """The points as an array of losses (each objective turned so that smaller is better)."""
    signs = np.array([-1.0 if mode == "max" else 1.0 for mode in modes])
    return np.asarray(points, dtype=float).reshape(len(points), len(modes)) * signs


def _peel(losses: np.ndarray, remaining: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The indices among ``remaining`` that no other of them dominates, and the rest, each in order:
    compared with numpy a block of rows at a time (a sweep's thousands of trials take a blink), or for two
    finite objectives by one sort (:func:`_dominated_2d`: ten thousand trials in milliseconds)."""
    rows = losses[remaining]
    if rows.shape[1] == 2 and np.isfinite(rows).all():
        dominated = _dominated_2d(rows)
        return remaining[~dominated], remaining[dominated]
    dominated = np.zeros(len(rows), dtype=bool)
    for start in range(0, len(rows), _CHUNK):
        block = rows[start : start + _CHUNK, None, :]
        dominated |= ((block <= rows[None]).all(axis=2) & (block < rows[None]).any(axis=2)).any(axis=0)
    return remaining[~dominated], remaining[dominated]


def _dominated_2d(rows: np.ndarray) -> np.ndarray:
    """Which rows (finite losses of two objectives) another row dominates, by one sort (Kung et al. 1975):
    in order of the first loss, then the second, a row is undominated when its second loss is below every
    row's with a smaller first loss, and is the least of the rows that share its first loss."""
    order = np.lexsort((rows[:, 1], rows[:, 0]))
    first, second = rows[order, 0], rows[order, 1]
    starts = np.r_[True, first[1:] != first[:-1]]  # where each run of equal first losses begins
    group = np.cumsum(starts) - 1
    group_least = second[starts]  # the run's least second loss: its first row, by the sort
    before = np.r_[np.inf, np.minimum.accumulate(group_least)[:-1]]  # least over the runs before
    undominated = (second < before[group]) & (second == group_least[group])
    dominated = np.empty(len(rows), dtype=bool)
    dominated[order] = ~undominated
    return dominated


def crowding_distances(points: Sequence[Point]) -> list[float]:
    """Each point's crowding distance within its front (``points`` is one front): the sum over the
    objectives of the gap between its neighbours, normalised by the objective's range; infinite at an end."""
    n = len(points)
    if n <= 2:
        return [math.inf] * n
    distances = [0.0] * n
    for k in range(len(points[0])):
        order = sorted(range(n), key=lambda i: points[i][k])
        low, high = points[order[0]][k], points[order[-1]][k]
        distances[order[0]] = distances[order[-1]] = math.inf
        if high == low:
            continue
        for before, at, after in zip(order, order[1:], order[2:], strict=False):  # each inner point
            distances[at] += (points[after][k] - points[before][k]) / (high - low)
    return distances


def pareto_order(points: Sequence[Point], modes: Sequence[str], limit: int | None = None) -> list[int]:
    """The indices of ``points`` best first: by front, then by crowding distance (largest first), then by
    index (the order of arrival), so the order is total and reproducible. ``limit``: at least the first
    ``limit`` of them (whole fronts), not all."""
    order: list[int] = []
    for front in fronts(points, modes, limit):
        distances = crowding_distances([points[i] for i in front])
        order += [i for _, i in sorted(zip(distances, front, strict=True), key=lambda di: (-di[0], di[1]))]
    return order
