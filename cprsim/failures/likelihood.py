"""Censored log-likelihoods of the five fitted families in closed form, their maximum, and the
Kaplan-Meier curve: numpy and ``scipy.special``/``scipy.optimize`` only (``scipy.stats`` costs
half a second to import and its generic censored ``fit`` minimises by Nelder-Mead through
per-call machinery: seconds per family on 30,000 lifetimes, most of ``cprsim fit``'s time).

Parameters as in :mod:`cprsim.failures.distributions` (``scale``; ``shape``: Weibull's ``k``,
gamma's ``k``, lognormal's ``sigma`` with ``scale = exp(mu)``, log-logistic's ``beta``):

=============  =====================================  =============================================
family         log density                            log survival
=============  =====================================  =============================================
exponential    ``-log s - t/s``                       ``-t/s``
weibull        ``log k/s + (k-1) log(t/s) - (t/s)^k`` ``-(t/s)^k``
gamma          ``(k-1) log t - t/s - lgamma(k)        ``log Q(k, t/s)`` (regularised upper
               - k log s``                            incomplete gamma; asymptotic series where
                                                      it underflows)
lognormal      ``-log(t sigma sqrt(2 pi)) - z^2/2``   ``log Phi(-z)``, ``z = log(t/s)/sigma``
loglogistic    ``log b/s + (b-1) log(t/s)             ``-log1p((t/s)^b)``
               - 2 log1p((t/s)^b)``
=============  =====================================  =============================================

:func:`mle` maximises ``sum log f(observed) + sum log S(censored)`` over ``(log scale, log
shape)`` by L-BFGS-B from a moment start (or a given guess), on the mean log-likelihood;
``tests/test_fit_fast.py`` checks it against ``scipy.stats``' generic censored fit and against
``lifelines``. :func:`mle_many` maximises many samples' log-likelihoods at once (a bootstrap's
refits): Newton's method on the samples stacked end to end, with the closed-form gradient and
Hessian, censored durations counted once per distinct value (:class:`Grouped`);
``tests/test_fit_bootstrap.py`` checks it against :func:`mle` draw by draw.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def _log_q(k: float | np.ndarray, x: np.ndarray) -> np.ndarray:
    """``log Q(k, x)``, the regularised upper incomplete gamma, finite where ``Q`` underflows
    (``x`` far beyond ``k``: the asymptotic series ``x^(k-1) e^-x / Gamma(k) * sum_j
    (k-1)...(k-j) / x^j``, its terms taken while they fall). ``k``: one shape, or one per ``x``."""
    q = special.gammaincc(k, x)
    out = np.empty_like(x)
    ok = q > 1e-280
    out[ok] = np.log(q[ok])
    if not ok.all():
        xs = x[~ok]
        if np.ndim(k):
            k = np.broadcast_to(k, x.shape)[~ok]
        term = np.ones_like(xs)
        total = np.ones_like(xs)
        for j in range(1, 30):
            nxt = term * (k - j) / xs
            if np.all(np.abs(nxt) >= np.abs(term)):
                break
            term = np.where(np.abs(nxt) < np.abs(term), nxt, 0.0)
            total += term
        out[~ok] = (
            (k - 1) * np.log(xs) - xs - special.gammaln(k) + np.log(np.maximum(total, 1e-300))
        )
    return out


def log_terms(
    family: str, scale: float, shape: float, t: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``(log f(t), log S(t))`` of ``family`` at the durations ``t`` (all > 0)."""
    if family == "exponential":
        z = t / scale
        return -math.log(scale) - z, -z
    if family == "weibull":
        lr = np.log(t / scale)
        z = np.exp(shape * lr)
        return math.log(shape / scale) + (shape - 1) * lr - z, -z
    if family == "gamma":
        x = t / scale
        lf = (shape - 1) * np.log(t) - x - special.gammaln(shape) - shape * math.log(scale)
        return lf, _log_q(shape, x)
    if family == "lognormal":
        z = np.log(t / scale) / shape
        return -np.log(t) - math.log(shape) - _LOG_SQRT_2PI - 0.5 * z * z, special.log_ndtr(-z)
    if family == "loglogistic":
        lr = np.log(t / scale)
        lu = shape * lr
        l1p = np.logaddexp(0.0, lu)  # log1p((t/s)^b) without overflow
        return math.log(shape / scale) + (shape - 1) * lr - 2 * l1p, -l1p
    raise ValueError(f"unknown family {family!r}")


