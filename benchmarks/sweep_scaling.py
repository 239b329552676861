"""Benchmark: how a sweep scales with workers: 1, 2, 4, 8 and 16 local processes and Dask
LocalCluster workers, as speed-ups against the 1-process run measured in the same run.

The sweep: the toy scenario, P/3 checkpoint intervals x 3 strategies = P points of R replications
(issue 29's sweep by default: 96 points x 600 replications), run in-process through `run_sweep`
(no CLI start-up). Each run's time includes starting its workers (forked processes, or the
LocalCluster), which is what a user waits for. Worker counts above this machine's cores are
skipped, with the reason printed (their time would measure the machine, not the sweep). Every
run's results.csv and summary.csv are compared byte for byte with the 1-process run's.
Issue 29's targets on an idle 16-core machine: >= 12x with 16 local processes, >= 10x with 16
Dask workers. `--quick` (12 points x 8 replications, one run each) checks that it all works in
seconds; its ratios mean little.
Usage: python benchmarks/sweep_scaling.py [--points 96] [--replications 600] [--repeat 1]
       [--workers 1,2,4,8,16] [--no-dask] [--quick]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from cprsim.sweep import load_sweep, run_sweep

SWEEP = """
name = "scaling"
scenario = "toy"
replications = {reps}
strategies = ["full", "partial", "mfu"]
[grid]
"checkpoint.interval_h" = {intervals}
"""
#: issue 29's targets at 16 workers: local processes, Dask
TARGETS = {"local": 12.0, "dask": 10.0}


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def sweep_text(points: int, reps: int) -> str:
    """The benchmark's sweep file: ``points`` points (a multiple of 3) of ``reps`` replications."""
    n = max(1, points // 3)
    intervals = [round(0.1 + 1.9 * i / max(1, n - 1), 4) for i in range(n)]
    return SWEEP.format(reps=reps, intervals=intervals)


def timed(sweep_file: Path, out: Path, **kw) -> tuple[float, bytes]:
    """Seconds to run the sweep into ``out`` (workers' start included), and its output bytes."""
    t = time.perf_counter()
    run_sweep(load_sweep(sweep_file), out, **kw)
    dt = time.perf_counter() - t
    return dt, (out / "results.csv").read_bytes() + (out / "summary.csv").read_bytes()


def runs_of(workers: list[int], dask: bool, have: int) -> tuple[dict[str, dict], list[str]]:
    """The runs to time (label: run_sweep's keywords), the 1-process baseline first, and the
    reasons for those skipped."""
    runs: dict[str, dict] = {"local 1 (baseline)": {"jobs": 1}}
    skipped = []
    for n in workers:
        if n > have:
            skipped.append(f"{n} workers: this machine has {have} cores")
            continue
        if n > 1:
            runs[f"local {n}"] = {"jobs": n}
        if dask:
            runs[f"dask {n}"] = {"dask_local": n}
    return runs, skipped


def main(argv: list[str] | None = None) -> dict[str, float]:
    """Run the benchmark; returns each run's median speed-up (for tests)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=96)
    ap.add_argument("--replications", type=int, default=600)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--workers", default="1,2,4,8,16")
    ap.add_argument("--no-dask", action="store_true")
    ap.add_argument("--quick", action="store_true", help="12 points x 8 replications, once")
    a = ap.parse_args(argv)
    if a.quick:
        a.points, a.replications, a.repeat = 12, 8, 1
    dask = not a.no_dask
    if dask:
        try:
            import distributed  # noqa: F401
        except ImportError:
            print("Dask skipped: the distributed extra is not installed")
            dask = False
    runs, skipped = runs_of([int(w) for w in a.workers.split(",")], dask, cores())
    names = list(runs)
    times: dict[str, list[float]] = {k: [] for k in names}
    data: dict[str, bytes] = {}
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        f = root / "scaling.toml"
        f.write_text(sweep_text(a.points, a.replications))
        n = len(load_sweep(f).points)
        for r in range(a.repeat):
            for i in range(len(names)):
                name = names[(i + r) % len(names)]  # rotate: no run always goes first
                dt, b = timed(f, root / f"{r}-{names.index(name)}", **runs[name])
                times[name].append(dt)
                data[name] = b
    base = statistics.median(times[names[0]])
    print(f"sweep: {n} points x {a.replications} replications (toy), {a.repeat} run(s) each")
    for why in skipped:
        print(f"skipped: {why}")
    print(f"{'workers':22s} {'median s':>9s} {'min':>7s} {'max':>7s} {'speed-up':>9s}")
    ups = {}
    for name, ts in times.items():
        m = statistics.median(ts)
        ups[name] = base / m
        print(f"{name:22s} {m:9.2f} {min(ts):7.2f} {max(ts):7.2f} {base / m:9.2f}")
    same = all(data[k] == data[names[0]] for k in names)
    print(f"results.csv and summary.csv identical across runs: {'yes' if same else 'NO'}")
    for kind, goal in TARGETS.items():
        key = f"{kind} 16"
        if key in ups:
            print(f"target {kind} 16 >= {goal:g}x: {'met' if ups[key] >= goal else 'NOT met'}")
    if not same:
        raise SystemExit("the outputs differ between worker counts")
    return ups


if __name__ == "__main__":
    main()
