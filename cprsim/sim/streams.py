"""Named random streams from one seed (common random numbers across strategies).

Every random draw of a replication comes from a stream named by ``(replication, concern,
index)``: ``SeedSequence(seed, spawn_key=(rep, concern, index))``. A node's failure times depend
only on the seed, the replication and the node, never on the strategy, so two strategies run
with one seed see exactly the same failures.
"""

from __future__ import annotations

import numpy as np

#: the concerns that draw random numbers; the integers are part of the stream names: never reuse
CONCERNS = {
    "node": 1,  # per-node failure renewal process and its rescheduling times
    "domain": 2,  # per failure-domain process (which nodes it takes down, their rescheduling)
    "injected": 3,  # injected failures (times, nodes)
    "replay": 4,  # trace replay, per copy of the trace's cluster: node permutation, block starts, repairs
    "strategy": 5,  # a strategy's own randomness (e.g. SSU sub-sampling noise)
    "job": 6,  # job-level interruptions (failures.job)
}

#: replication numbers are the first part of every stream name. The planner searches on
#: replications 0, 1, ... (the ones `cprsim simulate` shows) and confirms its choice on a block
#: that no search or simulate run reaches, so a promise is proven on failures it never saw.
REPLICATION_BLOCKS = {"search": 0, "confirm": 1 << 40, "validate": 1 << 41}


def stream(seed: int, rep: int, concern: str, index: int = 0) -> np.random.Generator:
    ss = np.random.SeedSequence(seed, spawn_key=(rep, CONCERNS[concern], index))
    return np.random.Generator(np.random.PCG64(ss))
