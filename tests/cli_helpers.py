"""Shared helpers of the CLI tests: invoke ``cprsim`` in-process and check one-line errors."""

from __future__ import annotations

from click.testing import CliRunner

from cprsim.cli import main


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def one_line_error(r) -> str:
    """The single ``Error:`` line of a bad-input run (exit code 2, no traceback)."""
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]  # usage errors too (issue 27)
    assert len(lines) == 1 and lines[0].startswith("Error:"), r.output
    assert "Traceback" not in r.output
    return lines[0]
