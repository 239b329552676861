"""The closed forms of cprsim/analytic.py: numerics, hopeless regimes, and the simulator as oracle.

Statistical tests compare the simulator's mean (fixed seed) with the closed form through the
95% confidence interval of the mean; each also shows that the form it replaces is outside it.
"""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest
from scenario_builder import merged, small
from scipy import optimize

from cprsim import analytic
from cprsim import scenario as sc
from cprsim.costs import costs_of
from cprsim.scenario import HOUR
from cprsim.sim.prioritized import coverage_of
from cprsim.sim.replicate import estimate, run_replications

BASE = small()

DELTA, R = 85.0, 345.0  # a save and a recovery (s), as in cpr-production


def fails(lam: float, rec: float = R, **more) -> analytic.Failures:
    """Failure events at ``lam`` per second, each costing a recovery of ``rec`` seconds."""
    return analytic.Failures(rate=lam, recovery_s=rec, **more)


def scen(**upd) -> sc.Scenario:
    return merged(BASE, **upd)


def inside(expect: float, est) -> bool:
    return est.lo <= expect <= est.hi


# -- defaults keep the classic forms --------------------------------------------------------------
@pytest.mark.parametrize("lam", [1e-6, 1 / HOUR, 1 / 600])
@pytest.mark.parametrize("tau", [300.0, 2 * HOUR, 7.3 * HOUR])
def test_defaults_are_the_classic_closed_forms(lam, tau):
    W, d, rec = 20 * HOUR, 60.0, 400.0
    job, f = analytic.Job(work_s=W, save_s=d), fails(lam, rec)
    seg = lambda a: math.expm1(lam * a) * math.exp(lam * rec) / lam
    assert analytic.segment_time(tau + d, f) == pytest.approx(seg(tau + d), rel=1e-12)
    assert analytic.recovery_time(f) == pytest.approx(math.expm1(lam * rec) / lam, rel=1e-12)
    n = analytic.n_saves(W, tau)
    assert analytic.full_wall(job, tau, f) == pytest.approx(
        n * seg(tau + d) + seg(W - n * tau), rel=1e-12
    )
    assert analytic.partial_wall(job, tau, f) == pytest.approx(
        W * math.exp(lam * rec) + n * math.expm1(lam * d) * math.exp(lam * rec) / lam, rel=1e-12
    )
    # splitting R into a wait and a restore changes nothing while both see the same rate
    split = fails(lam, rec, wait_rate=lam, restore_s=150.0)
    assert analytic.full_wall(job, tau, split) == pytest.approx(
        analytic.full_wall(job, tau, f), rel=1e-12
    )
    # a slower rate during the wait can only shorten the job
    slower = fails(lam, rec, wait_rate=0.5 * lam, restore_s=150.0)
    assert analytic.full_wall(job, tau, slower) < analytic.full_wall(job, tau, f)


# -- 1. numerics: no overflow, an optimum in any regime ---------------------------------------------
def test_walls_are_infinite_not_overflow_errors_where_astronomically_large():
    W, lam = 50 * HOUR, 1 / 18.0  # MTBF 18 s: lam*W = 1e4
    job = analytic.Job(work_s=W, save_s=DELTA)
    assert analytic.full_wall(job, W, fails(lam)) == math.inf
    assert analytic.full_overhead(job, W, fails(lam)) == math.inf
    assert analytic.segment_time(W, fails(lam)) == math.inf
    assert analytic.recovery_time(fails(1.0, 1e6)) == math.inf
    assert analytic.partial_wall(job, 3600.0, fails(1.0, 1e4)) == math.inf
    both = analytic.SplitFailures(
        embedding_rate=1.0,
        embedding_recovery_s=1e4,
        trainer_rate=1.0,
        trainer_recovery_s=1e4,
        wait_s=5e3,
    )
    assert analytic.partial_wall_split(job, 3600.0, both) == math.inf
    assert math.isfinite(analytic.full_wall(job, 200.0, fails(1 / 300.0)))
    assert math.isfinite(
        analytic.full_wall(job, W, fails(1 / 300.0))
    )  # 1e263: large, still a float


