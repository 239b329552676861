"""Tiered checkpoints in the engine (checkpoint.mode = "tiered", issue 16 item 3): hand-computed.

Spec: 2 trainers, 4 embedding servers of 20 GB each (40 GB x 2 for the optimizer / 4), trainer 0
holds the 2 GB dense part (replicated: the others hold the same and save nothing). Snapshot
10 GB/s per node + 0.5 s latency: a 2.5 s stall; one peer (the next server), 2.5 GB/s links:
replicated 8 s later; every 2nd snapshot persisted: 5 s + max(82 GB / 10 GB/s, 20 GB / 2.5 GB/s)
= 13.2 s. Restore from memory: 0.5 + 20 / 2.5 = 8.5 s; from storage: 5 + max(82 / 20, 8) = 13 s.

Snapshots at progress 3,600 (wall 3,600), 7,200 (wall 7,202.5; persisted, durable at 7,226.2)
and 10,800 (wall 10,805; memory-ready 10,815.5). A failure at wall 12,000 (progress 11,992.5).
"""

from __future__ import annotations

import pytest

from cprsim import scenario as sc
from cprsim.costs import costs_of
from cprsim.sim.engine import simulate_one, tier_spec

RAW = {
    "name": "tiers",
    "seed": 1,
    "replications": 1,
    "cluster": {"trainers": 2, "embedding_servers": 4, "embedding_gb": 40.0, "dense_gb": 1.0},
    "job": {"duration_h": 5.0},
    "storage": {"write_gbps": 10.0, "read_gbps": 20.0, "latency_s": 5.0, "node_gbps": 2.5},
    "reschedule": {"family": "constant", "mean_s": 100.0},
    "checkpoint": {
        "interval_h": 1.0,
        "mode": "tiered",
        "snapshot_gbps": 10.0,
        "tiers": {"replicas": 1, "peer_stride": 1, "persist_every": 2, "memory_latency_s": 0.5},
    },
}
T_FAIL, PROGRESS = 12000.0, 12000.0 - 3 * 2.5


def run(nodes, **tiers):
    raw = {
        **RAW,
        "checkpoint": {**RAW["checkpoint"], "tiers": {**RAW["checkpoint"]["tiers"], **tiers}},
    }
    s = sc.validate(raw, "test")
    return simulate_one(s, 0, record=True, schedule=[(T_FAIL, tuple(nodes), (100.0,) * len(nodes))])


def test_the_spec_by_hand():
    s = sc.validate(RAW, "test")
    t = tier_spec(s, costs_of(s))
    assert t.snapshot_s == pytest.approx(2.5)
    assert t.replicate_s == pytest.approx(8.0)
    assert t.persist_s == pytest.approx(13.2)
    assert t.memory_restore_s([3]) == pytest.approx(8.5)
    assert t.storage_restore_s == pytest.approx(13.0)


def test_a_node_whose_peer_is_up_restores_from_memory():
    res, ev = run([3])  # server 1 (node 3); its peer, node 4, is up
    assert (res.memory_restores, res.storage_restores) == (1, 0)
    assert [e.value for e in ev if e.kind == "tier_restore"] == [1]
    assert res.lost_s == pytest.approx(PROGRESS - 10800.0)
    assert res.load_s == pytest.approx(8.5)
    # snapshots at progress 3,600, 7,200, 10,800 and again 14,400 after the rollback: 4 stalls
    assert res.save_s == pytest.approx(4 * 2.5)
    assert res.wall_s == pytest.approx(18000 + 10 + (PROGRESS - 10800) + 100 + 8.5)


def test_a_domain_failure_that_takes_the_peer_too_restores_from_storage():
    res, ev = run([3, 4])  # node 3 and its only peer: the newest durable checkpoint (7,200)
    assert (res.memory_restores, res.storage_restores) == (0, 1)
    assert [e.value for e in ev if e.kind == "tier_restore"] == [2]
    assert res.lost_s == pytest.approx(PROGRESS - 7200.0)
    assert res.load_s == pytest.approx(13.0)


def test_peers_in_another_domain_survive_the_domain_failure():
    res, _ = run([3, 4], peer_stride=2)  # node 3's peer is node 5: up
    assert (res.memory_restores, res.storage_restores) == (1, 0)
    assert res.lost_s == pytest.approx(PROGRESS - 10800.0)


def test_without_a_durable_checkpoint_the_job_starts_over():
    res, _ = run([3, 4], persist_every=4)  # only the 4th snapshot would be persisted
    assert (res.memory_restores, res.storage_restores) == (0, 0)
    assert res.lost_s == pytest.approx(PROGRESS)


def _partial(nodes):
    raw = {
        **RAW,
        "job": {"duration_h": 5.0, "samples_per_s": 1000.0},
        "strategy": {"name": "partial"},
    }
    return simulate_one(
        sc.validate(raw, "test"),
        0,
        record=True,
        schedule=[(T_FAIL, tuple(nodes), (100.0,) * len(nodes))],
    )


def test_partial_recovery_restores_a_shard_from_its_peers_memory():
    """CPR on tiers: server 1 (node 3) comes back from the snapshot its peer holds (progress
    10,800): it loses a quarter of the updates since then; nothing rolls back."""
    res, _ = _partial([3])
    assert res.lost_s == 0.0
    assert res.pls == pytest.approx(0.25 * (PROGRESS - 10800.0) / 18000.0)
    assert res.load_s == pytest.approx(8.5)


