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

Point = Sequence[float]


def as_losses(point: Point, modes: Sequence[str]) -> tuple[float, ...]:
    """``point`` with each objective turned so that smaller is better."""
    return tuple(-v if mode == "max" else v for v, mode in zip(point, modes, strict=True))


def dominates(a: Point, b: Point, modes: Sequence[str]) -> bool:
    """Whether ``a`` is no worse than ``b`` on every objective and better on at least one."""
    la, lb = as_losses(a, modes), as_losses(b, modes)
    return all(x <= y for x, y in zip(la, lb, strict=True)) and any(x < y for x, y in zip(la, lb, strict=True))


def fronts(points: Sequence[Point], modes: Sequence[str]) -> list[list[int]]:
    """The indices of ``points`` by front: the first front is the non-dominated points, the next those
    dominated only by the first, and so on; each front in index order. Equal points share a front."""
    dominated_by = [0] * len(points)  # how many points dominate each point
    dominating: list[list[int]] = [[] for _ in points]  # the points each point dominates
    for i, a in enumerate(points):
        for j in range(i + 1, len(points)):
            if dominates(a, points[j], modes):
                dominating[i].append(j)
                dominated_by[j] += 1
            elif dominates(points[j], a, modes):
                dominating[j].append(i)
                dominated_by[i] += 1
    result: list[list[int]] = []
    current = [i for i, n in enumerate(dominated_by) if n == 0]
    while current:
        result.append(sorted(current))
        following = []
        for i in current:
            for j in dominating[i]:
                dominated_by[j] -= 1
                if dominated_by[j] == 0:
                    following.append(j)
        current = following
    return result


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


def pareto_order(points: Sequence[Point], modes: Sequence[str]) -> list[int]:
    """The indices of ``points`` best first: by front, then by crowding distance (largest first), then by
    index (the order of arrival), so the order is total and reproducible."""
    order: list[int] = []
    for front in fronts(points, modes):
        distances = crowding_distances([points[i] for i in front])
        order += [i for _, i in sorted(zip(distances, front, strict=True), key=lambda di: (-di[0], di[1]))]
    return order