def per_segment_optimum(delta: float, lam: float, rec: float) -> tuple[float, float]:
    """W >> tau: E[wall]/W -> min over u = lam*tau of expm1(u + lam*delta) exp(lam*R) / u (in logs)."""
    f = lambda lu: analytic._log_expm1(math.exp(lu) + lam * delta) + lam * rec - lu
    res = optimize.minimize_scalar(
        f, bounds=(-20.0, 5.0), method="bounded", options={"xatol": 1e-10}
    )
    return math.exp(res.x) / lam, res.fun


@pytest.mark.parametrize("mtbf,W", [(300.0, 50 * HOUR), (300.0, 1e4 * 300.0), (18.0, 50 * HOUR)])
def test_full_optimum_is_robust_where_lam_W_is_huge(mtbf, W):
    lam = 1.0 / mtbf  # lam*W = 600, 1e4, 1e4
    job = analytic.Job(work_s=W, save_s=DELTA)
    tau = analytic.full_optimum(
        job, fails(lam)
    )  # used to raise OverflowError (exp(lam*W) at tau = W)
    assert 1.0 <= tau < W
    log_best = analytic._log_full_wall(W, tau, DELTA, lam, R)
    grid = np.geomspace(1.0, W, 4000)
    assert (
        log_best <= min(analytic._log_full_wall(W, float(t), DELTA, lam, R) for t in grid) + 1e-12
    )
    # the optimum agrees with the independent per-segment (renewal-reward) optimum
    tau_seg, log_ratio = per_segment_optimum(DELTA, lam, R)
    v = analytic.hopeless(job, fails(lam))
    assert v.tau == tau and math.isfinite(v.log10_ratio)
    assert v.log10_ratio * math.log(10) == pytest.approx(log_ratio, abs=5 * tau / W + 1e-9)
    assert tau == pytest.approx(tau_seg, rel=0.02)


def test_full_optimum_is_no_worse_than_a_fine_grid_in_ordinary_regimes():
    W = 50 * HOUR
    job = analytic.Job(work_s=W, save_s=DELTA)
    for lam in (1 / HOUR, 1 / (10 * HOUR), 1 / 600, 1e-7):
        tau = analytic.full_optimum(job, fails(lam))
        best = min(
            analytic.full_wall(job, float(t), fails(lam)) for t in np.geomspace(1.0, W, 20_000)
        )
        assert analytic.full_wall(job, tau, fails(lam)) <= best * (1 + 1e-12)
    assert analytic.full_optimum(job, fails(0.0)) == W


# -- 2. hopeless regimes ---------------------------------------------------------------------------
def test_hopeless_regime_is_flagged_and_a_production_one_is_not():
    W = 50 * HOUR
    job = analytic.Job(work_s=W, save_s=DELTA)
    bad = analytic.hopeless(job, fails(1 / 120.0))  # the cluster fails every 2 minutes
    assert bad.hopeless and bad.ratio > 10.0
    assert bad.ratio == pytest.approx(
        analytic.full_wall(job, bad.tau, fails(1 / 120.0)) / W, rel=1e-9
    )
    assert not analytic.hopeless(job, fails(1 / 120.0), limit=1e3).hopeless
    prod = analytic.hopeless(job, fails(1 / (10 * HOUR)))  # cpr-production-like
    assert not prod.hopeless and 1.0 < prod.ratio < 1.2
    assert prod.ratio == pytest.approx(
        analytic.full_wall(job, prod.tau, fails(1 / (10 * HOUR))) / W, rel=1e-9
    )
    # far beyond floats: still an answer, and a finite order of magnitude
    absurd = analytic.hopeless(job, fails(1 / 10.0))
    assert absurd.hopeless and absurd.ratio > 1e15 and 15 < absurd.log10_ratio < 1e6
    worse = analytic.hopeless(job, fails(1.0, 10 * R))
    assert worse.hopeless and worse.ratio == math.inf and math.isfinite(worse.log10_ratio)
    assert worse.log10_ratio > math.log10(sys.float_info.max)


