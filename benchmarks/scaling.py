"""Benchmark: time per replication against the number of embedding servers, bulk failure streams
(the default, :mod:`cprsim.sim.failstreams`) against the former per-node streams and processes,
both measured in the same run.

The scenario: cpr-production's cluster without its failure domain, partial recovery (no rollback,
so even ~700 failures a replication leave a job that finishes), 30 s rescheduling, exponential
per-node failures, embedding bytes and storage bandwidth scaled with the servers (so a save or a
shard load costs the same at every size). Two series:

* **fixed failures**: the per-node MTBF grows with the node count (``ne x 0.08 h``), so every size
  sees about the same number of failures (~700 a replication) and only the per-node costs grow.
  Targets (issue 15): 18,000 servers <= 40 ms a replication; 18 -> 100,000 servers flat within 2x.
* **failures growing with the nodes**: the per-node MTBF is fixed (1,440 h: ~700 failures at
  18,000 servers).

Printed: events (failures) per replication, milliseconds per replication (best of ``--best-of``
timings of ``--reps`` replications; the per-node layout fewer at large sizes), and the ratios
per-node / bulk and (fixed series) bulk / bulk at 18 servers. 1,000,000 is the scenario schema's
largest cluster (``cluster.embedding_servers <= 1,000,000``); the per-node layout (~45 us and a
SimPy process a node) is timed up to :data:`PER_NODE_MAX` servers only. From 4,096 servers on,
the bulk layout draws the servers lazily (:class:`cprsim.sim.failstreams._Lazy`, issue 29): the
cost is per failure, flat in the number of servers.

A third case, **a million GPUs** (``--llm``): llm-16k-gpus (a node lifecycle: detection, standbys,
spares, repairs; tiered checkpoints) at 16,384 and at 1,048,576 GPUs (2,048 and 131,072 nodes of 8,
a standby for 128 nodes and a spare for 32, as the 16k job has), the Llama 3 report's 54 days of
training at its failure rates (a node every 6,912 h, a rack of 16 every 4,740 h: the million-GPU
job fails every ~3 minutes). At that rate the 16k job's recovery (a 6-minute interval, 20-60 s
detection, a 3-minute swap) would never finish, so both sizes take a faster one (assumed: a
36-second snapshot interval, 10 s detection, 30 s swap). Printed: milliseconds per replication and
the ratio 1M / 16k (target, issue 29: a 54-day million-GPU replication in <= 1 s).

Usage: python benchmarks/scaling.py [--sizes 18,180,1800,18000,100000,1000000] [--reps 20]
[--best-of 3] [--llm-reps 3]
"""

from __future__ import annotations

import argparse
import gc
import time
from collections.abc import Callable

import numpy as np

from cprsim import scenario as sc
from cprsim.costs import costs_of
from cprsim.sim.engine import simulate_one

#: per-node MTBF (h) per server in the fixed-failures series, and the fixed per-node MTBF (h)
FIXED_MTBF_PER_NODE_H = 0.08
GROWING_MTBF_H = 18_000 * FIXED_MTBF_PER_NODE_H
#: the per-node layout is timed up to this many servers (a million would take a minute a replication)
PER_NODE_MAX = 100_000
#: the growing series stops here: a million servers failing every 1,440 h fail faster than a
#: 30 s rescheduling and a 2-minute save let the job progress (it runs away)
GROWING_MAX = 100_000
#: GPUs per node of the million-GPU case
GPUS_PER_NODE = 8


def scenario(ne: int, mtbf_h: float) -> sc.Scenario:
    base = sc.load(
        "cpr-production",
        {
            "failures.domains": [],
            "checkpoint.interval_h": 1.0,
            "strategy.name": "partial",
            "reschedule.mean_s": 30.0,
        },
    )
    return base.with_updates(
        {
            "cluster.embedding_servers": ne,
            "cluster.embedding_gb": 400.0 * ne / 18,
            "storage.write_gbps": 7.0 * ne / 18,
            "storage.read_gbps": 20.0 * ne / 18,
            "failures.embedding": {"family": "exponential", "mtbf_h": mtbf_h},
        }
    )


def time_reps(s: sc.Scenario, reps: int, best_of: int, streams: str) -> tuple[float, float]:
    """(best seconds per replication, mean failures per replication)."""
    c = costs_of(s)
    simulate_one(s, reps, costs=c, streams=streams)  # warm-up (imports, caches), not timed
    best, fails = float("inf"), []
    for _ in range(best_of):
        fails = []
        t = time.perf_counter()
        for i in range(reps):
            r, _ = simulate_one(s, i, costs=c, streams=streams)
            fails.append(r.failures_embedding)
        best = min(best, (time.perf_counter() - t) / reps)
    return best, float(np.mean(fails))


