"""Hopeless regimes are refused before simulating; runaway replications stop with one line."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from cprsim import analytic
from cprsim import scenario as sc
from cprsim.cli import main
from cprsim.costs import costs_of
from cprsim.errors import InputError
from cprsim.planner import feasibility
from cprsim.sim import engine

HOPELESS = ["--set", "failures.embedding.mtbf_h=0.05"]


def test_simulate_refuses_a_hopeless_regime_and_says_what_would_finish(one_line_error):
    line = one_line_error(CliRunner().invoke(main, ["simulate", "toy", *HOPELESS, "-n", "2"]))
    assert "hopeless" in line and "MTBF of" in line and "within 2x" in line


def test_the_mtbf_it_names_really_finishes_within_twice_the_work():
    s = sc.load("toy")
    c = costs_of(s)
    R = s.reschedule.dist.mean() + c.load_s
    job = analytic.Job(work_s=s.duration_s, save_s=c.save_s)
    m = analytic.mtbf_for_ratio(job, recovery_s=R, ratio=2.0)
    at_m = analytic.Failures(rate=1 / m, recovery_s=R)
    assert analytic.hopeless(job, at_m, limit=2.0 * 1.001).hopeless is False
    below_m = analytic.Failures(rate=1 / (0.9 * m), recovery_s=R)
    assert analytic.hopeless(job, below_m, limit=2.0).hopeless is True


def test_partial_recovery_is_not_hopeless_where_full_recovery_is():
    """Node failures every 45 s sink full recovery (42 s saves), but partial recovery rolls nothing back."""
    s = sc.load(
        "toy",
        {
            "failures.embedding.mtbf_h": 0.5,
            "failures.trainer": None,
            "reschedule.mean_s": 10.0,
            "cluster.embedding_servers": 40,
            "strategy.name": "partial",
        },
    )
    with pytest.raises(InputError, match="hopeless"):
        feasibility.check(s, "rollback")
    feasibility.check(s, "pls")  # no error


def test_a_runaway_replication_stops_with_one_line(monkeypatch, one_line_error):
    monkeypatch.setattr(engine, "MAX_FAILURE_EVENTS", 500)
    r = CliRunner().invoke(main, ["simulate", "toy", *HOPELESS, "-n", "1", "--force"])
    line = one_line_error(r)
    assert "stopped after 500 failure events" in line


def test_the_planner_refuses_a_hopeless_regime(one_line_error):
    line = one_line_error(
        CliRunner().invoke(
            main,
            [
                "plan",
                "--embedding-servers",
                "16",
                "--trainers",
                "8",
                "--node-mtbf-h",
                "0.5",
                "--save-s",
                "120",
                "--load-s",
                "60",
                "--max-accuracy-loss",
                "0.001",
            ],
        )
    )
    assert "hopeless" in line
