"""Sweep figures: overhead and PLS against the checkpoint interval (or another grid key: ``x=``),
and the time breakdown; ``cprsim.plots.frontier``: the best overhead over the interval against a
grid key.

Each takes a :class:`~cprsim.sweep.results.SweepResults` (``cprsim.Sweep.run``, ``load_results``),
a ``cprsim.Runs`` (``cprsim.simulate``: one point) or a results folder, ``ax=`` (axes to draw
into) and ``**kwargs`` for the main artist (the lines; the bars of the breakdown).

The lines are means over replications; the band around each (``band=``) is either the 95% CI
of the mean (``"ci"``) or the spread of single runs from their median to their worst 10%
(``"p90"``: P50 to P90 of the point's replications, read from results.csv / replications.csv;
the metrics drawn are costs, whose bad tail is the high one).

``where=``: the slice of the sweep drawn (the conditions given to ``SweepResults.where``), named
in the title.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
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

#: the grid key of the checkpoint interval (hours): the default x axis
INTERVAL = "checkpoint.interval_h"
#: at most this many values of a numeric x axis get a tick each (more: matplotlib's ticks)
MAX_VALUE_TICKS = 12


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


def _groups(
    res: SweepResults, x: str | None = None, skip: tuple[str, ...] = ()
) -> dict[tuple[str, str], list[PointSummary]]:
    """Lines: one per strategy and combination of the varying grid keys other than the x axis
    (``x``: a grid key, None: the interval) and ``skip``, each sorted along the x axis."""
    other = [k for k in res.varying() if k != (x or INTERVAL) and k not in skip]
    out: dict[tuple[str, str], list[PointSummary]] = {}
    for p in res.points:
        extra = ", ".join(_setting(k, p.values[k]) for k in other)
        out.setdefault((p.strategy, extra), []).append(p)
    coord = x_coords(res, x)
    for g in out.values():
        g.sort(key=lambda p: coord(x_value(p, x)))
    return out


def _setting(key: str, value: Any) -> str:
    """A grid value in a legend or tick label: ``write_gbps=10``, the interval as ``τ=0.5 h``."""
    return f"τ={_fmt(value)} h" if key == INTERVAL else f"{key.split('.')[-1]}={_fmt(value)}"


def is_interval(x: str | None) -> bool:
    """Does ``x`` name the checkpoint interval (None, ``checkpoint.interval_h``, ``interval_h``)?"""
    return x is None or x in (INTERVAL, "interval_h")


def check_key(res: SweepResults, x: str) -> None:
    """A ParameterError about ``x`` unless it is a grid key of ``res``: it names the key and the
    keys expected (and the full key when ``x`` is its last part, ``write_gbps``)."""
    if x in res.keys:
        return
    near = [k for k in res.keys if k.split(".")[-1] == x or k.endswith("." + x)]
    hint = f"; did you mean {near[0]}?" if len(near) == 1 else ""
    raise ParameterError(
        "x",
        f"not a grid key of {res.source} (expected one of: {', '.join(res.keys) or 'none'}){hint}",
        key=x,
    )


def x_value(p: PointSummary, x: str | None) -> Any:
    """A point's value on the x axis: its grid value of ``x``, or (None) its interval in hours."""
    return p.interval_h if is_interval(x) else p.values[x]  # type: ignore[index]


