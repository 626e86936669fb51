"""The bad-input corpus (``tests/data/bad_specs/``): each file is refused before any work starts with one
line naming the field, the rule and the value, exit code 2 and no traceback. A file's first line says
the error it must give: ``# expect: <the line after "error: ">``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tune_service import cli
from tune_service.spec import MAX_SPEC_BYTES

BAD_SPECS = sorted((Path(__file__).resolve().parents[2] / "data" / "bad_specs").glob("*.yaml"))


def refusal(path, capsys) -> list[str]:
    assert cli.main([str(path), "--dry-run"]) == cli.EXIT_USAGE
    captured = capsys.readouterr()
    assert captured.out == "" and "Traceback" not in captured.err
    return captured.err.splitlines()


def test_the_corpus_has_at_least_forty_malformed_specs():
    assert len(BAD_SPECS) >= 40


@pytest.mark.parametrize("path", BAD_SPECS, ids=lambda p: p.stem)
def test_a_malformed_spec_is_refused_with_one_line(path, capsys, forbid_ray_start):
    expected = path.read_text(encoding="utf-8").splitlines()[0].removeprefix("# expect: ")
    assert refusal(path, capsys) == [f"error: {expected}"]


def test_a_huge_spec_file_is_refused_unread(tmp_path, capsys, forbid_ray_start):
    huge = tmp_path / "huge.yaml"
    huge.write_text("# padding\n" * (MAX_SPEC_BYTES // 10 + 1) + "method: random\n")
    (line,) = refusal(huge, capsys)
    assert line.startswith(f"error: spec file must be at most {MAX_SPEC_BYTES} bytes, got ")


def test_debug_shows_the_traceback(capsys):
    with pytest.raises(Exception, match="run_cap: must be >= 1, got 0"):
        cli.main([str(next(p for p in BAD_SPECS if "run_cap_zero" in p.name)), "--dry-run", "--debug"])
