"""Trace replay: real failure times mapped onto simulated nodes.

A scenario with ``failures.replay = "trace.csv"`` (the schema of ``traces/README.md``) replays
those failures on top of its own failure processes (usually none). A failure's down time is its
recorded repair time, or a draw from the scenario's rescheduling distribution when the trace has
none.

**Types.** Trace nodes whose ``node_type`` is ``trainer`` or ``embedding`` go to simulated nodes
of that type; any other type (``node``, ``gpu``, ``job``) can serve either.

**Replication 0** is the trace as recorded: the trace's nodes, sorted by id, go onto the simulated
nodes of each type in order, each history from its own window start (time 0 of the job = the start
of the node's observation), the window repeated when the job outlasts it; simulated nodes beyond
the trace's are filled by a random trace node at a random offset into its window, from the named
stream ``(seed, 0, "replay")``.

**Replications r > 0: a circular block bootstrap over time** (Politis & Romano 1992), so that
failures that struck several nodes together in the trace strike the simulated nodes together too.
The trace is one timeline, the circle ``[T0, T0 + T)`` from its earliest window start to its end,
on which every node keeps its recorded failure times (a node observed for only part of it repeats
its own window around the circle, so its rate stays its own). The job's timeline is cut into
consecutive blocks of ``B`` hours; each block replays the window ``[u, u + B)`` of the circle, ``u``
uniform on it, for *all* the nodes at once. Within a block, every failure keeps its time relative
to every other node's: bursts, co-failures across types and a bad node's repeats survive; only
what straddles a block's edge is cut (a burst of duration d with probability about 2d/B).
Since every start ``u`` is uniform on the circle, each instant of the job sees each instant of the
trace with equal probability: the expected number of failures over any span is exactly the trace's
rate times that span (unbiased), and replications differ by which windows of the trace they draw.

**B** is :data:`BLOCK_H` = one week (168 h), or the whole circle when the trace is shorter (each
block is then the whole trace, cyclically shifted by a random offset). A week is long against the
bursts a trace records (seconds to hours: a switch, a power domain, a bad rollout), so that fewer
than 1% of hour-long bursts are cut, and it keeps daily and weekly patterns within a block; it is
short against the traces worth replaying (months to a year), so that replications draw from tens of
distinct weeks. A job shorter than a week therefore sees a single block: one cyclic shift of the
whole trace.

**Nodes in r > 0.** The node mapping is fixed within a replication (so a node's repeats stay on one
simulated node) and drawn anew for each one: a random permutation of the trace's nodes assigns
them, type by type as above, to the simulated nodes, each trace node to at most one simulated node.
When the scenario has more nodes than the trace, the rest form further *copies* of the trace's
cluster, each with its own permutation and its own blocks (independent of the other copies, as two
clusters would be); when it has fewer, each replication replays a random subset of the trace's
nodes (so the expected rate is the trace's average, not that of its first nodes by id). Copy ``c``
draws everything (its permutation, its block starts, then the missing repair times) from the named
stream ``(seed, r, "replay", c)``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from cprsim.errors import InputError
from cprsim.failures.traces import Trace, read_csv
from cprsim.io import check_input_file, decode_errors
from cprsim.scenario import HOUR, Scenario
from cprsim.streams import stream

#: the block length of the bootstrap of replications r > 0, hours (the whole trace when shorter)
BLOCK_H = 168.0

Scheduled = tuple[float, tuple[int, ...], tuple[float, ...]]
NodeHist = tuple[str, float, float, tuple[tuple[float, float | None], ...]]


@lru_cache(maxsize=8)
def _load(path: str, mtime: float) -> tuple[NodeHist, ...]:
    """Per trace node, sorted by id: (type, window start h, window length h,
    ((fail offset from the window start h, down h or None), ...))."""
    from pathlib import Path

    with decode_errors(path):
        tr: Trace = read_csv(Path(path), {})
    hz = tr.horizon()
    out = []
    for name in sorted(tr.nodes):
        h = tr.nodes[name]
        start = h.start or 0.0
        end = hz if h.end is None else h.end
        fails: list[
            tuple[float, float | None]
        ] = []  # (time, down): None, not repaired in the trace
        pending: float | None = None
        for t, ev, _ in h.events:
            if ev == "fail" and pending is None:
                pending = t
            elif ev == "repair" and pending is not None:
                fails.append((pending - start, t - pending))
                pending = None
        if pending is not None:
            fails.append((pending - start, None))
        out.append((h.node_type, start, max(end - start, 1e-9), tuple(fails)))
    if not out:
        raise InputError(f"{path}: no nodes to replay")
    return tuple(out)


@dataclass(frozen=True)
class _Circle:
    """The trace as one timeline ``[t0, t0 + length)``: every failure of every node, by time."""

    t0: float
    length: float
    time: np.ndarray  # h, sorted, in [t0, t0 + length)
    node: np.ndarray  # index into the trace's nodes
    down: np.ndarray  # h; NaN = no recorded repair


@lru_cache(maxsize=8)
def _circle(path: str, mtime: float) -> _Circle:
    hist = _load(path, mtime)
    t0 = min(h[1] for h in hist)
    length = max(max(h[1] + h[2] for h in hist) - t0, 1e-9)
    ts, ns, ds = [], [], []
    for k, (_, start, span, fails) in enumerate(hist):
        if not fails:
            continue
        off = np.array([f[0] for f in fails])
        down = np.array([np.nan if f[1] is None else f[1] for f in fails])
        # the node's window repeated around the circle (once when it covers the circle)
        lo = int(np.floor((t0 - start) / span)) - 1
        hi = int(np.ceil((t0 + length - start) / span)) + 1
        if hi - lo > 1_000_000:
            raise InputError(
                f"{path}: node {k} is observed for {span:.3g} h of a {length:.3g} h trace: "
                "too short a window to replay"
            )
        laps = np.arange(lo, hi)
        t = (start + off[None, :] + span * laps[:, None]).ravel()
        keep = (t >= t0) & (t < t0 + length)
        ts.append(t[keep])
        ns.append(np.full(int(keep.sum()), k))
        ds.append(np.tile(down, len(laps))[keep])
    if not ts:
        return _Circle(t0, length, np.zeros(0), np.zeros(0, dtype=int), np.zeros(0))
    t, n, d = np.concatenate(ts), np.concatenate(ns), np.concatenate(ds)
    order = np.lexsort((n, t))
    return _Circle(t0, length, t[order], n[order], d[order])


def _file(s: Scenario) -> tuple[str, float]:
    path = s.failures.replay
    assert path is not None
    try:
        p = check_input_file(path, "failure trace")
    except InputError as e:
        raise InputError(f"failures.replay: {e}") from None
    return path, os.path.getmtime(p)


def _pools(hist: tuple[NodeHist, ...]) -> dict[str, list[int]]:
    return {
        "trainer": [i for i, h in enumerate(hist) if h[0] not in ("embedding",)],
        "embedding": [i for i, h in enumerate(hist) if h[0] not in ("trainer",)],
    }


def replay_schedule(s: Scenario, rep: int) -> list[Scheduled]:
    """The failures a replayed trace brings to replication ``rep``: (time s, (node,), (down s,)),
    sorted by time."""
    path, mtime = _file(s)
    hist = _load(path, mtime)
    horizon_h = 20 * s.duration_s / HOUR  # the job never runs 20x its failure-free time in practice
    if rep == 0:
        return _as_recorded(s, hist, horizon_h)
    return _block_bootstrap(s, rep, hist, _circle(path, mtime), horizon_h)


def _as_recorded(s: Scenario, hist: tuple[NodeHist, ...], horizon_h: float) -> list[Scheduled]:
    """Replication 0: the trace's nodes in order, each from its window start."""
    nt, ne = s.cluster.trainers, s.cluster.embedding_servers
    rng = stream(s.seed, 0, "replay")
    resched = s.reschedule.dist
    pools = _pools(hist)
    out: list[Scheduled] = []
    cursor = {"trainer": 0, "embedding": 0}
    for node in range(nt + ne):
        kind = "trainer" if node < nt else "embedding"
        pool = pools[kind]
        if not pool:
            continue
        if cursor[kind] < len(pool):
            idx, offset = pool[cursor[kind]], 0.0
            cursor[kind] += 1
        else:  # more simulated nodes than the trace has: a random node at a random offset
            idx = pool[int(rng.integers(len(pool)))]
            offset = float(rng.uniform(0.0, hist[idx][2]))
        _, _, length, fails = hist[idx]
        if not fails:
            continue
        # shift by the offset and wrap around the window; repeat the window to cover the horizon
        times = np.array([f[0] for f in fails])
        base = (times - offset) % length
        laps = int(np.ceil(horizon_h / length)) if length < horizon_h else 1
        for lap in range(laps):
            for (_t0, down), b in zip(fails, base):
                t = b + lap * length
                if t > horizon_h:
                    continue
                d = down * HOUR if down is not None else float(resched.sample(rng))
                out.append((t * HOUR, (node,), (max(d, 1e-6),)))
    out.sort(key=lambda x: (x[0], x[1]))
    return out


