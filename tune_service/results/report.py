"""A sweep's report: one self-contained HTML page (``report.html`` in the experiment directory) that
opens offline, in any browser, with no server and no network: plotly.js is inlined once, every chart
is drawn from data in the page.

What it shows, each chart in a ``<div class="chart" data-chart="NAME">`` (a chart that cannot be
drawn is a ``<p class="note" data-chart="NAME">`` saying why):

- ``learning_curves``: the sweep's metric per epoch, one line per trial that reported (from Tune's
  ``trial_<id>/result.json``, :func:`tune_service.results.analysis.metric_by_time`), coloured by the
  trial's final status, the best trial drawn thick; the scheduler's rungs (``extra["rungs"]``) dashed;
- ``parallel_coordinates``: one line per trial with a final value, across the searched parameters (the
  config keys, flattened, whose values differ between trials) and the metric, coloured by the metric;
  categorical values get one tick each, positive values spanning 100x or more a log10 axis;
- ``importance``: how much each searched parameter decides the final metric (:func:`parameter_importance`);
- ``best_by_trial``: each trial's final value and the best so far, in trial order;
- a sweep of several objectives has, in place of the two best-value charts, ``pareto_front`` (the trials
  over the first two objectives: the front bright and joined, the dominated faded, the infeasible grey)
  and ``hypervolume_by_trial`` and ``hypervolume_by_compute`` (:mod:`~tune_service.results.front`);
- ``best_by_compute``: the same against the compute spent, the cumulative trial-epochs of the trials
  so far in trial order (or their cumulative trial time, from the last report's ``time_total_s``:
  a toggle on the chart when every trial that reported has it);
- ``schedules`` (population-based training only: a trial has a lineage): each hyperparameter PBT changed,
  over the epochs, one step line per trial (its own config at each epoch it reported) and, thick, the
  schedule the best trial's weights were trained with, through its donors
  (:func:`tune_service.results.lineage.schedule`); below it the best trial's family tree
  (``<table id="family">``): which trial trained its weights over which epochs, with which values;
- the trial table (``<table id="trials">``): every trial, its status, epochs, final value, time,
  searched parameters and error, best first; a click on a header sorts by that column.

A sweep of thousands of trials keeps the page light (it opens in a few seconds, its charts in a few
tens of MB): above :data:`CURVES_ONE_BY_ONE` trials, the learning curves draw the best that many one by
one (each with its hover) and the rest as a band (their median and 10-90 % range at each epoch, or
step); the parallel coordinates draw the best :data:`PARALLEL_LINES`; the best-value charts draw their
points with WebGL (one canvas, not an SVG node a trial); above :data:`TABLE_ROWS`, the
table lists the best that many and says how to list the rest (``tune-run results DIR --top N``,
``load_results(DIR).trials``); the importance is estimated on a seeded sample of
:data:`IMPORTANCE_SAMPLE` trials. Each chart that summarises says so under it. The other charts show
every trial.

When the page has drawn a chart, the chart's div gets ``data-rendered="N"``, N its number of traces
(a check for a headless browser). A failed trial has no final value: it is drawn where it reported
(learning curves, table) and left out of the rest.
"""

from __future__ import annotations

import html
import itertools
import json
import math
from pathlib import Path
from typing import Any, NamedTuple

from tune_service.errors import TuneServiceError
from tune_service.experiment.layout import REPORT_FILE, atomic_write, read_trial_results, trial_results_file
from tune_service.results.analysis import metric_by_time
from tune_service.results.front import hypervolume_by_trial
from tune_service.results.lineage import schedule
from tune_service.results.sweep_result import (
    SweepResult,
    TrialRecord,
    feasible,
    final_value,
    format_value,
    is_number,
    rank_trials,
)
from tune_service.spec.configs import flatten

#: Fewer trials with a final value than this: no importance chart, a note instead.
MIN_TRIALS_FOR_IMPORTANCE = 4
#: More trials than this: the learning curves draw the best this many one by one, the rest as a band.
CURVES_ONE_BY_ONE = 200
#: The most points the band of the trials not drawn one by one has (their times binned past that).
SPREAD_POINTS = 200
#: More trials with a final value than this: the parallel coordinates draw the best this many.
PARALLEL_LINES = 1000
#: More trials than this: the table lists the best this many.
TABLE_ROWS = 500
#: More trials with a final value than this: the importance is estimated on a seeded sample this big.
IMPORTANCE_SAMPLE = 2000
STATUS_COLOURS = {
    "completed": "#2ca02c",
    "stopped": "#ff7f0e",
    "failed": "#d62728",
    "interrupted": "#7f7f7f",
    "running": "#1f77b4",
}
_OTHER_COLOUR = "#17becf"
_PLOTLY_CONFIG = {"displaylogo": False, "responsive": True}
#: Run once a chart is drawn (plotly's promise resolved): marks its container with the trace count.
_RENDERED = (
    "var gd = document.getElementById('{plot_id}');"
    " gd.closest('.chart').setAttribute('data-rendered', String(gd.data.length));"
)


