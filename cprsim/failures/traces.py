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
at the window end.

Readers (``read_trace(path, fmt, ...)``): ``infinitehbd``, ``lanl``, ``titan``, ``philly``,
``csv``. Each returns a ``Trace`` plus the raw counts its source reports, for checking.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from cprsim.errors import InputError

EVENTS = ("start", "fail", "repair", "end")
HEADER = ["node", "node_type", "event", "time_h", "cause"]


@dataclass
class NodeHistory:
    node: str
    node_type: str
    start: float | None = None
    end: float | None = None
    events: list[tuple[float, str, str]] = field(default_factory=list)  # (time_h, fail|repair|other, cause)


#: a failure of a cause the filters exclude: the node goes down, but for the kept causes the
#: up-time that it ends is right-censored (competing risks); its repair brings the node back up
OTHER = "other"


@dataclass
class Trace:
    nodes: dict[str, NodeHistory]
    source: str
    counts: dict[str, Any] = field(default_factory=dict)

    # -- derived samples ----------------------------------------------------------------------
    def horizon(self) -> float:
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

    def node_types(self) -> list[str]:
        return sorted({h.node_type for h in self.nodes.values()})

    def n_failures(self) -> int:
        return sum(1 for h in self.nodes.values() for _, ev, _ in h.events if ev == "fail")

    # -- writing --------------------------------------------------------------------------------
    def to_rows(self) -> list[list[Any]]:
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
    nodes: dict[str, NodeHistory] = {}
    last: dict[str, float] = {}
    with _open(path) as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None:
            raise InputError(f"{path}: empty file (expected the header {','.join(HEADER)})")
        if [h.strip() for h in header] != HEADER:
            raise InputError(f"{path}: line 1: expected the columns {','.join(HEADER)}, got {','.join(header)}")
        n = 0
        for line, row in enumerate(reader, start=2):
            if not row or not "".join(row).strip():
                continue
            if len(row) != len(HEADER):
                raise InputError(f"{path}: line {line}: expected {len(HEADER)} columns, got {len(row)}")
            node, ntype, ev, ts, cause = (x.strip() for x in row)
            if not node:
                raise InputError(f"{path}: line {line}: empty node id")
            if ev not in EVENTS:
                raise InputError(f"{path}: line {line}: event must be one of {', '.join(EVENTS)}, got {ev!r}")
            t = _time(ts, path, line)
            h = nodes.setdefault(node, NodeHistory(node, ntype or "node"))
            if ntype and ntype != h.node_type:
                raise InputError(f"{path}: line {line}: node {node} changes type ({h.node_type} -> {ntype})")
            if node in last and t < last[node]:
                raise InputError(f"{path}: line {line}: time {t} h is before the node's previous event ({last[node]} h): "
                                 "events must be sorted per node")
            last[node] = t
            if ev == "start":
                if h.events or h.start is not None:
                    raise InputError(f"{path}: line {line}: `start` must be the node's first event")
                h.start = t
            elif ev == "end":
                h.end = t
            else:
                if h.end is not None:
                    raise InputError(f"{path}: line {line}: event after the node's `end`")
                if ev == "repair" and not any(e in ("fail", OTHER) for _, e, _ in h.events):
                    raise InputError(f"{path}: line {line}: repair before any failure of node {node}")
                if ev == "fail" and not _keep(filters, {"cause": cause}):
                    ev = OTHER  # competing risk: ends this cause's lifetime, censored
                h.events.append((t, ev, cause))
            n += 1
    if n == 0:
        raise InputError(f"{path}: no events")
    nodes = {k: h for k, h in nodes.items() if _keep(filters, {"node_type": h.node_type})}
    return Trace(nodes, str(path), {"rows": n, "nodes": len(nodes)})


