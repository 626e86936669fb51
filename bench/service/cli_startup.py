"""How long ``tune-run --help`` and ``tune-run --version`` take, side by side with ``python -c pass``
(the interpreter's own start): nothing heavy (torch, Ray, pandas) may be imported before a command
needs it. Runs are interleaved, one of each in turn, so the machine's drift hits all three alike.

Figures: the median seconds of each command (target <= 0.5 s), and what each adds to a bare
interpreter's start (no target: the part that is ours).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.common import figure

#: The installed console script beside this interpreter (what a user runs), else the module.
SCRIPT = Path(sys.executable).parent / "tune-run"
COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "tune-run --help": [str(SCRIPT), "--help"] if SCRIPT.exists() else [sys.executable, "-m", "tune_service.cli", "--help"],
    "tune-run --version": [str(SCRIPT), "--version"] if SCRIPT.exists() else [sys.executable, "-m", "tune_service.cli",
                                                                                "--version"],
}


def timed(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def run(quick: bool) -> dict:
    repeats = 5 if quick else 20
    for command in COMMANDS.values():  # a first, uncounted run of each: the file cache warm for all
        timed(command)
    samples: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(repeats):
        for name, command in COMMANDS.items():
            samples[name].append(timed(command))
    medians = {name: statistics.median(values) for name, values in samples.items()}
    bare = medians["python -c pass"]
    figures = []
    for name in ("tune-run --help", "tune-run --version"):
        figures.append(figure(f"{name} (median s)", "python -c pass", bare, medians[name], "<= 0.5", unit="s"))
        figures.append(figure(f"{name}: added to the interpreter's start (s)", "", None,
                              medians[name] - bare, None, unit="s"))
    return {"figures": figures, "repeats": repeats, "commands": COMMANDS, "samples_s": samples,
            "medians_s": medians}