def write_report(result: SweepResult, path: Path | None = None) -> Path:
    """Write the report of ``result`` to ``path`` (default: ``report.html`` in its experiment
    directory), atomically; the path written."""
    path = Path(result.experiment_dir) / REPORT_FILE if path is None else Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, render_report(result))
    return path


def render_report(result: SweepResult) -> str:
    """The report's HTML.

    Raises:
        TuneServiceError: the sweep has no metric (a W&B program's sweep without one): nothing to chart.
    """
    if result.metric is None:
        raise TuneServiceError(
            f"report: the sweep in {result.experiment_dir} has no metric (its spec has no metric:), so its "
            "trials have nothing to chart or rank; `tune-run results DIR` lists them with what each logged"
        )
    trials = _trials(result)
    keys = searched_parameters(result.trials)
    page = _Page()
    page.section("Learning curves", "learning_curves", *_learning_curves(result, trials, keys))
    page.section("Parallel coordinates", "parallel_coordinates", *_parallel_coordinates(result, keys))
    page.section("Parameter importance", "importance", *_importance(result, keys))
    if result.multi_objective:
        page.section("Pareto front", "pareto_front", *_pareto_front(result, keys))
        page.section("Hypervolume by trial", "hypervolume_by_trial", *_hypervolume_by(result, trials, "trial"))
        page.section("Hypervolume by compute", "hypervolume_by_compute", *_hypervolume_by(result, trials, "compute"))
    else:
        page.section("Best value by trial", "best_by_trial", *_best_by_trial(result, trials))
        page.section("Best value by compute", "best_by_compute", *_best_by_compute(result, trials))
    if any(t.lineage for t in result.trials):
        family = _family(result, trials)
        page.section("Population: hyperparameter schedules", "schedules", *_schedules(result, trials, family))
        page.body.append(f"<section><h2>Family tree of the best trial</h2>{_family_table(result, family)}</section>")
    page.body.append(f"<section><h2>Trials</h2>{_table(result, trials, keys)}</section>")
    return page.html(f"Sweep report: {Path(result.experiment_dir).name}", _header(result))


# -- the data ---------------------------------------------------------------------------------------


def _metric(result: SweepResult) -> str:
    """The sweep's metric, which the report's charts and table show (a sweep without one has no report)."""
    assert result.metric is not None, "a sweep without a metric has no report"
    return result.metric


def _mode(result: SweepResult) -> str:
    """``min`` or ``max``: a sweep with a metric has its mode."""
    assert result.mode is not None, "a sweep without a metric has no report"
    return result.mode


class _Trial:
    """A trial with what its ``result.json`` says: its curve, its own time, and its config at each time
    (flattened; the last report of a time counts, as for the curve) and at its first report."""

    def __init__(
        self,
        record: TrialRecord,
        history: list[tuple[int, float]],
        seconds: float | None,
        value: float | None,
        configs: list[tuple[int, dict[str, Any]]],
        first_config: dict[str, Any],
    ):
        self.record, self.history, self.seconds, self.value = record, history, seconds, value
        self.configs, self.first_config = configs, first_config


def _trials(result: SweepResult) -> list[_Trial]:
    trials = []
    for record in result.trials:
        rows = read_trial_results(trial_results_file(result.experiment_dir, record.trial_id))
        seconds = rows[-1].get("time_total_s") if rows else None
        seconds = float(seconds) if is_number(seconds) else None
        history = metric_by_time(rows, result.metric, result.time_unit)
        configs = {
            int(row[result.time_unit]): flatten(row["config"])
            for row in rows
            if is_number(row.get(result.time_unit)) and isinstance(row.get("config"), dict)
        }
        first = rows[0].get("config") if rows else None
        first_config = first if isinstance(first, dict) else record.config
        trial = _Trial(
            record, history, seconds, final_value(record, result.metric), sorted(configs.items()), first_config
        )
        trials.append(trial)
    return trials


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def searched_parameters(trials) -> list[str]:
    """The flattened config keys (``opt.lr``) whose values differ between trials, sorted."""
    configs = [flatten(t.config) for t in trials]
    keys = {k for c in configs for k in c}
    return sorted(k for k in keys if len({_key(c.get(k)) for c in configs}) > 1)


class _Axis(NamedTuple):
    """One parameter's values as numbers (for an axis or a model) and the axis's ticks (None: the
    axis labels itself)."""

    values: list[float]
    tickvals: list[float] | None = None
    ticktext: list[str] | None = None
    log: bool = False


def _encode(values: list[Any]) -> _Axis:
    """Numbers stay numbers, on a log10 axis when they look log-distributed (:func:`_looks_log`);
    anything else, or a column with gaps (a parameter some configs lack), is categorical: one index
    per distinct value."""
    if all(is_number(v) and math.isfinite(v) for v in values):
        if not _looks_log(values):
            return _Axis([float(v) for v in values])
        low, high = math.log10(min(values)), math.log10(max(values))
        ticks = [float(e) for e in range(math.ceil(low), math.floor(high) + 1)]  # the decades inside
        ticks = sorted(ticks + [end for end in (low, high) if all(abs(end - t) > 0.25 for t in ticks)])
        return _Axis([math.log10(v) for v in values], ticks, [f"{10**t:.3g}" for t in ticks], log=True)
    labels = sorted({_key(v) for v in values})
    index = {label: float(i) for i, label in enumerate(labels)}
    return _Axis([index[_key(v)] for v in values], list(index.values()), [_short(json.loads(x)) for x in labels])


