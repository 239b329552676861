"""Benchmark: the same work in cprsim and in a plain hand-written SimPy model (issue 15).

The job: single level, exponential job failures (MTBF 10 h), full recovery, a 3-minute blocking
save every hour of progress, 1,000 h of work. A failure costs a 3-minute restart: the job is
relaunched (2 min; it is down, so it cannot fail) and reloads its last checkpoint (1 min; a failure
during the reload starts the restart over), then re-executes the work since that checkpoint. A
failure during a save aborts it. In cprsim: a job-level failure process (``failures.job``) with
``restart_s`` = the relaunch and ``costs.load_s`` = the reload, strategy ``full``.

The hand-written model (:func:`handwritten`) is what a user would write in about 40 lines of
SimPy: a job process that computes towards the next checkpoint, saves, and on a failure
interrupt waits the restart and re-executes since the last checkpoint; a failure process in the
machine-shop pattern (interrupt, stay down for the relaunch, draw the next lifetime) with
Python's ``random``.

Printed: the mean overhead ``(wall - work) / work`` of both with 95% CIs and the exact value
(``cprsim.analytic.full_overhead``), whether they agree (the difference of the means within the
95% CI of the difference), and the ratio of wall time per simulated hour, cprsim / hand-written:
the median over ``--rounds`` rounds, each timing the two alternately on ``--reps`` replications
(issue 15's target: <= 1.0x; the issue measured 2.07x before, CRSim 1.26x).

Usage: python benchmarks/peers.py [--reps 2000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import time

import simpy

from cprsim import analytic
from cprsim import scenario as sc
from cprsim.sim.replicate import estimate, run_replications

HOUR = 3600.0
WORK = 1000 * HOUR  #: failure-free work
INTERVAL = 1 * HOUR  #: progress between checkpoints
SAVE = 180.0  #: a blocking save
RELAUNCH = 120.0  #: the job is down (cannot fail) ...
RELOAD = 60.0  #: ... then reloads its last checkpoint (a failure can strike): the restart is 3 min
MTBF = 10 * HOUR  #: exponential job failures


def cprsim_scenario(reps: int) -> sc.Scenario:
    return sc.validate(
        {
            "name": "peers-same-work",
            "seed": 2025,
            "replications": reps,
            "cluster": {"trainers": 1, "embedding_servers": 1},
            "job": {"duration_h": WORK / HOUR},
            "checkpoint": {"interval_h": INTERVAL / HOUR, "mode": "blocking"},
            "costs": {"save_s": SAVE, "load_s": RELOAD},
            "failures": {
                "job": {"family": "exponential", "mtbf_h": MTBF / HOUR, "restart_s": RELAUNCH}
            },
            "strategy": {"name": "full"},
        },
        "benchmarks/peers.py",
    )


# -- the hand-written SimPy model ---------------------------------------------------------------------
def handwritten(rep: int) -> float:
    """One replication of the job, written plainly in SimPy; returns its wall time (s)."""
    env = simpy.Environment()
    rng = random.Random(rep)

    def job():
        done = saved = 0.0  # work done, work in the last checkpoint
        restarting = False
        while done < WORK:
            try:
                if restarting:  # relaunch, then reload the last checkpoint
                    yield env.timeout(RELAUNCH + RELOAD)
                    restarting = False
                target = min(saved + INTERVAL, WORK)
                yield env.timeout(target - done)  # compute up to the next checkpoint
                done = target
                if done < WORK:
                    yield env.timeout(SAVE)
                    saved = done
            except simpy.Interrupt:  # a failure: back to the last checkpoint
                done = saved
                restarting = True

    def failures(proc):
        while True:
            yield env.timeout(rng.expovariate(1.0 / MTBF))
            if proc.is_alive:
                proc.interrupt()
            yield env.timeout(RELAUNCH)  # down: no failure until it is relaunched

    proc = env.process(job())
    env.process(failures(proc))
    env.run(until=proc)
    return env.now


# -- the benchmark ---------------------------------------------------------------------------------------
def run_cprsim(s: sc.Scenario, reps: int) -> tuple[float, list[float]]:
    """(seconds, wall time of each replication)."""
    t = time.perf_counter()
    res, _ = run_replications(s, reps)
    return time.perf_counter() - t, [r.wall_s for r in res]


def run_handwritten(reps: int) -> tuple[float, list[float]]:
    t = time.perf_counter()
    walls = [handwritten(i) for i in range(reps)]
    return time.perf_counter() - t, walls


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    s = cprsim_scenario(a.reps)
    run_cprsim(s, 5)  # warm-up (imports, caches), not timed
    ratios, times = [], []
    for _ in range(max(1, a.rounds)):  # alternately, so both see the same machine
        tc, wc = run_cprsim(s, a.reps)
        th, wh = run_handwritten(a.reps)
        ratios.append((tc / sum(wc)) / (th / sum(wh)))
        times.append((tc, th))
    oc = estimate([(w - WORK) / WORK for w in wc])
    oh = estimate([(w - WORK) / WORK for w in wh])
    exact = analytic.full_overhead(
        WORK, INTERVAL, SAVE, 1.0 / MTBF, RELAUNCH + RELOAD, lam_recovery=0.0, restore_s=RELOAD
    )
    diff_ci = 1.96 * math.hypot(oc.sd / math.sqrt(oc.n), oh.sd / math.sqrt(oh.n))
    agree = abs(oc.mean - oh.mean) <= diff_ci
    print(
        f"same-work job: {WORK / HOUR:g} h of work, MTBF {MTBF / HOUR:g} h (exponential, job level), "
        f"save {SAVE / 60:g} min every {INTERVAL / HOUR:g} h, restart {(RELAUNCH + RELOAD) / 60:g} min "
        f"(relaunch {RELAUNCH:g} s + reload {RELOAD:g} s), full recovery; {a.reps} replications"
    )
    print(
        f"  mean overhead, cprsim        {100 * oc.mean:8.4f}%  95% CI [{100 * oc.lo:.4f}, {100 * oc.hi:.4f}]%"
    )
    print(
        f"  mean overhead, hand-written  {100 * oh.mean:8.4f}%  95% CI [{100 * oh.lo:.4f}, {100 * oh.hi:.4f}]%"
    )
    print(f"  exact (analytic.full_overhead) {100 * exact:6.4f}%")
    print(
        f"  agree: {'yes' if agree else 'NO'} (difference {100 * (oc.mean - oh.mean):+.4f}% points, "
        f"its 95% CI half-width {100 * diff_ci:.4f})"
    )
    hours_c, hours_h = sum(wc) / HOUR, sum(wh) / HOUR
    print(f"  simulated hours per round    cprsim {hours_c:,.0f}, hand-written {hours_h:,.0f}")
    for i, ((tc, th), r) in enumerate(zip(times, ratios)):
        print(
            f"  round {i + 1}: cprsim {tc:6.2f} s ({1e6 * tc / hours_c:6.2f} us per simulated hour), hand-written "
            f"{th:6.2f} s ({1e6 * th / hours_h:6.2f} us), ratio {r:5.2f}x"
        )
    print(
        f"ratio per simulated hour, cprsim / hand-written SimPy: {statistics.median(ratios):.2f}x "
        f"(median of {len(ratios)}; target <= 1.0x)"
    )


if __name__ == "__main__":
    main()