def test_partial_recovery_falls_back_to_storage_for_a_shard_whose_peer_failed_too():
    """Nodes 3 and 4 fail: node 3's only peer (4) is gone: its shard comes from the persisted
    checkpoint (7,200; storage read of one shard: 5 + 20 GB / 2.5 GB/s = 13 s); node 4's peer (5) is
    up: memory (10,800)."""
    res, _ = _partial([3, 4])
    assert res.pls == pytest.approx(0.25 * ((PROGRESS - 7200.0) + (PROGRESS - 10800.0)) / 18000.0)
    assert res.load_s == pytest.approx(13.0)


def test_tiered_needs_a_strategy_that_supports_it():
    with pytest.raises(sc.ScenarioError, match=r"does not support checkpoint\.mode.*full, partial"):
        sc.validate(
            {
                **RAW,
                "job": {"duration_h": 5.0, "samples_per_s": 1000.0},
                "strategy": {"name": "mfu"},
            },
            "test",
        )
    with pytest.raises(sc.ScenarioError, match=r"\[checkpoint.tiers\] is for mode"):
        sc.validate({**RAW, "checkpoint": {"interval_h": 1.0, "tiers": {"replicas": 1}}}, "test")


def test_simulate_shows_where_restores_came_from():
    from cli_helpers import run as cli

    r = cli(
        "simulate",
        "cpr-production",
        "--replications",
        "4",
        "--set",
        'checkpoint.mode="tiered"',
        "--set",
        "checkpoint.interval_h=0.2",
    )
    assert r.exit_code == 0, r.output
    assert "restores from peers' memory" in r.output and "restores from storage" in r.output


def test_a_background_persist_slows_training_by_persist_slowdown():
    """No failure; persist every 2nd snapshot at half speed: persists of ordinals 2 and 4 take 13.2 s
    each at half the rate, 6.6 s of wall each; 4 snapshot stalls of 2.5 s."""
    raw = {**RAW, "checkpoint": {**RAW["checkpoint"], "persist_slowdown": 0.5}}
    res, _ = simulate_one(sc.validate(raw, "test"), 0)
    assert res.wall_s == pytest.approx(18000 + 4 * 2.5 + 2 * 13.2 * 0.5)
    assert res.degraded_s == pytest.approx(2 * 13.2 * 0.5)


def _plan(args, bound: bool = True):
    import json

    from cli_helpers import run as cli

    r = cli("plan", *args, *(["--max-accuracy-loss", "0.001"] if bound else []), "--json")
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


@pytest.mark.slow
def test_plan_picks_the_snapshot_interval_and_the_persist_period_and_confirms_them():
    """A small tiered job (cpr-production's cluster, tiered, a rack of 4 servers failing together
    besides: its peers go with it, so persisting matters)."""
    d = _plan(
        [
            "cpr-production",
            "--set",
            'checkpoint.mode="tiered"',
            "--set",
            "checkpoint.persist_slowdown=0.2",
            "--strategies",
            "partial",
            "-n",
            "40",
            "--search-replications",
            "40",
            "--confidence",
            "mean",
        ]
    )
    tiered = next(o for o in d["options"] if o["label"] == "full, tiered")
    assert tiered["params"]["persist_every"] >= 1 and tiered["interval_h"] > 0
    assert tiered["full_interval_h"] == pytest.approx(
        min(tiered["params"]["persist_every"] * tiered["interval_h"], 50.0)
    )
    assert tiered["overhead"]["n"] >= 30  # confirmed on fresh replications
    assert any("tiered checkpoints" in n for n in d["notes"])
    # partial recovery on the tiers too (a shard from a peer's memory): its own persist period,
    # and its promise confirmed on fresh replications
    cpr = next(o for o in d["options"] if o["label"] == "CPR-vanilla, tiered")
    assert cpr["params"]["persist_every"] in (1, 4, 16) and cpr["meets_bound"]
    assert cpr["full_interval_h"] == pytest.approx(
        min(cpr["params"]["persist_every"] * cpr["interval_h"], 50.0)
    )
    assert "CPR-vanilla" in {o["label"] for o in d["options"]}  # and on blocking saves


@pytest.mark.slow
def test_tiered_beats_single_tier_full_recovery_on_the_large_gpu_cluster():
    """llm-16k-gpus (2,048 nodes), a shorter job to keep the test quick, planned without an
    accuracy bound (a dense model: nothing loses updates): blocking and tiered are compared, and
    the tiered option's mean overhead is below every single-tier full-recovery option's, their 95%
    CIs apart."""
    d = _plan(
        [
            "llm-16k-gpus",
            "--set",
            "job.duration_h=48",
            "-n",
            "30",
            "--search-replications",
            "30",
            "--confidence",
            "mean",
        ],
        bound=False,
    )
    assert d["accuracy_bound"] is None
    opts = {o["label"]: o for o in d["options"]}
    assert {"full (Young)", "full (Daly)", "full (simulated optimum)"} <= set(opts)
    tiered = opts.pop("full, tiered")
    assert d["recommended"] == "full, tiered"
    for o in opts.values():
        assert tiered["overhead"]["ci95"][1] < o["overhead"]["ci95"][0], (
            tiered["overhead"],
            o["label"],
            o["overhead"],
        )
    assert any("recover embedding shards" in n for n in d["notes"])  # CPR has nothing to do here
