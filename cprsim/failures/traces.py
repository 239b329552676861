"""Failure traces: one schema, readers for the public formats, and the samples fitting needs.

**Schema** (``traces/README.md``): a CSV with the header ``node,node_type,event,time_h,cause``.
``event`` is ``start`` or ``end`` (the node's observation window), ``fail`` or ``repair``; times
are hours from the trace's origin, sorted per node; ``cause`` is free text (may be empty). A node
without ``start``/``end`` rows is observed from 0 to the last time in the file.

**Samples.** A node is *up* from its window start (or its last repair) to its next failure:
those up-times are the observed lifetimes; the last up-time of every node is right-censored at
its window end (nodes that never failed contribute their whole window, censored). A failure
that strikes while the node is already down (an overlapping fault) starts no new lifetime. The
repair time of a failure runs to the next repair of the node; an unrepaired failure is censored
at the window end. ``Trace.failure_intervals`` gives the failure-to-failure times instead: from
the window start or a failure's start to the node's next failure start (the last one censored).

Readers (``read_trace(path, format, ...)``): ``infinitehbd``, ``lanl``, ``titan``, ``philly``,
``csv``. Each returns a ``Trace`` plus the raw counts its source reports, for checking. Where a
log says how many nodes there are (InfiniteHBD: ``--node-count``; LANL: the ``nodes`` column of
each system) the nodes that never failed enter too, censored over their whole window.

**Filters** (``filters={column: value}``): any column a format exposes (``COLUMNS``; names are
case-insensitive, a parenthesised suffix and punctuation ignored: ``node_prod`` = ``node prod``,
``prob_started`` = ``Prob Started (mm/dd/yy hh:mm)``). A value matches exactly (case-insensitive),
except the named substring filters (``cause``; InfiniteHBD ``level``/``class``/``desc``; the
schema's ``node_type``) and Philly's ``min_gpus`` (at least). A filter on a node's column keeps
the matching nodes; a filter on a failure's column (its cause, its times) keeps the matching
failures and turns the others into competing risks (``OTHER``; InfiniteHBD ignores them).
"""

from __future__ import annotations

import csv
import math
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from cprsim.errors import InputError, ParameterError
from cprsim.io import (
    check_input_file,
    decode_errors,
    open_input_text,
    read_input_json,
    short,
)

EVENTS = ("start", "fail", "repair", "end")
HEADER = ["node", "node_type", "event", "time_h", "cause"]


@dataclass
class NodeHistory:
    """One node of a failure log: its type, its observation window (``start``, ``end`` in hours;
    None: the log's) and its events ``(time_h, fail|repair|other, cause)``."""

    node: str
    node_type: str
    start: float | None = None
    end: float | None = None
    events: list[tuple[float, str, str]] = field(
        default_factory=list
    )  # (time_h, fail|repair|other, cause)


#: a failure of a cause the filters exclude: the node goes down, but for the kept causes the
#: up-time that it ends is right-censored (competing risks); its repair brings the node back up
OTHER = "other"

#: what ``cprsim fit`` takes as a lifetime (``Trace.intervals``)
INTERARRIVALS = ("repair-to-failure", "failure-to-failure")


