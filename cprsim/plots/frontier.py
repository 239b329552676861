"""The frontier of a what-if sweep: for each strategy, the best mean overhead over the swept
checkpoint intervals against another grid key (a bandwidth, a cluster size), and the interval
that achieves it.

What an operator asks of a bandwidth or cluster-size sweep: "if we had this much write
bandwidth, how low could the overhead go, and at which interval?". Read from the sweep's
summarized points (their means and 95% CIs); nothing is simulated again. The best interval is
only the best of those swept: one at the edge of the swept range is drawn hollow (the optimum may
lie beyond it; sweep further).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from cprsim.errors import InputError, ParameterError
from cprsim.plots import new_axes, new_figure
from cprsim.plots import sweep as S
from cprsim.plots.style import colour
from cprsim.sweep.results import PointSummary, SweepResults

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure

#: the metrics a frontier minimizes (costs: lower is better)
METRICS = ("overhead", "ckpt_overhead")


@dataclass(frozen=True)
class FrontierLine:
    """One line of the frontier: a strategy (and combination of the other varying grid keys,
    ``extra``, "" when none); at each value of the swept key (``values``, in axis order) the
    point whose mean ``metric`` is the lowest over the checkpoint intervals swept there
    (``best``; ``best[i][metric]`` its Estimate, ``best[i].interval_h`` its interval in hours),
    and whether that interval is the shortest or longest swept there (``edge``: the optimum may
    lie beyond the swept range)."""

    strategy: str
    extra: str
    values: tuple[Any, ...]
    best: tuple[PointSummary, ...]
    edge: tuple[bool, ...]


def frontier_key(res: SweepResults, x: str | None) -> str:
    """The grid key a frontier is drawn against: ``x`` (checked: a grid key of ``res`` other than
    the interval), or, when None, the one key besides the interval that ``res`` varies. Anything
    else is a ParameterError about ``x`` naming the key and the keys expected."""
    free = [k for k in res.varying() if k != S.INTERVAL]
    if x is None:
        if len(free) == 1:
            return free[0]
        if not free:
            raise ParameterError(
                "x",
                f"expected a grid key to plot against; {res.source} varies no key besides the "
                f"checkpoint interval (grid keys: {', '.join(res.keys) or 'none'})",
            )
        raise ParameterError(
            "x", f"expected one of the keys {res.source} varies: {', '.join(free)} (none given)"
        )
    if S.is_interval(x):
        others = [k for k in res.keys if k != S.INTERVAL]
        raise ParameterError(
            "x",
            "the frontier is the best over the checkpoint interval; expected another grid key "
            f"(keys: {', '.join(others) or 'none'})",
            key=x,
        )
    S.check_key(res, x)
    return x


def frontier(res: Any, x: str | None = None, metric: str = "overhead") -> list[FrontierLine]:
    """The frontier's lines (:class:`FrontierLine`): per strategy (and combination of the grid
    keys varying besides ``x`` and the interval), at each value of the grid key ``x`` (default:
    the one key besides the interval the sweep varies), the point with the lowest mean ``metric``
    (``"overhead"`` or ``"ckpt_overhead"``) over the swept checkpoint intervals; a tie goes to the
    shorter interval. ``res``: SweepResults, or what :func:`~cprsim.plots.sweep.as_results`
    takes. Points whose mean is not a number are left out; no point at all is an InputError."""
    res = S.as_results(res)
    if metric not in METRICS:
        raise ParameterError("metric", f"must be one of {', '.join(METRICS)}, got {metric!r}")
    key = frontier_key(res, x)
    if not res.points:
        raise InputError(f"{res.source}: no complete point to draw a frontier from")
    order = {json.dumps(v, sort_keys=True): i for i, v in enumerate(S.x_values(res, key))}
    lines = []
    for (st, extra), pts in S._groups(res, key, skip=(S.INTERVAL,)).items():
        at: dict[str, list[PointSummary]] = {}
        for p in pts:
            at.setdefault(json.dumps(p.values[key], sort_keys=True), []).append(p)
        values, best, edge = [], [], []
        for k in sorted(at, key=order.__getitem__):
            cands = sorted(at[k], key=lambda p: p.interval_h)
            ok = [p for p in cands if not math.isnan(p[metric].mean)]
            if not ok:
                continue
            b = min(ok, key=lambda p: p[metric].mean)  # the first of equals: the shorter interval
            taus = {p.interval_h for p in cands}
            values.append(b.values[key])
            best.append(b)
            edge.append(len(taus) > 1 and b.interval_h in (min(taus), max(taus)))
        if best:
            lines.append(FrontierLine(st, extra, tuple(values), tuple(best), tuple(edge)))
    if not lines:
        raise InputError(f"{res.source}: no point has a mean {metric} to draw a frontier from")
    return lines


def plot_frontier(
    res: Any,
    x: str | None = None,
    metric: str = "overhead",
    ax: Any = None,
    band: str = "ci",
    *,
    where: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> Figure:
    """The frontier (:func:`frontier`) against the grid key ``x``: on top, per strategy, the best
    mean ``metric`` over the swept checkpoint intervals (in % of the failure-free time W) with
    error bars (``band="ci"``: the 95% CI of that point's mean; ``"p90"``: P50 to P90 of its
    single replications); below, the interval τ* that achieves it (hollow: the shortest or
    longest interval swept, so the optimum may lie beyond).

    ``ax``: None (a new figure with both panels), two axes (top, bottom) or one axes (the top
    panel only, each point annotated with its τ*, "edge of the sweep" where it would be hollow);
    ``where``: the slice of the sweep ``res`` is, named in the title; ``kwargs``: passed to the
    lines (``Axes.plot``). Returns the Figure."""
    res = S.as_results(res)
    lines = frontier(res, x, metric)
    S._band_fields(band)
    key = frontier_key(res, x)
    fig, top, bottom = _axes(ax)
    coord = S.x_coords(res, key)
    strategies = res.strategies
    styles: dict[str, int] = {}
    hollow = False
    for i, ln in enumerate(lines):
        ls = S._LINESTYLES[styles.setdefault(ln.extra, len(styles)) % len(S._LINESTYLES)]
        c = colour(ln.strategy, strategies)
        hollow |= _draw_line(top, bottom, i, ln, coord, metric, band, c, ls, kwargs)
    S.key_axis(top, res, key)
    top.set_ylabel("best " + S._METRIC_LABEL[metric])
    top.grid(alpha=0.3)
    _legend(top, band, hollow)
    if bottom is not None:
        S.key_axis(bottom, res, key)
        S.key_axis(bottom, res, None, axis="y")
        bottom.set_ylabel("best interval τ* (h)")
        bottom.grid(alpha=0.3)
        if bottom.get_shared_x_axes().joined(top, bottom):
            top.set_xlabel("")
            top.tick_params(labelbottom=False)
    S.title(
        top,
        f"{res.name}: best {S._METRIC_LABEL[metric].split(' (')[0]} over τ vs {key} "
        f"(mean, {S.BANDS[band][0]})",
        where,
    )
    return fig


def _draw_line(
    top: Any,
    bottom: Any,
    i: int,
    ln: FrontierLine,
    coord: Any,
    metric: str,
    band: str,
    c: Any,
    ls: Any,
    kwargs: dict[str, Any],
) -> bool:
    """Draw frontier line ``i``: its best ``metric`` with bars on ``top``, its τ* on ``bottom``
    (or annotated on ``top`` without one); True if a τ* lies at the edge of the sweep."""
    xs = np.array([coord(v) for v in ln.values])
    m = np.array([p[metric].mean for p in ln.best]) * 100
    lo, hi = (e * 100 for e in S.band_edges(list(ln.best), metric, band))
    label = ln.strategy + (f" ({ln.extra})" if ln.extra else "")
    top.plot(
        xs,
        m,
        **S._line(kwargs, linestyle=ls, marker="o", markersize=4, color=c, label=label),
    )
    # a bar from lo to hi (centred on its middle: a P50-P90 band need not hold the mean)
    top.errorbar(
        xs,
        (lo + hi) / 2,
        yerr=(hi - lo) / 2,
        fmt="none",
        ecolor=c,
        elinewidth=1,
        capsize=3,
        alpha=0.7,
        gid=f"bars: {label}",
    )
    taus = np.array([p.interval_h for p in ln.best])
    if bottom is None:
        for xi, yi, t, e in zip(xs, m, taus, ln.edge):
            top.annotate(
                f"τ*={t:.3g} h" + (" (edge of the sweep)" if e else ""),
                (xi, yi),
                xytext=(4, 4),
                textcoords="offset points",
                fontsize=6,
                color=c,
            )
        return False
    hollow = False
    ms = max(3.0, 8.0 - 1.5 * i)  # a later line smaller, in front: equal τ* stay visible
    bottom.plot(xs, taus, linestyle=ls, color=c, lw=1, zorder=2 + i, gid=f"tau*: {label}")
    for xi, t, e in zip(xs, taus, ln.edge):
        hollow |= e
        bottom.plot(
            [xi], [t], marker="o", ms=ms, color=c, mfc="white" if e else c, ls="", zorder=2 + i
        )
    return hollow


def _legend(top: Any, band: str, hollow: bool) -> None:
    """The top panel's legend: the lines, what the bars are, and (``hollow``) the hollow τ*."""
    from matplotlib.lines import Line2D

    handles, _ = top.get_legend_handles_labels()
    handles.append(
        Line2D([], [], color="grey", marker="|", ls="", label=f"bars: {S.BANDS[band][0]}")
    )
    if hollow:
        handles.append(
            Line2D(
                [],
                [],
                marker="o",
                ls="",
                color="grey",
                mfc="white",
                label="τ* at the edge of the swept intervals (the best may lie beyond)",
            )
        )
    top.legend(handles=handles, fontsize=7)


def _axes(ax: Any) -> tuple[Any, Any, Any]:
    """(figure, top axes, bottom axes or None) from ``ax``: None, two axes or one."""
    if ax is None:
        fig = new_figure((7.5, 6.0))
        top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=(2, 1))
        return fig, top, bottom
    if isinstance(ax, (Sequence, np.ndarray)):
        if len(ax) != 2:
            raise ParameterError("ax", f"expected one axes or two (top, bottom), got {len(ax)}")
        return ax[0].figure, ax[0], ax[1]
    fig, top = new_axes(ax)
    return fig, top, None
