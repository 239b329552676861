"""PLS, the portion of lost samples: one definition, used by the simulator and the DLRM emulation.

Under partial recovery a failed embedding shard is restored from its last save, so every
sample's updates to that shard since then are lost. Per failure of shard ``i`` at progress ``p``:

    lost_i = sum_t f_t * weight_i * (p - marker_ti)        marker_ti := p for every tier t

where ``weight_i`` is the fraction of a sample's embedding updates that land on shard ``i``
(``1/N_e`` with uniform sharding), the shard's rows are split into *tiers* receiving the fractions
``f_t`` of its updates (one tier for plain checkpoints; two for MFU/SSU: the rows saved by the
frequent partial saves, with the access share they cover, and the rest), and ``marker_ti`` is the
progress (seconds, or samples: any unit proportional to samples) at which tier ``t`` of shard
``i`` last became whole: its last save, or its last restore (updates lost once are not lost
again). ``PLS = sum(lost) / total``, in [0, 1].

**When and how old** (the accuracy model's covariates, :meth:`ShardLedger.timing`): every booked
loss is an interval ``(from, to)`` of progress whose updates were lost by a restore at ``to`` to a
state saved (or restored) at ``from``. Weighted by the amount lost, ``position`` is the mean of
``to / total`` (how far into training the failures struck) and ``age`` the mean of
``(to - from) / total`` (how old the restored state was: a reset to the initial state late in
training has ``age = position``, a restore of the last hour's save a small ``age``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


class ShardLedger:
    """Per-shard, per-tier markers and weights, and the lost-update total.

    A save of every tier of every shard (once per checkpoint) only raises a pending floor, a
    scalar, and a save of one tier of every shard (MFU/SSU's partial saves) that tier's pending
    floor; the markers take them when they are next read (``max`` is exact: the same markers).
    """

    __slots__ = ("_floor", "_markers", "_tier_floor", "losses", "lost", "tiers", "weights")

    def __init__(
        self, n_shards: int, weights: np.ndarray | None = None, tiers: Sequence[float] = (1.0,)
    ) -> None:
        if n_shards < 1:
            raise ValueError("n_shards must be >= 1")
        if weights is None:  # uniform sharding: valid by construction (one value, read-only: a
            # million shards cost nothing per replication)
            self.weights = np.broadcast_to(1.0 / n_shards, (n_shards,))
        else:
            self.weights = np.asarray(weights, float)
            if (
                self.weights.shape != (n_shards,)
                or np.any(self.weights < 0)
                or self.weights.sum() > 1 + 1e-9
            ):
                raise ValueError("weights must be n_shards non-negative fractions summing to <= 1")
        self.tiers = np.asarray(tiers, dtype=float)
        if (
            self.tiers.ndim != 1
            or any(t < 0 for t in self.tiers.tolist())
            or abs(self.tiers.sum() - 1.0) > 1e-9
        ):
            raise ValueError("tier fractions must be non-negative and sum to 1")
        self._markers = np.zeros((len(self.tiers), n_shards))
        self._floor = -math.inf  #: a save of everything not yet applied to the markers
        #: per tier, a save of that tier of every shard not yet applied (several tiers only)
        self._tier_floor: list[float] | None = (
            [-math.inf] * len(self.tiers) if len(self.tiers) > 1 else None
        )
        self.lost = 0.0
        self.losses: list[tuple[float, float, float]] = []  #: (from, to, lost per unit progress)

    @property
    def markers(self) -> np.ndarray:
        """``(tiers, shards)``: the progress at which each tier of each shard last became whole."""
        if self._floor != -math.inf:
            np.maximum(self._markers, self._floor, out=self._markers)
            self._floor = -math.inf
        tf = self._tier_floor
        if tf is not None and max(tf) != -math.inf:
            for t, f in enumerate(tf):
                if f != -math.inf:
                    np.maximum(self._markers[t], f, out=self._markers[t])
                    tf[t] = -math.inf
        return self._markers

    @markers.setter
    def markers(self, value: np.ndarray) -> None:
        self._markers = np.asarray(value, dtype=float)
        self._floor = -math.inf
        if self._tier_floor is not None:
            self._tier_floor = [-math.inf] * len(self._tier_floor)

    def saved(
        self,
        progress: float,
        tier: int | None = None,
        shards: np.ndarray | slice | int | None = None,
    ) -> None:
        """Shards (all by default) saved at ``progress``: every tier, or only ``tier``.

        A marker never moves back: a shard restored at ``p`` after a snapshot taken at an earlier
        progress (a two-phase persist that commits later) stays at ``p`` (its own snapshot died with
        it, and what it lost before ``p`` is already counted).
        """
        tf = self._tier_floor
        if shards is None and (tier is None or (tf is None and tier == 0)):
            # the common case, once per checkpoint: O(1) (one tier: the tier is every tier)
            if progress > self._floor:
                self._floor = progress
            return
        if shards is None and tf is not None and tier is not None:
            # one tier of every shard (MFU/SSU's partial saves): O(1) as well
            if progress > tf[tier]:
                tf[tier] = progress
            return
        markers = self.markers
        rows = slice(None) if tier is None else tier
        sel = (rows, slice(None) if shards is None else shards)
        markers[sel] = np.maximum(markers[sel], progress)

    def fail(self, shard: int, progress: float, weight: float | None = None) -> float:
        """Shard restored from its last save at ``progress``; returns the lost amount booked."""
        w = self.weights[shard] if weight is None else weight
        if self._markers.shape[0] == 1 and progress >= self._floor:
            # one tier (plain checkpoints): the arithmetic below, on scalars, and the pending floor
            # read for this shard only (a million shards: no pass over them all per failure; the
            # shard's new marker is at or above the floor, which then leaves it as it is)
            markers = self._markers
            age = progress - max(markers[0, shard], self._floor)
            if age < 0:
                age = 0.0
            lost = float(w * (self.tiers[0] * age))
            self.lost += lost
            if age > 0:
                self.losses.append((progress - age, progress, float(w * self.tiers[0])))
            markers[0, shard] = progress
            return lost
        markers = self.markers
        ages = np.maximum(0.0, progress - markers[:, shard])
        lost = float(w * np.dot(self.tiers, ages))
        self.lost += lost
        for t, a in enumerate(ages):
            if a > 0:
                self.losses.append((progress - a, progress, float(w * self.tiers[t])))
        self._markers[:, shard] = progress
        return lost

    def book(self, start: float, end: float, amount: float) -> None:
        """Book ``amount`` lost by a restore at ``end`` to a state of ``start`` (outside the markers:
        e.g. a trainer-side cache's unwritten updates)."""
        if amount <= 0:
            return
        self.lost += amount
        if end > start:
            self.losses.append((start, end, amount / (end - start)))

    def timing(self, total: float) -> tuple[float, float]:
        """``(position, age)``: the loss-weighted mean of ``to / total`` and of ``(to - from) / total``
        over the booked losses (both 0 when nothing was lost)."""
        amount = pos = age = 0.0
        for a, b, rate in self.losses:
            x = rate * (b - a)
            amount += x
            pos += x * b
            age += x * (b - a)
        if amount <= 0 or total <= 0:
            return 0.0, 0.0
        return float(pos / amount / total), float(age / amount / total)

    def rollback(self, progress: float) -> float:
        """The whole job went back to a full checkpoint taken at ``progress``.

        Every shard is whole as of ``progress`` again; updates lost after it will be re-executed,
        so they are no longer lost (those before it stay lost: the checkpoint holds the gap).
        Returns the amount forgiven.
        """
        self._markers[:] = progress
        self._floor = -math.inf
        if self._tier_floor is not None:
            self._tier_floor = [-math.inf] * len(self._tier_floor)
        if not self.losses:
            return 0.0
        healed = 0.0
        kept = []
        for a, b, rate in self.losses:
            if b > progress:
                healed += rate * (b - max(a, progress))
                if a < progress:
                    kept.append((a, progress, rate))
            else:
                kept.append((a, b, rate))
        self.losses = kept
        self.lost = max(0.0, self.lost - healed)
        return healed

    def pls(self, total: float) -> float:
        """PLS: the lost amount over ``total``, the job's whole progress in the ledger's unit (a
        fraction)."""
        return self.lost / total
