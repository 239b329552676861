"""What a strategy sees of a replication: :class:`RunSetup` when it is made, :class:`RunView` in
its hooks.

The engine keeps a replication's state in :class:`cprsim.sim.engine.Run` and its parts
(:mod:`cprsim.sim.runparts`: phases, accounting, the failure bookkeeping, checkpoints). A strategy sees none of that: it is typed against these two
protocols, which list exactly what the strategies read and call, and nothing else. ``Run``
satisfies both structurally (mypy checks it where the engine calls the hooks);
``tests/test_strategy_protocol.py`` runs every built-in strategy against a proxy that allows nothing
else.

* :class:`RunSetup`: what does not change during a replication (the scenario, its costs, the
  cluster's size, the job's length, the checkpoint interval, the per-scenario cache, the strategy's
  own random stream ``rng``). A strategy is
  made from it (``Strategy(params, setup)``) and makes its ledger from it (``make_ledger(setup)``),
  before the replication's ``Run`` exists.
* :class:`RunView`: a :class:`RunSetup` plus the replication's clock, progress, nodes' up times,
  the PLS ledger and the tiers, and the few things a strategy may *do* to a run (roll it back, lose
  a shard's updates, commit a full checkpoint, log an event). Every hook
  (``save_s(run)``, ``on_failure(run, nodes)``, ...) gets one.

A strategy changes a run only through these methods (and its own ledger and the per-scenario
``shared`` dict): every member here is read-only.

**Units.** Times are seconds. *Progress* (``progress``, ``W``, ``tau``, the argument of
:meth:`RunView.commit_full`) is seconds of failure-free training: the job is done when its progress
reaches ``W``. *Wall* times (``now``, ``up_at``) are seconds of simulated clock since the start of
the replication. **Node ids**: trainers ``0 .. n_trainers - 1``, then embedding servers
``n_trainers .. n_trainers + n_embedding - 1`` (embedding shard ``j`` is node ``n_trainers + j``),
then :attr:`RunSetup.job_node`, the pseudo node of job-level interruptions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from cprsim.costs import Costs
    from cprsim.pls import ShardLedger
    from cprsim.scenario import Scenario
    from cprsim.sim.tiers import TierState


@runtime_checkable
class RunSetup(Protocol):
    """What a strategy may read when it is made (``__init__``, ``make_ledger``): the replication's
    constants. Every member is read-only."""

    @property
    def scenario(self) -> Scenario:
        """The scenario being simulated (validated, frozen)."""
        ...

    @property
    def costs(self) -> Costs:
        """The scenario's save, load and copy times (seconds) and checkpoint sizes (bytes)."""
        ...

    @property
    def n_trainers(self) -> int:
        """Trainers: nodes ``0 .. n_trainers - 1``."""
        ...

    @property
    def n_embedding(self) -> int:
        """Embedding servers (one shard each): nodes ``n_trainers .. n_trainers + n_embedding - 1``."""
        ...

    @property
    def W(self) -> float:
        """The job's failure-free length: seconds of progress to finish."""
        ...

    @property
    def tau(self) -> float:
        """The checkpoint interval: seconds of progress between two checkpoints."""
        ...

    @property
    def job_node(self) -> int:
        """The pseudo node of job-level interruptions (``n_trainers + n_embedding``): a key of
        :attr:`RunView.up_at` like a node's, never passed to ``on_failure``."""
        ...

    @property
    def shared(self) -> dict[str, Any]:
        """A cache kept for every replication of one scenario (with given costs): what a strategy
        derives from the scenario alone (prefix its keys with the strategy's name). The dict is the
        strategy's to fill; it must not hold anything that depends on one replication."""
        ...

    @property
    def rng(self) -> np.random.Generator:
        """The strategy's own random stream for this replication (``cprsim.streams.stream(seed,
        replication, "strategy")``), made on its first use: the same draws whichever other
        strategy, interval or number of workers runs, so a strategy that draws keeps common random
        numbers and a sweep's bytes. The same generator in ``__init__`` and every hook."""
        ...


@runtime_checkable
class RunView(RunSetup, Protocol):
    """What a strategy may read and do in its hooks: :class:`RunSetup`, plus the state below. The
    attributes are read-only; a strategy changes the run through the methods."""

    @property
    def now(self) -> float:
        """The simulated wall clock (seconds since the start of the replication)."""
        ...

    @property
    def progress(self) -> float:
        """Progress so far (seconds of failure-free training, ``0 .. W``)."""
        ...

    @property
    def up_at(self) -> Mapping[int, float]:
        """Every node that has failed -> the wall time it is (or was) back up (``inf``: waiting for
        a machine, until the node lifecycle finds one: then ``on_node_back``). A node that is not a
        key has never failed. A node is down at ``now`` while ``up_at[n] > now``."""
        ...

    @property
    def ledger(self) -> ShardLedger | None:
        """The PLS ledger the strategy made (``make_ledger``; ``None``: it never loses an update).
        The strategy books lost and saved updates in it (its own methods)."""
        ...

    @property
    def tiers(self) -> TierState | None:
        """Tiered checkpoints (``checkpoint.mode = "tiered"``): where each node's snapshots are
        durable (peers' memory, storage); ``None`` otherwise."""
        ...

    def log(self, kind: str, node: int = -1, value: float = 0.0, t: float | None = None) -> None:
        """Record an event of the replication's log (``kind``, the node it concerns or -1, a value;
        at ``t``, default now). A no-op unless the event log is kept (``record``)."""
        ...

    def rollback(self) -> None:
        """Full recovery: progress goes back to the last durable full checkpoint (the work since is
        re-executed: counted as lost); a pending two-phase persist is dropped; the ledger forgets
        the updates lost after that checkpoint (they are re-executed too). Tiered: back to the
        fastest tier that survived, whose load time :meth:`take_tier_load` then gives."""
        ...

    def lose_shard(self, j: int, weight: float | None = None) -> None:
        """Partial recovery of embedding shard ``j`` (node ``n_trainers + j``): its updates since its
        last save are lost (booked in the ledger as PLS; ``weight``: the shard's share of the
        accesses, default the ledger's weight of it). Needs a ledger."""
        ...

    def dense_lost(self, nodes: Iterable[int]) -> bool:
        """The failure of ``nodes`` left no trainer holding the dense parameters (every trainer
        down, or the dense model sharded and a trainer among ``nodes``): they come from the last
        checkpoint."""
        ...

    def take_tier_load(self, default: float) -> float:
        """The load time (s) of the tier the last rollback chose (tiered checkpoints; taken once),
        else ``default``."""
        ...

    def commit_full(self, progress: float) -> None:
        """A full (consistent) checkpoint of ``progress`` is durable: the next :meth:`rollback` goes
        back to it."""
        ...


def members(proto: type) -> frozenset[str]:
    """The names a protocol declares (its own and those of the protocols it extends)."""
    out: set[str] = set()
    for c in proto.__mro__:
        if c is object or c is Protocol or not getattr(c, "_is_protocol", False):
            continue
        out.update(getattr(c, "__annotations__", {}))
        out.update(n for n in vars(c) if not n.startswith("_"))
    return frozenset(out)
