"""The node lifecycle (scenario ``[lifecycle]``): machines, pools, repair, bad machines, retirement.

The engine's nodes are the job's *slots* (trainer ``i``, embedding server ``j``); a slot is filled
by a *machine*. Without ``[lifecycle]`` a failed slot is back after a draw of ``[reschedule]``
(the engine's own bookkeeping, unchanged). With it, :class:`Fleet` owns what happens between a
failure and the slot's return:

1. **Detection.** A failure is noticed after a draw of ``detection``; the job is stalled meanwhile
   (synchronous training hangs on the dead rank).
2. **Repair.** At detection the machine leaves for repair: ``repair.auto``; with probability
   ``escalate_p`` also ``repair.manual``; ``crews`` repairs at once at most (first come, first
   served). A repair of a *bad* machine (4.) may cure it: the automatic repair with probability
   ``cure_auto_p``, else, when it escalated, the manual one with probability ``cure_manual_p``
   (a replaced part, a reseated cable: the cause is gone); a cured machine comes out of repair
   good (it fails at the base rate, and may turn bad again with age). An uncured bad machine
   stays bad; with probability ``false_success_p`` its repair also reports success while the
   fault that just failed it stays: back in service, it fails again after a draw of
   ``repair.recur``. A good machine's repair is a repair (neither applies to it).
   A machine with ``retirement.failures`` failures within ``retirement.window_h`` is retired instead.
3. **Replacement.** At detection the slot asks for a machine: a warm standby (in service after a
   ``swap`` draw; a spare, if any, is then warmed up in the background, ``select``, to refill the
   standbys), else a spare (``select``), else it waits (first come, first served) for the first
   repaired machine (``select``). A repaired machine nobody waits for refills the standbys up to
   their number (after ``select``), else joins the spares. Idle machines (standbys, spares) do not
   fail.
4. **Health.** A share ``bad_fraction`` of all machines is bad: it fails ``bad_multiplier`` (k) times
   as often as a good one (its lifetimes are a good one's divided by k, accelerated life,
   ``S_bad(t) = S(k t)``; for exponential lifetimes the same as k times the hazard; for a Weibull of
   shape b, k^b times the hazard). A good machine in service turns bad after an exponential time of
   rate ``turn_bad_per_h`` (from then on its clock runs k times as fast,
   ``S(t | turned at x) = S(x + k (t - x)) / S(x)``); it stays bad until a repair cures it (2.).
   With exponential lifetimes and repairs each machine is then a Markov chain (bad or good; in
   service, in automatic or in manual repair): :func:`cprsim.analytic.health_chain` gives its
   expected bad share over time and the failures it makes.

A slot's machine starts a fresh lifetime when it enters service (``failures.start = "stationary"``:
the first machines start in steady state, drawing the equilibrium residual life, a bad machine's
divided by k).
Failure domains, job-level interruptions, injected and replayed failures still come from the
engine's processes; a node they take down goes through the same lifecycle (their ``[reschedule]``
draws are ignored for nodes). A job-level interruption is detected after a draw of ``detection``
too, then restarts as before (``failures.job.restart_s`` or a ``[reschedule]`` draw).

Random draws: the first machines' lifetimes from stream ``("slot-block", b)`` for slots
``1024 b .. 1024 b + 1023`` in order, the later lifetimes of slot ``n`` from ``("slot", n)``; the machines' health from
``("lifecycle", 0)``; detection, repair and replacement draws from ``("lifecycle", 1)`` in the
order events happen (SimPy's order is deterministic: one seed gives the same bytes).

Accounting (per replication): ``detection_s`` and ``wait_s`` split the job's wait for nodes
(``reschedule_s``) into detection, waiting for a machine, and (the rest) swap-in/selection, by the
node the job waits for longest; ``unfilled_s`` is the wall time during which at least one slot has
no machine in service (1 - unfilled/wall is the fleet's availability); ``machines_retired``;
``machines_cured``: bad machines a repair made good; ``failures_bad``: node failures of bad machines.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any

import numpy as np
import simpy

from cprsim.errors import InputError
from cprsim.failures.distributions import Distribution
from cprsim.sim.failstreams import BulkFailures, FirstFailures, Units
from cprsim.sim.simpy_adapter import Env
from cprsim.streams import stream

if TYPE_CHECKING:  # pragma: no cover
    from cprsim.scenario import Scenario
    from cprsim.sim.engine import Run

INF = math.inf
#: the first machines' lifetimes are drawn from one stream per block of this many slots (in slot
#: order); a slot's later machines from its own stream (made only if it fails: most never do)
BLOCK = 1024
HOUR = 3600.0
#: the rescheduling time of lazily drawn first lifetimes' units (:meth:`Fleet._start_lazy`): the
#: fleet replaces the slot's machine instead, so it is never used (a constant draws nothing)
NEVER_USED = Distribution("constant", 1.0)


def fast_sample(
    dist: Distribution, k: float, rng: np.random.Generator, after: float = 0.0
) -> float:
    """A lifetime whose clock runs ``k`` times as fast as ``dist``'s from ``after`` on, given survival to
    ``after`` (accelerated life: ``S(t | t > after) = S(after + k (t - after)) / S(after)``); ``k = 1``,
    ``after = 0``: a plain draw. A machine that lives its lifetimes this way fails ``k`` times as
    often in the long run, whatever the family (the renewal rate is ``k / mean``): what
    ``bad_multiplier`` means, and what ``cprsim fit --bad-nodes`` estimates from failure counts.

    Closed forms for exponential (``after + Exp(mean / k)``) and Weibull; scipy's ``isf`` for the others.
    """
    f, s, b = dist.family, dist.scale, dist.shape
    if f == "exponential":
        return after + float(rng.exponential(s / k))
    if f == "constant":
        return after + max(0.0, s - after) / k
    u = float(rng.random())
    if f == "weibull":
        t = s * ((after / s) ** b - math.log(u)) ** (1.0 / b)
    else:
        sp = dist.scipy
        s_after = float(sp.sf(after)) if after > 0 else 1.0
        t = max(after, float(sp.isf(s_after * u)))
    return after + (t - after) / k


def draw_lifetime(
    base: Distribution | None,
    bad: bool,
    k: float,
    turn_bad: float,
    rng: np.random.Generator,
    stationary: bool = False,
) -> tuple[float, float]:
    """(lifetime, time it turns bad) of a machine entering service (s; INF: never).

    A bad machine lives ``k`` times as fast as ``base`` (:func:`fast_sample`: it fails ``k`` times as
    often). A good one turns bad after an exponential time of rate ``turn_bad`` (per second) if that
    comes before its lifetime ends; from then on its clock runs ``k`` times as fast:
    ``S(t | turned at x) = S(x + k (t - x)) / S(x)``. ``stationary``: the first machines, in steady
    state (the equilibrium residual life, divided by ``k`` for a bad machine: exact, the residual life
    of a renewal process ``k`` times as fast; after turning bad, a fresh draw: an approximation).
    """
    if base is None:
        return INF, INF
    if bad:
        if stationary:
            if base.family == "exponential":
                return float(rng.exponential(base.scale / k)), INF
            return float(base.sample_residual(rng)) / k, INF
        return fast_sample(base, k, rng), INF
    t = float(base.sample_residual(rng)) if stationary else float(base.sample(rng))
    if turn_bad > 0:
        x = float(rng.exponential(1.0 / turn_bad))
        if x < t:  # it turns bad on the way: the rest of its life k times as fast
            t = (
                fast_sample(base, k, rng, after=x)
                if not stationary
                else x + fast_sample(base, k, rng)
            )
            return t, x
    return t, INF


def _pool_streams(seed: int, rep: int, off: int) -> Callable[[int], np.random.Generator]:
    """The streams ``("slot-block", b + off)`` of a pool of lazily drawn first lifetimes."""
    return lambda b: stream(seed, rep, "slot-block", b + off)


class FleetExhausted(InputError):
    """The fleet can no longer fill every node slot (one line saying why)."""


class Health:
    """The machines' health and the lifetimes they draw (module doc, 4.): which are bad, which
    carry a persisting fault (a repair that reported success wrongly), which a repair under way
    will cure; each slot's base lifetime, the idle machines' ("powered" clocks) and when a
    machine's running lifetime ends and it turns bad; the streams of the later lifetimes."""

    __slots__ = (
        "bad",
        "curing",
        "fault",
        "idle_life",
        "k",
        "life",
        "life_end",
        "recur",
        "recur_dist",
        "rep",
        "seed",
        "streams",
        "turn_bad",
        "turn_end",
    )

    def __init__(
        self, s: Scenario, rep: int, lifetimes: tuple[Distribution | None, Distribution | None]
    ) -> None:
        lc = s.lifecycle
        assert lc is not None
        nt, ne = s.cluster.trainers, s.cluster.embedding_servers
        n = nt + ne + lc.standbys + lc.spares
        h = lc.health
        self.k = h.bad_multiplier
        self.turn_bad = h.turn_bad_per_h / HOUR  # per second
        hrng = stream(s.seed, rep, "lifecycle", 0)
        self.bad: list[bool] = (
            (hrng.random(n) < h.bad_fraction).tolist() if h.bad_fraction > 0 else [False] * n
        )
        self.fault = [False] * n  #: a persisting fault (a repair that reported success wrongly)
        self.curing: set[int] = set()  #: bad machines in a repair that will cure them
        self.recur = lc.repair.recur  #: the lifetime of a machine with a persisting fault
        #: its distribution, built at the first draw (each ``.dist`` of a spec builds a new one)
        self.recur_dist: Distribution | None = None
        #: each slot's base lifetime (None: never fails)
        self.life = [lifetimes[0]] * nt + [lifetimes[1]] * ne
        clock = s.failures.clock
        #: the lifetime an idle machine wears by when a node type's clock is "powered" (the pools
        #: serve both types: the powered type's, the embedding servers' if both are); None: idle
        #: machines do not wear
        idle = [
            lifetimes[i]
            for i, p in ((1, clock.embedding), (0, clock.trainer))
            if p == "powered" and lifetimes[i] is not None
        ]
        self.idle_life: Distribution | None = idle[0] if idle else None
        #: machine -> the wall time its running lifetime ends and it turns bad ("powered" clocks:
        #: a machine's lifetime runs from the end of its repair, idle or in service)
        self.life_end: dict[int, float] = {}
        self.turn_end: dict[int, float] = {}
        self.seed, self.rep = s.seed, rep
        #: slot -> its stream of later lifetimes, made when it first draws (-1: idle machines')
        self.streams: dict[int, np.random.Generator] = {}

    def slot_stream(self, slot: int) -> np.random.Generator:
        """The stream of ``slot``'s lifetimes after the first (made on first use)."""
        rng = self.streams.get(slot)
        if rng is None:
            rng = self.streams[slot] = stream(self.seed, self.rep, "slot", slot)
        return rng

    @property
    def idle_rng(self) -> np.random.Generator:
        """The stream of idle machines' lifetimes after the first ones."""
        rng = self.streams.get(-1)
        if rng is None:
            rng = self.streams[-1] = stream(self.seed, self.rep, "idle", 1)
        return rng

    def _draw(
        self, base: Distribution | None, m: int, stationary: bool, rng: np.random.Generator
    ) -> tuple[float, float]:
        """(lifetime, time it turns bad) of machine ``m`` starting a life of ``base``."""
        if self.fault[m]:
            if self.recur_dist is None:
                self.recur_dist = self.recur.dist
            return float(self.recur_dist.sample(rng)), INF
        return draw_lifetime(base, self.bad[m], self.k, self.turn_bad, rng, stationary)

    def lifetime(
        self, slot: int, m: int, stationary: bool, rng: np.random.Generator | None = None
    ) -> tuple[float, float]:
        """(lifetime, time it turns bad) of machine ``m`` entering service in ``slot``, both from its
        entry (INF: it never fails / does not turn bad); drawn from ``rng``, else the slot's stream."""
        if rng is None:
            rng = self.slot_stream(slot)
        return self._draw(self.life[slot], m, stationary, rng)

    def wear(
        self,
        m: int,
        now: float,
        stationary: bool = False,
        rng: np.random.Generator | None = None,
        slot: int | None = None,
    ) -> None:
        """Machine ``m``'s next lifetime starts at ``now`` (the idle lifetime, or ``slot``'s)."""
        base = self.idle_life if slot is None else self.life[slot]
        if rng is None:
            rng = self.idle_rng
        life, turn = self._draw(base, m, stationary, rng)
        self.life_end[m], self.turn_end[m] = now + life, now + turn

    def entering(
        self,
        slot: int,
        m: int,
        powered: bool,
        now: float,
        up_in: float,
        stationary: bool,
        rng: np.random.Generator | None,
    ) -> tuple[float, float]:
        """(lifetime, time it turns bad) of machine ``m`` entering service in ``slot`` ``up_in``
        seconds after ``now``, from then. ``powered``: the machine's lifetime runs on from where
        it was (drawn at the start, or at the end of its last repair; one entering service for the
        first time draws it now), else a fresh one."""
        if powered and self.life[slot] is not None:
            if m not in self.life_end:
                self.wear(m, now, stationary, rng, slot)
            start = now + up_in
            return max(0.0, self.life_end[m] - start), self.turn_end[m] - start
        return self.lifetime(slot, m, stationary, rng)

    def cure(self, m: int) -> bool:
        """Machine ``m``'s repair is over: if it was to cure it, it is good from now on (says so)."""
        if m in self.curing:  # the repair found and fixed the cause
            self.curing.discard(m)
            self.bad[m] = False
            return True
        return False


