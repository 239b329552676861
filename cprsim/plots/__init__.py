"""Figures from result files; matplotlib is imported inside the functions (Agg backend).

The library never chooses a matplotlib backend (the CLI uses Agg; a notebook keeps inline).
Every function takes ``ax=None`` (draws into a new figure) and returns the Figure. Colours are
fixed per strategy (``style.colour``) so a strategy looks the same in every figure.

* ``sweep.plot_overhead``: overhead against the checkpoint interval, bands of the 95% CI of
  the mean or of P50-P90 of single runs (``band=``), the planner's choices marked;
* ``sweep.plot_breakdown``: where the time goes (save, load, re-executed, rescheduling,
  degraded) as stacked bars;
* ``sweep.plot_pls``: PLS against the interval (the same bands), with the PLS bound;
* ``fit.plot_fit``: Kaplan-Meier against the fitted survival curves;
* ``calibration.plot_calibration``: accuracy loss against PLS, per strategy;
* ``gantt.plot_timeline``: one replication's timeline (phases, nodes down).
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from cprsim.errors import InputError

FORMATS = ("png", "svg", "pdf")


def figure_format(path: Path) -> str:
    fmt = path.suffix.lstrip(".").lower()
    if fmt not in FORMATS:
        raise InputError(f"{path}: unknown image format {path.suffix or '(none)'!r}; use .png, .svg or .pdf")
    return fmt


def save_figure(fig: Any, path: str | Path, dpi: int = 130) -> Path:
    """Write a figure atomically (PNG, SVG or PDF by the suffix) and close it."""
    import matplotlib.pyplot as plt

    from cprsim.io import atomic_write_bytes

    p = Path(path)
    fmt = figure_format(p)
    buf = io.BytesIO()
    # metadata without dates or versions: same data, same bytes
    meta = {"Creator": None, "Producer": None, "CreationDate": None} if fmt == "pdf" else \
        ({"Date": None, "Creator": None} if fmt == "svg" else {"Software": None})
    import matplotlib

    # SVG: text stays text (editable, searchable), ids from a fixed salt (same bytes each run)
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "cprsim"}):
        fig.savefig(buf, format=fmt, dpi=dpi, metadata=meta)
    plt.close(fig)
    return atomic_write_bytes(p, buf.getvalue())


def new_axes(ax: Any = None, size: tuple[float, float] = (7.5, 4.5)) -> tuple[Any, Any]:
    import matplotlib.pyplot as plt

    if ax is None:
        fig, ax = plt.subplots(figsize=size)
        return fig, ax
    return ax.figure, ax