@pytest.mark.parametrize("target", [1.1, 2.0, 10.0])
def test_mtbf_for_ratio_is_the_mtbf_at_which_the_best_ratio_is_reached(target):
    job = analytic.Job(work_s=50 * HOUR, save_s=DELTA)
    M = analytic.mtbf_for_ratio(job, recovery_s=R, ratio=target)
    assert analytic.hopeless(job, fails(1 / M)).ratio == pytest.approx(target, rel=1e-6)
    assert analytic.hopeless(job, fails(1 / (0.9 * M))).ratio > target
    assert analytic.hopeless(job, fails(1 / (1.1 * M))).ratio < target
    if target <= 2.0:
        assert (
            M > DELTA + R
        )  # a job finishes in 2x its work only when the MTBF is above save + recovery
    # the regime flagged above would need an MTBF this long to finish within 2x its work
    if target == 2.0:
        assert analytic.hopeless(job, fails(1 / 120.0)).hopeless and M > 120.0
    # with N nodes the wait sees (N-1)/N of the rate: a slightly shorter MTBF suffices
    assert (
        analytic.mtbf_for_ratio(
            job, recovery_s=R, ratio=target, recovery_share=0.75, restore_s=30.0
        )
        < M
    )


# -- 3. the node being rescheduled cannot fail ------------------------------------------------------
def test_node_wait_is_the_busy_period_of_independent_nodes():
    rho, mu = 400.0, 1 / HOUR
    assert analytic.node_wait(rho, mu, 1) == pytest.approx(rho)
    for n in (2, 4, 50):
        x = analytic.lam_recovery_nodes(rho, mu, n)
        assert 0.0 < x < (n - 1) * mu  # below the rate with only the first failed node down
        assert analytic.recovery_time(fails(0.0, rho, wait_rate=x)) == pytest.approx(
            analytic.node_wait(rho, mu, n), rel=1e-9
        )
    # two nodes: ((1 + mu rho)^2 - 1)/(2 mu) = rho (1 + mu rho / 2), the first-order restart model
    assert analytic.node_wait(rho, mu, 2) == pytest.approx(rho * (1 + mu * rho / 2), rel=1e-12)


@pytest.mark.slow
def test_full_recovery_with_the_recovery_rate_of_the_nodes_still_up_matches_the_simulator():
    """4 nodes, node MTBF 1 h, 400 s rescheduling: the wait sees 3 nodes, not 4."""
    N, mu, rho, d, L = 4, 1 / HOUR, 400.0, 30.0, 30.0
    s = scen(
        seed=11,
        cluster={"embedding_servers": N},
        reschedule={"family": "constant", "mean_s": rho},
        failures={"embedding": {"family": "exponential", "mtbf_h": 1 / mu / HOUR}},
        costs={"save_s": d, "load_s": L},
        checkpoint={"interval_h": 0.07},
        strategy={"name": "full"},
    )
    res, _ = run_replications(s, 2000)
    wall = estimate([r.wall_s for r in res])
    job, tau = analytic.Job(work_s=s.duration_s, save_s=d), s.interval_s
    exact = analytic.full_wall(
        job,
        tau,
        fails(N * mu, rho + L, wait_rate=analytic.lam_recovery_nodes(rho, mu, N), restore_s=L),
    )
    first_down = analytic.full_wall(
        job, tau, fails(N * mu, rho + L, wait_rate=(N - 1) * mu, restore_s=L)
    )
    old = analytic.full_wall(job, tau, fails(N * mu, rho + L))
    assert inside(exact, wall), (exact, wall)
    assert not inside(old, wall) and old > wall.hi, (old, wall)
    assert abs(first_down - wall.mean) < abs(old - wall.mean) / 3
    # the failures the simulator saw: a node fails only while up (N*wall - rho*events node-seconds)
    gap = estimate(
        [r.failure_events - mu * (N * r.wall_s - rho * r.failure_events) for r in res],
        non_negative=False,
    )
    assert gap.lo <= 0.0 <= gap.hi, gap
    assert estimate([r.failure_events - N * mu * r.wall_s for r in res], non_negative=False).hi < 0


