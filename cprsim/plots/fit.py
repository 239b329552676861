"""Failure-fit figure: Kaplan-Meier with its band against the fitted survival curves, and a
Weibull probability plot (log(-log S) against log t: a Weibull is a straight line)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from cprsim.failures.fit import FitReport

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure


def plot_fit(
    report: Any, title: str = "", unit: str = "h", ax: Any = None, **kwargs: Any
) -> Figure:
    """The fit of a failure log: left, the Kaplan-Meier survival curve with its 95% band against
    each fitted family's survival (time on a log axis, in ``unit``: hours for ``cprsim.fit``);
    right, a Weibull probability plot (log(-log S) against log t: a Weibull is a straight line).

    ``report``: a FitReport (``cprsim.fit``) or the dict of ``cprsim fit --report``; ``title``: the
    figure's title; ``ax``: a pair of axes to draw into (default: a new figure with two);
    ``kwargs``: passed to the fitted families' curves (``Axes.plot``). Returns the Figure."""
    from matplotlib.lines import Line2D

    from cprsim.plots import artist_kwargs, new_figure, set_title

    if isinstance(report, dict):
        report = FitReport.from_dict(report)
    if ax is None:
        fig = new_figure((11, 4.2))
        a1, a2 = fig.subplots(1, 2)
    else:
        a1, a2 = ax
        fig = a1.figure
    t, s, lo, hi = report.km_t, report.km_s, report.km_lo, report.km_hi
    a1.step(
        t,
        s,
        where="post",
        color="black",
        label=f"Kaplan-Meier (n={report.n}, {report.censored} censored)",
    )
    a1.fill_between(
        t,
        np.nan_to_num(lo, nan=0.0),
        np.nan_to_num(hi, nan=1.0),
        step="post",
        color="grey",
        alpha=0.3,
        label="95% band",
    )
    grid = np.geomspace(max(t.min(), 1e-6), t.max(), 300) if t.size else np.array([1.0])
    for f in report.fits:
        a1.plot(
            grid,
            f.sf(grid),
            **artist_kwargs({"label": f"{f.family} (AIC {f.AIC_:.1f})"}, kwargs, Line2D),
        )
    a1.set_xscale("log")
    a1.set_xlabel(f"time between failures ({unit})")
    a1.set_ylabel("survival S(t)")
    a1.legend(fontsize=7)
    set_title(a1, "survival: data vs fits")
    ok = (s > 0) & (s < 1)
    a2.plot(np.log(t[ok]), np.log(-np.log(s[ok])), "k.", ms=3, label="Kaplan-Meier")
    for f in report.fits:
        sf = f.sf(grid)
        m = (sf > 0) & (sf < 1)
        a2.plot(
            np.log(grid[m]),
            np.log(-np.log(sf[m])),
            **artist_kwargs({"label": f.family}, kwargs, Line2D),
        )
    a2.set_xlabel(f"log time ({unit})")
    a2.set_ylabel("log(-log S(t))")
    set_title(a2, "Weibull probability plot")
    a2.legend(fontsize=7)
    if title:
        fig.suptitle(_wrapped(title, fig))
    return fig


def _wrapped(title: str, fig: Any) -> str:
    """A figure title broken into lines that fit the figure's width."""
    import textwrap

    chars = max(20, int(fig.get_figwidth() * 72 / (0.56 * 12)))
    return "\n".join(
        ln for line in title.split("\n") for ln in (textwrap.wrap(line, chars) or [line])
    )
