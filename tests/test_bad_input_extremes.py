"""Extreme literals and data that used to end in an internal error (issue 27): an integer of more
than Python's 4,300-digit limit in a scenario file or a ``--set`` value, and failure durations that
span hundreds of orders of magnitude."""

from __future__ import annotations

import pytest

BIG = "9" * 100_000  # a 10^5-digit integer literal


def test_a_huge_integer_in_a_set_value_is_one_line(cli, one_line_error):
    line = one_line_error(cli("simulate", "toy", "-n", "2", "--set", f"cluster.trainers={BIG}"))
    assert "--set cluster.trainers" in line and "more than 4300 digits" in line, line


def test_a_huge_integer_in_a_scenario_file_is_one_line(tmp_path, cli, one_line_error):
    f = tmp_path / "big.toml"
    f.write_text(f'name = "big"\n[cluster]\ntrainers = {BIG}\n')
    line = one_line_error(cli("simulate", f, "-n", "2"))
    assert str(f) in line and "invalid TOML" in line and "more than 4300 digits" in line, line


@pytest.mark.parametrize("interarrival", [[], ["--interarrival", "failure-to-failure"]])
def test_durations_spanning_600_orders_of_magnitude_are_refused(
    tmp_path, cli, one_line_error, interarrival
):
    f = tmp_path / "span.csv"
    rows = [1e-300, 1e-200, 1e-100, 1.0, 1e100, 1e200, 1e300]
    f.write_text(
        "node,node_type,event,time_h,cause\n"
        + "".join(f"n{i % 2},embedding,fail,{t!r},disk\n" for i, t in enumerate(rows))
    )
    r = cli("fit", f, *interarrival)
    line = one_line_error(r)
    assert str(f) in line and "between the shortest and the longest" in line, line
    assert "Warning" not in r.stderr


def test_a_wide_but_plausible_span_still_fits(tmp_path, cli):
    """Seconds to decades in hours (a ratio of about 10^9) is a log, not an error."""
    f = tmp_path / "wide.csv"
    rows = [1e-3, 0.5, 3.0, 40.0, 700.0, 9e3, 2e5, 9e5]
    f.write_text(
        "node,node_type,event,time_h,cause\n"
        + "".join(f"n{i},embedding,fail,{t!r},disk\n" for i, t in enumerate(rows))
    )
    r = cli("fit", f, "--bootstrap", "0")
    assert r.exit_code == 0, r.output


def test_a_nul_byte_as_the_replayed_trace_is_one_line(tmp_path, cli, one_line_error):
    line = one_line_error(cli("simulate", "toy", "-n", "2", "--set", 'failures.replay="\\u0000"'))
    assert "failures.replay" in line, line
    f = tmp_path / "nul.toml"
    f.write_text('name = "nul"\n[failures]\nreplay = "\\u0000"\n')
    line = one_line_error(cli("simulate", f, "-n", "2"))
    assert str(f) in line or "failures.replay" in line, line
