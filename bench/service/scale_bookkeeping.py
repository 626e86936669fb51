"""Bookkeeping at scale: what the driver does per trial, and what reading a sweep costs, at 10,000 trials.

Two parts, no Ray (issue 43's "bookkeeping of constant cost"; the driver's memory and Tune's own
per-trial state are another benchmark's):

- **Per trial, in the driver.** The driver's own bookkeeping (:class:`SweepProgress`, with the live view
  printing a line per trial to a pipe, as in CI) is fed a sweep of ``--trials`` trials as Tune calls it:
  each trial starts, reports 3 epochs and completes. Its time per trial over the last 1,000 trials is
  compared with the first 1,000 (target: within 10 %). Beside it, side by side in the same run, what the
  previous design paid at each trial's end: ``summary.json`` rewritten whole (the same ``write`` of every
  trial so far), timed with 1,000 and with 10,000 trials behind it.
- **Reading 10,000 trials.** An experiment directory as a sweep leaves it (``sweep.json`` of the
  quickstart's spec, the final ``summary.json``, and each trial's directory with Tune's ``params.json`` and
  a ``result.json`` of 3 reports): ``load_results()`` in this process, ``tune-run results DIR`` and
  ``tune-run report DIR`` as commands, and the report page opened in headless Chromium: the time until
  every chart is drawn (measured in the page, from navigation start) and the page's JavaScript heap then,
  after a garbage collection (``performance.memory.usedJSHeapSize``, with ``--enable-precise-memory-info``
  and ``--expose-gc``), against 10 s and 30 MB.

``python bench/run.py scale_bookkeeping`` (named only: about N minutes); ``--quick`` runs 2,000 trials.
"""

from __future__ import annotations

import io
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from bench.common import figure

ROOT = Path(__file__).resolve().parent.parent.parent
TRIALS, QUICK_TRIALS = 10_000, 2_000
WINDOW = 1_000  # trials: the first and the last are compared
EPOCHS = 3
REWRITE_AT = (1_000, 10_000)  # the previous design's summary rewrite, timed with this many trials behind it
REWRITE_REPEATS = 5
RENDER_TARGET_S, HEAP_TARGET_MB = 10.0, 30.0
#: Appended to a copy of the report: once every chart says it is drawn, the time since navigation start
#: and the JavaScript heap go into the page's title, which ``--dump-dom`` prints.
_PROBE = """<script>
(function wait() {
  var charts = document.querySelectorAll('.chart');
  var drawn = document.querySelectorAll('.chart[data-rendered]');
  if (charts.length && drawn.length === charts.length) {
    var ms = performance.now();
    if (window.gc) { window.gc(); }  // the live heap, not garbage the collector has not reached yet
    document.title = 'PROBE ' + JSON.stringify({ms: ms, charts: charts.length,
      heap: performance.memory.usedJSHeapSize, rows: document.querySelectorAll('table tr').length});
  } else { setTimeout(wait, 20); }
})();
</script></body>"""


def fake_trial(trial_id: str, config: dict[str, Any], last_result: dict[str, Any]) -> SimpleNamespace:
    """What the driver's callbacks read of Tune's Trial."""
    return SimpleNamespace(trial_id=trial_id, config=config, last_result=last_result, checkpoint=None)


def config_of(rng: random.Random) -> dict[str, Any]:
    return {"lr": 10 ** rng.uniform(-4, -1.5), "hidden": rng.choice([32, 64, 128]), "dropout": rng.uniform(0, 0.3),
            "batch_size": rng.choice([32, 64])}


def reports_of(trial_id: str, config: dict[str, Any], rng: random.Random) -> list[dict[str, Any]]:
    """Three epochs' reports as Tune records them (its bookkeeping keys beside the metrics)."""
    quality = rng.uniform(0.5, 0.99)
    rows, started = [], 1.7e9 + rng.uniform(0, 3600)
    for epoch in range(1, EPOCHS + 1):
        accuracy = quality * (1 - 0.5 ** epoch)
        rows.append({"epoch": epoch, "val_accuracy": accuracy, "val_loss": 1 - accuracy, "train_loss": 1.1 - accuracy,
                     "lr": config["lr"], "timestamp": started + epoch, "time_this_iter_s": 0.2,
                     "time_total_s": 0.2 * epoch, "training_iteration": epoch, "trial_id": trial_id,
                     "done": epoch == EPOCHS, "config": config, "pid": 1234, "hostname": "bench",
                     "node_ip": "127.0.0.1", "date": "2026-11-28_00-00-00"})
    return rows


