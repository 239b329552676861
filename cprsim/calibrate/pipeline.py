"""``cprsim calibrate`` end to end: runs, fits, real costs, end-to-end check, files."""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
from pathlib import Path
from typing import Callable

import numpy as np

from cprsim import __version__
from cprsim.calibrate import runner as R
from cprsim.calibrate.calibration import to_toml
from cprsim.calibrate.data import default_alpha, scaled_tables
from cprsim.calibrate.emulation import Setting, periodic_actions
from cprsim.io import atomic_write_csv, atomic_write_text


def from_sim_settings(p: R.Preset, scenario) -> tuple[R.Preset, Callable, dict]:  # noqa: ANN001
    """Settings whose failures (and vanilla saves) come from the simulator's partial-recovery run."""
    from cprsim.calibrate.fromsim import sim_schedule

    n_iters = p.train_samples // p.batch
    acts, sim_pls, interval, n_e = sim_schedule(scenario, n_iters)
    p = dataclasses.replace(p, n_shards=n_e)
    fails = [(k, j) for k, a in acts.items() for kind, j in a if kind == "fail"]
    iv = max(1, int(round(interval)))
    K, r = p.full_every, p.top_fraction

    def fn(n: int, seed: int) -> list[tuple[float, Setting]]:
        out = [(iv / n, Setting("partial", "partial@sim", acts, interval=iv))]
        piv = max(1, int(round(iv * (1 + (K - 1) * r) / K)))
        for st in p.strategies:
            if st != "partial":
                out.append((iv / n, Setting(st, f"{st}@sim", periodic_actions(n, piv, K, fails),
                                            top_fraction=r, sample_rate=p.sample_rate, interval=piv)))
        return out

    info = {"scenario": scenario.name, "simulated_pls": sim_pls, "failures": len(fails),
            "interval_iterations": iv, "embedding_servers": n_e}
    return p, fn, info


def calibrate(p: R.Preset, out: Path, progress: Callable[[int], None] = lambda n=1: None,
              scenario=None, measure_costs: bool = True) -> dict:  # noqa: ANN001
    """Run the preset, write ``calibration.toml``, ``points.csv`` and the plot into ``out``."""
    import torch

    t0 = time.perf_counter()
    fn, sim_info = None, None
    if scenario is not None:
        p, fn, sim_info = from_sim_settings(p, scenario)
    points, facts = R.run_preset(p, progress, fn)
    fits = R.fits(points)
    tables = scaled_tables(p.scale)
    m = p.model
    prov = {
        "calibrated": True,
        "preset": p.name,
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "cprsim_version": __version__,
        "torch_version": torch.__version__,
        "model": (f"DLRM: embedding dim {m.dim}, bottom MLP 13-{m.bottom_hidden}-{m.dim}, "
                  f"pairwise dot interaction, top MLP {m.top_hidden}-1, BCE; embeddings "
                  f"{m.emb_optimizer} lr {m.emb_lr}, dense Adagrad lr {m.dense_lr}"),
        "data": (f"synthetic Criteo-like (cprsim.calibrate.data): 26 tables = Criteo Kaggle / "
                 f"{p.scale:g} ({sum(tables)} rows), Zipf alpha {default_alpha(tables):.4f}, "
                 f"{p.train_samples} train / {p.test_samples} held-out samples, batch {p.batch}"),
        "seeds": list(p.seeds),
        "embedding_servers": p.n_shards,
        "sharding": "row hash (Knuth multiplicative) over all tables",
        "failures_per_run": p.failures_per_run,
        "mfu_ssu": (f"top_fraction {p.top_fraction}, full save every {p.full_every}, ssu sample "
                    f"rate {p.sample_rate}; same bytes written as vanilla at each budget"),
        "pls": "measured: lost sample-updates through cprsim.pls.ShardLedger (docs/calibration.md)",
        "fit": "loss = slope x PLS, least squares through the origin, 95% CI (Student t)",
        "baseline_auc": facts["baseline_auc"],
        "baseline_logloss": facts["baseline_logloss"],
        "train_s": facts["train_s"],
        "iterations": facts["n_iters"],
    }
    if sim_info:
        prov["from_sim"] = sim_info
    doc: dict = {"provenance": prov, "fit": {}, "points": {}}
    for st, f in fits.items():
        d = {}
        for metric, ft in f.items():
            d.update({f"{metric}_slope": ft.slope, f"{metric}_slope_lo": ft.lo,
                      f"{metric}_slope_hi": ft.hi, f"{metric}_r2": ft.r2})
        d["n_points"] = f["auc"].n
        ps = [pt for pt in points if pt.strategy == st]
        d["mean_pls"] = float(np.mean([pt.pls for pt in ps]))
        d["mean_d_auc"] = float(np.mean([pt.d_auc for pt in ps]))
        d["mean_d_logloss"] = float(np.mean([pt.d_logloss for pt in ps]))
        doc["fit"][st] = d
        doc["points"][st] = {"budget": [pt.budget for pt in ps], "seed": [pt.seed for pt in ps],
                             "pls": [pt.pls for pt in ps], "d_auc": [pt.d_auc for pt in ps],
                             "d_logloss": [pt.d_logloss for pt in ps]}
    if measure_costs:
        from cprsim.calibrate.costs import end_to_end, measure_shard_io

        seed = p.seeds[0]
        prep = R.synthetic_prepared(p, seed)
        model, _ = R.train(prep, p.model, seed)
        doc["costs"] = measure_shard_io(model, p.n_shards)
        n = prep.n_iters
        doc["end_to_end"] = end_to_end(prep, p, seed, max(1, n // 8),
                                       R.failure_schedule(n, p.n_shards, p.failures_per_run, seed))
        progress(1)
    prov["run_s"] = time.perf_counter() - t0
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "calibration.toml", to_toml(
        doc, "cprsim calibration: accuracy loss vs PLS on a PyTorch DLRM (written by `cprsim calibrate`)"))
    atomic_write_csv(out / "points.csv", [f.name for f in dataclasses.fields(R.Point)],
                     [dataclasses.astuple(pt) for pt in points])
    from cprsim.plots import save_figure
    from cprsim.plots.calibration import plot_calibration

    save_figure(plot_calibration(doc), out / "accuracy_vs_pls.png")
    return doc
