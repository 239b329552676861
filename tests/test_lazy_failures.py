"""Lazy failure streams for large kinds (cprsim.sim.failstreams._Lazy, issue 29 item 3): the units
that have not failed yet are drawn as one pool, window by window. The failures must follow the
same law as the block layout's (every unit's renewal process, drawn in full): two-sample tests on
the failure times and the counts, for exponential and Weibull lifetimes, fresh and stationary
starts, nodes and groups."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from cprsim.failures.distributions import Distribution
from cprsim.sim import failstreams
from cprsim.sim.failstreams import BulkFailures, Units, _Blocks, _Lazy
from cprsim.streams import stream

RHO = Distribution("exponential", 5.0)


def _units(dist: Distribution, stationary: bool, k: int, seed: int, n: int, renew: bool) -> Units:
    return Units(
        0,
        n,
        k,
        dist,
        RHO,
        stationary,
        lambda b: stream(seed, 0, "node-block", 0, b),
        renew_at_failure=renew,
    )


def _failures(units: Units, lazy: bool, horizon: float, first: float) -> list:
    """Every failure before ``horizon``, windows from ``first`` on, in the layout asked for."""
    bulk = BulkFailures([units], first)
    bulk.blocks = [_Lazy(units) if lazy else _Blocks(units)]
    out = []
    while bulk.horizon < horizon:
        out += bulk.advance()
    return [f for f in out if f[0] < horizon]


CASES = [
    (Distribution.from_mean("exponential", 2e4), True, 1, False),
    (Distribution.from_mean("weibull", 2e4, 0.6), True, 1, False),
    (Distribution.from_mean("weibull", 2e4, 0.6), False, 1, True),
    (Distribution.from_mean("weibull", 3e3, 1.7), True, 4, False),
    (Distribution.from_mean("weibull", 3e3, 1.7), False, 3, False),
]


@pytest.mark.parametrize(("dist", "stationary", "k", "renew"), CASES)
def test_lazy_units_fail_as_the_blocks_do(dist, stationary, k, renew):
    """Failure times (pooled) and counts per run: the lazy layout against the blocks, 30 seeds
    each (different draws, the same law: KS and t-tests at 0.1%)."""
    times, counts = ([], []), ([], [])
    for seed in range(30):
        for i, lazy in enumerate((True, False)):
            u = _units(dist, stationary, k, seed, 5000, renew)
            f = _failures(u, lazy, 3000.0, 100.0)
            times[i].extend(x[0] for x in f)
            counts[i].append(len(f))
    assert min(counts[0]) > 100
    assert stats.ks_2samp(*times).pvalue > 1e-3
    assert stats.ttest_ind(*counts).pvalue > 1e-3


def test_the_two_sample_test_sees_a_lazy_pool_that_ignores_survival():
    """The test above can fail: a pool whose failure chance forgets that its units survived the
    earlier windows (a Weibull of shape 0.6 fails less as it ages) fails too often."""
    dist = Distribution.from_mean("weibull", 2e4, 0.6)

    class Forgetful(failstreams._FirstLife):
        def p(self, h: float, H: float) -> float:
            return super().p(0.0, H - h)

    counts = ([], [])
    for seed in range(20):
        for i, lazy in enumerate((True, False)):
            u = _units(dist, False, 1, seed, 5000, False)
            bulk = BulkFailures([u], 50.0)
            if lazy:
                bulk.blocks = [_Lazy(u)]
                bulk.blocks[0].first = Forgetful(dist, False)
            else:
                bulk.blocks = [_Blocks(u)]
            n = 0
            while bulk.horizon < 3000.0:
                n += sum(f[0] < 3000.0 for f in bulk.advance())
            counts[i].append(n)
    assert stats.ttest_ind(*counts).pvalue < 1e-3


def test_lazy_windows_hand_out_every_failure_once_in_order_and_groups_whole():
    """Time order, each unit's failures spaced by its down time, the last group smaller, and a
    unit index never past the last unit."""
    d = Distribution.from_mean("weibull", 500.0, 0.8)
    u = Units(100, 10_002, 4, d, RHO, True, lambda b: stream(7, 0, "domain-block", 0, b))
    f = _failures(u, True, 2_000.0, 3.0)
    assert len(f) > 1000
    assert [x[0] for x in f] == sorted(x[0] for x in f)
    by_unit: dict = {}
    for t, nodes, rhos in f:
        assert len(rhos) == len(nodes) and nodes[0] >= 100 and nodes[-1] < 100 + 10_002
        assert nodes == tuple(range(nodes[0], nodes[0] + len(nodes)))
        by_unit.setdefault(nodes, []).append((t, max(rhos)))
    assert {len(n) for n in by_unit} == {4, 2}
    for seen in by_unit.values():
        assert all(b[0] >= a[0] + a[1] for a, b in zip(seen, seen[1:]))
    assert max(len(v) for v in by_unit.values()) > 1  # units fail again after their first failure


def test_large_exponential_and_weibull_kinds_go_lazy_others_keep_blocks():
    d = Distribution.from_mean("exponential", 1e5)
    mk = lambda n, k=1, dist=d: Units(
        0, n, k, dist, RHO, True, lambda b: stream(1, 0, "node-block", 0, b)
    )
    assert _Lazy.fits(mk(failstreams.LAZY_UNITS))
    assert not _Lazy.fits(mk(failstreams.LAZY_UNITS - 1))
    assert not _Lazy.fits(mk(failstreams.LAZY_UNITS * 4 - 5, 4))  # units, not nodes
    assert not _Lazy.fits(mk(10**6, dist=Distribution.from_mean("lognormal", 1e5, 1.0)))
    bulk = BulkFailures([mk(10**6), mk(100)], 1e4)
    assert [type(b) for b in bulk.blocks] == [_Lazy, _Blocks]


def test_a_million_units_cost_what_the_failures_cost():
    """A million nodes that fail a few times draw a few numbers, not a million (no timing: the
    pool keeps no per-unit state until a unit fails)."""
    d = Distribution.from_mean("exponential", 1e10)
    u = Units(0, 10**6, 1, d, RHO, True, lambda b: stream(2, 0, "node-block", 0, b))
    bulk = BulkFailures([u], 1e6)
    f = bulk.advance()
    lazy = bulk.blocks[0]
    assert isinstance(lazy, _Lazy) and lazy.failed.size == len(f) < 1000
    assert np.all(np.diff([x[0] for x in f]) >= 0)


# -- the node lifecycle's first machines (Fleet._start_lazy) ---------------------------------------------------
def _fleet_scenario(**more):
    from cprsim import scenario as sc

    spec = {
        "cluster.trainers": 5000,
        "job.duration_h": 24.0,
        "failures.domains": [],
        "failures.trainer": {"family": "weibull", "shape": 0.8, "mtbf_h": 5000.0},
        "lifecycle.health.bad_fraction": 0.2,
        "lifecycle.health.bad_multiplier": 5.0,
        "checkpoint.interval_h": 0.5,
    }
    spec.update(more)
    return sc.load("llm-16k-gpus", spec)


def test_large_lifecycle_types_draw_their_first_machines_lazily():
    from cprsim.sim import lifecycle
    from cprsim.sim.engine import simulate_one

    seen = []
    orig = lifecycle.Fleet._start_lazy

    def spy(self, typ, a, b):
        seen.append((typ, a, b))
        return orig(self, typ, a, b)

    lifecycle.Fleet._start_lazy = spy
    try:
        simulate_one(_fleet_scenario(), 0)
        simulate_one(_fleet_scenario(**{"lifecycle.health.turn_bad_per_h": 1e-4}), 0)
        simulate_one(_fleet_scenario(**{"failures.clock.trainer": "powered"}), 0)
        simulate_one(_fleet_scenario(**{"cluster.trainers": failstreams.LAZY_UNITS - 1}), 0)
    finally:
        lifecycle.Fleet._start_lazy = orig
    assert seen == [(0, 0, 5000)]  # machines turning bad, idle wear, a small type: per slot


@pytest.mark.slow
def test_lazy_first_machines_fail_as_the_per_slot_ones_do(monkeypatch):
    """Node failures and the bad machines' share of them (a fifth of the machines, 5x as
    failure-prone: ~56% of the failures), lazy against per slot, 40 replications each."""
    from cprsim.sim.engine import simulate_one

    s = _fleet_scenario()
    out = ([], []), ([], [])
    for i, lazy in enumerate((True, False)):
        if not lazy:
            monkeypatch.setattr(failstreams._Lazy, "fits", staticmethod(lambda u: False))
        for rep in range(40):
            r, _ = simulate_one(s, rep)
            out[i][0].append(r.failures_trainer)
            out[i][1].append(r.failures_bad / max(1, r.failures_trainer))
    (fl, bl), (fs, bs) = out
    assert 0.45 < np.mean(bl) < 0.65
    assert stats.ttest_ind(fl, fs).pvalue > 1e-3
    assert stats.ttest_ind(bl, bs).pvalue > 1e-3
