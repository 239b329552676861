"""The engine: accounting identity (Hypothesis), exact unit cases, and analytic oracles."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from scenario_builder import small, validated

from cprsim import analytic
from cprsim import scenario as sc
from cprsim.costs import costs_of
from cprsim.scenario import HOUR
from cprsim.sim import engine
from cprsim.sim.engine import simulate_one
from cprsim.sim.replicate import estimate, run_replications

BASE = small()


def scen(**upd) -> sc.Scenario:
    return validated(BASE, **upd)


def identity_gap(r) -> float:
    return r.wall_s - (r.useful_s + r.save_s + r.load_s + r.lost_s + r.reschedule_s + r.degraded_s)


# -- Hypothesis: invariants on random scenarios --------------------------------------------------------
fam = st.sampled_from(
    [
        ("exponential", {}),
        ("weibull", {"shape": 0.7}),
        ("weibull", {"shape": 1.8}),
        ("gamma", {"shape": 2.0}),
        ("lognormal", {"sigma": 1.2}),
        ("loglogistic", {"shape": 2.5}),
    ]
)


@st.composite
def scenarios(draw):
    f, extra = draw(fam)
    strategy = draw(
        st.sampled_from(["full", "partial", "mfu", "ssu", "lookahead", "ecrm", "checknrun"])
    )
    ne = draw(st.integers(2, 12))
    upd = {
        "cluster.trainers": draw(st.integers(1, 8)),
        "cluster.embedding_servers": ne,
        "checkpoint.interval_h": draw(st.floats(0.05, 5.0)),
        "checkpoint.mode": draw(st.sampled_from(["blocking", "two-phase"])),
        "checkpoint.persist_slowdown": draw(st.sampled_from([0.0, 0.3])),
        "reschedule": {
            "family": draw(st.sampled_from(["constant", "exponential"])),
            "mean_s": draw(st.floats(1, 2000)),
        },
        "failures.embedding": {"family": f, "mtbf_h": draw(st.floats(2.0, 200.0)), **extra},
        "failures.trainer": {"family": "exponential", "mtbf_h": draw(st.floats(2.0, 200.0))},
        "failures.domains": [
            {
                "name": "rack",
                "node_type": "embedding",
                "nodes": draw(st.integers(1, ne)),
                "membership": draw(st.sampled_from(["fixed", "random"])),
                "failure": {"family": "exponential", "mtbf_h": draw(st.floats(1.0, 50.0))},
            }
        ],
        "failures.injected": [
            {"count": draw(st.integers(0, 4)), "node_type": "trainer", "nodes": 1}
        ],
        "strategy": {"name": strategy},
        "seed": draw(st.integers(0, 2**32 - 1)),
    }
    if strategy == "ecrm":
        upd["strategy"].update({"k": 1, "m": 1, "parity_slowdown": 0.02, "placement": "contiguous"})
    if draw(st.booleans()):
        upd["failures.job"] = {
            "family": "exponential",
            "mtbf_h": draw(st.floats(20.0, 200.0)),
            **({"restart_s": draw(st.floats(1, 1000))} if draw(st.booleans()) else {}),
        }
    return scen(**upd)


@pytest.mark.slow
@settings(
    max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(scenarios(), st.integers(0, 3))
def test_accounting_identity_and_pls_bounds(s, rep):
    saved = engine.MAX_FAILURE_EVENTS
    engine.MAX_FAILURE_EVENTS = 20_000  # hopeless draws stop fast (the guard has its own tests)
    try:
        r, _ = simulate_one(s, rep)
    except engine.Runaway:
        assume(False)
        return
    finally:
        engine.MAX_FAILURE_EVENTS = saved
    assert abs(identity_gap(r)) <= 1e-9 * r.wall_s
    assert r.useful_s == s.duration_s
    assert 0.0 <= r.pls <= 1.0
    assert (
        min(r.save_s, r.load_s, r.lost_s, r.reschedule_s) >= 0 and r.degraded_s >= -1e-9 * r.wall_s
    )
    if s.strategy.name in ("full", "checknrun"):
        assert r.pls == 0
    if (
        s.strategy.name in ("partial", "mfu", "ssu", "lookahead")
        and r.failures_job == r.failures_trainer == 0
    ):
        assert r.lost_s == 0
    assert r.ettr == pytest.approx(r.useful_s / r.wall_s, rel=1e-12)


# -- exact cases ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("tau_h", [0.3, 1.0, 2.5, 10.0])
@pytest.mark.parametrize("strategy", ["full", "partial"])
def test_no_failures_costs_exactly_the_saves(tau_h, strategy):
    s = scen(**{"checkpoint.interval_h": tau_h, "strategy.name": strategy})
    r, _ = simulate_one(s, 0)
    n = analytic.n_saves(s.duration_s, s.interval_s)
    assert r.checkpoints == n
    assert r.wall_s == pytest.approx(s.duration_s + n * costs_of(s).save_s, rel=1e-12)


def test_failure_landing_on_a_checkpoints_completion_aborts_it():
    s = scen()
    c = costs_of(s)
    t_done = s.interval_s + c.save_s  # the first save would complete exactly here
    r, ev = simulate_one(s, 0, record=True, schedule=[(t_done, (0,), (100.0,))])
    kinds = [e.kind for e in ev if e.time_s <= t_done]
    assert "save_abort" in kinds and "save_end" not in kinds
    assert r.lost_s == pytest.approx(s.interval_s)  # rolled back to the start


def test_failures_during_save_reschedule_and_load_have_exact_costs():
    s = scen()
    c = costs_of(s)
    tau, d, rho, L = s.interval_s, c.save_s, 100.0, c.load_s
    t1 = tau + d / 2  # during the first save
    t2 = t1 + rho / 2  # during the rescheduling of the first failure
    t3 = t2 + rho + L / 2  # during the load that follows
    r, _ev = simulate_one(
        s, 0, record=True, schedule=[(t1, (0,), (rho,)), (t2, (5,), (rho,)), (t3, (6,), (rho,))]
    )
    assert r.lost_s == pytest.approx(tau)
    assert r.save_s == pytest.approx(d / 2 + (analytic.n_saves(s.duration_s, tau)) * d)
    assert r.reschedule_s == pytest.approx((t2 + rho - t1) + rho)
    assert r.load_s == pytest.approx(L / 2 + L)
    assert r.wall_s == pytest.approx(s.duration_s + r.save_s + r.load_s + r.lost_s + r.reschedule_s)


def test_partial_recovery_restores_only_the_failed_shard_and_counts_its_pls():
    s = scen(**{"strategy.name": "partial"})
    c = costs_of(s)
    t = 1.5 * HOUR + c.save_s  # half an interval after the first save
    r, _ev = simulate_one(s, 0, record=True, schedule=[(t, (4,), (100.0,))])
    progress = t - c.save_s
    assert r.pls == pytest.approx(
        (progress - s.interval_s) / s.cluster.embedding_servers / s.duration_s
    )
    assert r.load_s == pytest.approx(c.shard_load_s(1)) and r.lost_s == 0


def test_same_seed_same_results_and_common_random_numbers_across_strategies():
    s = scen(
        **{
            "failures.embedding": {"family": "weibull", "shape": 0.8, "mtbf_h": 20.0},
            "failures.trainer": {"family": "exponential", "mtbf_h": 30.0},
        }
    )
    a = [simulate_one(s, i, record=True) for i in range(5)]
    b = [simulate_one(s, i, record=True) for i in range(5)]
    assert a == b
    fails = lambda runs: [[(e.time_s, e.node) for e in ev if e.kind == "fail"] for _, ev in runs]
    p = [
        simulate_one(s.with_updates({"strategy.name": "partial"}), i, record=True) for i in range(5)
    ]
    # the job under full recovery ends later, so it sees a superset: compare the common window
    for fa, fp, (ra, _), (rp, _) in zip(fails(a), fails(p), a, p):
        horizon = min(ra.wall_s, rp.wall_s)
        assert [x for x in fa if x[0] < horizon] == [x for x in fp if x[0] < horizon]
    assert sum(len(x) for x in fails(a)) > 0


# -- statistical oracles ------------------------------------------------------------------------------------
LAM_H = 0.4  # failure events per hour


def poisson_scen(strategy: str, tau_h: float, seed: int = 5) -> sc.Scenario:
    """Failure events form a Poisson process: one domain that takes down 1 embedding server."""
    return scen(
        **{
            "failures.domains": [
                {
                    "name": "d",
                    "node_type": "embedding",
                    "nodes": 1,
                    "membership": "random",
                    "failure": {"family": "exponential", "mtbf_h": 1 / LAM_H},
                }
            ],
            "strategy.name": strategy,
            "checkpoint.interval_h": tau_h,
            "seed": seed,
            "cluster.embedding_servers": 40,
        }
    )


@pytest.mark.parametrize("strategy", ["full", "partial"])
def test_mean_wall_time_and_failures_agree_with_the_exact_analytic_values(strategy):
    s = poisson_scen(strategy, 1.0)
    res, _ = run_replications(s, 600)
    c = costs_of(s)
    lam, rho = LAM_H / HOUR, 100.0
    W, tau = s.duration_s, s.interval_s
    job = analytic.Job(work_s=W, save_s=c.save_s)
    if strategy == "full":
        expect = analytic.full_wall(
            job, tau, analytic.Failures(rate=lam, recovery_s=rho + c.load_s)
        )
    else:
        expect = analytic.partial_wall(
            job, tau, analytic.Failures(rate=lam, recovery_s=rho + c.shard_load_s(1))
        )
    wall = estimate([r.wall_s for r in res])
    # the oracle ignores a domain picking a server that is already down (probability <=
    # (servers down at once)/40 per failure): a bias far below the CI, allowed as 0.1% of wall
    assert wall.lo - 1e-3 * expect <= expect <= wall.hi + 1e-3 * expect
    n = estimate([r.failure_events for r in res])
    e_n = analytic.expected_failures(wall.mean, lam)
    assert n.lo <= e_n <= n.hi


@pytest.mark.slow
def test_simulated_optimum_interval_is_near_dalys():
    """Common random numbers over a grid; 'near' = Daly's overhead is within the CI of the best."""
    lam = LAM_H / HOUR
    s0 = poisson_scen("full", 1.0)
    c = costs_of(s0)
    daly = analytic.daly(c.save_s, 1 / lam)
    grid = daly * np.geomspace(0.25, 4.0, 9)
    runs = {
        t: np.array(
            [
                r.overhead
                for r in run_replications(
                    s0.with_updates({"checkpoint.interval_h": t / HOUR}), 300
                )[0]
            ]
        )
        for t in list(grid) + [daly]
    }
    best = min(grid, key=lambda t: runs[t].mean())
    d = estimate(runs[daly] - runs[best])
    assert d.lo <= 0  # Daly is not significantly worse than the grid's best
    assert 0.25 * daly < best < 4.0 * daly  # and the minimum is inside the grid, around Daly's
    # the curve is not flat: the grid's ends are significantly worse
    for t in (grid[0], grid[-1]):
        assert estimate(runs[t] - runs[best]).lo > 0
