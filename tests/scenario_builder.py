"""The one builder of the tests' small scenarios (issue 28): a base cluster and job that the engine,
analytic, lifecycle, domain, clock and degraded-trainer tests vary by a few keys, instead of each
pasting its own copy."""

from __future__ import annotations

import copy
from typing import Any

from cprsim import scenario as sc

#: 4 trainers and 6 embedding servers, a 10 h job, 1 h interval, 100 s constant rescheduling
SMALL: dict[str, Any] = {
    "name": "t",
    "seed": 3,
    "replications": 10,
    "cluster": {"trainers": 4, "embedding_servers": 6, "embedding_gb": 30.0, "dense_gb": 0.3},
    "job": {"duration_h": 10.0, "samples_per_s": 5_000.0},
    "storage": {"write_gbps": 1.0, "read_gbps": 2.0, "latency_s": 3.0, "node_gbps": 1.25},
    "reschedule": {"family": "constant", "mean_s": 100.0},
    "checkpoint": {"interval_h": 1.0},
}
GONE = object()  #: a value that removes the key


def small(**changes: Any) -> dict[str, Any]:
    """:data:`SMALL` with top-level keys replaced (a dict value given for a dict section is merged
    into it, one level; :data:`GONE` removes a key)."""
    raw = copy.deepcopy(SMALL)
    for k, v in changes.items():
        if v is GONE:
            raw.pop(k, None)
        elif isinstance(v, dict) and isinstance(raw.get(k), dict):
            raw[k] = {**raw[k], **copy.deepcopy(v)}
        else:
            raw[k] = copy.deepcopy(v)
    return raw


def validated(raw: dict[str, Any], source: str = "test", **updates: Any) -> sc.Scenario:
    """``raw`` validated, then ``updates`` applied (``Scenario.with_updates``: dotted keys)."""
    s = sc.validate(raw, source)
    return s.with_updates(updates) if updates else s


def merged(raw: dict[str, Any], source: str = "test", **updates: Any) -> sc.Scenario:
    """``raw`` with ``updates`` replacing its top-level keys (``cluster`` merged) before validating:
    for updates that ``with_updates`` would validate half-way (a lifecycle, a new failure table)."""
    new = {**raw, **{k: v for k, v in updates.items() if k != "cluster"}}
    new["cluster"] = {**raw["cluster"], **updates.get("cluster", {})}
    return sc.validate(new, source)


def bare_run(s: sc.Scenario, env: Any = None) -> Any:
    """An engine ``Run`` of scenario ``s`` without a replication (no failure or job process), on
    the adapter's ``Env`` (a plain ``simpy.Environment`` lacks the engine's shortcuts): for tests
    that drive a run's methods or a strategy's hooks by hand."""
    from cprsim.costs import costs_of
    from cprsim.sim import engine
    from cprsim.sim.simpy_adapter import Env

    return engine.Run(
        scenario=s,
        costs=costs_of(s),
        env=Env() if env is None else env,
        record=False,
        n_trainers=s.cluster.trainers,
        n_embedding=s.cluster.embedding_servers,
        W=s.duration_s,
        tau=s.interval_s,
    )


class FakeRuns:
    """Runs whose i-th replication has a given score (as its PLS): what a planner search reads
    (``upto(m)``: the first ``m`` runs), counting how many it asked for."""

    def __init__(self, scores: Any) -> None:
        self.scores = scores
        self.asked = 0

    def upto(self, m: int) -> list:
        self.asked = max(self.asked, m)
        return [type("R", (), {"pls": float(x)})() for x in self.scores[:m]]