@dataclass
class Trace:
    """A failure log in one schema (:func:`read_trace`): ``nodes`` (each node's observation
    window and its fail/repair events, hours), ``source``, ``counts`` (what the source reports).
    ``lifetimes()`` / ``intervals(...)``: the durations (hours) and observed flags :func:`fit`
    fits; ``repairs()``: repair times; ``horizon()``: the last time in the log (hours);
    ``n_failures()``."""

    nodes: dict[str, NodeHistory]
    source: str
    counts: dict[str, Any] = field(default_factory=dict)

    # -- derived samples ----------------------------------------------------------------------
    def horizon(self) -> float:
        """The last time in the log (hours): the latest event or window end (0 for an empty log)."""
        ts = [t for h in self.nodes.values() for t, _, _ in h.events]
        ts += [h.end for h in self.nodes.values() if h.end is not None]
        return max(ts, default=0.0)

    def lifetimes(self, node_type: str | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(durations in hours, observed flag): up-times ending in a failure, last one censored."""
        dur, obs = [], []
        hz = self.horizon()
        for h in self.nodes.values():
            if node_type and h.node_type != node_type:
                continue
            start = 0.0 if h.start is None else h.start
            end = hz if h.end is None else h.end
            up_since: float | None = start
            for t, ev, _ in h.events:
                if ev in ("fail", OTHER):
                    if up_since is not None:
                        if t > up_since:
                            dur.append(t - up_since)
                            obs.append(ev == "fail")
                        up_since = None
                elif ev == "repair" and up_since is None:
                    up_since = t
            if up_since is not None and end > up_since:
                dur.append(end - up_since)
                obs.append(False)
        return np.asarray(dur, float), np.asarray(obs, bool)

    def repairs(self, node_type: str | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(repair durations in hours, observed flag): failure to the node's next repair."""
        dur, obs = [], []
        hz = self.horizon()
        for h in self.nodes.values():
            if node_type and h.node_type != node_type:
                continue
            end = hz if h.end is None else h.end
            down_since: float | None = None
            for t, ev, _ in h.events:
                if ev == OTHER:
                    down_since = None  # repairs of excluded causes are not this cause's
                elif ev == "fail" and down_since is None:
                    down_since = t
                elif ev == "repair" and down_since is not None:
                    if t > down_since:
                        dur.append(t - down_since)
                        obs.append(True)
                    down_since = None
            if down_since is not None and end > down_since:
                dur.append(end - down_since)
                obs.append(False)
        return np.asarray(dur, float), np.asarray(obs, bool)

    def failure_intervals(self, node_type: str | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(failure-to-failure times in hours, observed flag): between consecutive failure starts.

        The clock starts at the node's window start (a renewal, as for the up-times) and restarts
        at every failure start, whether the node was up or already down (every recorded failure
        counts; failures at the same instant count once). An interval that ends in a failure of
        an excluded cause (``OTHER``) is censored there; the last one is censored at the window
        end, so a node that never failed contributes its whole window, censored.
        """
        dur, obs = [], []
        hz = self.horizon()
        for h in self.nodes.values():
            if node_type and h.node_type != node_type:
                continue
            last = 0.0 if h.start is None else h.start
            end = hz if h.end is None else h.end
            for t, ev, _ in h.events:
                if ev in ("fail", OTHER):
                    if t > last:
                        dur.append(t - last)
                        obs.append(ev == "fail")
                    last = max(last, t)
            if end > last:
                dur.append(end - last)
                obs.append(False)
        return np.asarray(dur, float), np.asarray(obs, bool)

    def intervals(
        self, interarrival: str = "repair-to-failure", node_type: str | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The lifetimes ``cprsim fit`` fits: ``repair-to-failure`` (up-times) or ``failure-to-failure``."""
        if interarrival == "repair-to-failure":
            return self.lifetimes(node_type)
        if interarrival == "failure-to-failure":
            return self.failure_intervals(node_type)
        raise ParameterError(
            "interarrival",
            f"must be one of {', '.join(INTERARRIVALS)}, got {short(interarrival, 20)!r}",
        )

    def node_types(self) -> list[str]:
        """The node types in the log, sorted."""
        return sorted({h.node_type for h in self.nodes.values()})

    def n_failures(self) -> int:
        """Failures of the causes kept (``fail`` events; not those of excluded causes)."""
        return sum(1 for h in self.nodes.values() for _, ev, _ in h.events if ev == "fail")

    # -- writing --------------------------------------------------------------------------------
    def to_rows(self) -> list[list[Any]]:
        """The log as rows of cprsim's CSV schema (node, node_type, event, time_h, cause), node by
        node in name order: window start, events (a failure of an excluded cause as ``fail``),
        window end."""
        rows: list[list[Any]] = []
        for name in sorted(self.nodes):
            h = self.nodes[name]
            if h.start is not None:
                rows.append([name, h.node_type, "start", h.start, ""])
            for t, ev, cause in h.events:
                rows.append([name, h.node_type, "fail" if ev == OTHER else ev, t, cause])
            if h.end is not None:
                rows.append([name, h.node_type, "end", h.end, ""])
        return rows


# -- the schema's reader ---------------------------------------------------------------------------
def read_csv(path: Path, filters: dict[str, str]) -> Trace:
    """The schema. Filters: ``node`` (exact), ``node_type`` and ``cause`` (substrings; ``cause``
    selects failures, the others are competing risks)."""
    cause_flt = {k: v for k, v in filters.items() if k == "cause"}
    node_flt = {k: v for k, v in filters.items() if k != "cause"}
    nodes: dict[str, NodeHistory] = {}
    last: dict[str, tuple[float, int]] = {}  # node -> the time and line of its previous event
    with _open(path) as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None:
            raise InputError(f"{short(path)}: empty file (expected the header {','.join(HEADER)})")
        if [h.strip() for h in header] != HEADER:
            raise InputError(
                f"{short(path)}: line 1: expected the columns {','.join(HEADER)} (the header "
                f"differs: {len(header)} field{'' if len(header) == 1 else 's'})"
            )
        n = 0
        for line, row in enumerate(reader, start=2):
            if not row or not "".join(row).strip():
                continue
            if len(row) != len(HEADER):
                raise InputError(
                    f"{short(path)}: line {line}: expected {len(HEADER)} columns, got {len(row)}"
                )
            node, ntype, ev, ts, cause = (x.strip() for x in row)
            if not node:
                raise InputError(f"{short(path)}: line {line}: empty node id")
            if ev not in EVENTS:
                raise InputError(
                    f"{short(path)}: line {line}: column event: expected one of {', '.join(EVENTS)}"
                )
            t = _time(ts, path, line)
            h = nodes.setdefault(node, NodeHistory(node, ntype or "node"))
            if ntype and ntype != h.node_type:
                raise InputError(
                    f"{short(path)}: line {line}: column node_type: differs from the type of this "
                    f"node's earlier events (line {last[node][1]})"
                )
            if node in last and t < last[node][0]:
                raise InputError(
                    f"{short(path)}: line {line}: column time_h: before this node's previous event "
                    f"(line {last[node][1]}): events must be sorted per node"
                )
            last[node] = (t, line)
            if ev == "start":
                if h.events or h.start is not None:
                    raise InputError(
                        f"{short(path)}: line {line}: `start` must be the node's first event"
                    )
                h.start = t
            elif ev == "end":
                h.end = t
            else:
                if h.end is not None:
                    raise InputError(f"{short(path)}: line {line}: event after the node's `end`")
                if ev == "repair" and not any(e in ("fail", OTHER) for _, e, _ in h.events):
                    raise InputError(
                        f"{short(path)}: line {line}: repair before any failure of this node"
                    )
                if ev == "fail" and not _match(cause_flt, {"cause": cause}, substring=("cause",)):
                    ev = OTHER  # competing risk: ends this cause's lifetime, censored
                h.events.append((t, ev, cause))
            n += 1
    if n == 0:
        raise InputError(f"{short(path)}: no events")
    nodes = {
        k: h
        for k, h in nodes.items()
        if _match(node_flt, {"node": h.node, "node_type": h.node_type}, substring=("node_type",))
    }
    return Trace(nodes, str(path), {"rows": n, "nodes": len(nodes)})


def write_csv(trace: Trace) -> str:
    """The trace as CSV text in cprsim's schema (:data:`HEADER`; times as exact floats)."""
    import io

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(HEADER)
    for r in trace.to_rows():
        w.writerow([repr(x) if isinstance(x, float) else x for x in r])
    return buf.getvalue()


# -- public formats -----------------------------------------------------------------------------------
def read_infinitehbd(path: Path, filters: dict[str, str], node_count: int | None) -> Trace:
    """InfiniteHBD fault_trace.json: fault_start/fault_end events in days; 348-day window.

    Only faulty nodes appear; ``node_count`` (default 400, from the repository's README) adds the
    never-faulty ones, censored over the whole window. Filters: ``level``, ``class``, ``desc``
    (case-insensitive substrings; faults that do not match are ignored), ``node`` (a node id: the
    never-faulty nodes, whose ids the file does not give, are then left out).
    """
    raw = _json(path)
    if not isinstance(raw, list):
        raise InputError(f"{short(path)}: expected a JSON list of events")
    fault_flt = {k: v for k, v in filters.items() if k != "node"}
    node_flt = {k: v for k, v in filters.items() if k == "node"}
    window_h = 348.0 * 24
    nodes: dict[str, NodeHistory] = {}
    open_faults: dict[str, dict[str, float]] = {}
    starts = ends = 0
    levels: dict[str, int] = {}
    prev = -math.inf
    for i, e in enumerate(raw):
        node, t, kind, level, klass, desc = _hbd_event(path, i, e)
        if t < prev:
            raise InputError(f"{short(path)}: event {i}: events are not sorted by time")
        prev = t
        h = nodes.setdefault(node, NodeHistory(node, "node", 0.0, window_h))
        keep = _match(
            fault_flt,
            {"level": level, "class": klass, "desc": desc},
            substring=("level", "class", "desc"),
        )
        cause = f"{level}/{klass}/{desc}"
        if kind == "fault_start":
            starts += 1
            levels[level.split()[0]] = levels.get(level.split()[0], 0) + 1
            if keep:
                of = open_faults.setdefault(node, {})
                if not of:  # the node goes down
                    h.events.append((t, "fail", cause))
                of[desc] = of.get(desc, 0) + 1
        elif kind == "fault_end":
            ends += 1
            of = open_faults.get(node, {})
            if desc in of:
                of[desc] -= 1
                if of[desc] == 0:
                    del of[desc]
                if not of:  # every open fault of the node has ended
                    h.events.append((t, "repair", cause))
        else:
            raise InputError(
                f"{short(path)}: event {i}: event_type must be fault_start or fault_end"
            )
    faulty = len(nodes)
    total = 400 if node_count is None else node_count
    if total < faulty:
        raise ParameterError(
            "node_count", f"{total} is less than the {faulty} nodes in the trace", short(path)
        )
    nodes = {k: h for k, h in nodes.items() if _match(node_flt, {"node": k})}
    if not node_flt:
        for k in range(total - faulty):
            name = f"never-faulty-{k:04d}"
            nodes[name] = NodeHistory(name, "node", 0.0, window_h)
    return Trace(
        nodes,
        str(path),
        {
            "events": starts + ends,
            "fault_start": starts,
            "fault_end": ends,
            "faulty_nodes": faulty,
            "nodes": len(nodes),
            "node_count": total,
            "never_failed_nodes": 0 if node_flt else total - faulty,
            "levels": levels,
        },
    )


def _hbd_event(path: Path, i: int, e: Any) -> tuple[str, float, Any, str, str, str]:
    """Event ``i`` of an InfiniteHBD trace checked: its node, time in hours, type and fault's
    Level, Class and Desc."""
    try:
        node, t, kind, ft = (
            e["node_id"],
            float(e["event_time"]) * 24.0,
            e["event_type"],
            e["fault_type"],
        )
        level, klass, desc = ft["Level"], ft["Class"], ft["Desc"]
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError):
        raise InputError(
            f"{short(path)}: event {i}: expected node_id, event_time, event_type, fault_type"
        ) from None
    if node is None or isinstance(node, (bool, dict, list)) or not str(node).strip():
        raise InputError(f"{short(path)}: event {i}: node_id must be a name or a number")
    if not all(isinstance(x, str) for x in (level, klass, desc)) or not level.split():
        raise InputError(f"{short(path)}: event {i}: fault_type Level, Class and Desc must be text")
    if not math.isfinite(t) or t < 0:
        raise InputError(f"{short(path)}: event {i}: event_time must be a finite number >= 0")
    return str(node), t, kind, level, klass, desc


LANL_CAUSES = ("Facilities", "Hardware", "Human Error", "Network", "Undetermined", "Software")
#: the columns that describe a node (LA-UR-05-7318 record layout); ``nodes`` is the system's node count
LANL_NODE_COLUMNS = (
    "System",
    "machine type",
    "nodes",
    "procstot",
    "procsinnode",
    "nodenum",
    "nodenumz",
    "node install",
    "node prod",
    "node decom",
    "fru type",
    "mem",
    "cputype",
    "memtype",
    "num intercon",
    "purpose",
)
#: the columns that describe one failure record
LANL_RECORD_COLUMNS = (
    "Prob Started (mm/dd/yy hh:mm)",
    "Prob Fixed (mm/dd/yy hh:mm)",
    "Down Time",
    *LANL_CAUSES,
    "Same Event",
)
_LANL_STARTED, _LANL_FIXED = LANL_RECORD_COLUMNS[:2]
#: a node's own identity: the nodes that never failed do not share it with the logged ones
_LANL_IDENTITY = ("node", "nodenum", "nodenumz")


def _lanl_month(
    text: str, path: Path, line: int, column: str, *, end: bool = False
) -> datetime | None:
    """LANL install/production/decommission dates: 'Jan-97', '5-Jun' (2005), or 'current'.

    Month precision: a production month counts from its first day; with ``end`` (a decommission
    month, when the node was still in service) up to its last, i.e. the first day of the next.
    """
    t = text.strip()
    if t.lower() in ("current", "", "before tracking"):  # open-ended: the data's own bounds
        return None
    a, _, b = t.partition("-")
    try:
        if a.isdigit():  # '5-Jun' = June 2005
            d = datetime.strptime(f"{2000 + int(a)}-{b}", "%Y-%b")
        else:
            yy = int(b)
            d = datetime.strptime(f"{(1900 if yy >= 50 else 2000) + yy}-{a}", "%Y-%b")
    except ValueError:
        raise InputError(
            f"{short(path)}: line {line}: column {column}: expected a month like Jan-97 or 5-Jun"
        ) from None
    if end:
        d = datetime(d.year + d.month // 12, d.month % 12 + 1, 1)
    return d


@dataclass
class _LanlRecord:
    line: int
    system: str
    node: str
    t0: datetime
    t1: datetime
    cause: str
    detail: str
    prod: datetime | None
    decom: datetime | None  # the end of the decommission month
    cols: dict[str, str]  # every column by its filter key, with `node` and `cause`


def read_lanl(path: Path, filters: dict[str, str]) -> Trace:
    """LANL LA-UR-05-7318 (SimEDC trace.csv): one record per node interruption.

    Node = (System, nodenum); its window = its production month to its decommission month
    ('current', or a decommission after the log ends: the end of the log, i.e. its last repair;
    'before tracking': the start of the log, its first failure or production date).

    **Nodes that never failed.** The log lists only failures, but every record carries its
    system's node count (column ``nodes``): a system with ``nodes`` = 512 and 400 different
    failing nodes had 112 nodes that never failed. They enter as whole windows, censored: the
    *system's* window, from the earliest production month of its logged nodes to the latest
    decommission month (the end of the log if any is 'current'). They take the system-wide
    columns (those equal on every record of the system); a column that varies within the system
    is unknown for them, so a filter on it leaves them out (``counts['never_failed_unknown']``).

    Filters: any column (``COLUMNS['lanl']``); ``cause`` (Facilities, Hardware, Human Error,
    Network, Undetermined, Software) is a case-insensitive substring of the record's category.
    Node columns select nodes; record columns select failures, the others are competing risks.

    Counts: ``records`` and ``systems``, the file's; ``selected_records``, the records of the
    selected nodes; ``kept_failures``, those of them the record filters keep (the others are
    competing risks); ``nodes``, ``failed_nodes``, ``never_failed_nodes`` and
    ``never_failed_unknown``, the selected nodes'; ``per_system``, the file's.
    """
    recs = _lanl_records(path, filters)
    node_keys = {column_key(c) for c in LANL_NODE_COLUMNS} | {"node"}
    node_flt = {k: v for k, v in filters.items() if k in node_keys}
    rec_flt = {k: v for k, v in filters.items() if k not in node_keys}
    clock = _LanlClock(
        min(min(r.t0 for r in recs), min((r.prod for r in recs if r.prod), default=recs[0].t0)),
        max(r.t1 for r in recs),
    )
    by_node: dict[str, list[_LanlRecord]] = {}
    by_system: dict[str, list[_LanlRecord]] = {}
    for r in recs:
        by_node.setdefault(r.node, []).append(r)
        by_system.setdefault(r.system, []).append(r)

    nodes, selected_records, kept = _lanl_failed_nodes(by_node, node_flt, rec_flt, clock)
    failed = len(nodes)
    never, unknown, no_count, per_system = _lanl_never_failed(
        path, by_system, node_keys, node_flt, clock, nodes
    )
    return Trace(
        nodes,
        str(path),
        {
            "records": len(recs),
            "selected_records": selected_records,
            "kept_failures": kept,
            "systems": len(by_system),
            "nodes": len(nodes),
            "failed_nodes": failed,
            "never_failed_nodes": never,
            "never_failed_unknown": unknown,
            "systems_without_node_count": no_count,
            "end_of_log": clock.end_of_log.isoformat(sep=" ", timespec="minutes"),
            "per_system": per_system,
        },
    )


def _lanl_records(path: Path, filters: dict[str, str]) -> list[_LanlRecord]:
    """The file's records, after checking its header and that every filter names a column."""
    recs: list[_LanlRecord] = []
    with _open(path) as f:
        reader = csv.DictReader(f)
        header = [h for h in (reader.fieldnames or [])]
        need = {
            "System",
            "nodenum",
            "node prod",
            "node decom",
            _LANL_STARTED,
            _LANL_FIXED,
            *LANL_CAUSES,
        }
        if not need <= set(header):
            raise InputError(
                f"{short(path)}: line 1: not a LANL failure file (missing {sorted(need - set(header))})"
            )
        keys = {column_key(h): h for h in header} | {"node": "node", "cause": "cause"}
        for k in filters:
            if k not in keys:
                raise ParameterError(
                    "filters",
                    f"no such column in this file (columns: {', '.join(sorted(set(keys) & set(COLUMNS['lanl'])))})",
                    short(path),
                    key=k,
                )
        for line, raw in enumerate(reader, start=2):
            recs.append(_lanl_record(path, line, raw))
    if not recs:
        raise InputError(f"{short(path)}: no records")
    return recs


def _lanl_record(path: Path, line: int, raw: dict[str | None, Any]) -> _LanlRecord:
    """One row of the file as a record, its times, System and months checked."""
    row = {k: (v if isinstance(v, str) else "").strip() for k, v in raw.items() if k is not None}
    try:
        t0 = datetime.strptime(row[_LANL_STARTED], "%m/%d/%Y %H:%M")
        t1 = datetime.strptime(row[_LANL_FIXED], "%m/%d/%Y %H:%M")
    except ValueError:
        raise InputError(
            f"{short(path)}: line {line}: Prob Started/Fixed must be like 6/21/2005 10:54"
        ) from None
    if t1 < t0:
        raise InputError(f"{short(path)}: line {line}: repair before failure")
    if not row["System"]:
        raise InputError(f"{short(path)}: line {line}: empty System")
    cause = next((c for c in LANL_CAUSES if row[c]), "Undetermined")
    node = f"{row['System']}/{row['nodenum']}"
    cols = {column_key(k): v for k, v in row.items()} | {"node": node, "cause": cause}
    prod = _lanl_month(row["node prod"], path, line, "node prod")
    decom = _lanl_month(row["node decom"], path, line, "node decom", end=True)
    if prod is not None and decom is not None and decom < prod:
        raise InputError(f"{short(path)}: line {line}: node decom is before node prod")
    return _LanlRecord(line, row["System"], node, t0, t1, cause, row[cause], prod, decom, cols)


@dataclass(frozen=True)
class _LanlClock:
    """The log's time axis: hours from its origin (its first failure or production date)."""

    origin: datetime
    end_of_log: datetime  # the last repair

    def hours(self, d: datetime) -> float:
        """Hours from the origin to ``d``."""
        return (d - self.origin).total_seconds() / 3600.0

    def window(self, rs: list[_LanlRecord]) -> tuple[float, float]:
        """From the earliest production to the latest decommission (or the end of the log)."""
        hours, end_of_log = self.hours, self.end_of_log
        prods = [r.prod for r in rs if r.prod is not None]
        decoms = [r.decom for r in rs if r.decom is not None]
        # a node without a production (decommission) date is in service from the start (to the end)
        start = 0.0 if len(prods) < len(rs) else hours(min(prods))
        end = (
            hours(end_of_log)
            if len(decoms) < len(rs)
            else min(hours(max(decoms)), hours(end_of_log))
        )
        return min(start, min(hours(r.t0) for r in rs)), max(end, max(hours(r.t1) for r in rs))


def _lanl_failed_nodes(
    by_node: dict[str, list[_LanlRecord]],
    node_flt: dict[str, str],
    rec_flt: dict[str, str],
    clock: _LanlClock,
) -> tuple[dict[str, NodeHistory], int, int]:
    """The logged nodes the node filters select, their records not kept by the record filters
    as competing risks; with the count of their records and of the failures kept."""
    nodes: dict[str, NodeHistory] = {}
    selected_records = kept = 0
    for name, rs in sorted(by_node.items()):
        first = rs[0]
        if not _match(node_flt, {k: first.cols.get(k, "") for k in node_flt}):
            continue
        h = NodeHistory(name, f"lanl-{first.system}", *clock.window(rs))
        selected_records += len(rs)
        for r in rs:
            ev = (
                "fail"
                if _match(rec_flt, {k: r.cols.get(k, "") for k in rec_flt}, substring=("cause",))
                else OTHER
            )
            kept += ev == "fail"
            h.events.append((clock.hours(r.t0), ev, f"{r.cause}: {r.detail}"))
            h.events.append((clock.hours(r.t1), "repair", ""))
        h.events.sort(
            key=lambda e: (e[0], e[1] == "repair")
        )  # repairs may overlap the next failure
        nodes[name] = h
    return nodes, selected_records, kept


def _lanl_never_failed(
    path: Path,
    by_system: dict[str, list[_LanlRecord]],
    node_keys: set[str],
    node_flt: dict[str, str],
    clock: _LanlClock,
    nodes: dict[str, NodeHistory],
) -> tuple[int, int, list[str], dict[str, dict[str, int | None]]]:
    """Adds to ``nodes`` each selected system's never-failed nodes (its ``nodes`` count less its
    logged nodes); returns how many, how many a filter on an unknown column left out, the
    selected systems without a node count, and each system's logged and counted nodes."""
    never = unknown = 0
    no_count: list[str] = []
    per_system: dict[str, dict[str, int | None]] = {}
    for sysid, rs in sorted(by_system.items(), key=lambda kv: (len(kv[0]), kv[0])):
        logged = len({r.node for r in rs})
        # the system-wide columns: equal on every record of the system (unknown otherwise)
        shared: dict[str, str | None] = {}
        for k in node_keys:
            vals = {r.cols.get(k, "") for r in rs}
            shared[k] = None if k in _LANL_IDENTITY or len(vals) != 1 else vals.pop()
        selected = _match(node_flt, {k: shared[k] for k in node_flt if shared[k] is not None})
        count = _lanl_node_count(path, rs, logged)
        if count is None:
            if selected:
                no_count.append(sysid)
            per_system[sysid] = {"in_log": logged, "nodes": None}
            continue
        per_system[sysid] = {"in_log": logged, "nodes": count}
        if count == logged:
            continue
        if not _match(node_flt, {k: shared[k] for k in node_flt}):
            if selected:  # only because a filtered column is unknown for them
                unknown += count - logged
            continue
        start, end = clock.window(rs)
        for i in range(count - logged):
            name = f"{sysid}/never-failed-{i:04d}"
            nodes[name] = NodeHistory(name, f"lanl-{sysid}", start, end)
        never += count - logged
    return never, unknown, no_count, per_system


def _lanl_node_count(path: Path, rs: list[_LanlRecord], logged: int) -> int | None:
    """A system's node count (column ``nodes``, the same on all its records and at least its
    ``logged`` failing nodes), or None when no record gives it."""
    counts_seen = sorted({r.cols.get("nodes", "") for r in rs} - {""})
    if len(counts_seen) > 1:
        given = [r for r in rs if r.cols.get("nodes", "")]
        line = next(r.line for r in given if r.cols["nodes"] != given[0].cols["nodes"])
        raise InputError(
            f"{short(path)}: line {line}: column nodes: differs from the earlier records of "
            f"the same System (line {given[0].line})"
        )
    if not counts_seen:
        return None
    try:
        count = int(counts_seen[0])
    except (ValueError, OverflowError):
        line = next(r.line for r in rs if r.cols.get("nodes") == counts_seen[0])
        raise InputError(
            f"{short(path)}: line {line}: column nodes: expected a whole number"
        ) from None
    if count < logged:
        raise InputError(
            f"{short(path)}: line {rs[0].line}: column nodes: fewer than the {logged} "
            "different nodes of this System that fail in the log"
        )
    return count


TITAN_COLUMNS = (
    "SN",
    "time",
    "nlife",
    "nloc",
    "last",
    "col",
    "row",
    "cage",
    "slot",
    "node",
    "max_loc_events",
    "time_max_loc",
    "dbe",
    "dbe_loc",
    "otb",
    "otb_loc",
    "out",
    "batch",
    "days",
    "years",
    "dead",
    "dead_otb",
    "dead_dbe",
)


def read_titan(path: Path, filters: dict[str, str]) -> Trace:
    """Titan GPU lifetimes (gc_summary_loc.csv): one lifetime per GPU, ``dead`` FALSE = censored.

    Every GPU of the log is a row, those that never died included (censored). Filters: any
    column (``batch=old``, ``cage=1``, ``node`` is the file's own column, the node in the slot),
    and ``location`` (``c11-2c1s4n1``, as in gc_full.csv: column-row, cage, slot, node) select
    GPUs; ``cause=dbe|otb`` keeps only deaths of that cause (the others become censored).

    Counts: ``rows``, the file's GPUs; ``gpus``, ``dead`` and ``censored``, those the GPU filters
    select (``dead``: the file's ``dead`` column); with ``cause``, ``failures``: the selected
    GPUs dead of that cause (the fit's failures; the other deaths are censored).
    """
    nodes: dict[str, NodeHistory] = {}
    dead = rows = failures = 0
    want = filters.get("cause", "").lower()
    if want not in ("", "dbe", "otb"):
        raise ParameterError(
            "filters", "Titan causes are dbe and otb", key=f"cause={filters['cause']}"
        )
    gpu_flt = {k: v for k, v in filters.items() if k != "cause"}
    with _open(path) as f:
        reader = csv.DictReader(f)
        header = list(reader.fieldnames or [])
        if not {"SN", "time", "dead", "dead_dbe", "dead_otb"} <= set(header):
            raise InputError(
                f"{short(path)}: line 1: expected Titan columns SN,time,...,dead,dead_otb,dead_dbe"
            )
        keys = {column_key(h) for h in header} | {"cause"}
        if {"col", "row", "cage", "slot", "node"} <= set(header):
            keys.add("location")
        for k in filters:
            if k not in keys:
                raise ParameterError(
                    "filters",
                    f"no such column in this file (columns: {', '.join(sorted(keys & set(COLUMNS['titan'])))})",
                    short(path),
                    key=k,
                )
        for line, raw in enumerate(reader, start=2):
            r = {
                k: (v if isinstance(v, str) else "").strip()
                for k, v in raw.items()
                if k is not None
            }
            t = _time(r["time"], path, line) / 3600.0
            is_dead = r["dead"].upper() == "TRUE"
            rows += 1
            if gpu_flt:
                cols = {column_key(k): v for k, v in r.items()}
                if "location" in keys:
                    cols["location"] = f"c{r['col']}-{r['row']}c{r['cage']}s{r['slot']}n{r['node']}"
                if not _match(gpu_flt, cols):
                    continue
            dead += is_dead
            if want:
                is_dead = is_dead and r.get(f"dead_{want}", "").upper() == "TRUE"
            failures += is_dead
            h = NodeHistory(r["SN"], "gpu", 0.0, t)
            if is_dead:
                h.events.append((t, "fail", "dbe" if r["dead_dbe"].upper() == "TRUE" else "otb"))
            nodes[r["SN"] + f"#{line}"] = h
    if not nodes:
        raise InputError(f"{short(path)}: no rows{' after the filters' if gpu_flt else ''}")
    counts: dict[str, Any] = {
        "rows": rows,
        "gpus": len(nodes),
        "dead": dead,
        "censored": len(nodes) - dead,
    }
    if want:
        counts["failures"] = failures
    return Trace(nodes, str(path), counts)


def read_philly(path: Path, filters: dict[str, str]) -> Trace:
    """Philly job attempts (jobs.json): a new attempt = an interruption; the last attempt is censored.

    Each job is a 'node' of type ``job``; an attempt's end followed by another attempt is a
    failure, the gap to the next attempt its repair. Every job of the log is here, those never
    interrupted included (censored). Filters: a job's ``id`` (or ``node``), ``num_gpus``,
    ``runtime``, ``submitted_time``; ``min_gpus=N`` keeps jobs of at least N GPUs.

    Counts: ``jobs``, the file's; ``selected_jobs``, ``multi_attempt_jobs`` and ``reattempts``,
    those of the jobs the filters keep.
    """
    raw = _json(path)
    if not isinstance(raw, list):
        raise InputError(f"{short(path)}: expected a JSON list of jobs")
    fmt = "%Y-%m-%d %H:%M:%S"
    try:
        min_gpus = int(filters.get("min_gpus", 0))
    except (ValueError, OverflowError):
        raise ParameterError(
            "filters", "expected a whole number", key=f"min_gpus={filters['min_gpus']}"
        ) from None
    job_flt = {k: v for k, v in filters.items() if k != "min_gpus"}
    parsed = []
    for i, j in enumerate(raw):
        try:
            att = [
                (datetime.strptime(a["start_time"], fmt), datetime.strptime(a["end_time"], fmt))
                for a in j["attempts"]
            ]
            gpus = int(j["num_gpus"])
            jid = str(j["id"])
        except (KeyError, TypeError, ValueError, OverflowError, AttributeError):
            raise InputError(
                f"{short(path)}: job {i}: expected id, num_gpus and attempts with start_time/end_time"
            ) from None
        if not att:
            raise InputError(f"{short(path)}: job {i}: no attempts")
        if gpus < 0:
            raise InputError(f"{short(path)}: job {i}: num_gpus must be >= 0")
        for a, (t0, t1) in enumerate(att):
            if t1 < t0:
                raise InputError(f"{short(path)}: job {i}: attempt {a} ends before it starts")
            if a and t0 < att[a - 1][0]:
                raise InputError(
                    f"{short(path)}: job {i}: attempt {a} starts before the attempt before it"
                )
        cols = {k: str(v) for k, v in j.items() if k != "attempts"} | {
            "node": jid,
            "id": jid,
            "num_gpus": str(gpus),
        }
        parsed.append((jid, gpus, att, _match(job_flt, {k: cols.get(k, "") for k in job_flt})))
    if not parsed:
        raise InputError(f"{short(path)}: no jobs")
    origin = min(a[0][0] for _, _, a, _ in parsed)
    hours = lambda d: (d - origin).total_seconds() / 3600.0
    nodes: dict[str, NodeHistory] = {}
    multi = reattempts = 0
    for jid, gpus, att, keep in parsed:
        if gpus < min_gpus or not keep:
            continue
        multi += len(att) > 1
        reattempts += len(att) - 1
        h = NodeHistory(jid, "job", hours(att[0][0]), hours(att[-1][1]))
        for (_s0, e0), (s1, _) in zip(att, att[1:]):
            h.events.append((hours(e0), "fail", "attempt ended"))
            h.events.append((max(hours(s1), hours(e0)), "repair", ""))
        nodes[jid] = h
    if not nodes:
        raise InputError(f"{short(path)}: no jobs after the filters")
    return Trace(
        nodes,
        str(path),
        {
            "jobs": len(raw),
            "selected_jobs": len(nodes),
            "multi_attempt_jobs": multi,
            "reattempts": reattempts,
        },
    )


READERS = ("infinitehbd", "lanl", "titan", "philly", "csv")


def read_trace(
    path: str | os.PathLike[str],
    format: str,
    filters: dict[str, str] | None = None,
    node_count: int | None = None,
) -> Trace:
    """The failure log at ``path`` in ``format`` (one of :data:`READERS`), what ``filters`` keep
    (``{column: value}``); ``node_count``: InfiniteHBD's node count. A bad parameter raises
    :class:`~cprsim.errors.ParameterError` naming it."""
    p = check_input_file(path, "failure log")
    filters = check_filters(format, dict(filters or {}))
    with decode_errors(p):
        return _read(p, format, filters, node_count)


def _read(p: Path, fmt: str, filters: dict[str, str], node_count: int | None) -> Trace:
    if fmt == "infinitehbd":
        return read_infinitehbd(p, filters, node_count)
    if node_count is not None:
        raise ParameterError("node_count", "applies to `format` infinitehbd only", also=("format",))
    if fmt == "lanl":
        return read_lanl(p, filters)
    if fmt == "titan":
        return read_titan(p, filters)
    if fmt == "philly":
        return read_philly(p, filters)
    if fmt == "csv":
        return read_csv(p, filters)
    raise ParameterError("format", f"must be one of {', '.join(READERS)}, got {short(fmt)!r}")


# -- helpers ----------------------------------------------------------------------------------------
def _open(path: Path):
    return open_input_text(path, "failure log")


def _json(path: Path) -> Any:
    return read_input_json(path, "failure log", "data")


def _time(text: str, path: Path, line: int) -> float:
    try:
        t = float(text)
    except (TypeError, ValueError):
        raise InputError(f"{short(path)}: line {line}: column time_h: expected a number") from None
    if not math.isfinite(t) or t < 0:
        raise InputError(
            f"{short(path)}: line {line}: column time_h: expected a finite number >= 0"
        )
    return t


def column_key(name: str) -> str:
    """A column's filter key: lower case, a parenthesised part dropped, punctuation runs as ``_``."""
    name = re.sub(r"\(.*?\)", " ", name)
    return re.sub(r"[^0-9a-z]+", "_", name.lower()).strip("_")


#: the columns each format can filter on (before ``column_key``)
COLUMNS: dict[str, tuple[str, ...]] = {
    "csv": ("node", "node_type", "cause"),
    "infinitehbd": ("node", "level", "class", "desc"),
    "lanl": ("node", *LANL_NODE_COLUMNS, "cause", *LANL_RECORD_COLUMNS),
    "titan": (*TITAN_COLUMNS, "location", "cause"),
    "philly": ("node", "id", "num_gpus", "runtime", "submitted_time", "min_gpus"),
}


def _match(
    filters: dict[str, str], fields: Mapping[str, str | None], substring: Iterable[str] = ()
) -> bool:
    """Whether ``fields`` pass the filters on them: equal ignoring case, or contain the value for
    the ``substring`` keys; a field that is None (unknown) passes no filter."""
    for key, want in filters.items():
        if key not in fields:
            continue
        have = fields[key]
        if have is None:
            return False
        if key in substring:
            if want.strip().lower() not in have.lower():
                return False
        elif have.strip().lower() != want.strip().lower():
            return False
    return True


def check_filters(format: str, filters: dict[str, str]) -> dict[str, str]:
    """The filters by their column keys; an unknown ``format``, or a column the format does not
    have, is a :class:`~cprsim.errors.ParameterError` naming it."""
    if format not in READERS:
        raise ParameterError(
            "format", f"must be one of {', '.join(READERS)}, got {short(format)!r}"
        )
    allowed = {column_key(c) for c in COLUMNS[format]}
    out: dict[str, str] = {}
    for key, value in filters.items():
        k = column_key(key)
        if k not in allowed:
            raise ParameterError(
                "filters",
                f"not a column of `format` {format} (columns: {', '.join(sorted(allowed))})",
                key=key,
                also=("format",),
            )
        out[k] = value
    return out
