"""Benchmark: a calibration preset's wall time with 1 and more worker processes, same run.

Runs the preset through ``pipeline.calibrate`` (as ``cprsim calibrate --no-costs`` does, without
the CLI's start-up) once per ``--jobs`` value, into temporary folders, one torch thread per
worker; prints each wall time, its ratio to the first, and checks that ``calibration.toml`` and
``points.csv`` are byte-identical across job counts. The wall times include starting the workers
and generating each seed's data, which is what a user waits for.

``--runs K`` runs only the first K runs of the preset (seed 0 first) and *extrapolates* to the
whole preset: runs x (wall / K); printed as an extrapolation, not a measurement.
Usage: python benchmarks/calibrate.py [--preset quick] [--jobs 1 2] [--runs K]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as `cprsim calibrate` (before torch loads)

from cprsim.calibrate import pipeline as P
from cprsim.calibrate import runner as R


def _fmt(s: float) -> str:
    return f"{s:7.1f} s ({int(s // 60)} min {s % 60:02.0f} s)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", choices=sorted(R.PRESETS), default="quick")
    ap.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--threads-per-job", type=int, default=1)
    ap.add_argument(
        "--runs", type=int, default=0, help="only the first K runs; extrapolate the rest"
    )
    a = ap.parse_args()
    p = R.PRESETS[a.preset]
    total = R.n_steps(p)
    runs = R.plan_runs(p)[: a.runs] if a.runs else None
    load = os.getloadavg()[0]
    print(
        f"preset {a.preset}: {total} runs of {p.train_samples} samples; {os.cpu_count()} cores; "
        f"{a.threads_per_job} torch thread(s) per job; load average before: {load:.2f}"
    )
    walls: dict[int, float] = {}
    cpus: dict[int, float] = {}
    files: dict[int, dict[str, bytes]] = {}
    with tempfile.TemporaryDirectory(prefix="cprsim-bench-cal-") as d:
        for j in a.jobs:
            out = Path(d) / f"jobs{j}"
            t = time.perf_counter()
            if runs is None:
                P.calibrate(p, out, measure_costs=False, jobs=j, threads=a.threads_per_job)
                files[j] = {n: (out / n).read_bytes() for n in ("calibration.toml", "points.csv")}
                cpus[j] = json.loads((out / "run.json").read_text())["runs_cpu_s"]
            else:
                cpus[j] = sum(cpu for _, _, cpu in R.execute(p, runs, j, a.threads_per_job))
            walls[j] = time.perf_counter() - t
    first = a.jobs[0]
    for j in a.jobs:
        line = (
            f"--jobs {j}: {_fmt(walls[j])}   ratio to --jobs {first}: {walls[j] / walls[first]:.3f}"
            f"   CPU of the runs {cpus[j]:.1f} s"
        )
        if runs is not None:
            line += f"   extrapolated to all {total} runs: {_fmt(walls[j] / len(runs) * total)} (EXTRAPOLATION)"
        print(line)
    print(
        "idle-machine estimate (EXTRAPOLATION, not a measurement): CPU of the runs / jobs = "
        + ", ".join(
            f"--jobs {j}: {_fmt(cpus[j] / j * (total / len(runs) if runs else 1))}" for j in a.jobs
        )
    )
    if files:
        same = all(files[j] == files[first] for j in a.jobs)
        print(f"calibration.toml and points.csv identical across --jobs {a.jobs}: {same}")
        if not same:
            raise SystemExit(1)
    print(
        f"load average after: {os.getloadavg()[0]:.2f} (the machine may be shared: rerun if it was busy)"
    )


if __name__ == "__main__":
    main()
