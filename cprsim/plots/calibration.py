"""Accuracy loss against PLS from a calibration document: mean over seeds with error bars
(±1 sd over seeds), the fit through the origin with its 95% CI, one colour per strategy."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from cprsim.errors import InputError
from cprsim.io import read_toml
from cprsim.plots import new_axes, save_figure
from cprsim.plots.style import colour

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure


def read_calibration(path: str | os.PathLike[str]) -> dict[str, Any]:
    """``calibration.toml`` (or the ``cprsim calibrate --out`` folder holding it)."""
    p = Path(path)
    if p.is_dir():
        p = p / "calibration.toml"
    doc = read_toml(p, "calibration file")
    if not isinstance(doc.get("points"), dict) or not isinstance(doc.get("fit"), dict):
        raise InputError(
            f"{p}: needs [fit.<strategy>] and [points.<strategy>] tables (written by cprsim calibrate)"
        )
    from cprsim.calibrate.schema import check_document
    from cprsim.io import short

    check_document(doc, short(p))  # every key the plot reads, as load_calibration checks it
    return doc


def plot_calibration(doc: Any = None, metric: str = "auc", ax: Any = None, **kwargs: Any) -> Figure:
    """Accuracy loss against PLS (a fraction): per strategy, the mean over seeds at each
    checkpoint budget with ±1 sd error bars, the fit through the origin with its 95% CI, and the
    planner's model in the title. ``metric``: ``"auc"`` (AUC points lost) or ``"logloss"`` (its rise).

    ``doc``: a Calibration (``cprsim.load_calibration``), the dict of a calibration.toml
    (``cprsim.run_calibration`` returns one), a calibration.toml or ``cprsim calibrate --out``
    folder, or None for the shipped calibration; ``ax``: axes to draw into (default: a new figure);
    ``kwargs``: passed to the points (``Axes.errorbar``). Returns the Figure."""
    from matplotlib.lines import Line2D

    from cprsim.plots import artist_kwargs, set_title

    doc = _calibration_doc(doc)
    if metric not in ("auc", "logloss"):
        raise InputError(f"metric must be auc or logloss, got {metric!r}")
    fig, ax = new_axes(ax, (6.5, 4.3))
    key = "d_auc" if metric == "auc" else "d_logloss"
    strategies = list(doc["points"])
    for st, pts in doc["points"].items():
        c = colour(st, strategies)
        pls, y = np.asarray(pts["pls"], dtype=float), np.asarray(pts[key], dtype=float)
        # budget is optional (a file without it: each run on its own)
        budget = np.asarray(pts.get("budget", pts["pls"]), dtype=float)
        xs, ys, xe, ye = [], [], [], []
        for b in sorted(set(budget.tolist())):
            sel = budget == b
            xs.append(pls[sel].mean())
            ys.append(y[sel].mean())
            xe.append(pls[sel].std(ddof=1) if sel.sum() > 1 else 0.0)
            ye.append(y[sel].std(ddof=1) if sel.sum() > 1 else 0.0)
        ax.errorbar(
            xs,
            ys,
            yerr=ye,
            xerr=xe,
            **artist_kwargs(
                {"fmt": "o", "color": c, "capsize": 3, "label": f"{st} (mean ± sd over seeds)"},
                kwargs,
                Line2D,
            ),
        )
        _draw_fit(ax, doc["fit"].get(st, {}), metric, pls, c, st)
    ax.axhline(0, color="grey", lw=0.5)
    ax.set_xlabel("PLS (portion of lost samples)")
    ax.set_ylabel(
        "AUC loss (baseline − with failures)"
        if metric == "auc"
        else "log-loss increase (with failures − baseline)"
    )
    prov = doc.get("provenance", {})
    seeds = prov.get("seeds", [])
    set_title(
        ax,
        f"accuracy loss vs PLS: {_model_name(prov)}, {len(seeds)} seeds"
        + ("" if prov.get("calibrated", True) else " (placeholder, not measured)")
        + _model_line(doc, metric),
        fontsize=10,
    )
    ax.legend(fontsize=6)
    return fig


def _calibration_doc(doc: Any) -> dict[str, Any]:
    """:func:`plot_calibration`'s ``doc`` as a calibration.toml's dict (None: the shipped one)."""
    if doc is None:
        from cprsim.calibrate.calibration import default_path

        doc = default_path()
        if doc is None:
            raise InputError("no calibration file ships with this installation: give one")
    if isinstance(doc, (str, os.PathLike)):
        doc = read_calibration(doc)
    elif not isinstance(doc, dict):
        raw = getattr(doc, "raw", None)  # a Calibration
        if not isinstance(raw, dict) or not raw:
            raise InputError("this calibration has no measured points to draw (a placeholder)")
        doc = raw
    return doc


def _draw_fit(ax: Any, f: dict[str, Any], metric: str, pls: Any, c: Any, st: str) -> None:
    """Draw strategy ``st``'s fit through the origin (``f``: its fit table) and its 95% CI."""
    slope = f.get(f"{metric}_slope")
    # the CI's ends: lo is optional (a hand-written file), either infinite for a one-run fit
    lo = f.get(f"{metric}_slope_lo", -math.inf)
    hi = f.get(f"{metric}_slope_hi", math.inf)
    if isinstance(slope, float) and math.isfinite(slope) and pls.size:
        gx = np.linspace(0, pls.max() * 1.05, 50)
        ax.plot(
            gx,
            slope * gx,
            color=c,
            lw=1,
            label=f"{st} fit: {slope:.3g} × PLS [{lo:.3g}, {hi:.3g}], "
            f"R²={f.get(f'{metric}_r2', math.nan):.2f}",
        )
        if math.isfinite(lo) and math.isfinite(hi):
            ax.fill_between(gx, lo * gx, hi * gx, color=c, alpha=0.1, lw=0)


def _model_name(prov: dict) -> str:
    """The title's model: the built-in DLRM's preset, or a user model's own description (its first
    clause: ``cprsim.calibrate.user`` writes what the user said)."""
    preset = prov.get("preset", "?")
    model = str(prov.get("model", ""))
    if model and not model.startswith("DLRM:"):
        return model.split(";")[0][:60]
    return f"DLRM, {preset} preset"


def _model_line(doc: dict[str, Any], metric: str) -> str:
    """The planner's model (``[model.<metric>]``), on a second title line."""
    m = doc.get("model", {}).get(metric) if isinstance(doc.get("model"), dict) else None
    if not isinstance(m, dict) or "formula" not in m:
        return ""
    return f"\nplanner's model: {m['formula']} ({'pooled' if m.get('pooled') else 'per strategy'})"


def write_calibration_figure(doc: Any, path: Path) -> None:
    """Draw :func:`plot_calibration` of calibration ``doc`` into ``path``: the figure
    ``cprsim calibrate`` writes beside calibration.toml (passed to the calibration as its
    ``figure``, which keeps figures out of the calibration's layer)."""
    save_figure(plot_calibration(doc), path)
