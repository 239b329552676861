"""Sweep figures: overhead and PLS against the checkpoint interval, and the time breakdown.

Each takes a :class:`~cprsim.sweep.results.SweepResults` (``cprsim.Sweep.run``, ``load_results``),
a ``cprsim.Runs`` (``cprsim.simulate``: one point) or a results folder, ``ax=`` (axes to draw
into) and ``**kwargs`` for the main artist (the lines; the bars of the breakdown).

The lines are means over replications; the band around each (``band=``) is either the 95% CI
of the mean (``"ci"``) or the spread of single runs from their median to their worst 10%
(``"p90"``: P50 to P90 of the point's replications, read from results.csv / replications.csv;
the metrics drawn are costs, whose bad tail is the high one).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from cprsim import metrics
from cprsim.errors import InputError, ParameterError
from cprsim.plots import artist_kwargs, new_axes, set_title
from cprsim.plots.style import COMPONENTS, LIFECYCLE_COMPONENTS, base_name, colour
from cprsim.sweep.results import PointSummary, SweepResults

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure

_METRIC_LABEL = metrics.AXES
_LINESTYLES = ("-", "--", ":", "-.")

#: band kind -> what it shows (legend and title) and the ``Estimate`` fields of its edges
#: (``worst10``: the P90 of a cost, the metrics these figures draw)
BANDS = {
    "ci": ("95% CI of the mean", ("lo", "hi")),
    "p90": ("P50–P90 of single runs", ("p50", "worst10")),
}


#: the most bars :func:`plot_breakdown` draws
MAX_BARS = 40


def _band_fields(band: str) -> tuple[str, str]:
    if band not in BANDS:
        raise ParameterError("band", f"must be one of {', '.join(BANDS)}, got {band!r}")
    return BANDS[band][1]


def band_edges(
    pts: list[PointSummary], metric: str, band: str = "ci"
) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper edges of the band (``BANDS``) around a line of points, in metric units
    (``"p90"``: from the median to the worst 10% of single runs, whichever side that is)."""
    lo, hi = _band_fields(band)
    a = np.array([getattr(p[metric], lo) for p in pts], dtype=float)
    b = np.array([getattr(p[metric], hi) for p in pts], dtype=float)
    return np.fmin(a, b), np.fmax(a, b)


def _legend(ax: Any, band: str | None) -> None:
    """The legend, with a grey swatch saying what the bands show (``band=None``: none drawn)."""
    from matplotlib.patches import Patch

    handles, _ = ax.get_legend_handles_labels()
    if band is not None:
        handles.append(Patch(color="grey", alpha=0.3, lw=0, label=f"band: {BANDS[band][0]}"))
    ax.legend(handles=handles, fontsize=7)


def as_results(res: Any) -> SweepResults:
    """What the figures take: a SweepResults as is, a ``cprsim.Runs`` (anything with
    ``to_results()``) as its single point, a path as :func:`~cprsim.sweep.results.load_results`."""
    if isinstance(res, SweepResults):
        return res
    to_results = getattr(res, "to_results", None)
    if callable(to_results):
        return to_results()
    if isinstance(res, (str, os.PathLike)):
        from cprsim.sweep.results import load_results

        return load_results(Path(res))
    raise TypeError(f"expected SweepResults, Runs or a results folder, got {type(res).__name__}")


def as_plan_dict(plan: Any) -> dict[str, Any] | None:
    """A plan as the dict of ``plan.json``: a ``Plan`` (anything with ``as_dict()``), or the dict."""
    if plan is None or isinstance(plan, dict):
        return plan
    as_dict = getattr(plan, "as_dict", None)
    if callable(as_dict):
        return as_dict()
    raise TypeError(f"expected a Plan or the dict of plan.json, got {type(plan).__name__}")


def _line(kwargs: dict[str, Any], **defaults: Any) -> dict[str, Any]:
    from matplotlib.lines import Line2D

    return artist_kwargs(defaults, kwargs, Line2D)


