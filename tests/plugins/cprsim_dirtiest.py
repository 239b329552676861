"""A toy strategy the calibration measures, added in this one module (tests/test_strategy_parts.py
registers it at test time): CPR-MFU's simulation and planning, but its partial saves write the rows
with the most updates not yet saved (its emulation part), not the most accessed since the last save.
"""

from __future__ import annotations

from typing import Any

from cprsim.sim.emulation_parts import TopRows
from cprsim.sim.prioritized import MFU
from cprsim.sim.strategies import register


class DirtiestRows(TopRows):
    """Rows ranked by their accesses since they were last saved or restored (the emulator's
    ``unsaved`` counters): nothing of its own to count."""

    def count(self, em: Any, rows: Any, n_samples: int, sample: Any) -> None:
        """Nothing: the emulator counts every row's unsaved accesses already."""

    def score(self, em: Any, k: int) -> Any:
        """The unsaved accesses."""
        return em.unsaved


@register
class Dirtiest(MFU):
    """MFU whose partial saves write the rows with the most unsaved updates."""

    name = "dirtiest"
    summary = "partial saves of the rows with the most updates not yet saved (a toy)"
    emulation = DirtiestRows()