def write_csv(trace: Trace) -> str:
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
    (case-insensitive substrings).
    """
    raw = _json(path)
    if not isinstance(raw, list):
        raise InputError(f"{path}: expected a JSON list of events")
    window_h = 348.0 * 24
    nodes: dict[str, NodeHistory] = {}
    open_faults: dict[str, dict[str, float]] = {}
    starts = ends = 0
    levels: dict[str, int] = {}
    prev = -math.inf
    for i, e in enumerate(raw):
        try:
            node, t, kind, ft = e["node_id"], float(e["event_time"]) * 24.0, e["event_type"], e["fault_type"]
            level, klass, desc = ft["Level"], ft["Class"], ft["Desc"]
        except (KeyError, TypeError, ValueError):
            raise InputError(f"{path}: event {i}: expected node_id, event_time, event_type, fault_type") from None
        if not math.isfinite(t) or t < 0:
            raise InputError(f"{path}: event {i}: event_time must be a finite number >= 0")
        if t < prev:
            raise InputError(f"{path}: event {i}: events are not sorted by time")
        prev = t
        h = nodes.setdefault(node, NodeHistory(node, "node", 0.0, window_h))
        keep = _keep(filters, {"level": level, "class": klass, "desc": desc})
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
            raise InputError(f"{path}: event {i}: event_type must be fault_start or fault_end, got {kind!r}")
    faulty = len(nodes)
    total = 400 if node_count is None else node_count
    if total < faulty:
        raise InputError(f"{path}: --node-count {total} is less than the {faulty} nodes in the trace")
    for k in range(total - faulty):
        name = f"never-faulty-{k:04d}"
        nodes[name] = NodeHistory(name, "node", 0.0, window_h)
    return Trace(nodes, str(path), {"events": starts + ends, "fault_start": starts, "fault_end": ends,
                                    "faulty_nodes": faulty, "nodes": total, "levels": levels})


def _lanl_month(text: str, path: Path, line: int) -> datetime | None:
    """LANL install/production/decommission dates: 'Jan-97', '5-Jun' (2005), or 'current'."""
    t = text.strip()
    if t.lower() in ("current", "", "before tracking"):  # open-ended: the data's own bounds
        return None
    a, _, b = t.partition("-")
    try:
        if a.isdigit():  # '5-Jun' = June 2005
            return datetime.strptime(f"{2000 + int(a)}-{b}", "%Y-%b")
        yy = int(b)
        return datetime.strptime(f"{(1900 if yy >= 50 else 2000) + yy}-{a}", "%Y-%b")
    except ValueError:
        raise InputError(f"{path}: line {line}: date {text!r} is not like Jan-97 or 5-Jun") from None


def read_lanl(path: Path, filters: dict[str, str]) -> Trace:
    """LANL LA-UR-05-7318 (SimEDC trace.csv): one record per node interruption.

    Node = (System, nodenum); window = its production date to its decommission date ('current':
    the end of the data). Filters: ``system`` (exact), ``cause`` (Facilities, Hardware, Human
    Error, Network, Undetermined, Software; case-insensitive).
    """
    causes = ("Facilities", "Hardware", "Human Error", "Network", "Undetermined", "Software")
    recs = []
    with _open(path) as f:
        reader = csv.DictReader(f)
        need = {"System", "nodenum", "node prod", "node decom", "Prob Started (mm/dd/yy hh:mm)",
                "Prob Fixed (mm/dd/yy hh:mm)", *causes}
        if reader.fieldnames is None or not need <= set(reader.fieldnames):
            raise InputError(f"{path}: line 1: not a LANL failure file (missing {sorted(need - set(reader.fieldnames or []))})")
        for line, r in enumerate(reader, start=2):
            try:
                t0 = datetime.strptime(r["Prob Started (mm/dd/yy hh:mm)"].strip(), "%m/%d/%Y %H:%M")
                t1 = datetime.strptime(r["Prob Fixed (mm/dd/yy hh:mm)"].strip(), "%m/%d/%Y %H:%M")
            except ValueError:
                raise InputError(f"{path}: line {line}: Prob Started/Fixed must be like 6/21/2005 10:54") from None
            if t1 < t0:
                raise InputError(f"{path}: line {line}: repair before failure")
            cause = next((c for c in causes if r[c].strip()), "Undetermined")
            recs.append((r["System"].strip(), r["nodenum"].strip(), t0, t1, cause, r[cause].strip(),
                         _lanl_month(r["node prod"], path, line), _lanl_month(r["node decom"], path, line)))
    if not recs:
        raise InputError(f"{path}: no records")
    origin = min(min(r[2] for r in recs), min((r[6] for r in recs if r[6]), default=min(r[2] for r in recs)))
    end_of_data = max(r[3] for r in recs)
    hours = lambda d: (d - origin).total_seconds() / 3600.0  # noqa: E731
    nodes: dict[str, NodeHistory] = {}
    systems = set()
    for sysid, nn, t0, t1, cause, detail, prod, decom in sorted(recs, key=lambda r: (r[0], r[1], r[2])):
        systems.add(sysid)
        if not _keep(filters, {"system": sysid, "cause": cause}, exact=("system",)):
            continue
        name = f"{sysid}/{nn}"
        start = hours(prod) if prod else 0.0
        end = hours(decom) if decom else hours(end_of_data)
        h = nodes.setdefault(name, NodeHistory(name, f"lanl-{sysid}", min(start, hours(t0)), max(end, hours(t1))))
        h.events.append((hours(t0), "fail", f"{cause}: {detail}"))
        h.events.append((hours(t1), "repair", ""))
    for h in nodes.values():  # repairs may overlap the next failure: keep time order
        h.events.sort(key=lambda e: (e[0], e[1] != "fail"))
    return Trace(nodes, str(path), {"records": len(recs), "systems": len(systems)})


def read_titan(path: Path, filters: dict[str, str]) -> Trace:
    """Titan GPU lifetimes (gc_summary_loc.csv): one lifetime per GPU, ``dead`` FALSE = censored.

    Filter ``cause=dbe|otb`` keeps only deaths of that cause (others become censored).
    """
    nodes: dict[str, NodeHistory] = {}
    dead = 0
    want = filters.get("cause", "").lower()
    with _open(path) as f:
        reader = csv.DictReader(f)
        if reader.fieldnames is None or not {"SN", "time", "dead", "dead_dbe", "dead_otb"} <= set(reader.fieldnames):
            raise InputError(f"{path}: line 1: expected Titan columns SN,time,...,dead,dead_otb,dead_dbe")
        for line, r in enumerate(reader, start=2):
            t = _time(r["time"], path, line) / 3600.0
            is_dead = r["dead"].strip().upper() == "TRUE"
            dead += is_dead
            if want:
                is_dead = is_dead and r.get(f"dead_{want}", "").strip().upper() == "TRUE"
            h = NodeHistory(r["SN"], "gpu", 0.0, t)
            if is_dead:
                h.events.append((t, "fail", "dbe" if r["dead_dbe"].strip().upper() == "TRUE" else "otb"))
            nodes[r["SN"] + f"#{line}"] = h
    if not nodes:
        raise InputError(f"{path}: no rows")
    return Trace(nodes, str(path), {"rows": len(nodes), "dead": dead, "censored": len(nodes) - dead})


def read_philly(path: Path, filters: dict[str, str]) -> Trace:
    """Philly job attempts (jobs.json): a new attempt = an interruption; the last attempt is censored.

    Each job is a 'node' of type ``job``; an attempt's end followed by another attempt is a
    failure, the gap to the next attempt its repair. Filter ``min_gpus=N``.
    """
    raw = _json(path)
    if not isinstance(raw, list):
        raise InputError(f"{path}: expected a JSON list of jobs")
    fmt = "%Y-%m-%d %H:%M:%S"
    min_gpus = int(filters.get("min_gpus", 0))
    parsed = []
    for i, j in enumerate(raw):
        try:
            att = [(datetime.strptime(a["start_time"], fmt), datetime.strptime(a["end_time"], fmt)) for a in j["attempts"]]
            gpus = int(j["num_gpus"])
            jid = str(j["id"])
        except (KeyError, TypeError, ValueError):
            raise InputError(f"{path}: job {i}: expected id, num_gpus and attempts with start_time/end_time") from None
        if not att:
            raise InputError(f"{path}: job {i}: no attempts")
        parsed.append((jid, gpus, att))
    origin = min(a[0][0] for _, _, a in parsed)
    hours = lambda d: (d - origin).total_seconds() / 3600.0  # noqa: E731
    nodes: dict[str, NodeHistory] = {}
    multi = reattempts = 0
    for jid, gpus, att in parsed:
        multi += len(att) > 1
        reattempts += len(att) - 1
        if gpus < min_gpus:
            continue
        h = NodeHistory(jid, "job", hours(att[0][0]), hours(att[-1][1]))
        for (s0, e0), (s1, _) in zip(att, att[1:]):
            h.events.append((hours(e0), "fail", "attempt ended"))
            h.events.append((max(hours(s1), hours(e0)), "repair", ""))
        nodes[jid] = h
    return Trace(nodes, str(path), {"jobs": len(parsed), "multi_attempt_jobs": multi, "reattempts": reattempts})


READERS = ("infinitehbd", "lanl", "titan", "philly", "csv")


def read_trace(path: str | Path, fmt: str, filters: dict[str, str] | None = None,
               node_count: int | None = None) -> Trace:
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: no such file")
    filters = dict(filters or {})
    if fmt == "infinitehbd":
        return read_infinitehbd(p, filters, node_count)
    if node_count is not None:
        raise InputError("--node-count applies to --format infinitehbd only")
    if fmt == "lanl":
        return read_lanl(p, filters)
    if fmt == "titan":
        return read_titan(p, filters)
    if fmt == "philly":
        return read_philly(p, filters)
    if fmt == "csv":
        return read_csv(p, filters)
    raise InputError(f"--format must be one of {', '.join(READERS)}, got {fmt!r}")


# -- helpers ----------------------------------------------------------------------------------------
def _open(path: Path):  # noqa: ANN202
    try:
        return path.open(newline="", encoding="utf-8")
    except OSError as e:
        raise InputError(f"{path}: {e.strerror}") from None


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise InputError(f"{path}: line {e.lineno}: invalid JSON ({e.msg})") from None


def _time(text: str, path: Path, line: int) -> float:
    try:
        t = float(text)
    except (TypeError, ValueError):
        raise InputError(f"{path}: line {line}: time {text!r} is not a number") from None
    if not math.isfinite(t) or t < 0:
        raise InputError(f"{path}: line {line}: time must be a finite number >= 0, got {text!r}")
    return t


def _keep(filters: dict[str, str], fields: dict[str, str], exact: Iterable[str] = ()) -> bool:
    for key, want in filters.items():
        if key not in fields:
            continue
        have = fields[key]
        if key in exact:
            if have != want:
                return False
        elif want.lower() not in have.lower():
            return False
    return True


def check_filters(fmt: str, filters: dict[str, str]) -> None:
    allowed = {"infinitehbd": {"level", "class", "desc"}, "lanl": {"system", "cause"}, "titan": {"cause"},
               "philly": {"min_gpus"}, "csv": {"cause", "node_type"}}[fmt]
    bad = set(filters) - allowed
    if bad:
        raise InputError(f"--filter {sorted(bad)[0]}: not a filter of --format {fmt} (use {', '.join(sorted(allowed))})")
