"""The access-skew model against direct computation and Monte Carlo."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cprsim.access import CRITEO_KAGGLE, AccessModel, gen_harmonic
from cprsim.errors import InputError


@pytest.mark.parametrize("a", [0.0, 0.6, 1.0, 1.3, 2.2])
def test_generalised_harmonic_matches_direct_sum(a):
    ks = np.array([0, 1, 7, 512, 513, 4000, 120_000])
    direct = [float(np.sum(np.arange(1, k + 1, dtype=float) ** -a)) for k in ks]
    np.testing.assert_allclose(gen_harmonic(ks, a), direct, rtol=1e-11, atol=1e-12)


def test_skew_statement_is_met_and_coverage_is_a_cdf():
    m = AccessModel.from_skew(CRITEO_KAGGLE, 0.01, 0.92)
    assert m.coverage(0.01) == pytest.approx(0.92, abs=1e-8)
    r = np.linspace(0, 1, 101)
    c = m.coverage(r)
    assert c[0] == 0 and c[-1] == pytest.approx(1.0, abs=1e-9)
    assert np.all(np.diff(c) >= -1e-15)


def _rows(tables, a):
    """Every row's per-sample access probability, explicitly (small models only)."""
    return [np.arange(1, n + 1, dtype=float) ** -a / gen_harmonic(n, a) for n in tables]


def test_touched_matches_explicit_rows_on_a_binned_model():
    tables = (40, 3_000, 90_000)  # the large table is binned, the small ones exact
    m = AccessModel(tables, 1.05)
    ps = _rows(tables, 1.05)
    for n in (10.0, 1e3, 1e5):
        exact = sum(float(np.sum(-np.expm1(n * np.log1p(-p)))) for p in ps) / sum(tables)
        assert m.touched(n) == pytest.approx(exact, rel=2e-3)


def test_coverage_matches_explicit_ranking():
    tables = (40, 3_000, 90_000)
    m = AccessModel(tables, 1.05)
    share = np.sort(np.concatenate(_rows(tables, 1.05)))[::-1] / len(tables)
    for r in (0.001, 0.01, 0.2):
        k = int(r * sum(tables))
        assert m.coverage(r) == pytest.approx(float(share[:k].sum()), abs=2e-3)


def test_sampled_coverage_against_monte_carlo():
    """Rows ranked by Poisson counts of m samples (Poissonised sampling makes counts independent).

    The model fixes the count threshold at its expectation; the realised threshold varies from
    draw to draw. With ~700 rows that approximation error is small: allowed 0.01 on top of the
    Monte Carlo 95% interval.
    """
    tables = (200, 500)
    a, r, m_samples = 1.1, 0.05, 3_000.0
    model = AccessModel(tables, a)
    p = np.concatenate(_rows(tables, a))
    rng = np.random.default_rng(12345)
    k = int(round(r * p.size))
    cov = []
    for _ in range(600):
        counts = rng.poisson(m_samples * p)
        order = np.lexsort((rng.random(p.size), -counts))  # by count, ties at random
        cov.append(p[order[:k]].sum() / len(tables))
    cov = np.asarray(cov)
    half = 1.96 * cov.std(ddof=1) / math.sqrt(cov.size)
    assert abs(model.sampled_coverage(r, m_samples) - cov.mean()) <= half + 0.01
    # and the noise is real: fewer samples, lower coverage; many samples, the exact ranking
    assert model.sampled_coverage(r, 100.0) < model.sampled_coverage(r, m_samples) < model.coverage(r)
    assert model.sampled_coverage(r, 1e9) == pytest.approx(model.coverage(r), abs=2e-3)


def test_fit_counts_recovers_the_exponent(tmp_path):
    rng = np.random.default_rng(7)
    tables, a = (800, 2_000), 1.15
    lines = ["table,count,rows"]
    for t, p in enumerate(_rows(tables, a)):
        counts = rng.multinomial(200_000, p)
        lines += [f"t{t},{c},{len(p)}" for c in counts]
    f = tmp_path / "counts.csv"
    f.write_text("\n".join(lines) + "\n")
    fit = AccessModel.fit_counts(f)
    # standard error from the observed information of the same likelihood
    h = 1e-4
    from cprsim.access import gen_harmonic as H

    def nll(x):
        tot = 0.0
        for t, p in enumerate(_rows(tables, a)):
            c = np.sort(np.asarray([int(l.split(",")[1]) for l in lines[1:] if l.startswith(f"t{t},")]))[::-1]
            tot += x * float(np.sum(c * np.log(np.arange(1, c.size + 1)))) + c.sum() * math.log(float(H(c.size, x)))
        return tot

    info = (nll(fit.alpha + h) - 2 * nll(fit.alpha) + nll(fit.alpha - h)) / h**2
    se = 1 / math.sqrt(info)
    assert abs(fit.alpha - a) <= 3 * se + 1e-3


def test_bad_inputs_are_one_line_errors(tmp_path):
    with pytest.raises(InputError, match="less than uniform"):
        AccessModel.from_skew((100, 100), 0.5, 0.2)
    bad = tmp_path / "c.csv"
    bad.write_text("table,count\nt,1\nt,x\n")
    with pytest.raises(InputError, match=r"c.csv: line 3"):
        AccessModel.fit_counts(bad)
    with pytest.raises(InputError, match="expected columns"):
        (tmp_path / "d.csv").write_text("a,b\n1,2\n")
        AccessModel.fit_counts(tmp_path / "d.csv")
