"""The few distribution functions the simulate/plan path needs, from ``scipy.special`` (cheap to
import) instead of ``scipy.stats`` (about 0.5 s of every command's start-up). Each equals its
``scipy.stats`` counterpart (tests/test_quantiles.py compares them)."""

from __future__ import annotations

import numpy as np
from scipy import special


def t_ppf(p: float, df: float) -> float:
    """Student's t quantile: ``scipy.stats.t.ppf(p, df)``."""
    return float(special.stdtrit(df, p))


def beta_ppf(q: float, a: float, b: float) -> float:
    """Beta quantile: ``scipy.stats.beta.ppf(q, a, b)``."""
    return float(special.betaincinv(a, b, q))


def f_sf(x: float, d1: float, d2: float) -> float:
    """F survival function: ``scipy.stats.f.sf(x, d1, d2)``."""
    return float(special.fdtrc(d1, d2, x))


def binom_ppf(q: float, n: int, p: float) -> int:
    """Binomial quantile, the smallest ``k`` with ``P(X <= k) >= q``: ``scipy.stats.binom.ppf``."""
    cdf = special.bdtr(np.arange(n + 1), n, p)
    return min(n, int(np.searchsorted(cdf, q * (1 - 1e-12), side="left")))


def binom_sf(k: int, n: int, p: float) -> float:
    """``P(X > k)`` for a binomial ``(n, p)``: ``scipy.stats.binom.sf(k, n, p)``."""
    if k < 0:
        return 1.0
    if k >= n:
        return 0.0
    return float(special.bdtrc(k, n, p))


def binom_cdf(k: int, n: int, p: float) -> float:
    """``P(X <= k)`` for a binomial ``(n, p)``: ``scipy.stats.binom.cdf(k, n, p)``."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    return float(special.bdtr(k, n, p))


def betabinom_sf(k: int, n: int, a: float, b: float) -> float:
    """``P(X > k)`` for a beta-binomial ``(n, a, b)``: ``scipy.stats.betabinom.sf(k, n, a, b)``."""
    x = np.arange(max(0, k + 1), n + 1)
    if x.size == 0:
        return 0.0
    logpmf = (
        special.gammaln(n + 1)
        - special.gammaln(x + 1)
        - special.gammaln(n - x + 1)
        + special.betaln(x + a, n - x + b)
        - special.betaln(a, b)
    )
    return float(min(1.0, np.exp(logpmf).sum()))
