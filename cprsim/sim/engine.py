"""The SimPy engine: one job process, failure processes that interrupt it.

SimPy's machine-shop pattern: failure processes call ``run.fail(nodes, rhos)``, which interrupts
the job; the job process catches ``simpy.Interrupt``, books the time of the phase it was in, lets
the strategy roll back or count lost updates, and recovers: it waits until every failed node is
rescheduled, then restores (the strategy says how long).

Failure processes: ONE for the renewal processes of all nodes and fixed failure domains (sampled in
bulk, :mod:`cprsim.sim.failstreams`, and merged into one time-ordered stream), one per
random-membership failure domain, one for job-level interruptions, one for injected failures and
a replayed trace. (``simulate_one(..., streams="per-node")`` runs the former layout instead: one
process and one stream per node and per fixed group; kept for comparison and benchmarks.)

Phases of the job: COMPUTE (progress towards the next checkpoint or the end), SAVE (blocking
save, or the two-phase snapshot stall), RESCHED (waiting for failed nodes), LOAD (restore).
A failure can strike in any of them; a checkpoint counts only when completely written.

**Ties.** Failure and repair timeouts are scheduled with SimPy's URGENT priority and the job's
with NORMAL, so at one instant the order is: failures/repairs first (in the order their
processes were created: the bulk stream of nodes and fixed domains, itself ordered nodes by id,
then fixed domains; then random-membership domains, job-level interruptions, injected and replay),
then the job's phase end. A failure landing exactly on a checkpoint's completion therefore aborts
that checkpoint, and a two-phase persist finishing at the very instant of a failure does not count.

**Quiet phases.** Every failure is a scheduled event (its process schedules it ahead), so a phase
of the job that ends before the first scheduled event cannot be interrupted: the job moves the
clock to its end at once instead of yielding a timeout (:meth:`Run._quiet`; a tie still goes
through SimPy). The clock, the order of events and the results are those of one timeout per
phase (``QUIET_PHASES = False``), but the checkpoints between two failures cost no SimPy event.
The timeout of a phase a failure cut short stays in SimPy's queue, for nobody: the job abandons it
(``Env.abandon_wait``), so it does not hold the next phases back. A failure then costs two SimPy
events: its own and its interrupt of the job.

Cost: O(events), where the events are failures, repairs and checkpoints (never per iteration);
SimPy events only around failures and repairs; plus a few numpy calls per block of 1,024 nodes
(the per-node layout: O(nodes) processes and streams). What a replication derives from the
scenario alone (costs, the strategy's validated parameters, ...) is made once per scenario.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import simpy
from pydantic import BaseModel

from cprsim.costs import Costs, costs_of
from cprsim.errors import InputError
from cprsim.failures.distributions import Distribution
from cprsim.pls import ShardLedger
from cprsim.scenario import Scenario
from cprsim.sim import strategies
from cprsim.sim.clock import ComputeClock
from cprsim.sim.failstreams import BulkFailures, Units
from cprsim.sim.lifecycle import Fleet
from cprsim.sim.records import Event, ReplicationResult
from cprsim.sim.runparts import (
    COMPUTE,
    IDLE,
    LOAD,
    RESCHED,
    SAVE,
    Accounts,
    Checkpoints,
    FailureBook,
    Phases,
)
from cprsim.sim.simpy_adapter import Env
from cprsim.sim.tiers import TierSpec, TierState
from cprsim.streams import LazyStream, stream

if TYPE_CHECKING:  # pragma: no cover
    from cprsim.sim.protocol import RunSetup, RunView

INF = float("inf")

#: runaway guards: a replication that needs more failure events or checkpoints than this is
#: stopped with a one-line error (the regime is hopeless, or the interval absurdly short)
MAX_FAILURE_EVENTS = 200_000
MAX_CHECKPOINTS = 2_000_000
#: and one whose simulated wall time passes this many times its work ``W`` (an hour at least), or
#: whose save would: the job is not progressing (the preflight refuses such a scenario unless
#: forced, :func:`cprsim.planner.feasibility.check_progress`; this is the second line)
MAX_WALL_RATIO = 1000.0

#: the bulk stream's first window: this many times the job's failure-free duration (most jobs end
#: within it; a longer one draws further windows)
BULK_HORIZON = 1.5

#: the failure layouts :func:`simulate_one` accepts
STREAMS = ("bulk", "per-node")

#: a phase that ends before the next scheduled event moves the clock on without a SimPy event
#: (:meth:`Run._quiet`); False: every phase is a SimPy timeout (the same results, for comparison)
QUIET_PHASES = True


class Runaway(InputError):
    """A replication that would run (nearly) forever: one line saying why."""


#: a scheduled failure: (wall time s, node ids, rescheduling time per node s)
Scheduled = tuple[float, tuple[int, ...], tuple[float, ...]]


def _urgent_timeout(env: Env, delay: float) -> simpy.Event:
    return env.urgent(delay)


def _urgent_at(env: Env, t: float) -> simpy.Event:
    """An URGENT timeout that fires at exactly ``t`` (``now + (t - now)`` may round differently)."""
    return env.urgent_at(t)


class _Setup(NamedTuple):
    """The constants of one replication a strategy is made from (a
    :class:`~cprsim.sim.protocol.RunSetup`: the run itself does not exist yet); the run keeps it
    (``Run.setup``) and reads its constants from it."""

    scenario: Scenario
    costs: Costs
    n_trainers: int
    n_embedding: int
    W: float
    tau: float
    job_node: int
    shared: dict[str, Any]
    stream: LazyStream  #: the strategy's own stream ("strategy", this replication): made when used

    @property
    def rng(self) -> np.random.Generator:
        """The strategy's random stream (made on its first use)."""
        return self.stream.get()


