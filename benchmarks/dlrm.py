"""Benchmark: the calibration DLRM's training loop against a bare eager-torch floor, same run.

Measured on the same data, sizes and thread count, interleaved over --rounds (median of each):

* **loop**: ``runner.train`` as a calibration run uses it (each batch's unique rows computed once
  per seed and reused by every run of that seed; the first run of a seed also pays for them,
  reported separately);
* **floor fwd+bwd**: the same DLRM written the plain way (an ``nn.EmbeddingBag(sparse=True)`` over
  the concatenated tables, ``bmm`` interaction with the upper triangle taken by advanced indexing
  as in facebookresearch/dlrm, the same MLPs, BCE): forward, ``zero_grad``, backward, no update;
* **floor + optimizer**: the same with ``torch.optim.Adagrad`` on the dense parameters and on the
  sparse embedding gradient;
* **loop + MFU emulation**: the loop with the emulator counting accesses, 32 partial/full saves
  and 8 failures (the cost of the emulation).

Ratios (loop / floor, samples/s) are of runs measured in the same process, so machine speed
mostly cancels; on a shared machine rerun if the rounds disagree. Needs torch (the dlrm extra).
Usage: python benchmarks/dlrm.py [--preset quick|paper] [--samples 300000] [--threads 1] [--rounds 3]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as `cprsim calibrate` (before torch loads)

import torch
from torch import nn
from torch.nn import functional as F

from cprsim.calibrate import runner as R
from cprsim.calibrate.data import N_CAT, N_DENSE
from cprsim.calibrate.emulation import Emulator, Setting, periodic_actions


class Floor(nn.Module):
    """A bare eager DLRM with the calibration model's sizes (reference-implementation style)."""

    def __init__(self, n_rows: int, cfg) -> None:
        super().__init__()
        d = cfg.dim
        self.emb = nn.EmbeddingBag(n_rows, d, mode="sum", sparse=True)
        self.bottom = nn.Sequential(
            nn.Linear(N_DENSE, cfg.bottom_hidden),
            nn.ReLU(),
            nn.Linear(cfg.bottom_hidden, d),
            nn.ReLU(),
        )
        self.li, self.lj = torch.triu_indices(N_CAT + 1, N_CAT + 1, offset=1)
        self.top = nn.Sequential(
            nn.Linear(d + self.li.numel(), cfg.top_hidden), nn.ReLU(), nn.Linear(cfg.top_hidden, 1)
        )

    def forward(self, dense: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        B = dense.shape[0]
        x = self.bottom(dense)
        e = self.emb(rows.reshape(-1), torch.arange(rows.numel())).view(B, N_CAT, -1)
        z = torch.cat([x.unsqueeze(1), e], dim=1)
        inter = torch.bmm(z, z.transpose(1, 2))[:, self.li, self.lj]
        return self.top(torch.cat([x, inter], dim=1)).squeeze(1)


def floor_run(prep: R.Prepared, cfg, optimizer: bool) -> float:
    torch.manual_seed(0)
    f = Floor(int(sum(prep.tables)), cfg)
    dense_params = [q for n, q in f.named_parameters() if not n.startswith("emb.")]
    opts = (
        [
            torch.optim.Adagrad(dense_params, lr=cfg.dense_lr),
            torch.optim.Adagrad([f.emb.weight], lr=cfg.emb_lr),
        ]
        if optimizer
        else []
    )
    B = prep.batch
    t = time.perf_counter()
    for k in range(prep.n_iters):
        sl = slice(k * B, (k + 1) * B)
        loss = F.binary_cross_entropy_with_logits(f(prep.dense[sl], prep.grows[sl]), prep.label[sl])
        f.zero_grad(set_to_none=True)
        loss.backward()
        for o in opts:
            o.step()
    return time.perf_counter() - t


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--preset", choices=sorted(R.PRESETS), default="quick", help="sizes (table scale, shards)"
    )
    ap.add_argument("--samples", type=int, default=300_000)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (calibration runs use 1)")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    import warnings

    warnings.filterwarnings("ignore", message="Sparse invariant checks")  # torch's sparse Adagrad
    p = dataclasses.replace(R.PRESETS[a.preset], train_samples=a.samples, test_samples=1_000)
    prep = R.synthetic_prepared(p, 0)
    n = prep.n_iters
    warm = dataclasses.replace(prep, label=prep.label[: 20 * p.batch], _unique=None)
    R.train(warm, p.model, 0)
    floor_run(warm, p.model, True)
    unique_s = timed(lambda: prep.unique(0))  # every batch's unique rows, once per seed
    fails = R.failure_schedule(n, p.n_shards, 8, 0)
    st = Setting("mfu", "bench", periodic_actions(n, max(1, n // 32), 4, fails), top_fraction=0.1)
    cases = {
        "floor fwd+bwd": lambda: floor_run(prep, p.model, False),
        "loop": lambda: timed(lambda: R.train(prep, p.model, 0)),
        "floor + optimizer": lambda: floor_run(prep, p.model, True),
        "loop + MFU emulation": lambda: timed(
            lambda: R.train(
                prep,
                p.model,
                0,
                lambda m: Emulator(m, p.n_shards, st, n, "measured", 0, batch=p.batch),
            )
        ),
    }
    times: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(a.rounds):
        for k, fn in cases.items():
            times[k].append(fn())
    samples = n * p.batch
    sps = {k: samples / statistics.median(v) for k, v in times.items()}
    print(
        f"DLRM dim {p.model.dim}, batch {p.batch}, {sum(prep.tables)} rows ({a.preset} sizes), "
        f"{samples} samples, {a.threads} thread{'s' if a.threads > 1 else ''}, median of {a.rounds} rounds"
    )
    for k, v in sps.items():
        spread = ", ".join(f"{samples / t:.0f}" for t in times[k])
        print(f"{k + ':':24s}{v:10.0f} samples/s   (rounds: {spread})")
    print(
        f"{'unique rows, once/seed:':24s}{unique_s:10.2f} s        "
        f"(+{unique_s / statistics.median(times['loop']):.0%} on a seed's first run)"
    )
    print(
        f"ratio loop / floor fwd+bwd:      {sps['loop'] / sps['floor fwd+bwd']:6.3f}  (target >= 0.9)"
    )
    print(f"ratio loop / floor + optimizer:  {sps['loop'] / sps['floor + optimizer']:6.3f}")
    print(f"ratio emulated / loop time:      {sps['loop'] / sps['loop + MFU emulation']:6.3f} x")


if __name__ == "__main__":
    main()
