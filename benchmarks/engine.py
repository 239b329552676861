"""Benchmark the engine: cost per simulated event against bare SimPy, time per replication, scaling.

1. cpr-production: SimPy events processed per replication (counted by wrapping
   ``Environment.step``) with quiet phases (the default: a phase that ends before the next
   scheduled event costs no SimPy event, ``engine.QUIET_PHASES``) and without (one timeout per
   phase, the engine's events before issue 15), wall time per replication of both, and the ratio
   of cprsim's time per event (events counted without quiet phases) to a bare SimPy loop of the
   same number of timeouts, measured in the same run (best of 5); the results of both are
   checked to be identical. Targets: <= 3x bare SimPy per event; one replication <= 5 ms. Also
   per event actually processed (with quiet phases: the replication's whole cost over the SimPy
   events it processed), against the same bare timeout (issue 29's goal: <= 4x).
2. Scaling from 18 to 1,800 embedding servers with per-node failures (per-node MTBF fixed, so
   failures grow with the nodes; sampled in bulk, one process), embedding bytes scaled with the
   servers: events (counted with one timeout per phase: the work, whether or not a phase needs a
   SimPy event), time per replication and time per event. Target: cost linear in events, not
   nodes x iterations. (benchmarks/scaling.py: up to 100,000 servers, bulk against per-node streams.)
Usage: python benchmarks/engine.py
"""

from __future__ import annotations

import time

import simpy

from cprsim import scenario as sc
from cprsim.costs import costs_of
from cprsim.sim import engine
from cprsim.sim.engine import simulate_one


def count_events(s: sc.Scenario, reps: int) -> float:
    n = 0
    orig = simpy.Environment.step

    def step(self):
        nonlocal n
        n += 1
        return orig(self)

    simpy.Environment.step = step  # type: ignore[method-assign]
    try:
        for i in range(reps):
            simulate_one(s, i)
    finally:
        simpy.Environment.step = orig  # type: ignore[method-assign]
    return n / reps


def time_reps(s: sc.Scenario, reps: int, best_of: int = 5) -> float:
    c = costs_of(s)
    best = float("inf")
    for _ in range(best_of):
        t = time.perf_counter()
        for i in range(reps):
            simulate_one(s, i, costs=c)
        best = min(best, (time.perf_counter() - t) / reps)
    return best


def without_quiet_phases(f, *args):
    """``f(*args)`` with one SimPy timeout per phase of the job (``engine.QUIET_PHASES = False``)."""
    engine.QUIET_PHASES = False
    try:
        return f(*args)
    finally:
        engine.QUIET_PHASES = True


def bare_simpy(n_events: int, reps: int, best_of: int = 5) -> float:
    def proc(env: simpy.Environment):
        for _ in range(n_events):
            yield env.timeout(1.0)

    best = float("inf")
    for _ in range(best_of):
        t = time.perf_counter()
        for _ in range(reps):
            env = simpy.Environment()
            env.process(proc(env))
            env.run()
        best = min(best, (time.perf_counter() - t) / reps)
    return best


def main() -> None:
    s = sc.load("cpr-production")

    def first_50():
        return [simulate_one(s, i) for i in range(50)]

    same = first_50() == without_quiet_phases(first_50)
    ev_quiet = count_events(s, 100)
    ev = without_quiet_phases(count_events, s, 100)  # the events of one timeout per phase
    t_phases = without_quiet_phases(time_reps, s, 200)
    t = time_reps(s, 200)
    b = bare_simpy(round(ev), 200)
    print("cpr-production (full recovery, 0.7 h interval)")
    print(f"  events per replication      {ev_quiet:10.1f}   (one timeout per phase: {ev:.1f})")
    print(
        f"  time per replication        {1e3 * t:10.3f} ms   (target <= 5 ms; one timeout per phase: "
        f"{1e3 * t_phases:.3f} ms, {t_phases / t:.2f}x)"
    )
    print(
        f"  time per event              {1e6 * t / ev:10.2f} us   (events of one timeout per phase)"
    )
    print(f"  bare SimPy per event        {1e6 * b / round(ev):10.2f} us")
    print(f"  ratio to bare SimPy         {t / b * round(ev) / ev:10.2f} x  (target <= 3x)")
    # issue 29: per event actually processed (quiet phases cost no SimPy event but do cost work)
    print(
        f"  time per processed event    {1e6 * t / ev_quiet:10.2f} us   ({ev_quiet:.1f} SimPy events "
        f"a replication); ratio to bare SimPy {t / ev_quiet / (b / round(ev)):.2f} x  (goal <= 4x)"
    )
    print(f"  identical results with and without quiet phases: {'yes' if same else 'NO'}")
    print()
    print(
        f"{'servers':>8} {'events/rep':>11} {'ms/rep':>9} {'us/event':>9} {'ms/rep per 1k events':>21}"
    )
    base = sc.load("cpr-production", {"failures.domains": [], "checkpoint.interval_h": 1.0})
    for ne in (18, 180, 1800):
        si = base.with_updates(
            {
                "cluster.embedding_servers": ne,
                "cluster.embedding_gb": 400.0 * ne / 18,
                "storage.write_gbps": 10.0 * ne / 18,
                "storage.read_gbps": 20.0 * ne / 18,
                "failures.embedding": {"family": "exponential", "mtbf_h": 18 * 10.0 * 4},
            }
        )
        reps = 40 if ne < 1800 else 10
        e = without_quiet_phases(count_events, si, reps)
        ti = time_reps(si, reps, best_of=3)
        print(f"{ne:8d} {e:11.1f} {1e3 * ti:9.3f} {1e6 * ti / e:9.2f} {1e3 * ti / e * 1000:21.3f}")


if __name__ == "__main__":
    main()