class Run:
    """One replication: it holds its parts and coordinates them (the job process, the failure
    side, what strategies see). Built in one step: every field has its value once constructed.

    Given: the scenario, its costs, the SimPy environment, ``record``, the sizes, ``W`` and ``tau``,
    the per-scenario ``shared`` dict, the node lifecycle (``fleet``: made before the run, started
    by :func:`simulate_one` once the run exists) and ``strategy_of`` (the strategy's class and
    validated parameters; default: the scenario's, validated here). Made from them: the
    :class:`_Setup` of the constants (what the strategy is made from: it sees the run only through
    :class:`~cprsim.sim.protocol.RunView`, in its hooks), the strategy, its ledger, the tiers,
    the compute clock, and the parts (:mod:`cprsim.sim.runparts`): ``acct`` (seconds and
    counters), ``phases`` (what the job is doing), ``book`` (which nodes are down), ``ckpt`` (what
    is saved). Only ``job`` is set later: the job process is created after the failure processes
    (SimPy's order at an instant), and they need the run.
    """

    __slots__ = (
        "acct",
        "book",
        "ckpt",
        "clock",
        "env",
        "events",
        "fleet",
        "job",
        "ledger",
        "phases",
        "progress",
        "record",
        "setup",
        "strategy",
        "tiers",
        "wall_cap",
    )

    def __init__(
        self,
        scenario: Scenario,
        costs: Costs,
        env: Env,
        record: bool,
        n_trainers: int,
        n_embedding: int,
        W: float,
        tau: float,
        shared: dict[str, Any] | None = None,
        fleet: Fleet | None = None,
        strategy_of: tuple[type[strategies.Strategy], BaseModel] | None = None,
        replication: int = 0,
    ) -> None:
        s, ck = scenario, scenario.checkpoint
        job_node = n_trainers + n_embedding
        shared = {} if shared is None else shared
        #: the replication's constants (what the strategy is made from, before the run exists)
        #: and the strategy's random stream, named by the replication's number
        self.setup = _Setup(
            s,
            costs,
            n_trainers,
            n_embedding,
            W,
            tau,
            job_node,
            shared,
            LazyStream(s.seed, replication, "strategy"),
        )
        self.env = env
        self.record = record  #: keep the event log (``events``)
        #: the node lifecycle (scenario [lifecycle]): machines, pools, repairs; None: [reschedule]
        self.fleet = fleet
        if strategy_of is None:
            cls = strategies.get(s.strategy.name)
            strategy_of = cls, cls.Params.model_validate(s.strategy.params)
        cls, params = strategy_of
        self.strategy: strategies.Strategy = cls(params, self.setup)
        #: the strategy's PLS ledger (None: it never loses an update)
        self.ledger: ShardLedger | None = self.strategy.make_ledger(self.setup)
        #: tiered checkpoints (checkpoint.mode = "tiered"); None: blocking or two-phase
        self.tiers: TierState | None = None
        if ck.mode == "tiered":
            spec = shared.get("tier_spec")
            if spec is None:
                spec = shared["tier_spec"] = tier_spec(s, costs)
            self.tiers = TierState(spec)
        #: the job's compute clock (a failure clock is ``"computing"``: ``[failures.clock]``)
        self.clock: ComputeClock | None = None
        if s.failures.clock.computing:
            self.clock = ComputeClock(env, self._computing, self._compute_elapsed)
        #: the simulated wall time past which the job is not progressing (:data:`MAX_WALL_RATIO`)
        self.wall_cap = MAX_WALL_RATIO * max(W, 3600.0)
        self.progress = 0.0
        self.acct = Accounts()
        self.phases = Phases()
        self.book = FailureBook(n_trainers, job_node, s.cluster.dense == "sharded")
        slowdown = ck.persist_slowdown if ck.mode in ("two-phase", "tiered") else 0.0
        self.ckpt = Checkpoints(tau, self.tiers, slowdown)
        #: the job process (:func:`simulate_one` starts it after the failure processes); None: a
        #: run without one (e.g. made by hand in a test): a failure interrupts nothing
        self.job: simpy.Process | None = None
        self.events: list[Event] = []

    # -- the constants (RunSetup), from the setup ------------------------------------------------
    @property
    def scenario(self) -> Scenario:
        """The scenario being simulated."""
        return self.setup.scenario

    @property
    def costs(self) -> Costs:
        """The scenario's costs."""
        return self.setup.costs

    @property
    def n_trainers(self) -> int:
        """Trainers: nodes ``0 .. n_trainers - 1``."""
        return self.setup.n_trainers

    @property
    def n_embedding(self) -> int:
        """Embedding servers: the nodes after the trainers."""
        return self.setup.n_embedding

    @property
    def W(self) -> float:
        """The job's failure-free length (s of progress)."""
        return self.setup.W

    @property
    def tau(self) -> float:
        """The checkpoint interval (s of progress)."""
        return self.setup.tau

    @property
    def job_node(self) -> int:
        """The pseudo node of job-level interruptions (``n_trainers + n_embedding``)."""
        return self.setup.job_node

    @property
    def shared(self) -> dict[str, Any]:
        """The per-scenario cache (kept for every replication of one scenario and costs)."""
        return self.setup.shared

    @property
    def rng(self) -> np.random.Generator:
        """The strategy's random stream (made on its first use)."""
        return self.setup.stream.get()

    @property
    def now(self) -> float:
        """The simulated wall clock (``env.now``)."""
        return self.env.now

    @property
    def up_at(self) -> dict[int, float]:
        """Every failed node -> its up time (:attr:`FailureBook.up_at`)."""
        return self.book.up_at

    def _computing(self) -> bool:
        return self.phases.phase == COMPUTE

    def _compute_elapsed(self) -> float:
        """The job's compute clock: seconds computed so far, the phase under way included."""
        return self.phases.compute_elapsed(self.acct.compute_s, self.env.now)

    def wait_life(self, node_type: str) -> Callable[[float], simpy.Event]:
        """How a failure process of ``node_type`` (``"trainer"``, ``"embedding"``, ``"job"``) waits
        for a lifetime: an URGENT wall timeout, or (``failures.clock``: ``"computing"``) an event
        at that much compute time from now."""
        if self.clock is not None and self.scenario.failures.clock.of(node_type) == "computing":
            return self.clock.after
        env = self.env
        return lambda dt: _urgent_timeout(env, dt)

    # -- what strategies use (cprsim.sim.protocol.RunView: the docs of each member are there) ------
    def log(self, kind: str, node: int = -1, value: float = 0.0, t: float | None = None) -> None:
        """Record an event (``record``: else nothing)."""
        if self.record:
            self.events.append(Event(self.env.now if t is None else t, kind, node, value))

    def rollback(self) -> None:
        """Full recovery: the work since the last durable full checkpoint must be re-executed.

        Updates that partial recoveries lost after that checkpoint are re-executed too: the
        ledger forgets them (what was lost before it stays lost: the checkpoint holds it).
        """
        ckpt = self.ckpt
        if ckpt.tiers is not None:  # the fastest tier that survived the failure
            tier = ckpt.restore_tier(self.env.now)
            self.acct.count_restore(tier)
            if self.record:
                self.log("tier_restore", -1, ("none", "memory", "storage").index(tier))
        durable = ckpt.durable
        lost = self.progress - durable
        if lost > 0:
            self.acct.lost_s += lost
            if self.record:
                self.log("rollback", -1, lost)
        # the parts' fields are set here, not through their methods: once per failure (hot path)
        self.progress = durable
        ckpt.next = durable + self.setup.tau
        ckpt.pending = None  # a two-phase persist under way is dropped
        if self.ledger is not None:
            self.ledger.rollback(durable)

    def lose_shard(self, j: int, weight: float | None = None) -> None:
        """Partial recovery of embedding shard ``j``: its updates since its last save are lost."""
        lost = self.ledger.fail(j, self.progress, weight)  # type: ignore[union-attr]
        if self.record:
            nt = self.setup.n_trainers
            self.log("restore", nt + j, self.progress)
            if lost > 0:
                self.log("pls", nt + j, lost / self.setup.W)

    def dense_lost(self, nodes: Iterable[int]) -> bool:
        """The failure of ``nodes`` left no trainer up: no peer holds the dense parameters, so
        they come from the last checkpoint (a partial strategy cannot copy them from a replica)."""
        return self.book.dense_lost(nodes, self.env.now)

    def commit_full(self, progress: float) -> None:
        """A full checkpoint of ``progress`` is durable: the next rollback goes back to it."""
        self.ckpt.durable = progress

    def take_tier_load(self, default: float) -> float:
        """The load time of the tier the last rollback chose (tiered checkpoints), else ``default``."""
        ckpt = self.ckpt
        t = ckpt.tier_load
        if t is None:
            return default
        ckpt.tier_load = None  # taken once
        return t

    # -- failure side -------------------------------------------------------------------------------
    def fail(self, nodes: Iterable[int], rhos: Iterable[float]) -> None:
        """``nodes`` fail now, each back ``rhos`` seconds later (with a lifecycle, once the fleet
        finds it a machine; a job-level interruption once detected and restarted); nodes already
        down are skipped. Counts the failures, loses what their memory held (tiered), and interrupts
        the job with the new ones (beyond :data:`MAX_FAILURE_EVENTS` events, :class:`Runaway`)."""
        now = self.env.now
        book, acct, fleet, tiers = self.book, self.acct, self.fleet, self.tiers
        up_at, nt, job_node = book.up_at, book.n_trainers, book.job_node
        new = []
        for n, r in zip(nodes, rhos):
            if up_at.get(n, -1.0) > now:  # already down: it cannot fail again
                continue
            if fleet is not None and n != job_node:  # the lifecycle says when it is back
                up_at[n] = INF
                fleet.on_fail(n)
            elif fleet is not None:  # a job-level interruption: detected, then restarted
                up_at[n] = now + fleet.job_interrupted(n) + r
            else:
                up_at[n] = now + r
            if tiers is not None and n != job_node:
                tiers.lost(n, now)  # its memory: its own snapshot and the copies it held
            new.append(n)
            if n < nt:  # counted here, not in a method of the accounts: once per failed node
                acct.fails_trainer += 1
            elif n == job_node:
                acct.fails_job += 1
            else:
                acct.fails_embedding += 1
            if self.record:
                # a job-level interruption concerns no node (-1); the value: how long it is down,
                # as known now (with a lifecycle a node waits for a machine, inf: `back` says when)
                self.log("fail", -1 if n == job_node else n, r if fleet is None else up_at[n] - now)
        if new and self.job is not None and self.job.is_alive:
            acct.fail_events += 1
            if not now <= self.wall_cap:
                self._no_progress(now)
            if acct.fail_events > MAX_FAILURE_EVENTS:
                self._too_many_failures(now)
            if self.ckpt.pending is not None:
                self._settle(strict=True)
            self.job.interrupt(new)

    def _too_many_failures(self, now: float) -> None:
        """Stop a replication past :data:`MAX_FAILURE_EVENTS` failure events: :class:`Runaway`."""
        W = self.setup.W
        raise Runaway(
            f"{self.scenario.name}: stopped after {MAX_FAILURE_EVENTS:,} failure events at "
            f"{self.progress / 3600:.3g} h of {W / 3600:.3g} h of progress ({now / 3600:.3g} h of wall "
            "time): failures come faster than the job can save and recover; give nodes a longer MTBF, "
            "or shorter saves and restarts (`cprsim plan` says whether the job can finish)"
        )

    def _too_many_checkpoints(self) -> None:
        """Stop a replication past :data:`MAX_CHECKPOINTS` checkpoints: :class:`Runaway`."""
        W, tau = self.setup.W, self.setup.tau
        raise Runaway(
            f"{self.scenario.name}: more than {MAX_CHECKPOINTS:,} checkpoints in one "
            f"replication (interval {tau:.3g} s for {W / 3600:.3g} h of work): "
            "choose a longer checkpoint.interval_h"
        )

    def _no_progress(self, t: float, save: float | None = None) -> None:
        """Stop a replication whose simulated wall time ``t`` passes (or whose ``save`` due now
        would end past) :data:`MAX_WALL_RATIO` times its work: :class:`Runaway`, one line."""
        past = f"past {MAX_WALL_RATIO:.0f}x the job's {self.W / 3600:.3g} h of work"
        when = (
            f"stopped at {t / 3600:.3g} h of wall time, {past}"
            if save is None
            else f"a save of {save:.3g} s due at {t / 3600:.3g} h of wall time would end {past}"
        )
        raise Runaway(
            f"{self.scenario.name}: {when}, with {self.progress / 3600:.3g} h of progress: the job "
            "is not progressing (its saves, restores or delays are too long for the time between "
            "failures; `cprsim plan` says whether the job can finish)"
        )

    def node_back(self, n: int, up: float) -> None:
        """The lifecycle chose a machine for failed node ``n``: it is back at ``up``. A job waiting
        for it (or training at a rate that depends on it) is interrupted to take the news."""
        if self.record:
            self.log("back", n, up)
        waited = self.book.back(n, up)
        changed = self.strategy.on_node_back(self, n, up)
        job = self.job
        phase = self.phases.phase
        if (
            job is not None
            and job.is_alive
            and ((phase == RESCHED and waited) or (phase == COMPUTE and changed))
        ):
            job.interrupt([])

    def _book_resched(self, a: float, b: float) -> None:
        """The job waited for nodes from ``a`` to ``b``: book it (and its lifecycle split)."""
        acct = self.acct
        acct.resched_s += b - a
        if self.fleet is not None and b > a:
            det, wait = self.fleet.critical_split(self.book.down, a, b)
            acct.detection_s += det
            acct.wait_s += wait

    def _settle(self, strict: bool) -> None:
        """Commit a two-phase checkpoint whose background persist has finished."""
        done = self.ckpt.persisted(self.env.now, strict)
        if done is not None:
            p, t = done
            self.acct.checkpoints += 1
            self.log("persist_end", -1, p, t=t)
            self.strategy.on_commit(self, p)

    # -- the job process ----------------------------------------------------------------------------
    def _quiet(self, dt: float) -> bool:
        """Move the clock on by ``dt`` at once if nothing can happen meanwhile, and say so.

        Only a scheduled event changes anything (every failure is one, scheduled ahead), so a phase
        that ends before the next one in the queue cannot be interrupted: the job goes on as if its
        timeout had fired (the same clock, the same order), without a SimPy event. At a tie the
        phase goes through SimPy: a failure at that very instant comes first.
        """
        env = self.env
        return QUIET_PHASES and env.skip_to(env.now + dt)  # end: what a timeout would be due at

    def job_process(
        self,
    ) -> Generator[simpy.Event, Any, None]:  # long: the hot loop (phases inline)
        """The job's SimPy process: compute to the next checkpoint or the end, save, recover after
        each failure, until progress reaches ``W``.

        The hot phases (compute, blocking save) are inline, with the parts in locals: a method
        call or a generator per phase would cost the engine's inner loop (``benchmarks/engine.py``).
        """
        env, strat, acct, ph, ckpt, book = (
            self.env,
            self.strategy,
            self.acct,
            self.phases,
            self.ckpt,
            self.book,
        )
        two_phase = self.scenario.checkpoint.mode == "two-phase"
        tiers = (
            self.tiers
        )  # tiered: the save is the snapshot's stall; the tiers replicate and persist
        timeout, W, tau, rec, wall_cap = env.timeout, self.W, self.tau, self.record, self.wall_cap
        save_cost, commit, clock, ledger = strat.save_s, strat.on_commit, self.clock, self.ledger
        # a strategy that keeps the base class's saves (a constant time; a full checkpoint, its
        # ledger told) has them in line: two calls fewer per checkpoint
        Base = strategies.Strategy
        save_s = strat.costs.save_s if type(strat).save_s is Base.save_s else None
        full_commit = type(strat).on_commit is Base.on_commit
        # the hot phases skip in line, as `_quiet` does: a phase ending before the first scheduled
        # event moves the clock (the adapter's `skip_to`)
        skip_to, skip, abandon_wait, job = env.skip_to, QUIET_PHASES, env.abandon_wait, self.job
        assert job is not None  # the process runs as `self.job` (simulate_one)
        # the rate can change during a compute step only while a persist may slow training or the
        # strategy's own rate varies (it overrides rate_at, and Strategy.rate_varies says so now):
        # otherwise a fast path
        slowed = ckpt.slowdown > 0
        own_rate = type(strat).rate_at is not Base.rate_at
        varies = strat.rate_varies
        # whole cycles in one call while no event can interrupt them (Run._quiet_cycles): a
        # blocking save of constant time (its seconds; None: not here), the base class's commit,
        # no tiers, log or compute clock
        plain = skip and not two_phase and tiers is None and not rec and clock is None
        cycle_save = save_s if plain and full_commit else None
        while True:
            try:
                if book.recovering:
                    yield from self._recover()
                    continue
                progress = self.progress
                if progress >= W:
                    break
                if progress >= ckpt.next:
                    if two_phase:
                        yield from self._save_two_phase()
                        continue
                    now = env.now
                    ph.phase, ph.start = SAVE, now
                    if rec:
                        self.log("save_start", -1, progress)
                    if tiers is not None:
                        dt = tiers.snapshot(now, progress)
                    else:
                        dt = save_s if save_s is not None else save_cost(self)
                    end = now + dt  # the clock once saved: a timeout's time, or the skip's
                    if not end <= wall_cap:
                        self._no_progress(now, dt)
                    if not (skip and skip_to(end)):  # something can happen meanwhile
                        yield timeout(dt)
                    acct.save_s += end - now
                    acct.checkpoints += 1
                    if acct.checkpoints > MAX_CHECKPOINTS:
                        self._too_many_checkpoints()
                    # tiered: the tiers know what is durable where (a snapshot is usable once
                    # replicated; see cprsim.sim.tiers)
                    if tiers is None and full_commit:  # Strategy.on_commit
                        ckpt.durable = progress
                        if ledger is not None:
                            ledger.saved(progress)
                    elif tiers is None:
                        commit(self, progress)
                    if rec:
                        self.log("save_end", -1, progress)
                    ph.phase = IDLE
                    ckpt.next = progress + tau
                    continue
                own = own_rate and varies()
                if cycle_save is not None and not own:
                    if self._quiet_cycles(progress, cycle_save, ledger):
                        continue
                target = ckpt.next if ckpt.next < W else W
                now = env.now
                if slowed or own:
                    rate, change = self.rate_window(now, own)
                    dt = (target - progress) / rate
                    partial_step = change - now < dt
                    if partial_step:
                        dt = change - now
                else:
                    rate = strat.rate
                    dt = (target - progress) / rate
                    partial_step = False
                ph.phase, ph.start, ph.rate = COMPUTE, now, rate
                if clock is not None:
                    clock.resume()
                if not (skip and skip_to(now + dt)):
                    yield timeout(dt)
                acct.compute_s += dt
                self.progress = min(target, progress + dt * rate) if partial_step else target
                ph.phase = IDLE
            except simpy.Interrupt as intr:
                # the phase's timeout fires for nobody now: the quiet phases pass over it
                abandon_wait(job)
                # the nodes `fail` interrupted the job for (`node_back`: []; an interrupt without a
                # cause, SimPy's default, brings no failed node either)
                cause = intr.cause
                self._interrupted(cause if cause is not None else [])
        self._settle(strict=False)  # a persist that finished before the end counts
        self.log("done", -1, self.progress)

    def _quiet_cycles(self, progress: float, save_s: float, ledger: ShardLedger | None) -> bool:
        """Compute to the next checkpoint and save it, again and again, as long as each phase
        ends before the next scheduled event (nothing can interrupt it): :meth:`job_process`'s
        compute and save phases (a steady rate, a blocking save of constant ``save_s``, the base
        class's commit), their arithmetic in their order (the same clock and sums to the bit),
        with the counters in locals. Returns whether it did a phase (else the caller's general
        path does the next one, through a SimPy timeout)."""
        env, acct, ckpt = self.env, self.acct, self.ckpt
        skip_to, W, tau, wall_cap = env.skip_to, self.W, self.tau, self.wall_cap
        rate, now, nxt = self.strategy.rate, env.now, ckpt.next
        compute_s, saved_s, n = acct.compute_s, acct.save_s, acct.checkpoints
        start: float | None = None  # the last phase's start (the phases' record keeps it)
        durable = ckpt.durable
        while True:
            target = nxt if nxt < W else W
            dt = (target - progress) / rate
            if not skip_to(now + dt):
                break
            compute_s += dt
            start, now, progress = now, now + dt, target
            if progress >= W:
                break
            end = now + save_s  # the save: progress is at the checkpoint
            if not (end <= wall_cap and skip_to(end)):
                break
            saved_s += end - now
            n += 1
            if n > MAX_CHECKPOINTS:
                acct.checkpoints = n
                self._too_many_checkpoints()
            durable = progress
            if ledger is not None:
                ledger.saved(progress)
            start, now, nxt = now, end, progress + tau
        if start is None:
            return False
        acct.compute_s, acct.save_s, acct.checkpoints = compute_s, saved_s, n
        self.progress, ckpt.next, ckpt.durable = progress, nxt, durable
        ph = self.phases
        ph.phase, ph.start, ph.rate = IDLE, start, rate
        return True

    def _recover(self) -> Generator[simpy.Event, Any, None]:
        """Wait until every failed node the job needs is rescheduled, then restore."""
        env, strat, rec, ph, book = self.env, self.strategy, self.record, self.phases, self.book
        now = env.now
        t_up = max(book.down.values(), default=now)  # when the last node it waits for is back
        if t_up > now:
            ph.phase, ph.start = RESCHED, now
            if rec:
                self.log("resched_start")
            if (
                t_up == INF
            ):  # a node waits for a machine: node_back interrupts the job when it has one
                yield env.event()
            if not self._quiet(t_up - now):
                yield env.timeout(t_up - now)
            now = env.now
            self._book_resched(ph.start, now)
            if rec:
                self.log("resched_end")
        book.down.clear()
        if ph.load_left is not None:  # resume a restore that a failure nobody waits for interrupted
            dt, ph.load_left = ph.load_left, None
        else:
            dt = (
                strat.full_load_s(self)
                if book.job_node in book.episode
                else strat.load_s(self, book.episode)
            )
        ph.load_until = now + dt
        ph.phase, ph.start = LOAD, now
        if rec:
            self.log("load_start", -1, dt)
        if not self._quiet(dt):
            yield env.timeout(dt)
        self.acct.load_s += dt
        if rec:
            self.log("load_end", -1, dt)
        ph.phase = IDLE
        book.episode.clear()
        book.recovering = False

    def _save_two_phase(self) -> Generator[simpy.Event, Any, None]:
        """A snapshot stall (after the previous persist, if still running), then a background persist."""
        env, strat, ph, ckpt = self.env, self.strategy, self.phases, self.ckpt
        ph.phase, ph.start = SAVE, env.now
        self.log("save_start", -1, self.progress)
        if ckpt.pending is not None and ckpt.pending[1] > env.now:
            wait = ckpt.pending[1] - env.now  # for the previous persist
            if not self._quiet(wait):
                yield env.timeout(wait)
        self._settle(strict=False)
        snapshot_s = self.costs.snapshot_s
        if not self._quiet(snapshot_s):
            yield env.timeout(snapshot_s)
        self.acct.save_s += env.now - ph.start
        ckpt.pending = (self.progress, env.now + strat.save_s(self))
        self.log("save_end", -1, self.progress)
        ph.phase = IDLE
        ckpt.next = self.progress + self.tau

    def rate_window(self, now: float, own: bool) -> tuple[float, float]:
        """Progress per wall second now, and the next wall time (s) it may change: the strategy's
        (its ``rate_at`` where ``own``, else its constant ``rate``; its ``next_rate_change``),
        slowed while a persist runs (two-phase, tiered; the persist's start or end a change)."""
        strat = self.strategy
        r = strat.rate_at(self, now) if own else strat.rate
        t = strat.next_rate_change(self, now)
        ckpt = self.ckpt
        if ckpt.slowdown:
            busy, end = ckpt.persist_window(now)
            if busy:
                r *= 1.0 - ckpt.slowdown
            t = min(t, end)
        return r, t

    def _interrupted(self, nodes: list[int]) -> None:
        """A failure (or a node back) interrupted the job: book the phase it was in, let the
        strategy recover the failed nodes, and wait for those it needs."""
        now = self.env.now
        ph = self.phases
        phase, ph.phase = ph.phase, IDLE
        elapsed = now - ph.start
        acct = self.acct
        setup = self.setup
        if phase == COMPUTE:
            acct.compute_s += elapsed
            self.progress = min(setup.W, self.progress + elapsed * ph.rate)
        elif phase == SAVE:
            acct.save_s += elapsed
            if self.tiers is not None:
                self.tiers.abort_in_flight()  # the snapshot's stall did not finish
            if self.record:
                self.log("save_abort", -1, self.progress)
        elif phase == RESCHED:
            self._book_resched(ph.start, now)
        elif phase == LOAD:
            acct.load_s += elapsed
        strat = self.strategy
        job_node = setup.job_node
        node_failures = [n for n in nodes if n != job_node]
        stall: set[int] = set()  # the nodes the job waits for
        if node_failures:
            ret = strat.on_failure(self, node_failures)
            stall.update(node_failures if ret is None else ret)
        if len(node_failures) < len(
            nodes
        ):  # a job-level interruption: back to the last full checkpoint
            strat.on_job_failure(self)
            stall.add(job_node)
        # a failure the job does not wait for (a degraded trainer, a server ECRM rebuilds) leaves a
        # restore under way to finish; one it waits for starts a new restore once the nodes are back
        ph.load_left = max(0.0, ph.load_until - now) if phase == LOAD and not stall else None
        if stall:
            self.book.stall(stall, now)

    # -- result ---------------------------------------------------------------------------------------
    def result(self, rep: int) -> ReplicationResult:
        """The replication's :class:`ReplicationResult` (number ``rep``): wall, useful, save, load,
        lost, reschedule and degraded seconds, the failure counts, PLS and the ratios derived from
        them (:meth:`Accounts.result`)."""
        return self.acct.result(
            rep, self.env.now, self.W, self.strategy.rate, self.ledger, self.fleet
        )