class Pools:
    """The idle machines (module doc, 3.): warm standbys (and how many to keep), spares, those
    being warmed up to join the standbys, the slots waiting for a machine (first come, first
    served), the repairs under way and the crews' next free times (None: as many as needed), and
    each machine's pool generation (bumped when it leaves a pool: a pending idle failure of it is
    then stale)."""

    __slots__ = ("crews", "in_repair", "mgen", "spare", "standby", "target", "waiting", "warming")

    def __init__(self, n_slots: int, standbys: int, spares: int, crews: int | None) -> None:
        self.target = standbys
        self.standby: deque[int] = deque(range(n_slots, n_slots + standbys))
        self.spare: deque[int] = deque(range(n_slots + standbys, n_slots + standbys + spares))
        self.warming = 0  #: spares or repaired machines being warmed up to join the standbys
        self.waiting: deque[int] = deque()  #: slots waiting for a machine
        self.in_repair = 0
        self.crews: list[float] | None = [0.0] * crews if crews is not None else None
        self.mgen = [0] * (n_slots + standbys + spares)

    def short(self) -> bool:
        """Fewer standbys (warming ones included) than their number."""
        return len(self.standby) + self.warming < self.target

    def repair_start(self, now: float, dur: float) -> float:
        """A repair of ``dur`` seconds asked for at ``now`` starts when a crew is free (first come,
        first served): when."""
        self.in_repair += 1
        crews = self.crews
        if crews is None:
            return now
        start = max(now, heapq.heappop(crews))
        heapq.heappush(crews, start + dur)
        return start

    def take_idle(self, m: int) -> None:
        """Machine ``m`` failed idle: out of its pool (a standby, a spare, or warming up)."""
        self.mgen[m] += 1
        if m in self.standby:
            self.standby.remove(m)
        elif m in self.spare:
            self.spare.remove(m)
        else:  # being warmed up to join the standbys
            self.warming -= 1

    def stuck(self) -> bool:
        """A slot waits for a machine and none can ever come (all retired)."""
        return bool(self.waiting) and not (
            self.in_repair or self.warming or self.standby or self.spare
        )


