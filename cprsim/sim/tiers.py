"""Tiered (Gemini-style) checkpoints: memory snapshots replicated to peers, some persisted.

Pure bookkeeping, no SimPy: the engine tells a :class:`TierState` when it snapshots, when a
node's memory is lost and when it rolls back, and asks which tier a restore reads from.

**Model.** A snapshot stalls the job while every node copies its state into its own CPU memory
(``snapshot_s``); each node then sends it to its ``r`` peers (nodes of the same type, ``stride``
apart) in the background (``replicate_s``): the snapshot is *memory-ready* at
``start + snapshot_s + replicate_s``. Snapshots are numbered by *ordinal*: one more than the
ordinal of the state they were taken from (the last memory-ready snapshot, or the checkpoint a
rollback restored; 0 at the start); a snapshot whose ordinal is a multiple of ``persist_every``
is persisted to remote storage once memory-ready, after the persist before it (storage is
shared: persists queue), and is *durable* when written. A restore reads the newest snapshot from
the memory tier if every node's state survives in its own memory or a peer's, else the newest
durable checkpoint from storage, else starts over.

**Rules and simplifications** (vs Gemini, which keeps two buffers, retries, and streams
persists from whichever replica survives):

* Only the newest memory-ready snapshot is kept in memory (it overwrites the previous one when
  it becomes memory-ready); a snapshot is usable only once memory-ready, even from a node's own
  memory (conservative).
* Any node's memory loss aborts every snapshot still in flight (it never becomes memory-ready,
  is never persisted, and leaves the previous one in place) and cancels every persist not yet
  finished (the lost node's part is gone; no retry: the next persist is due k ordinals later).
* A node with 0 bytes needs nothing (always recoverable); its loss still aborts and cancels.
* A persist becoming due while an older one is queued (not yet started) replaces it: storage
  writes only the newest; a running persist is never interrupted by a newer one.
* A replacement node holds nothing of the snapshot in memory (neither its own state, even after
  a memory restore copied it back, nor its peers' copies) until the next snapshot.
* Ties (as in the engine): a loss at the very instant a snapshot becomes memory-ready or a
  persist finishes comes first (aborts/cancels it); any other call at that instant sees it
  done, and fixes it: report an instant's losses before anything else at that instant.
* Calls must come in non-decreasing time order (times in seconds); ``rolled_back`` acts at the
  time of the previous call.

Cost: O(1) amortized per snapshot, O(in-flight snapshots + queued persists) per loss,
O(r x nodes lost since the newest snapshot) per restore; the O(n) aggregates are computed once
per :class:`TierSpec`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

import numpy as np


class Restore(NamedTuple):
    """Where a restore reads from: ``tier`` ("memory", "storage" or "none": start over), the
    ``progress`` (training seconds) it rolls back to, and the time it takes, ``load_s``."""

    tier: str
    progress: float
    load_s: float


NONE = Restore("none", 0.0, 0.0)


@dataclass(frozen=True, eq=False)
class TierSpec:
    """A cluster's tiered-checkpoint parameters. Bytes, seconds, bytes/s."""

    bytes_per_node: np.ndarray  #: each node's state, bytes (0: needs nothing)
    groups: tuple[tuple[int, int], ...]  #: (first, count) per node type, tiling 0..n-1 in order
    replicas: int  #: r, peers holding a copy of each node's snapshot
    stride: int  #: peer m of node i is ``stride * m`` further on (mod count) in i's group
    snapshot_bps: float  #: per-node memory copy bandwidth
    memory_latency_s: float
    node_bps: float  #: per-node network bandwidth
    persist_every: int  #: k: snapshots of ordinal k, 2k, ... are persisted
    write_bps: float  #: storage aggregate write bandwidth
    read_bps: float  #: storage aggregate read bandwidth
    storage_latency_s: float

    def __post_init__(self) -> None:
        b = np.asarray(self.bytes_per_node, dtype=float)
        object.__setattr__(self, "bytes_per_node", b)
        object.__setattr__(self, "groups", tuple((int(f), int(c)) for f, c in self.groups))
        for name in ("replicas", "stride", "persist_every"):
            object.__setattr__(self, name, int(getattr(self, name)))
        nxt = 0
        for f, c in self.groups:
            if f != nxt or c < 0:
                raise ValueError(f"groups must tile 0..n-1 in order: {self.groups}")
            nxt = f + c
        if b.ndim != 1 or nxt != len(b) or (b < 0).any():
            raise ValueError("bytes_per_node: one non-negative count per node of the groups")
        if self.replicas < 0 or self.stride < 1 or self.persist_every < 1:
            raise ValueError("need replicas >= 0, stride >= 1, persist_every >= 1")
        if min(self.snapshot_bps, self.node_bps, self.write_bps, self.read_bps) <= 0:
            raise ValueError("bandwidths must be positive")
        if min(self.memory_latency_s, self.storage_latency_s) < 0:
            raise ValueError("latencies must be >= 0")

    @property
    def n(self) -> int:
        """Nodes, of every type."""
        return len(self.bytes_per_node)

    @cached_property
    def _max(self) -> float:
        return float(self.bytes_per_node.max()) if self.n else 0.0

    @cached_property
    def _sum(self) -> float:
        return float(self.bytes_per_node.sum())

    def peers(self, i: int) -> tuple[int, ...]:
        """``first + (i - first + stride*m) % count`` for m = 1..r, without i and repeats."""
        for first, count in self.groups:
            if first <= i < first + count:
                out: list[int] = []
                for m in range(1, self.replicas + 1):
                    p = first + (i - first + self.stride * m) % count
                    if p != i and p not in out:
                        out.append(p)
                return tuple(out)
        raise IndexError(f"node {i} is not in 0..{self.n - 1}")

    @cached_property
    def snapshot_s(self) -> float:
        """The stall: ``memory_latency + max_i bytes_i / snapshot_bps`` (all nodes copy at once)."""
        return self.memory_latency_s + self._max / self.snapshot_bps

    @cached_property
    def replicate_s(self) -> float:
        """Background: ``r * max_i bytes_i / node_bps`` (each node sends r copies on its link)."""
        return self.replicas * self._max / self.node_bps

    @cached_property
    def persist_s(self) -> float:
        """``storage_latency + max(sum_i bytes_i / write_bps, max_i bytes_i / node_bps)``:
        every node writes its part; all share the storage's aggregate bandwidth."""
        return self.storage_latency_s + max(self._sum / self.write_bps, self._max / self.node_bps)

    @cached_property
    def storage_restore_s(self) -> float:
        """``storage_latency + max(sum_i bytes_i / read_bps, max_i bytes_i / node_bps)``:
        every node reads its part."""
        return self.storage_latency_s + max(self._sum / self.read_bps, self._max / self.node_bps)

    def memory_restore_s(self, nodes: Iterable[int]) -> float:
        """``memory_latency + max_{i in nodes} bytes_i / node_bps``: each replacement pulls its
        state from a peer, in parallel; survivors roll back locally for free. 0 for no nodes."""
        nodes = list(nodes)
        if not nodes:
            return 0.0
        b = max(float(self.bytes_per_node[i]) for i in nodes)
        return self.memory_latency_s + b / self.node_bps

    def shard_storage_restore_s(self, nodes: Iterable[int]) -> float:
        """Partial recovery, only ``nodes`` read:
        ``storage_latency + sum_{i in nodes} bytes_i / min(read_bps, len(nodes) * node_bps)``."""
        nodes = list(nodes)
        if not nodes:
            return 0.0
        b = sum(float(self.bytes_per_node[i]) for i in nodes)
        return self.storage_latency_s + b / min(self.read_bps, len(nodes) * self.node_bps)


