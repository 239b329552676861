"""A Gantt chart of one replication: the job's phases and each failed node's downtime."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from cprsim.errors import InputError
from cprsim.plots import new_axes
from cprsim.plots.style import PHASE_COLOURS
from cprsim.sim.records import Event
from cprsim.timeline import spans

HOUR = 3600.0


def read_events(path: str | Path) -> list[Event]:
    """``events.csv`` of ``cprsim simulate --out`` (columns time_s, kind, node, value)."""
    import csv

    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: no such file")
    with p.open(newline="") as f:
        rows = list(csv.reader(f))
    if not rows or rows[0] != list(Event._fields):
        raise InputError(f"{p}: expected the columns {','.join(Event._fields)} (events.csv of cprsim simulate --out)")
    out = []
    for line, r in enumerate(rows[1:], start=2):
        try:
            out.append(Event(float(r[0]), r[1], int(r[2]), float(r[3])))
        except (ValueError, IndexError):
            raise InputError(f"{p}:{line}: expected time_s,kind,node,value") from None
    return out


def plot_timeline(events: Sequence[Event], n_trainers: int, title: str = "", ax: Any = None):  # noqa: ANN201
    sp, marks = spans(events, n_trainers)
    tracks = ["job"] + sorted({s.track for s in sp if s.track != "job"},
                              key=lambda t: (t.split()[0] != "trainer", int(t.split()[1])))
    fig, ax = new_axes(ax, (12, max(2.6, 1.4 + 0.3 * len(tracks))))
    row = {t: i for i, t in enumerate(reversed(tracks))}
    seen: set[str] = set()
    for s in sp:
        c = PHASE_COLOURS.get(s.name, "#999999")
        ax.broken_barh([(s.start_s / HOUR, (s.end_s - s.start_s) / HOUR)], (row[s.track] - 0.4, 0.8),
                       facecolors=c, label=None if s.name in seen else s.name)
        seen.add(s.name)
    for m in marks:
        if m.name == "pls" and m.value > 0:
            ax.plot([m.time_s / HOUR], [row["job"] + 0.5], "v", color="black", ms=5,
                    label=None if "lost updates (PLS)" in seen else "lost updates (PLS)")
            seen.add("lost updates (PLS)")
    ax.set_yticks(range(len(tracks)), list(reversed(tracks)), fontsize=7)
    ax.set_xlabel("wall-clock time (hours)")
    ax.set_ylabel("track")
    ax.set_title(title or "one replication: job phases and failed nodes")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return fig
