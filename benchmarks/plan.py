"""Benchmark: wall time of `cprsim plan cpr-production` (target <= 5 s on 2 cores).

Measured end to end (a fresh process, imports included), best of 3, next to a baseline measured
in the same run on the same machine: `cprsim simulate cpr-production` (its 200 replications),
so the ratio stays meaningful on a shared, noisy machine.
Usage: python benchmarks/plan.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time


def best_of(args: list[str], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "cprsim", *args], check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    base = best_of(["simulate", "cpr-production", "--json"], a.repeat)
    plan = best_of(["plan", "cpr-production", "--max-accuracy-loss", "0.001", "--json"], a.repeat)
    allp = best_of(["plan", "cpr-production", "--max-accuracy-loss", "0.001", "--strategies", "all", "--json"], 1)
    print(f"{'command':58s} {'seconds':>8s} {'x baseline':>10s}")
    print(f"{'cprsim simulate cpr-production (baseline, 200 reps)':58s} {base:8.2f} {1.0:10.2f}")
    print(f"{'cprsim plan cpr-production --max-accuracy-loss 0.001':58s} {plan:8.2f} {plan / base:10.2f}")
    print(f"{'  ... --strategies all (best of 1)':58s} {allp:8.2f} {allp / base:10.2f}")
    print(f"target: plan <= 5 s: {'met' if plan <= 5 else 'NOT met'}")


if __name__ == "__main__":
    main()
