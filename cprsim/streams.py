"""Named random streams from one seed (common random numbers across strategies).

Every random draw of a replication comes from a stream named by ``(replication, concern,
index...)``: ``SeedSequence(seed, spawn_key=(rep, concern, *index))``. A node's failure times
depend only on the seed, the replication and the node, never on the strategy, the checkpoint
interval or the size of the cluster, so two strategies run with one seed see exactly the same
failures.

**Bulk layout** (the default since issue 15; :mod:`cprsim.sim.failstreams`). The renewal
processes of the nodes of one type (their index within the type: trainer ``j``, embedding server
``j``) and of the fixed groups of one failure domain are sampled in fixed blocks of
``w`` units, ``w = 1024`` nodes, or ``w = max(1, 1024 // k)`` groups of k nodes: unit ``u`` is
column ``u % w`` of block ``u // w``, and each block draws from one stream,
``("node-block", type, block)`` (type 0 trainers, 1 embedding servers) or
``("domain-block", domain, block)``. A block's stream is consumed in whole *rounds*: round ``j``
draws the ``j``-th lifetime of all ``w`` columns (a residual life in round 0 under
``failures.start = "stationary"``), then their ``j``-th rescheduling times (``w x k`` for groups
of k nodes). A block always draws ``w`` columns whether or not they all exist, and draws a round
whenever one of its units needs it, so which draws a unit gets never depends on the number of
units, on the horizon, or on the job.

**Lazy kinds** (issue 29): a kind of at least 4,096 units with exponential or Weibull lifetimes
draws its units that have not failed yet as one pool, ``(..., 2^30)``, and the later lifetimes
and rescheduling times of those that have, ``(..., 2^30 + 1)`` (block numbers no kind reaches;
:class:`cprsim.sim.failstreams._Lazy`); a unit's draws then depend on the number of units. With a
node lifecycle, such a node type's first machines: ``("slot-block", 2^30 + 4 type + 2 j)``, ``j`` 0
the good machines, 1 the bad.

The per-node layout (``("node", node id)`` and ``("domain", 2^20 x domain + group)``: one stream
per node or group, its lifetimes and rescheduling times alternately) stays reachable with
``simulate_one(..., streams="per-node")``: the two layouts give statistically identical
replications (``tests/test_bulk_failures.py``), not identical draws. Random-membership domains
(``("domain", i)``), injected failures, replays and job-level interruptions use the same streams
in both.
"""

from __future__ import annotations

import numpy as np

#: the concerns that draw random numbers; the integers are part of the stream names: never reuse
CONCERNS = {
    "node": 1,  # per-node layout: one node's failure renewal process and its rescheduling times
    "domain": 2,  # per failure-domain process (random membership; fixed groups in the per-node layout)
    "injected": 3,  # injected failures (times, nodes)
    "replay": 4,  # trace replay, per copy of the trace's cluster: node permutation, block starts, repairs
    "strategy": 5,  # a strategy's own randomness: RunSetup.rng, one stream per replication
    "job": 6,  # job-level interruptions (failures.job)
    "node-block": 7,  # bulk layout: (node type, block of 1,024 nodes of that type)
    "domain-block": 8,  # bulk layout: (fixed domain, block of 1,024 of its groups)
    "lifecycle": 9,  # node lifecycle: 0 the machines' health, 1 detection, repair and replacement draws
    "slot": 10,  # node lifecycle: the lifetimes of the machines serving node slot n after its first
    "slot-block": 11,  # node lifecycle: the first machines' lifetimes, per block of 1,024 slots
    "training": 12,  # the planner: a run's training outcome (its accuracy loss, predictive draw)
    "idle": 13,  # node lifecycle, "powered" clocks: 0 the idle machines' first lifetimes, 1 the later
}

#: replication numbers are the first part of every stream name. The planner searches on
#: replications 0, 1, ... (the ones `cprsim simulate` shows) and confirms its choice on a block
#: that no search or simulate run reaches, so a promise is proven on failures it never saw. A
#: validation replays 2^41 + i; a calibration on a scenario's schedules (cprsim.calibrate.matched)
#: 3 x 2^40 + j: no block reaches another's.
REPLICATION_BLOCKS = {"search": 0, "confirm": 1 << 40, "validate": 1 << 41, "calibrate": 3 << 40}


def stream(seed: int, rep: int, concern: str, index: int = 0, *more: int) -> np.random.Generator:
    """The stream ``(rep, concern, index, *more)`` of ``seed``."""
    ss = np.random.SeedSequence(seed, spawn_key=(rep, CONCERNS[concern], index, *more))
    return np.random.Generator(np.random.PCG64(ss))


class LazyStream:
    """The stream ``(rep, concern, index, *more)`` of ``seed``, made on its first use (:meth:`get`):
    a replication hands every strategy its own stream, and one that never draws pays nothing for it
    (making a generator costs more than many a replication's strategy hooks)."""

    __slots__ = ("_concern", "_index", "_rng", "_seed_rep")

    def __init__(self, seed: int, rep: int, concern: str, index: int = 0, *more: int) -> None:
        self._seed_rep = (seed, rep)
        self._concern = concern
        self._index = (index, *more)
        self._rng: np.random.Generator | None = None

    def get(self) -> np.random.Generator:
        """The generator (the same one at every call: draws go on where the last stopped)."""
        if self._rng is None:
            self._rng = stream(*self._seed_rep, self._concern, *self._index)
        return self._rng
