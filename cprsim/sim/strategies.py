"""Recovery strategies: small objects behind one interface, found in a registry by name.

A strategy decides four things and nothing else; the engine (``engine.py``) owns time:

* ``save_s(run)``: how long the next checkpoint blocks (it may vary, e.g. MFU's partial saves);
* ``on_commit(run, progress)``: a checkpoint taken at ``progress`` became durable;
* ``on_failure(run, nodes)``: nodes failed: roll progress back and/or count lost updates (PLS);
  it returns the nodes the job must wait for (``None``: all of them; an empty set: training
  goes on, e.g. while ECRM rebuilds a server from parity);
* ``load_s(run, nodes)``: how long the restore takes once every failed node is rescheduled.

``rate`` (progress per second of wall time while computing, 1 unless the strategy slows
training down) is an attribute; ``rate_at``/``next_rate_change`` let it vary over time. Register a new strategy with ``@register``; its ``Params`` is a
pydantic model of its scenario parameters (``[strategy]`` table), validated strictly; ``label``
and ``colour`` say how tables, plans and figures show it.
``make_ledger(setup)`` gives the PLS ledger its lost updates go to (``None`` for a strategy that
never loses one: full recovery keeps no ledger); ``setup.shared`` keeps what a strategy derives
from the scenario alone across its replications, and ``setup.rng``/``run.rng`` is its own random
stream for the replication (made on its first use).

**Parts.** Besides its hooks and its presentation (``label``, ``colour``), a strategy names its
planning part (``Planning``: how ``cprsim plan`` plans it, :mod:`cprsim.sim.planning_parts`;
registration refuses a part that lacks a required member) and, if the DLRM calibration measures it,
its emulation part (``emulation``: which rows a save copies, :mod:`cprsim.sim.emulation_parts`).
Neither the planner nor the calibration asks a strategy's name.

**What a strategy sees of the run** (:mod:`cprsim.sim.protocol`): it is made, and makes its
ledger, from a :class:`~cprsim.sim.protocol.RunSetup` (the scenario, its costs, the cluster's
size, ``W``, ``tau``, ``job_node``, ``shared``: the replication's constants; the run does not
exist yet), and each hook gets a :class:`~cprsim.sim.protocol.RunView`: those plus ``now``,
``progress``, ``up_at``, ``ledger``, ``tiers``, and the methods ``rollback()``,
``lose_shard(j)``, ``commit_full(progress)``, ``dense_lost(nodes)``, ``take_tier_load(default)``
and ``log(...)``. Nothing else: the engine's other state (phases, accounting, the failure
bookkeeping) is not a strategy's, and every attribute of the view is read-only (a strategy
changes the run through its methods).

**Plugins.** A distribution adds strategies by declaring entry points in the group
``cprsim.strategies`` (``[project.entry-points."cprsim.strategies"]`` in its ``pyproject.toml``),
each naming a module whose import registers them, or a ``module:Class``. :func:`ensure_loaded`
imports the built-ins and then every such entry point, once per process, the first time the
names are listed or a name that is not built in is looked up (never at ``cprsim --help``); every
process that does, a sweep's workers included, gets the same registry. A plugin that fails to import, or takes a name that is
registered already, is a one-line :class:`cprsim.errors.InputError` naming its entry point and
distribution. See ``examples/plugin_strategy/``.
"""

from __future__ import annotations

import math
import zlib
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from cprsim.pls import ShardLedger
from cprsim.registry import (  # noqa: F401 - the registry, re-exported where strategies are written
    BUILTIN_MODULES,
    ENTRY_POINT_GROUP,
    REGISTRY,
    DuplicateStrategy,
    builtin_names,
    ensure_loaded,
    get,
    names,
    register,
    validate_params,
)
from cprsim.sim.emulation_parts import Emulation, EveryRow
from cprsim.sim.planning_parts import (
    EverySaveFull,
    OneVariant,
    PartialPlanning,
    RollbackOverhead,
    RollbackPlanning,
    missing_members,
)
from cprsim.sim.planning_parts import Planning as PlanningPart

if TYPE_CHECKING:  # pragma: no cover
    from cprsim.costs import Costs
    from cprsim.sim.protocol import RunSetup, RunView


