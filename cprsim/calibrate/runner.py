"""The calibration experiment: paired DLRM runs with and without failures, a fit per strategy.

For every seed: one baseline run (no failures) and one run per setting (strategy x checkpoint
budget) on the *same* data, initialisation and batch order, with the *same* failures (common
random numbers: ``failures_per_run`` failures at uniformly random iterations on random shards).
Accuracy loss = baseline minus failed-run held-out AUC (``d_auc``), and failed-run minus baseline
log-loss (``d_logloss``), so positive means worse. Budgets are given as the vanilla checkpoint
interval (a fraction of the run); MFU/SSU/lookahead get the partial-save interval that writes the
**same bytes**: a full save every ``K`` saves and the top ``r`` rows otherwise, so
``interval = vanilla x (1 + (K - 1) r) / K``.

Fit (per strategy and metric): least squares through the origin, ``loss = slope x PLS`` (no
failure, no loss), over every (setting, seed) point; the slope's 95% CI from Student's t with
``n - 1`` degrees of freedom; R² = 1 - SS_res / SS_tot (centred).
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from typing import Callable

import numpy as np
import torch

from cprsim.calibrate import data as D
from cprsim.calibrate.emulation import Emulator, Setting, periodic_actions
from cprsim.calibrate.model import DLRM, ModelConfig


@dataclass(frozen=True)
class Preset:
    name: str
    train_samples: int
    test_samples: int
    seeds: tuple[int, ...]
    budgets: tuple[float, ...]  #: vanilla checkpoint interval, as a fraction of the run
    strategies: tuple[str, ...] = ("partial", "mfu", "ssu")
    batch: int = 512
    scale: float = 1000.0
    n_shards: int = 4
    failures_per_run: int = 4
    top_fraction: float = 0.1
    full_every: int = 4
    sample_rate: float = 0.05
    model: ModelConfig = field(default_factory=ModelConfig)
    runtime: str = ""


PRESETS = {
    "quick": Preset("quick", 200_000, 50_000, (0, 1), (0.5, 0.125), runtime="about 1 min on 2 cores"),
    "standard": Preset("standard", 1_000_000, 200_000, (0, 1, 2), (0.5, 0.25, 0.125, 0.0625),
                       ("partial", "mfu", "ssu", "lookahead"), runtime="about 15 min on 2 cores (33 min measured on a loaded machine)"),
    "paper": Preset("paper", 4_000_000, 500_000, (0, 1, 2, 3, 4), (0.5, 0.25, 0.125, 0.0625, 0.03125),
                    ("partial", "mfu", "ssu", "lookahead"), scale=100.0, n_shards=8,
                    failures_per_run=8, runtime="about 2.3 h on 2 cores (extrapolated from one measured run)"),
}


@dataclass
class Prepared:
    """One seed's tensors: training batches in order and the held-out set."""

    dense: torch.Tensor
    grows: torch.Tensor
    label: torch.Tensor
    test_dense: torch.Tensor
    test_grows: torch.Tensor
    test_label: np.ndarray
    tables: tuple[int, ...]
    batch: int

    @property
    def n_iters(self) -> int:
        return self.label.shape[0] // self.batch


def prepare(train: D.Dataset, test: D.Dataset, tables: tuple[int, ...], batch: int) -> Prepared:
    off = np.concatenate([[0], np.cumsum(tables)[:-1]]).astype(np.int64)
    return Prepared(torch.from_numpy(train.dense), torch.from_numpy(train.cat + off),
                    torch.from_numpy(train.label), torch.from_numpy(test.dense),
                    torch.from_numpy(test.cat + off), test.label, tables, batch)


def synthetic_prepared(p: Preset, seed: int) -> Prepared:
    train = D.synthetic(p.train_samples, seed=seed + 1, scale=p.scale)
    test = D.synthetic(p.test_samples, seed=0, scale=p.scale, start_chunk=1 << 20)
    return prepare(train, test, D.scaled_tables(p.scale), p.batch)


def new_model(prep: Prepared, cfg: ModelConfig, seed: int) -> DLRM:
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    return DLRM(prep.tables, cfg, gen)


def train(prep: Prepared, cfg: ModelConfig, seed: int, emu_factory: Callable[[DLRM], Emulator] | None = None,
          on_iter: Callable[[int, DLRM], None] | None = None) -> tuple[DLRM, Emulator | None]:
    model = new_model(prep, cfg, seed)
    emu = emu_factory(model) if emu_factory else None
    B = prep.batch
    for k in range(prep.n_iters):
        if emu is not None:
            emu.before(k)
        if on_iter is not None:
            on_iter(k, model)
        sl = slice(k * B, (k + 1) * B)
        g = prep.grows[sl]
        model.train_step(prep.dense[sl], g, prep.label[sl])
        if emu is not None:
            emu.count_batch(g)
    return model, emu