if TYPE_CHECKING:  # pragma: no cover

    def _views(run: Run, setup: _Setup) -> tuple[RunView, RunSetup]:
        """mypy checks here that a run is what its strategy's hooks see (structurally), and the
        setup what the strategy is made from."""
        return run, setup


# ---------------------------------------------------------------------------------------------------
def _renewal_process(
    run: Run,
    members: tuple[int, ...],
    dist: Distribution,
    down: Callable[[np.random.Generator], tuple[float, ...]],
    rng: np.random.Generator,
    stationary: bool = False,
    wait: Callable[[float], simpy.Event] | None = None,
) -> Generator[simpy.Event, Any, None]:
    """A renewal process that takes ``members`` down together (a node, a fixed failure domain, or
    the job's pseudo node for job-level interruptions): a lifetime, a failure, ``down(rng)`` seconds
    per member until they are back, then a fresh lifetime. ``stationary``: the first lifetime is
    already partly used (a draw of the equilibrium residual life). ``wait``: how a lifetime is
    waited for (:meth:`Run.wait_life`; default: in wall time)."""
    env = run.env
    if wait is None:
        wait = lambda dt: _urgent_timeout(env, dt)
    first_draw = stationary
    while True:
        yield wait(dist.sample_residual(rng) if first_draw else dist.sample(rng))
        first_draw = False
        rhos = down(rng)
        run.fail(members, rhos)
        yield _urgent_timeout(env, max(rhos))  # down until every member is back