def _looks_log(values: list[float]) -> bool:
    """Positive, spanning 100x or more, and bunched at the bottom of a linear axis (the median in its
    lowest tenth): a log-uniform learning rate is, a uniform dropout from near 0 is not."""
    low, high = min(values), max(values)
    if low <= 0 or high / low < 100:
        return False
    ordered = sorted(values)
    return ordered[len(ordered) // 2] - low < 0.1 * (high - low)


def _short(value: Any) -> str:
    """A value as a short label (parcoords' tick labels are plain text: not escaped here)."""
    text = "-" if value is None else value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= 24 else text[:23] + "…"


def parameter_importance(result: SweepResult) -> dict[str, float] | None:
    """Each searched parameter's share of the importance for the final metric, largest first; None
    when it cannot be estimated (fewer than :data:`MIN_TRIALS_FOR_IMPORTANCE` trials with a final
    value, no searched parameter, or a metric that does not vary).

    The method: a random forest (scikit-learn's ``RandomForestRegressor``, 100 trees, fixed seed)
    fitted on (config -> the rank of the trial's final value) over the trials with a final value
    (failed ones left out), then permutation importance on it: how much the forest's fit worsens when
    one parameter's column is shuffled (10 repeats). Permutation rather than the forest's impurity
    importance, which favours parameters with many distinct values (a float learning rate over a
    two-way choice); ranks rather than values, so that one diverged trial does not decide everything.
    Numbers are used as they are, anything else ordinal-encoded (trees split an ordinal code as well
    as a one-hot one, and one column keeps one importance per parameter). Negative importances (noise)
    count as 0; the rest is scaled to sum to 1. Trials stopped early are compared on their last value,
    as the leaderboard does. Of more than :data:`IMPORTANCE_SAMPLE` such trials, a sample that many
    (seeded, so a report is the same each time) is used: the forest's cost grows with the trials, and
    the shares of a few parameters settle long before.
    """
    usable = [t for t in result.trials if final_value(t, result.metric) is not None]
    if len(usable) > IMPORTANCE_SAMPLE:
        import random

        usable = random.Random(0).sample(usable, IMPORTANCE_SAMPLE)
    keys = searched_parameters(usable)
    values = [final_value(t, result.metric) for t in usable]
    if len(usable) < MIN_TRIALS_FOR_IMPORTANCE or not keys or len(set(values)) < 2:
        return None
    import numpy as np
    from scipy.stats import rankdata
    from sklearn.ensemble import RandomForestRegressor
    from sklearn.inspection import permutation_importance

    configs = [flatten(t.config) for t in usable]
    columns = [_encode([c.get(k) for c in configs]).values for k in keys]
    x = np.array(columns, dtype=float).T
    y = rankdata(values)
    forest = RandomForestRegressor(n_estimators=100, min_samples_leaf=2, random_state=0, n_jobs=1).fit(x, y)
    found = permutation_importance(forest, x, y, n_repeats=10, random_state=0).importances_mean
    shares = np.clip(found, 0.0, None)
    total = float(shares.sum())
    if total <= 0.0:
        return None
    ranked = sorted(zip(keys, (float(s) / total for s in shares), strict=True), key=lambda pair: -pair[1])
    return dict(ranked)


# -- the charts: each returns (figure, None) or (None, a note) --------------------------------------


def _figure(**layout: Any):
    import plotly.graph_objects as go

    figure = go.Figure()
    figure.update_layout(
        template="plotly_white",
        height=460,
        margin=dict(l=60, r=30, t=30, b=50),
        legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0),
    )
    figure.update_layout(**layout)
    return figure


def _hover_config(record: TrialRecord, keys: list[str]) -> str:
    config = flatten(record.config)
    return "<br>".join(f"{html.escape(k)}={html.escape(_short(config.get(k)))}" for k in keys)


