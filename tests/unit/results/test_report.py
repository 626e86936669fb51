"""The sweep's HTML report (``tune_service.results.report``), on a real experiment directory written
without Ray: ``summary.json`` and Tune's per-trial ``result.json``. The page is opened in a real
headless Chromium, which must draw every chart, offline."""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tune_service.experiment.layout import REPORT_FILE, trial_results_file
from tune_service.results import sweep_result
from tune_service.results.report import MIN_TRIALS_FOR_IMPORTANCE, parameter_importance, write_report
from tune_service.results.sweep_result import SweepResult, TrialRecord
from tune_service.spec.sweep import ConstraintSpec

CHARTS = ("learning_curves", "parallel_coordinates", "importance", "best_by_trial", "best_by_compute")
METRIC = "val_loss"
MAX_T = 4


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.fail("the report test needs a headless Chromium: apt-get install -y chromium")
    return found


def write_trial(experiment: Path, trial_id: str, losses: list[float], seconds_per_epoch: float = 1.5) -> None:
    """Tune's result.json: one JSON object a line, one line per report."""
    path = trial_results_file(experiment, trial_id)
    path.parent.mkdir(parents=True)
    lines = [json.dumps({"epoch": e, METRIC: loss, "training_iteration": e, "time_total_s": e * seconds_per_epoch,
                         "trial_id": trial_id}) for e, loss in enumerate(losses, 1)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def record(trial_id: str, status: str, config: dict, losses: list[float], error: str | None = None) -> TrialRecord:
    metrics = {} if status == "failed" or not losses else {METRIC: losses[-1], "epoch": len(losses)}
    return TrialRecord(trial_id, status, config, metrics, len(losses), error)


def sweep(experiment: Path, trials: list[tuple[TrialRecord, list[float]]], rungs=(1, 2)) -> SweepResult:
    for trial, losses in trials:
        if losses:
            write_trial(experiment, trial.trial_id, losses)
    records = [t for t, _ in trials]
    best = sweep_result.best_trial(records, METRIC, "min")
    result = SweepResult(str(experiment), METRIC, "min", tuple(records), best, {"max_t": MAX_T, "rungs": list(rungs)})
    sweep_result.write(result)
    return sweep_result.load(experiment)  # as `tune-run report DIR` will: from the directory


def small_sweep(experiment: Path) -> SweepResult:
    """Eight trials: completed ones, stopped at the rungs, one failed after a report, one failed before
    any; a nested config, a categorical value that needs escaping."""
    rng = random.Random(0)
    trials = []
    for i in range(8):
        lr = 10 ** rng.uniform(-4, -1)
        config = {"optimizer": {"lr": lr}, "width": ["<b>narrow</b>", "wide & deep"][i % 2], "seed": 7}
        final = abs(lr - 0.01) * 10 + 0.1
        losses = [final + 1.0 / e for e in range(1, MAX_T + 1)]
        if i in (1, 2):
            trials.append((record(f"0000{i}", "stopped", config, losses[:i]), losses[:i]))
        elif i == 5:
            trials.append((record("00005", "failed", config, losses[:2], "RuntimeError: CUDA error"), losses[:2]))
        elif i == 6:
            trials.append((record("00006", "failed", config, [], "ValueError: bad <config>"), []))
        else:
            trials.append((record(f"0000{i}", "completed", config, losses), losses))
    return sweep(experiment, trials)


class Charts(HTMLParser):
    """The rendered DOM's chart containers: their attributes and whether each holds plotly's SVG."""

    VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str | None] = []  # per open element: the chart it starts, if any
        self.attrs: dict[str, dict[str, str | None]] = {}
        self.svg: set[str] = set()
        self.notes: set[str] = set()

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        classes = (attributes.get("class") or "").split()
        chart = attributes.get("data-chart") if tag == "div" and "chart" in classes else None
        if chart:
            self.attrs[chart] = attributes
        if "note" in classes and attributes.get("data-chart"):
            self.notes.add(attributes["data-chart"])
        inside = next((c for c in reversed(self.stack) if c), None)
        if tag == "svg" and "main-svg" in classes and inside:
            self.svg.add(inside)
        if tag not in self.VOID:
            self.stack.append(chart)

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag not in self.VOID:
            self.stack.pop()

    def handle_endtag(self, tag):
        if tag not in self.VOID and self.stack:
            self.stack.pop()


