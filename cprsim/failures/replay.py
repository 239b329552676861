"""Trace replay: real failure times mapped onto simulated nodes.

A scenario with ``failures.replay = "trace.csv"`` (the schema of ``traces/README.md``) replays
those failures on top of its own failure processes (usually none). **Mapping.** Trace nodes whose
``node_type`` is ``trainer`` or ``embedding`` go to simulated nodes of that type; any other type
(``node``, ``gpu``, ``job``) can serve either. Replication 0 maps the trace's nodes, sorted by
id, onto the simulated nodes in order, each history from its own window start (time 0 of the
job = the start of the node's observation); simulated nodes beyond the trace's are filled by
resampling. Replications r > 0 bootstrap: every simulated node draws a trace node with
replacement and a uniform offset into its window (the history wraps around), from the named
stream ``(seed, r, "replay")``. A failure's down time is its recorded repair time, or a draw from
the scenario's rescheduling distribution when the trace has none.
"""

from __future__ import annotations

import os
from functools import lru_cache

import numpy as np

from cprsim.errors import InputError
from cprsim.failures.traces import Trace, read_csv
from cprsim.scenario import HOUR, Scenario
from cprsim.sim.streams import stream


@lru_cache(maxsize=8)
def _load(path: str, mtime: float) -> tuple[tuple[str, float, tuple[tuple[float, float | None], ...]], ...]:
    """Per trace node: (type, window length h, ((fail offset h, down h or None), ...))."""
    from pathlib import Path

    tr: Trace = read_csv(Path(path), {})
    hz = tr.horizon()
    out = []
    for name in sorted(tr.nodes):
        h = tr.nodes[name]
        start = h.start or 0.0
        end = hz if h.end is None else h.end
        fails = []
        pending: float | None = None
        for t, ev, _ in h.events:
            if ev == "fail" and pending is None:
                pending = t
            elif ev == "repair" and pending is not None:
                fails.append((pending - start, t - pending))
                pending = None
        if pending is not None:
            fails.append((pending - start, None))
        out.append((h.node_type, max(end - start, 1e-9), tuple(fails)))
    if not out:
        raise InputError(f"{path}: no nodes to replay")
    return tuple(out)


def replay_schedule(s: Scenario, rep: int) -> list[tuple[float, tuple[int, ...], tuple[float, ...]]]:
    path = s.failures.replay
    assert path is not None
    try:
        hist = _load(path, os.path.getmtime(path))
    except FileNotFoundError:
        raise InputError(f"failures.replay: {path}: no such file") from None
    nt, ne = s.cluster.trainers, s.cluster.embedding_servers
    rng = stream(s.seed, rep, "replay")
    resched = s.reschedule.dist
    horizon_h = 20 * s.duration_s / HOUR  # the job never runs 20x its failure-free time in practice
    pools = {
        "trainer": [i for i, h in enumerate(hist) if h[0] not in ("embedding",)],
        "embedding": [i for i, h in enumerate(hist) if h[0] not in ("trainer",)],
    }
    out = []
    cursor = {"trainer": 0, "embedding": 0}
    for node in range(nt + ne):
        kind = "trainer" if node < nt else "embedding"
        pool = pools[kind]
        if not pool:
            continue
        if rep == 0 and cursor[kind] < len(pool):
            idx, offset = pool[cursor[kind]], 0.0
            cursor[kind] += 1
        else:
            idx = pool[int(rng.integers(len(pool)))]
            offset = float(rng.uniform(0.0, hist[idx][1]))
        _, length, fails = hist[idx]
        if not fails:
            continue
        # shift by the offset and wrap around the window; repeat the window to cover the horizon
        times = np.array([f[0] for f in fails])
        base = (times - offset) % length
        laps = int(np.ceil(horizon_h / length)) if length < horizon_h else 1
        for lap in range(laps):
            for (t0, down), b in zip(fails, base):
                t = b + lap * length
                if t > horizon_h:
                    continue
                d = down * HOUR if down is not None else float(resched.sample(rng))
                out.append((t * HOUR, (node,), (max(d, 1e-6),)))
    out.sort(key=lambda x: (x[0], x[1]))
    return out
