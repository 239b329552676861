"""Benchmark the engine: cost per simulated event against bare SimPy, time per replication, scaling.

1. cpr-production: SimPy events processed per replication (counted by wrapping
   ``Environment.step``) with quiet phases (the default: a phase that ends before the next
   scheduled event costs no SimPy event, ``engine.QUIET_PHASES``, and the timeout of a phase a
   failure cut short is abandoned, ``Env.abandon_wait``) and without (one timeout per phase, the
   engine's events before issue 15: the *phase-equivalent* events), wall time per replication of
   both (the results of both are checked to be identical), and two ratios, each against a bare
   SimPy loop (one process yielding that many timeouts in a fresh environment) measured in the
   same run, best of 5:

   * per phase-equivalent event: a replication's time over its phase-equivalent events, against
     the bare loop of as many timeouts (target <= 3x);
   * per event processed: a replication's time over the SimPy events it actually processed,
     against the bare loop of as many timeouts (issue 29's goal: <= 4x). This one charges every
     quiet phase, failure draw and recovery to the few events left: removing a useless event
     makes it worse, so read it with the time per replication (target <= 5 ms).

   Times are this process's CPU time (``time.process_time``), for cprsim and bare SimPy alike:
   other jobs on a shared machine do not count, as they would in wall time.
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


#: the clock of every timing here: this process's CPU time (module doc)
clock = time.process_time


def time_reps(s: sc.Scenario, reps: int, best_of: int = 5) -> float:
    c = costs_of(s)
    best = float("inf")
    for _ in range(best_of):
        t = clock()
        for i in range(reps):
            simulate_one(s, i, costs=c)
        best = min(best, (clock() - t) / reps)
    return best


def without_quiet_phases(f, *args):
    """``f(*args)`` with one SimPy timeout per phase of the job (``engine.QUIET_PHASES = False``)."""
    engine.QUIET_PHASES = False
    try:
        return f(*args)
    finally:
        engine.QUIET_PHASES = True


def bare_simpy(n_events: int, reps: int, best_of: int = 5) -> float:
    """Seconds per run of a fresh environment whose one process yields ``n_events`` timeouts."""

    def proc(env: simpy.Environment):
        for _ in range(n_events):
            yield env.timeout(1.0)

    best = float("inf")
    for _ in range(best_of):
        t = clock()
        for _ in range(reps):
            env = simpy.Environment()
            env.process(proc(env))
            env.run()
        best = min(best, (clock() - t) / reps)
    return best


def main() -> None:
    s = sc.load("cpr-production")

    def first_50():
        return [simulate_one(s, i) for i in range(50)]

    same = first_50() == without_quiet_phases(first_50)
    processed = count_events(s, 100)  # the SimPy events a replication processes
    phase_eq = without_quiet_phases(count_events, s, 100)  # one timeout per phase
    t_phases = without_quiet_phases(time_reps, s, 200)
    t = time_reps(s, 200)
    n_eq, n_proc = round(phase_eq), max(1, round(processed))
    b_eq = bare_simpy(n_eq, 200) / n_eq  # bare SimPy, s per timeout, in a loop of n_eq
    b_proc = bare_simpy(n_proc, 200) / n_proc  # ... in a loop of n_proc
    print("cpr-production (full recovery, 0.7 h interval): 200 replications, best of 5, CPU time")
    print(f"  SimPy events processed      {processed:10.1f}   per replication (counted)")
    print(f"  phase-equivalent events     {phase_eq:10.1f}   (counted with one timeout per phase)")
    print(
        f"  time per replication        {1e3 * t:10.3f} ms   (target <= 5 ms; one timeout per phase: "
        f"{1e3 * t_phases:.3f} ms, {t_phases / t:.2f}x)"
    )
    print(
        f"  per phase-equivalent event  {1e6 * t / phase_eq:10.2f} us   bare SimPy "
        f"{1e6 * b_eq:.2f} us/timeout (loop of {n_eq}): ratio {t / phase_eq / b_eq:.2f}x "
        "(target <= 3x)"
    )
    print(
        f"  per event processed         {1e6 * t / processed:10.2f} us   bare SimPy "
        f"{1e6 * b_proc:.2f} us/timeout (loop of {n_proc}): ratio {t / processed / b_proc:.2f}x "
        "(goal <= 4x)"
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
