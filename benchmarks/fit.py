"""Benchmark: fitting all five families (with censoring) to the Titan GPU lifetimes (30,207 rows).

Target < 2 s on these machines. Printed next to a baseline measured in the same run: one plain,
uncensored `scipy.stats.weibull_min.fit` on the same durations. Reads ../shared (CPRSIM_SHARED).
Usage: python benchmarks/fit.py
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from scipy import stats

from cprsim.failures.fit import fit_all
from cprsim.failures.traces import read_trace

SHARED = Path(os.environ.get("CPRSIM_SHARED", Path(__file__).resolve().parents[2] / "shared"))
TITAN = SHARED / "traces" / "public" / "TitanGPULife" / "gc_summary_loc.csv"


def best_of(f, k: int = 3) -> float:
    best = float("inf")
    for _ in range(k):
        t = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    if not TITAN.is_file():
        sys.exit(f"benchmarks/fit.py: {TITAN} not found (set CPRSIM_SHARED to the shared/ folder)")
    t0 = time.perf_counter()
    tr = read_trace(TITAN, "titan")
    t_read = time.perf_counter() - t0
    t, obs = tr.lifetimes()
    base = best_of(lambda: stats.weibull_min.fit(t, floc=0))
    five = best_of(lambda: fit_all(t, obs))
    print(
        f"Titan lifetimes: {t.size} rows, {int((~obs).sum())} censored ({100 * (~obs).mean():.0f}%)"
    )
    print(f"  read the trace                               {t_read:7.2f} s")
    print(f"  baseline: one uncensored weibull_min.fit     {base:7.2f} s   1.00x")
    print(
        f"  all five families, censored, with 95% CIs    {five:7.2f} s   {five / base:.2f}x   (target < 2 s: "
        f"{'met' if five < 2 else 'NOT met'})"
    )


if __name__ == "__main__":
    main()
