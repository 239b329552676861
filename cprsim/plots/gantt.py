"""A Gantt chart of one replication: the job's phases, its job-level interruptions and each failed
node's downtime."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from cprsim.errors import InputError
from cprsim.plots import new_axes
from cprsim.plots.style import PHASE_COLOURS
from cprsim.sim.records import Event
from cprsim.timeline import spans, track_order

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure

HOUR = 3600.0


def read_events(path: str | Path) -> list[Event]:
    """``events.csv`` of ``cprsim simulate --out`` (columns time_s, kind, node, value)."""
    import csv

    from cprsim.io import decode_errors, open_input_text, short

    p = Path(path)
    src = short(p)
    out = []
    with open_input_text(p, "events file") as f, decode_errors(p):
        reader = csv.reader(f)
        if next(reader, None) != list(Event._fields):
            raise InputError(
                f"{src}: line 1: expected the columns {','.join(Event._fields)} (the events.csv "
                "of a simulation's run folder)"
            )
        for r in reader:
            try:
                out.append(Event(float(r[0]), r[1], int(r[2]), float(r[3])))
            except (ValueError, IndexError, OverflowError):
                raise InputError(
                    f"{src}: line {reader.line_num}: expected time_s,kind,node,value"
                ) from None
    return out


def plot_timeline(
    events: Any,
    n_trainers: int | None = None,
    title: str = "",
    ax: Any = None,
    *,
    replication: int | None = None,
    **kwargs: Any,
) -> Figure:
    """A Gantt chart of one replication against wall-clock time (hours): the job's phases
    (compute, re-executed work, saves, rescheduling, loads) on one track, job-level interruptions
    on another, each failed node's downtime on its own, lost updates (PLS) marked.

    ``events``: a ``cprsim.Runs`` (then ``replication``, default its first, is re-run with event
    recording, and ``n_trainers`` and the title come from its scenario) or the events of one
    replication (``Event`` records: ``cprsim.Runs.timeline(i)``, ``events.csv``) with
    ``n_trainers``, the scenario's trainer count; ``ax``: axes to draw into (default: a new
    figure); ``kwargs``: passed to the phase bars (``Axes.broken_barh``). Returns the Figure."""
    from matplotlib.collections import PolyCollection

    from cprsim.plots import artist_kwargs, set_title

    if hasattr(events, "timeline") and hasattr(events, "scenario"):  # a cprsim.Runs
        runs = events
        i = (
            runs.results[0].replication
            if replication is None and runs.results
            else (replication or 0)
        )
        events = runs.timeline(i)
        s = runs.scenario
        n_trainers = s.cluster.trainers if n_trainers is None else n_trainers
        title = (
            title
            or f"{s.name}: {s.strategy.name}, τ = {s.checkpoint.interval_h:g} h, replication {i}"
        )
    elif replication is not None:
        raise TypeError(
            "replication= applies to a cprsim.Runs; events are one replication's already"
        )
    if n_trainers is None:
        raise TypeError(
            "plot_timeline needs n_trainers (the scenario's cluster.trainers) with a list of events"
        )
    sp, marks = spans(events, n_trainers)
    tracks = sorted({"job"} | {s.track for s in sp}, key=track_order)
    fig, ax = new_axes(ax, (12, max(2.6, 1.4 + 0.3 * len(tracks))))
    row = {t: i for i, t in enumerate(reversed(tracks))}
    seen: set[str] = set()
    for s in sp:
        c = PHASE_COLOURS.get(s.name, "#999999")
        ax.broken_barh(
            [(s.start_s / HOUR, (s.end_s - s.start_s) / HOUR)],
            (row[s.track] - 0.4, 0.8),
            **artist_kwargs(
                {"facecolor": c, "label": None if s.name in seen else s.name},
                kwargs,
                PolyCollection,
            ),
        )
        seen.add(s.name)
    for m in marks:
        if m.name == "pls" and m.value > 0:
            ax.plot(
                [m.time_s / HOUR],
                [row["job"] + 0.5],
                "v",
                color="black",
                ms=5,
                label=None if "lost updates (PLS)" in seen else "lost updates (PLS)",
            )
            seen.add("lost updates (PLS)")
    ax.set_yticks(range(len(tracks)), list(reversed(tracks)), fontsize=7)
    ax.set_xlabel("wall-clock time (hours)")
    ax.set_ylabel("track")
    set_title(ax, title or "one replication: job phases and failed nodes")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    ax.grid(axis="x", alpha=0.3)
    return fig