def driver_bookkeeping(trials: int, directory: Path) -> dict[str, Any]:
    """Per-trial time of the driver's bookkeeping over a sweep of ``trials`` trials, and the previous
    design's summary rewrite beside it."""
    from rich.console import Console

    from tune_service.display import LiveView
    from tune_service.results.progress import SweepProgress
    from tune_service.results.sweep_result import SweepResult, TrialRecord, write

    rng = random.Random(0)
    console = Console(file=io.StringIO(), width=120, highlight=False)
    view = LiveView(["bench"], rungs=(1, 3), console=console, live=False)
    progress = SweepProgress(directory, "val_accuracy", "max", max_t=EPOCHS, total=trials, observers=[view])
    progress.start()
    seconds = []
    with view:
        for i in range(trials):
            trial_id, config = f"{i:08x}", config_of(rng)
            rows = reports_of(trial_id, config, rng)
            trial = fake_trial(trial_id, config, {})
            started = time.perf_counter()
            progress.on_trial_start(0, [], trial)
            for row in rows:
                trial.last_result = row
                progress.on_trial_result(0, [], trial, row)
            progress.on_trial_complete(0, [], trial)
            seconds.append(time.perf_counter() - started)
            if i % 50 == 0:
                console.file.seek(0)
                console.file.truncate()  # the pipe's reader, not the bench, keeps the lines
    first, last = statistics.mean(seconds[:WINDOW]), statistics.mean(seconds[-WINDOW:])

    rewrite = {}  # the previous design: the summary of every trial so far, rewritten at each trial's end
    records = [TrialRecord(f"{i:08x}", "completed", config_of(rng), {"val_accuracy": 0.9, "epoch": 3}, 3)
               for i in range(max(REWRITE_AT))]
    for behind in REWRITE_AT:
        result = SweepResult(str(directory / f"rewrite-{behind}"), "val_accuracy", "max", tuple(records[:behind]),
                             records[0], {"in_progress": True})
        times = []
        for _ in range(REWRITE_REPEATS):
            started = time.perf_counter()
            write(result)
            times.append(time.perf_counter() - started)
        rewrite[behind] = statistics.median(times)
    return {"per_trial_s": seconds, "first_window_s": first, "last_window_s": last, "ratio": last / first,
            "rewrite_s": rewrite, "log_bytes": (directory / "ended_trials.jsonl").stat().st_size}


def experiment_of(trials: int, directory: Path) -> Path:
    """An experiment directory of ``trials`` ended trials, as a sweep of the quickstart's spec leaves it."""
    from tune_service.experiment import layout
    from tune_service.results.sweep_result import SweepResult, TrialRecord, best_trial, write
    from tune_service.spec import load_spec

    rng = random.Random(1)
    spec = load_spec(ROOT / "search_spaces" / "quickstart.yaml")
    directory.mkdir(parents=True)
    layout.write_sweep_file(directory, spec.source, None, spec.directory)
    records = []
    for i in range(trials):
        trial_id, config = f"{i:08x}", config_of(rng)
        rows = reports_of(trial_id, config, rng)
        stopped_at = rng.choice([1, 1, 1, 2, 3])  # ASHA stops most trials at the first rung
        rows = rows[:stopped_at]
        trial_dir = layout.trial_dir(directory, trial_id)
        trial_dir.mkdir()
        (trial_dir / layout.TRIAL_PARAMS_FILE).write_text(json.dumps(config))
        (trial_dir / layout.TRIAL_RESULTS_FILE).write_text("".join(json.dumps(r) + "\n" for r in rows))
        metrics = {k: v for k, v in rows[-1].items() if k in ("epoch", "val_accuracy", "val_loss", "train_loss", "lr")}
        status = "completed" if stopped_at == EPOCHS else "stopped"
        records.append(TrialRecord(trial_id, status, config, metrics, stopped_at))
    write(SweepResult(str(directory), "val_accuracy", "max", tuple(records),
                      best_trial(records, "val_accuracy", "max"), {"max_t": EPOCHS, "time_unit": "epoch"}))
    return directory


def command_seconds(*args: str) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run([str(Path(sys.executable).parent / "tune-run"), *args], capture_output=True, text=True,
                          timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"tune-run {' '.join(args)}: {done.stderr[-2000:]}")
    return time.perf_counter() - started, done.stdout