def rendered_dom(page: Path, profile: Path) -> str:
    command = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--enable-unsafe-swiftshader",
               f"--user-data-dir={profile}", "--virtual-time-budget=10000", "--dump-dom", page.resolve().as_uri()]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_the_report_is_one_offline_page_on_which_a_browser_draws_every_chart(tmp_path):
    result = small_sweep(tmp_path / "exp")
    page = write_report(result)
    assert page == tmp_path / "exp" / REPORT_FILE

    text = page.read_text(encoding="utf-8")
    assert not re.search(r"<script[^>]*\ssrc\s*=\s*[\"']?https?:", text, re.I), "a script from the network"
    assert not re.search(r"<link[^>]*\shref\s*=\s*[\"']?https?:", text, re.I), "a stylesheet from the network"
    assert text.count("Plotly.newPlot(") == len(CHARTS)

    parser = Charts()
    parser.feed(rendered_dom(page, tmp_path / "profile"))
    assert set(parser.attrs) == set(CHARTS), parser.attrs
    assert not parser.notes
    assert parser.svg == set(CHARTS), f"charts without plotly's SVG: {set(CHARTS) - parser.svg}"
    rendered = {chart: parser.attrs[chart].get("data-rendered") for chart in CHARTS}
    assert all(rendered.values()), f"charts the page did not finish drawing: {rendered}"
    with_history = sum(bool(t.epochs) for t in result.trials)  # every trial but the one failed before a report
    assert rendered["learning_curves"] == str(with_history) == "7"
    assert rendered["parallel_coordinates"] == "1"
    assert rendered["best_by_trial"] == rendered["best_by_compute"] == "3"  # completed, stopped; the best so far

    table = text[text.index('<table id="trials">'):]
    assert table.count("<tr") == 1 + len(result.trials)
    assert "&lt;b&gt;narrow&lt;/b&gt;" in table and "wide &amp; deep" in table and "<b>narrow" not in table
    assert "ValueError: bad &lt;config&gt;" in table
    assert 'class="best"' in table and "optimizer.lr" in table and "seed" not in table  # only searched keys


@pytest.mark.parametrize("shape", ["single trial", "nothing searched", "all failed"])
def test_a_report_of_a_degenerate_sweep_says_what_it_cannot_draw(tmp_path, shape):
    if shape == "single trial":
        trials = [(record("00000", "completed", {"lr": 0.1}, [0.5, 0.4]), [0.5, 0.4])]
        drawn, noted = {"learning_curves", "best_by_trial", "best_by_compute"}, {"parallel_coordinates", "importance"}
    elif shape == "nothing searched":
        trials = [(record(f"0000{i}", "completed", {"lr": 0.1}, [0.5, 0.4 - i / 100]), [0.5, 0.4 - i / 100])
                  for i in range(5)]
        drawn, noted = {"learning_curves", "best_by_trial", "best_by_compute"}, {"parallel_coordinates", "importance"}
    else:
        trials = [(record(f"0000{i}", "failed", {"lr": i}, [0.5]), [0.5]) for i in range(3)]
        drawn, noted = {"learning_curves"}, {"parallel_coordinates", "importance", "best_by_trial", "best_by_compute"}
    text = write_report(sweep(tmp_path, trials, rungs=())).read_text(encoding="utf-8")
    assert set(re.findall(r'<div class="chart" data-chart="(\w+)"', text)) == drawn
    assert set(re.findall(r'<p class="note" data-chart="(\w+)"', text)) == noted
    assert text.count("<tr") == 1 + len(trials)


def test_importance_ranks_the_parameter_that_decides_the_metric_above_noise(tmp_path):
    rng = random.Random(1)
    trials = []
    for i in range(16):
        config = {"lr": 10 ** rng.uniform(-4, -1), "noise": rng.uniform(0, 1), "act": rng.choice(["relu", "gelu"])}
        loss = (config["lr"] - 0.01) ** 2 * 1e4 + 0.05
        trials.append(record(f"{i:05d}", "completed", config, [loss]))
    trials.append(record("00016", "failed", {"lr": 0.01, "noise": 0.5, "act": "relu"}, [9.0]))
    result = SweepResult(str(tmp_path), METRIC, "min", tuple(trials))
    shares = parameter_importance(result)
    assert shares is not None and list(shares)[0] == "lr", shares
    assert shares["lr"] > 0.5 > shares["noise"] and shares["lr"] > shares["act"]
    assert abs(sum(shares.values()) - 1) < 1e-9

    few = SweepResult(str(tmp_path), METRIC, "min", tuple(trials[:MIN_TRIALS_FOR_IMPORTANCE - 1]))
    assert parameter_importance(few) is None


