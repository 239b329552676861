"""Trace replay: replication 0 is the trace as recorded; replications r > 0 resample whole windows of
the trace's timeline (a circular block bootstrap), so its simultaneous failures survive, at the
trace's rate."""

from __future__ import annotations

import os
from collections import Counter

import numpy as np
import pytest

import cprsim.scenario as sc
from cprsim.failures import replay
from cprsim.failures.replay import replay_schedule
from cprsim.scenario import HOUR
from cprsim.sim.engine import simulate_one

WINDOW_H = 2000.0
N_NODES, BURSTS, BURST_SIZE, SINGLES = 10, 12, 5, 40
PARTNER_S = 60.0


def _write(path, rows, nodes):
    """rows: (node, type, event, time_h); ``nodes``: node -> (type, window start h, window end h)."""
    lines = ["node,node_type,event,time_h,cause"]
    for n, (ty, a, b) in sorted(nodes.items()):
        own = sorted((r for r in rows if r[0] == n), key=lambda r: r[3])
        lines += [
            f"{r[0]},{r[1]},{r[2]},{r[3]!r},"
            for r in [(n, ty, "start", a), *own, (n, ty, "end", b)]
        ]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _bursty(path, node_type="embedding"):
    """10 nodes over 2,000 h: 12 bursts of 5 distinct nodes failing 10 s apart (all within the same
    minute), and 40 lone failures; every failure repaired after 0.5 h, all >= 15 h apart."""
    rng = np.random.default_rng(12)
    rows = []
    for i in range(BURSTS):
        b = 45.0 + 160.0 * i
        for m, n in enumerate(rng.choice(N_NODES, BURST_SIZE, replace=False)):
            t = b + 10.0 * m / HOUR
            rows += [
                (f"n{n:02d}", node_type, "fail", t),
                (f"n{n:02d}", node_type, "repair", t + 0.5),
            ]
    for j in range(SINGLES):
        n, t = int(rng.integers(N_NODES)), 20.0 + 50.0 * j
        rows += [(f"n{n:02d}", node_type, "fail", t), (f"n{n:02d}", node_type, "repair", t + 0.5)]
    return _write(path, rows, {f"n{n:02d}": (node_type, 0.0, WINDOW_H) for n in range(N_NODES)})


def _scenario(trace, trainers=1, embedding=N_NODES, duration_h=100.0, seed=0):
    return sc.validate(
        {
            "name": "r",
            "seed": seed,
            "cluster": {"trainers": trainers, "embedding_servers": embedding, "embedding_gb": 1.0},
            "job": {"duration_h": duration_h},
            "checkpoint": {"interval_h": 1.0},
            "strategy": {"name": "partial"},
            "failures": {"replay": trace},
        },
        "test",
    )


def _partnered(sched, within_s=PARTNER_S):
    """(failures, failures of which another node failed within ``within_s``)."""
    t = np.array([x[0] for x in sched])
    n = np.array([x[1][0] for x in sched])
    has = 0
    for i in range(len(t)):
        near = (np.abs(t - t[i]) <= within_s) & (n != n[i])
        has += bool(near.any())
    return len(t), has


def _groups(sched, gap_s=PARTNER_S):
    """Failures chained by gaps <= ``gap_s``: (size, distinct nodes) of each group."""
    out, cur = [], []
    for t, nodes, _ in sched:
        if cur and t - cur[-1][0] > gap_s:
            out.append((len(cur), len({c[1] for c in cur})))
            cur = []
        cur.append((t, nodes[0]))
    if cur:
        out.append((len(cur), len({c[1] for c in cur})))
    return out


