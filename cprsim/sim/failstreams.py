"""Failure streams in bulk: the renewal processes of many nodes (or fixed failure domains),
sampled with vectorised numpy and merged into one time-ordered stream, extended lazily.

A *unit* fails as a whole: a node (one member), or a fixed group of a failure domain (its k
members). Each unit is a renewal process independent of the job: a lifetime, a failure, every
member down for its own rescheduling time, a fresh lifetime once the last member is back. The
units of one :class:`Units` (the nodes of a type, or the groups of one domain) are laid out in
blocks of ``w`` units, ``w = max(1, BLOCK // k)`` for units of ``k`` nodes (1,024 nodes, 256
groups of 4): unit ``u`` is column ``u % w`` of block ``u // w``, and each block draws from its
own stream in whole rounds (round ``j``: the ``j``-th lifetime of every column, then the ``j``-th
rescheduling times of every member of every column), always ``w`` columns wide.
So the draws a unit gets depend only on the seed, the replication, its name and its index: not
on the number of units, nor on how far the job runs (see :mod:`cprsim.streams`).

:class:`BulkFailures` hands out the failures window by window: all failures before the horizon
``H`` are known once every unit's current lifetime started at or after ``H`` (a block draws
rounds until then). Within a window, failures are ordered by time, then by unit kind (in the
order given), then by unit index: at one instant, nodes by id, then fixed domains.

Cost: one stream and a few numpy calls per block and round (vectorised draws for every column),
plus one Python tuple per failure: no Python work, SimPy process or stream per node.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from cprsim.failures.distributions import Distribution

#: nodes per block: a block holds ``max(1, BLOCK // k)`` units of ``k`` nodes and draws them all in
#: every round, whether or not they all exist
BLOCK = 1024

#: a window of failures holds about this many (at the long-run rate) at most
WINDOW_EVENTS = 65_536

#: a failure: (wall time s, node ids, rescheduling time per node s)
Failure = tuple[float, tuple[int, ...], tuple[float, ...]]


@dataclass(frozen=True, slots=True)
class Units:
    """``count`` nodes from id ``first``, failing in units of ``k`` consecutive nodes (the last unit
    smaller when ``k`` does not divide ``count``); ``rng(block)`` is the stream of a block."""

    first: int
    count: int
    k: int
    dist: Distribution
    resched: Distribution
    stationary: bool
    rng: Callable[[int], np.random.Generator]
    #: the next lifetime starts at the failure, not when the unit is back: the times are on the
    #: job's compute clock, which stands still while the job waits for the unit
    #: (``failures.clock = "computing"``; exact when the job waits for it, see
    #: :mod:`cprsim.sim.clock`)
    renew_at_failure: bool = False

    @property
    def n_units(self) -> int:
        """Units: ``ceil(count / k)``."""
        return -(-self.count // self.k)

    @property
    def width(self) -> int:
        """Units per block."""
        return max(1, BLOCK // self.k)

    @property
    def n_blocks(self) -> int:
        """Blocks of :attr:`width` units: ``ceil(n_units / width)``."""
        return -(-self.n_units // self.width)

    def rate(self) -> float:
        """Long-run failures per second (0 for a lifetime without a finite mean)."""
        m = self.dist.mean()
        return self.n_units / m if np.isfinite(m) else 0.0


class _Blocks:
    """The blocks of one :class:`Units` as the rows of ``(blocks, w)`` arrays: when each column's
    current lifetime started (``up``; +inf past the last unit: those columns are drawn, never used),
    and the failures drawn but not handed out yet. Only the draws are per block."""

    def __init__(self, units: Units) -> None:
        self.units = units
        self.rngs = [units.rng(b) for b in range(units.n_blocks)]
        self.rounds = np.zeros(units.n_blocks, int)
        self.up = np.zeros((units.n_blocks, units.width))
        self.up.reshape(-1)[units.n_units :] = np.inf
        last = units.count - (units.n_units - 1) * units.k  # nodes in the last unit
        self.short = last if last < units.k else 0
        #: (block of each row, failure times (rows, w), rescheduling times (rows, w[, k]))
        self.pending: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    def _round(self, blocks: np.ndarray) -> None:
        """Draw the next round of ``blocks``: each block's ``w`` lifetimes, then its ``w x k``
        rescheduling times (a constant draws nothing)."""
        u, w = self.units, self.units.width
        life = np.empty((blocks.size, w))
        rho = np.empty((blocks.size, w) + ((u.k,) if u.k > 1 else ()))
        constant = u.resched.family == "constant"
        if constant:
            rho.fill(u.resched.scale)
        for i, b in enumerate(blocks.tolist()):
            rng = self.rngs[b]
            life[i] = (
                u.dist.sample_residual(rng, w)
                if u.stationary and self.rounds[b] == 0
                else u.dist.sample(rng, w)
            )
            if not constant:
                rho[i] = u.resched.sample(rng, rho.shape[1:])
        self.rounds[blocks] += 1
        t = self.up[blocks] + life
        if u.k == 1:
            down = rho
        else:  # a group is down until its last member is back
            down = rho.max(axis=2)
            if self.short and blocks[-1] == u.n_blocks - 1:
                c = (u.n_units - 1) % w
                down[-1, c] = rho[-1, c, : self.short].max()
        self.up[blocks] = t if u.renew_at_failure else t + down
        self.pending.append((blocks, t, rho))

    def until(self, horizon: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The failures before ``horizon`` not handed out yet: (times, unit indices, rescheduling times)."""
        while True:
            need = np.flatnonzero(self.up.min(axis=1) < horizon)
            if need.size == 0:
                break
            self._round(need)
        if not self.pending:
            return np.empty(0), np.empty(0, int), np.empty(0)
        blocks, T, R = (
            (np.concatenate(x) for x in zip(*self.pending))
            if len(self.pending) > 1
            else self.pending[0]
        )
        rows, cols = np.nonzero(horizon > T)
        t, unit, rho = T[rows, cols], blocks[rows] * self.units.width + cols, R[rows, cols]
        T[rows, cols] = np.inf  # handed out
        keep = np.isfinite(T).any(axis=1)
        self.pending = [(blocks[keep], T[keep], R[keep])] if keep.any() else []
        return t, unit, rho


