"""What the quickstart prints when piped (CI, a log file): the plan, one line per trial's outcome and
the leaderboard, in at most 40 lines; none of Ray's own tables. Its driver runs as its own process,
as a user's would."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tune_service import cli

pytestmark = [pytest.mark.integration, pytest.mark.timeout(400)]
ROOT = Path(__file__).resolve().parents[2]
TRIAL_LINE = re.compile(r"^\[\s*\d+/10\] [0-9a-f_]+ (completed|stopped|failed)\s+\d+/8 epochs  val_accuracy ")


def test_the_quickstart_piped_prints_at_most_40_lines(tmp_path):
    done = subprocess.run([sys.executable, "-m", "tune_service.cli", str(ROOT / "search_spaces" / "quickstart.yaml"),
                           "--storage", str(tmp_path)], capture_output=True, text=True, timeout=360)
    lines = (done.stdout + done.stderr).splitlines()
    assert done.returncode == cli.EXIT_OK, "\n".join(lines[-40:])
    assert len(lines) <= 40, "\n".join(lines)
    assert lines[0].startswith("sweep quickstart: 10 trials, bayes (hyperopt TPE) + asha")
    assert sum(bool(TRIAL_LINE.match(line)) for line in lines) == 10
    assert "rank  trial     status     epochs  val_accuracy  batch_size  dropout   hidden  lr" in lines
    assert any(line.startswith("10 trials: ") for line in lines)
    assert not any("Trial status" in line or "╭" in line or "INFO" in line for line in lines)
