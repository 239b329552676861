"""One replication's events as a Chrome/Perfetto trace (open in ui.perfetto.dev or chrome://tracing).

Track 0 is the job (compute, save, reschedule, load phases); track ``1 + node`` shows a node
down from its failure until it is rescheduled. Times are microseconds of simulated time.
"""

from __future__ import annotations

from typing import Any, Sequence

from cprsim.sim.records import Event

_PHASES = {"save_start": ("save", "save_end", "save_abort"),
           "resched_start": ("reschedule", "resched_end"),
           "load_start": ("load", "load_end")}


def chrome_trace(events: Sequence[Event], n_trainers: int, name: str = "cprsim") -> dict[str, Any]:
    us = 1e6
    out: list[dict[str, Any]] = [
        {"ph": "M", "pid": 1, "name": "process_name", "args": {"name": name}},
        {"ph": "M", "pid": 1, "tid": 0, "name": "thread_name", "args": {"name": "job"}},
    ]
    open_: dict[str, float] = {}
    ends = {e: k for k, v in _PHASES.items() for e in v[1:]}
    cursor = 0.0  # start of the current compute stretch
    seen_nodes: set[int] = set()
    for ev in events:
        if ev.kind in _PHASES:
            if ev.time_s > cursor:
                out.append({"ph": "X", "pid": 1, "tid": 0, "name": "compute", "ts": cursor * us,
                            "dur": (ev.time_s - cursor) * us})
            open_[ev.kind] = ev.time_s
        elif ev.kind in ends and ends[ev.kind] in open_:
            start = open_.pop(ends[ev.kind])
            label = _PHASES[ends[ev.kind]][0] + (" (aborted)" if ev.kind == "save_abort" else "")
            out.append({"ph": "X", "pid": 1, "tid": 0, "name": label, "ts": start * us,
                        "dur": (ev.time_s - start) * us})
            cursor = ev.time_s
        elif ev.kind == "fail":
            kind = "trainer" if ev.node < n_trainers else "embedding"
            idx = ev.node if ev.node < n_trainers else ev.node - n_trainers
            if ev.node not in seen_nodes:
                seen_nodes.add(ev.node)
                out.append({"ph": "M", "pid": 1, "tid": 1 + ev.node, "name": "thread_name",
                            "args": {"name": f"{kind} {idx}"}})
            out.append({"ph": "X", "pid": 1, "tid": 1 + ev.node, "name": "down", "ts": ev.time_s * us,
                        "dur": ev.value * us})
            # an aborted phase ends at the failure
            for k in list(open_):
                start = open_.pop(k)
                out.append({"ph": "X", "pid": 1, "tid": 0, "name": _PHASES[k][0] + " (interrupted)",
                            "ts": start * us, "dur": (ev.time_s - start) * us})
            if cursor < ev.time_s and not open_:
                out.append({"ph": "X", "pid": 1, "tid": 0, "name": "compute", "ts": cursor * us,
                            "dur": (ev.time_s - cursor) * us})
            cursor = ev.time_s
        elif ev.kind in ("rollback", "pls"):
            out.append({"ph": "i", "pid": 1, "tid": 0, "s": "t", "name": ev.kind, "ts": ev.time_s * us,
                        "args": {"value": ev.value}})
        elif ev.kind == "done":
            if ev.time_s > cursor:
                out.append({"ph": "X", "pid": 1, "tid": 0, "name": "compute", "ts": cursor * us,
                            "dur": (ev.time_s - cursor) * us})
    return {"traceEvents": out, "displayTimeUnit": "ms"}
