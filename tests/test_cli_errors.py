"""Errors a person can fix, met through the CLI: one line on stderr that says what to do, exit
status 2, no traceback, and (where it can be) before any model loads or program runs."""

from __future__ import annotations

import pytest

from execrl.cli import main


def _one_line_error(capsys, *argv: str) -> str:
    """Run `execrl ARGV`; it must fail as a user error: status 2, one line on stderr."""
    assert main(list(argv)) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err


def test_bench_of_an_unknown_benchmark_is_one_line(capsys):
    err = _one_line_error(capsys, "sandbox", "bench", "--benchmark", "nosuch")
    assert "unknown benchmark 'nosuch'; known: humaneval" in err


@pytest.mark.data
def test_a_bench_that_would_run_nothing_is_an_error_not_all_passed(data_dir, capsys, monkeypatch):
    monkeypatch.setenv("EXECRL_DATA_DIR", str(data_dir))
    err = _one_line_error(capsys, "sandbox", "bench", "--benchmark", "codejam", "--json")
    assert "codejam: none of its 511 tasks has a reference solution" in err
    assert capsys.readouterr().out == ""  # no "all_passed": true
    err = _one_line_error(capsys, "sandbox", "bench", "--repeat", "0")
    assert "--repeat must be at least 1" in err