class BulkFailures:
    """The failures of every unit of ``kinds``, in time order, window by window."""

    def __init__(self, kinds: list[Units], horizon: float) -> None:
        self.kinds = kinds
        self.blocks = [_Blocks(u) for u in kinds]
        rate = sum(u.rate() for u in kinds)
        self.max_step = WINDOW_EVENTS / rate if rate > 0 else np.inf
        self.step = min(horizon, self.max_step)
        self.horizon = 0.0

    def advance(self) -> list[Failure]:
        """Move the horizon on (the first window, then windows twice as long, up to
        :data:`WINDOW_EVENTS` failures each at the long-run rate) and return the failures of the
        new window in order: by time, then kind, then unit."""
        if self.horizon > 0:
            self.step = min(2.0 * self.step, self.max_step)
        self.horizon += self.step
        parts = [b.until(self.horizon) for b in self.blocks]
        t = np.concatenate([p[0] for p in parts])
        kind = np.concatenate([np.full(p[0].size, k) for k, p in enumerate(parts)])
        unit = np.concatenate([p[1] for p in parts])
        pos = np.concatenate([np.arange(p[0].size) for p in parts])
        out: list[Failure] = []
        order = np.lexsort((unit, kind, t))
        for ti, k, u, j in zip(
            t[order].tolist(), kind[order].tolist(), unit[order].tolist(), pos[order].tolist()
        ):
            kd, rho = self.kinds[k], parts[k][2]
            if kd.k == 1:
                out.append((ti, (kd.first + u,), (float(rho[j]),)))
            else:
                lo = kd.first + u * kd.k
                size = min(kd.k, kd.first + kd.count - lo)
                out.append((ti, tuple(range(lo, lo + size)), tuple(rho[j, :size].tolist())))
        return out