def _bulk_process(
    run: Run, bulk: BulkFailures, compute: bool = False
) -> Generator[simpy.Event, Any, None]:
    """Hand the job the failures of :class:`BulkFailures` in time order (those at one instant in one
    step, as separate processes would), then wait for the horizon and draw the next window.
    ``compute``: the times are on the job's compute clock (:class:`ComputeClock`)."""
    env = run.env
    at: Callable[[float], simpy.Event]
    if compute:
        assert run.clock is not None
        at = run.clock.at
    else:
        at = lambda t: _urgent_at(env, t)
    while True:
        last = None
        for t, nodes, rhos in bulk.advance():
            if t != last:
                yield at(t)
                last = t
            run.fail(nodes, rhos)
        yield at(bulk.horizon)


def _domain_process(
    run: Run,
    first: int,
    count: int,
    take: int,
    dist: Distribution,
    resched: Distribution,
    rng: np.random.Generator,
    stationary: bool = False,
    wait: Callable[[float], simpy.Event] | None = None,
) -> Generator[simpy.Event, Any, None]:
    env = run.env
    if wait is None:
        wait = lambda dt: _urgent_timeout(env, dt)
    constant = resched.family == "constant"
    first_draw = stationary
    while True:
        yield wait(dist.sample_residual(rng) if first_draw else dist.sample(rng))
        first_draw = False
        picked = pick(rng, count, take, first)
        rhos = (resched.scale,) * take if constant else tuple(resched.sample(rng, take).tolist())
        run.fail(picked, rhos)