def _learning_curves(result: SweepResult, trials: list[_Trial], keys: list[str]):
    import plotly.graph_objects as go

    drawn = [t for t in trials if t.history]
    if not drawn:
        return None, "No trial has reports (trial_<id>/result.json) with the metric."
    rungs = [r for r in result.extra.get("rungs", []) if is_number(r)]
    unit = result.time_unit
    figure = _figure(
        xaxis_title=unit + (" (dashed: the scheduler's rungs)" if rungs else ""),
        yaxis_title=html.escape(_metric(result)),
        hovermode="closest",
    )
    best_id = result.best.trial_id if result.best else None
    one_by_one, rest = _curves_one_by_one(result, drawn)
    legend_shown = set()
    for trial in sorted(one_by_one, key=lambda t: t.record.trial_id == best_id):  # the best drawn last, on top
        status, best = trial.record.status, trial.record.trial_id == best_id
        times, values = zip(*trial.history, strict=True)
        figure.add_trace(
            go.Scatter(
                x=list(times),
                y=list(values),
                mode="lines+markers",
                name=f"best: {html.escape(trial.record.trial_id)}" if best else status,
                legendgroup="best" if best else status,
                showlegend=best or status not in legend_shown,
                line=dict(color=STATUS_COLOURS.get(status, _OTHER_COLOUR), width=4 if best else 1.5),
                marker=dict(size=6 if best else 4),
                opacity=1.0 if best else 0.75,
                hovertemplate=(
                    f"trial {html.escape(trial.record.trial_id)} ({status})<br>{unit} %{{x}}: %{{y:.4g}}"
                    f"<br>{_hover_config(trial.record, keys)}<extra></extra>"
                ),
            )
        )
        if not best:
            legend_shown.add(status)
    if rest:
        at, low, middle, high = _spread(rest)
        band = dict(x=at, mode="lines", hoverinfo="skip", legendgroup="rest")
        figure.add_trace(go.Scatter(y=low, line=dict(width=0), showlegend=False, **band))
        figure.add_trace(
            go.Scatter(
                y=high,
                line=dict(width=0),
                fill="tonexty",
                fillcolor="rgba(120,120,120,0.25)",
                name=f"the other {len(rest)}: 10-90 %",
                **band,
            )
        )
        figure.add_trace(
            go.Scatter(y=middle, line=dict(color="#555", dash="dot", width=2), name="the other trials: median", **band)
        )
    note = None
    if rest:
        note = (
            f"The best {len(one_by_one)} of {len(drawn)} trials are drawn one by one (hover for each config); "
            f"the other {len(rest)} as a band: at each {unit}, the median (dotted) and the 10th to 90th "
            f"percentile of the values of those that reached it."
        )
    for rung in rungs:
        figure.add_vline(
            x=rung,
            line=dict(color="#999", dash="dash", width=1),
            annotation_text=f"rung {rung:g}",
            annotation_position="top right",
            annotation_font=dict(size=10, color="#666"),
        )
    return figure, note


def _curves_one_by_one(result: SweepResult, drawn: list[_Trial]) -> tuple[list[_Trial], list[_Trial]]:
    """The trials whose curves are drawn one by one (all, up to :data:`CURVES_ONE_BY_ONE`; else the best
    that many), and the rest; each in their order."""
    if len(drawn) <= CURVES_ONE_BY_ONE:
        return drawn, []
    ranked = rank_trials([t.record for t in drawn], result.metric, result.mode)
    chosen = {r.trial_id for r in ranked[:CURVES_ONE_BY_ONE]}
    return [t for t in drawn if t.record.trial_id in chosen], [t for t in drawn if t.record.trial_id not in chosen]


def _spread(trials: list[_Trial]) -> tuple[list[float], list[float], list[float], list[float]]:
    """At each time the trials reported (in at most :data:`SPREAD_POINTS` bins of equal width when
    they reported at more times than that, as trials by steps do): the time, and the 10th, 50th and
    90th percentile of their values there."""
    import numpy as np

    times = np.array([time for t in trials for time, _ in t.history], dtype=float)
    values = np.array([value for t in trials for _, value in t.history], dtype=float)
    distinct = np.unique(times)
    if len(distinct) > SPREAD_POINTS:
        edges = np.linspace(distinct[0], distinct[-1], SPREAD_POINTS + 1)
        bins = np.clip(np.searchsorted(edges, times, side="right") - 1, 0, SPREAD_POINTS - 1)
        centres = (edges[:-1] + edges[1:]) / 2
        times, distinct = centres[bins], np.unique(centres[bins])
    at = [values[times == time] for time in distinct]
    low, middle, high = (np.array([np.percentile(v, q) for v in at]) for q in (10, 50, 90))
    return distinct.tolist(), low.tolist(), middle.tolist(), high.tolist()


def _parallel_coordinates(result: SweepResult, keys: list[str]):
    import plotly.graph_objects as go

    with_value = rank_trials(
        [t for t in result.trials if final_value(t, result.metric) is not None], result.metric, result.mode
    )
    usable = with_value[:PARALLEL_LINES][::-1]  # the best drawn last, on top
    if not keys:
        return None, "No parameter was searched (every trial has the same config)."
    if len(usable) < 2:
        return None, "Fewer than two trials have a final value."
    note = None
    if len(with_value) > PARALLEL_LINES:
        note = (
            f"The best {PARALLEL_LINES} of the {len(with_value)} trials with a final value: past that many "
            "lines the axes are one colour, and the browser draws them slowly."
        )
    configs = [flatten(t.config) for t in usable]
    dimensions = []
    for key in keys:
        axis = _encode([c.get(key) for c in configs])
        dimension: dict[str, Any] = dict(label=html.escape(key + (" (log)" if axis.log else "")), values=axis.values)
        if axis.tickvals is not None:
            dimension.update(tickvals=axis.tickvals, ticktext=axis.ticktext)
        dimensions.append(dimension)
    scores = [final_value(t, result.metric) for t in usable]
    dimensions.append(dict(label=html.escape(_metric(result)), values=scores))
    left_out = len(result.trials) - len(with_value)
    figure = _figure(margin=dict(l=70, r=70, t=60, b=60))
    figure.add_trace(
        go.Parcoords(
            dimensions=dimensions,
            line=dict(
                color=scores,
                colorscale="Viridis",
                reversescale=result.mode == "min",
                showscale=True,
                colorbar=dict(title=dict(text=html.escape(_metric(result)))),
            ),
            labelangle=0,
        )
    )
    if left_out:
        figure.add_annotation(
            text=f"{left_out} trial(s) without a final value (failed) left out",
            xref="paper",
            yref="paper",
            x=0,
            y=-0.14,
            showarrow=False,
            font=dict(size=11, color="#666"),
        )
    return figure, note