# -- 4. partial recovery: a trainer failure costs a dense copy, not a shard load ---------------------
def test_partial_wall_split_reduces_to_partial_wall_with_one_type():
    W, tau, d, lam, mu, wait, rec = 30 * HOUR, HOUR, 60.0, 2 / HOUR, 0.5 / HOUR, 300.0, 900.0
    job = analytic.Job(work_s=W, save_s=d)

    def split(lam_emb: float, lam_tr: float, **more) -> analytic.SplitFailures:
        return analytic.SplitFailures(
            embedding_rate=lam_emb,
            embedding_recovery_s=rec,
            trainer_rate=lam_tr,
            trainer_recovery_s=rec if lam_tr else 0.0,
            **more,
        )

    assert analytic.partial_wall_split(
        job, tau, split(lam, 0.0, wait_s=wait, embedding_node_rate=mu)
    ) == pytest.approx(
        analytic.partial_wall(job, tau, fails(lam, rec, wait_rate=lam - mu, restore_s=rec - wait)),
        rel=1e-10,
    )
    assert analytic.partial_wall_split(job, tau, split(lam, 0.0)) == pytest.approx(
        analytic.partial_wall(job, tau, fails(lam, rec)), rel=1e-10
    )
    # two types with the same restore are one type
    assert analytic.partial_wall_split(
        job, tau, split(lam / 2, lam / 2, wait_s=wait)
    ) == pytest.approx(
        analytic.partial_wall(job, tau, fails(lam, rec, wait_rate=lam, restore_s=rec - wait)),
        rel=1e-10,
    )


@pytest.mark.slow
def test_partial_recovery_charges_trainer_failures_a_dense_copy():
    mu_e = mu_t = 1 / (4 * HOUR)
    n, rho, d, shard = 4, 300.0, 60.0, 600.0
    s = scen(
        seed=12,
        cluster={"embedding_servers": n, "trainers": n},
        job={"duration_h": 20.0},
        reschedule={"family": "constant", "mean_s": rho},
        failures={
            "embedding": {"family": "exponential", "mtbf_h": 1 / mu_e / HOUR},
            "trainer": {"family": "exponential", "mtbf_h": 1 / mu_t / HOUR},
        },
        costs={"save_s": d, "shard_load_s": shard},
        checkpoint={"interval_h": 1.0},
        strategy={"name": "partial", "trainer_degraded": False},
    )
    c = costs_of(s)
    assert c.dense_copy_s < 0.01 * shard
    res, _ = run_replications(s, 2000)
    wall = estimate([r.wall_s for r in res])
    job, tau = analytic.Job(work_s=s.duration_s, save_s=d), s.interval_s
    split = analytic.partial_wall_split(
        job,
        tau,
        analytic.SplitFailures(
            embedding_rate=n * mu_e,
            embedding_recovery_s=rho + shard,
            trainer_rate=n * mu_t,
            trainer_recovery_s=rho + c.dense_copy_s,
            wait_s=rho,
            embedding_node_rate=mu_e,
            trainer_node_rate=mu_t,
        ),
    )
    every_event_a_shard_load = analytic.partial_wall(
        job, tau, fails(n * (mu_e + mu_t), rho + shard)
    )
    assert inside(split, wall), (split, wall)
    assert every_event_a_shard_load > wall.hi, (every_event_a_shard_load, wall)


# -- 5. PLS: failures while another shard recovers still lose updates --------------------------------
def pls_scenario(strategy: dict, tau_h: float, seed: int) -> sc.Scenario:
    return scen(
        seed=seed,
        cluster={"embedding_servers": 4},
        job={"duration_h": 50.0, "samples_per_s": 5_000.0},
        reschedule={"family": "constant", "mean_s": 400.0},
        failures={"embedding": {"family": "exponential", "mtbf_h": 5.0}},
        costs={"save_s": 60.0, "shard_load_s": 30.0},
        checkpoint={"interval_h": tau_h},
        strategy=strategy,
    )