def render_in_chromium(report: Path, scratch: Path) -> dict[str, Any]:
    """The report opened in headless Chromium: the in-page time until every chart is drawn, the heap."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise RuntimeError("the render figure needs a headless Chromium: apt-get install -y chromium")
    probed = scratch / "probed.html"
    probed.write_text(report.read_text(encoding="utf-8").replace("</body>", _PROBE, 1), encoding="utf-8")
    command = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--enable-unsafe-swiftshader",
               "--enable-precise-memory-info", "--js-flags=--expose-gc", f"--user-data-dir={scratch / 'profile'}",
               "--virtual-time-budget=60000", "--dump-dom", probed.resolve().as_uri()]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    wall = time.perf_counter() - started
    title = done.stdout.split("<title>PROBE ", 1)
    if len(title) < 2:
        return {"drawn": False, "wall_s": wall, "stderr": done.stderr[-1000:]}
    probe = json.loads(title[1].split("</title>", 1)[0].replace("&quot;", '"'))
    return {"drawn": True, "wall_s": wall, "in_page_s": probe["ms"] / 1000, "heap_mb": probe["heap"] / 2**20,
            "charts": probe["charts"], "table_rows": probe["rows"], "page_mb": report.stat().st_size / 2**20}


def run(quick: bool) -> dict[str, Any]:
    trials = QUICK_TRIALS if quick else TRIALS
    scratch = Path(tempfile.mkdtemp(prefix="scale-bookkeeping-"))
    try:
        (scratch / "driver").mkdir()
        driver = driver_bookkeeping(trials, scratch / "driver")
        print(f"driver: {driver['first_window_s'] * 1e3:.3f} ms a trial over the first {WINDOW}, "
              f"{driver['last_window_s'] * 1e3:.3f} over the last; a summary rewrite at "
              + ", ".join(f"{n}: {s * 1e3:.1f} ms" for n, s in driver["rewrite_s"].items()), flush=True)
        experiment = experiment_of(trials, scratch / "experiment")
        from tune_service.results.analysis import load_results

        started = time.perf_counter()
        loaded = load_results(experiment)
        load_s = time.perf_counter() - started
        assert len(loaded.records) == trials, len(loaded.records)
        results_s, printed = command_seconds("results", str(experiment))
        report_s, _ = command_seconds("report", str(experiment))
        render = render_in_chromium(experiment / "report.html", scratch)
        print(f"reading: load_results {load_s:.1f} s, results {results_s:.1f} s, report {report_s:.1f} s; "
              f"render {render}", flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    rewrite_small, rewrite_big = (driver["rewrite_s"][n] for n in REWRITE_AT)
    figures = [
        figure(f"driver bookkeeping a trial, last {WINDOW} / first {WINDOW} of {trials}",
               f"summary rewrite, {REWRITE_AT[1]} / {REWRITE_AT[0]} trials behind", rewrite_big / rewrite_small,
               driver["ratio"], "<= 1.10"),
        figure(f"driver bookkeeping a trial over the last {WINDOW}", f"summary rewrite at {REWRITE_AT[1]} trials",
               rewrite_big * 1e3, driver["last_window_s"] * 1e3, None, unit="ms"),
        figure(f"load_results() of {trials} trials", "", None, load_s, "<= 10", unit="s"),
        figure(f"tune-run results DIR of {trials} trials", "", None, results_s, "<= 10", unit="s"),
        figure(f"tune-run report DIR of {trials} trials", "", None, report_s, "<= 10", unit="s"),
        figure("report drawn in headless Chromium (in-page, navigation to every chart)", "", None,
               render.get("in_page_s"), f"<= {RENDER_TARGET_S:g}", unit="s", met=None if render["drawn"] else False),
        figure("report page's JavaScript heap once drawn", "", None, render.get("heap_mb"), f"<= {HEAP_TARGET_MB:g}",
               unit="MB", met=None if render["drawn"] else False),
    ]
    driver_raw = {k: v for k, v in driver.items() if k != "per_trial_s"}
    driver_raw["per_thousand_ms"] = [round(statistics.mean(driver["per_trial_s"][i:i + WINDOW]) * 1e3, 4)
                                     for i in range(0, trials, WINDOW)]
    return {"figures": figures, "sizes": {"trials": trials, "epochs": EPOCHS, "window": WINDOW},
            "raw": {"driver": driver_raw, "load_results_s": load_s, "results_s": results_s, "report_s": report_s,
                    "render": render, "leaderboard_head": printed.splitlines()[:3]},
            "load_average": os.getloadavg()}