def series(
    title: str, sizes: list[int], mtbf: Callable[[int], float], reps: int, best_of: int
) -> dict[int, float]:
    """Print one series; return the bulk seconds per replication by size."""
    print(title)
    print(
        f"{'servers':>8} {'failures':>9} {'bulk ms':>9} {'per-node ms':>12} {'per-node/bulk':>14} {'bulk/bulk@first':>16}"
    )
    bulk = {}
    for ne in sizes:  # every size's bulk timing first: the per-node runs leave a heap behind
        gc.collect()
        bulk[ne] = time_reps(scenario(ne, mtbf(ne)), reps, best_of, "bulk")
    first, out = bulk[sizes[0]][0], {}
    for ne in sizes:
        tb, fb = bulk[ne]
        if ne <= PER_NODE_MAX:
            # the per-node layout costs ~45 us a node: fewer replications and timings at large sizes
            r_old = max(1, min(reps, 2_000 // ne))
            gc.collect()
            to, _ = time_reps(
                scenario(ne, mtbf(ne)), r_old, best_of if ne <= 18_000 else 1, "per-node"
            )
            old = f"{1e3 * to:12.3f} {to / tb:13.1f}x"
        else:
            old = f"{'-':>12} {'-':>14}"
        print(f"{ne:8d} {fb:9.1f} {1e3 * tb:9.3f} {old} {tb / first:15.2f}x")
        out[ne] = tb
    print()
    return out


def llm(gpus: int) -> sc.Scenario:
    """llm-16k-gpus at ``gpus`` GPUs for the Llama 3 report's 54 days, with the faster recovery
    (module doc)."""
    nodes = gpus // GPUS_PER_NODE
    return sc.load(
        "llm-16k-gpus",
        {
            "cluster.trainers": nodes,
            "job.duration_h": 54 * 24.0,
            "checkpoint.interval_h": 0.01,
            "lifecycle.standbys": max(1, nodes // 128),
            "lifecycle.spares": max(1, nodes // 32),
            "lifecycle.detection": {"family": "gamma", "mean_s": 10.0, "shape": 4.0},
            "lifecycle.swap": {"family": "constant", "mean_s": 30.0},
        },
    )


def million_gpus(reps: int) -> None:
    """The million-GPU case: seconds per 54-day replication at 16k and 1M GPUs (one timing each)."""
    print("a million GPUs: llm-16k-gpus for 54 days (Llama 3's failure rates, faster recovery)")
    print(f"{'GPUs':>9} {'nodes':>7} {'failures':>9} {'wall d':>7} {'ms':>9} {'ratio':>7}")
    first = None
    for gpus in (16_384, 1_048_576):
        s = llm(gpus)
        c = costs_of(s)
        simulate_one(s, reps, costs=c)  # warm-up, not timed
        walls, fails = [], []
        t = time.perf_counter()
        for i in range(reps):
            r, _ = simulate_one(s, i, costs=c)
            walls.append(r.wall_s / 86_400)
            fails.append(r.failures_trainer)
        dt = (time.perf_counter() - t) / reps
        first = dt if first is None else first
        print(
            f"{gpus:9d} {s.cluster.trainers:7d} {np.mean(fails):9.0f} {np.mean(walls):7.1f} "
            f"{1e3 * dt:9.1f} {dt / first:6.1f}x"
        )
    print(f"target 3: a 54-day million-GPU replication in {dt:.2f} s (target <= 1 s)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="18,180,1800,18000,100000,1000000")
    ap.add_argument(
        "--llm-reps", type=int, default=3, help="replications of the million-GPU case (0: skip)"
    )
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--best-of", type=int, default=3)
    a = ap.parse_args()
    sizes = [int(x) for x in a.sizes.split(",")]
    fixed = series(
        f"fixed failures (per-node MTBF = servers x {FIXED_MTBF_PER_NODE_H} h)",
        sizes,
        lambda ne: ne * FIXED_MTBF_PER_NODE_H,
        a.reps,
        a.best_of,
    )
    series(
        f"failures growing with the nodes (per-node MTBF {GROWING_MTBF_H:g} h; up to {GROWING_MAX:,} servers)",
        [ne for ne in sizes if ne <= GROWING_MAX],
        lambda ne: GROWING_MTBF_H,
        a.reps,
        a.best_of,
    )
    if 18_000 in fixed:
        print(
            f"target 1: 18,000 servers, ~700 failures: {1e3 * fixed[18_000]:.1f} ms a replication (target <= 40 ms)"
        )
    print(
        f"target 2: fixed failures, slowest / fastest size: {max(fixed.values()) / min(fixed.values()):.2f}x "
        f"over {min(fixed)} -> {max(fixed)} servers (target <= 2x)"
    )
    if a.llm_reps > 0:
        print()
        million_gpus(a.llm_reps)


if __name__ == "__main__":
    main()
