"""The goodness-of-fit bootstrap's refits done together (``likelihood.mle_many``: Newton's method
on the draws stacked end to end) against the per-draw L-BFGS-B refit they replace
(``likelihood.mle`` from the same start, the path a draw still falls back to): the same draws,
the same maxima to the old optimiser's tolerance, the same p-values; and ``cprsim fit`` without
``scipy.stats``.

The tolerance. The per-draw refit stops at L-BFGS-B's ``ftol = 1e-15`` on the mean negative
log-likelihood or ``gtol = 1e-10`` on its gradient in the log-parameters, whose curvature there is
of order 1: its parameters are within ~1e-9 (relative) of the maximum; the gamma's gradient is a
forward difference (scipy's step ~1.5e-8), ~1e-8 off, so its parameters are within ~1e-7 (seen:
5e-7 on Titan's draws). The batched refit stops when a Newton step moves no log-parameter by more
than 1e-9 (the error after it of order its square), the gamma's shape derivatives central
differences (~1e-9). So: parameters within 1e-6 relative, and a log-likelihood at least the old
one's less its rounding (1e-12 relative: a sum of ~10^3..10^4 terms)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cprsim.failures import fit as F
from cprsim.failures import likelihood as L

ROOT = Path(__file__).resolve().parents[1]
TRUTH = {
    "weibull": (100.0, 0.7),
    "gamma": (10.0, 2.5),
    "lognormal": (50.0, 1.3),
    "loglogistic": (20.0, 1.5),
}
PARAM_RTOL = 1e-6
LL_RTOL = 1e-12


def _data(family: str, n: int, seed: int, censored: bool = True):
    """Lifetimes of ``family`` censored by times on a coarse grid (many ties among the censored,
    as in a real log: Titan has 1,408 distinct censoring times for 25,118 censored lifetimes)."""
    rng = np.random.default_rng(seed)
    x = F.Fit(family, *TRUTH[family], (0, 0), (0, 0), 0.0, 2, n, n).distribution(1.0)
    life = x.sample(rng, n)
    if not censored:
        return life, np.ones(n, bool)
    c = np.ceil(rng.uniform(0, 1.5 * np.quantile(life, 0.8), n) / 5.0) * 5.0
    return np.minimum(life, c), life <= c


def _draws(family: str, t, obs, m: int, seed: int):
    f = F.fit_family(family, t, obs)
    cens = t[~obs]
    support, which = np.unique(cens, return_inverse=True) if cens.size else (t.max(), None)
    support = np.atleast_1d(support)
    rng = np.random.default_rng(seed)
    draws = [
        F._gof_sample(f.distribution(1.0), cens, support, which, t.size, rng) for _ in range(m)
    ]
    return f, [d for d in draws if d is not None]


@pytest.mark.parametrize("family", sorted(TRUTH))
@pytest.mark.parametrize("censored", [True, False])
def test_each_batched_refit_is_the_per_draw_refit(family, censored):
    t, obs = _data(family, 600, 7, censored)
    f, draws = _draws(family, t, obs, 12, 3)
    guess = (f.scale_, f.shape_)
    batched = L.mle_many(family, [d[2] for d in draws], guess)
    assert all(b is not None for b in batched)  # none left to the fallback
    for (tb, ob, _), new in zip(draws, batched):
        old = L.mle(family, tb, ob, guess)
        assert new is not None and old is not None
        assert new == pytest.approx(old, rel=PARAM_RTOL)
        ll_new, ll_old = L.loglik(family, *new, tb, ob), L.loglik(family, *old, tb, ob)
        assert ll_new >= ll_old - LL_RTOL * abs(ll_old)


@pytest.mark.parametrize("family", sorted(TRUTH))
def test_the_stacked_gradient_and_hessian_are_the_log_likelihood_s(family):
    """``_terms_many``'s log-likelihood, gradient and Hessian against ``loglik`` and its central
    differences, at a point off the maximum, for samples of different sizes stacked together."""
    t, obs = _data(family, 400, 11)
    _, draws = _draws(family, t, obs, 3, 5)
    st = L._Stacked([d[2] for d in draws])
    x = np.log([TRUTH[family]] * len(draws)) + np.array([[0.05, -0.04], [-0.03, 0.02], [0.0, 0.1]])
    ll, g, H = L._terms_many(family, x, st)

    def fn(j: int, xx: np.ndarray) -> float:
        return L.loglik(family, float(np.exp(xx[0])), float(np.exp(xx[1])), *draws[j][:2])

    h = 1e-4
    e = np.eye(2) * h
    for j in range(len(draws)):
        assert ll[j] == pytest.approx(fn(j, x[j]), rel=1e-12)
        gn = [(fn(j, x[j] + e[i]) - fn(j, x[j] - e[i])) / (2 * h) for i in range(2)]
        np.testing.assert_allclose(g[j], gn, rtol=1e-6, atol=1e-6 * abs(ll[j]) * h)
        Hn = [
            [
                (
                    fn(j, x[j] + e[a] + e[b])
                    - fn(j, x[j] + e[a] - e[b])
                    - fn(j, x[j] - e[a] + e[b])
                    + fn(j, x[j] - e[a] - e[b])
                )
                / (4 * h * h)
                for b in range(2)
            ]
            for a in range(2)
        ]
        np.testing.assert_allclose(H[j], Hn, rtol=1e-4, atol=1e-4 * np.abs(H[j]).max())


def test_a_draw_s_censoring_times_are_rng_choice_s():
    """``_gof_sample`` draws positions (``rng.choice(cens.size, n)``) where the refits before it
    drew ``rng.choice(cens, n)``: the same numbers from the generator, so the same samples."""
    cens = np.random.default_rng(0).random(2_000)
    for seed in range(3):
        r1, r2 = np.random.default_rng(seed), np.random.default_rng(seed)
        np.testing.assert_array_equal(r1.choice(cens, 5_000), cens[r2.choice(cens.size, 5_000)])
        assert r1.random() == r2.random()


@pytest.mark.parametrize("censored", [True, False])
def test_the_grouped_kaplan_meier_curve_is_the_same_numbers(censored):
    t, obs = _data("weibull", 800, 2, censored)
    times, S = L.km_survival(t, obs)
    gt, gS = L.Grouped.of(t, obs).km_survival()
    np.testing.assert_array_equal(gt, times)
    np.testing.assert_array_equal(gS, S)
    np.testing.assert_array_equal(S, L.kaplan_meier(t, obs)[1])


@pytest.mark.parametrize("censored", [True, False])
def test_the_p_values_are_those_of_per_draw_refits(censored, monkeypatch):
    t, obs = _data("gamma", 300, 4, censored)
    batched = F.fit_all(t, obs, bootstrap=19, seed=3)
    monkeypatch.setattr(L, "BATCHED", ())  # every draw refitted alone, by L-BFGS-B
    assert F.fit_all(t, obs, bootstrap=19, seed=3).as_dict() == batched.as_dict()


def test_a_draw_newton_does_not_converge_is_refitted_alone(monkeypatch):
    t, obs = _data("lognormal", 300, 6)
    want = F.fit_all(t, obs, ("lognormal",), bootstrap=9, seed=1).as_dict()
    monkeypatch.setattr(L, "mle_many", lambda family, samples, guess: [None] * len(samples))
    assert F.fit_all(t, obs, ("lognormal",), bootstrap=9, seed=1).as_dict() == want


def test_the_fit_command_does_not_import_scipy_stats():
    """``cprsim fit`` with every family, its bootstrap and the tail checks (the gamma's median
    among them) leaves ``scipy.stats`` unimported: half a second of its start."""
    code = (
        "import runpy, sys\n"
        f"sys.argv = ['cprsim', 'fit', {str(ROOT / 'traces/examples/weibull-64.csv')!r}]\n"
        "try:\n"
        "    runpy.run_module('cprsim', run_name='__main__')\n"
        "except SystemExit as e:\n"
        "    assert not e.code, e.code\n"
        "print(sorted(m for m in sys.modules if m.startswith('scipy.stats')), file=sys.stderr)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**__import__("os").environ, "CPRSIM_PROGRESS": "off"},
    )
    assert "gamma" in out.stdout and out.stderr.strip().splitlines()[-1] == "[]", out.stderr
