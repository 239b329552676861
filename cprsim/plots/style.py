"""One colour per strategy, the same in every figure; one colour per time component."""

from __future__ import annotations

import zlib

from cprsim import metrics, names

#: registry names and the planner's labels map to the same colour
_SPARE = ("#7f7f7f", "#e377c2", "#393b79", "#637939", "#8c6d31", "#843c39")

#: the components' colours (their names and labels: :mod:`cprsim.metrics`)
_COMPONENT_COLOURS = {
    "save_s": "#4c72b0",
    "load_s": "#55a868",
    "lost_s": "#c44e52",
    "reschedule_s": "#8172b2",
    "degraded_s": "#ccb974",
    "detection_s": "#937860",
    "wait_s": "#da8bc3",
    "replacement_s": "#8172b2",
}
#: components of the wall time, in stacking order: (ReplicationResult field, label, colour)
COMPONENTS = tuple((k, metrics.BY_NAME[k].label, _COMPONENT_COLOURS[k]) for k in metrics.COMPONENTS)
#: rescheduling's parts with a node lifecycle (``replacement_s`` = reschedule - detection - wait)
LIFECYCLE_COMPONENTS = tuple(
    (k, label, _COMPONENT_COLOURS[k]) for k, label in metrics.LIFECYCLE_PARTS
)

#: Gantt phases
PHASE_COLOURS = {
    "compute": "#a6cee3",
    "re-executed": "#e31a1c",
    "save": "#1f78b4",
    "save (aborted)": "#fb9a99",
    "save (interrupted)": "#fb9a99",
    "reschedule": "#6a3d9a",
    "reschedule (interrupted)": "#cab2d6",
    "load": "#33a02c",
    "load (interrupted)": "#b2df8a",
    "down": "#444444",
}


def _registry() -> dict:
    from cprsim.sim import strategies

    strategies.ensure_loaded()
    return strategies.REGISTRY


def base_name(label: str) -> str:
    """The registry name inside a strategy label (``mfu-5%`` -> ``mfu``, ``CPR-SSU`` -> ``ssu``, a
    class's ``label`` -> its name)."""
    reg = _registry()
    if label in reg:
        return label
    by_label = {c.label: n for n, c in reg.items()}
    if label in by_label:
        return by_label[label]
    low = label.lower()
    if low.startswith("cpr-"):
        low = low[4:]
        return names.PARTIAL if low.startswith("vanilla") else low.split()[0].rstrip(",")
    for name in sorted(reg, key=len, reverse=True):
        if low.startswith(name):
            return name
    return low


def colour(label: str, others: list[str] | None = None) -> str:
    """A strategy's colour (its class's ``colour``); a label no strategy claims gets a spare one."""
    reg = _registry()
    name = base_name(label)
    if name in reg:
        return reg[name].colour
    unknown = [x for x in (others or []) if base_name(x) not in reg]
    i = unknown.index(label) if label in unknown else zlib.crc32(label.encode())
    return _SPARE[i % len(_SPARE)]
