"""Moved to :mod:`cprsim.streams` (random streams serve the failure models too); kept for imports."""

from cprsim.streams import CONCERNS, REPLICATION_BLOCKS, stream

__all__ = ["CONCERNS", "REPLICATION_BLOCKS", "stream"]
