"""Stationary start (``failures.start = "stationary"``): the first failure of each node comes after
the equilibrium residual life, so failures arrive at the long-run rate 1/mean from t = 0.

Oracles (no pinned numbers): the equilibrium CDF ``F_e(t) = (1/mean) * integral_0^t S(u) du``
(numerical quadrature of scipy's survival function), and the renewal-theory identity of a
stationary renewal process, ``E[N(0, T)] = T / mean`` for every T. Tolerances are 4 standard
errors (binomial for CDF points, sample standard deviation for counts), fixed seeds.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate

from cprsim import scenario as sc
from cprsim.failures.distributions import Distribution
from cprsim.sim.replicate import run_replications

CASES = [
    ("exponential", 1.0),
    ("weibull", 0.5),
    ("weibull", 2.0),
    ("gamma", 0.6),
    ("lognormal", 1.1),
    ("loglogistic", 3.0),
    ("constant", 1.0),
]


def equilibrium_cdf(d: Distribution, t: float) -> float:
    if d.family == "constant":
        return min(t / d.scale, 1.0)
    val, _ = integrate.quad(lambda u: float(d.sf(u)), 0.0, t, limit=200)
    return val / d.mean()


@pytest.mark.slow
@pytest.mark.parametrize("family, shape", CASES)
def test_residual_life_follows_the_equilibrium_distribution(family, shape):
    d = Distribution.from_mean(family, 10.0, shape)
    rng = np.random.default_rng(2024)
    n = 20_000
    r = np.array([d.sample_residual(rng) for _ in range(n)])
    for q in (0.1, 0.25, 0.5, 0.75, 0.9):
        t = float(np.quantile(r, q))
        p = equilibrium_cdf(d, t)
        emp = float((r <= t).mean())
        assert abs(emp - p) <= 4 * math.sqrt(p * (1 - p) / n) + 1 / n, (q, t, emp, p)


def _counts(
    d: Distribution, T: float, n: int, stationary: bool, rng: np.random.Generator
) -> np.ndarray:
    out = np.empty(n)
    for i in range(n):
        t = d.sample_residual(rng) if stationary else d.sample(rng)
        k = 0
        while t <= T:
            k += 1
            t += d.sample(rng)
        out[i] = k
    return out


@pytest.mark.parametrize("family, shape", [("weibull", 0.5), ("gamma", 0.6), ("lognormal", 1.1)])
def test_a_stationary_renewal_process_fails_at_the_long_run_rate_from_the_start(family, shape):
    d = Distribution.from_mean(family, 10.0, shape)
    T = 10.0  # one mean lifetime: where a fresh start is furthest from the long-run rate
    rng = np.random.default_rng(7)
    n = 6_000
    st = _counts(d, T, n, True, rng)
    assert abs(st.mean() - T / d.mean()) <= 4 * st.std(ddof=1) / math.sqrt(n)
    fresh = _counts(d, T, n, False, rng)
    # decreasing hazard, fresh start: more failures early than the long-run rate says
    assert fresh.mean() - T / d.mean() > 4 * fresh.std(ddof=1) / math.sqrt(n)


@pytest.mark.slow
def test_the_engine_sees_the_long_run_rate_with_a_stationary_start():
    raw, _ = sc.load_raw("toy")
    raw["failures"] = {
        "embedding": {"family": "weibull", "shape": 0.5, "mtbf_h": 20.0},
        "start": "stationary",
    }
    raw["reschedule"] = {"family": "constant", "mean_s": 1.0}
    raw["strategy"] = {"name": "partial"}
    raw["checkpoint"] = {"interval_h": 10.0}
    raw["replications"] = 3000
    s = sc.validate(raw, "toy-stationary")
    res, _ = run_replications(s)
    fails = np.array([r.failures_embedding for r in res], float)
    wall = np.array([r.wall_s for r in res])
    mu = 20.0 * 3600
    expected = (
        s.cluster.embedding_servers * wall.mean() / mu
    )  # downtime (1 s + a shard load) is negligible
    assert abs(fails.mean() - expected) <= 4 * fails.std(ddof=1) / math.sqrt(fails.size)
    fresh = s.with_updates({"failures.start": "fresh"})
    ff = np.array([r.failures_embedding for r in run_replications(fresh)[0]], float)
    assert ff.mean() - expected > 4 * ff.std(ddof=1) / math.sqrt(ff.size)


def test_an_infinite_mean_has_no_stationary_start():
    raw, _ = sc.load_raw("toy")
    raw["failures"] = {
        "embedding": {"family": "loglogistic", "shape": 0.9, "scale_h": 20.0},
        "start": "stationary",
    }
    with pytest.raises(sc.ScenarioError, match="infinite mean has no stationary start"):
        sc.validate(raw, "toy")