def test_a_sweep_without_a_metric_gets_a_one_line_refusal_not_a_crash(tmp_path):
    """A W&B program's sweep may have no metric (issue 38): its report is refused, saying where the trials are."""
    from tune_service.errors import TuneServiceError

    result = SweepResult(str(tmp_path), None, None, tuple(small_sweep(tmp_path).trials))
    with pytest.raises(TuneServiceError, match=r"has no metric .* `tune-run results DIR` lists them"):
        write_report(result)
    assert not (tmp_path / "report.html").exists()


def test_a_population_shows_each_trials_schedule_and_the_best_trials_family_tree(tmp_path):
    """Three trials of a PBT sweep: b takes a's weights at epoch 2, c takes b's at epoch 4 (b had exploited
    once then), b later takes a's again. The best, c, was trained by a, then b, then itself."""
    experiment = tmp_path / "pbt"
    first = {"a": 0.03, "b": 0.001, "c": 0.002}
    schedules = {  # each trial's lr at each epoch it reported, as Tune's result.json rows carry it
        "a": [0.03] * 6, "b": [0.001, 0.001, 0.036, 0.036, 0.036, 0.036, 0.024], "c": [0.002] * 4 + [0.0288] * 2,
    }
    epochs = {"a": [1, 2, 3, 4, 5, 6], "b": [1, 2, 3, 4, 5, 6, 6], "c": [1, 2, 3, 4, 5, 6]}
    losses = {"a": 0.30, "b": 0.25, "c": 0.20}
    for trial_id, lrs in schedules.items():
        path = trial_results_file(experiment, trial_id)
        path.parent.mkdir(parents=True)
        path.write_text("".join(json.dumps({"epoch": e, METRIC: losses[trial_id] + 1 / e, "training_iteration": i,
                                            "config": {"lr": lr}, "trial_id": trial_id}) + "\n"
                                for i, (e, lr) in enumerate(zip(epochs[trial_id], lrs, strict=True), 1)))
    lineage = {
        "b": [{"epoch": 2, "donor": "a", "donor_exploits": 0, "config": {"lr": 0.036}},
              {"epoch": 5, "donor": "a", "donor_exploits": 0, "config": {"lr": 0.024}}],
        "c": [{"epoch": 4, "donor": "b", "donor_exploits": 1, "config": {"lr": 0.0288}}],
    }
    records = [TrialRecord(t, "completed", {"lr": schedules[t][-1]}, {METRIC: losses[t] + 1 / 6, "epoch": 6}, 6,
                           lineage=lineage.get(t, [])) for t in first]
    result = SweepResult(str(experiment), METRIC, "min", tuple(records),
                         sweep_result.best_trial(records, METRIC, "min"), {"max_t": 6})
    sweep_result.write(result)
    page = write_report(sweep_result.load(experiment))

    parser = Charts()
    parser.feed(rendered_dom(page, tmp_path / "profile"))
    assert set(parser.attrs) == {*CHARTS, "schedules"} - {"importance"}  # (too few trials to rank parameters)
    assert "schedules" in parser.svg
    assert parser.attrs["schedules"].get("data-rendered") == "4"  # a step line per trial, and the family's
    text = page.read_text(encoding="utf-8")
    family = text[text.index('<table id="family">'):]
    family = family[:family.index("</table>")]
    assert re.findall(r"<tr><td>(\w+)</td><td>([\d-]+)</td><td>([\d.]+)</td></tr>", family) == [
        ("a", "1-2", "0.03"), ("b", "3-4", "0.036"), ("c", "5-6", "0.0288")]


def test_a_sweep_without_a_lineage_has_no_population_section(tmp_path):
    text = write_report(small_sweep(tmp_path / "exp")).read_text(encoding="utf-8")
    assert 'data-chart="schedules"' not in text and 'id="family"' not in text


