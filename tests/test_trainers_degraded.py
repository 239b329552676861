"""Partial recovery goes on with the trainers that are up (``trainer_degraded``, on by default).

A failed trainer slows the job to ``(N_t - k)/N_t`` of its rate from its failure until its
replacement is up and has copied the dense parameters from a peer (``up + dense_copy_s``); it is
not waited for. Exact cases by hand, the old stall behaviour with the option off (against a copy
of the previous implementation, on common random numbers), Wald's identity for the mean degraded
time, and the planner's first-order cost.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scenario_builder import small, validated

from cprsim import analytic
from cprsim import scenario as sc
from cprsim.costs import costs_of
from cprsim.failures.rates import failure_rates
from cprsim.scenario import HOUR
from cprsim.sim import engine, strategies
from cprsim.sim.engine import simulate_one
from cprsim.sim.prioritized import MFU, MFUParams, SSUParams
from cprsim.sim.replicate import estimate, run_replications
from cprsim.sim.simpy_adapter import Env
from cprsim.sim.strategies import Partial, PartialParams, Strategy, partial_node_overhead

# dense 5 GB x 2 (optimizer) at 1.25 GB/s: an 8 s dense copy
BASE = small(name="deg", seed=7, cluster={"dense_gb": 5.0}, reschedule={"mean_s": 300.0})


def scen(**upd) -> sc.Scenario:
    return validated(BASE, **upd)


def identity_gap(r) -> float:
    return r.wall_s - (r.useful_s + r.save_s + r.load_s + r.lost_s + r.reschedule_s + r.degraded_s)


def no_failure_wall(s: sc.Scenario) -> float:
    return s.duration_s + analytic.n_saves(s.duration_s, s.interval_s) * costs_of(s).save_s


# -- exact cases ----------------------------------------------------------------------------------------
def test_one_trainer_failure_costs_a_quarter_of_its_window():
    """4 trainers, one fails half an interval after the first save, is back after rho and copies
    the dense part for dense_copy_s: during T = rho + dense_copy_s the job progresses at 3/4, so it
    is T/4 of progress behind, made up at full rate afterwards: wall = W + saves + T/4."""
    s = scen(**{"strategy.name": "partial"})
    c = costs_of(s)
    rho = 300.0
    t = 1.5 * HOUR + c.save_s  # progress 1.5 h: mid-interval, compute
    r, ev = simulate_one(s, 0, record=True, schedule=[(t, (2,), (rho,))])
    T = rho + c.dense_copy_s
    assert c.dense_copy_s == pytest.approx(8.0)
    assert r.wall_s == pytest.approx(no_failure_wall(s) + T / 4, rel=1e-12)
    assert r.degraded_s == pytest.approx(T / 4, rel=1e-9)
    assert r.reschedule_s == r.load_s == r.lost_s == r.pls == 0.0
    assert r.failures_trainer == 1 and abs(identity_gap(r)) <= 1e-9 * r.wall_s
    assert [(e.node, e.value) for e in ev if e.kind == "degraded"] == [(2, pytest.approx(t + T))]


@pytest.mark.parametrize(
    "strategy",
    [
        {"name": "mfu", "counter_overhead": 0.01},
        {"name": "ssu", "counter_overhead": 0.5, "sample_rate": 0.1},
        {"name": "lookahead", "counter_overhead": 0.02},
    ],
)
def test_the_trainer_share_multiplies_the_strategys_own_rate(strategy):
    """MFU's counting slowdown r = 1/(1 + x): during the window the job runs at r x 3/4, so it is
    r T/4 of progress behind, made up at r: still T/4 of wall. Lookahead (whose on_failure returns
    None after Partial's) does not wait for the trainer either."""
    s = scen(**{"strategy": strategy})
    c = costs_of(s)
    rho = 300.0
    base, ev = simulate_one(s, 0, record=True)
    t = next(e.time_s for e in ev if e.kind == "save_end") + 600.0  # the window lies inside compute
    r, _ = simulate_one(s, 0, schedule=[(t, (1,), (rho,))])
    T = rho + c.dense_copy_s
    assert r.wall_s == pytest.approx(base.wall_s + T / 4, rel=1e-12)
    assert r.degraded_s - base.degraded_s == pytest.approx(T / 4, rel=1e-9)
    assert base.degraded_s > 0  # the counting slowdown itself
    assert r.save_s == base.save_s and r.reschedule_s == r.load_s == r.lost_s == 0.0


def test_overlapping_windows_add_up():
    """The rate is linear in the trainers out: three overlapping windows cost (T1 + T2 + T3)/4."""
    s = scen(**{"strategy.name": "partial"})
    c = costs_of(s)
    t = 1.5 * HOUR + c.save_s
    sched = [(t, (0,), (300.0,)), (t + 100.0, (3,), (500.0,)), (t + 200.0, (1,), (50.0,))]
    r, _ = simulate_one(s, 0, schedule=sched)
    windows = sum(rho + c.dense_copy_s for _, _, (rho,) in sched)
    assert r.wall_s == pytest.approx(no_failure_wall(s) + windows / 4, rel=1e-12)
    assert r.degraded_s == pytest.approx(windows / 4, rel=1e-9)
    assert r.lost_s == r.reschedule_s == r.load_s == 0.0


def test_a_trainer_failing_while_shards_reload_does_not_restart_the_load():
    """An embedding server fails (stall: reschedule, shard load L); a trainer fails halfway through
    L: the load goes on (L once), and only the part of the trainer's window after the load slows
    the job."""
    s = scen(**{"strategy.name": "partial"})
    c = costs_of(s)
    L = c.shard_load_s(1)
    t0 = 1.5 * HOUR + c.save_s
    rho_e, rho_t = 100.0, 300.0
    r, _ = simulate_one(s, 0, schedule=[(t0, (4,), (rho_e,)), (t0 + rho_e + L / 2, (0,), (rho_t,))])
    T = rho_t + c.dense_copy_s
    assert r.load_s == pytest.approx(L, rel=1e-12)
    assert r.reschedule_s == pytest.approx(rho_e, rel=1e-12)
    assert r.degraded_s == pytest.approx((T - L / 2) / 4, rel=1e-9)
    assert r.wall_s == pytest.approx(no_failure_wall(s) + rho_e + L + (T - L / 2) / 4, rel=1e-12)


def test_a_degraded_trainer_in_an_episode_is_not_charged_a_dense_copy():
    s = scen(**{"strategy.name": "partial"})
    c = costs_of(s)
    env = Env()
    run = engine.Run(
        scenario=s,
        costs=c,
        env=env,
        record=False,
        n_trainers=4,
        n_embedding=6,
        W=s.duration_s,
        tau=s.interval_s,
    )
    strat = Partial(PartialParams(), run)
    run.strategy = strat
    run.fail((0,), (300.0,))  # no job process: nothing is interrupted
    assert strat.on_failure(run, [0]) == set()
    assert strat.load_s(run, {0}) == 0.0  # degraded: its copy is not a stall
    assert (
        strat.load_s(run, {1}) == c.dense_copy_s
    )  # a trainer the job waited for copies before it resumes
    assert strat.load_s(run, {0, 5}) == c.shard_load_s(1)
    assert (
        strat.rate_at(run, 0.0) == 0.75
        and strat.next_rate_change(run, 0.0) == 300.0 + c.dense_copy_s
    )
    assert strat.rate_at(run, 300.0 + c.dense_copy_s) == 1.0


def test_no_trainer_holding_the_dense_part_rolls_back():
    """Two trainers: the second fails while the first is still copying the dense part (up, but
    without it): nobody holds it, back to the last full checkpoint and a full load. A moment after
    the copy ends, the job trains on."""
    s = scen(**{"strategy.name": "partial", "cluster.trainers": 2})
    c = costs_of(s)
    t, rho = 1.5 * HOUR + c.save_s, 300.0
    r, ev = simulate_one(
        s,
        0,
        record=True,
        schedule=[(t, (0,), (rho,)), (t + rho + c.dense_copy_s / 2, (1,), (rho,))],
    )
    # rolled back to the first save: half an interval, and rho + dc/2 at half the rate
    assert r.lost_s == pytest.approx(0.5 * HOUR + (rho + c.dense_copy_s / 2) / 2)
    assert any(e.kind == "load_start" and e.value == pytest.approx(c.load_s) for e in ev)
    assert abs(identity_gap(r)) <= 1e-9 * r.wall_s
    later = t + rho + c.dense_copy_s + 1.0
    r2, _ = simulate_one(s, 0, schedule=[(t, (0,), (rho,)), (later, (1,), (rho,))])
    assert r2.lost_s == r2.reschedule_s == r2.load_s == 0.0
    assert r2.degraded_s == pytest.approx(
        2 * (rho + c.dense_copy_s) / 2, rel=1e-9
    )  # each window costs T/2
    # the second trainer down while the first is still down: the engine's rule, as before
    r3, _ = simulate_one(s, 0, schedule=[(t, (0,), (rho,)), (t + rho / 2, (1,), (rho,))])
    assert r3.lost_s > 0


def test_a_one_trainer_cluster_still_rolls_back():
    s = scen(**{"strategy.name": "partial", "cluster.trainers": 1})
    c = costs_of(s)
    t = 1.5 * HOUR + c.save_s
    r, ev = simulate_one(s, 0, record=True, schedule=[(t, (0,), (300.0,))])
    assert r.lost_s == pytest.approx(0.5 * HOUR) and r.reschedule_s == pytest.approx(300.0)
    assert r.load_s == pytest.approx(c.load_s) and r.degraded_s == 0.0
    assert not any(e.kind == "degraded" for e in ev)


def test_a_job_level_interruption_keeps_only_trainers_still_down_degraded():
    s = scen(**{"strategy.name": "partial"})
    c = costs_of(s)
    job = s.cluster.trainers + s.cluster.embedding_servers
    t, L, restart = 1.5 * HOUR + c.save_s, c.load_s, 50.0
    # the trainer is still down when the job restarts: it stays out until up + dense copy
    rho = 600.0
    assert 100.0 + restart + L < rho
    r, _ = simulate_one(s, 0, schedule=[(t, (0,), (rho,)), (t + 100.0, (job,), (restart,))])
    after = (t + rho + c.dense_copy_s) - (t + 100.0 + restart + L)
    assert r.lost_s == pytest.approx(0.5 * HOUR + 75.0)  # 100 s at 3/4 since the progress of 1.5 h
    assert r.degraded_s == pytest.approx(100.0 / 4 + after / 4, rel=1e-9)
    assert r.load_s == pytest.approx(L) and r.reschedule_s == pytest.approx(restart)
    assert abs(identity_gap(r)) <= 1e-9 * r.wall_s
    # the trainer is up and copying when the job fails: every node reloads the checkpoint, done
    rho = 100.0
    r2, _ = simulate_one(
        s, 0, schedule=[(t, (0,), (rho,)), (t + rho + c.dense_copy_s / 2, (job,), (restart,))]
    )
    assert r2.degraded_s == pytest.approx((rho + c.dense_copy_s / 2) / 4, rel=1e-9)
    assert abs(identity_gap(r2)) <= 1e-9 * r2.wall_s


# -- the option off: the previous behaviour -----------------------------------------------------------------
def test_option_off_stalls_as_before():
    s = scen(**{"strategy": {"name": "partial", "trainer_degraded": False}})
    c = costs_of(s)
    rho = 300.0
    r, _ = simulate_one(s, 0, schedule=[(1.5 * HOUR + c.save_s, (2,), (rho,))])
    assert r.reschedule_s == pytest.approx(rho) and r.load_s == pytest.approx(c.dense_copy_s)
    assert r.degraded_s == 0.0 and r.lost_s == 0.0
    assert r.wall_s == pytest.approx(no_failure_wall(s) + rho + c.dense_copy_s, rel=1e-12)


class _PreviousPartial:
    """Partial recovery as it was before trainer_degraded (a verbatim copy of its decisions)."""

    def on_failure(self, run, nodes):
        if run.dense_lost(nodes):
            return self.restore_all(run)
        for n in nodes:
            if n >= run.n_trainers:
                run.lose_shard(n - run.n_trainers)
        return None

    def load_s(self, run, nodes):
        if self.full_restore:
            self.full_restore = False
            return self.costs.load_s
        k = sum(1 for n in nodes if n >= run.n_trainers)
        t = (
            self.costs.shard_load_s(k) + self.shard_extra_s(run, k) if k else 0.0
        )  # (+ MFU's overlays, since)
        if len(nodes) > k:
            t = max(t, self.costs.dense_copy_s)
        return t

    rate_at = Strategy.rate_at
    next_rate_change = Strategy.next_rate_change
    full_load_s = Strategy.full_load_s
    on_job_failure = Strategy.on_job_failure


class OldPartial(_PreviousPartial, Partial):
    name = "old-partial"
    Params = strategies.NoParams


class OldMFU(_PreviousPartial, MFU):
    name = "old-mfu"
    Params = MFUParams


@pytest.fixture
def previous(monkeypatch):
    monkeypatch.setitem(strategies.REGISTRY, "old-partial", OldPartial)
    monkeypatch.setitem(strategies.REGISTRY, "old-mfu", OldMFU)


CRN = {
    "reschedule": {"family": "exponential", "mean_s": 400.0},
    "failures.trainer": {"family": "exponential", "mtbf_h": 6.0},
    "failures.embedding": {"family": "weibull", "shape": 0.8, "mtbf_h": 20.0},
    "failures.job": {"family": "exponential", "mtbf_h": 25.0},
    "job.duration_h": 30.0,
}


@pytest.mark.parametrize("trainers", [1, 2, 4])
@pytest.mark.parametrize("mode", ["blocking", "two-phase"])
@pytest.mark.parametrize(
    "new,old,extra",
    [
        ("partial", "old-partial", {}),
        ("mfu", "old-mfu", {"counter_overhead": 0.01, "full_every": 3}),
    ],
)
def test_option_off_is_the_previous_implementation_on_the_same_failures(
    previous, trainers, mode, new, old, extra
):
    upd = {
        **CRN,
        "cluster.trainers": trainers,
        "checkpoint.mode": mode,
        "checkpoint.persist_slowdown": 0.2,
    }
    off = scen(**upd, strategy={"name": new, "trainer_degraded": False, **extra})
    ref = scen(**upd, strategy={"name": old, **extra})
    fails = 0
    for rep in range(6):
        a, _ = simulate_one(off, rep)
        b, _ = simulate_one(ref, rep)
        assert a == b
        fails += a.failures_trainer
        if trainers == 1:  # nothing to train on: the option changes nothing
            on = scen(**upd, strategy={"name": new, **extra})
            assert simulate_one(on, rep)[0] == b
    assert fails > 10


# -- Wald's identity for the mean degraded time ---------------------------------------------------------------
@pytest.mark.slow
def test_mean_degraded_time_is_walds_identity():
    """Trainer failures only, no saves (interval = W), exponential lifetimes (mean 1/mu) and
    rescheduling (mean rho). Trainer ``n``'s failure ``i`` keeps it out for ``rho_i + min(dc, L_i)``
    (``L_i`` its next lifetime: a failure during the copy starts a new window), and the job loses
    ``1/N_t`` of its rate meanwhile, so ``degraded = sum_i (rho_i + min(dc, L_i)) / N_t`` (up to the
    windows open at the end, and rollbacks: none here). Wald: ``E[degraded] = E[N] x (rho +
    (1 - exp(-mu dc))/mu) / N_t``; with the trainers' renewal rate ``N_t/(1/mu + rho)`` and Wald
    again, ``E[N] = N_t E[wall]/(1/mu + rho)`` (+O(1) per trainer): the brief's ``lam_tr x E[wall] x
    (rho + dc)/N_t``."""
    nt, mtbf_h, rho = 4, 20.0, 600.0
    s = scen(
        **{
            "strategy.name": "partial",
            "cluster.trainers": nt,
            "cluster.dense_gb": 50.0,
            "job.duration_h": 200.0,
            "checkpoint.interval_h": 200.0,
            "reschedule": {"family": "exponential", "mean_s": rho},
            "failures.trainer": {"family": "exponential", "mtbf_h": mtbf_h},
            "seed": 11,
        }
    )
    c = costs_of(s)
    mu, dc = 1 / (mtbf_h * HOUR), c.dense_copy_s
    assert dc == pytest.approx(80.0)
    res, _ = run_replications(s, 400)
    assert all(r.checkpoints == 0 and r.lost_s == 0 and r.reschedule_s == 0 for r in res)
    per_failure = rho + -math.expm1(-mu * dc) / mu
    deg = np.array([r.degraded_s for r in res])
    n = np.array([r.failures_trainer for r in res])
    wall = np.array([r.wall_s for r in res])
    assert n.mean() > 35
    # paired: degraded - N x E[window] / N_t has mean 0
    d = estimate(deg - n * per_failure / nt, non_negative=False)
    assert d.lo <= 0.0 <= d.hi, d
    assert abs(d.mean) < 0.02 * deg.mean()
    # the brief's oracle, with the trainers' renewal rate: lam_tr x E[wall] x E[window] / N_t
    lam_tr = nt / (1 / mu + rho)
    e = estimate(deg - lam_tr * wall * per_failure / nt, non_negative=False)
    assert e.lo <= 0.0 <= e.hi, e
    # and its plain first-order form is within 2% (lam_tr = N_t mu, window rho + dc)
    assert nt * mu * wall.mean() * (rho + dc) / nt == pytest.approx(deg.mean(), rel=0.03)


def test_degraded_time_is_the_union_of_each_trainers_windows():
    """Per replication, exactly: degraded = sum over trainers of the time (before the end) they are
    out, i.e. the union of their [failure, failure + rho + dc] windows, over N_t (no saves, no
    embedding failures, no rollback)."""
    s = scen(
        **{
            "strategy.name": "partial",
            "cluster.trainers": 3,
            "job.duration_h": 100.0,
            "checkpoint.interval_h": 100.0,
            "reschedule": {"family": "exponential", "mean_s": 900.0},
            "cluster.dense_gb": 200.0,
            "failures.trainer": {"family": "exponential", "mtbf_h": 8.0},
        }
    )
    c = costs_of(s)
    checked = 0
    for rep in range(40):
        r, ev = simulate_one(s, rep, record=True)
        if r.lost_s > 0:
            continue
        checked += 1
        out = 0.0
        for node in range(3):
            wins = sorted(
                (e.time_s, e.time_s + e.value + c.dense_copy_s)
                for e in ev
                if e.kind == "fail" and e.node == node
            )
            end = -math.inf
            for a, b in wins:
                a, b = max(a, end), min(b, r.wall_s)
                if b > a:
                    out += b - a
                end = max(end, b)
        assert r.degraded_s == pytest.approx(out / 3, rel=1e-9, abs=1e-6)
        assert abs(identity_gap(r)) <= 1e-9 * r.wall_s
    assert checked >= 25


def test_accounting_identity_under_frequent_trainer_failures():
    """Many overlapping windows, embedding and job failures, two-phase persists: the identity holds
    and the job never runs at a rate <= 0."""
    for strat in (
        {"name": "partial"},
        {"name": "mfu", "counter_overhead": 0.05},
        {"name": "lookahead", "cache_fraction": 0.01},
    ):
        for nt in (2, 3, 8):
            for mode in ("blocking", "two-phase"):
                s = scen(
                    **{
                        **CRN,
                        "strategy": strat,
                        "cluster.trainers": nt,
                        "checkpoint.mode": mode,
                        "checkpoint.persist_slowdown": 0.3,
                        "checkpoint.interval_h": 0.5,
                        "failures.trainer": {"family": "exponential", "mtbf_h": 2.0},
                    }
                )
                for rep in range(3):
                    r, _ = simulate_one(s, rep)
                    assert abs(identity_gap(r)) <= 1e-9 * r.wall_s
                    assert r.degraded_s >= -1e-9 * r.wall_s and r.failures_trainer > 10


# -- parameters and the planner ---------------------------------------------------------------------------------
def test_every_partial_strategy_has_the_option_on_by_default():
    for name in ("partial", "mfu", "ssu", "lookahead"):
        p = strategies.validate_params(name, {})
        assert p.trainer_degraded is True  # type: ignore[attr-defined]
        off = strategies.validate_params(name, {"trainer_degraded": False})
        assert off.trainer_degraded is False  # type: ignore[attr-defined]
    assert issubclass(MFUParams, PartialParams) and issubclass(SSUParams, PartialParams)
    with pytest.raises(ValueError, match="unknown key"):
        strategies.validate_params("partial", {"trainer_degradation": True})
    assert "trainer_degraded" not in strategies.get("full").Params.model_fields


@pytest.mark.slow
def test_planner_charges_a_degraded_trainer_its_window_over_n_t():
    """Embedding and trainer failures at 1/(4 h) per node, 4 + 4 nodes: the first-order degraded
    form lies in the simulated mean's CI; the stall form (option off) overshoots it by ~9%."""
    mu = 1 / (4 * HOUR)
    n, rho, d, shard = 4, 300.0, 60.0, 600.0
    s = scen(
        **{
            "seed": 12,
            "cluster.embedding_servers": n,
            "cluster.trainers": n,
            "cluster.dense_gb": 0.3,
            "job.duration_h": 20.0,
            "reschedule": {"family": "constant", "mean_s": rho},
            "failures.embedding": {"family": "exponential", "mtbf_h": 4.0},
            "failures.trainer": {"family": "exponential", "mtbf_h": 4.0},
            "costs": {"save_s": d, "shard_load_s": shard},
            "strategy.name": "partial",
        }
    )
    c, rates = costs_of(s), failure_rates(s)
    W, tau = s.duration_s, s.interval_s
    res, _ = run_replications(s, 1000)
    wall = estimate([r.wall_s for r in res])
    degraded = (1 + partial_node_overhead(s, tau, d, rates, c, degraded=True)) * W
    stall = (1 + partial_node_overhead(s, tau, d, rates, c, degraded=False)) * W
    assert wall.lo <= degraded <= wall.hi, (degraded, wall)
    assert stall > 1.05 * wall.hi
    # first order: each trainer failure costs (rho + dc)/N_t of compute
    x = n * mu * (rho + c.dense_copy_s) / n
    no_trainers = (
        1
        + partial_node_overhead(
            s.with_updates({"failures.trainer": None}),
            tau,
            d,
            failure_rates(s.with_updates({"failures.trainer": None})),
            c,
            degraded=True,
        )
    ) * W
    assert degraded - no_trainers == pytest.approx(x * W * (degraded / W), rel=0.1)
    # the option off keeps the previous form; the strategy hooks pass the option on
    assert stall == pytest.approx(
        analytic.partial_wall_split(
            analytic.Job(work_s=W, save_s=d),
            tau,
            analytic.SplitFailures(
                embedding_rate=rates.embedding,
                embedding_recovery_s=rho + shard,
                trainer_rate=rates.nodes - rates.embedding,
                trainer_recovery_s=rho + c.dense_copy_s,
                wait_s=rho,
            ),
        ),
        rel=1e-12,
    )
    P = strategies.get("partial")
    assert P.planning.expected_overhead(s, {}, tau, rates, c) < P.planning.expected_overhead(
        s, {"trainer_degraded": False}, tau, rates, c
    )
    M = strategies.get("mfu")
    assert M.planning.expected_overhead(
        s, {"top_fraction": 0.05}, tau, rates, c
    ) < M.planning.expected_overhead(
        s, {"top_fraction": 0.05, "trainer_degraded": False}, tau, rates, c
    )
