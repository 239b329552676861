"""Partial recovery never copies the dense parameters from a trainer that is not there."""

from __future__ import annotations

import pytest
from scenario_builder import small

from cprsim import scenario as sc
from cprsim.costs import costs_of
from cprsim.sim.engine import simulate_one
from cprsim.sim.replicate import run_replications

BASE = small(
    name="dense",
    seed=4,
    replications=40,
    cluster={"trainers": 1, "embedding_servers": 4, "embedding_gb": 20.0, "dense_gb": 0.5},
    job={"duration_h": 20.0, "samples_per_s": 10000.0},
    reschedule={"mean_s": 120.0},
    failures={"trainer": {"family": "exponential", "mtbf_h": 5.0}},
)


@pytest.mark.parametrize("strategy", ["partial", "mfu", "ecrm"])
def test_a_one_trainer_cluster_restores_the_dense_part_from_the_checkpoint(strategy):
    """With one trainer (and only trainer failures) every failure loses the dense state: partial
    strategies must roll back and reload like full recovery, not 'copy from a peer'."""
    upd = {
        "strategy": {
            "name": strategy,
            **({"k": 2, "m": 1, "parity_slowdown": 0.0} if strategy == "ecrm" else {}),
            **({"counter_overhead": 0.0, "full_every": 1} if strategy == "mfu" else {}),
        }
    }
    s = sc.validate(BASE, "t").with_updates(upd)
    full = sc.validate(BASE, "t").with_updates({"strategy.name": "full"})
    a, _ = run_replications(s)
    b, _ = run_replications(full)
    assert sum(r.failures_trainer for r in a) > 20
    for x, y in zip(a, b):  # same failures (common random numbers): the same rollbacks and loads
        assert x.lost_s == pytest.approx(y.lost_s) and x.load_s == pytest.approx(y.load_s)
        assert x.pls == 0.0


def test_all_trainers_down_at_once_rolls_partial_recovery_back():
    raw = {
        **BASE,
        "cluster": {**BASE["cluster"], "trainers": 3},
        "failures": {
            "domains": [
                {
                    "name": "trainer-rack",
                    "node_type": "trainer",
                    "nodes": 3,
                    "membership": "random",
                    "failure": {"family": "constant", "mtbf_h": 5.5},
                }
            ],
            "start": "fresh",
        },
        "strategy": {"name": "partial"},
    }
    s = sc.validate(raw, "t")
    r, ev = simulate_one(s, 0, record=True)
    assert r.lost_s > 0  # the work since the last checkpoint is re-executed
    assert any(e.kind == "load_start" and e.value == pytest.approx(costs_of(s).load_s) for e in ev)
    # two of three trainers down: a peer survives, nothing is re-executed
    raw2 = {
        **raw,
        "failures": {"domains": [{**raw["failures"]["domains"][0], "nodes": 2}], "start": "fresh"},
    }
    r2, _ = simulate_one(sc.validate(raw2, "t"), 0)
    assert r2.lost_s == 0