def evaluate(model: DLRM, prep: Prepared) -> tuple[float, float]:
    p = model.predict(prep.test_dense, prep.test_grows)
    return D.auc(prep.test_label, p), D.logloss(prep.test_label, p)


def failure_schedule(n_iters: int, n_shards: int, count: int, seed: int) -> list[tuple[int, int]]:
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0xFA11]))
    its = np.sort(rng.integers(max(1, n_iters // 20), n_iters, count))
    shards = rng.integers(0, n_shards, count)
    return [(int(k), int(j)) for k, j in zip(its, shards)]


def settings_for(p: Preset, n_iters: int, failures: list[tuple[int, int]]) -> list[tuple[float, Setting]]:
    out = []
    K, r = p.full_every, p.top_fraction
    for b in p.budgets:
        vanilla = max(1, int(round(b * n_iters)))
        for st in p.strategies:
            if st == "partial":
                iv, fe = vanilla, 1
            else:
                iv, fe = max(1, int(round(vanilla * (1 + (K - 1) * r) / K))), K
            out.append((b, Setting(st, f"{st}@{b:g}", periodic_actions(n_iters, iv, fe, failures),
                                   top_fraction=r, sample_rate=p.sample_rate, interval=iv)))
    return out


@dataclass(frozen=True)
class Point:
    strategy: str
    budget: float
    seed: int
    pls: float
    d_auc: float
    d_logloss: float
    auc: float
    logloss: float


def run_preset(p: Preset, progress: Callable[[int], None] = lambda n=1: None,
               settings_fn: Callable[[int, int], list[tuple[float, Setting]]] | None = None,
               ) -> tuple[list[Point], dict]:
    """Every seed's baseline and settings; returns the points and run facts (baselines, timing).

    ``settings_fn(n_iters, seed)`` replaces the preset's settings (``--from-sim``).
    """
    torch.set_num_threads(2)
    points: list[Point] = []
    facts: dict = {"baseline_auc": [], "baseline_logloss": [], "train_s": [], "n_iters": 0}
    for seed in p.seeds:
        prep = synthetic_prepared(p, seed)
        n = prep.n_iters
        facts["n_iters"] = n
        t0 = time.perf_counter()
        base, _ = train(prep, p.model, seed)
        facts["train_s"].append(time.perf_counter() - t0)
        b_auc, b_ll = evaluate(base, prep)
        facts["baseline_auc"].append(b_auc)
        facts["baseline_logloss"].append(b_ll)
        progress(1)
        sets = settings_fn(n, seed) if settings_fn is not None else \
            settings_for(p, n, failure_schedule(n, p.n_shards, p.failures_per_run, seed))
        for budget, st in sets:
            future = prep.grows[:n * p.batch].reshape(n, -1)
            fac = (lambda m, st=st, future=future: Emulator(m, p.n_shards, st, n, "measured", seed,
                                                             future_rows=future, batch=p.batch))
            model, emu = train(prep, p.model, seed, fac)
            a, ll = evaluate(model, prep)
            points.append(Point(st.strategy, budget, seed, emu.pls, b_auc - a, ll - b_ll, a, ll))
            progress(1)
    return points, facts


def n_steps(p: Preset) -> int:
    return len(p.seeds) * (1 + len(p.budgets) * len(p.strategies))


# -- fit -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Fit:
    slope: float
    lo: float
    hi: float
    r2: float
    n: int


def fit_origin(x: np.ndarray, y: np.ndarray) -> Fit:
    from scipy import stats

    x, y = np.asarray(x, float), np.asarray(y, float)
    n = len(x)
    sxx = float(np.dot(x, x))
    if n == 0 or sxx == 0:
        return Fit(float("nan"), float("nan"), float("nan"), float("nan"), n)
    b = float(np.dot(x, y)) / sxx
    res = y - b * x
    ss_res = float(np.dot(res, res))
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else float("nan")
    if n > 1:
        se = math.sqrt(ss_res / (n - 1) / sxx)
        h = float(stats.t.ppf(0.975, n - 1)) * se
    else:
        h = float("inf")
    return Fit(b, b - h, b + h, r2, n)


def fits(points: list[Point]) -> dict[str, dict[str, Fit]]:
    out: dict[str, dict[str, Fit]] = {}
    for st in dict.fromkeys(pt.strategy for pt in points):
        ps = [pt for pt in points if pt.strategy == st]
        x = np.array([pt.pls for pt in ps])
        out[st] = {"auc": fit_origin(x, np.array([pt.d_auc for pt in ps])),
                   "logloss": fit_origin(x, np.array([pt.d_logloss for pt in ps]))}
    return out


def preset_dict(p: Preset) -> dict:
    d = asdict(p)
    d["seeds"] = list(p.seeds)
    d["budgets"] = list(p.budgets)
    d["strategies"] = list(p.strategies)
    return d