class FleetAccounts:
    """The lifecycle's counters (module doc, Accounting): per slot the wall times it failed, its
    failure was detected and it got a machine (the split of the job's wait); the slots without a
    machine in service and since when, the unfilled seconds; machines retired and cured; failures
    of bad machines."""

    __slots__ = (
        "cured",
        "failures_bad",
        "retired",
        "t_assign",
        "t_detect",
        "t_fail",
        "unfilled",
        "unfilled_s",
        "unfilled_since",
    )

    def __init__(self) -> None:
        self.t_fail: dict[int, float] = {}
        self.t_detect: dict[int, float] = {}
        self.t_assign: dict[int, float] = {}
        self.unfilled = 0
        self.unfilled_since = 0.0
        self.unfilled_s = 0.0
        self.retired = 0
        self.cured = 0  #: bad machines a repair made good
        self.failures_bad = 0

    def slot_failed(self, slot: int, now: float, bad: bool) -> None:
        """``slot``'s machine failed at ``now`` (``bad``: a bad machine); the slot is unfilled."""
        if bad:
            self.failures_bad += 1
        if self.unfilled == 0:
            self.unfilled_since = now
        self.unfilled += 1
        self.t_fail[slot] = now
        self.t_assign[slot] = INF

    def filled(self, now: float) -> None:
        """An unfilled slot has a machine in service again at ``now``."""
        self.unfilled -= 1
        if self.unfilled == 0:
            self.unfilled_s += now - self.unfilled_since

    def finish(self, now: float) -> float:
        """The unfilled seconds up to ``now`` (the end of the replication)."""
        if self.unfilled > 0:
            return self.unfilled_s + now - self.unfilled_since
        return self.unfilled_s

    def critical_split(self, down: dict[int, float], a: float, b: float) -> tuple[float, float]:
        """(detection, waiting) seconds of the job's wait ``[a, b]`` for the nodes in ``down``, by the
        node it waits for longest."""
        crit, last = None, -INF
        for n, t in down.items():
            if n in self.t_fail and t > last:
                crit, last = n, t
        if crit is None:
            return 0.0, 0.0
        f, d, s = self.t_fail[crit], self.t_detect[crit], self.t_assign[crit]
        return max(0.0, min(b, d) - max(a, f)), max(0.0, min(b, s) - max(a, d))