def _importance(result: SweepResult, keys: list[str]):
    import plotly.graph_objects as go

    if not keys:
        return None, "No parameter was searched: nothing to rank."
    shares = parameter_importance(result)
    if shares is None:
        return None, (
            f"Not enough to estimate importance: it needs at least {MIN_TRIALS_FOR_IMPORTANCE} "
            f"trials with a final value of {result.metric} that differ."
        )
    names = list(shares)[::-1]  # the largest on top
    figure = _figure(
        height=max(220, 60 + 36 * len(names)),
        xaxis_title="share of importance",
        xaxis_tickformat=".0%",
        margin=dict(l=160, r=30, t=20, b=50),
    )
    figure.add_trace(
        go.Bar(
            x=[shares[n] for n in names],
            y=[html.escape(n) for n in names],
            orientation="h",
            marker_color="#4c78a8",
            name="importance",
            hovertemplate="%{y}: %{x:.1%}<extra></extra>",
        )
    )
    return figure, None


def _best_steps(values: list[float | None], mode: str | None) -> tuple[list[int], list[float]]:
    """Where the best value so far changes (and the last trial, where the line ends), and that best
    value there: the "best so far" step line, drawn with as many points as it has steps rather than one
    a trial (a sweep of thousands of trials has a few dozen steps)."""
    best: float | None = None
    at: list[int] = []
    bests: list[float] = []
    for i, value in enumerate(values):
        if value is not None and (best is None or (value < best if mode == "min" else value > best)):
            best = value
            at.append(i)
            bests.append(value)
    if at and at[-1] != len(values) - 1 and best is not None:
        at.append(len(values) - 1)
        bests.append(best)
    return at, bests


def _final_values_by_status(trials: list[_Trial]) -> list[tuple[str, list[int]]]:
    """The trials with a final value, by status (sorted): each status's trial indices, in order."""
    groups: dict[str, list[int]] = {}
    for i, trial in enumerate(trials):
        if trial.value is not None:
            groups.setdefault(trial.record.status, []).append(i)
    return sorted(groups.items())


def _best_traces(result: SweepResult, trials: list[_Trial], xs: list[float]):
    """One marker trace per status (a colour a trace, not a colour string a point), then the best so far."""
    import plotly.graph_objects as go

    groups = _final_values_by_status(trials)
    steps, bests = _best_steps([t.value for t in trials], result.mode)
    # WebGL past a few hundred points: one canvas, not a DOM node a trial
    scatter = go.Scattergl if sum(len(i) for _, i in groups) > CURVES_ONE_BY_ONE else go.Scatter
    markers = [
        scatter(
            x=[xs[i] for i in indices],
            y=[trials[i].value for i in indices],
            mode="markers",
            name=f"{status}: a trial's final value",
            marker=dict(size=8, color=STATUS_COLOURS.get(status, _OTHER_COLOUR)),
            text=[html.escape(trials[i].record.trial_id) for i in indices],
            hovertemplate=f"trial %{{text}} ({html.escape(status)})<br>%{{y:.4g}}<extra></extra>",
        )
        for status, indices in groups
    ]
    best = go.Scatter(
        x=[xs[i] for i in steps],
        y=bests,
        mode="lines",
        name="best so far",
        line=dict(color="black", width=2.5, shape="hv"),
        hovertemplate="best so far: %{y:.4g}<extra></extra>",
    )
    return [*markers, best]


def _best_by_trial(result: SweepResult, trials: list[_Trial]):
    if all(t.value is None for t in trials):
        return None, "No trial has a final value."
    figure = _figure(xaxis_title="trial (in the order they were created)", yaxis_title=html.escape(_metric(result)))
    figure.add_traces(_best_traces(result, trials, list(range(1, len(trials) + 1))))
    if len(trials) <= 25:
        figure.update_xaxes(dtick=1)
    return figure, None


def _objective_values(result: SweepResult, record: TrialRecord) -> tuple[float, ...] | None:
    """The trial's value of every objective, when it is scored (feasible, each value finite)."""
    values = [final_value(record, name) for name, _ in result.objectives]
    if any(v is None for v in values) or not feasible(record, result.constraints):
        return None
    return tuple(float(v) for v in values if v is not None)


