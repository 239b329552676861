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
    "replay": 4,  # trace replay: which node histories are resampled
    "strategy": 5,  # a strategy's own randomness (e.g. SSU sub-sampling noise)
}


def stream(seed: int, rep: int, concern: str, index: int = 0) -> np.random.Generator:
    ss = np.random.SeedSequence(seed, spawn_key=(rep, CONCERNS[concern], index))
    return np.random.Generator(np.random.PCG64(ss))
