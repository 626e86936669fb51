"""The hypervolume of a sweep of several objectives: the region of objective space that its Pareto front
dominates, bounded by a reference point, as a single number that grows as the front improves.

The reference point is stated, not guessed per chart: for each objective, the worst value among the
sweep's scored trials (feasible, with a finite value of every objective), moved a tenth of that
objective's range further out (by 1 where the range is 0), so that a trial at the worst value still adds
volume. A sweep's hypervolume by trial is computed against the reference of the whole sweep, so its curve
only rises. The volume is exact: two objectives by a sweep of the sorted front, more by slicing the
first objective (HSO, While et al. 2006), which is quick for the fronts a sweep has (tens of points).
"""

from __future__ import annotations

from typing import Sequence

from tune_service.search.pareto import as_losses, dominates, non_dominated

Point = Sequence[float]
#: How far past the worst value the reference point lies, as a share of each objective's range.
REFERENCE_MARGIN = 0.1


def reference_point(points: Sequence[Point], modes: Sequence[str]) -> tuple[float, ...]:
    """The reference point of ``points`` (the module's docstring), in their own terms (not negated)."""
    if not points:
        raise ValueError("a reference point needs at least one point")
    reference = []
    for k, mode in enumerate(modes):
        values = [p[k] for p in points]
        low, high = min(values), max(values)
        margin = REFERENCE_MARGIN * (high - low) or 1.0
        reference.append(high + margin if mode == "min" else low - margin)
    return tuple(reference)


def hypervolume(points: Sequence[Point], modes: Sequence[str], reference: Point) -> float:
    """The volume that ``points`` dominate up to ``reference`` (points not better than it on every
    objective add nothing)."""
    losses = [as_losses(p, modes) for p in points]
    bound = as_losses(reference, modes)
    inside = [p for p in losses if all(x < b for x, b in zip(p, bound, strict=True))]
    if not inside:
        return 0.0
    front = [inside[i] for i in non_dominated(inside, ["min"] * len(bound))]
    return _volume(front, bound)


def _volume(points: list[tuple[float, ...]], bound: tuple[float, ...]) -> float:
    """The volume that ``points`` (losses, all inside ``bound``) dominate below ``bound``."""
    if len(bound) == 1:
        return bound[0] - min(p[0] for p in points)
    if len(bound) == 2:
        volume, best_second = 0.0, bound[1]
        for first, second in sorted(points):
            if second < best_second:
                volume += (bound[0] - first) * (best_second - second)
                best_second = second
        return volume
    # Slice along the first objective: between two successive values, the points at or below the slice
    # dominate a region whose cross-section is their volume over the other objectives.
    order = sorted(points)
    volume = 0.0
    for i, point in enumerate(order):
        upper = order[i + 1][0] if i + 1 < len(order) else bound[0]
        if upper > point[0]:
            section = [p[1:] for p in order[: i + 1]]
            volume += (upper - point[0]) * _volume(section, bound[1:])
    return volume


def hypervolume_by_trial(points: Sequence[Point | None], modes: Sequence[str], reference: Point) -> list[float]:
    """The hypervolume of the first n points for each n (a None point, a trial without a scored value,
    adds nothing). The front is kept as the points come, so a point that it dominates costs no volume."""
    front: list[Point] = []
    history: list[float] = []
    volume = 0.0
    for point in points:
        if point is not None and not any(dominates(q, point, modes) or tuple(q) == tuple(point) for q in front):
            front = [q for q in front if not dominates(point, q, modes)] + [point]
            volume = hypervolume(front, modes, reference)
        history.append(volume)
    return history
