"""PLS, the portion of lost samples: one definition, used by the simulator and the DLRM emulation.

Under partial recovery a failed embedding shard is restored from its last save, so every
sample's updates to that shard since then are lost. Per failure of shard ``i`` at progress ``p``:

    lost_i = (p - marker_i) * weight_i        marker_i := p

where ``marker_i`` is the progress (seconds, or samples: any unit proportional to samples) at
which shard ``i`` last became whole (its last save, or its last restore: updates lost once are not
lost again), and ``weight_i`` is the fraction of a sample's embedding updates that land on shard
``i`` (``1/N_e`` with uniform sharding). ``PLS = sum(lost) / total``, in [0, 1].
"""

from __future__ import annotations

import numpy as np


class ShardLedger:
    """Per-shard markers and weights, and the lost-update total."""

    __slots__ = ("markers", "weights", "lost")

    def __init__(self, n_shards: int, weights: np.ndarray | None = None) -> None:
        if n_shards < 1:
            raise ValueError("n_shards must be >= 1")
        self.markers = np.zeros(n_shards)
        self.weights = np.full(n_shards, 1.0 / n_shards) if weights is None else np.asarray(weights, float)
        if self.weights.shape != (n_shards,) or np.any(self.weights < 0) or self.weights.sum() > 1 + 1e-9:
            raise ValueError("weights must be n_shards non-negative fractions summing to <= 1")
        self.lost = 0.0

    def saved(self, progress: float, shards: np.ndarray | slice | None = None) -> None:
        """Shards (all by default) saved at ``progress``."""
        self.markers[slice(None) if shards is None else shards] = progress

    def fail(self, shard: int, progress: float, weight: float | None = None) -> float:
        """Shard restored from its last save at ``progress``; returns the lost amount booked."""
        w = self.weights[shard] if weight is None else weight
        lost = max(0.0, (progress - self.markers[shard]) * w)
        self.lost += lost
        self.markers[shard] = progress
        return lost

    def pls(self, total: float) -> float:
        return self.lost / total
