"""Benchmark: training samples per second of one calibration run on the CPU and on a GPU.

Runs the same failure run (the preset's seed 0, its first CPR setting: saves, failures, PLS
bookkeeping included) on the CPU (one torch thread, as the calibration's workers) and, where torch
sees one, on CUDA, in this process one after the other; prints each wall time, samples/s and the
GPU's ratio to the CPU, and the two runs' PLS (equal: the bookkeeping stays on the CPU) and AUC.
Without a GPU it measures the CPU alone and says so. ``--preset paper`` (4 M samples, 1/100 of
Criteo's rows) is the size a GPU is for; ``--train-samples`` shortens it.

Usage: python benchmarks/calibrate_device.py [--preset paper] [--train-samples 1000000]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as `cprsim calibrate` (before torch loads)

import torch

from cprsim.calibrate import runner as R


def _one(p: R.Preset, run: R.Run) -> tuple[float, R.RunResult]:
    R._PREP.clear()
    R._prepared(p, run.seed)  # the data are generated before the clock starts
    if p.device != "cpu":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    res, _, _ = R.run_one(p, run)
    if p.device != "cpu":
        torch.cuda.synchronize()
    return time.perf_counter() - t0, res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", choices=sorted(R.PRESETS), default="paper")
    ap.add_argument("--train-samples", type=int, default=0, help="fewer training samples")
    a = ap.parse_args()
    p = R.PRESETS[a.preset]
    if a.train_samples:
        p = dataclasses.replace(p, train_samples=a.train_samples)
    torch.set_num_threads(1)
    run = next(r for r in R.plan_runs(p) if r.setting is not None)
    n = R.n_iters_of(p) * p.batch
    print(f"preset {p.name}: {n:,} training samples, {run.describe()}")
    cpu_s, cpu = _one(p, run)
    print(
        f"  cpu   {cpu_s:8.1f} s  {n / cpu_s:10,.0f} samples/s  PLS {cpu.pls:.6f}  AUC {cpu.auc:.5f}"
    )
    if not torch.cuda.is_available():
        print("  cuda  not measured: torch sees no CUDA GPU here")
        return
    gp = dataclasses.replace(p, device="cuda")
    gpu_s, gpu = _one(gp, run)
    print(
        f"  cuda  {gpu_s:8.1f} s  {n / gpu_s:10,.0f} samples/s  PLS {gpu.pls:.6f}  AUC {gpu.auc:.5f}"
        f"  ({torch.cuda.get_device_name()})"
    )
    print(f"  ratio cuda/cpu samples/s: {cpu_s / gpu_s:.2f}x; PLS equal: {gpu.pls == cpu.pls}")


if __name__ == "__main__":
    main()