def _numeric(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def x_values(res: SweepResults, x: str | None) -> list[Any]:
    """The distinct values of ``x`` among the points, in axis order (numbers ascending, anything
    else in order of first appearance)."""
    seen: dict[str, Any] = {}
    for p in res.points:
        v = x_value(p, x)
        seen.setdefault(json.dumps(v, sort_keys=True), v)
    vals = list(seen.values())
    return sorted(vals, key=float) if all(_numeric(v) for v in vals) else vals


def x_coords(res: SweepResults, x: str | None) -> Any:
    """``coord(value)``: where a value of ``x`` lies on the axis (a number as itself, anything
    else at its position among :func:`x_values`)."""
    vals = x_values(res, x)
    if all(_numeric(v) for v in vals):
        return float
    pos = {json.dumps(v, sort_keys=True): float(i) for i, v in enumerate(vals)}
    return lambda v: pos[json.dumps(v, sort_keys=True)]


def key_label(key: str) -> str:
    """An axis label for a grid key: the key and the scenario field's description
    (``storage.write_gbps: aggregate checkpoint write bandwidth (GB/s)``), else the key."""
    import typing

    from pydantic import BaseModel

    from cprsim.scenario import Scenario

    model: Any = Scenario
    desc = None
    for part in key.split("."):
        if model is None:
            return key
        if part.isdigit():  # an item of a tuple of tables: the model stays
            continue
        field = model.model_fields.get(part)
        if field is None:
            return key
        desc = field.description
        todo, model = [field.annotation], None
        while todo:  # the table inside Optional[...] or tuple[..., ...]
            t = todo.pop()
            if isinstance(t, type) and issubclass(t, BaseModel):
                model = t
                break
            todo += list(typing.get_args(t))
    return f"{key}: {desc}" if desc else key


def key_axis(ax: Any, res: SweepResults, x: str | None, axis: str = "x") -> None:
    """Label and scale the axis of ``x`` (None: the interval axis, as :func:`_interval_axis`):
    numbers on a log scale when they span a factor 8 or more, a tick at each value when there
    are few; other values (tables, names) one tick each."""
    if is_interval(x) and axis == "x":
        _interval_axis(ax, [p.interval_h for p in res.points])
        return
    vals = x_values(res, x)
    label = "checkpoint interval τ (hours of progress)" if is_interval(x) else key_label(str(x))
    getattr(ax, f"set_{axis}label")(label)
    set_ticks = getattr(ax, f"set_{axis}ticks")
    if not all(_numeric(v) for v in vals):
        set_ticks(range(len(vals)), [_fmt(v) for v in vals])
        return
    pos = [float(v) for v in vals if v > 0 and math.isfinite(v)]
    if len(pos) == len(vals) and pos and max(pos) / min(pos) >= 8:
        from matplotlib.ticker import NullFormatter, NullLocator

        getattr(ax, f"set_{axis}scale")("log")
        sub = getattr(ax, f"{axis}axis")
        sub.set_minor_locator(NullLocator())
        sub.set_minor_formatter(NullFormatter())
    if len(vals) <= MAX_VALUE_TICKS:
        set_ticks([float(v) for v in vals], [_fmt(v) for v in vals])


def value_text(v: Any) -> str:
    """A grid value as the figures write it: ``10`` for 10.0, JSON for a table."""
    return _fmt(v)


def slice_text(where: Mapping[str, Any] | None) -> str:
    """The slice a figure shows, for its title: ``where storage.write_gbps=10, cluster.trainers=4``
    ("" for none)."""
    if not where:
        return ""
    return "where " + ", ".join(f"{k}={_fmt(v)}" for k, v in where.items())


def title(ax: Any, text: str, where: Mapping[str, Any] | None = None) -> None:
    """The figure's title; the slice (``where``) on a line of its own below."""
    s = slice_text(where)
    set_title(ax, text + (f"\n{s}" if s else ""))


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
    *,
    x: str | None = None,
    where: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> Figure:
    """Overhead against the checkpoint interval: the mean over replications (in % of the
    failure-free time W) and a band (``band="ci"``: the 95% CI of the mean; ``"p90"``: P50 to P90
    of single replications), a line per strategy (and combination of the other varying grid
    keys); the interval axis in hours of progress. ``x``: another grid key to put on the x axis
    instead (``"storage.write_gbps"``; a line per strategy, interval and other varying key; no
    plan marked); ``where``: the slice of the sweep ``res`` is, named in the title.

    ``res``: SweepResults, Runs or a results folder; ``metric``: ``"overhead"`` (wall - W) / W or
    ``"ckpt_overhead"`` (save + load + re-executed + degraded) / W; ``plan``: a Plan (or the dict
    of plan.json; default: the sweep's plan.json) whose options are drawn as markers with their
    95% CIs, the recommended one as a star; ``ax``: axes to draw into (default: a new figure);
    ``kwargs``: passed to the lines (``Axes.plot``). Returns the Figure."""
    res = as_results(res)
    if metric not in _METRIC_LABEL:
        raise ParameterError("metric", f"must be one of {', '.join(_METRIC_LABEL)}, got {metric!r}")
    _band_fields(band)
    if is_interval(x):
        x = None
    else:
        check_key(res, str(x))
        if plan is not None:
            raise ParameterError(
                "plan", "marks intervals on the interval axis; expected none with `x`", also=("x",)
            )
    fig, ax = new_axes(ax)
    groups = _groups(res, x)
    coord = x_coords(res, x)
    strategies = res.strategies
    styles: dict[str, int] = {}
    for (st, extra), pts in groups.items():
        xs = np.array([coord(x_value(p, x)) for p in pts])
        m = np.array([p[metric].mean for p in pts]) * 100
        lo, hi = (edge * 100 for edge in band_edges(pts, metric, band))
        c = colour(st, strategies)
        ls = _LINESTYLES[styles.setdefault(extra, len(styles)) % len(_LINESTYLES)]
        ax.plot(
            xs,
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
        ax.fill_between(xs, lo, hi, color=c, alpha=0.18, lw=0)
    plan = as_plan_dict(plan) if plan is not None else res.plan if x is None else None
    if plan is not None:
        _mark_plan(ax, plan, metric, strategies)
    key_axis(ax, res, x)
    ys = [100 * p[metric].mean for p in res.points if p[metric].mean > 0]
    if ys and max(ys) / min(ys) > 300:  # an interval far too long for full recovery blows up
        ax.set_yscale("log")
    ax.set_ylabel(_METRIC_LABEL[metric] + (", log scale" if ax.get_yscale() == "log" else ""))
    title(
        ax,
        f"{res.name}: {_METRIC_LABEL[metric].split(' (')[0]} vs "
        f"{'checkpoint interval' if x is None else x} (mean, {BANDS[band][0]})",
        where,
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
    res: Any,
    bound: float | None = None,
    ax: Any = None,
    band: str = "ci",
    *,
    x: str | None = None,
    where: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> Figure:
    """PLS (the portion of lost samples, a fraction) against the checkpoint interval (hours) for
    every strategy that loses updates: the mean and a band (``band="ci"``: the 95% CI of the
    mean; ``"p90"``: P50 to P90 of single replications, which shows whether one run in ten
    exceeds the bound), and the PLS bound (``bound``, else the sweep's plan's), each option's own
    bound where it differs.

    ``res``: SweepResults, Runs or a results folder; ``ax``: axes to draw into (default: a new
    figure); ``x``: another grid key on the x axis instead of the interval; ``where``: the slice
    of the sweep ``res`` is, named in the title; ``kwargs``: passed to the lines (``Axes.plot``).
    Returns the Figure."""
    res = as_results(res)
    _band_fields(band)
    if is_interval(x):
        x = None
    else:
        check_key(res, str(x))
    fig, ax = new_axes(ax)
    plan = res.plan
    if bound is None and plan is not None:
        bound = plan.get("pls_bound")  # CPR-vanilla's; MFU/SSU have their own, drawn below
    groups = _groups(res, x)
    coord = x_coords(res, x)
    drawn = _pls_lines(ax, res, groups, coord, x, band, kwargs)
    _pls_bounds(ax, res, groups, bound)
    if not drawn:
        ax.text(
            0.5,
            0.5,
            "no strategy in these results loses updates (PLS = 0)",
            transform=ax.transAxes,
            ha="center",
        )
    key_axis(ax, res, x)
    ax.set_ylabel("PLS (portion of lost samples)")
    title(
        ax,
        f"{res.name}: lost updates vs {'checkpoint interval' if x is None else x} "
        f"(mean, {BANDS[band][0]})",
        where,
    )
    ax.grid(alpha=0.3)
    _legend(ax, band if drawn else None)
    return fig


def _pls_lines(
    ax: Any,
    res: SweepResults,
    groups: Any,
    coord: Any,
    x: str | None,
    band: str,
    kwargs: dict[str, Any],
) -> int:
    """Draw each group's mean PLS and its band (none for those that lose nothing); how many."""
    drawn = 0
    styles: dict[str, int] = {}
    for (st, extra), pts in groups.items():
        if all(p["pls"].mean == 0 for p in pts):
            continue  # full recovery, ECRM without stripe loss: nothing lost
        xs = np.array([coord(x_value(p, x)) for p in pts])
        c = colour(st, res.strategies)
        ls = _LINESTYLES[styles.setdefault(extra, len(styles)) % len(_LINESTYLES)]
        ax.plot(
            xs,
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
        ax.fill_between(xs, *band_edges(pts, "pls", band), color=c, alpha=0.18, lw=0)
        drawn += 1
    return drawn


def _pls_bounds(ax: Any, res: SweepResults, groups: Any, bound: float | None) -> None:
    """Draw the PLS ``bound`` and, from the sweep's plan, each strategy's own where it differs."""
    plan = res.plan
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


def plot_breakdown(
    res: Any, ax: Any = None, *, where: Mapping[str, Any] | None = None, **kwargs: Any
) -> Figure:
    """Where the time goes: stacked bars of the mean of each overhead component (checkpoint saves,
    loads, re-executed work, rescheduling, or with a node lifecycle its detection / waiting for a
    machine / swap-in parts, degraded progress) in % of the failure-free time W, one bar per point
    (at most 40: select some with ``res.where(...)``); the 95% CI of the total overhead as an
    error bar.

    ``res``: SweepResults, Runs (one bar) or a results folder; ``ax``: axes to draw into (default:
    a new figure sized to the bars); ``where``: the slice of the sweep ``res`` is, named in the
    title; ``kwargs``: passed to the bars (``Axes.bar``). Returns the Figure."""
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
    title(ax, f"{res.name}: where the time goes (mean over replications)", where)
    ax.legend(fontsize=7)
    ax.grid(axis="y", alpha=0.3)
    return fig