class Fleet:
    """The machines of one replication, their pools and repairs (see the module docstring).

    Made before the replication's :class:`~cprsim.sim.engine.Run` (which holds it); :meth:`start`
    then puts the first machines in service, failing and returning the run's nodes. It holds the
    slots' state (which machine fills each, its generation, when it turns bad) and coordinates its
    parts: ``health`` (:class:`Health`), ``pools`` (:class:`Pools`), ``acct``
    (:class:`FleetAccounts`)."""

    __slots__ = (
        "_dists",
        "acct",
        "env",
        "gen",
        "health",
        "history",
        "lc",
        "machine",
        "n_machines",
        "n_slots",
        "n_trainers",
        "policy",
        "pools",
        "resched",
        "rng",
        "run",
        "stationary",
        "turn_at",
        "urgent",
        "window",
    )

    run: Run  #: the replication whose nodes the machines fill (:meth:`start`)

    def __init__(
        self,
        env: Env,
        s: Scenario,
        rep: int,
        lifetimes: tuple[Distribution | None, Distribution | None],
        stationary: bool,
        urgent: Callable[[Env, float], simpy.Event],
    ) -> None:
        lc = s.lifecycle
        assert lc is not None
        self.env, self.urgent, self.stationary = env, urgent, stationary
        nt, ne = s.cluster.trainers, s.cluster.embedding_servers
        n_slots = self.n_slots = nt + ne
        self.n_trainers = nt
        self.n_machines = n_slots + lc.standbys + lc.spares
        self.lc = lc
        self.health = Health(s, rep, lifetimes)
        self.pools = Pools(n_slots, lc.standbys, lc.spares, lc.repair.crews)
        self.acct = FleetAccounts()
        #: detection, repair and replacement draws, in the order events happen
        self.rng = stream(s.seed, rep, "lifecycle", 1)
        self.resched = s.reschedule.dist
        self._dists: dict[int, Distribution] = {}  #: id of a delay's spec -> its distribution
        #: slot -> the machine in it (None: none now)
        self.machine: list[int | None] = list(range(n_slots))
        #: bumped when a slot fails: a pending lifetime of its old machine is stale
        self.gen = [0] * n_slots
        #: when the slot's machine turns bad (INF: not during this lifetime)
        self.turn_at = [INF] * n_slots
        clock = s.failures.clock
        #: each slot's failure clock (``failures.clock`` of its node type)
        self.policy = [clock.trainer] * nt + [clock.embedding] * ne
        #: machine -> its recent failure times (retirement)
        self.history: dict[int, deque[float]] = {}
        #: the first window of lazily drawn first failures (:meth:`_start_lazy`): the job's length
        self.window = s.duration_s

    # -- what the engine and the tests read ------------------------------------------------------
    @property
    def bad(self) -> list[bool]:
        """Machine -> it is bad (:attr:`Health.bad`)."""
        return self.health.bad

    @property
    def waiting(self) -> deque[int]:
        """Slots waiting for a machine (:attr:`Pools.waiting`)."""
        return self.pools.waiting

    @property
    def retired(self) -> int:
        """Machines retired so far."""
        return self.acct.retired

    @property
    def cured(self) -> int:
        """Bad machines a repair made good so far."""
        return self.acct.cured

    @property
    def failures_bad(self) -> int:
        """Node failures of bad machines so far."""
        return self.acct.failures_bad

    def start(self, run: Run) -> None:
        """The first machines enter service in the slots of ``run``'s nodes (their first lifetimes:
        one stream per block of slots, or lazily for a large node type, :meth:`_lazy_type`); from
        now on their failures fail its nodes."""
        self.run = run
        n_slots, stationary, h = self.n_slots, self.stationary, self.health
        types = [(0, self.n_trainers), (self.n_trainers, n_slots)]
        lazy = [self._lazy_type(a, b) for a, b in types]
        armed = [r for r, lz in zip(types, lazy) if not lz]  # the types drawn per slot
        for b in range(0, n_slots, BLOCK):
            parts = [range(max(a, b), min(e, b + BLOCK)) for a, e in armed]
            if any(parts):
                rng = stream(h.seed, h.rep, "slot-block", b // BLOCK)
                for part in parts:
                    for slot in part:
                        self._arm(slot, 0.0, stationary, rng)
        for i, (a, b) in enumerate(types):
            if lazy[i]:
                self._start_lazy(i, a, b)
        if h.idle_life is not None:  # the pools' machines wear from the start too
            rng = stream(h.seed, h.rep, "idle", 0)
            now = self.env.now
            for m in (*self.pools.standby, *self.pools.spare):
                h.wear(m, now, stationary, rng)
                self._idle(m)

    def _lazy_type(self, a: int, b: int) -> bool:
        """The first lifetimes of slots ``a .. b-1`` (one node type) are drawn lazily
        (:class:`~cprsim.sim.failstreams.FirstFailures`): a large type whose first machines are
        exchangeable given their health (a lifetime of the wall clock in service, exponential or
        Weibull, no machine turning bad on the way)."""
        life = self.health.life[a] if b > a else None
        if life is None or self.health.turn_bad > 0 or self.policy[a] != "in-service":
            return False
        probe = Units(0, b - a, 1, life, life, self.stationary, lambda _: self.rng)
        return FirstFailures.fits(probe)

    def _start_lazy(self, typ: int, a: int, b: int) -> None:
        """The first failures of slots ``a .. b-1`` in one process, drawn window by window from
        two pools, the good machines and the bad (their lifetimes ``k`` times as fast: the same
        family, its scale divided by ``k``), streams ``("slot-block", POOL + 4 typ + 2 j[+ 1])``
        (``j``: 0 good, 1 bad), and handed to the job in time order; a slot whose first machine
        has already failed (its generation moved on) ignores its first failure."""
        h = self.health
        base = h.life[a]
        assert base is not None
        bad = np.asarray(h.bad[a:b], bool)
        slot_of = np.concatenate((np.flatnonzero(~bad), np.flatnonzero(bad))) + a
        kinds: list[Units] = []
        first = 0
        for j, (count, dist) in enumerate(
            (
                (int((~bad).sum()), base),
                (int(bad.sum()), Distribution(base.family, base.scale / h.k, base.shape)),
            )
        ):
            if count:
                off = 4 * typ + 2 * j
                kinds.append(
                    Units(
                        first,
                        count,
                        1,
                        dist,
                        NEVER_USED,
                        self.stationary,
                        _pool_streams(h.seed, h.rep, off),
                    )
                )
            first += count
        bulk = BulkFailures(kinds, self.window)
        bulk.blocks = [FirstFailures(u) for u in kinds]
        self.env.process(self._first_failures(bulk, slot_of.tolist()))

    def _first_failures(
        self, bulk: BulkFailures, slot_of: list[int]
    ) -> Generator[simpy.Event, Any, None]:
        env, gen = self.env, self.gen
        while True:
            for t, nodes, _ in bulk.advance():
                if t > env.now:
                    yield self.urgent(env, t - env.now)
                slot = slot_of[nodes[0]]
                if gen[slot] == 0:  # its first machine, in service: it fails
                    self.run.fail((slot,), (INF,))
            yield self.urgent(env, bulk.horizon - env.now)

    # -- draws ----------------------------------------------------------------------------------
    def _delay(self, spec) -> float:
        if spec is None:
            return float(self.resched.sample(self.rng))
        if spec.zero:
            return 0.0
        # each spec's distribution built once (its ``.dist`` builds a new one at every call): the
        # specs are the scenario's, alive as long as the fleet, so their ids stay theirs
        dist = self._dists.get(id(spec))
        if dist is None:
            dist = self._dists[id(spec)] = spec.dist
        return float(dist.sample(self.rng))

    # -- the slot's machine in service ----------------------------------------------------------
    def _arm(
        self,
        slot: int,
        up_in: float,
        stationary: bool = False,
        rng: np.random.Generator | None = None,
    ) -> None:
        """The slot's machine enters service in ``up_in`` seconds; its lifetime starts then."""
        m = self.machine[slot]
        assert m is not None
        now = self.env.now
        powered = self.policy[slot] == "powered"
        life, turn = self.health.entering(slot, m, powered, now, up_in, stationary, rng)
        self.turn_at[slot] = now + up_in + turn
        self.env.process(self._in_service(slot, self.gen[slot], up_in, life, turn))

    def _in_service(
        self, slot: int, gen: int, up_in: float, life: float, turn: float
    ) -> Generator[simpy.Event, Any, None]:
        if up_in > 0:
            yield self.urgent(self.env, up_in)
        if self.acct.t_fail.get(slot) is not None:  # the slot was waiting: it is filled again
            self.acct.filled(self.env.now)
        if life == INF:
            return
        if self.policy[slot] == "computing":  # a lifetime of the job's compute time
            clock = self.run.clock
            assert clock is not None
            self.turn_at[slot] = clock.elapsed() + turn
            yield clock.after(life)
        else:
            yield self.urgent(self.env, life)
        if self.gen[slot] == gen:  # still the same machine, in service: it fails
            self.run.fail((slot,), (INF,))

    # -- "powered" clocks: a machine wears when idle too ------------------------------------------
    def _idle(self, m: int) -> None:
        """Machine ``m`` is idle in a pool: it fails there when its lifetime ends, unless it has
        left the pool by then."""
        end = self.health.life_end.get(m, INF)
        if end == INF:
            return
        self.env.process(self._idle_wait(m, self.pools.mgen[m], max(0.0, end - self.env.now)))

    def _idle_wait(self, m: int, g: int, dt: float) -> Generator[simpy.Event, Any, None]:
        yield self.urgent(self.env, dt)
        if self.pools.mgen[m] != g:
            return  # it left the pool: its lifetime goes on in service
        self.pools.take_idle(m)
        h = self.health
        if self.env.now >= h.turn_end.get(m, INF):
            h.bad[m] = True
        d = self._delay(self.lc.detection)
        if d == 0:
            self._detected(None, m)
        else:
            self.env.process(self._later(d, self._detected, None, m))
        self._dispatch()  # refill the standbys from the spares

    # -- failure ---------------------------------------------------------------------------------
    def on_fail(self, slot: int) -> None:
        """Slot ``slot`` failed now (the engine set its up time to INF): detection, then repair and
        replacement; :meth:`Run.node_back` gets the up time once a machine is chosen."""
        now = self.env.now
        m = self.machine[slot]
        assert m is not None
        self.gen[slot] += 1
        self.machine[slot] = None
        clock = self.run.clock if self.policy[slot] == "computing" else None
        bad = self.health.bad
        if (now if clock is None else clock.elapsed()) >= self.turn_at[slot]:
            bad[m] = True  # it had turned bad in service
        self.acct.slot_failed(slot, now, bad[m])
        d = self._delay(self.lc.detection)
        self.acct.t_detect[slot] = now + d
        if d == 0:
            self._detected(slot, m)
        else:
            self.env.process(self._later(d, self._detected, slot, m))

    def job_interrupted(self, node: int) -> float:
        """A job-level interruption (pseudo node ``node``) at now: it too is detected after a draw of
        ``detection``, which the job's restart follows; returns that delay (booked as detection)."""
        now = self.env.now
        d = self._delay(self.lc.detection)
        a = self.acct
        a.t_fail[node], a.t_detect[node], a.t_assign[node] = now, now + d, now + d
        return d

    def _later(
        self, dt: float, fn: Callable[..., None], *args: Any
    ) -> Generator[simpy.Event, Any, None]:
        yield self.urgent(self.env, dt)
        fn(*args)

    def _detected(self, slot: int | None, m: int) -> None:
        """Machine ``m``'s failure is detected: repair (or retirement); its slot (None: it failed
        idle) asks for a machine."""
        now = self.env.now
        ret = self.lc.retirement
        hist = self.history.setdefault(m, deque())
        hist.append(now)
        if ret is not None:
            while hist and hist[0] < now - ret.window_h * HOUR:
                hist.popleft()
        if ret is not None and len(hist) >= ret.failures:
            self.acct.retired += 1  # out of the fleet for good
            retired = self.acct.retired
            if self.n_machines - retired < self.n_slots:
                raise FleetExhausted(
                    f"the retirement policy left fewer machines than node slots at {now / HOUR:.4g} h of wall "
                    f"time ({retired} retired of {self.n_machines}, {self.n_slots} slots): add lifecycle.spares "
                    "or relax [lifecycle.retirement]"
                )
        else:
            self._repair(m, now)
        if slot is not None:
            self.pools.waiting.append(slot)
        self._dispatch()

    def _repair(self, m: int, now: float) -> None:
        """Machine ``m`` enters repair: its duration (automatic, plus manual if it escalates) and,
        for a bad machine, whether it comes out cured, or falsely repaired (drawn now, in this
        order, from the lifecycle stream; a good machine draws nothing more)."""
        r, rng, h = self.lc.repair, self.rng, self.health
        dur = self._delay(r.auto)
        escalated = r.escalate_p > 0 and bool(rng.random() < r.escalate_p)
        if escalated:
            dur += self._delay(r.manual)
        h.fault[m] = False
        if h.bad[m]:
            cured = (r.cure_auto_p > 0 and bool(rng.random() < r.cure_auto_p)) or (
                escalated and r.cure_manual_p > 0 and bool(rng.random() < r.cure_manual_p)
            )
            if cured:
                h.curing.add(m)
            else:
                h.fault[m] = r.false_success_p > 0 and bool(rng.random() < r.false_success_p)
        start = self.pools.repair_start(now, dur)
        self.env.process(self._later(start + dur - now, self._repaired, m))

    def _repaired(self, m: int) -> None:
        pools, h = self.pools, self.health
        pools.in_repair -= 1
        if h.cure(m):  # a good machine from now on
            self.acct.cured += 1
        if h.idle_life is not None:  # "powered": its next lifetime runs from now, idle or not
            h.wear(m, self.env.now)
        if pools.waiting:
            self._assign(pools.waiting.popleft(), m, self._delay(self.lc.select))
        elif pools.short():
            self._warm(m, from_repair=True)
        else:
            pools.spare.append(m)
            self._idle(m)

    def _warm(self, m: int, from_repair: bool = False) -> None:
        """Warm machine ``m`` up to join the standbys (``select``); it wears meanwhile ("powered":
        one from the spares already does)."""
        self.pools.warming += 1
        self.env.process(
            self._later(self._delay(self.lc.select), self._warmed, m, self.pools.mgen[m])
        )
        if from_repair and self.health.idle_life is not None:
            self._idle(m)

    def _warmed(self, m: int, g: int) -> None:
        pools = self.pools
        if pools.mgen[m] != g:
            return  # it failed while warming up
        pools.warming -= 1
        pools.standby.append(m)
        self._dispatch()

    def _dispatch(self) -> None:
        """Give waiting slots a standby, else a spare; refill the standbys from the spares."""
        pools = self.pools
        while pools.waiting and (pools.standby or pools.spare):
            slot = pools.waiting.popleft()
            if pools.standby:
                m = pools.standby.popleft()
                self._assign(slot, m, self._delay(self.lc.swap))
            else:
                self._assign(slot, pools.spare.popleft(), self._delay(self.lc.select))
        while pools.spare and pools.short():
            self._warm(pools.spare.popleft())

    def _assign(self, slot: int, m: int, delay: float) -> None:
        now = self.env.now
        self.pools.mgen[m] += 1  # out of the pools: an idle failure pending for it is stale
        self.machine[slot] = m
        self.acct.t_assign[slot] = now
        self._arm(slot, delay)
        self.run.node_back(slot, now + delay)

    def stuck(self) -> bool:
        """A node slot waits for a machine and none can ever come (all retired)."""
        return self.pools.stuck()

    # -- result -----------------------------------------------------------------------------------
    def finish(self) -> float:
        """The unfilled time up to now (the end of the replication)."""
        return self.acct.finish(self.env.now)

    def critical_split(self, down: dict[int, float], a: float, b: float) -> tuple[float, float]:
        """(detection, waiting) seconds of the job's wait ``[a, b]`` for the nodes in ``down``, by the
        node it waits for longest (:meth:`FleetAccounts.critical_split`)."""
        return self.acct.critical_split(down, a, b)
