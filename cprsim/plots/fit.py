"""Failure-fit figure: Kaplan-Meier with its band against the fitted survival curves, and a
Weibull probability plot (log(-log S) against log t: a Weibull is a straight line)."""

from __future__ import annotations

from typing import Any

import numpy as np

from cprsim.failures.fit import FitReport


def plot_fit(report: FitReport, title: str = "", unit: str = "h", ax: Any = None):  # noqa: ANN201
    """Returns the matplotlib Figure (two axes unless ``ax`` is a pair of axes)."""
    import matplotlib.pyplot as plt

    if ax is None:
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.2))
    else:
        a1, a2 = ax
        fig = a1.figure
    t, s, lo, hi = report.km_t, report.km_s, report.km_lo, report.km_hi
    a1.step(t, s, where="post", color="black", label=f"Kaplan-Meier (n={report.n}, {report.censored} censored)")
    a1.fill_between(t, np.nan_to_num(lo, nan=0.0), np.nan_to_num(hi, nan=1.0), step="post", color="grey",
                    alpha=0.3, label="95% band")
    grid = np.geomspace(max(t.min(), 1e-6), t.max(), 300) if t.size else np.array([1.0])
    for f in report.fits:
        a1.plot(grid, f.sf(grid), label=f"{f.family} (AIC {f.AIC_:.1f})")
    a1.set_xscale("log")
    a1.set_xlabel(f"time between failures ({unit})")
    a1.set_ylabel("survival S(t)")
    a1.legend(fontsize=7)
    a1.set_title("survival: data vs fits")
    ok = (s > 0) & (s < 1)
    a2.plot(np.log(t[ok]), np.log(-np.log(s[ok])), "k.", ms=3, label="Kaplan-Meier")
    for f in report.fits:
        sf = f.sf(grid)
        m = (sf > 0) & (sf < 1)
        a2.plot(np.log(grid[m]), np.log(-np.log(sf[m])), label=f.family)
    a2.set_xlabel(f"log time ({unit})")
    a2.set_ylabel("log(-log S(t))")
    a2.set_title("Weibull probability plot")
    a2.legend(fontsize=7)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig
