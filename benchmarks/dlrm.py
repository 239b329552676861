"""Benchmark: DLRM training samples/s on a fixed config, and the cost of the emulation.

One run measures, on the same data and seed: plain training; training with the emulator counting
accesses (MFU counters) and doing partial saves and failure injection. Reports samples/s and the
ratio emulated/plain (same run, so machine speed cancels). Needs torch (the ``dlrm`` extra).
"""

from __future__ import annotations

import dataclasses
import time

import torch

from cprsim.calibrate import runner as R
from cprsim.calibrate.emulation import Emulator, Setting, periodic_actions


def main() -> None:
    torch.set_num_threads(2)
    p = dataclasses.replace(R.PRESETS["quick"], train_samples=300_000, test_samples=10_000)
    prep = R.synthetic_prepared(p, 0)
    n = prep.n_iters
    R.train(prep.__class__(**{**prep.__dict__, "label": prep.label[: 20 * p.batch]}), p.model, 0)  # warm-up
    t = time.perf_counter()
    R.train(prep, p.model, 0)
    plain = time.perf_counter() - t
    fails = R.failure_schedule(n, p.n_shards, 8, 0)
    st = Setting("mfu", "bench", periodic_actions(n, max(1, n // 32), 4, fails), top_fraction=0.1)
    t = time.perf_counter()
    R.train(prep, p.model, 0, lambda m: Emulator(m, p.n_shards, st, n, "measured", 0, batch=p.batch))
    emu = time.perf_counter() - t
    samples = n * p.batch
    print(f"DLRM dim {p.model.dim}, batch {p.batch}, {sum(prep.tables)} rows, {samples} samples, 2 threads")
    print(f"plain training:        {samples / plain:10.0f} samples/s")
    print(f"with MFU emulation:    {samples / emu:10.0f} samples/s  (counters, 32 saves, 8 failures)")
    print(f"ratio emulated/plain:  {emu / plain:10.3f} x time")


if __name__ == "__main__":
    main()
