"""The closed-form censored likelihoods and their maximum (``cprsim.failures.likelihood``) against
scipy.stats, the oracle they replace: the same log-likelihoods, a maximum at least as high as
scipy's generic censored fit finds, the same Kaplan-Meier curve and band as ``scipy.stats.ecdf``;
and ``cprsim fit`` without importing scipy.stats."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from scipy import stats

from cprsim.failures import fit as F
from cprsim.failures import likelihood as L

SCIPY = {
    "exponential": lambda s, k: stats.expon(scale=s),
    "weibull": lambda s, k: stats.weibull_min(k, scale=s),
    "gamma": lambda s, k: stats.gamma(k, scale=s),
    "lognormal": lambda s, k: stats.lognorm(k, scale=s),
    "loglogistic": lambda s, k: stats.fisk(k, scale=s),
}
TRUTH = {
    "weibull": (100.0, 0.7),
    "gamma": (10.0, 2.5),
    "lognormal": (50.0, 1.3),
    "loglogistic": (20.0, 1.5),
}


def _data(family: str, n: int, seed: int, ties: bool = False) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = SCIPY[family](*TRUTH[family]).rvs(size=n, random_state=rng)
    c = rng.uniform(0, 1.5 * np.quantile(x, 0.9), n)
    t = np.minimum(x, c)
    if ties:
        t = np.ceil(t)  # whole units: many ties, censored and not
    return t, x <= c


@pytest.mark.parametrize("family", sorted(SCIPY))
def test_log_terms_are_scipys(family):
    t = np.geomspace(1e-3, 1e4, 200)
    s, k = TRUTH.get(family, (30.0, 1.0))
    lf, ls = L.log_terms(family, s, k, t)
    d = SCIPY[family](s, k)
    np.testing.assert_allclose(lf, d.logpdf(t), rtol=1e-9, atol=1e-12)
    finite = np.isfinite(d.logsf(t))  # scipy's gamma logsf underflows to -inf far in the tail
    np.testing.assert_allclose(ls[finite], d.logsf(t)[finite], rtol=1e-9, atol=1e-12)
    assert np.all(np.isfinite(ls))


def test_the_gamma_tail_stays_finite_and_falls():
    """Far beyond the mass, Q(k, x) underflows to 0; its log (the asymptotic series) stays finite,
    falls, and approaches the series' leading term log(x^(k-1) e^-x / Gamma(k))."""
    from scipy.special import gammaln

    x = np.array([800.0, 1e4, 1e5])
    ls = L.log_terms("gamma", 1.0, 2.5, x)[1]
    lead = 1.5 * np.log(x) - x - gammaln(2.5)
    assert np.all(np.isfinite(ls)) and np.all(np.diff(ls) < 0)
    np.testing.assert_allclose(ls, lead, rtol=1e-4)
    # where Q does not underflow, the log of scipy's regularised upper incomplete gamma
    assert L.log_terms("gamma", 1.0, 2.5, np.array([600.0]))[1][0] == pytest.approx(
        float(stats.gamma(2.5).logsf(600.0)), rel=1e-9
    )


@pytest.mark.parametrize("family", sorted(TRUTH))
@pytest.mark.parametrize("seed", [1, 2])
def test_the_maximum_is_at_least_scipys(family, seed):
    t, obs = _data(family, 400, seed)
    s, k = L.mle(family, t, obs)
    dist = getattr(stats, F._SCIPY_NAMES[family])
    k0, _, s0 = dist.fit(stats.CensoredData(uncensored=t[obs], right=t[~obs]), floc=0)
    ll, ll0 = L.loglik(family, s, k, t, obs), L.loglik(family, s0, k0, t, obs)
    assert ll >= ll0 - 1e-7 * abs(ll0)
    assert s == pytest.approx(s0, rel=1e-3) and k == pytest.approx(k0, rel=1e-3)


@pytest.mark.parametrize("ties", [False, True])
def test_kaplan_meier_is_scipys_ecdf(ties):
    t, obs = _data("weibull", 300, 3, ties=ties)
    res = stats.ecdf(stats.CensoredData(uncensored=t[obs], right=t[~obs])).sf
    with np.errstate(all="ignore"):
        ci = res.confidence_interval(0.95, method="log-log")
    times, S, lo, hi = L.kaplan_meier(t, obs)
    np.testing.assert_array_equal(times, res.quantiles)
    np.testing.assert_allclose(S, res.probabilities, rtol=1e-12)
    np.testing.assert_allclose(lo, ci.low.probabilities, rtol=1e-9, equal_nan=True)
    np.testing.assert_allclose(hi, ci.high.probabilities, rtol=1e-9, equal_nan=True)


def test_a_fit_falls_back_to_scipy_when_the_fast_path_gives_up(monkeypatch):
    t, obs = _data("lognormal", 300, 4)
    fast = F.fit_family("lognormal", t, obs)
    monkeypatch.setattr(L, "mle", lambda *a, **k: None)
    slow = F.fit_family("lognormal", t, obs)
    assert slow.scale_ == pytest.approx(fast.scale_, rel=1e-3)
    assert slow.log_likelihood_ <= fast.log_likelihood_ + 1e-7 * abs(fast.log_likelihood_)


def test_fitting_does_not_import_scipy_stats():
    code = (
        "import sys, numpy as np\n"
        "from cprsim.failures.fit import fit_all\n"
        "rng = np.random.default_rng(0)\n"
        "t = rng.weibull(0.8, 300) * 100\n"
        "fit_all(t, t < 150, bootstrap=3)\n"
        "print(sorted(m for m in sys.modules if m.startswith('scipy.stats')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