def _independent(s, rep):
    """The former bootstrap, for contrast: every simulated node draws a trace node with replacement
    and a uniform offset into its window, independently of the other nodes."""
    hist = replay._load(s.failures.replay, os.path.getmtime(s.failures.replay))
    rng = np.random.default_rng((s.seed, rep))
    horizon = 20 * s.duration_s / HOUR
    out = []
    for node in range(s.cluster.trainers, s.cluster.trainers + s.cluster.embedding_servers):
        _, _, length, fails = hist[int(rng.integers(len(hist)))]
        base = (np.array([f[0] for f in fails]) - rng.uniform(0.0, length)) % length
        for lap in range(int(np.ceil(horizon / length))):
            out += [
                ((b + lap * length) * HOUR, (node,), (1.0,))
                for b in base
                if b + lap * length <= horizon
            ]
    return sorted(out)


# -- replication 0 -------------------------------------------------------------------------------------
def test_replication_0_is_the_trace_as_recorded(tmp_path):
    s = _scenario(_bursty(tmp_path / "b.csv"), duration_h=WINDOW_H / 20)  # the horizon = the window
    got = replay_schedule(s, 0)
    rows = [ln.split(",") for ln in (tmp_path / "b.csv").read_text().splitlines()[1:]]
    fails = sorted((float(r[3]) * HOUR, 1 + int(r[0][1:])) for r in rows if r[2] == "fail")
    assert [n[0] for _, n, _ in got] == [n for _, n in fails]
    assert [t for t, _, _ in got] == pytest.approx([t for t, _ in fails], abs=1e-6)
    assert all(d == pytest.approx((0.5 * HOUR,)) for _, _, d in got)
    a, p = _partnered(got)
    assert (a, p) == (BURSTS * BURST_SIZE + SINGLES, BURSTS * BURST_SIZE)


# -- r > 0: the bursts survive --------------------------------------------------------------------------
def test_resampled_replications_keep_the_bursts(tmp_path):
    """Pooled over 200 replications (the 2,000 h horizon, ~12 one-week blocks each), the share of
    failures with a partner within 60 s and the sizes of the bursts are the trace's; the former
    independent per-node bootstrap breaks them."""
    s = _scenario(_bursty(tmp_path / "b.csv"))
    trace_share = BURSTS * BURST_SIZE / (BURSTS * BURST_SIZE + SINGLES)  # 0.6
    tot = par = ind_tot = ind_par = 0
    sizes: Counter = Counter()
    for rep in range(1, 201):
        sched = replay_schedule(s, rep)
        a, p = _partnered(sched)
        tot, par = tot + a, par + p
        for size, distinct in _groups(sched):
            sizes[size] += size
            assert distinct == size or size > BURST_SIZE  # a burst is on distinct nodes
        a, p = _partnered(_independent(s, rep))
        ind_tot, ind_par = ind_tot + a, ind_par + p
    share, ind_share = par / tot, ind_par / ind_tot
    print(
        f"\npartnered within 60 s: trace {trace_share:.3f}, block bootstrap {share:.4f} "
        f"({tot} failures), independent per-node bootstrap {ind_share:.4f} ({ind_tot} failures)"
    )
    print("failures by group size:", dict(sorted(sizes.items())))
    assert share == pytest.approx(trace_share, abs=0.01)
    assert ind_share < 0.02
    # the co-failure structure: failures come in groups of 5 or alone, as in the trace
    assert (sizes[BURST_SIZE] + sizes[1]) / tot > 0.995
    assert sizes[BURST_SIZE] / tot == pytest.approx(trace_share, abs=0.01)


