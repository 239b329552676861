"""Benchmark: sweep throughput with 1 and 2 local processes and a Dask LocalCluster of 2 workers, as
ratios against the 1-process run measured in the same run.

The sweep: the toy scenario, 8 intervals x 3 strategies = 24 points of R replications each, run
in-process through `run_sweep` (no CLI start-up). Each backend's time includes starting its
workers (forked processes, or the LocalCluster), which is what a user waits for. The backends run
in turn, in a rotating order, `--repeat` times; medians are printed (min and max show the
spread). The results files of every backend are compared byte for byte. `--precision P` adds the
same sweep with adaptive replication (R the most) on 1 and 2 processes.
Issue 15's targets: 2 processes / 1 >= 1.5x on the default sweep, >= 1.8x on a sweep of 15 s or
more (`--replications 800`).
Usage: python benchmarks/sweep.py [--replications 200] [--repeat 3] [--precision 0.05] [--no-dask]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from cprsim.sweep import load_sweep, run_sweep

SWEEP = """
name = "bench"
scenario = "toy"
replications = {reps}
strategies = ["full", "partial", "mfu"]
[grid]
"checkpoint.interval_h" = [0.1, 0.2, 0.35, 0.5, 0.75, 1.0, 1.5, 2.0]
"""


def timed(
    sweep_file: Path, root: Path, tag: str, precision: float | None, **kw
) -> tuple[float, bytes]:
    out = root / tag
    t = time.perf_counter()
    run_sweep(load_sweep(sweep_file, precision=precision), out, **kw)
    dt = time.perf_counter() - t
    return dt, (out / "results.csv").read_bytes()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replications", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--precision", type=float, default=None)
    ap.add_argument("--no-dask", action="store_true")
    a = ap.parse_args()
    backends: dict[str, tuple[dict, float | None]] = {
        "1 process (baseline)": ({"jobs": 1}, None),
        "2 local processes": ({"jobs": 2}, None),
    }
    if not a.no_dask:
        backends["Dask LocalCluster, 2 workers"] = ({"dask_local": 2}, None)
    if a.precision is not None:
        backends[f"1 process, --precision {a.precision:g}"] = ({"jobs": 1}, a.precision)
        backends[f"2 processes, --precision {a.precision:g}"] = ({"jobs": 2}, a.precision)
    names = list(backends)
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        f = root / "bench.toml"
        f.write_text(SWEEP.format(reps=a.replications))
        n = len(load_sweep(f).points)
        times: dict[str, list[float]] = {k: [] for k in names}
        data: dict[str, bytes] = {}
        for r in range(a.repeat):
            for i in range(len(names)):
                name = names[(i + r) % len(names)]  # rotate: no backend always runs first
                kw, prec = backends[name]
                dt, b = timed(f, root, f"{r}-{names.index(name)}", prec, **kw)
                times[name].append(dt)
                data[name] = b
    base = statistics.median(times["1 process (baseline)"])
    print(
        f"sweep: {n} points x {a.replications} replications (toy), {a.repeat} runs each; median [min, max]"
    )
    print(
        f"{'backend':36s} {'median s':>9s} {'min':>7s} {'max':>7s} {'points/s':>9s} {'speed-up':>9s}"
    )
    for name, ts in times.items():
        m = statistics.median(ts)
        print(f"{name:36s} {m:9.2f} {min(ts):7.2f} {max(ts):7.2f} {n / m:9.2f} {base / m:9.2f}")
    fixed = {data[k] for k in names if backends[k][1] is None}
    print(f"results.csv identical across backends: {'yes' if len(fixed) == 1 else 'NO'}")
    if a.precision is not None:
        adaptive = {data[k] for k in names if backends[k][1] is not None}
        print(
            f"adaptive results.csv identical across 1 and 2 processes: {'yes' if len(adaptive) == 1 else 'NO'}"
        )
    two = base / statistics.median(times["2 local processes"])
    goal = 1.8 if base >= 15 else 1.5
    print(
        f"target: 2 processes >= {goal}x on a {'>= 15 s' if base >= 15 else 'shorter'} sweep: "
        f"{'met' if two >= goal else 'NOT met'} ({two:.2f}x)"
    )


if __name__ == "__main__":
    main()
