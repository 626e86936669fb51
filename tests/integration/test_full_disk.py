"""A sweep whose storage fills up and frees again, on a small file system made for the test (a tmpfs,
which needs root, as CI and this project's machines run): nothing is lost, each kind of failed save is
said once, in one line, and the sweep finishes."""

from __future__ import annotations

import json
import os
import re

import pytest

from small_disk import mounted_tmpfs
from tune_service import cli

pytestmark = [pytest.mark.integration, pytest.mark.timeout(400)]
#: A trial actor's traceback that ends in Ray's SIGTERM handler's SystemExit (see the test).
RAY_TEARDOWN = re.compile(r"[^\n]*Traceback \(most recent call last\):\n(?:(?![^\n]*Traceback)[^\n]*\n)*?"
                          r"[^\n]*in sigterm_handler\n(?:[^\n]*\n){0,3}?[^\n]*SystemExit: 1\n")


@pytest.fixture
def small_disk(tmp_path):
    """A 16 MiB tmpfs mounted at ``tmp_path/disk`` for the test, unmounted after it."""
    with mounted_tmpfs(tmp_path / "disk", "16m") as mount:
        yield mount


def test_a_storage_that_fills_and_frees_loses_nothing_and_says_so_once_per_kind(ray_cluster, small_disk, tmp_path,
                                                                                capfd, caplog):
    # One trial at a time (2 ranks on the session's 2 CPUs), in grid order: the first two fill the disk
    # (the second tops it up), so both end on a full disk; the third frees it.
    spec = tmp_path / "sweep.yaml"
    spec.write_text(json.dumps({
        "name": "full-disk", "task": "recording_tasks:DiskFillingDigits", "method": "grid",
        "metric": {"name": "val_accuracy", "goal": "maximize"}, "scheduler": {"type": "fifo", "max_t": 3},
        "resources": {"workers": 2}, "wandb": {"mode": "offline"},
        "parameters": {"disk": {"values": ["fill", "top-up", "free"]},
                       "ballast": {"value": str(small_disk / "ballast")}}}))
    code = cli.main([str(spec), "--storage", str(small_disk), "--name", "full"])
    out, err = capfd.readouterr()
    assert code == cli.EXIT_OK, out + err
    summary = json.loads((small_disk / "full" / "summary.json").read_text())
    assert [(t["config"]["disk"], t["status"], t["epochs"]) for t in summary["trials"]] == [
        ("fill", "completed", 3), ("top-up", "completed", 3), ("free", "completed", 3)]
    said = out + err + caplog.text  # our warnings: the console's stderr, here pytest's log capture
    # Not ours, and seen once in four CI runs: Tune ends a trial's actor with SIGTERM, and Ray's handler
    # raises SystemExit, which Python reports ("Exception ignored ... Traceback") when it lands inside a
    # weakref callback. Every other traceback fails the test.
    ours = RAY_TEARDOWN.sub("", said)
    assert "Traceback" not in ours and "Logging error" not in ours, said
    # The log of ended trials could not be written when the first two trials ended: said once; written
    # again, the two lines that waited first, when the third ended.
    assert said.count("could not save ended_trials.jsonl (No space left on device)") == 1, said
    assert said.count("saved ended_trials.jsonl again") == 1, said
    lines = (small_disk / "full" / "ended_trials.jsonl").read_text().splitlines()
    ended = [json.loads(line)["config"]["disk"] for line in lines if line.endswith("}")]  # not one cut off
    assert list(dict.fromkeys(ended)) == ["fill", "top-up", "free"]  # a line written again reads as one
    assert "could not save a checkpoint of trial" in said
    assert not os.path.exists(small_disk / "ballast")