def _groups(res: SweepResults) -> dict[tuple[str, str], list[PointSummary]]:
    """Lines: one per strategy and combination of the varying grid keys other than the interval."""
    other = [k for k in res.varying() if k != "checkpoint.interval_h"]
    out: dict[tuple[str, str], list[PointSummary]] = {}
    for p in res.points:
        extra = ", ".join(f"{k.split('.')[-1]}={_fmt(p.values[k])}" for k in other)
        out.setdefault((p.strategy, extra), []).append(p)
    for g in out.values():
        g.sort(key=lambda p: p.interval_h)
    return out


def _fmt(v: Any) -> str:
    return (
        f"{v:g}"
        if isinstance(v, float)
        else (json.dumps(v) if not isinstance(v, (int, str)) else str(v))
    )


def _interval_axis(ax: Any, xs: list[float]) -> None:
    ax.set_xlabel("checkpoint interval τ (hours of progress)")
    pos = [x for x in xs if x > 0 and math.isfinite(x)]
    if pos and max(pos) / min(pos) >= 8:
        from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter

        ax.set_xscale("log")
        ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_formatter(NullFormatter())


def plot_overhead(
    res: Any,
    metric: str = "overhead",
    plan: Any = None,
    ax: Any = None,
    band: str = "ci",
    **kwargs: Any,
) -> Figure:
    """Overhead against the checkpoint interval: the mean over replications (in % of the
    failure-free time W) and a band (``band="ci"``: the 95% CI of the mean; ``"p90"``: P50 to P90
    of single replications), a line per strategy (and combination of the other varying grid
    keys); the interval axis in hours of progress.

    ``res``: SweepResults, Runs or a results folder; ``metric``: ``"overhead"`` (wall - W) / W or
    ``"ckpt_overhead"`` (save + load + re-executed + degraded) / W; ``plan``: a Plan (or the dict
    of plan.json; default: the sweep's plan.json) whose options are drawn as markers with their
    95% CIs, the recommended one as a star; ``ax``: axes to draw into (default: a new figure);
    ``kwargs``: passed to the lines (``Axes.plot``). Returns the Figure."""
    res = as_results(res)
    if metric not in _METRIC_LABEL:
        raise ParameterError("metric", f"must be one of {', '.join(_METRIC_LABEL)}, got {metric!r}")
    _band_fields(band)
    fig, ax = new_axes(ax)
    groups = _groups(res)
    strategies = res.strategies
    styles: dict[str, int] = {}
    for (st, extra), pts in groups.items():
        x = np.array([p.interval_h for p in pts])
        m = np.array([p[metric].mean for p in pts]) * 100
        lo, hi = (edge * 100 for edge in band_edges(pts, metric, band))
        c = colour(st, strategies)
        ls = _LINESTYLES[styles.setdefault(extra, len(styles)) % len(_LINESTYLES)]
        ax.plot(
            x,
            m,
            **_line(
                kwargs,
                linestyle=ls,
                marker="o",
                markersize=3,
                color=c,
                label=st + (f" ({extra})" if extra else ""),
            ),
        )
        ax.fill_between(x, lo, hi, color=c, alpha=0.18, lw=0)
    plan = as_plan_dict(plan) if plan is not None else res.plan
    if plan is not None:
        _mark_plan(ax, plan, metric, strategies)
    _interval_axis(ax, [p.interval_h for p in res.points])
    ys = [100 * p[metric].mean for p in res.points if p[metric].mean > 0]
    if ys and max(ys) / min(ys) > 300:  # an interval far too long for full recovery blows up
        ax.set_yscale("log")
    ax.set_ylabel(_METRIC_LABEL[metric] + (", log scale" if ax.get_yscale() == "log" else ""))
    set_title(
        ax,
        f"{res.name}: {_METRIC_LABEL[metric].split(' (')[0]} vs checkpoint interval "
        f"(mean, {BANDS[band][0]})",
    )
    ax.grid(alpha=0.3)
    _legend(ax, band)
    return fig


