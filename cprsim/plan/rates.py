"""Failure-event rates for the planner: :func:`cprsim.failures.rates.failure_rates`, with a
replayed trace's rates measured on 20 replications (the failures layer does not simulate)."""

from __future__ import annotations

from cprsim.failures.rates import Rates
from cprsim.failures.rates import failure_rates as _rates
from cprsim.names import PARTIAL
from cprsim.scenario import Scenario

__all__ = ["Rates", "failure_rates"]


def _replayed(s: Scenario) -> tuple[float, float]:
    """(node failure events, embedding-server failures) per second of wall time, over 20 replications
    of partial recovery (a node fails only while up)."""
    from cprsim.sim.replicate import run_replications

    res, _ = run_replications(
        s.with_updates({"strategy.name": PARTIAL, "failures.replay": s.failures.replay}), 20
    )
    wall = sum(r.wall_s for r in res)
    return (
        sum(r.failure_events - r.failures_job for r in res) / wall,
        sum(r.failures_embedding for r in res) / wall,
    )


def failure_rates(s: Scenario) -> Rates:
    """The scenario's long-run failure-event rates (a replayed trace's measured by simulation)."""
    return _rates(s, _replayed if s.failures.replay else None)