def test_a_sweep_of_many_trials_draws_the_best_one_by_one_and_says_how_it_summarised_the_rest(tmp_path, monkeypatch):
    """The limits that keep a report of thousands of trials light, made small: the best trials' curves one by
    one and the rest as a band, the best lines of the parallel coordinates, the best rows of
    the table (each summary said on the page), the importance on a seeded sample."""
    from tune_service.results import report

    monkeypatch.setattr(report, "CURVES_ONE_BY_ONE", 4)
    monkeypatch.setattr(report, "PARALLEL_LINES", 5)
    monkeypatch.setattr(report, "TABLE_ROWS", 6)
    monkeypatch.setattr(report, "IMPORTANCE_SAMPLE", 9)
    rng = random.Random(2)
    trials = []
    for i in range(14):
        lr = 10 ** rng.uniform(-4, -1)
        losses = [abs(lr - 0.01) * 10 + 0.1 + 1.0 / e for e in range(1, MAX_T + 1)][:[1, 2, MAX_T][i % 3]]
        status = "completed" if len(losses) == MAX_T else "stopped"
        trials.append((record(f"{i:05d}", status, {"lr": lr, "noise": rng.uniform(0, 1)}, losses), losses))
    result = sweep(tmp_path / "exp", trials)
    page = write_report(result)
    text = page.read_text(encoding="utf-8")

    parser = Charts()
    parser.feed(rendered_dom(page, tmp_path / "profile"))
    rendered = {chart: parser.attrs[chart].get("data-rendered") for chart in CHARTS}
    assert all(rendered.values()), f"charts the page did not finish drawing: {rendered}"
    assert rendered["learning_curves"] == str(4 + 3)  # the best 4, then the others' band: its two edges, its median
    assert rendered["best_by_trial"] == rendered["best_by_compute"] == "3"  # completed, stopped; the best so far
    assert "The best 4 of 14 trials are drawn one by one" in text and "the other 10 as a band" in text
    assert "The best 5 of the 14 trials with a final value" in text
    table = text[text.index('<table id="trials">'):]
    assert table.count("<tr") == 1 + 6 and "The best 6 of 14 trials" in text
    assert f"tune-run results {tmp_path / 'exp'} --top 14" in text
    first_row = table[table.index("<tbody>"):].split("</tr>")[0]
    assert result.best.trial_id in first_row and 'class="best"' in first_row
    sampled = parameter_importance(result)
    assert sampled is not None and sampled == parameter_importance(result)  # seeded: the same each time


MO_CHARTS = ("learning_curves", "parallel_coordinates", "importance", "pareto_front", "hypervolume_by_trial",
             "hypervolume_by_compute")


def test_a_sweep_of_several_objectives_draws_its_front_faded_and_its_hypervolume_in_a_browser(tmp_path):
    """Loss against width (a trade: wider trials reach lower losses), with a constraint on a third metric."""
    experiment, trials = tmp_path / "exp", []
    for i, (width, final, memory) in enumerate([(8, 0.9, 1), (16, 0.5, 1), (32, 0.6, 1), (64, 0.2, 1),
                                               (128, 0.1, 9), (16, 0.95, 1), (64, 0.4, 1)]):
        losses = [final + 1.0 / e for e in range(1, MAX_T + 1)]
        write_trial(experiment, f"0000{i}", losses)
        metrics = {METRIC: losses[-1], "width": width, "memory": memory, "epoch": MAX_T}
        trials.append(TrialRecord(f"0000{i}", "completed", {"width": width, "lr": 0.01 * (i + 1)}, metrics, MAX_T))
    objectives = [(METRIC, "min"), ("width", "min")]
    bounded = [ConstraintSpec("memory", max=4)]
    extra = {"max_t": MAX_T, "rungs": [], **sweep_result.ranking_entry(objectives, bounded)}
    sweep_result.write(SweepResult(str(experiment), METRIC, "min", tuple(trials), None, extra))
    result = sweep_result.load(experiment)
    assert [t.trial_id for t in result.pareto] == ["00003", "00001", "00000"]  # 00004 breaks memory <= 4

    page = write_report(result)
    parser = Charts()
    parser.feed(rendered_dom(page, tmp_path / "profile"))
    assert set(parser.attrs) == set(MO_CHARTS), parser.attrs
    rendered = {chart: parser.attrs[chart].get("data-rendered") for chart in MO_CHARTS}
    assert all(rendered.values()), f"charts the page did not finish drawing: {rendered}"
    assert rendered["pareto_front"] == "3"  # the front, the dominated, the infeasible
    text = page.read_text(encoding="utf-8")
    assert "front (3)" in text and "dominated (3)" in text and "infeasible (1)" in text
    value, reference = result.hypervolume
    saved = json.loads((experiment / "summary.json").read_text())["hypervolume"]
    assert saved == {"value": value, "reference": list(reference)} and value > 0
    feasible = [t.metrics[METRIC] for t in trials if t.metrics["memory"] <= 4]
    # each objective's worst feasible value, a tenth of its range further out
    assert reference == pytest.approx((max(feasible) + 0.1 * (max(feasible) - min(feasible)), 64 + 0.1 * (64 - 8)))
    assert "Against the reference point" in text and "Best value by trial" not in text