def _mark_plan(ax: Any, plan: dict[str, Any], metric: str, strategies: list[str]) -> None:
    markers = "Dsp^vh<>"
    for i, o in enumerate(plan.get("options", [])):
        e = o.get(metric)
        if not e or e.get("mean") is None or o.get("interval_h") is None:
            continue
        rec = o["label"] == plan.get("recommended")
        y = 100 * e["mean"]
        lo, hi = (100 * v if v is not None else y for v in e.get("ci95", [None, None]))
        ax.errorbar(
            [o["interval_h"]],
            [y],
            yerr=[[y - lo], [hi - y]],
            fmt="*" if rec else markers[i % len(markers)],
            ms=15 if rec else 7,
            mfc=colour(o["strategy"], strategies),
            mec="black",
            ecolor="black",
            capsize=3,
            zorder=5,
            label=f"plan: {o['label']}, τ={o['interval_h']:.3g} h"
            + (" (recommended)" if rec else ""),
        )


def plot_pls(
    res: Any, bound: float | None = None, ax: Any = None, band: str = "ci", **kwargs: Any
) -> Figure:
    """PLS (the portion of lost samples, a fraction) against the checkpoint interval (hours) for
    every strategy that loses updates: the mean and a band (``band="ci"``: the 95% CI of the
    mean; ``"p90"``: P50 to P90 of single replications, which shows whether one run in ten
    exceeds the bound), and the PLS bound (``bound``, else the sweep's plan's), each option's own
    bound where it differs.

    ``res``: SweepResults, Runs or a results folder; ``ax``: axes to draw into (default: a new
    figure); ``kwargs``: passed to the lines (``Axes.plot``). Returns the Figure."""
    res = as_results(res)
    _band_fields(band)
    fig, ax = new_axes(ax)
    plan = res.plan
    if bound is None and plan is not None:
        bound = plan.get("pls_bound")  # CPR-vanilla's; MFU/SSU have their own, drawn below
    groups = _groups(res)
    drawn = 0
    styles: dict[str, int] = {}
    for (st, extra), pts in groups.items():
        if all(p["pls"].mean == 0 for p in pts):
            continue  # full recovery, ECRM without stripe loss: nothing lost
        x = np.array([p.interval_h for p in pts])
        c = colour(st, res.strategies)
        ls = _LINESTYLES[styles.setdefault(extra, len(styles)) % len(_LINESTYLES)]
        ax.plot(
            x,
            [p["pls"].mean for p in pts],
            **_line(
                kwargs,
                linestyle=ls,
                marker="o",
                markersize=3,
                color=c,
                label=st + (f" ({extra})" if extra else ""),
            ),
        )
        ax.fill_between(x, *band_edges(pts, "pls", band), color=c, alpha=0.18, lw=0)
        drawn += 1
    if bound is not None and math.isfinite(bound):
        ax.axhline(bound, color="black", ls="--", lw=1, label=f"PLS bound {bound:.3g}")
    if plan is not None:  # each strategy's own bound (its calibration slope), where it differs
        shown = {base_name(st) for st, _ in groups}
        for o in plan.get("options", []):
            b = o.get("pls_bound")
            if (
                b is not None
                and o["strategy"] in shown
                and (bound is None or abs(b - bound) > 1e-12)
            ):
                ax.axhline(
                    b,
                    color=colour(o["strategy"], res.strategies),
                    ls=":",
                    lw=1,
                    label=f"PLS bound for {o['label']}: {b:.3g}",
                )
    if not drawn:
        ax.text(
            0.5,
            0.5,
            "no strategy in these results loses updates (PLS = 0)",
            transform=ax.transAxes,
            ha="center",
        )
    _interval_axis(ax, [p.interval_h for p in res.points])
    ax.set_ylabel("PLS (portion of lost samples)")
    set_title(ax, f"{res.name}: lost updates vs checkpoint interval (mean, {BANDS[band][0]})")
    ax.grid(alpha=0.3)
    _legend(ax, band if drawn else None)
    return fig


