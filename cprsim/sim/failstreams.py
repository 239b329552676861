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

**Large kinds: lazy units** (:class:`_Lazy`, issue 29). The blocks still draw every unit's first
lifetime, ~0.1 us a node per replication, however few fail. A kind of at least
:data:`LAZY_UNITS` units whose lifetimes are exponential or Weibull is drawn lazily instead: the
units that have not failed yet are exchangeable (each one's first lifetime, a residual life under
``stationary``, is known only to exceed the last horizon ``h``), so a window ``[h, H)`` draws how
many of them fail in it (binomial, ``P(L < H | L > h)``), which ones (uniformly among them), and
when (inverse transform of ``L`` truncated to ``[h, H)``), from the kind's stream ``rng(POOL)``;
a unit that has failed is a renewal process of its own from then on, its later lifetimes and
rescheduling times drawn from ``rng(POOL + 1)`` in rounds over the units that need one (by unit
index). The same distribution of failures, different draws (a unit's draws then depend on the
number of units); the cost is per failure and per window, flat in the number of units.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from cprsim.failures.distributions import Distribution

#: a kind of at least this many units with exponential or Weibull lifetimes is drawn lazily
#: (:class:`_Lazy`); smaller ones (every shipped scenario) keep the block layout
LAZY_UNITS = 4 * 1024

#: the block numbers of a lazy kind's two streams (no kind has that many blocks): ``POOL``, the units
#: that have not failed yet; ``POOL + 1``, the later lifetimes and rescheduling times
POOL = 1 << 30

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


class _FirstLife:
    """The first lifetime of a lazy kind's units (a residual life under ``stationary``), in a
    scale where its law is simple: the cumulative hazard ``x = (t / s)^b`` is Exp(1) for an
    exponential (``b = 1``) or a fresh Weibull; a Weibull's residual life has ``x ~ Gamma(1 / b)``
    (its density ``S(t) / mean``). It gives the chance that a unit alive at ``h`` fails before ``H``
    and draws such failure times (inverse transform, accurate for tiny chances)."""

    def __init__(self, dist: Distribution, stationary: bool) -> None:
        self.s = dist.scale
        self.b = 1.0 if dist.family == "exponential" else dist.shape
        self.gamma = stationary and dist.family == "weibull"

    def _x(self, t: float) -> float:
        return float((t / self.s) ** self.b)

    def _q(self, h: float, H: float) -> tuple[float, float, bool]:
        """Gamma scale: (the survival at ``h``, the mass of ``[h, H)``, the mass is taken off the
        survival, not added to the distribution function, as it is the more accurate)."""
        from scipy import special  # only for a stationary Weibull (scipy is slow to import)

        a, xh, xH = 1.0 / self.b, self._x(h), self._x(H)
        qh = float(special.gammaincc(a, xh))
        if qh < 0.5:
            return qh, qh - float(special.gammaincc(a, xH)), True
        return qh, float(special.gammainc(a, xH) - special.gammainc(a, xh)), False

    def p(self, h: float, H: float) -> float:
        """``P(L < H | L >= h)``."""
        if not self.gamma:
            return float(-np.expm1(-(self._x(H) - self._x(h))))
        qh, mass, _ = self._q(h, H)
        return min(1.0, mass / qh) if qh > 0 else 1.0

    def times(self, h: float, H: float, v: np.ndarray) -> np.ndarray:
        """Failure times given ``h <= L < H``, one per uniform draw in ``v``."""
        a = 1.0 / self.b
        if not self.gamma:
            xh = self._x(h)
            x = xh - np.log1p(-v * -np.expm1(-(self._x(H) - xh)))
        else:
            from scipy import special

            qh, mass, tail = self._q(h, H)
            if tail:
                x = special.gammainccinv(a, qh - v * mass)
            else:
                x = special.gammaincinv(a, float(special.gammainc(a, self._x(h))) + v * mass)
        t = self.s * np.asarray(x) ** (1.0 / self.b)
        return np.clip(t, h, np.nextafter(H, 0.0))  # rounding never leaves the window


