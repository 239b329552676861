"""Lifetime distributions as small, frozen, validated value objects.

Every distribution works in **seconds** internally. Each is backed by a frozen
``scipy.stats`` distribution (for ``cdf``/``sf``/``mean``/fitting) but samples
with the numpy ``Generator`` it is given, which is ~30x cheaper per draw than
``rvs`` and keeps the random stream explicit.

Parametrisations (``scale`` in seconds):

=============  ======================================  =====================
family         survival S(t)                            scipy
=============  ======================================  =====================
exponential    exp(-t/scale)                            ``expon(scale)``
weibull        exp(-(t/scale)^shape)                    ``weibull_min(shape)``
gamma          1 - P(shape, t/scale)                    ``gamma(shape)``
lognormal      1 - Phi((ln t - ln scale)/sigma)         ``lognorm(sigma)``
loglogistic    1 / (1 + (t/scale)^shape)                ``fisk(shape)``
constant       1[t < scale]                             (deterministic)
=============  ======================================  =====================
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

FAMILIES = ("exponential", "weibull", "gamma", "lognormal", "loglogistic", "constant")
#: families with a shape parameter (``sigma`` for lognormal)
SHAPED = {"weibull": "shape", "gamma": "shape", "lognormal": "sigma", "loglogistic": "shape"}


#: the log of a lifetime's second moment (at scale 1 s) beyond which its arithmetic overflows
_LOG_MOMENT_CAP = 600.0


def _log_second_moment(family: str, k: float) -> float:
    """log E[X^2] at scale 1 (infinite second moments, e.g. log-logistic k <= 2, give 0: only the
    mean matters for them, and it is finite or explicitly infinite)."""
    if family == "weibull":
        return math.lgamma(1.0 + 2.0 / k)
    if family == "gamma":
        return math.log(k) + math.log(k + 1.0)
    if family == "lognormal":
        return 2.0 * k * k
    return 0.0


@dataclass(frozen=True, slots=True)
class Distribution:
    """A positive lifetime distribution in seconds.

    ``shape`` is the Weibull/gamma/log-logistic shape, or the lognormal ``sigma``;
    it is ignored for exponential and constant.
    """

    family: str
    scale: float
    shape: float = 1.0

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ValueError(f"family must be one of {', '.join(FAMILIES)}, got {self.family!r}")
        for name in ("scale", "shape"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be a finite number > 0, got {v!r}")
        if self.family in SHAPED:
            lm2 = _log_second_moment(self.family, self.shape)
            if lm2 > _LOG_MOMENT_CAP:
                name = SHAPED[self.family]
                raise ValueError(
                    f"{self.family} {name} = {self.shape:.4g}: its variance overflows a float (a lifetime "
                    "this spread out cannot be simulated; "
                    f"{'use shape >= 0.02' if name == 'shape' else 'use sigma <= 17'})"
                )
            if math.log(self.scale) + 0.5 * lm2 > _LOG_MOMENT_CAP / 2:
                raise ValueError(
                    f"{self.family} with scale {self.scale:.4g} s and {SHAPED[self.family]} "
                    f"{self.shape:.4g}: its moments overflow a float"
                )

    # -- constructors ---------------------------------------------------------------------
    @classmethod
    def from_mean(cls, family: str, mean: float, shape: float = 1.0) -> Distribution:
        """The distribution of ``family`` and ``shape`` whose mean is ``mean`` seconds."""
        probe = cls(family, 1.0, shape)
        m = probe.mean()
        if not math.isfinite(m):
            raise ValueError(
                f"a {family} lifetime with {SHAPED.get(family, 'shape')} {shape:.4g} has no finite mean: "
                "give its scale instead of its mean"
            )
        return cls(family, mean / m, shape)

    # -- scipy view -------------------------------------------------------------------------
    @property
    def scipy(self):
        """The frozen ``scipy.stats`` distribution, in seconds (a point mass at ``scale`` for the
        constant)."""
        from scipy import (
            stats,  # here, not at import: scipy.stats costs ~0.5 s of every command's start
        )

        f, s, k = self.family, self.scale, self.shape
        if f == "exponential":
            return stats.expon(scale=s)
        if f == "weibull":
            return stats.weibull_min(k, scale=s)
        if f == "gamma":
            return stats.gamma(k, scale=s)
        if f == "lognormal":
            return stats.lognorm(k, scale=s)
        if f == "loglogistic":
            return stats.fisk(k, scale=s)
        return stats.uniform(loc=s, scale=0.0)  # degenerate: point mass at s

    def mean(self) -> float:
        """The mean (s); ``math.inf`` for a log-logistic with shape <= 1."""
        f, s, k = self.family, self.scale, self.shape
        if f in ("exponential", "constant"):
            return s
        if f == "weibull":
            return s * math.gamma(1.0 + 1.0 / k)
        if f == "gamma":
            return s * k
        if f == "lognormal":
            return s * math.exp(k * k / 2.0)
        # loglogistic: (pi/k) / sin(pi/k) * scale; infinite for k <= 1 (a valid, heavy-tailed lifetime)
        if k <= 1:
            return math.inf
        b = math.pi / k
        return s * b / math.sin(b)

    def variance(self) -> float:
        """The variance (s²); ``math.inf`` for a log-logistic with shape <= 2 (its tail falls as
        ``t^-shape``: moments of order ``shape`` and above do not exist)."""
        f, s, k = self.family, self.scale, self.shape
        if f == "constant":
            return 0.0
        if f == "exponential":
            return s * s
        if f == "weibull":
            return s * s * (math.gamma(1.0 + 2.0 / k) - math.gamma(1.0 + 1.0 / k) ** 2)
        if f == "gamma":
            return k * s * s
        if f == "lognormal":
            return math.expm1(k * k) * math.exp(k * k) * s * s
        if k <= 2:
            return math.inf
        b = math.pi / k
        return s * s * (2.0 * b / math.sin(2.0 * b) - (b / math.sin(b)) ** 2)

    def median(self) -> float:
        """The median (s)."""
        f, s, k = self.family, self.scale, self.shape
        if f in ("lognormal", "loglogistic", "constant"):
            return s
        if f == "exponential":
            return s * math.log(2.0)
        if f == "weibull":
            return s * math.log(2.0) ** (1.0 / k)
        from scipy import special  # gamma: scipy.stats.gamma's median, without importing it

        return float(special.gammaincinv(k, 0.5) * s)

    def mean_share_beyond(self, t: float) -> float:
        """The share of the mean that lifetimes longer than ``t`` seconds contribute,
        ``E[X; X > t] / E[X]``: 1 when the mean is infinite (it is all tail). It is ``P(L > t)``
        for the length-biased lifetime ``L`` (density ``t f(t) / mean``, see
        :meth:`sample_residual`): exponential -> Gamma(2, scale); Weibull(k, s) -> ``(L/s)^k`` ~
        Gamma(1 + 1/k); gamma(a, s) -> Gamma(a + 1, s); lognormal(sigma, e^mu) -> lognormal(mu +
        sigma², sigma); log-logistic(k, s), k > 1 -> ``(L/s)^k = Y/(1-Y)``, Y ~ Beta(1 + 1/k,
        1 - 1/k); constant c -> 1 below c, else 0."""
        from scipy import special

        f, s, k = self.family, self.scale, self.shape
        if not t > 0:
            return 1.0
        if f == "constant":
            return 1.0 if t < s else 0.0
        if not math.isfinite(self.mean()):
            return 1.0
        x = t / s
        if f == "exponential":
            return float(special.gammaincc(2.0, x))
        if f == "weibull":
            return float(special.gammaincc(1.0 + 1.0 / k, _pow(x, k)))
        if f == "gamma":
            return float(special.gammaincc(k + 1.0, x))
        if f == "lognormal":
            return float(special.ndtr(k - math.log(x) / k))
        # log-logistic, k > 1: P(Y > z/(1+z)) = I_{1/(1+z)}(1 - 1/k, 1 + 1/k), z = x^k
        return float(special.betainc(1.0 - 1.0 / k, 1.0 + 1.0 / k, 1.0 / (1.0 + _pow(x, k))))

    def sf(self, t: np.ndarray | float) -> np.ndarray:
        """The survival ``S(t) = P(X > t)`` at ``t`` seconds."""
        if self.family == "constant":
            return np.where(np.asarray(t) < self.scale, 1.0, 0.0)
        return self.scipy.sf(t)

    def cdf(self, t: np.ndarray | float) -> np.ndarray:
        """``P(X <= t)`` at ``t`` seconds."""
        return 1.0 - self.sf(t)

    # -- sampling ---------------------------------------------------------------------------
    def sample(self, rng: np.random.Generator, size: int | tuple[int, ...] | None = None):
        """Draw from this distribution with ``rng`` (a scalar float when ``size`` is None)."""
        return _SAMPLERS[self.family](rng, self.scale, self.shape, size)

    def sample_residual(self, rng: np.random.Generator, size: int | tuple[int, ...] | None = None):
        """A draw of the *equilibrium residual life* (density ``S(t) / mean``): the time to the next
        failure of a renewal process observed at a random instant long after it started (a scalar
        float when ``size`` is None, else an array of ``size`` draws).

        ``R = U x L`` with ``U`` uniform on (0, 1) and ``L`` the length-biased lifetime (density
        ``t f(t) / mean``), which has a closed form for every family: exponential -> itself;
        Weibull(k, s) -> ``s G^(1/k)``, ``G ~ Gamma(1/k)`` directly; gamma(a, s) -> ``L ~ Gamma(a+1, s)``;
        lognormal(sigma, e^mu) -> ``L ~ lognormal(mu + sigma^2, sigma)``; log-logistic(k, s), k > 1
        -> ``L = s (Y / (1 - Y))^(1/k)``, ``Y ~ Beta(1 + 1/k, 1 - 1/k)``; constant c -> ``U c``.
        With ``size``, the ``U`` of every draw come first, then the ``L`` (the scalar draw's order).
        """
        f, s, k = self.family, self.scale, self.shape
        if f == "exponential":
            r = rng.exponential(s, size)
        elif f == "weibull":
            r = s * rng.gamma(1.0 / k, 1.0, size) ** (1.0 / k)
        else:
            u = rng.random(size)
            if f == "gamma":
                r = u * rng.gamma(k + 1.0, s, size)
            elif f == "lognormal":
                r = u * rng.lognormal(math.log(s) + k * k, k, size)
            elif f == "loglogistic":
                if k <= 1:
                    raise ValueError(
                        "a log-logistic lifetime with shape <= 1 has no mean: no stationary start"
                    )
                y = rng.beta(1.0 + 1.0 / k, 1.0 - 1.0 / k, size)
                r = u * s * (y / (1.0 - y)) ** (1.0 / k)
            else:
                r = u * s
        return float(r) if size is None else r

    def describe(self, unit: str = "h") -> str:
        """One line: the family, scale, shape and mean in ``unit`` (``"h"``: hours; any other unit
        is taken as seconds)."""
        div = 3600.0 if unit == "h" else 1.0
        extra = f", {SHAPED[self.family]}={self.shape:.4g}" if self.family in SHAPED else ""
        return f"{self.family}(scale={self.scale / div:.4g} {unit}{extra}; mean {self.mean() / div:.4g} {unit})"

    def __repr__(self) -> str:
        if self.family in SHAPED:
            return f"Distribution({self.family!r}, scale={self.scale!r}, shape={self.shape!r})"
        return f"Distribution({self.family!r}, scale={self.scale!r})"


def _pow(x: float, k: float) -> float:
    """``x ** k`` for ``x > 0``, ``math.inf`` where it overflows a float."""
    lz = k * math.log(x)
    return math.inf if lz > 700.0 else math.exp(lz)


def _loglogistic(rng: np.random.Generator, s: float, k: float, size):
    u = rng.random(size)
    return s * (u / (1.0 - u)) ** (1.0 / k)


_Sampler = Callable[
    [np.random.Generator, float, float, "int | tuple[int, ...] | None"], "float | np.ndarray"
]
_SAMPLERS: dict[str, _Sampler] = {
    "exponential": lambda rng, s, k, size: rng.exponential(s, size),
    "weibull": lambda rng, s, k, size: s * rng.weibull(k, size),
    "gamma": lambda rng, s, k, size: rng.gamma(k, s, size),
    "lognormal": lambda rng, s, k, size: rng.lognormal(math.log(s), k, size),
    "loglogistic": _loglogistic,
    "constant": lambda rng, s, k, size: s if size is None else np.full(size, s),
}


def min_of_iid_mean(dist: Distribution, n: int) -> float:
    """E[min of n iid draws] = integral of S(t)^n dt (closed form where one exists)."""
    if n < 1:
        raise ValueError("n must be >= 1")
    f, s, k = dist.family, dist.scale, dist.shape
    if f == "exponential":
        return s / n
    if f == "weibull":  # min of n Weibull(k, s) is Weibull(k, s * n^(-1/k))
        return s * n ** (-1.0 / k) * math.gamma(1.0 + 1.0 / k)
    if f == "constant":
        return s
    # integral of S(t)^n on a log grid from where S^n ~ 1 to where S^n < 1e-12 (trapezoid,
    # 4,000 points: relative error ~1e-6 for these families), vectorised
    sp = dist.scipy
    lo = float(sp.ppf(1e-9 / n))
    hi = float(sp.isf(1e-12 ** (1.0 / n)))
    if not (math.isfinite(hi) and hi > lo > 0):
        from scipy import integrate

        val, _ = integrate.quad(lambda t: float(dist.sf(t)) ** n, 0.0, np.inf, limit=200)
        return float(val)
    t = np.geomspace(lo, hi, 4000)
    return float(lo + np.trapezoid(sp.sf(t) ** n, t))


__all__ = ["Distribution", "FAMILIES", "SHAPED", "min_of_iid_mean"]