def loglik(family: str, scale: float, shape: float, t: np.ndarray, observed: np.ndarray) -> float:
    """The censored log-likelihood: log densities of the observed, log survivals of the censored."""
    lf, ls = log_terms(family, scale, shape, t)
    return float(np.sum(lf[observed]) + np.sum(ls[~observed]))


def sf(family: str, scale: float, shape: float, t: np.ndarray) -> np.ndarray:
    """The survival ``S(t)``."""
    t = np.asarray(t, float)
    pos = t > 0
    out = np.ones_like(t)
    if pos.any():
        out[pos] = np.exp(log_terms(family, scale, shape, t[pos])[1])
    return out


def start(family: str, t: np.ndarray) -> tuple[float, float]:
    """A moment start ``(scale, shape)`` from all durations (censored ones included)."""
    lt = np.log(t)
    m, sd = float(lt.mean()), float(lt.std())
    sd = sd if sd > 1e-6 else 1.0
    if family == "weibull":
        k = 1.2825 / sd  # pi / sqrt(6): the sd of log T is that over k
        return float(np.exp(m + 0.5772 / k)), k
    if family == "gamma":
        mean, var = float(t.mean()), float(t.var())
        k = mean * mean / var if var > 0 else 1.0
        return mean / k, k
    if family == "lognormal":
        return float(np.exp(m)), sd
    if family == "loglogistic":
        return float(np.exp(float(np.median(lt)))), 1.8138 / sd  # pi / sqrt(3)
    return float(t.mean()), 1.0