def _pareto_front(result: SweepResult, keys: list[str]):
    """The trials over the first two objectives: the front's members bright and joined, the dominated
    faded, the infeasible grey (the others' values in each point's hover)."""
    import plotly.graph_objects as go

    (x_name, _), (y_name, _) = result.objectives[:2]
    front = {t.trial_id for t in result.pareto}
    groups: dict[str, list[TrialRecord]] = {"front": [], "dominated": [], "infeasible": []}
    for t in result.trials:
        if final_value(t, x_name) is None or final_value(t, y_name) is None:
            continue
        kind = "front" if t.trial_id in front else "dominated" if feasible(t, result.constraints) else "infeasible"
        groups[kind].append(t)
    if not groups["front"]:
        return None, "No trial has a final value of every objective."
    style = {
        "front": dict(marker=dict(size=10, color="#d62728"), opacity=1.0, mode="markers+lines", line=dict(width=1)),
        "dominated": dict(marker=dict(size=7, color="#1f77b4"), opacity=0.35, mode="markers"),
        "infeasible": dict(marker=dict(size=7, color="#7f7f7f", symbol="x"), opacity=0.5, mode="markers"),
    }
    figure = _figure(xaxis_title=html.escape(x_name), yaxis_title=html.escape(y_name))
    for kind, members in groups.items():
        if not members:
            continue
        members = sorted(members, key=lambda t: t.metrics[x_name]) if kind == "front" else members
        others = [name for name, _ in result.objectives[2:]]
        figure.add_trace(
            go.Scatter(
                x=[t.metrics[x_name] for t in members],
                y=[t.metrics[y_name] for t in members],
                name=f"{kind} ({len(members)})",
                text=[
                    f"{html.escape(t.trial_id)}"
                    + "".join(f"<br>{html.escape(n)}: {format_value(t.metrics.get(n))}" for n in others)
                    + f"<br>{_hover_config(t, keys)}"
                    for t in members
                ],
                hoverinfo="text+x+y",
                **style[kind],
            )
        )
    note = None
    if len(result.objectives) > 2:
        note = f"The first two of {len(result.objectives)} objectives; the others are in each point's hover."
    return figure, note


def _hypervolume_by(result: SweepResult, trials: list[_Trial], against: str):
    """The hypervolume of the trials so far, in trial order, against trials or against compute."""
    measured = result.hypervolume
    if measured is None:
        return None, "No trial has a final value of every objective."
    _, reference = measured
    modes = [mode for _, mode in result.objectives]
    history = hypervolume_by_trial([_objective_values(result, t.record) for t in trials], modes, reference)
    unit = result.time_unit
    xs: list[float]
    if against == "trial":
        xs, title = [float(n) for n in range(1, len(trials) + 1)], "trial (in the order they were created)"
    else:
        xs, title = _cumulative([float(t.record.progress(unit)) for t in trials]), f"compute: cumulative trial-{unit}s"
    import plotly.graph_objects as go

    figure = _figure(xaxis_title=title, yaxis_title="hypervolume")
    figure.add_trace(go.Scatter(x=xs, y=history, mode="lines+markers", line=dict(shape="hv"), name="hypervolume"))
    where = ", ".join(f"{name} {value:.4g}" for (name, _), value in zip(result.objectives, reference, strict=True))
    return (
        figure,
        f"Against the reference point {where}: each objective's worst value, a tenth of its range further out.",
    )


def _cumulative(values: list[float]) -> list[float]:
    total, out = 0.0, []
    for value in values:
        total += value
        out.append(total)
    return out


def _best_by_compute(result: SweepResult, trials: list[_Trial]):
    if all(t.value is None for t in trials):
        return None, "No trial has a final value."
    unit = result.time_unit
    spent = _cumulative([float(t.record.progress(unit)) for t in trials])
    figure = _figure(xaxis_title=f"compute: cumulative trial-{unit}s", yaxis_title=html.escape(_metric(result)))
    figure.add_traces(_best_traces(result, trials, spent))
    timed = all(t.seconds is not None for t in trials if t.history)
    if timed:
        seconds = _cumulative([t.seconds or 0.0 for t in trials])
        traces = [indices for _, indices in _final_values_by_status(trials)]
        traces.append(_best_steps([t.value for t in trials], result.mode)[0])  # the best so far, last

        def view(xs: list[float], title: str, label: str) -> dict[str, Any]:
            return dict(
                label=label,
                method="update",
                args=[{"x": [[xs[i] for i in indices] for indices in traces]}, {"xaxis.title.text": title}],
            )

        figure.update_layout(
            updatemenus=[
                dict(
                    type="buttons",
                    direction="right",
                    x=1.0,
                    xanchor="right",
                    y=1.02,
                    yanchor="bottom",
                    buttons=[
                        view(spent, f"compute: cumulative trial-{unit}s", f"trial-{unit}s"),
                        view(seconds, "compute: cumulative trial time (s)", "trial time"),
                    ],
                )
            ],
            margin=dict(t=60),
        )
    return figure, None


# -- the page -----------------------------------------------------------------------------------------


def _family(result: SweepResult, trials: list[_Trial]) -> list[dict[str, Any]]:
    """The best trial's schedule through its donors (none without a best trial)."""
    if result.best is None:
        return []
    records = {t.record.trial_id: t.record for t in trials}
    first = {t.record.trial_id: t.first_config for t in trials}
    return schedule(result.best.trial_id, records, lambda trial_id: first.get(trial_id, {}))


