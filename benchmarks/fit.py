"""Benchmark: fitting all five families (with censoring) to the Titan GPU lifetimes (30,207 rows).

Printed as ratios against baselines measured in the same run (these machines are shared and noisy):

* the fits as before issue 29: scipy.stats' generic censored ``fit`` (Nelder-Mead through
  ``CensoredData``) for each family, which ``cprsim.failures.likelihood.mle`` replaced
  (run here by turning the fast path off: the fallback is that code);
* one plain, uncensored ``scipy.stats.weibull_min.fit`` on the same durations.

Then the default 49-draw goodness-of-fit bootstrap, against the fit without it (issue 29's goal:
the bootstrap at most 3x the fit): its draws refitted together (``likelihood.mle_many``), and as
before issue 29 item 5, one L-BFGS-B refit per draw (run here by emptying ``likelihood.BATCHED``:
the per-draw path is what a draw falls back to; timed on a few draws per family and scaled to 49,
a full run takes minutes); and the import of what ``cprsim fit`` needs. Reads ../shared
(CPRSIM_SHARED). Usage: python benchmarks/fit.py [--quick]
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

SHARED = Path(os.environ.get("CPRSIM_SHARED", Path(__file__).resolve().parents[2] / "shared"))
TITAN = SHARED / "traces" / "public" / "TitanGPULife" / "gc_summary_loc.csv"


def best_of(f, k: int = 3) -> float:
    best = float("inf")
    for _ in range(k):
        t = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t)
    return best


def import_time(stmt: str) -> float:
    code = f"import time; t = time.perf_counter(); {stmt}; print(time.perf_counter() - t)"
    runs = [
        float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout)
        for _ in range(3)
    ]
    return min(runs)


def main() -> None:
    if not TITAN.is_file():
        sys.exit(f"benchmarks/fit.py: {TITAN} not found (set CPRSIM_SHARED to the shared/ folder)")
    quick = "--quick" in sys.argv
    k = 1 if quick else 3
    imp = import_time("import cprsim.failures.fit")
    imp_stats = import_time("import scipy.stats")
    from scipy import stats

    from cprsim.failures import likelihood
    from cprsim.failures.fit import fit_all
    from cprsim.failures.traces import read_trace

    t0 = time.perf_counter()
    tr = read_trace(TITAN, "titan")
    t_read = time.perf_counter() - t0
    t, obs = tr.lifetimes()
    base = best_of(lambda: stats.weibull_min.fit(t, floc=0), k)
    five = best_of(lambda: fit_all(t, obs), k)
    fast_mle = likelihood.mle
    likelihood.mle = lambda *a, **kw: None  # the fallback: scipy's generic censored fit
    try:
        old = best_of(lambda: fit_all(t, obs), 1)
    finally:
        likelihood.mle = fast_mle
    boot = best_of(lambda: fit_all(t, obs, bootstrap=49), k)
    few = 2 if quick else 4  # draws per family on the per-draw path
    batched = likelihood.BATCHED
    likelihood.BATCHED = ()  # every draw refitted alone, by L-BFGS-B: the path before batching
    try:
        per_draw = best_of(lambda: fit_all(t, obs, bootstrap=few), 1)
    finally:
        likelihood.BATCHED = batched
    old_boot = (per_draw - five) * 49 / few  # the 49 draws' share, scaled from `few`
    print(
        f"Titan lifetimes: {t.size} rows, {int((~obs).sum())} censored ({100 * (~obs).mean():.0f}%)"
    )
    print(f"  read the trace                                     {t_read:7.2f} s")
    print(
        f"  import cprsim.failures.fit                         {imp:7.2f} s   "
        f"(import scipy.stats alone: {imp_stats:.2f} s; fit no longer needs it)"
    )
    print(f"  baseline: one uncensored weibull_min.fit           {base:7.2f} s   1.00x")
    print(f"  five families, censored, 95% CIs: scipy's fit      {old:7.2f} s   {old / base:.2f}x")
    print(
        f"  five families, censored, 95% CIs: closed forms     {five:7.2f} s   {five / base:.2f}x"
        f"   ({old / five:.2f}x faster than scipy's fit)"
    )
    print(
        f"  the same with the default 49-draw bootstrap        {boot:7.2f} s   {boot / base:.2f}x"
        f"   ({boot / five:.2f}x the fit without it)"
    )
    print(
        f"  the bootstrap alone (49 draws x 5 families)        {boot - five:7.2f} s"
        f"   {(boot - five) / five:.2f}x the fit (goal <= 3x)"
    )
    print(
        f"  the bootstrap alone, one L-BFGS-B refit per draw   {old_boot:7.2f} s"
        f"   {old_boot / five:.2f}x the fit (scaled from {few} draws per family;"
        f" {old_boot / (boot - five):.0f}x the batched refits)"
    )


if __name__ == "__main__":
    main()
