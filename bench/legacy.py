"""The two earlier benchmarks as members of the suite: ``bench/service/trial_overhead.py`` (per-report
overhead and start-up of a 2-rank trial, Ray's default Train poll interval against the service's) and
``bench/training/train_overhead.py`` (the shared train loop against a bare hand-written DDP loop, epoch by
epoch in the same processes; bf16 autocast against fp32 on this CPU).

Each is run as it is, in a child process with its default sizes, and writes its own result file as
before (``bench/results/trial_overhead.json``, ``bench/results/train_overhead.json``); the suite reads it
back into figures. They run only when named (about 3.5 minutes together); with ``--quick`` they run with
smaller sizes and their own files are left as they were.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.common import ROOT, figure

#: Each script, from the repository root.
SCRIPTS = {"trial_overhead": "bench/service/trial_overhead.py", "train_overhead": "bench/training/train_overhead.py"}
QUICK_ARGS = {"trial_overhead": ["--reports", "4", "--trials", "1"], "train_overhead": ["--epochs", "20"]}


def run(quick: bool, name: str) -> dict[str, Any]:
    script = ROOT / SCRIPTS[name]
    own_file = ROOT / "bench" / "results" / f"{name}.json"
    saved = None
    if quick:  # the script writes its own file: keep the full run's figures in place
        saved = Path(tempfile.mkdtemp()) / own_file.name
        if own_file.exists():
            shutil.copy2(own_file, saved)
    try:
        subprocess.run([sys.executable, str(script), *(QUICK_ARGS[name] if quick else [])], cwd=ROOT, check=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
        data = json.loads(own_file.read_text())
    finally:
        if saved is not None:
            if saved.exists():
                shutil.copy2(saved, own_file)
            elif own_file.exists():
                own_file.unlink()
            shutil.rmtree(saved.parent, ignore_errors=True)
    return {"figures": _trial_figures(data) if name == "trial_overhead" else _train_figures(data), "details": data,
            "own_file": str(own_file.relative_to(ROOT))}


def _trial_figures(data: dict[str, Any]) -> list[dict[str, Any]]:
    ray_default, service, targets = data["ray_default"], data["tune_service"], data["targets"]
    return [
        figure("per-report overhead of an empty epoch", "Ray default Train poll (2 s)", ray_default["per_report_s"],
               service["per_report_s"], f"<= {targets['per_report_s']:g}", "s"),
        figure("2-rank trial start-up (to 1st report)", "Ray default Train poll (2 s)", ray_default["startup_s"],
               service["startup_s"], f"<= {targets['startup_s']:g}", "s"),
        figure("wall time of a 10-epoch empty trial", "Ray default Train poll (2 s)", ray_default["trial_wall_s"],
               service["trial_wall_s"], None, "s"),
    ]


def _train_figures(data: dict[str, Any]) -> list[dict[str, Any]]:
    ratios = []
    for label, compared in (("", data), (", cosine schedule + clipping", data.get("schedule_clip"))):
        if compared is None:
            continue
        low, _, high = compared["paired_ratio_quartiles"]
        ratios.append(figure(f"training throughput of the shared loop{label}", "bare hand-written DDP loop", 1.0,
                             compared["ratio"], f">= {compared['target_ratio']:g}", "x",
                             note=f"median of {data['epochs_timed']} paired epochs, quartiles {low:.3f}-{high:.3f}"))
    return [
        *ratios,
        figure("CPU step time, bf16 autocast / fp32", "fp32", 1.0, data["cpu"]["bf16_vs_fp32_step_time"], None, "x"),
    ]
