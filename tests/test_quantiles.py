"""cprsim.quantiles equals scipy.stats on a grid of arguments."""

import numpy as np
import pytest
from scipy import stats

from cprsim import quantiles as Q


@pytest.mark.parametrize("df", [1, 2, 5, 29, 199, 1999])
def test_t(df):
    for p in (0.5, 0.9, 0.975, 0.995, 0.9995):
        assert Q.t_ppf(p, df) == pytest.approx(stats.t.ppf(p, df), rel=1e-9)


def test_beta_f_binom_betabinom():
    for a, b in ((1, 1), (29, 1), (180, 21), (3.5, 0.5)):
        for q in (0.01, 0.05, 0.5, 0.95):
            assert Q.beta_ppf(q, a, b) == pytest.approx(stats.beta.ppf(q, a, b), rel=1e-9)
    for x, d1, d2 in ((0.5, 3, 60), (2.7, 3, 60), (9.0, 6, 12)):
        assert Q.f_sf(x, d1, d2) == pytest.approx(stats.f.sf(x, d1, d2), rel=1e-9)
    for n in (1, 10, 40, 200, 1000):
        for p in (0.1, 0.5, 0.9):
            for q in (0.025, 0.5, 0.975):
                assert Q.binom_ppf(q, n, p) == int(stats.binom.ppf(q, n, p)), (q, n, p)
            for k in (-1, 0, n // 3, n - 1, n):
                assert Q.binom_sf(k, n, p) == pytest.approx(
                    stats.binom.sf(k, n, p), rel=1e-9, abs=1e-15
                ), (k, n, p)
                assert Q.binom_cdf(k, n, p) == pytest.approx(
                    stats.binom.cdf(k, n, p), rel=1e-9, abs=1e-15
                ), (k, n, p)
    for k, n, a, b in (
        (5, 20, 3, 4),
        (0, 10, 1, 1),
        (150, 160, 30, 2),
        (-1, 5, 2, 2),
        (9, 10, 2, 3),
    ):
        assert Q.betabinom_sf(k, n, a, b) == pytest.approx(
            stats.betabinom.sf(k, n, a, b), rel=1e-9, abs=1e-15
        )
    assert np.isfinite(Q.betabinom_sf(100, 2000, 180.5, 20.5))