#: stream index of group g of domain i: STRIDE x i + g (groups of one domain never collide)
DOMAIN_GROUP_STRIDE = 1 << 20


def pick(rng: np.random.Generator, count: int, take: int, first: int) -> tuple[int, ...]:
    """``take`` distinct nodes of ``first .. first+count-1`` (5x cheaper than choice(replace=False);
    the offset added in Python: a numpy call fewer)."""
    return tuple([n + first for n in rng.permutation(count).tolist()[:take]])


def _schedule_process(run: Run, schedule: list[Scheduled]) -> Generator[simpy.Event, Any, None]:
    env = run.env
    for t, nodes, rhos in sorted(schedule, key=lambda x: x[0]):
        if t > env.now:
            yield _urgent_timeout(env, t - env.now)
        run.fail(nodes, rhos)


def injected_schedule(s: Scenario, rep: int) -> list[Scheduled]:
    """Replication ``rep``'s injected failures: per ``[[failures.injected]]`` entry, ``count``
    failures at uniform wall times in ``[0, W)`` (s), each of ``nodes`` random nodes of its type
    with their rescheduling draws (s)."""
    out: list[Scheduled] = []
    resched = s.reschedule.dist
    for i, inj in enumerate(s.failures.injected):
        rng = stream(s.seed, rep, "injected", i)
        first, count = (
            (0, s.cluster.trainers)
            if inj.node_type == "trainer"
            else (s.cluster.trainers, s.cluster.embedding_servers)
        )
        times = np.sort(rng.uniform(0.0, s.duration_s, inj.count))
        for t in times:
            picked = pick(rng, count, inj.nodes, first)
            rhos = tuple(float(r) for r in resched.sample(rng, inj.nodes))
            out.append((float(t), picked, rhos))
    return out