def _changed_keys(trials: list[_Trial]) -> list[str]:
    """The config keys (flattened) whose value changed within a trial: what PBT mutated."""
    changed: set[str] = set()
    for trial in trials:
        configs = [flatten(trial.first_config), *(flatten(e["config"]) for e in trial.record.lineage)]
        configs += [config for _, config in trial.configs]
        for before, after in itertools.pairwise(configs):
            changed |= {k for k in after if after[k] != before.get(k)}
    return sorted(changed)


def _schedules(result: SweepResult, trials: list[_Trial], family: list[dict[str, Any]]):
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    keys = _changed_keys(trials)
    if not keys:
        return None, "No trial's hyperparameters changed: no exploit has run yet."
    unit = result.time_unit
    figure = make_subplots(rows=len(keys), cols=1, shared_xaxes=True, vertical_spacing=0.06)
    figure.update_layout(
        template="plotly_white",
        height=max(320, 220 * len(keys)),
        margin=dict(l=60, r=20, t=30, b=50),
        hovermode="closest",
    )
    last_epoch = max((time for t in trials for time, _ in t.configs), default=1)
    for row, key in enumerate(keys, 1):
        values = [v for t in trials for _, c in t.configs if is_number(v := c.get(key)) and v > 0]
        if values and _looks_log(values):
            figure.update_yaxes(type="log", row=row, col=1)
        figure.update_yaxes(title_text=html.escape(key), row=row, col=1)
        for number, trial in enumerate(trials):
            times = [time for time, _ in trial.configs]
            figure.add_trace(
                go.Scatter(
                    x=times,
                    y=[c.get(key) for _, c in trial.configs],
                    mode="lines",
                    line=dict(shape="hv", width=1.2, color=STATUS_COLOURS.get(trial.record.status, _OTHER_COLOUR)),
                    opacity=0.6,
                    name=trial.record.status,
                    legendgroup=trial.record.status,
                    showlegend=row == 1 and number == 0,
                    hovertemplate=(
                        f"trial {html.escape(trial.record.trial_id)}<br>{unit} %{{x}}: %{{y:.4g}}<extra></extra>"
                    ),
                ),
                row=row,
                col=1,
            )
        if family:
            xs, ys = [], []
            for segment in family:
                end = segment["to_epoch"] if segment["to_epoch"] is not None else last_epoch
                value = flatten(segment["config"]).get(key)
                xs += [segment["from_epoch"], end]
                ys += [value, value]
            figure.add_trace(
                go.Scatter(
                    x=xs,
                    y=ys,
                    mode="lines+markers",
                    line=dict(shape="hv", width=4, color="#222"),
                    name="the best trial's weights",
                    legendgroup="family",
                    showlegend=row == 1,
                    hovertemplate=f"{html.escape(key)} %{{y:.4g}} at {unit} %{{x}}<extra></extra>",
                ),
                row=row,
                col=1,
            )
    figure.update_xaxes(title_text=unit, row=len(keys), col=1)
    return figure, None


def _family_table(result: SweepResult, family: list[dict[str, Any]]) -> str:
    """The best trial's family tree, one row per trial that trained its weights, oldest first."""
    if not family or result.best is None:
        return '<p class="note">No best trial: no family tree.</p>'
    keys = sorted(
        {k for segment in family for k in flatten(segment["config"])} & set(searched_parameters(result.trials))
    )
    head = "".join(f"<th>{html.escape(h)}</th>" for h in ["trial", f"{result.time_unit}s", *keys])
    rows = []
    for segment in family:
        config = flatten(segment["config"])
        end = segment["to_epoch"] if segment["to_epoch"] is not None else result.best.progress(result.time_unit)
        cells = [segment["trial_id"], f"{segment['from_epoch']}-{end}", *(config.get(k) for k in keys)]
        rows.append("<tr>" + "".join(f"<td>{html.escape(_cell(c))}</td>" for c in cells) + "</tr>")
    return f'<table id="family"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def _table(result: SweepResult, trials: list[_Trial], keys: list[str]) -> str:
    ranked = {t.trial_id: i + 1 for i, t in enumerate(rank_trials(result.trials, result.metric, result.mode))}
    with_errors = any(t.record.error for t in trials)
    header = ["rank", "#", "trial", "status", f"{result.time_unit}s", _metric(result), "time (s)", *keys]
    header += ["error"] if with_errors else []
    best_id = result.best.trial_id if result.best else None
    rows = []
    listed = sorted(enumerate(trials, 1), key=lambda pair: ranked[pair[1].record.trial_id])[:TABLE_ROWS]
    for number, trial in listed:
        record, config = trial.record, flatten(trial.record.config)
        cells = [
            ranked[record.trial_id],
            number,
            record.trial_id,
            record.status,
            record.progress(result.time_unit),
            record.metrics.get(_metric(result)),
            trial.seconds,
            *(config.get(k) for k in keys),
        ]
        cells += [record.error] if with_errors else []
        tds = "".join(
            f'<td data-sort="{html.escape(_sort_key(c))}"{_status_class(i == 3, record.status)}>'
            f"{html.escape(_cell(c))}</td>"
            for i, c in enumerate(cells)
        )
        best = ' class="best"' if record.trial_id == best_id else ""
        rows.append(f"<tr{best}>{tds}</tr>")
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    table = f'<table id="trials"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
    if len(trials) <= TABLE_ROWS:
        return table
    where = html.escape(str(result.experiment_dir))
    return (
        f'<p class="note" data-table="summarised">The best {TABLE_ROWS} of {len(trials)} trials. Every trial: '
        f"<code>tune-run results {where} --top {len(trials)}</code>, or "
        f"<code>tune_service.load_results(&quot;{where}&quot;).trials</code>.</p>{table}"
    )


