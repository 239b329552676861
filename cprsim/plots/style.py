"""One colour per strategy, the same in every figure; one colour per time component."""

from __future__ import annotations

import zlib

#: registry names and the planner's labels map to the same colour
STRATEGY_COLOURS = {
    "full": "#1f77b4",
    "partial": "#d62728",
    "mfu": "#2ca02c",
    "ssu": "#9467bd",
    "lookahead": "#8c564b",
    "ecrm": "#ff7f0e",
    "checknrun": "#17becf",
}
_SPARE = ("#7f7f7f", "#e377c2", "#393b79", "#637939", "#8c6d31", "#843c39")

#: components of the wall time, in stacking order (ReplicationResult fields)
COMPONENTS = (
    ("save_s", "checkpoint saves", "#4c72b0"),
    ("load_s", "checkpoint loads", "#55a868"),
    ("lost_s", "re-executed work", "#c44e52"),
    ("reschedule_s", "rescheduling", "#8172b2"),
    ("degraded_s", "degraded / slowed", "#ccb974"),
)

#: rescheduling's parts with a node lifecycle (``replacement_s`` = reschedule - detection - wait)
LIFECYCLE_COMPONENTS = (
    ("detection_s", "failure detection", "#937860"),
    ("wait_s", "waiting for a machine", "#da8bc3"),
    ("replacement_s", "swap-in / host selection", "#8172b2"),
)

#: Gantt phases
PHASE_COLOURS = {
    "compute": "#a6cee3", "re-executed": "#e31a1c", "save": "#1f78b4", "save (aborted)": "#fb9a99",
    "save (interrupted)": "#fb9a99", "reschedule": "#6a3d9a", "reschedule (interrupted)": "#cab2d6",
    "load": "#33a02c", "load (interrupted)": "#b2df8a", "down": "#444444",
}


def base_name(label: str) -> str:
    """The registry name inside a strategy label (``mfu-5%`` -> ``mfu``, ``CPR-SSU`` -> ``ssu``)."""
    low = label.lower()
    if low.startswith("cpr-"):
        low = low[4:]
        return "partial" if low.startswith("vanilla") else low.split()[0]
    if low.startswith("full"):
        return "full"
    for name in sorted(STRATEGY_COLOURS, key=len, reverse=True):
        if low.startswith(name):
            return name
    return low


def colour(label: str, others: list[str] | None = None) -> str:
    name = base_name(label)
    if name in STRATEGY_COLOURS:
        return STRATEGY_COLOURS[name]
    unknown = [x for x in (others or []) if base_name(x) not in STRATEGY_COLOURS]
    i = unknown.index(label) if label in unknown else zlib.crc32(label.encode())
    return _SPARE[i % len(_SPARE)]