def components(pts: list[Any]) -> tuple[tuple[str, str, str], ...]:
    """The stacked components: rescheduling split into detection, waiting for a machine and
    replacement when a node lifecycle made any of the first two non-zero."""
    if not any(p["detection_s"].mean > 0 or p["wait_s"].mean > 0 for p in pts):
        return COMPONENTS
    out: list[tuple[str, str, str]] = []
    for key, label, c in COMPONENTS:
        if key == "reschedule_s":
            out += LIFECYCLE_COMPONENTS
        else:
            out.append((key, label, c))
    return tuple(out)


def plot_breakdown(res: Any, ax: Any = None, **kwargs: Any) -> Figure:
    """Where the time goes: stacked bars of the mean of each overhead component (checkpoint saves,
    loads, re-executed work, rescheduling, or with a node lifecycle its detection / waiting for a
    machine / swap-in parts, degraded progress) in % of the failure-free time W, one bar per point
    (at most 40: select some with ``res.where(...)``); the 95% CI of the total overhead as an
    error bar.

    ``res``: SweepResults, Runs (one bar) or a results folder; ``ax``: axes to draw into (default:
    a new figure sized to the bars); ``kwargs``: passed to the bars (``Axes.bar``). Returns the
    Figure."""
    from matplotlib.patches import Rectangle

    res = as_results(res)
    pts = list(res.points)
    if len(pts) > MAX_BARS:
        raise InputError(
            f"{res.source}: {len(pts)} points are too many bars (at most {MAX_BARS}); select some "
            "with .where()"
        )
    varying = res.varying()
    labels = []
    for p in pts:
        parts = [p.strategy] + [
            f"{k.split('.')[-1]}={_fmt(p.values[k])}"
            for k in varying
            if k != "checkpoint.interval_h"
        ]
        parts.append(f"τ={p.interval_h:g} h")
        labels.append("\n".join(parts))
    widest = max(len(x) for lab in labels for x in lab.split("\n"))
    fig, ax = new_axes(ax, (max(6.0, len(pts) * max(0.55, 0.075 * widest) + 2.5), 4.8))
    x = np.arange(len(pts))
    bottom = np.zeros(len(pts))
    W = np.array([p["useful_s"].mean for p in pts])
    for key, label, c in components(pts):
        if key == "replacement_s":  # rescheduling without detection and waiting for a machine
            h = np.array(
                [p["reschedule_s"].mean - p["detection_s"].mean - p["wait_s"].mean for p in pts]
            )
        else:
            h = np.array([p[key].mean for p in pts])
        h = h / W * 100
        ax.bar(
            x,
            h,
            **artist_kwargs(
                {"width": 0.7, "bottom": bottom, "color": c, "label": label}, kwargs, Rectangle
            ),
        )
        bottom += h
    tot = np.array([p["overhead"].mean for p in pts]) * 100
    lo = np.array([p["overhead"].lo for p in pts]) * 100
    hi = np.array([p["overhead"].hi for p in pts]) * 100
    ax.errorbar(
        x,
        tot,
        yerr=[tot - lo, hi - tot],
        fmt="none",
        ecolor="black",
        capsize=3,
        label="total overhead, 95% CI",
    )
    ax.set_xticks(x, labels, fontsize=7)
    for tick, p in zip(ax.get_xticklabels(), pts):
        tick.set_color(colour(p.strategy, res.strategies))
    ax.set_ylabel("overhead (% of failure-free time W)")
    ax.set_xlabel("strategy and setting")
    set_title(ax, f"{res.name}: where the time goes (mean over replications)")
    ax.legend(fontsize=7)
    ax.grid(axis="y", alpha=0.3)
    return fig
