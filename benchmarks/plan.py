"""Benchmark: wall time of `cprsim plan cpr-production --max-accuracy-loss 0.001` (issue 15's target:
about a second), against baselines measured in the same run on the same machine.

* **A, the adaptive planner** (the default, `--precision 0.1`);
* **B, the exhaustive planner** (`--precision off`: every grid point, search step and confirmation on
  all its replications, the planner's algorithm before issue 15; it shares today's engine and
  caches, so the ratio A/B is what the planner's own changes buy);
* A with a **cold access cache** (a fresh, empty `CPRSIM_CACHE_DIR` each run: the first plan on a
  machine);
* yardsticks: `cprsim simulate cpr-production` (its 200 replications) and the **import floor**
  (a process that only imports what `cprsim plan` imports, then exits).

Every figure is the whole process (a fresh interpreter, imports included). Commands run in turn
(A B A B ...) so that a drift of the machine's speed hits all alike; medians are printed (min and
max show the spread). The plans' answers are compared: the intervals of A and B per option.
Usage: python benchmarks/plan.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

PLAN = ["plan", "cpr-production", "--max-accuracy-loss", "0.001"]
IMPORTS = (
    "import cprsim.cli, cprsim.cli.plan, cprsim.planner, cprsim.sim.engine, cprsim.sim.prioritized, "
    "cprsim.calibrate.calibration"
)


def timed(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, bytes]:
    t = time.perf_counter()
    r = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, env=env)
    return time.perf_counter() - t, r.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    py = [sys.executable]
    cold_root = tempfile.mkdtemp(prefix="cprsim-bench-cache-")
    runs: dict[str, tuple[list[str], bool]] = {
        "A  plan (adaptive, default)": ([*py, "-m", "cprsim", *PLAN, "--json"], False),
        "B  plan --precision off (exhaustive)": (
            [*py, "-m", "cprsim", *PLAN, "--json", "--precision", "off"],
            False,
        ),
        "A, cold access cache": ([*py, "-m", "cprsim", *PLAN, "--json"], True),
        "simulate cpr-production (200 reps)": (
            [*py, "-m", "cprsim", "simulate", "cpr-production", "--json"],
            False,
        ),
        "import floor": ([*py, "-c", IMPORTS], False),
    }
    subprocess.run(
        runs["A  plan (adaptive, default)"][0], check=True, stdout=subprocess.DEVNULL
    )  # warm the cache
    times: dict[str, list[float]] = {k: [] for k in runs}
    out: dict[str, bytes] = {}
    for _ in range(a.repeat):
        for k, (cmd, cold) in runs.items():
            env = None
            if cold:
                env = {**os.environ, "CPRSIM_CACHE_DIR": tempfile.mkdtemp(dir=cold_root)}
            dt, stdout = timed(cmd, env)
            times[k].append(dt)
            out[k] = stdout
    base = statistics.median(times["B  plan --precision off (exhaustive)"])
    print(
        f"whole process, {a.repeat} runs each, in turn; median [min, max] seconds; ratio: median / B's median"
    )
    print(f"{'command':40s} {'median':>8s} {'min':>7s} {'max':>7s} {'x B':>6s}")
    for k, ts in times.items():
        m = statistics.median(ts)
        print(f"{k:40s} {m:8.2f} {min(ts):7.2f} {max(ts):7.2f} {m / base:6.2f}")
    pa = json.loads(out["A  plan (adaptive, default)"])
    pb = json.loads(out["B  plan --precision off (exhaustive)"])
    ib = {o["label"]: o for o in pb["options"]}
    print(f"recommended: A {pa['recommended']!r}, B {pb['recommended']!r}")
    for o in pa["options"]:
        b = ib.get(o["label"])
        if b is not None:
            print(
                f"  {o['label']:28s} A {o['interval_h']:7.3f} h ({o['overhead']['n']:3d} confirming runs)   "
                f"B {b['interval_h']:7.3f} h ({b['overhead']['n']:3d})"
            )
    a_med = statistics.median(times["A  plan (adaptive, default)"])
    print(
        f"target: plan <= 1.5 s whole process: {'met' if a_med <= 1.5 else 'NOT met'} ({a_med:.2f} s; "
        f"import floor {statistics.median(times['import floor']):.2f} s)"
    )


if __name__ == "__main__":
    main()