class _Dists(NamedTuple):
    """The distributions of a scenario, built once (each ``.dist`` of a scenario builds a new one)."""

    resched: Distribution
    trainer: Distribution | None  #: time between failures of a trainer
    embedding: Distribution | None  #: ... of an embedding server
    domains: tuple[Distribution, ...]  #: ... of each failure domain (in the scenario's order)

    @classmethod
    def of(cls, s: Scenario) -> _Dists:
        f = s.failures
        return cls(
            s.reschedule.dist,
            f.trainer.dist if f.trainer is not None else None,
            f.embedding.dist if f.embedding is not None else None,
            tuple(d.failure.dist for d in f.domains),
        )


def _block_streams(
    seed: int, rep: int, concern: str, index: int
) -> Callable[[int], np.random.Generator]:
    """The stream of block ``b`` of failure kind ``index`` (:attr:`Units.rng`)."""
    return lambda b: stream(seed, rep, concern, index, b)


def _group_down(
    resched: Distribution, k: int
) -> Callable[[np.random.Generator], tuple[float, ...]]:
    """The down times of a fixed group of ``k`` nodes: one rescheduling draw per member."""
    return lambda rng: tuple(float(x) for x in resched.sample(rng, k))


def _start_bulk(run: Run, s: Scenario, rep: int, stationary: bool, dists: _Dists) -> None:
    """One process for the renewal processes of every node and fixed failure-domain group (with a
    node lifecycle, the nodes' own failures come from :class:`~cprsim.sim.lifecycle.Fleet`)."""
    nt, ne, seed, resched = s.cluster.trainers, s.cluster.embedding_servers, s.seed, dists.resched
    clock = s.failures.clock
    #: the kinds on the wall clock, and those on the job's compute clock (a stream of their own)
    kinds: list[Units] = []
    compute: list[Units] = []
    for kind, (dist, first, count, typ) in enumerate(
        ((dists.trainer, 0, nt, "trainer"), (dists.embedding, nt, ne, "embedding"))
    ):
        if dist is not None and count > 0 and run.fleet is None:
            on_compute = clock.of(typ) == "computing"
            (compute if on_compute else kinds).append(
                Units(
                    first,
                    count,
                    1,
                    dist,
                    resched,
                    stationary,
                    _block_streams(seed, rep, "node-block", kind),
                    renew_at_failure=on_compute,
                )
            )
    for i, d in enumerate(s.failures.domains):
        if d.membership == "fixed":
            first, count = (0, nt) if d.node_type == "trainer" else (nt, ne)
            on_compute = clock.of(d.node_type) == "computing"
            (compute if on_compute else kinds).append(
                Units(
                    first,
                    count,
                    d.nodes,
                    dists.domains[i],
                    resched,
                    stationary,
                    _block_streams(seed, rep, "domain-block", i),
                    renew_at_failure=on_compute,
                )
            )
    if kinds:
        run.env.process(_bulk_process(run, BulkFailures(kinds, BULK_HORIZON * s.duration_s)))
    if compute:
        run.env.process(
            _bulk_process(run, BulkFailures(compute, BULK_HORIZON * s.duration_s), compute=True)
        )
    for i, d in enumerate(s.failures.domains):
        if d.membership == "random":
            _start_random_domain(run, s, rep, i, stationary, dists)