def _block_bootstrap(
    s: Scenario, rep: int, hist: tuple[NodeHist, ...], circ: _Circle, horizon_h: float
) -> list[Scheduled]:
    """Replications r > 0: the circular block bootstrap of the module's docstring."""
    nt, ne = s.cluster.trainers, s.cluster.embedding_servers
    resched = s.reschedule.dist
    pools = _pools(hist)
    member = {kind: np.zeros(len(hist), dtype=bool) for kind in pools}
    for kind, pool in pools.items():
        member[kind][pool] = True
    block = min(BLOCK_H, circ.length)
    n_blocks = int(np.ceil(horizon_h / block))
    left = {"trainer": nt if pools["trainer"] else 0, "embedding": ne if pools["embedding"] else 0}
    first = {"trainer": 0, "embedding": nt}
    out: list[Scheduled] = []
    copy = 0
    while left["trainer"] or left["embedding"]:
        rng = stream(s.seed, rep, "replay", copy)
        perm = rng.permutation(len(hist))
        # this copy's node mapping: trace node -> simulated node (-1: not replayed in this copy)
        sim = np.full(len(hist), -1)
        for kind in ("trainer", "embedding"):
            free = [k for k in perm if member[kind][k] and sim[k] < 0][: left[kind]]
            done = (nt if kind == "trainer" else ne) - left[kind]
            sim[free] = first[kind] + done + np.arange(len(free))
            left[kind] -= len(free)
        starts = rng.uniform(circ.t0, circ.t0 + circ.length, n_blocks)
        times, nodes, downs = [], [], []
        mapped = sim[circ.node] >= 0
        t_c, n_c, d_c = circ.time[mapped], sim[circ.node[mapped]], circ.down[mapped]
        end = circ.t0 + circ.length
        for j, u in enumerate(starts):
            at = j * block
            span = min(block, horizon_h - at)
            hi = u + span
            segs = [(u, min(hi, end), at - u)]  # (from, to, job time - trace time)
            if hi > end:  # the window wraps around the end of the circle
                segs.append((circ.t0, circ.t0 + (hi - end), at + (end - u) - circ.t0))
            for a, b, shift in segs:
                i, k = np.searchsorted(t_c, a, "left"), np.searchsorted(t_c, b, "left")
                if k > i:
                    times.append(t_c[i:k] + shift)
                    nodes.append(n_c[i:k])
                    downs.append(d_c[i:k])
        if times:
            t_all, n_all, d_all = (
                np.concatenate(times),
                np.concatenate(nodes),
                np.concatenate(downs),
            )
            for t, n, d in zip(t_all, n_all, d_all):
                down = float(d) * HOUR if not np.isnan(d) else float(resched.sample(rng))
                out.append((float(t) * HOUR, (int(n),), (max(down, 1e-6),)))
        copy += 1
    out.sort(key=lambda x: (x[0], x[1]))
    return out