def test_bursts_across_types_survive(tmp_path):
    """A trainer that always fails with an embedding server still does; generic nodes are not
    replayed twice within a replication (no artificial co-failures)."""
    rows = []
    for i in range(20):
        t = 10.0 + 90.0 * i
        rows += [
            ("t0", "trainer", "fail", t),
            ("t0", "trainer", "repair", t + 0.2),
            (f"e{i % 3}", "embedding", "fail", t + 5 / HOUR),
            (f"e{i % 3}", "embedding", "repair", t + 0.2),
        ]
    nodes = {
        "t0": ("trainer", 0.0, WINDOW_H),
        **{f"e{k}": ("embedding", 0.0, WINDOW_H) for k in range(3)},
    }
    s = _scenario(_write(tmp_path / "x.csv", rows, nodes), trainers=1, embedding=3)
    for rep in range(1, 30):
        sched = replay_schedule(s, rep)
        assert sched
        for t, (n,), _ in sched:
            if n == 0:
                assert any(m > 0 and abs(u - t) <= PARTNER_S for u, (m,), _ in sched)
    rows = [
        (f"g{k}", "node", ev, 7.0 * k + 100.0 * j + (0.1 if ev == "repair" else 0.0))
        for k in range(4)
        for j in range(19)
        for ev in ("fail", "repair")
    ]
    g = _scenario(
        _write(tmp_path / "g.csv", rows, {f"g{k}": ("node", 0.0, WINDOW_H) for k in range(4)}),
        trainers=2,
        embedding=2,
    )
    for rep in range(1, 30):
        n, p = _partnered(replay_schedule(g, rep))
        assert n > 0 and p == 0


# -- r > 0: unbiased rate -------------------------------------------------------------------------------
def _mean_count(s, span_h, reps=400):
    c = np.array(
        [sum(t < span_h * HOUR for t, _, _ in replay_schedule(s, r)) for r in range(1, reps + 1)]
    )
    return c.mean(), c.std(ddof=1) / np.sqrt(len(c))


@pytest.mark.parametrize("span_h", [100.0, 2000.0])
@pytest.mark.parametrize("embedding", [N_NODES, 25])
def test_resampling_keeps_the_trace_rate(tmp_path, span_h, embedding):
    """Mean failures per replication over the job's span (100 h: within one block; 2,000 h: the
    whole 20x horizon, across blocks and wraps) = the trace's rate x the span x nodes / trace nodes,
    within a 99.9% interval; 25 servers = 2.5 copies of the trace's cluster."""
    s = _scenario(_bursty(tmp_path / "b.csv"), embedding=embedding)
    expect = (BURSTS * BURST_SIZE + SINGLES) / WINDOW_H * span_h * embedding / N_NODES
    mean, se = _mean_count(s, span_h)
    print(
        f"\n{embedding} servers over {span_h:g} h: mean {mean:.3f} +- {se:.3f} failures, expected {expect:.3f}"
    )
    assert abs(mean - expect) < 3.29 * se


def test_a_subset_of_the_traces_nodes_replays_their_average_rate(tmp_path):
    """5 servers replaying a 20-node trace whose node k fails 2(k+1) times, plus a node observed for
    only the last 500 h of the window (it repeats its own window: its rate stays its own)."""
    rng = np.random.default_rng(3)
    rows, nodes = [], {}
    for k in range(20):
        nodes[f"a{k:02d}"] = ("embedding", 0.0, WINDOW_H)
        for t in np.sort(rng.choice(np.arange(1, 1990, 2.0), 2 * (k + 1), replace=False)):
            rows += [
                (f"a{k:02d}", "embedding", "fail", float(t)),
                (f"a{k:02d}", "embedding", "repair", float(t) + 0.5),
            ]
    nodes["late"] = ("embedding", 1500.0, WINDOW_H)
    for t in np.arange(1510.0, 2000.0, 25.0):  # 20 failures in 500 h
        rows += [
            ("late", "embedding", "fail", float(t)),
            ("late", "embedding", "repair", float(t) + 0.5),
        ]
    s = _scenario(_write(tmp_path / "h.csv", rows, nodes), embedding=5)
    rates = [2 * (k + 1) / WINDOW_H for k in range(20)] + [20 / 500.0]
    expect = 5 * np.mean(rates) * 2000.0
    mean, se = _mean_count(s, 2000.0)
    print(f"\n5 of 21 nodes over 2,000 h: mean {mean:.2f} +- {se:.2f}, expected {expect:.2f}")
    assert abs(mean - expect) < 3.29 * se


