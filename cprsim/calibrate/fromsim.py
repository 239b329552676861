"""Failure schedules from the simulator, so the DLRM emulation and the simulator meet.

:func:`sim_schedule` runs :func:`cprsim.sim.engine.simulate_one` with strategy ``partial`` and maps
its events to iterations of an ``n_iters``-iteration DLRM run: progress ``p`` seconds of a job of
``W`` seconds is iteration ``round(p / W x n_iters)``; a ``restore`` of node ``i`` is a failure of
shard ``i - trainers``; a ``save_end`` is a full save. Events keep the simulator's order.
"""

from __future__ import annotations

from cprsim.names import FAIL, PARTIAL, SAVE_FULL
from cprsim.scenario import Scenario
from cprsim.sim.engine import simulate_one


def sim_schedule(
    s: Scenario, n_iters: int, rep: int = 0
) -> tuple[dict[int, tuple], float, float, int]:
    """(actions by iteration, the simulator's PLS, interval in iterations, shards)."""
    s = s.with_updates({"strategy.name": PARTIAL}, param="scenario")
    res, events = simulate_one(s, rep, record=True)
    W, nt = s.duration_s, s.cluster.trainers
    acts: dict[int, list] = {}
    for e in events:
        if e.kind == "save_end":
            acts.setdefault(int(round(e.value / W * n_iters)), []).append((SAVE_FULL, -1))
        elif e.kind == "restore":
            acts.setdefault(int(round(e.value / W * n_iters)), []).append((FAIL, e.node - nt))
    interval = s.interval_s / W * n_iters
    return {k: tuple(v) for k, v in acts.items()}, res.pls, interval, s.cluster.embedding_servers
