"""Benchmark: sweep throughput (points per second) with 1 and 2 local processes and through a Dask
LocalCluster of 2 workers, as ratios against the 1-process run measured in the same run.

The sweep: the toy scenario, 8 intervals x 3 strategies = 24 points of R replications each, run
in-process through `run_sweep` (no CLI start-up). Each backend's time includes starting its
workers (spawned processes, or the LocalCluster), which is what a user waits for. The results
files of every backend are compared byte for byte. Best of --repeat runs.
Usage: python benchmarks/sweep.py [--replications 200] [--repeat 2]
"""

from __future__ import annotations

import argparse
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


def timed(sweep_file: Path, root: Path, tag: str, **kw) -> tuple[float, bytes]:
    out = root / tag
    t = time.perf_counter()
    run_sweep(load_sweep(sweep_file), out, **kw)
    dt = time.perf_counter() - t
    return dt, (out / "results.csv").read_bytes()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replications", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=2)
    a = ap.parse_args()
    backends = {"1 process (baseline)": {"jobs": 1}, "2 local processes": {"jobs": 2},
                "Dask LocalCluster, 2 workers": {"dask_local": 2}}
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        f = root / "bench.toml"
        f.write_text(SWEEP.format(reps=a.replications))
        n = len(load_sweep(f).points)
        best: dict[str, float] = {}
        data: dict[str, bytes] = {}
        for r in range(a.repeat):
            for name, kw in backends.items():
                dt, b = timed(f, root, f"{r}-{len(best)}-{name[:1]}{kw}", **kw)
                best[name] = min(best.get(name, dt), dt)
                data[name] = b
        same = len(set(data.values())) == 1
    base = best["1 process (baseline)"]
    print(f"sweep: {n} points x {a.replications} replications (toy), best of {a.repeat}")
    print(f"{'backend':32s} {'seconds':>8s} {'points/s':>9s} {'speed-up':>9s}")
    for name, dt in best.items():
        print(f"{name:32s} {dt:8.2f} {n / dt:9.2f} {base / dt:9.2f}")
    print(f"results.csv identical across backends: {'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()