def _status_class(is_status: bool, status: str) -> str:
    return f' class="status-{html.escape(status)}"' if is_status else ""


def _cell(value: Any) -> str:
    return format_value(value) if not isinstance(value, (dict, list)) else json.dumps(value, default=str)


def _sort_key(value: Any) -> str:
    return repr(float(value)) if is_number(value) else _cell(value)


def _header(result: SweepResult) -> str:
    counts: dict[str, int] = {}
    for t in result.trials:
        counts[t.status] = counts.get(t.status, 0) + 1
    summary = ", ".join(f'<span class="status-{html.escape(s)}">{n} {html.escape(s)}</span>' for s, n in counts.items())
    best = result.best
    best_line = (
        "No trial finished with a usable value."
        if best is None
        else (
            f"Best: trial <b>{html.escape(best.trial_id)}</b>, {html.escape(_metric(result))} = "
            f"<b>{html.escape(format_value(best.metrics.get(_metric(result))))}</b> "
            f"({html.escape(', '.join(f'{k}={_cell(v)}' for k, v in sorted(flatten(best.config).items())))})"
        )
    )
    rungs = result.extra.get("rungs") or []
    return (
        f'<p class="meta">{html.escape(result.experiment_dir)}</p>'
        f"<p>Metric <b>{html.escape(_metric(result))}</b> ({html.escape(_mode(result))}); "
        f"{len(result.trials)} trials: {summary}"
        + (f"; rungs at {result.time_unit}s {html.escape(', '.join(format_value(r) for r in rungs))}" if rungs else "")
        + f".</p><p>{best_line}</p>"
    )


class _Page:
    """The page's body, with plotly.js inlined in the first chart drawn and referenced by the rest."""

    def __init__(self) -> None:
        self.body: list[str] = []
        self.bundled = False

    def section(self, title: str, name: str, figure: Any, note: str | None) -> None:
        if figure is None:
            content = f'<p class="note" data-chart="{name}">{html.escape(note or "")}</p>'
        else:
            import plotly.io as pio

            chart = pio.to_html(
                figure,
                full_html=False,
                include_plotlyjs=not self.bundled,
                div_id=f"chart-{name}",
                config=_PLOTLY_CONFIG,
                post_script=_RENDERED,
            )
            self.bundled = True
            content = f'<div class="chart" data-chart="{name}">{chart}</div>'
            if note:  # what a drawn chart summarises
                content += f'<p class="note" data-summary="{name}">{html.escape(note)}</p>'
        self.body.append(f'<section id="{name}"><h2>{html.escape(title)}</h2>{content}</section>')

    def html(self, title: str, header: str) -> str:
        title = html.escape(title)
        return (
            f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>{title}</title><style>{_CSS}</style></head>"
            f"<body><header><h1>{title}</h1>{header}</header>{''.join(self.body)}"
            f"<script>{_SORT_JS}</script></body></html>\n"
        )


_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 24px auto;
       max-width: 1200px; padding: 0 16px; color: #222; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; } h2 { font-size: 1.15em; margin: 1.6em 0 0.4em; }
.meta { color: #777; font-size: 0.85em; margin-top: 0; }
.note { color: #666; font-style: italic; }
.status-completed { color: #2ca02c; } .status-stopped { color: #e07b00; }
.status-failed { color: #d62728; } .status-interrupted { color: #7f7f7f; } .status-running { color: #1f77b4; }
table { border-collapse: collapse; font-size: 0.85em; width: 100%; }
th, td { border-bottom: 1px solid #e3e3e3; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f5f5f5; cursor: pointer; position: sticky; top: 0; user-select: none; }
tr.best td { background: #fff6d5; font-weight: 600; }
"""

_SORT_JS = """
document.querySelectorAll('#trials th').forEach(function (th, column) {
  th.addEventListener('click', function () {
    var body = th.closest('table').tBodies[0], rows = Array.prototype.slice.call(body.rows);
    var up = th.getAttribute('data-order') !== 'up';
    th.parentNode.querySelectorAll('th').forEach(function (h) { h.removeAttribute('data-order'); });
    th.setAttribute('data-order', up ? 'up' : 'down');
    rows.sort(function (a, b) {
      var x = a.cells[column].getAttribute('data-sort'), y = b.cells[column].getAttribute('data-sort');
      var nx = parseFloat(x), ny = parseFloat(y);
      var c = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);
      return up ? c : -c;
    });
    rows.forEach(function (row) { body.appendChild(row); });
  });
});
"""