# -- reproducibility ------------------------------------------------------------------------------------
def test_one_seed_gives_one_schedule_and_replications_differ(tmp_path):
    path = _bursty(tmp_path / "b.csv")
    s = _scenario(path, embedding=25)
    a = replay_schedule(s, 5)
    replay._load.cache_clear()
    replay._circle.cache_clear()
    assert repr(replay_schedule(_scenario(path, embedding=25), 5)) == repr(a)
    assert replay_schedule(s, 6) != a
    assert replay_schedule(_scenario(path, embedding=25, seed=1), 5) != a
    scheds = {repr([x[0] for x in replay_schedule(s, r)]) for r in range(1, 21)}
    assert len(scheds) == 20


def test_a_replicated_run_sees_the_bursts(tmp_path):
    """Through the engine: the bursts of a resampled replication take down several servers together,
    and one seed gives one run."""
    s = _scenario(_bursty(tmp_path / "b.csv"), duration_h=400.0)
    r, ev = simulate_one(s, 2, record=True)
    fails = [(e.time_s, (e.node,), (e.value,)) for e in ev if e.kind == "fail"]
    n, p = _partnered(fails)
    assert r.failures_embedding == n > 0 and p >= BURST_SIZE
    assert any(size == BURST_SIZE for size, _ in _groups(fails))
    r2, ev2 = simulate_one(s, 2, record=True)
    assert r2 == r and [(e.time_s, e.node) for e in ev2] == [(e.time_s, e.node) for e in ev]


# -- the planner's rates of a replayed trace ------------------------------------------------------------
def test_a_replayed_traces_rates_count_trainer_and_embedding_events_apart(tmp_path):
    """The planner's rates of a replayed trace mean what they mean for parametric failures: 4
    trainers, each failing every 100 h (at distinct instants), and 6 embedding servers failing all
    together every 200 h give trainer events at 0.04/h and embedding events at 0.005/h, each taking
    k = 6 servers (exactly: the simultaneous failures stay together). The counts (rates x the wall
    time of the same 20 replications) lie within their 99% Poisson intervals around the trace's
    rates (conservative: a periodic trace varies less than Poisson)."""
    from scipy import stats

    from cprsim.planner.rates import failure_rates
    from cprsim.sim.replicate import run_replications

    rows, nodes = [], {}
    for i in range(4):
        nodes[f"t{i}"] = ("trainer", 0.0, 1000.0)
        for t in (10.0 + i + 100.0 * j for j in range(10)):
            rows += [(f"t{i}", "trainer", "fail", t), (f"t{i}", "trainer", "repair", t + 0.01)]
    for i in range(6):
        nodes[f"e{i}"] = ("embedding", 0.0, 1000.0)
        for t in (15.0 + 200.0 * j for j in range(5)):
            rows += [(f"e{i}", "embedding", "fail", t), (f"e{i}", "embedding", "repair", t + 0.01)]
    s = _scenario(
        _write(tmp_path / "t.csv", rows, nodes), trainers=4, embedding=6, duration_h=1000.0
    )
    r = failure_rates(s)
    wall = sum(x.wall_s for x in run_replications(s, 20)[0])  # the replications the rates measure
    n_emb, n_trainer = r.embedding * wall, (r.nodes - r.embedding) * wall
    assert r.k == pytest.approx(6.0, rel=1e-12)
    assert r.job == 0 and r.total == r.nodes and not r.exponential
    for n, rate_h in ((n_trainer, 4 * 10 / 1000.0), (n_emb, 5 / 1000.0)):
        assert n == pytest.approx(round(n), abs=1e-6) and n > 0  # whole events
        lo = stats.chi2.ppf(0.005, 2 * round(n)) / 2
        hi = stats.chi2.ppf(0.995, 2 * round(n) + 2) / 2
        print(f"\n{round(n)} events, expected {rate_h * wall / HOUR:.1f} [{lo:.1f}, {hi:.1f}]")
        assert lo <= rate_h * wall / HOUR <= hi
