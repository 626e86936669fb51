"""The anytime plot of the search-quality benchmark: each contender's median simple regret against the
trial-epochs spent, one panel per problem and concurrency (:mod:`bench.search.search_quality` records the
curves; matplotlib, of the ``peers`` extra, draws them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: Line style per family of contenders: ours solid, the peers' dashed and dotted.
_STYLES = {"ours": "-", "optuna": "--", "syne tune": ":", "dehb": "-."}


def plot(table: dict[str, dict[str, Any]], spent: list[int], path: Path) -> Path:
    """Draw ``table`` (per ``"<problem>, <n> workers"``, per contender: ``curve_quartiles``, one
    (q1, median, q3) per entry of ``spent``) into a PNG at ``path``; the median lines, log regret, the
    interquartile band of the best of ours and of the best peer by area."""
    import matplotlib

    matplotlib.use("Agg")  # no display: a file
    import matplotlib.pyplot as plt

    keys = list(table)
    columns = 2 if len(keys) > 1 else 1
    rows = -(-len(keys) // columns)
    figure, axes = plt.subplots(rows, columns, figsize=(6.5 * columns, 3.6 * rows), squeeze=False)
    contenders = len(next(iter(table.values()), {}))
    colours = plt.get_cmap("tab10" if contenders <= 10 else "tab20")  # a colour each
    for axis, key in zip(axes.flat, keys):
        by_contender = table[key]

        def best_by_area(names: list[str]) -> str | None:
            return min(names, key=lambda c: by_contender[c]["area_quartiles"][1], default=None)

        banded = {best_by_area([c for c in by_contender if c.startswith("ours")]),
                  best_by_area([c for c in by_contender if not c.startswith("ours")])}
        for index, (name, row) in enumerate(by_contender.items()):
            q1, median, q3 = zip(*row["curve_quartiles"])
            family = name.split(":")[0]
            axis.plot(spent, median, _STYLES.get(family, "-"), color=colours(index % colours.N), linewidth=1.4,
                      label=name)
            if name in banded:
                axis.fill_between(spent, q1, q3, color=colours(index % colours.N), alpha=0.15, linewidth=0)
        axis.set_yscale("log")
        axis.set_title(key)
        axis.set_xlabel("trial-epochs spent")
        axis.set_ylabel("simple regret (median)")
        axis.grid(True, which="major", alpha=0.3)
    for axis in list(axes.flat)[len(keys):]:
        axis.set_visible(False)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="lower center", ncol=5, fontsize="small", frameon=False)
    figure.tight_layout(rect=(0, 0.8 / figure.get_figheight(), 1, 1))  # 0.8 inch for the legend
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