class NoParams(BaseModel):
    """Parameters of a strategy that takes none: its ``[strategy]`` table holds only ``name``."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


class PartialParams(BaseModel):
    """Parameters of every partial-recovery strategy (MFU/SSU/lookahead's parameters extend them)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)
    trainer_degraded: bool = Field(
        True,
        description="a failed trainer leaves the job running on the others at (N_t - k)/N_t throughput "
        "until its replacement has copied the dense parameters (false: the job stalls until it has)",
    )


#: colours of the strategies that do not set their own (picked by a hash of the name); the
#: built-ins' own colours are not among them
SPARE_COLOURS = ("#7f7f7f", "#e377c2", "#393b79", "#637939", "#8c6d31", "#843c39")


def default_colour(name: str) -> str:
    """The colour of a strategy that sets none: one of :data:`SPARE_COLOURS`, by a stable hash."""
    return SPARE_COLOURS[zlib.crc32(name.encode()) % len(SPARE_COLOURS)]


class Strategy:
    """A recovery strategy (the defaults: full recovery). See the module docstring.

    **What a plugin may use.** ``__init__(params, setup)`` and ``make_ledger(setup)`` get a
    :class:`~cprsim.sim.protocol.RunSetup`; every simulation hook (``save_s``, ``on_commit``,
    ``on_failure``, ``on_job_failure``, ``on_rollback``, ``on_node_back``, ``rate_at``,
    ``next_rate_change``, ``load_s``, ``full_load_s``) gets a :class:`~cprsim.sim.protocol.RunView`
    as ``run``, and may use only what it declares: its attributes (read-only) and methods, whose
    docstrings give their meaning and units (seconds; progress in seconds of failure-free
    training). Anything else the engine's run holds may change without notice. A strategy keeps
    its own state on itself (one instance per replication), what it derives from the scenario alone
    in ``setup.shared``, and its lost updates in its ledger (``run.ledger``). A strategy that
    overrides ``rate_at`` may also override ``rate_varies`` (no ``run``) to say when its rate is
    steady: the engine then skips both rate calls for that compute phase.
    """

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    Params: ClassVar[type[BaseModel]] = NoParams
    needs_throughput: ClassVar[bool] = False  #: counts samples: the job must give samples_per_s
    #: recovers embedding shards: a model without embedding servers has nothing for it to do
    needs_embedding_servers: ClassVar[bool] = True
    #: works with tiered checkpoints (checkpoint.mode = "tiered")
    supports_tiers: ClassVar[bool] = False
    rate: float = 1.0

    # -- presentation (read by tables, plans and figures instead of tables of their own) ---------
    #: its display name; default: its ``plan_label`` if it sets one, else its registry name
    label: ClassVar[str] = ""
    #: its colour in figures (a matplotlib colour, e.g. ``"#1f77b4"``); default: one of
    #: :data:`SPARE_COLOURS` picked from its name (stable across runs and processes)
    colour: ClassVar[str] = ""

    # -- calibration emulation (read by cprsim.calibrate: a strategy is measured without editing it)
    #: how the DLRM calibration emulates its saves (:mod:`cprsim.sim.emulation_parts`); ``None``:
    #: the calibration does not measure it (it loses no update, or its saves are not emulated)
    emulation: ClassVar[Emulation | None] = None

    # -- planning (read by cprsim.planner: a new strategy is planned without editing it) ---------
    plan_label: ClassVar[str] = ""  #: its name in plans (default: its ``label``)
    #: its planning part's class (:mod:`cprsim.sim.planning_parts`: a subclass of
    #: ``RollbackPlanning`` or ``PartialPlanning`` that defines every required member); each
    #: strategy class gets its own instance, :attr:`planning`
    Planning: ClassVar[type[PlanningPart]] = PlanningPart  # type: ignore[type-abstract]
    #: its planning part, bound to this class (made by ``__init_subclass__``)
    planning: ClassVar[PlanningPart]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Every subclass gets its own planning part, bound to it; a class that sets its own
        ``name`` gets its own ``label``, ``plan_label`` and ``colour`` unless it sets them too (a
        subclass of a built-in does not inherit the built-in's)."""
        super().__init_subclass__(**kwargs)
        if not missing_members(cls.Planning):  # an incomplete part is refused by register
            cls.planning = cls.Planning(cls)
        own = cls.__dict__
        if "name" not in own:
            return
        if "label" not in own:
            cls.label = own.get("plan_label") or cls.name
        if "plan_label" not in own:
            cls.plan_label = cls.label
        if "colour" not in own:
            cls.colour = default_colour(cls.name)

    @classmethod
    def missing_parts(cls) -> list[str]:
        """What registration refuses: one line per part that lacks required members (empty: none)."""
        missing = missing_members(cls.Planning)
        if missing:
            return [f"its planning part {cls.Planning.__qualname__} lacks {', '.join(missing)}"]
        return []

    def __init__(self, params: BaseModel, setup: RunSetup) -> None:
        self.params = params
        self.costs = setup.costs

    @classmethod
    def check(cls, params: Any, scenario) -> None:
        """Checks that need the whole scenario; raise ValueError with a one-line message. ``params``:
        the strategy's parameters, an instance of its own ``Params``."""
        if cls.needs_throughput and scenario.job.samples_per_s is None:
            raise ValueError(f"strategy {cls.name!r} counts samples: give job.samples_per_s")

    def make_ledger(self, setup: RunSetup) -> ShardLedger | None:
        """The PLS ledger the strategy books lost updates in (``run.ledger``, made once the strategy
        is); ``None`` for a strategy that never loses an update (its PLS is 0): no ledger work."""
        return ShardLedger(setup.n_embedding)

    # defaults: full-recovery semantics
    def save_s(self, run: RunView) -> float:
        """How long the next checkpoint blocks training (s)."""
        return self.costs.save_s

    def on_commit(self, run: RunView, progress: float) -> None:
        """The checkpoint taken at ``progress`` is durable (default: a full one, every shard saved)."""
        run.commit_full(progress)
        ledger = run.ledger
        if ledger is not None:
            ledger.saved(progress)

    def on_failure(self, run: RunView, nodes: list[int]) -> set[int] | None:
        """``nodes`` failed now: roll back and/or book lost updates; return the nodes the job waits
        for (``None``: all of ``nodes``)."""
        run.rollback()
        return None

    def on_node_back(self, run: RunView, n: int, up: float) -> bool:
        """The node lifecycle found failed node ``n`` a machine, in service at ``up`` (its up time was
        unknown until now). Returns True when the training rate changes because of it."""
        return False

    def rate_at(self, run: RunView, now: float) -> float:
        """Progress per wall second at ``now`` while computing."""
        return self.rate

    def next_rate_change(self, run: RunView, now: float) -> float:
        """The next wall time ``rate_at`` may change (``inf``: never, as far as it knows now)."""
        return float("inf")

    def rate_varies(self) -> bool:
        """Whether :meth:`rate_at` may differ from :attr:`rate`, or :meth:`next_rate_change` be
        finite, until the next hook: the engine asks once per compute phase of a strategy that
        overrides :meth:`rate_at`, and on False computes at :attr:`rate` without calling either
        (the same result, fewer calls). Default: True (an override says when they are constant)."""
        return True

    def load_s(self, run: RunView, nodes: set[int]) -> float:
        """How long the restore of the episode's failed ``nodes`` takes once they are back (s)."""
        return run.take_tier_load(self.costs.load_s)

    # job-level interruptions: every strategy rolls back to its last full (consistent) checkpoint
    def on_job_failure(self, run: RunView) -> None:
        """A job-level interruption: back to the last full checkpoint (:meth:`on_rollback` resets
        the strategy's counters)."""
        run.rollback()
        self.on_rollback(run)

    def on_rollback(self, run: RunView) -> None:
        """Progress went back to the last full checkpoint (a strategy resets its own counters)."""

    def full_load_s(self, run: RunView) -> float:
        """Every node reloads the last full checkpoint (after a job-level interruption; tiered: from
        the tier the rollback chose)."""
        return run.take_tier_load(self.costs.load_s)


class FullPlanning(RollbackOverhead, EverySaveFull, OneVariant, RollbackPlanning):
    """Full recovery's planning: the simulated optimum interval, every save full, first order
    every failure rolling back."""

    rank = 0


@register
class Full(Strategy):
    """Full recovery (the base class's defaults): any failure rolls the job back to the last
    checkpoint, and every node reloads it; nothing is lost, the work since it is re-executed."""

    name = "full"
    summary = "any failure: reschedule, every node reloads the last checkpoint, re-execute since it"
    label = plan_label = "full"
    colour = "#1f77b4"
    Planning = FullPlanning
    needs_embedding_servers = False
    supports_tiers = True

    def make_ledger(self, setup: RunSetup) -> None:
        """No ledger: a rollback loses no update."""
        return None  # a rollback loses no update


class DegradedTrainers:
    """Failed trainers that do not stall the job (``trainer_degraded``): while another trainer
    holds the dense parameters, the job goes on with the trainers that are up at ``(N_t - k)/N_t``
    of its rate until each failed one is back and has copied the dense part from a peer. Shared
    by partial recovery and ECRM (neither rolls back on a trainer failure)."""

    costs: Costs
    trainer_degraded: bool
    degraded: dict[int, float]

    def _init_degraded(self, params: BaseModel, setup: RunSetup) -> None:
        #: trainers fail without stalling the job (a cluster of one trainer has no peer to train on)
        self.trainer_degraded = (
            bool(getattr(params, "trainer_degraded", True))
            and setup.n_trainers > 1
            and setup.scenario.cluster.dense == "replicated"
        )
        #: degraded trainers -> end of their window (up again + dense copy); expired entries are pruned lazily
        self.degraded = {}

    def _degrade(self, run: RunView, n: int) -> None:
        """Trainer ``n`` failed: the others train on; it copies the dense part once it is back."""
        end = run.up_at.get(n, run.now) + self.costs.dense_copy_s
        self.degraded[n] = end
        run.log("degraded", n, end)

    def _dense_lost(self, run: RunView, nodes: list[int]) -> bool:
        """No trainer holds the dense part any more: every one is down, or up but still copying it."""
        if run.dense_lost(nodes):
            return True
        if not self.degraded or not any(n < run.n_trainers for n in nodes):
            return False
        now = run.now
        up_at, deg = run.up_at, self.degraded
        return all(
            up_at.get(t, -1.0) > now or deg.get(t, -1.0) > now for t in range(run.n_trainers)
        )

    def on_node_back(self, run: RunView, n: int, up: float) -> bool:
        """A degraded trainer's window now ends ``dense_copy_s`` after ``up``; True for one (the
        rate changes)."""
        if n in self.degraded:
            self.degraded[n] = up + self.costs.dense_copy_s
            return True
        return False

    def _trainer_share(self, run: RunView, now: float) -> float:
        """The share of trainers at work (1 when none is degraded)."""
        if self.degraded:
            k = sum(1 for end in self.degraded.values() if end > now)
            if k:
                return (run.n_trainers - k) / run.n_trainers
        return 1.0

    def _next_trainer_back(self, now: float) -> float:
        if not self.degraded:
            return float("inf")
        live = {n: end for n, end in self.degraded.items() if end > now}
        if len(live) < len(self.degraded):
            self.degraded = live
        return min(live.values()) if live else float("inf")

    def _keep_degraded_down(self, run: RunView) -> None:
        """After a rollback every node up reloads the checkpoint (a trainer still copying is done);
        a trainer still down stays degraded and copies the dense part once it is back."""
        now = run.now
        self.degraded = {n: end for n, end in self.degraded.items() if run.up_at.get(n, -1.0) > now}


class PartialCPRPlanning(EverySaveFull, OneVariant, PartialPlanning):
    """Vanilla partial recovery's planning: every save full; a node failure loses its shards'
    updates since their last save; job-level interruptions roll back."""

    rank = 1

    def expected_pls(self, s, params, tau, rates) -> float:
        """First-order E[PLS] of vanilla partial recovery: each embedding failure loses its shards'
        updates since their last save, the stalls of the failures the job waits for included
        (:func:`cprsim.analytic.expected_pls`)."""
        from cprsim import analytic
        from cprsim.costs import costs_of

        c = costs_of(s)
        k = max(1, round(rates.k))
        # events that stall the job: degraded trainers do not
        lam_stall = rates.embedding if degraded_trainers(s, params) else rates.nodes
        stall = analytic.recovery_time(
            analytic.Failures(
                rate=lam_stall, recovery_s=s.reschedule.dist.mean() + c.shard_load_s(k)
            )
        )
        return analytic.expected_pls(
            analytic.Job(work_s=s.duration_s, save_s=c.save_s),
            tau,
            analytic.ShardFailures(
                rate=rates.embedding,
                per_event=rates.k,
                shards=s.cluster.embedding_servers,
                stall_s=stall,
                stall_rate=lam_stall,
            ),
        )

    def expected_overhead(self, s, params, tau, rates, costs) -> float:
        """First-order E[wall]/W - 1: node failures recovered partially
        (:func:`partial_node_overhead`) plus job-level rollbacks to the last full checkpoint
        (:func:`job_level_overhead`)."""
        return partial_node_overhead(
            s, tau, costs.save_s, rates, costs, degraded=degraded_trainers(s, params)
        ) + job_level_overhead(s, self.full_interval(params, tau), rates, costs)


#: strategy class -> whether a class of its own besides Partial and Strategy defines its rate
#: (Partial.rate_varies)
_OWN_RATE: dict[type, bool] = {}


@register
class Partial(DegradedTrainers, Strategy):
    """CPR's partial recovery.

    An embedding-server failure stalls the job until the server is rescheduled and its shard is
    reloaded from its last save (its updates since then count as PLS). A trainer failure, with
    ``trainer_degraded`` (the default), does not stall it while another trainer holds the dense
    parameters: the job goes on with the trainers that are up, at ``(N_t - k)/N_t`` of its rate
    (``k`` trainers down or still copying), from the failure until the replacement is up and has
    copied the dense part from a peer (``up + dense_copy_s``); with ``trainer_degraded = false`` the
    job waits for the replacement and the copy. A failure that leaves no trainer holding the dense
    part (every other trainer down or still copying it; always with one trainer) rolls back to the
    last full checkpoint and reloads in full (``restore_all``); so does a job-level interruption.

    A subclass that overrides ``on_failure`` must return what ``super().on_failure`` returned
    (``None`` would stall on every failed node, degraded trainers included).
    """

    name = "partial"
    summary = (
        "CPR partial recovery: only failed nodes are restored (an embedding server from its shard's "
        "checkpoint, a trainer from a peer while the others train on); nothing is re-executed; lost "
        "updates count as PLS"
    )
    Params = PartialParams
    label = plan_label = "CPR-vanilla"
    colour = "#d62728"
    emulation: ClassVar[Emulation | None] = EveryRow()  #: every save copies every row
    Planning: ClassVar[type[PlanningPart]] = PartialCPRPlanning

    full_restore = False  #: the next restore is a full load (no trainer survived to copy from)
    supports_tiers = (
        True  #: tiered: a failed shard comes from a peer's memory snapshot, else storage
    )
    tier_shard_load = 0.0  #: tiered: the restore of the shards failed in this episode (s)

    def __init__(self, params: BaseModel, setup: RunSetup) -> None:
        super().__init__(params, setup)
        self._init_degraded(params, setup)

    def on_failure(self, run: RunView, nodes: list[int]) -> set[int] | None:
        """Restore only the failed nodes: an embedding server's shard loses its updates since its
        last save (tiered: since the newest snapshot a peer or storage holds) and the job waits for
        it; a failed trainer degrades the job (``trainer_degraded``) or is waited for; a failure
        that leaves no trainer with the dense part rolls back (:meth:`restore_all`)."""
        if self._dense_lost(
            run, nodes
        ):  # no surviving replica of the dense part: back to the last full checkpoint
            return self.restore_all(run)
        now = run.now
        stall: set[int] = set()
        tiers = run.tiers
        for n in nodes:
            if n >= run.n_trainers:
                if (
                    tiers is not None
                ):  # the newest snapshot a peer still holds, else the newest persisted
                    r = tiers.shard_restore(now, n)
                    if r.tier != "none":
                        run.ledger.saved(r.progress, shards=n - run.n_trainers)  # type: ignore[union-attr]
                    self.tier_shard_load = max(self.tier_shard_load, r.load_s)
                run.lose_shard(n - run.n_trainers)
                stall.add(n)
            elif (
                self.trainer_degraded
            ):  # the others train on; it copies the dense part once it is back
                self._degrade(run, n)
            else:
                stall.add(n)
        return stall

    def restore_all(self, run: RunView) -> set[int]:
        """Roll back to the last full checkpoint; the job waits for every node still down (every
        node then reloads the checkpoint: no trainer is degraded any more)."""
        run.rollback()
        self.on_rollback(run)
        self.full_restore = True
        self.degraded.clear()
        now = run.now
        return {n for n, t in run.up_at.items() if t > now and n != run.job_node}

    def on_job_failure(self, run: RunView) -> None:
        """Roll back; every node up reloads the last full checkpoint, so a trainer that was still
        copying the dense part is done with it. A trainer still down stays degraded: the job restarts
        without it, and it copies the dense part from a peer once it is back."""
        super().on_job_failure(run)
        self._keep_degraded_down(run)

    def rate_varies(self) -> bool:
        """Only while a trainer is degraded (:meth:`rate_at` is then :attr:`rate` times 1, and
        :meth:`next_rate_change` ``inf``), unless another class of the strategy's (a subclass, or
        a mixin after Partial that ``super()`` reaches) has a rate of its own."""
        cls = type(self)
        own = _OWN_RATE.get(cls)
        if own is None:
            own = _OWN_RATE[cls] = any(
                c not in (Partial, Strategy)
                and ("rate_at" in vars(c) or "next_rate_change" in vars(c))
                for c in cls.__mro__
            )
        return own or bool(self.degraded)

    def rate_at(self, run: RunView, now: float) -> float:
        """The strategy's own rate (e.g. MFU's counting slowdown) x the share of trainers at work."""
        r = super().rate_at(run, now)
        return r * self._trainer_share(run, now) if self.degraded else r

    def next_rate_change(self, run: RunView, now: float) -> float:
        """The strategy's own next rate change, or the end of the first degraded trainer's window if
        sooner (wall s)."""
        t = super().next_rate_change(run, now)
        return min(t, self._next_trainer_back(now)) if self.degraded else t

    def shard_extra_s(self, run: RunView, k: int) -> float:
        """Restore time of ``k`` failed shards beyond reading their last save (MFU's overlays)."""
        return 0.0

    def load_s(self, run: RunView, nodes: set[int]) -> float:
        """After a rollback, the full load; else the failed shards' restore (tiered: from the tier
        that held them; else their last save plus :meth:`shard_extra_s`), and at least a waited-for
        trainer's dense copy (s)."""
        if self.full_restore:
            self.full_restore = False
            return self.full_load_s(run)
        k = sum(1 for n in nodes if n >= run.n_trainers)
        if run.tiers is not None:
            t, self.tier_shard_load = (self.tier_shard_load if k else 0.0), 0.0
        else:
            t = self.costs.shard_load_s(k) + self.shard_extra_s(run, k) if k else 0.0
        # a trainer the job waited for copies the dense part before the job resumes; a degraded
        # one copies it while the others train (its copy is in its degraded window, not a stall)
        if any(n < run.n_trainers and n not in self.degraded for n in nodes):
            t = max(t, self.costs.dense_copy_s)
        return t


def degraded_trainers(s, params: dict[str, Any]) -> bool:
    """Do failed trainers leave the job running (``trainer_degraded``, and a peer to train on)?"""
    return bool(params.get("trainer_degraded", True)) and s.cluster.trainers > 1


def trainer_node_rate(s, rates) -> float:
    """Trainer nodes failing per second (a trainer domain event takes down several)."""
    f, c = s.failures, s.cluster
    if f.replay:
        return max(0.0, rates.nodes - rates.embedding)
    r = c.trainers / f.trainer.dist.mean() if f.trainer is not None else 0.0
    for d in f.domains:
        if d.node_type == "trainer":
            sizes = (
                [d.nodes]
                if d.membership == "random"
                else [size for _, size in d.groups(c.trainers)]
            )
            r += sum(size for size in sizes) / d.failure.dist.mean()
    for inj in f.injected:
        if inj.node_type == "trainer":
            r += inj.count * inj.nodes / s.duration_s
    return r


def partial_node_overhead(
    s, tau: float, delta: float, rates, costs, degraded: bool = False, shard_extra_s: float = 0.0
) -> float:
    """E[wall]/W - 1 of partial recovery's node failures (``shard_extra_s``: mean restore time of
    the failed shards beyond reading their last save, e.g. MFU's partial overlays).

    ``degraded = False`` (``trainer_degraded = false``, or a single trainer): the exact-Poisson form
    ``analytic.partial_wall_split``: an embedding failure costs rescheduling + a shard load, a
    trainer failure rescheduling + a dense copy from a peer, both as stalls.

    ``degraded = True`` (the default of the partial strategies): a trainer failure does not stall
    the job; it slows it to ``(N_t - 1)/N_t`` for ``rho + dense_copy_s`` (rescheduling, then the
    copy from a peer), so each one costs ``(rho + dense_copy_s)/N_t`` of extra compute, first
    order. Trainers fail independently of the job's phase, so during compute ``lam_tr x (rho +
    dense_copy_s)`` of them are degraded on average (Little's law; ``lam_tr`` trainer nodes failing
    per second; overlapping windows add up exactly, the rate being linear in the trainers out): the
    job computes at ``1 - x``, ``x = lam_tr (rho + dense_copy_s)/N_t``, and its ``W`` of work takes
    ``W/(1 - x)`` of compute (``~ W + lam_tr W (rho + dense_copy_s)/N_t``). Embedding failures strike
    that compute as usual, and a trainer failure still restarts a save (the engine aborts a save on
    any failure)::

        wall = W/(1 - x) (1 + lam_emb E[rec_emb]) + n_saves (exp(lam delta) - 1)(1 + lam_emb E[rec_emb])/lam

    (``lam = lam_emb + lam_tr`` events). A degraded window that overlaps a stall or a save costs
    nothing for that part: the ``1 - x`` applies to compute only. Not counted: trainer failures that
    leave no trainer with the dense part (a rollback; rare unless trainers are few and slow to come
    back).
    """
    from cprsim import analytic

    W = s.duration_s
    wait = s.reschedule.dist.mean()
    lam_tr = max(0.0, rates.nodes - rates.embedding)
    R_emb = wait + costs.shard_load_s(max(1, round(rates.k))) + shard_extra_s
    if not degraded:
        wall = analytic.partial_wall_split(
            analytic.Job(work_s=W, save_s=delta),
            tau,
            analytic.SplitFailures(
                embedding_rate=rates.embedding,
                embedding_recovery_s=R_emb,
                trainer_rate=lam_tr,
                trainer_recovery_s=wait + costs.dense_copy_s,
                wait_s=wait,
            ),
        )
        return wall / W - 1.0
    lam_e = rates.embedding
    lam = lam_e + lam_tr
    x = trainer_node_rate(s, rates) * (wait + costs.dense_copy_s) / s.cluster.trainers
    if x >= 1.0:
        return math.inf
    per_event = (
        lam_e * analytic.split_recovery_times([lam_e], [R_emb - wait], wait)[0]
        if lam_e > 0
        else 0.0
    )
    wall = W / (1.0 - x) * (1.0 + per_event)
    n = analytic.n_saves(W, tau)
    if n:  # a save is retried after any failure; an embedding failure during it also costs its recovery
        try:
            wall += n * (delta if lam <= 0 else math.expm1(lam * delta) * (1.0 + per_event) / lam)
        except OverflowError:
            return math.inf
    return wall / W - 1.0 if math.isfinite(wall) else math.inf


def job_level_overhead(s, full_interval: float, rates, costs) -> float:
    """First order: each job-level interruption re-executes half a full interval, restarts, reloads."""
    if rates.job <= 0:
        return 0.0
    restart = (
        s.failures.job.restart_s
        if s.failures.job.restart_s is not None
        else s.reschedule.dist.mean()
    )
    return rates.job * (min(full_interval, s.duration_s) / 2.0 + restart + costs.load_s)
