"""A W&B program's rank (:class:`~tune_service.programs.rank.ProgramRank`) without Ray: how it reads its
program's reports."""

from __future__ import annotations

from tune_service.programs.rank import ProgramRank


def test_a_rank_reads_only_the_reports_written_since_it_last_looked(tmp_path):
    """A program's trial polls its reports every 0.2 s: each poll reads the bytes written since the last,
    not the whole file again (issue 44), and hands out a line only once it is complete."""
    rank = ProgramRank(0, 1, 1.0)
    rank.reports_path = tmp_path / "reports.jsonl"
    rank.reports_path.write_text('{"a": 1}\n{"a": 2}\n{"a"')
    assert rank.poll(0)[0] == ['{"a": 1}', '{"a": 2}']
    with open(rank.reports_path, "r+") as reports:  # what was read before is not read again
        reports.write('{"b": 9}')
        reports.seek(0, 2)
        reports.write(': 3}\n')
    assert rank.poll(2)[0] == ['{"a": 3}'] and rank.poll(0)[0] == ['{"a": 1}', '{"a": 2}', '{"a": 3}']
