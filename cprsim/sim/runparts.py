"""The parts of one replication's state, one job each (:class:`cprsim.sim.engine.Run` holds them
and coordinates them; each is usable and testable alone):

* :class:`Accounts`: the time the job spent in each phase and the replication's counters, and
  the :class:`~cprsim.sim.records.ReplicationResult` made from them.
* :class:`Phases`: what the job is doing now (compute, save, wait for nodes, restore), since when
  and at what rate, and the restore under way.
* :class:`FailureBook`: which nodes are down and until when, which of them the job waits for, the
  failed nodes of the recovery episode under way.
* :class:`Checkpoints`: what is saved: the last durable full checkpoint, the progress of the next
  one, a two-phase persist under way, the restore the tiers chose, and how a persist slows
  training.

They hold plain values in ``__slots__``: the job process caches them in locals and reads and sets
their fields directly, and a step that happens once per phase or per failure (a phase ends, a
rollback, a recovery ends) is written inline in ``Run`` rather than as a method here: a call
there is what the engine's hot path (``benchmarks/engine.py``) would pay for it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from cprsim.sim.records import ReplicationResult

if TYPE_CHECKING:  # pragma: no cover
    from cprsim.pls import ShardLedger
    from cprsim.sim.lifecycle import Fleet
    from cprsim.sim.tiers import TierState

#: the job's phases (:attr:`Phases.phase`)
COMPUTE, SAVE, RESCHED, LOAD, IDLE = range(5)
INF = float("inf")


class Accounts:
    """The replication's seconds per phase and its counters (all start at zero); :meth:`result`
    turns them into its :class:`ReplicationResult`."""

    __slots__ = (
        "checkpoints",
        "compute_s",
        "detection_s",
        "fail_events",
        "fails_embedding",
        "fails_job",
        "fails_trainer",
        "load_s",
        "lost_s",
        "memory_restores",
        "resched_s",
        "save_s",
        "storage_restores",
        "wait_s",
    )

    def __init__(self) -> None:
        #: seconds saving (blocking saves, snapshot stalls), restoring, of progress lost to
        #: rollbacks, waiting for nodes, computing (at whatever rate)
        self.save_s = self.load_s = self.lost_s = self.resched_s = self.compute_s = 0.0
        self.checkpoints = 0  #: checkpoints completed (two-phase: persisted)
        #: node failures by node type; job-level interruptions; failure events that hit the job
        self.fails_trainer = self.fails_embedding = self.fails_job = self.fail_events = 0
        #: of resched_s: waiting for failures to be detected, and for a machine (a lifecycle)
        self.detection_s = self.wait_s = 0.0
        #: tiered rollbacks that restored from peers' memory, and from storage
        self.memory_restores = self.storage_restores = 0

    def count_restore(self, tier: str) -> None:
        """A tiered rollback restored from ``tier`` (``"memory"``, ``"storage"`` or ``"none"``)."""
        if tier == "memory":
            self.memory_restores += 1
        elif tier == "storage":
            self.storage_restores += 1

    def result(
        self,
        rep: int,
        wall: float,
        useful: float,
        rate: float,
        ledger: ShardLedger | None,
        fleet: Fleet | None,
    ) -> ReplicationResult:
        """Replication ``rep``'s result: ``wall`` seconds for ``useful`` seconds of work at the
        strategy's full ``rate``; PLS from ``ledger``, the lifecycle's counts from ``fleet``."""
        # the lost progress was computed at the degraded rate: count its wall time as lost
        lost = self.lost_s / rate
        degraded = self.compute_s - useful - lost
        if abs(degraded) < 1e-9 * useful:  # float rounding of the phase sums
            degraded = 0.0
        position, age = ledger.timing(useful) if ledger is not None else (0.0, 0.0)
        return ReplicationResult(
            replication=rep,
            wall_s=wall,
            useful_s=useful,
            save_s=self.save_s,
            load_s=self.load_s,
            lost_s=lost,
            reschedule_s=self.resched_s,
            degraded_s=degraded,
            failures_trainer=self.fails_trainer,
            failures_embedding=self.fails_embedding,
            failures_job=self.fails_job,
            failure_events=self.fail_events,
            checkpoints=self.checkpoints,
            pls=ledger.pls(useful) if ledger is not None else 0.0,
            overhead=(wall - useful) / useful,
            ckpt_overhead=(self.save_s + self.load_s + lost + degraded) / useful,
            ettr=useful / wall if wall > 0 else 1.0,
            pls_position=position,
            pls_age=age,
            detection_s=self.detection_s,
            wait_s=self.wait_s,
            unfilled_s=fleet.finish() if fleet is not None else 0.0,
            machines_retired=fleet.retired if fleet is not None else 0,
            machines_cured=fleet.cured if fleet is not None else 0,
            failures_bad=fleet.failures_bad if fleet is not None else 0,
            memory_restores=self.memory_restores,
            storage_restores=self.storage_restores,
        )


class Phases:
    """The job's phase (:data:`COMPUTE`, :data:`SAVE`, :data:`RESCHED`, :data:`LOAD`, else
    :data:`IDLE`), when it started, the rate of progress while computing, and the restore under
    way (when it ends; the rest of one a failure nobody waits for interrupted)."""

    __slots__ = ("load_left", "load_until", "phase", "rate", "start")

    def __init__(self) -> None:
        self.phase = IDLE
        self.start = 0.0
        self.rate = 1.0
        self.load_until = 0.0
        self.load_left: float | None = None

    def compute_elapsed(self, computed: float, now: float) -> float:
        """The compute clock at ``now``: ``computed`` seconds of finished compute phases plus the
        one under way."""
        if self.phase == COMPUTE:
            return computed + (now - self.start)
        return computed


class FailureBook:
    """Which nodes are down (every failed node -> its up time), which of them the job waits for
    (-> the time it waits until), the failed nodes of the recovery under way, and whether the job
    must recover. Node ids as in :mod:`cprsim.sim.protocol`."""

    __slots__ = ("down", "episode", "job_node", "n_trainers", "recovering", "sharded", "up_at")

    def __init__(self, n_trainers: int, job_node: int, sharded: bool) -> None:
        self.up_at: dict[int, float] = {}
        self.down: dict[int, float] = {}
        self.episode: set[int] = set()
        self.recovering = False
        self.n_trainers = n_trainers
        self.job_node = job_node  #: the pseudo node of job-level interruptions
        self.sharded = sharded  #: the dense model is sharded across the trainers (no replica)

    def is_down(self, node: int, now: float) -> bool:
        """``node`` is down at ``now`` (it failed and is not back yet)."""
        return self.up_at.get(node, -1.0) > now

    def dense_lost(self, nodes: Iterable[int], now: float) -> bool:
        """The failure of ``nodes`` left no trainer holding the dense parameters
        (:meth:`cprsim.sim.protocol.RunView.dense_lost`)."""
        nt = self.n_trainers
        if not any(n < nt for n in nodes):
            return False
        if self.sharded:  # a trainer's shard of the dense model has no replica
            return True
        up_at = self.up_at
        return all(up_at.get(t, -1.0) > now for t in range(nt))

    def back(self, node: int, up: float) -> bool:
        """Failed ``node`` is back at ``up`` (the lifecycle found it a machine); says whether the
        job waits for it."""
        self.up_at[node] = up
        if node in self.down:
            self.down[node] = up
            return True
        return False

    def stall(self, nodes: Iterable[int], now: float) -> None:
        """The job waits for ``nodes`` (until each is back) and then recovers them."""
        down, up_at = self.down, self.up_at
        for n in nodes:
            down[n] = max(down.get(n, now), up_at.get(n, now))
        self.episode.update(nodes)
        self.recovering = True


class Checkpoints:
    """What is saved: the progress of the last durable full checkpoint (``durable``) and of the
    next one to take (``next``), a two-phase persist under way (``pending``: its progress and the
    wall time it is durable at), the load time of the tier the last rollback chose
    (``tier_load``), the tiers themselves (tiered checkpoints, else None), and the training
    slowdown while a persist runs (``slowdown``: two-phase and tiered, else 0)."""

    __slots__ = ("durable", "next", "pending", "slowdown", "tier_load", "tiers")

    def __init__(self, tau: float, tiers: TierState | None, slowdown: float) -> None:
        self.durable = 0.0
        self.next = tau
        self.pending: tuple[float, float] | None = None
        self.tier_load: float | None = None
        self.tiers = tiers
        self.slowdown = slowdown

    def restore_tier(self, now: float) -> str:
        """Tiered (``tiers`` set): choose the fastest tier that survived the failure; it becomes
        the durable checkpoint, its load time ``tier_load``; returns its name."""
        tiers = self.tiers
        assert tiers is not None
        r = tiers.restore(now)
        self.durable, self.tier_load = r.progress, r.load_s
        tiers.rolled_back(r.progress, r.tier)
        return r.tier

    def persisted(self, now: float, strict: bool) -> tuple[float, float] | None:
        """The pending two-phase persist, taken, if it has finished by ``now`` (``strict``: before
        ``now``; a persist finishing at the very instant of a failure does not count)."""
        p = self.pending
        if p is None:
            return None
        t = p[1]
        if t < now or (not strict and t <= now):
            self.pending = None
            return p
        return None

    def persist_window(self, now: float) -> tuple[bool, float]:
        """(a persist slows training at ``now``, the next time that may change: tiered, a persist's
        start or end or a snapshot's memory-ready time; two-phase, the running persist's end;
        ``inf`` if none)."""
        if self.tiers is not None:
            return self.tiers.persisting(now)
        p = self.pending
        if p is not None and p[1] > now:
            return True, p[1]
        return False, INF