def _grad_terms(
    family: str, scale: float, shape: float, t: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """The derivatives of ``(log f, log S)`` in ``(log scale, log shape)``:
    ``(dlf/du, dlf/dv, dls/du, dls/dv)``; None for the gamma (no closed form in the shape)."""
    if family == "weibull":
        k = shape
        lr = np.log(t / scale)
        z = np.exp(k * lr)
        return -k + k * z, 1.0 + k * lr - k * lr * z, k * z, -k * lr * z
    if family == "lognormal":
        z = np.log(t / scale) / shape
        h = np.exp(-0.5 * z * z - _LOG_SQRT_2PI - special.log_ndtr(-z))  # phi(z) / Phi(-z)
        return z / shape, -1.0 + z * z, h / shape, h * z
    if family == "loglogistic":
        b = shape
        lr = np.log(t / scale)
        lu = b * lr
        p = special.expit(lu)
        return -b + 2 * p * b, 1.0 + lu - 2 * p * lu, p * b, -p * lu
    return None


def mle(
    family: str, t: np.ndarray, observed: np.ndarray, guess: tuple[float, float] | None = None
) -> tuple[float, float] | None:
    """The maximum-likelihood ``(scale, shape)`` of ``family`` for right-censored ``t``: L-BFGS-B
    from the moment start (or ``guess``), then from two shifted shapes while it reports no
    convergence, the best finite result kept (a line search that stops at the float precision of
    the optimum reports none); None when no start reaches a finite log-likelihood (the caller
    falls back to scipy). Exponential: closed form (total time on test / events)."""
    if family == "exponential":
        return float(t.sum() / observed.sum()), 1.0
    from scipy import optimize

    n = t.size
    t_obs, t_cen = t[observed], t[~observed]
    analytic = family != "gamma"

    def nll(x: np.ndarray) -> float | tuple[float, np.ndarray]:
        s, k = math.exp(x[0]), math.exp(x[1])
        bad = (1e300, np.zeros(2)) if analytic else 1e300
        if not (0 < s < math.inf and 0 < k < math.inf):
            return bad
        with np.errstate(all="ignore"):
            lf = log_terms(family, s, k, t_obs)[0]
            ls = log_terms(family, s, k, t_cen)[1] if t_cen.size else np.zeros(0)
            v = -(float(np.sum(lf)) + float(np.sum(ls))) / n
            if not math.isfinite(v):
                return bad
            if not analytic:
                return v
            fu, fv, _, _ = _grad_terms(family, s, k, t_obs)  # type: ignore[misc]
            g = np.array([np.sum(fu), np.sum(fv)])
            if t_cen.size:
                _, _, su, sv = _grad_terms(family, s, k, t_cen)  # type: ignore[misc]
                g += np.array([np.sum(su), np.sum(sv)])
            g = -g / n
        return (v, g) if np.all(np.isfinite(g)) else bad

    x0 = np.log(guess if guess is not None else start(family, t))
    if not np.all(np.isfinite(x0)):
        return None
    best = None
    for x_start in (x0, x0 + np.array([0.0, 0.5]), x0 - np.array([0.0, 0.5])):
        r = optimize.minimize(
            nll,
            x_start,
            jac=analytic,
            method="L-BFGS-B",
            options={"ftol": 1e-15, "gtol": 1e-10, "maxiter": 500},
        )
        if np.all(np.isfinite(r.x)) and math.isfinite(r.fun) and r.fun < 1e299:
            if best is None or r.fun < best.fun:
                best = r
            if r.success:
                break
    if best is None:
        return None
    s, k = float(math.exp(best.x[0])), float(math.exp(best.x[1]))
    return (s, k) if math.isfinite(s) and math.isfinite(k) and s > 0 and k > 0 else None


def kaplan_meier(
    t: np.ndarray, observed: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Kaplan-Meier survival at the distinct durations with its 95% log-log (Greenwood) band:
    ``(times, S, low, high)``; the band is NaN where ``S`` is 0 or 1 (undefined there), as
    ``scipy.stats.ecdf(...).sf.confidence_interval(method="log-log")`` gives it."""
    times, d, n, S = _km(t, observed)
    with np.errstate(divide="ignore", invalid="ignore"):
        g = np.cumsum(d / (n * (n - d)))
        se = np.sqrt(g) / np.abs(np.log(S))
        z = special.ndtri(0.975)
        lo = S ** np.exp(z * se)
        hi = S ** np.exp(-z * se)
    bad = (S <= 0) | (S >= 1) | ~np.isfinite(se)
    lo[bad] = np.nan
    hi[bad] = np.nan
    return times, S, lo, hi


def _km(
    t: np.ndarray, observed: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The Kaplan-Meier product at the distinct durations: ``(times, deaths, at risk, S)``."""
    t = np.asarray(t, float)
    observed = np.asarray(observed, bool)
    times, inv = np.unique(t, return_inverse=True)
    deaths = np.bincount(inv, weights=observed.astype(float), minlength=times.size)
    leaving = np.bincount(inv, minlength=times.size).astype(float)
    at_risk = leaving[::-1].cumsum()[::-1]
    return times, deaths, at_risk, np.cumprod(1.0 - deaths / at_risk)


def km_survival(t: np.ndarray, observed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The Kaplan-Meier curve alone, ``(times, S)``: :func:`kaplan_meier`'s, without its band
    (what a bootstrap draw's goodness of fit needs)."""
    times, _, _, S = _km(t, observed)
    return times, S


# -- many fits at once: a bootstrap's refits ------------------------------------------------------
@dataclass(frozen=True)
class Grouped:
    """Right-censored durations with equal censored durations counted once: ``t_obs`` (the
    observed durations), ``t_cen`` (the distinct censored durations) and ``w_cen`` (how many of
    each). The log-likelihood is the same; a bootstrap sample's censoring times are drawn from the
    data's few distinct ones (Titan: 1,408 for 25,118 censored lifetimes), so its censored terms,
    the costly ones (``log Q`` of the gamma), cost that much less."""

    t_obs: np.ndarray
    t_cen: np.ndarray
    w_cen: np.ndarray

    @classmethod
    def of(cls, t: np.ndarray, observed: np.ndarray) -> Grouped:
        """``t`` (``observed``: False where right-censored) grouped."""
        values, w = np.unique(t[~observed], return_counts=True)
        return cls(t[observed], values, w.astype(float))

    def km_survival(self) -> tuple[np.ndarray, np.ndarray]:
        """:func:`km_survival` of these durations (the same numbers), sorting only the distinct
        ones."""
        n_obs = self.t_obs.size
        times, inv = np.unique(np.concatenate([self.t_obs, self.t_cen]), return_inverse=True)
        deaths = np.bincount(inv[:n_obs], minlength=times.size).astype(float)
        leaving = np.bincount(
            inv, weights=np.concatenate([np.ones(n_obs), self.w_cen]), minlength=times.size
        )
        at_risk = leaving[::-1].cumsum()[::-1]
        return times, np.cumprod(1.0 - deaths / at_risk)


#: the families :func:`mle_many` fits (the exponential's maximum is closed: :func:`mle`)
BATCHED = ("weibull", "gamma", "lognormal", "loglogistic")
#: :func:`mle_many` stops when a Newton step moves no log-parameter by more than this (after
#: that step, quadratic convergence leaves an error of order its square)
NEWTON_STEP_TOL = 1e-9
#: a Newton step this small is near the maximum: it may lower log L by its rounding
#: (a sum of ~10^4 terms: a few units in the 13th digit) and still be taken
_NEAR = 1e-4
_LL_ROUNDING = 1e-11
#: ... or gives up after this many evaluations (steps and halvings; the samples not converged by
#: then are left to :func:`mle`)
NEWTON_MAX_EVALS = 200
#: the step in log shape of the gamma's numerical derivatives of ``log Q`` in its shape
#: (central differences: truncation ~h^2/6 ~ 2e-9 relative, rounding ~1e-14/h ~ 1e-10)
_GAMMA_DV = 1e-4


class _Stacked:
    """The durations of several samples end to end: the observed and the grouped censored ones,
    each with its sample's number, and the per-sample sums the closed forms use."""

    def __init__(self, samples: list[Grouped]) -> None:
        m = len(samples)
        self.m = m
        self.t_o = np.concatenate([g.t_obs for g in samples])
        self.i_o = np.repeat(np.arange(m), [g.t_obs.size for g in samples])
        self.t_c = np.concatenate([g.t_cen for g in samples])
        self.w_c = np.concatenate([g.w_cen for g in samples])
        self.i_c = np.repeat(np.arange(m), [g.t_cen.size for g in samples])
        self.lt_o = np.log(self.t_o)
        self.lt_c = np.log(self.t_c)
        self.d = np.bincount(self.i_o, minlength=m).astype(float)  # events
        self.l1 = self.sum_o(self.lt_o)  # sum of log t over the events
        self.x1 = self.sum_o(self.t_o)  # sum of t over the events
        # the events' log durations about their mean (the lognormal's sum of squares)
        self.m0 = self.l1 / self.d
        self.s2 = self.sum_o((self.lt_o - self.m0[self.i_o]) ** 2)

    def sum_o(self, x: np.ndarray) -> np.ndarray:
        """Per-sample sums of ``x``, one value per observed duration."""
        return np.bincount(self.i_o, weights=x, minlength=self.m)

    def sum_c(self, x: np.ndarray) -> np.ndarray:
        """Per-sample sums of ``x`` weighted by the counts, one value per distinct censored
        duration."""
        return np.bincount(self.i_c, weights=x * self.w_c, minlength=self.m)

    def take(self, keep: np.ndarray) -> _Stacked:
        """The samples where ``keep`` (a boolean per sample), renumbered."""
        out = object.__new__(_Stacked)
        new = np.cumsum(keep) - 1
        ko, kc = keep[self.i_o], keep[self.i_c]
        out.m = int(keep.sum())
        out.t_o, out.lt_o, out.i_o = self.t_o[ko], self.lt_o[ko], new[self.i_o[ko]]
        out.t_c, out.lt_c, out.w_c, out.i_c = (
            self.t_c[kc],
            self.lt_c[kc],
            self.w_c[kc],
            new[self.i_c[kc]],
        )
        for name in ("d", "l1", "x1", "m0", "s2"):
            setattr(out, name, getattr(self, name)[keep])
        return out


def _terms_many(  # long: the batched bootstrap's hot kernel, one closed-form case per family
    family: str, x: np.ndarray, st: _Stacked
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The log-likelihood of each stacked sample at its ``x = (log scale, log shape)`` (one row
    each), its gradient ``(m, 2)`` and Hessian ``(m, 2, 2)`` in ``x``, in closed form (the gamma's
    ``log Q`` in its shape by central differences)."""
    u, v = x[:, 0], x[:, 1]
    k = np.exp(v)
    d = st.d
    g = np.empty((st.m, 2))
    H = np.empty((st.m, 2, 2))
    if family in ("weibull", "loglogistic"):
        # log L = d (v - u) + (k - 1) sum(log t - u) - sum_w G(q), q = k (log t - u): Weibull
        # G = e^q (weights: 1 per event, the count per censored value); log-logistic
        # G = log(1 + e^q) (weights: 2 per event, the count per censored value)
        e = st.l1 - d * u
        q_o = k[st.i_o] * (st.lt_o - u[st.i_o])
        q_c = k[st.i_c] * (st.lt_c - u[st.i_c])
        if family == "weibull":
            g0_o = g1_o = g2_o = np.exp(q_o)
            g0_c = g1_c = g2_c = np.exp(q_c)
            w_o = 1.0
        else:
            g0_o, g0_c = np.logaddexp(0.0, q_o), np.logaddexp(0.0, q_c)
            g1_o, g1_c = special.expit(q_o), special.expit(q_c)
            g2_o, g2_c = g1_o * (1.0 - g1_o), g1_c * (1.0 - g1_c)
            w_o = 2.0

        def tot(a_o: np.ndarray, a_c: np.ndarray) -> np.ndarray:
            return w_o * st.sum_o(a_o) + st.sum_c(a_c)

        s0 = tot(g0_o, g0_c)
        s1 = tot(g1_o, g1_c)
        s1q = tot(g1_o * q_o, g1_c * q_c)
        s2 = tot(g2_o, g2_c)
        s2q = tot(g2_o * q_o, g2_c * q_c)
        s2qq = tot(g2_o * q_o * q_o, g2_c * q_c * q_c)
        ll = d * (v - u) + (k - 1.0) * e - s0
        g[:, 0] = -k * d + k * s1
        g[:, 1] = d + k * e - s1q
        H[:, 0, 0] = -k * k * s2
        H[:, 0, 1] = -k * d + k * s1 + k * s2q
        H[:, 1, 1] = k * e - s1q - s2qq
    elif family == "lognormal":
        # the events' part from their sums: -sum log t - d (v + log sqrt(2 pi)) - D e^-2v / 2,
        # D = sum (log t - u)^2 = s2 + d (u - m0)^2; the censored: sum_w log Phi(-z)
        a = u - st.m0
        big_d = st.s2 + d * a * a
        e2 = np.exp(-2.0 * v)
        ll = -st.l1 - d * (v + _LOG_SQRT_2PI) - 0.5 * big_d * e2
        g[:, 0] = -d * a * e2
        g[:, 1] = -d + big_d * e2
        H[:, 0, 0] = -d * e2
        H[:, 0, 1] = 2.0 * d * a * e2
        H[:, 1, 1] = -2.0 * big_d * e2
        sig = k[st.i_c]
        z = (st.lt_c - u[st.i_c]) / sig
        ls = special.log_ndtr(-z)
        mills = np.exp(-0.5 * z * z - _LOG_SQRT_2PI - ls)  # phi(z) / Phi(-z)
        mm = mills * (mills - z)
        ll = ll + st.sum_c(ls)
        g[:, 0] += st.sum_c(mills / sig)
        g[:, 1] += st.sum_c(mills * z)
        H[:, 0, 0] -= st.sum_c(mm / (sig * sig))
        H[:, 0, 1] -= st.sum_c((mm * z + mills) / sig)
        H[:, 1, 1] -= st.sum_c(mm * z * z + mills * z)
    elif family == "gamma":
        # the events' part from their sums: (k - 1) sum log t - sum t e^-u - d lgamma(k) - d k u;
        # the censored: sum_w log Q(k, t e^-u), whose derivatives in u are closed
        # (d/du log Q = h = x^k e^-x / (Gamma(k) Q), dh/du = h (x - k - h)) and those in v
        # central differences
        xe = st.x1 * np.exp(-u)
        c = st.l1 - d * u - d * special.digamma(k)
        ll = (k - 1.0) * st.l1 - xe - d * special.gammaln(k) - d * k * u
        g[:, 0] = xe - d * k
        g[:, 1] = k * c
        H[:, 0, 0] = -xe
        H[:, 0, 1] = -d * k
        H[:, 1, 1] = k * c - d * k * k * special.polygamma(1, k)
        lx = st.lt_c - u[st.i_c]
        xc = np.exp(lx)

        def lq_h(vv: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            kk = np.exp(vv)[st.i_c]
            lq = _log_q(kk, xc)
            return lq, np.exp(kk * lx - xc - special.gammaln(kk) - lq)

        h = _GAMMA_DV
        lq0, h0 = lq_h(v)
        lqp, hp = lq_h(v + h)
        lqm, hm = lq_h(v - h)
        kc = k[st.i_c]
        ll = ll + st.sum_c(lq0)
        g[:, 0] += st.sum_c(h0)
        g[:, 1] += st.sum_c((lqp - lqm) / (2 * h))
        H[:, 0, 0] += st.sum_c(h0 * (xc - kc - h0))
        H[:, 0, 1] += st.sum_c((hp - hm) / (2 * h))
        H[:, 1, 1] += st.sum_c((lqp - 2 * lq0 + lqm) / (h * h))
    else:
        raise ValueError(f"no batched fit for family {family!r}")
    H[:, 1, 0] = H[:, 0, 1]
    return ll, g, H


def mle_many(
    family: str, samples: list[Grouped], guess: tuple[float, float]
) -> list[tuple[float, float] | None]:
    """The maximum-likelihood ``(scale, shape)`` of ``family`` (one of :data:`BATCHED`) for each
    sample, all at once: Newton's method in ``(log scale, log shape)`` from ``guess`` (a
    bootstrap's point estimate, near every sample's maximum) on the samples stacked end to end,
    with the closed-form gradient and Hessian of :func:`_terms_many`, each step halved until the
    log-likelihood does not fall (a Hessian that is not negative definite shifted until it is),
    until a step moves no log-parameter by more than :data:`NEWTON_STEP_TOL`. None for a sample
    not converged in :data:`NEWTON_MAX_EVALS` evaluations or whose likelihood is not finite (the
    caller fits it alone with :func:`mle`). Every sample needs an event."""
    m = len(samples)
    out: list[tuple[float, float] | None] = [None] * m
    if m == 0:
        return out
    x = np.tile(np.log(np.asarray(guess, float)), (m, 1))
    if not np.all(np.isfinite(x)):
        return out
    st = _Stacked(samples)
    rows = np.arange(m)  # the samples still running, as rows of x
    with np.errstate(all="ignore"):
        ll, g, H = _terms_many(family, x, st)
        alpha = np.ones(m)
        for _ in range(NEWTON_MAX_EVALS):
            bad = ~(np.isfinite(ll) & np.all(np.isfinite(g), 1) & np.all(np.isfinite(H), (1, 2)))
            det = H[:, 0, 0] * H[:, 1, 1] - H[:, 0, 1] ** 2
            concave = (H[:, 0, 0] < 0) & (det > 0)
            # not negative definite: shift by more than its largest eigenvalue
            tr = H[:, 0, 0] + H[:, 1, 1]
            top = 0.5 * tr + np.sqrt(
                np.maximum(0.25 * (H[:, 0, 0] - H[:, 1, 1]) ** 2 + H[:, 0, 1] ** 2, 0)
            )
            shift = np.where(concave, 0.0, top + 1e-3 * np.abs(tr) + 1e-12)
            a, b, c = H[:, 0, 0] - shift, H[:, 0, 1], H[:, 1, 1] - shift
            det_s = a * c - b * b
            step = np.column_stack([-(c * g[:, 0] - b * g[:, 1]), -(a * g[:, 1] - b * g[:, 0])])
            step /= det_s[:, None]
            size = np.max(np.abs(step), 1)
            done = concave & (size <= NEWTON_STEP_TOL) & ~bad
            xt = x[rows] + alpha[:, None] * step
            llt, gt, Ht = _terms_many(family, xt, st)
            # near the maximum (a concave Newton step of at most NEAR) log L's rounding hides
            # the gain: a step then need only keep log L within its rounding
            near = concave & (size <= _NEAR) & (llt >= ll - _LL_ROUNDING * np.abs(ll))
            ok = np.isfinite(llt) & ((llt >= ll) | near) & ~bad
            x[rows[ok]] = xt[ok]
            ll, g, H = (
                np.where(ok, llt, ll),
                np.where(ok[:, None], gt, g),
                np.where(ok[:, None, None], Ht, H),
            )
            alpha = np.where(ok, 1.0, 0.5 * alpha)
            failed = bad | (alpha < 1e-12)
            for r, j in enumerate(rows):
                if done[r]:
                    s, sh = math.exp(x[j, 0]), math.exp(x[j, 1])
                    if math.isfinite(s) and math.isfinite(sh) and s > 0 and sh > 0:
                        out[j] = (s, sh)
            keep = ~(done | failed)
            if not keep.any():
                break
            if not keep.all():
                rows, st = rows[keep], st.take(keep)
                ll, g, H, alpha = ll[keep], g[keep], H[keep], alpha[keep]
    return out
