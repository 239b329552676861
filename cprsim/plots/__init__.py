"""Figures of results; matplotlib is imported inside the functions.

The library never uses ``matplotlib.pyplot`` and never chooses a backend: a figure is a
``matplotlib.figure.Figure`` made directly (constrained layout, so titles and labels are never
clipped), registered nowhere, so nothing leaks into a notebook's global state (no figure shown
twice, none kept open); a notebook displays the returned figure, :func:`save_figure` writes it.
Every function takes typed results (``SweepResults``, ``cprsim.Runs``, ``cprsim.Plan``,
``FitReport``, ...; result folders and the dicts of the files also work), ``ax=None`` (draw
into a new figure, or into the given axes) and ``**kwargs`` passed to the main artist, and returns
the Figure. Colours are fixed per strategy (``style.colour``) so a strategy looks the same in
every figure.

* ``sweep.plot_overhead``: overhead against the checkpoint interval, bands of the 95% CI of
  the mean or of P50-P90 of single runs (``band=``), the planner's choices marked;
* ``sweep.plot_breakdown``: where the time goes (save, load, re-executed, rescheduling,
  degraded) as stacked bars;
* ``sweep.plot_pls``: PLS against the interval (the same bands), with the PLS bound;
  ``x=KEY`` puts another grid key on x for both; ``where=`` names the slice in the title;
* ``frontier.plot_frontier``: the best mean overhead over the swept intervals (95% CI) and the
  interval achieving it, per strategy, against a swept key (a bandwidth, a cluster size);
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
    """The image format of ``path`` by its suffix (png, svg or pdf; anything else: an InputError)."""
    fmt = path.suffix.lstrip(".").lower()
    if fmt not in FORMATS:
        raise InputError(
            f"{path}: unknown image format {path.suffix or '(none)'!r}; use .png, .svg or .pdf"
        )
    return fmt


def save_figure(fig: Any, path: str | Path, dpi: int = 130) -> Path:
    """Write a figure atomically to ``path`` (PNG, SVG or PDF by the suffix; ``dpi``: dots per
    inch of a PNG). The same figure gives the same bytes (no dates or versions in the file; SVG
    text stays text). A figure made through pyplot is closed afterwards. Returns the path."""
    import sys

    import matplotlib

    from cprsim.io import atomic_write_bytes

    p = Path(path)
    fmt = figure_format(p)
    buf = io.BytesIO()
    # metadata without dates or versions: same data, same bytes
    meta = (
        {"Creator": None, "Producer": None, "CreationDate": None}
        if fmt == "pdf"
        else ({"Date": None, "Creator": None} if fmt == "svg" else {"Software": None})
    )
    # SVG: text stays text (editable, searchable), ids from a fixed salt (same bytes each run)
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "cprsim"}):
        fig.savefig(buf, format=fmt, dpi=dpi, metadata=meta)
    plt = sys.modules.get("matplotlib.pyplot")
    if (
        plt is not None
    ):  # a figure some caller made with pyplot: release it (ours are not registered there)
        plt.close(fig)
    return atomic_write_bytes(p, buf.getvalue())


def new_figure(size: tuple[float, float] = (7.5, 4.5)) -> Any:
    """A ``matplotlib.figure.Figure`` with constrained layout, made without pyplot."""
    from matplotlib.figure import Figure

    return Figure(figsize=size, layout="constrained")


def new_axes(ax: Any = None, size: tuple[float, float] = (7.5, 4.5)) -> tuple[Any, Any]:
    """``(figure, axes)``: the given axes and their figure, else a new figure (``size`` in inches)."""
    if ax is None:
        fig = new_figure(size)
        return fig, fig.add_subplot()
    return ax.figure, ax


def wrap_title(text: str, ax: Any, fontsize: float | None = None) -> str:
    """``text`` broken into lines that fit the width of ``ax``'s figure: first before each
    parenthesis, then at spaces; an explicit line break is kept."""
    import textwrap

    import matplotlib
    from matplotlib.font_manager import FontProperties

    size = (
        fontsize
        if fontsize is not None
        else FontProperties(size=matplotlib.rcParams["axes.titlesize"]).get_size_in_points()
    )
    fig = ax.figure
    width_in = fig.get_figwidth() * min(1.0, ax.get_position().width + 0.1)
    chars = max(20, int(width_in * 72 / (0.56 * size)))  # an average glyph is ~0.56 em wide
    lines: list[str] = []
    for line in text.split("\n"):
        if len(line) <= chars:
            lines.append(line)
            continue
        i = line.find(" (")
        for part in [line[:i], line[i + 1 :]] if i > 0 else [line]:
            lines += textwrap.wrap(part, chars, break_long_words=False, break_on_hyphens=False) or [
                part
            ]
    return "\n".join(lines)


def set_title(ax: Any, text: str, **kwargs: Any) -> Any:
    """``ax.set_title`` with the text wrapped to the figure's width (:func:`wrap_title`)."""
    return ax.set_title(wrap_title(text, ax, kwargs.get("fontsize")), **kwargs)


def artist_kwargs(defaults: dict[str, Any], kwargs: dict[str, Any], cls: Any) -> dict[str, Any]:
    """The keyword arguments of a main artist: ``defaults`` overridden by the caller's ``kwargs``
    (aliases such as ``ms``/``c``/``lw`` normalized to the property names of ``cls``)."""
    from matplotlib.cbook import normalize_kwargs

    return {**normalize_kwargs(defaults, cls), **normalize_kwargs(kwargs, cls)}
