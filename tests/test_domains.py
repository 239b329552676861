"""Fixed failure domains, and ECRM stripes placed across them."""

from __future__ import annotations

import itertools

import pytest
from scenario_builder import small, validated

from cprsim.errors import InputError
from cprsim.failures.rates import failure_rates
from cprsim.scenario import HOUR
from cprsim.sim.beyond import stripe_layout
from cprsim.sim.engine import simulate_one
from cprsim.sim.replicate import estimate, run_replications

BASE = small(
    name="dom",
    seed=9,
    replications=50,
    cluster={"embedding_servers": 12, "embedding_gb": 24.0, "dense_gb": 0.2},
    job={"duration_h": 20.0, "samples_per_s": 10000.0},
    storage={"write_gbps": 2.0, "read_gbps": 4.0, "latency_s": 2.0},
    reschedule={"mean_s": 300.0},
    failures={
        "domains": [
            {
                "name": "host",
                "node_type": "embedding",
                "nodes": 3,
                "failure": {"family": "exponential", "mtbf_h": 10.0},
            }
        ]
    },
)


def scen(**upd):
    return validated(BASE, "t", **upd)


def test_a_fixed_domain_always_takes_down_the_same_members():
    s = scen(**{"strategy.name": "partial"})
    _, ev = simulate_one(s, 0, record=True)
    fails = [e for e in ev if e.kind == "fail"]
    assert fails
    hosts = {(e.node - 4) // 3 for e in fails}
    by_time: dict[float, set[int]] = {}
    for e in fails:
        by_time.setdefault(e.time_s, set()).add(e.node - 4)
    for members in by_time.values():  # every failure event is exactly one host's 3 servers
        g = min(members) // 3
        assert members <= {3 * g, 3 * g + 1, 3 * g + 2}
    assert len(hosts) >= 2


def test_each_fixed_domain_has_its_own_process():
    """4 hosts, each failing every 10 h: 4 x T / 10 h events, 3 servers each (exponential: exact)."""
    s = scen(**{"strategy.name": "partial"})
    r = failure_rates(s)
    assert r.embedding == pytest.approx(4 / (10 * HOUR)) and r.k == pytest.approx(3.0)
    res, _ = run_replications(s, 300)
    per_h = estimate([x.failures_embedding / 3 / (x.wall_s / HOUR) for x in res])
    assert per_h.lo <= 0.4 <= per_h.hi * 1.02  # servers down during rescheduling cannot fail again


def test_domain_aware_stripes_span_distinct_domains():
    s = scen(**{"strategy": {"name": "ecrm", "k": 3, "m": 1, "parity_slowdown": 0.0}})
    layout = stripe_layout(s, 3, 1, "domain-aware")
    for st in set(layout):
        members = [j for j in range(12) if layout[j] == st]
        assert len({j // 3 for j in members}) == len(members)
    contiguous = stripe_layout(s, 3, 1, "contiguous")
    assert contiguous == [j // 4 for j in range(12)]


def _stripe_lost(s, hosts):
    """Fail the given hosts' servers at the same instant (nothing else fails)."""
    t = 2.5 * HOUR
    sched = [(t, tuple(4 + 3 * h + i for i in range(3)), (300.0,) * 3) for h in hosts]
    s = s.with_updates(
        {
            "failures.domains": [
                {**BASE["failures"]["domains"][0], "failure": {"family": "constant", "mtbf_h": 1e6}}
            ],
            "failures.start": "fresh",
        }
    )
    _, ev = simulate_one(s, 0, record=True, schedule=sched)
    return any(e.kind == "stripe_loss" for e in ev)


@pytest.mark.parametrize("placement", ["domain-aware", "contiguous"])
def test_ecrm_loses_a_stripe_exactly_when_two_down_domains_share_one(placement):
    """Against the combinatorics of the layout: one host down never loses a domain-aware stripe;
    two hosts down lose one iff some stripe has members in both (m = 1)."""
    s = scen(
        **{
            "strategy": {
                "name": "ecrm",
                "k": 3,
                "m": 1,
                "parity_slowdown": 0.0,
                "placement": placement,
            }
        }
    )
    layout = stripe_layout(s, 3, 1, placement)
    for h in range(4):
        expect = any(sum(1 for i in range(3) if layout[3 * h + i] == st) > 1 for st in set(layout))
        assert _stripe_lost(s, [h]) == expect
        if placement == "domain-aware":
            assert not expect
    pairs = list(itertools.combinations(range(4), 2))
    lost = [_stripe_lost(s, list(p)) for p in pairs]
    expect = [
        any(
            sum(1 for h in p for i in range(3) if layout[3 * h + i] == st) > 1 for st in set(layout)
        )
        for p in pairs
    ]
    assert lost == expect
    if placement == "contiguous":
        assert any(
            _stripe_lost(s, [h]) for h in range(4)
        )  # a host inside one stripe loses it alone


def test_ecrm_fallback_stops_every_rebuild():
    """Hand-computed: host 0 fails (rebuilds start), then hosts 0's stripe-mates fail: the fallback to
    the checkpoint reloads everything, and no rebuild slows training afterwards."""
    s = scen(
        **{
            "strategy": {
                "name": "ecrm",
                "k": 3,
                "m": 1,
                "parity_slowdown": 0.0,
                "rebuild_throughput": 0.5,
                "placement": "contiguous",
            },
            "failures.domains": [
                {**BASE["failures"]["domains"][0], "failure": {"family": "constant", "mtbf_h": 1e6}}
            ],
            "failures.start": "fresh",
            "storage.node_gbps": 0.1,
        }
    )  # rebuilds (120 s) outlast the reload
    t = 2.5 * HOUR
    sched = [(t, (4,), (300.0,)), (t + 10.0, (8,), (300.0,)), (t + 20.0, (5,), (300.0,))]
    r, ev = simulate_one(s, 0, record=True, schedule=sched)
    assert any(e.kind == "stripe_loss" for e in ev)
    # after the fallback nothing is rebuilt: the only degraded time is the 20 s before the loss at
    # half speed (10 s of wall time beyond the progress made); a surviving rebuild would add more
    loss_t = next(e.time_s for e in ev if e.kind == "stripe_loss")
    assert loss_t == pytest.approx(t + 20.0)
    assert r.degraded_s == pytest.approx(10.0, abs=1e-6)


def test_domain_aware_placement_needs_enough_domains():
    with pytest.raises(InputError, match="placement"):
        scen(**{"strategy": {"name": "ecrm", "k": 4, "m": 1, "parity_slowdown": 0.0}})


def test_a_failure_ecrm_rebuilds_does_not_restart_a_restore_under_way():
    """Hand-computed: after a stripe loss the job reloads the checkpoint in full (L); a server of
    another stripe failing halfway through is rebuilt from parity and the reload simply finishes
    (load = L, not L/2 + a new load)."""
    s = scen(
        **{
            "strategy": {
                "name": "ecrm",
                "k": 3,
                "m": 1,
                "parity_slowdown": 0.0,
                "placement": "contiguous",
            },
            "failures.domains": [
                {**BASE["failures"]["domains"][0], "failure": {"family": "constant", "mtbf_h": 1e6}}
            ],
            "failures.start": "fresh",
        }
    )
    from cprsim.costs import costs_of

    L = costs_of(s).load_s
    t = 2.5 * HOUR
    sched = [(t, (4,), (300.0,)), (t + 10.0, (5,), (300.0,)), (t + 310.0 + L / 2, (12,), (300.0,))]
    r, ev = simulate_one(s, 0, record=True, schedule=sched)
    assert any(e.kind == "stripe_loss" for e in ev)
    assert r.load_s == pytest.approx(L, rel=1e-12)