def stall_without(mu: float, n: int, rho: float, load: float) -> float:
    """Mean stall caused by another of n identical servers, this one never failing (exact wait)."""
    return analytic.recovery_time(
        fails(
            (n - 1) * mu,
            rho + load,
            wait_rate=analytic.lam_recovery_nodes(rho, mu, n - 1),
            restore_s=load,
        )
    )


def shard_failures(n: int, mu: float, **stall) -> analytic.ShardFailures:
    """n servers failing at mu each, one per event."""
    return analytic.ShardFailures(rate=n * mu, per_event=1, shards=n, **stall)


@pytest.mark.slow
def test_vanilla_pls_counts_failures_during_other_recoveries():
    s = pls_scenario({"name": "partial"}, 2.0, seed=13)
    res, _ = run_replications(s, 2000)
    pls = estimate([r.pls for r in res])
    n, mu, W, tau = 4, 1 / (5 * HOUR), s.duration_s, s.interval_s
    job = analytic.Job(work_s=W, save_s=60.0)
    stalled = shard_failures(n, mu, stall_s=stall_without(mu, n, 400.0, 30.0))
    new = analytic.expected_pls(job, tau, stalled)
    old = analytic.expected_pls(job, tau, shard_failures(n, mu))
    assert inside(new, pls), (new, pls)
    assert old < pls.lo, (old, pls)  # the compute-only form misses them
    # the inverse follows the same form (at an interval that does not divide W: no jump in n_saves)
    bound = analytic.expected_pls(job, 1.7 * HOUR, stalled)
    assert analytic.interval_for_pls(bound, job, stalled) == pytest.approx(1.7 * HOUR, rel=1e-6)


@pytest.mark.slow
def test_vanilla_pls_with_instant_recoveries_is_the_compute_only_form():
    """No stall to speak of: the new form and the old one agree, and both with the simulator."""
    s = pls_scenario({"name": "partial"}, 2.0, seed=14).with_updates(
        {"reschedule.mean_s": 1.0, "costs.shard_load_s": 1.0}
    )
    res, _ = run_replications(s, 2000)
    pls = estimate([r.pls for r in res])
    n, mu, W, tau = 4, 1 / (5 * HOUR), s.duration_s, s.interval_s
    job = analytic.Job(work_s=W, save_s=60.0)
    new = analytic.expected_pls(
        job, tau, shard_failures(n, mu, stall_s=stall_without(mu, n, 1.0, 1.0))
    )
    old = analytic.expected_pls(job, tau, shard_failures(n, mu))
    assert inside(new, pls) and inside(old, pls), (new, old, pls)


@pytest.mark.slow
def test_prioritized_pls_counts_failures_during_other_recoveries():
    K, r = 4, 0.05
    s = pls_scenario(
        {"name": "mfu", "top_fraction": r, "full_every": K, "counter_overhead": 0.0}, 1.0, seed=21
    )
    res, _ = run_replications(s, 2000)
    # a 99.9% CI: at 95% one seed in twenty rejects a correct formula (the bulk failure streams'
    # draws put this seed's mean 2.0 SE from it; replications 2000-5999 put it within 0.22 SE);
    # the older formula, which ignores failures during other recoveries, stays outside it
    pls = estimate([x.pls for x in res], level=0.999)
    n, mu, W, tau = 4, 1 / (5 * HOUR), s.duration_s, s.interval_s
    c = costs_of(s)
    cov = coverage_of(s, tau, r, 1.0)
    new = analytic.expected_pls_prioritized(
        W,
        tau,
        shard_failures(n, mu, stall_s=stall_without(mu, n, 400.0, 30.0)),
        cov,
        analytic.PrioritizedSaves(full_every=K, full_s=c.save_s, partial_s=c.save_fraction_s(r)),
    )
    old = analytic.expected_pls_prioritized(
        W, tau, shard_failures(n, mu), cov, analytic.PrioritizedSaves(full_every=K)
    )
    assert inside(new, pls), (new, pls)
    assert old < pls.lo, (old, pls)
