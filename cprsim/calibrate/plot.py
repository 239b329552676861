"""Accuracy loss against PLS: mean over seeds with error bars (±1 sd), the fit, one colour per strategy."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def plot_calibration(points, fits, path: str | Path | None = None, metric: str = "auc", ax=None):  # noqa: ANN001, ANN201
    import matplotlib

    if ax is None:
        matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    own = ax is None
    if own:
        fig, ax = plt.subplots(figsize=(6, 4))
    key = "d_auc" if metric == "auc" else "d_logloss"
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, st in enumerate(fits):
        c = colours[i % len(colours)]
        ps = [pt for pt in points if pt.strategy == st]
        xs, ys, es, xe = [], [], [], []
        for b in sorted({pt.budget for pt in ps}):
            sel = [pt for pt in ps if pt.budget == b]
            x = np.array([pt.pls for pt in sel])
            y = np.array([getattr(pt, key) for pt in sel])
            xs.append(x.mean()); ys.append(y.mean())  # noqa: E702
            xe.append(x.std(ddof=1) if len(x) > 1 else 0.0)
            es.append(y.std(ddof=1) if len(y) > 1 else 0.0)
        ax.errorbar(xs, ys, yerr=es, xerr=xe, fmt="o", color=c, capsize=3, label=st)
        f = fits[st][metric]
        if np.isfinite(f.slope) and xs:
            gx = np.linspace(0, max(pt.pls for pt in ps) * 1.05, 50)
            ax.plot(gx, f.slope * gx, color=c, lw=1,
                    label=f"{st} fit: {f.slope:.3g} [{f.lo:.3g}, {f.hi:.3g}], R²={f.r2:.2f}")
    ax.axhline(0, color="grey", lw=0.5)
    ax.set_xlabel("PLS (portion of lost samples)")
    ax.set_ylabel("AUC loss (baseline − failed)" if metric == "auc" else "log-loss increase")
    ax.legend(fontsize=7)
    if own:
        fig.tight_layout()
        if path is not None:
            fig.savefig(path, dpi=120)
        plt.close(fig)
    return ax
