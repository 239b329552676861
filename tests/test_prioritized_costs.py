"""What MFU/SSU's bookkeeping costs, hand-computed: counting, top-k selection, gathering the
selected rows and writing their ids, and the partial saves a restore applies on top of the last
full one."""

from __future__ import annotations

import pytest

from cprsim import access
from cprsim import scenario as sc
from cprsim.costs import costs_of
from cprsim.scenario import HOUR
from cprsim.sim import strategies
from cprsim.sim.engine import simulate_one

NT, NE = 4, 8


def _scen(**strategy):
    raw = {
        "name": "t",
        "seed": 5,
        "replications": 10,
        "cluster": {"trainers": NT, "embedding_servers": NE, "embedding_gb": 40.0, "dense_gb": 0.2},
        "job": {"duration_h": 10.0, "samples_per_s": 50_000.0},
        "storage": {"write_gbps": 2.0, "read_gbps": 4.0, "latency_s": 2.0, "node_gbps": 1.25},
        "reschedule": {"family": "constant", "mean_s": 100.0},
        "checkpoint": {"interval_h": 1.0},
        "strategy": {"name": "mfu", "top_fraction": 0.05, "full_every": 4, **strategy},
    }
    return sc.validate(raw, "test")


def _partial_save_by_hand(s, scanned_rows: float) -> float:
    c, p = costs_of(s), s.strategy.params
    rows = access.layout(s).rows
    r = p["top_fraction"]
    b = r * c.embedding_bytes + r * rows * 8.0 + c.dense_bytes  # rows, their ids, the dense part
    write = c.latency_s + (c.save_s - c.latency_s) * b / (c.embedding_bytes + c.dense_bytes)
    gather = r * c.embedding_bytes / NE / (p.get("gather_gbps", 1.5) * 1e9)
    select = scanned_rows * p.get("select_ns_per_row", 12.9) * 1e-9
    return write + gather + select


@pytest.mark.parametrize("name", ["mfu", "ssu"])
def test_failure_free_run_costs_counting_and_saves_by_hand(name):
    s = _scen(**({"name": "ssu", "sample_rate": 0.02} if name == "ssu" else {}))
    res, ev = simulate_one(s, 0, record=True)
    c = costs_of(s)
    rate = 0.02 if name == "ssu" else 1.0
    # counting: R x T x s accesses per second per server, 2.4 ns each, slows every iteration
    slow = 50_000.0 * 26 * rate / NE * 2.4e-9
    lay = access.layout(s)
    scanned = (
        lay.rows / NE
        if name == "mfu"
        else float(access.of(s).touched(HOUR * 50_000.0 * rate)) * lay.rows / NE
    )
    partial = _partial_save_by_hand(s, scanned)
    saves = [e.time_s for e in ev if e.kind in ("save_start", "save_end")]
    durations = [b - a for a, b in zip(saves[0::2], saves[1::2])]
    assert len(durations) == 9  # at 1, 2, ..., 9 h of progress
    expect = [c.save_s if (i + 1) % 4 == 0 else partial for i in range(9)]
    assert durations == [pytest.approx(x, rel=1e-9) for x in expect]
    assert res.wall_s == pytest.approx(s.duration_s * (1 + slow) + sum(expect), rel=1e-9)


@pytest.mark.parametrize("after_saves", [1, 3, 4, 6])
def test_a_restore_applies_the_partial_saves_since_the_last_full_one(after_saves):
    """A shard fails just after the n-th save: it reads its last full save, then the n mod K
    partial saves since (each one its own read: latency + its rows and ids at the shard rate)."""
    s = _scen()
    c, p = costs_of(s), s.strategy.params
    rows = access.layout(s).rows
    share = p["top_fraction"] + p["top_fraction"] * rows * 8.0 / c.embedding_bytes
    overlay = c.latency_s + (c.shard_load_s(1) - c.latency_s) * share
    _, ev = simulate_one(s, 0, record=True)
    ends = [e.time_s for e in ev if e.kind == "save_end"]
    t = ends[after_saves - 1] + 30.0
    _, ev = simulate_one(s, 0, record=True, schedule=[(t, (NT,), (100.0,))])
    loads = [e.value for e in ev if e.kind == "load_end"]
    assert loads == [pytest.approx(c.shard_load_s(1) + (after_saves % 4) * overlay, rel=1e-12)]


def test_counter_overhead_given_replaces_the_derived_one():
    s = _scen(counter_overhead=0.01, select_ns_per_row=0.0)
    res, _ = simulate_one(s, 0)
    MFU = strategies.get("mfu")
    p = MFU.Params(**s.strategy.params)
    assert MFU.counter_slowdown(s, p) == 0.01
    c = costs_of(s)
    saves = 7 * MFU.partial_save_cost(s, p, HOUR, c) + 2 * c.save_s
    assert res.wall_s == pytest.approx(s.duration_s * 1.01 + saves, rel=1e-9)
