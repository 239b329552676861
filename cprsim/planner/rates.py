"""Failure-event rates for the planner: :func:`cprsim.failures.rates.failure_rates`, with a
replayed trace's rates measured on 20 replications (the failures layer does not simulate)."""

from __future__ import annotations

from cprsim.failures.rates import Rates
from cprsim.failures.rates import failure_rates as _rates
from cprsim.names import PARTIAL
from cprsim.scenario import Scenario

__all__ = ["Rates", "failure_rates"]

#: replications a replayed trace's rates are measured on
REPLAY_REPLICATIONS = 20


def _replayed(s: Scenario) -> tuple[float, float, float]:
    """(node failure events, those that take down embedding servers, the embedding servers they
    take down) per second of wall time, over :data:`REPLAY_REPLICATIONS` replications of partial
    recovery (a node fails only while up). An event is the nodes that fail at one instant, as for
    parametric failures: a trace's simultaneous failures (which the replay keeps together) are one
    event, like a failure domain's; a trainer failure is never an embedding event."""
    from cprsim.costs import costs_of
    from cprsim.sim.engine import simulate_one

    s = s.with_updates({"strategy.name": PARTIAL, "failures.replay": s.failures.replay})
    c, nt = costs_of(s), s.cluster.trainers
    wall = events = emb = servers = 0.0
    for rep in range(REPLAY_REPLICATIONS):
        res, log = simulate_one(s, rep, record=True, costs=c)
        wall += res.wall_s
        at: dict[float, list[int]] = {}  # instant -> the nodes that fail then
        for e in log:
            if e.kind == "fail" and e.node >= 0:  # -1: a job-level interruption (its own rate)
                at.setdefault(e.time_s, []).append(e.node)
        for failed in at.values():
            k = sum(1 for n in failed if n >= nt)
            events += 1
            emb += k > 0
            servers += k
    return events / wall, emb / wall, servers / wall


def failure_rates(s: Scenario) -> Rates:
    """The scenario's long-run failure-event rates (a replayed trace's measured by simulation)."""
    return _rates(s, _replayed if s.failures.replay else None)