def _start_per_node(run: Run, s: Scenario, rep: int, stationary: bool, dists: _Dists) -> None:
    """The former layout (the engine before issue 15, process for process): one process and one
    stream per node and per fixed failure-domain group."""
    env, resched, f = run.env, dists.resched, s.failures
    nt, ne = s.cluster.trainers, s.cluster.embedding_servers
    for dist, first, count, typ in (
        (dists.trainer, 0, nt, "trainer"),
        (dists.embedding, nt, ne, "embedding"),
    ):
        if dist is None or run.fleet is not None:
            continue
        wait = run.wait_life(typ)
        for n in range(first, first + count):
            env.process(
                _renewal_process(
                    run,
                    (n,),
                    dist,
                    lambda rng: (resched.sample(rng),),
                    stream(s.seed, rep, "node", n),
                    stationary,
                    wait,
                )
            )
    for i, d in enumerate(f.domains):
        if d.membership == "random":
            _start_random_domain(run, s, rep, i, stationary, dists)
            continue
        first, count = (0, nt) if d.node_type == "trainer" else (nt, ne)
        for g, (start, size) in enumerate(
            d.groups(count)
        ):  # each fixed group: its own process and stream
            env.process(
                _renewal_process(
                    run,
                    tuple(range(first + start, first + start + size)),
                    dists.domains[i],
                    _group_down(resched, size),
                    stream(s.seed, rep, "domain", DOMAIN_GROUP_STRIDE * i + g),
                    stationary,
                    run.wait_life(d.node_type),
                )
            )


def _start_random_domain(
    run: Run, s: Scenario, rep: int, i: int, stationary: bool, dists: _Dists
) -> None:
    """Random-membership domain ``i``: one process (the same stream in both layouts)."""
    d, nt = s.failures.domains[i], s.cluster.trainers
    first, count = (0, nt) if d.node_type == "trainer" else (nt, s.cluster.embedding_servers)
    run.env.process(
        _domain_process(
            run,
            first,
            count,
            d.nodes,
            dists.domains[i],
            dists.resched,
            stream(s.seed, rep, "domain", i),
            stationary,
            run.wait_life(d.node_type),
        )
    )


@dataclass(frozen=True, slots=True)
class _Prepared:
    """What every replication of a scenario (with given costs) derives from it alone: made once."""

    scenario: Scenario
    costs: Costs
    strategy: type[strategies.Strategy]
    params: BaseModel  #: the strategy's validated parameters (a frozen pydantic model)
    dists: _Dists
    job_dist: Distribution | None  #: job-level interruptions: time between them ...
    #: ... and the job's down time
    job_down: Callable[[np.random.Generator], tuple[float, ...]] | None
    shared: dict[str, Any]  #: :attr:`Run.shared`


#: the last scenario prepared (run_replications, a sweep point and the planner run one scenario many times)
_last_prepared: _Prepared | None = None