class _Snap(NamedTuple):
    start: float  #: when taken, s
    ready: float  #: memory-ready, s
    progress: float


class _Persist(NamedTuple):
    start: float
    end: float  #: durable at, s
    progress: float
    ordinal: int


class TierState:
    """One replication's tiers: the newest memory-ready snapshot, those in flight, the persist
    queue, the newest durable checkpoint, and the nodes whose memory was lost since the newest
    memory-ready snapshot. See the module docstring for the rules."""

    def __init__(self, spec: TierSpec) -> None:
        self.spec = spec
        self._stall = spec.snapshot_s
        self._to_ready = spec.snapshot_s + spec.replicate_s
        self._persist_s = spec.persist_s
        self._now = -np.inf
        self._flight: deque[_Snap] = deque()  # in flight, by start (= by ready time)
        self._mem: tuple[float, int] | None = None  # newest memory-ready: (progress, ordinal)
        self._lost: set[int] = set()  # nodes whose memory was lost since self._mem became ready
        self._ordinal = 0  # the ordinal of the state the job is at
        self._persists: deque[_Persist] = deque()  # not yet durable, by start
        self._durable: tuple[float, int] | None = None  # (progress, ordinal)
        self._version = 0  # bumped by every change but time's: keys the cache of `persisting`
        self._persisting: tuple[float, int, tuple[bool, float]] | None = None

    # -- time ------------------------------------------------------------------------------------
    def _advance(self, now: float, strict: bool) -> None:
        """Complete what finished before ``now`` (at ``now`` too unless ``strict``)."""
        if now < self._now:
            raise ValueError(f"time went back: {now} < {self._now}")
        self._now = now
        fl, k = self._flight, self.spec.persist_every
        while fl and (fl[0].ready < now or (not strict and fl[0].ready <= now)):
            s = fl.popleft()
            self._ordinal += 1
            self._mem, self._lost = (s.progress, self._ordinal), set()
            if self._ordinal % k == 0:
                q = self._persists
                if q and q[-1].start > s.ready:  # queued, not started: replaced by this one
                    q.pop()
                start = max(s.ready, q[-1].end) if q else s.ready
                q.append(_Persist(start, start + self._persist_s, s.progress, self._ordinal))
        q = self._persists
        while q and (q[0].end < now or (not strict and q[0].end <= now)):
            p = q.popleft()
            self._durable = (p.progress, p.ordinal)

    # -- events ----------------------------------------------------------------------------------
    def snapshot(self, now: float, progress: float) -> float:
        """A snapshot of ``progress`` (training s) taken at ``now`` (s); returns the stall, s."""
        self._version += 1
        self._advance(now, strict=False)
        self._flight.append(_Snap(now, now + self._to_ready, progress))
        return self._stall

    def lost(self, node: int, now: float) -> None:
        """``node``'s memory is lost at ``now`` (s): its own snapshot and its peers' copies.
        Aborts the snapshots in flight and cancels the persists not finished."""
        self._version += 1
        self._advance(now, strict=True)
        if not 0 <= node < self.spec.n:
            raise IndexError(f"node {node} is not in 0..{self.spec.n - 1}")
        self._lost.add(node)
        self._flight.clear()
        self._persists.clear()

    def abort_in_flight(self) -> None:
        """The newest snapshot's stall was interrupted (at the time of the previous call): it never
        becomes memory-ready."""
        self._version += 1
        if self._flight:
            self._flight.pop()

    def restore(self, now: float, failed: Iterable[int] = ()) -> Restore:
        """A global rollback at ``now`` (s): the tier, progress and load time (s).

        Memory if the newest memory-ready snapshot survives for every node (in its own memory or
        a peer's); the load is ``memory_restore_s`` of the nodes that lost their own copy. Else
        the newest durable checkpoint, ``storage_restore_s``. Else "none". ``failed`` nodes count
        as lost besides those reported by :meth:`lost` (for this answer only: report them)."""
        self._advance(now, strict=False)
        if self._mem is not None:
            lost = self._lost.union(failed)
            b = self.spec.bytes_per_node
            if all(b[i] == 0 or any(p not in lost for p in self.spec.peers(i)) for i in lost):
                return Restore("memory", self._mem[0], self.spec.memory_restore_s(lost))
        if self._durable is not None:
            return Restore("storage", self._durable[0], self.spec.storage_restore_s)
        return NONE

    def shard_restore(self, now: float, node: int) -> Restore:
        """Partial recovery of ``node`` alone at ``now`` (s): the newest memory-ready snapshot if
        a peer still holds its copy (``memory_restore_s([node])``), else the newest durable one
        (``shard_storage_restore_s([node])``), else "none"."""
        self._advance(now, strict=False)
        spec = self.spec
        peers = spec.peers(node)  # IndexError for an unknown node
        if self._mem is not None and (
            spec.bytes_per_node[node] == 0 or any(p not in self._lost for p in peers)
        ):
            return Restore("memory", self._mem[0], spec.memory_restore_s([node]))
        if self._durable is not None:
            return Restore("storage", self._durable[0], spec.shard_storage_restore_s([node]))
        return NONE

    def rolled_back(self, progress: float, tier: str) -> None:
        """The job rolled back to ``progress`` (training s) from ``tier``: snapshots and persists
        newer than it are discarded; unless from "memory", the memory tier holds nothing usable
        until the next snapshot. Later snapshots count their ordinal from the restored state."""
        self._version += 1
        if tier not in ("memory", "storage", "none"):
            raise ValueError(f"unknown tier {tier!r}")
        self._advance(self._now, strict=False)
        self._flight = deque(s for s in self._flight if s.progress <= progress)
        self._persists = deque(p for p in self._persists if p.progress <= progress)
        if self._durable is not None and self._durable[0] > progress:
            self._durable = None
        if tier != "memory" or (self._mem is not None and self._mem[0] > progress):
            self._mem = None
        base = [s for s in (self._mem, self._durable) if s is not None]
        self._ordinal = max(base)[1] if base else 0

    def persisting(self, now: float) -> tuple[bool, float]:
        """(is a persist running at ``now``, the next time that may change it: a persist's start or
        end, or an in-flight snapshot's memory-ready time, when a persist may be queued; inf if none)."""
        if (
            self._persisting is not None
            and self._persisting[0] == now
            and self._persisting[1] == self._version
        ):
            return self._persisting[2]
        self._advance(now, strict=False)
        busy, nxt = False, float("inf")
        for p in self._persists:
            if p.start <= now < p.end:
                busy, nxt = True, min(nxt, p.end)
            elif p.start > now:
                nxt = min(nxt, p.start)
        if self._flight:
            nxt = min(nxt, self._flight[0].ready)
        self._persisting = (now, self._version, (busy, nxt))
        return busy, nxt

    # -- accessors -------------------------------------------------------------------------------
    def durable_progress(self, now: float) -> float | None:
        """Progress (training s) of the newest checkpoint durable by ``now``; None if none."""
        self._advance(now, strict=False)
        return None if self._durable is None else self._durable[0]

    def memory_progress(self, now: float) -> float | None:
        """Progress (training s) of the newest memory-ready snapshot at ``now``, recoverable or
        not; None if the memory tier holds none."""
        self._advance(now, strict=False)
        return None if self._mem is None else self._mem[0]