class _Lazy:
    """The units of one large :class:`Units` drawn lazily (module doc, *Large kinds*): those not
    failed yet as one pool known to live past ``h``; those that have failed (``failed``, sorted)
    with the time each starts its current lifetime (``up``); and the failures drawn but not handed
    out yet. Its :meth:`until` is :meth:`_Blocks.until`'s."""

    @staticmethod
    def fits(units: Units) -> bool:
        """Lazy draws for this kind: many units, lifetimes with a closed-form inverse."""
        return units.n_units >= LAZY_UNITS and units.dist.family in ("exponential", "weibull")

    def __init__(self, units: Units) -> None:
        self.units = units
        self.first = _FirstLife(units.dist, units.stationary)
        self.pool_rng, self.rng = units.rng(POOL), units.rng(POOL + 1)
        self.h = 0.0
        self.failed = np.empty(0, np.int64)
        self.up = np.empty(0)
        last = units.count - (units.n_units - 1) * units.k  # nodes in the last unit
        self.short = last if last < units.k else 0
        #: (unit indices, failure times, rescheduling times (n[, k]))
        self.pending: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    def _rho(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """Rescheduling times of ``n`` failed units (``n x k`` for groups; a constant draws nothing)."""
        u = self.units
        shape = (n, u.k) if u.k > 1 else (n,)
        if u.resched.family == "constant":
            return np.full(shape, u.resched.scale)
        return np.asarray(u.resched.sample(rng, shape), float)

    def _next_up(self, unit: np.ndarray, t: np.ndarray, rho: np.ndarray) -> np.ndarray:
        """When units that failed at ``t`` start their next lifetime."""
        u = self.units
        if u.renew_at_failure:
            return t.copy()
        if u.k == 1:
            return t + rho
        down = rho.max(axis=1)
        if self.short:  # the last, smaller group: its existing members only
            last = unit == u.n_units - 1
            down[last] = rho[last, : self.short].max(axis=1)
        return t + down

    def _fresh(self, horizon: float) -> None:
        """The units failing for the first time in ``[h, horizon)``: how many, which, when."""
        rng, left = self.pool_rng, self.units.n_units - self.failed.size
        n = int(rng.binomial(left, self.first.p(self.h, horizon))) if left > 0 else 0
        if n > 0:
            rank = np.sort(rng.choice(left, n, replace=False))
            # the rank-th unit not failed yet: skip the failed units at or below it
            gaps = self.failed - np.arange(self.failed.size)
            unit = rank + np.searchsorted(gaps, rank, side="right")
            t = self.first.times(self.h, horizon, rng.random(n))
            rho = self._rho(rng, n)
            self.pending.append((unit, t, rho))
            failed = np.concatenate((self.failed, unit))
            up = np.concatenate((self.up, self._next_up(unit, t, rho)))
            order = np.argsort(failed, kind="stable")
            self.failed, self.up = failed[order], up[order]
        self.h = horizon

    def until(self, horizon: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The failures before ``horizon`` not handed out yet: (times, unit indices, rescheduling times)."""
        if horizon > self.h:
            self._fresh(horizon)
        while True:  # rounds of the failed units' later lifetimes, in unit order
            need = np.flatnonzero(self.up < horizon)
            if need.size == 0:
                break
            unit = self.failed[need]
            t = self.up[need] + np.asarray(self.units.dist.sample(self.rng, need.size), float)
            rho = self._rho(self.rng, need.size)
            self.pending.append((unit, t, rho))
            self.up[need] = self._next_up(unit, t, rho)
        if not self.pending:
            return np.empty(0), np.empty(0, int), np.empty(0)
        unit, T, R = (np.concatenate(x) for x in zip(*self.pending))
        now = horizon > T
        later = ~now
        self.pending = [(unit[later], T[later], R[later])] if later.any() else []
        order = np.argsort(unit[now], kind="stable")
        return T[now][order], unit[now][order], R[now][order]


class FirstFailures(_Lazy):
    """The first failures only of a large kind's units (:class:`_Lazy` without renewals): a
    node lifecycle's first machines (:class:`~cprsim.sim.lifecycle.Fleet`), whose later
    lifetimes the fleet draws itself. Its units' rescheduling times are never used (drawn as
    the kind's :attr:`Units.resched`, a constant draws nothing)."""

    @staticmethod
    def fits(units: Units) -> bool:
        """First failures drawn lazily: as :meth:`_Lazy.fits`."""
        return _Lazy.fits(units)

    def _next_up(self, unit: np.ndarray, t: np.ndarray, rho: np.ndarray) -> np.ndarray:
        return np.full(t.shape, np.inf)  # the fleet takes it from here


class BulkFailures:
    """The failures of every unit of ``kinds``, in time order, window by window."""

    def __init__(self, kinds: list[Units], horizon: float) -> None:
        self.kinds = kinds
        self.blocks: list[_Blocks | _Lazy] = [
            _Lazy(u) if _Lazy.fits(u) else _Blocks(u) for u in kinds
        ]
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