def _prepare(s: Scenario, costs: Costs | None) -> _Prepared:
    global _last_prepared
    c = costs if costs is not None else costs_of(s)
    p = _last_prepared
    if p is not None and p.scenario is s and p.costs == c:
        return p
    cls = strategies.get(s.strategy.name)
    dists = _Dists.of(s)
    job_dist = job_down = None
    if s.failures.job is not None:
        job_dist = s.failures.job.dist
        restart, resched = s.failures.job.restart_s, dists.resched
        job_down = (
            (lambda rng: (restart,))
            if restart is not None
            else (lambda rng: (float(resched.sample(rng)),))
        )
    p = _last_prepared = _Prepared(
        scenario=s,
        costs=c,
        strategy=cls,
        params=cls.Params.model_validate(s.strategy.params),
        dists=dists,
        job_dist=job_dist,
        job_down=job_down,
        shared={},
    )
    return p


def tier_spec(s: Scenario, c: Costs) -> TierSpec:
    """The tiered checkpoints of scenario ``s``: each embedding server holds its shard; the trainers
    hold the dense part (sharded: 1/N_t each; replicated: trainer 0's copy is the one saved, the
    others hold the same parameters and save nothing)."""
    nt, ne = s.cluster.trainers, s.cluster.embedding_servers
    b = np.zeros(nt + ne)
    if s.cluster.dense == "sharded":
        b[:nt] = c.trainer_bytes
    else:
        b[0] = c.dense_bytes
    b[nt:] = c.shard_bytes
    t, st = s.checkpoint.tier_spec, s.storage
    GB = 1e9
    return TierSpec(
        bytes_per_node=b,
        groups=((0, nt), (nt, ne)),
        replicas=t.replicas,
        stride=t.peer_stride,
        snapshot_bps=s.checkpoint.snapshot_gbps * GB,
        memory_latency_s=t.memory_latency_s,
        node_bps=st.node_gbps * GB,
        persist_every=t.persist_every,
        write_bps=st.write_gbps * GB,
        read_bps=st.read_gbps * GB,
        storage_latency_s=st.latency_s,
    )


def simulate_one(
    s: Scenario,
    rep: int = 0,
    *,
    record: bool = False,
    schedule: list[Scheduled] | None = None,
    costs: Costs | None = None,
    streams: str = "bulk",
) -> tuple[ReplicationResult, list[Event]]:
    """Run replication ``rep`` of scenario ``s``; ``record`` keeps its event log.

    ``schedule`` adds failures at given times (trace replay); the scenario's own failure
    processes run as well. ``streams``: ``"bulk"`` (node and fixed-domain failures sampled in
    blocks, one process) or ``"per-node"`` (the former layout, one process and stream per node:
    statistically identical, different draws; see :mod:`cprsim.streams`).
    """
    if streams not in STREAMS:
        raise ValueError(f"streams must be one of {', '.join(STREAMS)}, got {streams!r}")
    p = _prepare(s, costs)
    env = Env()
    f = s.failures
    stationary = f.start == "stationary"
    # the lifecycle's machines first: the run holds them (they start once the run exists)
    fleet = (
        Fleet(env, s, rep, (p.dists.trainer, p.dists.embedding), stationary, _urgent_timeout)
        if s.lifecycle is not None
        else None
    )
    run = Run(
        scenario=s,
        costs=p.costs,
        env=env,
        record=record,
        n_trainers=s.cluster.trainers,
        n_embedding=s.cluster.embedding_servers,
        W=s.duration_s,
        tau=s.interval_s,
        shared=p.shared,
        fleet=fleet,
        strategy_of=(p.strategy, p.params),
        replication=rep,
    )
    _start_failures(run, s, rep, p, stationary, schedule, streams)
    run.job = env.process(run.job_process())
    _run_job(run, f"{s.name}, replication {rep}")
    return run.result(rep), run.events


def _start_failures(
    run: Run,
    s: Scenario,
    rep: int,
    p: _Prepared,
    stationary: bool,
    schedule: list[Scheduled] | None,
    streams: str,
) -> None:
    """Start the failure processes of replication ``rep`` (:func:`simulate_one`), before the job."""
    # the processes, in the order SimPy breaks ties at one instant by: the lifecycle's machines,
    # the nodes' and domains' failures, job-level interruptions, injected and replayed failures;
    # then the job
    env, f = run.env, s.failures
    if run.fleet is not None:
        run.fleet.start(run)
    (_start_bulk if streams == "bulk" else _start_per_node)(run, s, rep, stationary, p.dists)
    if p.job_dist is not None and p.job_down is not None:  # set together (_prepare)
        env.process(
            _renewal_process(
                run,
                (run.job_node,),
                p.job_dist,
                p.job_down,
                stream(s.seed, rep, "job", 0),
                stationary,
                run.wait_life("job"),
            )
        )
    sched = injected_schedule(s, rep) if f.injected else []
    if f.replay:
        from cprsim.failures.replay import replay_schedule

        sched = sched + replay_schedule(s, rep)
    if schedule:
        sched = sched + list(schedule)
    if sched:
        env.process(_schedule_process(run, sched))


def _run_job(run: Run, name: str) -> None:
    """Run the replication until the job is done; a runaway's error names the replication
    (``name``: one can rerun it alone)."""
    env, s = run.env, run.scenario
    try:
        env.run(until=run.job)
    except Runaway as e:
        msg = str(e)
        raise Runaway(
            name + msg[len(s.name) :] if msg.startswith(s.name + ":") else f"{name}: {msg}"
        ) from None
    except InputError as e:  # the fleet ran out of machines (cprsim.sim.lifecycle.FleetExhausted)
        raise Runaway(f"{name}: {e}") from None
    except (
        RuntimeError
    ):  # nothing left to happen and the job not done: only a fleet out of machines
        fl = run.fleet
        if fl is None or not fl.stuck():
            raise
        raise Runaway(
            f"{name}: the fleet ran out of machines at {env.now / 3600:.4g} h of wall time "
            f"({fl.retired} retired, {len(fl.waiting)} node slots without one): add "
            "lifecycle.spares or relax [lifecycle.retirement]"
        ) from None
