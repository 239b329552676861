"""One replication's events as spans on tracks: the job's phases and each failed node's downtime.

``spans(events, n_trainers)`` is the one reading of an event log into intervals; it feeds both the
Chrome/Perfetto trace (``chrome_trace``: open in ui.perfetto.dev or chrome://tracing) and the
Gantt chart of ``cprsim plot timeline``. Track ``job`` holds compute, save, reschedule and load
phases (``re-executed`` marks the compute that redoes work lost to a rollback, ``(aborted)`` /
``(interrupted)`` a phase cut by a failure); track ``trainer i`` / ``embedding i`` shows a node
down from its failure until it is back (rescheduled; with a node lifecycle, detected, given a
machine and swapped in: the ``back`` event); track ``job-level`` shows each job-level
interruption, from the failure until the job restarts. Instants (rollback, pls) carry their value.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

from cprsim.sim.records import Event

_PHASES = {
    "save_start": ("save", "save_end", "save_abort"),
    "resched_start": ("reschedule", "resched_end"),
    "load_start": ("load", "load_end"),
}


#: the track of job-level interruptions (``fail`` events of node -1)
JOB_LEVEL = "job-level"


class Span(NamedTuple):
    """A stretch of a track (``job``, ``job-level``, ``trainer i`` or ``embedding j``): its name,
    start and end (wall s)."""

    track: str
    name: str
    start_s: float
    end_s: float


class Instant(NamedTuple):
    """A moment on a track, with its value (a rollback's lost progress in s, a shard's PLS)."""

    track: str
    name: str
    time_s: float
    value: float


def node_label(node: int, n_trainers: int) -> str:
    """The track of node ``node``: ``trainer i``, ``embedding j`` (its shard index), or
    ``job-level`` for node -1 (a job-level interruption concerns no node)."""
    if node < 0:
        return JOB_LEVEL
    return f"trainer {node}" if node < n_trainers else f"embedding {node - n_trainers}"


def track_order(track: str) -> tuple[int, int]:
    """A sort key of tracks: ``job``, ``job-level``, the trainers, the embedding servers (each by
    index)."""
    if track == "job":
        return (0, 0)
    if track == JOB_LEVEL:
        return (1, 0)
    kind, idx = track.split()
    return (2 if kind == "trainer" else 3, int(idx))


def spans(events: Sequence[Event], n_trainers: int) -> tuple[list[Span], list[Instant]]:
    """Read an event log into spans (the job's phases, compute re-executing lost work, failed nodes'
    downtime, job-level interruptions) and instants (rollbacks, PLS).

    A failure's down span ends at the failure's time plus its value; a node whose return was not
    known at its failure (a node lifecycle: value ``inf``) is down until the time its ``back``
    event gives, or until the end of the log if it was not back by then."""
    out: list[Span] = []
    marks: list[Instant] = []
    open_: dict[str, float] = {}
    waiting: dict[int, int] = {}  # node -> the index in `out` of its down span awaiting `back`
    ends = {e: k for k, v in _PHASES.items() for e in v[1:]}
    cursor = 0.0  # start of the current compute stretch
    redo = 0.0  # seconds of compute still re-executing lost work

    def compute(start: float, end: float) -> None:
        nonlocal redo
        if end <= start:
            return
        r = min(redo, end - start)
        if r > 0:
            out.append(Span("job", "re-executed", start, start + r))
            redo -= r
        if start + r < end:
            out.append(Span("job", "compute", start + r, end))

    for ev in events:
        if ev.kind in _PHASES:
            compute(cursor, ev.time_s)
            open_[ev.kind] = ev.time_s
        elif ev.kind in ends and ends[ev.kind] in open_:
            start = open_.pop(ends[ev.kind])
            label = _PHASES[ends[ev.kind]][0] + (" (aborted)" if ev.kind == "save_abort" else "")
            out.append(Span("job", label, start, ev.time_s))
            cursor = ev.time_s
        elif ev.kind == "fail":
            end = ev.time_s + ev.value
            if math.isinf(end):  # back when a `back` event says
                waiting[ev.node] = len(out)
            out.append(Span(node_label(ev.node, n_trainers), "down", ev.time_s, end))
            for k in list(open_):  # an open phase ends at the failure
                out.append(Span("job", _PHASES[k][0] + " (interrupted)", open_.pop(k), ev.time_s))
                cursor = ev.time_s
            compute(cursor, ev.time_s)
            cursor = max(cursor, ev.time_s)
        elif ev.kind in ("rollback", "pls"):
            marks.append(Instant("job", ev.kind, ev.time_s, ev.value))
            if ev.kind == "rollback":
                redo += ev.value
        elif ev.kind == "back" and ev.node in waiting:
            i = waiting.pop(ev.node)
            out[i] = out[i]._replace(end_s=ev.value)
        elif ev.kind == "done":
            compute(cursor, ev.time_s)
    last = max((ev.time_s for ev in events), default=0.0)
    for i in waiting.values():  # not back by the end of the log
        out[i] = out[i]._replace(end_s=max(out[i].start_s, last))
    return out, marks


def chrome_trace(events: Sequence[Event], n_trainers: int, name: str = "cprsim") -> dict[str, Any]:
    """The event log as a Chrome/Perfetto trace (JSON-ready; times in microseconds): a thread per
    track, the instants on the job's."""
    us = 1e6
    out: list[dict[str, Any]] = [
        {"ph": "M", "pid": 1, "name": "process_name", "args": {"name": name}},
        {"ph": "M", "pid": 1, "tid": 0, "name": "thread_name", "args": {"name": "job"}},
    ]
    sp, marks = spans(events, n_trainers)
    # a thread per track: node n's is 1 + n; job-level interruptions (no node) take the one after
    # the last node's
    tids: dict[str, int] = {"job": 0}
    for s in sp:
        if s.track not in tids and s.track != JOB_LEVEL:
            kind, idx = s.track.split()
            tids[s.track] = 1 + int(idx) + (n_trainers if kind == "embedding" else 0)
    tids[JOB_LEVEL] = 1 + max(tids.values())
    named = {"job"}
    for s in sp:
        if s.track not in named:
            named.add(s.track)
            out.append(
                {
                    "ph": "M",
                    "pid": 1,
                    "tid": tids[s.track],
                    "name": "thread_name",
                    "args": {"name": s.track},
                }
            )
        out.append(
            {
                "ph": "X",
                "pid": 1,
                "tid": tids[s.track],
                "name": s.name,
                "ts": s.start_s * us,
                "dur": (s.end_s - s.start_s) * us,
            }
        )
    for m in marks:
        out.append(
            {
                "ph": "i",
                "pid": 1,
                "tid": 0,
                "s": "t",
                "name": m.name,
                "ts": m.time_s * us,
                "args": {"value": m.value},
            }
        )
    return {"traceEvents": out, "displayTimeUnit": "ms"}
