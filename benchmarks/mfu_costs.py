"""Measure what MFU/SSU's bookkeeping costs on this machine: the defaults of ``MFUParams``.

1. **Counter update per access**: ``counts.index_add_(0, idx, ones)`` over a batch of
   2,048 samples x 26 lookups drawn Zipf (1% of rows take 92% of accesses) from 10^7 rows
   (torch, one thread; numpy ``np.add.at`` when torch is absent): ns per access.
2. **Top-k selection per partial save**: ``torch.topk`` (numpy ``argpartition``) of the top 5%
   of 10^7 int32 counters: ns per row scanned.
3. **Gather of the saved rows** into a contiguous buffer (``index_select`` of 5% random rows of a
   10^6 x 64 fp32 table): GB/s.

Each figure is the median of ``--repeat`` timings (after a warm-up). The strategy defaults
(``counter_ns_per_access``, ``select_ns_per_row``, ``gather_gbps`` in ``cprsim/sim/prioritized.py``)
quote this script's output on the development machine (2 shared cores); a production
embedding server (more cores, the counter in the lookup kernel) is likely faster, so the defaults
overstate MFU's cost rather than hide it.

Usage: python benchmarks/mfu_costs.py [--repeat 7]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np


def zipf_rows(rng: np.random.Generator, n_rows: int, size: int, alpha: float = 1.05) -> np.ndarray:
    ranks = np.arange(1, n_rows + 1, dtype=float)
    p = ranks**-alpha
    p /= p.sum()
    return rng.choice(n_rows, size=size, p=p)


def timed(fn, repeat: int) -> float:
    fn()
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return statistics.median(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    n_rows, batch = 10_000_000, 2048 * 26
    idx_np = zipf_rows(rng, n_rows, batch)
    try:
        import torch

        torch.set_num_threads(1)
        counts = torch.zeros(n_rows, dtype=torch.int32)
        idx = torch.from_numpy(idx_np)
        ones = torch.ones(batch, dtype=torch.int32)
        counter = timed(lambda: counts.index_add_(0, idx, ones), a.repeat)
        counts = torch.from_numpy(rng.integers(0, 1000, n_rows, dtype=np.int32))
        k = n_rows // 20
        select = timed(lambda: torch.topk(counts, k, sorted=False), a.repeat)
        table = torch.randn(1_000_000, 64)
        rows = torch.from_numpy(rng.choice(1_000_000, 50_000, replace=False))
        gather = timed(lambda: table.index_select(0, rows), a.repeat)
        lib = f"torch {torch.__version__}, 1 thread"
    except ImportError:
        counts_np = np.zeros(n_rows, dtype=np.int32)
        counter = timed(lambda: np.add.at(counts_np, idx_np, 1), a.repeat)
        counts_np = rng.integers(0, 1000, n_rows, dtype=np.int32)
        k = n_rows // 20
        select = timed(lambda: np.argpartition(counts_np, -k)[-k:], a.repeat)
        table_np = rng.standard_normal((1_000_000, 64), dtype=np.float32)
        rows_np = rng.choice(1_000_000, 50_000, replace=False)
        gather = timed(lambda: table_np[rows_np], a.repeat)
        lib = f"numpy {np.__version__}"
    print(f"MFU bookkeeping on this machine ({lib}; medians of {a.repeat}):")
    print(
        f"  counter update   {counter / batch * 1e9:8.2f} ns per access   (batch of {batch:,} lookups)"
    )
    print(
        f"  top-k selection  {select / n_rows * 1e9:8.2f} ns per row      (top 5% of {n_rows:,} counters)"
    )
    print(
        f"  gather           {50_000 * 64 * 4 / gather / 1e9:8.2f} GB/s          (50,000 random rows of 256 B)"
    )


if __name__ == "__main__":
    main()
