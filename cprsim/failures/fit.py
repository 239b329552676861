"""Censored maximum-likelihood fitting, model selection, goodness of fit, and the cluster's MTBF.

For right-censored durations ``t_i`` with event flags ``d_i`` the log-likelihood is

    log L(theta) = sum_{d_i = 1} log f(t_i; theta) + sum_{d_i = 0} log S(t_i; theta)

maximised in closed form (exponential) or by L-BFGS-B on the closed-form log-likelihood
(:mod:`cprsim.failures.likelihood`) for the five families (exponential, Weibull, gamma,
lognormal, log-logistic); ``scipy.stats.<family>.fit(CensoredData(...), floc=0)`` where that
does not converge. 95% intervals on the parameters come
from the observed information: the numerical Hessian of ``log L`` in the log-parameters (so the
intervals stay positive), inverted, ``exp(log theta +- 1.96 se)``. Models are ranked by AIC
(``2k - 2 log L``; BIC ``k ln n - 2 log L``, ``n`` all observations). Goodness of fit valid under
censoring: the largest distance between the Kaplan-Meier curve and the fitted survival at the
observed event times, with a parametric-bootstrap p-value (samples drawn from the fitted model,
censored by times drawn from the data's censoring distribution, refitted each time: the draws
together, by :func:`likelihood.mle_many`).

**Tails** (:class:`TailCheck`, ``FitReport.tail``): a fitted mean is only as good as the tail it
rests on. Each fit says whether its mean and variance exist (a log-logistic's tail falls as
``t^-shape``: no mean for shape <= 1, no variance for shape <= 2), its coefficient of variation,
its mean over its median, its mean over the exponential's (the data's total time over its
failures: the mean a constant hazard gives), and the share of its mean that lifetimes longer than
the longest duration in the data contribute (``E[X; X > t_max] / E[X]``: that part is
extrapolated). A fit is *heavy-tailed* when its mean or variance is infinite or its mean is
:data:`HEAVY_MEAN_RATIO` times the exponential's or more; its mean is *extrapolated* when that
share is :data:`EXTRAPOLATED_SHARE` or more. ``FitReport.model_fit()`` is the fit a failure-model
file gets: the best by AIC with a finite mean (a scenario's stationary start needs one).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cprsim.errors import InputError
from cprsim.failures import likelihood
from cprsim.failures.distributions import Distribution

FIT_FAMILIES = ("exponential", "weibull", "gamma", "lognormal", "loglogistic")
#: the widest ratio of the longest duration to the shortest that a fit accepts (a millisecond to
#: 30,000 years, in one unit: wider is a unit or parsing error, and overflows the likelihoods)
MAX_SPAN = 1e15
#: the scipy.stats names of the families (the fallback fit; imported only then: ~0.5 s)
_SCIPY_NAMES = {
    "exponential": "expon",
    "weibull": "weibull_min",
    "gamma": "gamma",
    "lognormal": "lognorm",
    "loglogistic": "fisk",
}


@dataclass(frozen=True)
class Fit:
    """One fitted family. Times in the unit of the data (hours for traces)."""

    family: str
    scale_: float
    shape_: float  #: 1 for the exponential; sigma for the lognormal
    scale_ci_: tuple[float, float]
    shape_ci_: tuple[float, float]
    log_likelihood_: float
    k: int
    n: int
    events: int
    ks_: float = math.nan  #: sup |KM - fitted survival| at the event times
    p_value_: float = math.nan  #: parametric bootstrap
    bootstrap: int = 0

    @property
    def AIC_(self) -> float:
        """Akaike's information criterion ``2k - 2 log L`` (lower is better)."""
        return 2 * self.k - 2 * self.log_likelihood_

    @property
    def BIC_(self) -> float:
        """The Bayesian information criterion ``k ln n - 2 log L``."""
        return self.k * math.log(self.n) - 2 * self.log_likelihood_

    @property
    def mean_(self) -> float:
        """The fitted mean, in the unit of the data (hours for traces)."""
        return self.distribution(1.0).mean()

    def distribution(self, unit_s: float = 3600.0) -> Distribution:
        """As a simulator distribution (seconds), from data in units of ``unit_s`` seconds."""
        return Distribution(self.family, self.scale_ * unit_s, self.shape_)

    def sf(self, t: np.ndarray) -> np.ndarray:
        """The fitted survival at ``t`` (in the unit of the data)."""
        return likelihood.sf(self.family, self.scale_, self.shape_, t)


#: a fitted mean this many times the exponential's (or more) is called heavy-tailed
HEAVY_MEAN_RATIO = 5.0
#: a fitted mean is called extrapolated when lifetimes longer than any in the data make this share of it
EXTRAPOLATED_SHARE = 0.5


@dataclass(frozen=True)
class TailCheck:
    """How much a fit's mean rests on its tail (:meth:`FitReport.tail`). Times in the unit of the
    data.

    ``mean_finite`` / ``variance_finite``: whether they exist; ``cv``: standard deviation / mean
    (inf: no variance; nan: no mean); ``mean_over_median``; ``mean_over_exponential``: the mean
    over ``exponential_mean`` (the data's total time / failures); ``mean_beyond_data``: the share
    of the mean from lifetimes longer than ``t_max``, the longest duration in the data (censored
    or not); ``heavy``: infinite mean or variance, or a mean :data:`HEAVY_MEAN_RATIO` times the
    exponential's or more; ``extrapolated``: ``mean_beyond_data`` >= :data:`EXTRAPOLATED_SHARE`;
    ``notes``: why, in words (empty when neither)."""

    family: str
    mean: float
    mean_finite: bool
    variance_finite: bool
    cv: float
    mean_over_median: float
    mean_over_exponential: float
    mean_beyond_data: float
    t_max: float
    exponential_mean: float
    heavy: bool
    extrapolated: bool
    notes: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        """Plain data (JSON; an infinite or undefined number is None)."""
        num = lambda x: float(x) if math.isfinite(x) else None
        return {
            "mean_finite": self.mean_finite,
            "variance_finite": self.variance_finite,
            "cv": num(self.cv),
            "mean_over_median": num(self.mean_over_median),
            "mean_over_exponential": num(self.mean_over_exponential),
            "mean_beyond_data": num(self.mean_beyond_data),
            "heavy": self.heavy,
            "extrapolated": self.extrapolated,
            "notes": list(self.notes),
        }


def _pct(x: float) -> str:
    """A share as a percentage that never rounds to 0% or 100% when it is not."""
    if x >= 1.0:
        return "100%"
    if x > 0.995:
        return ">99%"
    if 0 < x < 0.005:
        return "<1%"
    return f"{100 * x:.0f}%"


def tail_check(f: Fit, t_max: float, exponential_mean: float, unit: str = "h") -> TailCheck:
    """:class:`TailCheck` of ``f`` for data whose longest duration is ``t_max`` and whose
    exponential mean (total time / failures) is ``exponential_mean`` (nan: unknown; the checks
    that need it are then skipped); ``unit`` names the data's unit in the notes."""
    d = f.distribution(1.0)
    mean, var = d.mean(), d.variance()
    mean_ok, var_ok = math.isfinite(mean), math.isfinite(var)
    cv = (math.sqrt(var) / mean if var_ok else math.inf) if mean_ok else math.nan
    med = d.median()
    share = d.mean_share_beyond(t_max) if math.isfinite(t_max) and t_max > 0 else math.nan
    ratio = mean / exponential_mean if exponential_mean > 0 else math.nan
    heavy = not mean_ok or not var_ok or ratio >= HEAVY_MEAN_RATIO
    extrapolated = share >= EXTRAPOLATED_SHARE
    notes: list[str] = []
    what = "sigma" if f.family == "lognormal" else "shape"
    if not mean_ok:
        notes.append(f"infinite mean and variance ({f.family} {what} {f.shape_:.3g} <= 1)")
    elif not var_ok:
        notes.append(f"infinite variance ({f.family} {what} {f.shape_:.3g} <= 2)")
    if mean_ok and ratio >= HEAVY_MEAN_RATIO:
        notes.append(
            f"mean {mean:.4g} {unit}, {ratio:.3g}x the exponential's {exponential_mean:.4g} {unit}"
        )
    if mean_ok and extrapolated:
        notes.append(
            f"{_pct(share)} of the mean from lifetimes longer than any in the data "
            f"({t_max:.4g} {unit})"
        )
    return TailCheck(
        f.family,
        mean,
        mean_ok,
        var_ok,
        cv,
        mean / med if med > 0 else math.nan,
        ratio,
        1.0 if not mean_ok else share,
        t_max,
        exponential_mean,
        bool(heavy),
        bool(extrapolated),
        tuple(notes),
    )


@dataclass(frozen=True)
class FitReport:
    """The fits of one set of lifetimes (:func:`fit`): ``fits`` (each a ``Fit``: family,
    ``scale_`` in the data's unit (hours), ``shape_``, their 95% CIs, ``mean_``, ``AIC_``, ``BIC_``,
    the Kaplan-Meier distance ``ks_`` and its bootstrap ``p_value_``) ranked by AIC, ``best``, the
    counts ``n``, ``events``, ``censored``, the Kaplan-Meier curve (``km_t``, ``km_s`` with its
    95% band ``km_lo``, ``km_hi``), ``t_max`` (the longest duration, censored or not) and
    ``exponential_mean`` (total time / failures; both nan in a report read from an older file).
    ``tail(f)``: how much ``f``'s mean rests on its tail; ``model_fit()``: the fit a model file
    gets. ``as_dict()``: the JSON of ``cprsim fit --report``."""

    fits: tuple[Fit, ...]  #: ranked by AIC
    n: int
    events: int
    censored: int
    km_t: np.ndarray = field(repr=False)
    km_s: np.ndarray = field(repr=False)
    km_lo: np.ndarray = field(repr=False)
    km_hi: np.ndarray = field(repr=False)
    t_max: float = math.nan
    exponential_mean: float = math.nan

    @property
    def best(self) -> Fit:
        """The fit with the lowest AIC."""
        return self.fits[0]

    def tail(self, f: Fit, unit: str = "h") -> TailCheck:
        """:func:`tail_check` of ``f`` (one of ``fits``) against this report's data."""
        return tail_check(f, self.t_max, self.exponential_mean, unit)

    def model_fit(self) -> tuple[Fit, str | None]:
        """The fit a failure-model file gets, and why it is not the best by AIC (None when it is):
        the best by AIC whose mean is finite. A lifetime with an infinite mean has no long-run
        failure rate, and a scenario's stationary start (its default) refuses it; its rate falls
        to 0 over a long run however well it fits the data's range."""
        best = self.best
        if math.isfinite(best.mean_):
            return best, None
        alt = next((f for f in self.fits if math.isfinite(f.mean_)), None)
        if alt is None:
            return best, None
        return alt, (
            f"the best by AIC, {best.family} ({'sigma' if best.family == 'lognormal' else 'shape'} "
            f"{best.shape_:.3g}), has an infinite mean: no long-run failure rate, and no stationary "
            f"start (a scenario's default); {alt.family} is the best with a finite mean "
            f"(ΔAIC {alt.AIC_ - best.AIC_:.1f})"
        )

    def as_dict(self) -> dict:
        """Plain data (JSON): the fits and the Kaplan-Meier curve; ``from_dict`` reads it back."""

        def num(x: float) -> float | None:
            return None if not math.isfinite(x) else float(x)

        model, why = self.model_fit()
        return {
            "n": self.n,
            "events": self.events,
            "censored": self.censored,
            "t_max": num(self.t_max),
            "exponential_mean": num(self.exponential_mean),
            "model_family": model.family,
            "model_note": why,
            "fits": [
                {
                    "family": f.family,
                    "scale": f.scale_,
                    "scale_ci95": list(f.scale_ci_),
                    "shape": f.shape_,
                    "shape_ci95": list(f.shape_ci_),
                    "log_likelihood": f.log_likelihood_,
                    "k": f.k,
                    "aic": f.AIC_,
                    "bic": f.BIC_,
                    "ks": num(f.ks_),
                    "p_value": num(f.p_value_),
                    "bootstrap": f.bootstrap,
                    "mean": num(f.mean_),
                    "tail": self.tail(f).as_dict(),
                }
                for f in self.fits
            ],
            "km": {
                "t": self.km_t.tolist(),
                "s": self.km_s.tolist(),
                "lo": [num(x) for x in self.km_lo],
                "hi": [num(x) for x in self.km_hi],
            },
        }

    @classmethod
    def from_dict(cls, d: dict, what: str = "fit report") -> FitReport:
        """Read :meth:`as_dict`'s data back; anything else raises :class:`~cprsim.errors.InputError`
        naming ``what``."""
        try:
            fits = tuple(
                Fit(
                    f["family"],
                    float(f["scale"]),
                    float(f["shape"]),
                    tuple(f["scale_ci95"]),
                    tuple(f["shape_ci95"]),
                    float(f["log_likelihood"]),
                    int(f["k"]),
                    int(d["n"]),
                    int(d["events"]),
                    math.nan if f["ks"] is None else f["ks"],
                    math.nan if f["p_value"] is None else f["p_value"],
                    int(f["bootstrap"]),
                )
                for f in d["fits"]
            )
            km = d["km"]
            arr = [
                np.array([math.nan if x is None else x for x in km[k]], dtype=float)
                for k in ("t", "s", "lo", "hi")
            ]
            t_max, exp_mean = (
                math.nan if d.get(k) is None else float(d[k]) for k in ("t_max", "exponential_mean")
            )
            return cls(
                fits,
                int(d["n"]),
                int(d["events"]),
                int(d["censored"]),
                arr[0],
                arr[1],
                arr[2],
                arr[3],
                t_max=t_max,
                exponential_mean=exp_mean,
            )
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise InputError(
                f"{what}: not a fit report, the JSON of FitReport.as_dict() that `cprsim fit` "
                f"writes ({e!s})"
            ) from None


def _check(t: np.ndarray, observed: np.ndarray, what: str) -> None:
    if t.ndim != 1 or t.shape != observed.shape:
        raise InputError(f"{what}: durations and event flags must be 1-D of one length")
    if t.size == 0:
        raise InputError(f"{what}: no durations to fit")
    if not np.all(np.isfinite(t)) or np.any(t <= 0):
        raise InputError(f"{what}: durations must be finite and > 0")
    if not observed.any():
        raise InputError(f"{what}: every duration is censored: nothing to fit")
    lo, hi = float(t.min()), float(t.max())
    if hi > MAX_SPAN * lo:
        raise InputError(
            f"{what}: durations from {lo:.3g} to {hi:.3g}: more than {MAX_SPAN:.0e} between the "
            "shortest and the longest, which no failure log in one time unit has (check the unit "
            "and the rows that make the extremes)"
        )
    n_obs, distinct = int(observed.sum()), int(np.unique(t).size)
    if n_obs < 2 or distinct < 2:
        raise InputError(
            f"{what}: {n_obs} failure{'s' if n_obs != 1 else ''} among {t.size} lifetime"
            f"{'s' if t.size != 1 else ''}{', all of one length' if distinct < 2 else ''}: a fit needs "
            "at least 2 failures and lifetimes of different lengths"
        )


def loglik(family: str, scale: float, shape: float, t: np.ndarray, observed: np.ndarray) -> float:
    """The censored log-likelihood: the log densities of the observed durations plus the log
    survivals of the censored ones."""
    return likelihood.loglik(family, scale, shape, t, observed)


def fit_family(
    family: str,
    t: np.ndarray,
    observed: np.ndarray,
    *,
    bootstrap: int = 0,
    rng: np.random.Generator | None = None,
    what: str = "fit",
    progress: Callable[[int], None] | None = None,
) -> Fit:
    """Fit ``family`` to durations ``t`` (``observed``: False where right-censored) by censored
    maximum likelihood, with 95% Wald intervals on its parameters and, with ``bootstrap`` draws, the
    Kaplan-Meier distance and its parametric-bootstrap p-value. Bad data raise
    :class:`~cprsim.errors.InputError` naming ``what``. ``progress(1)`` is called after each
    bootstrap draw."""
    t = np.asarray(t, float)
    observed = np.asarray(observed, bool)
    _check(t, observed, what)
    scale, shape = _mle(family, t, observed)
    ll = loglik(family, scale, shape, t, observed)
    k = 1 if family == "exponential" else 2
    sci, shci = _intervals(family, scale, shape, t, observed)
    f = Fit(family, scale, shape, sci, shci, ll, k, int(t.size), int(observed.sum()))
    if bootstrap:
        ks, p = _gof(f, t, observed, bootstrap, rng or np.random.default_rng(0), progress)
        f = Fit(**{**f.__dict__, "ks_": ks, "p_value_": p, "bootstrap": bootstrap})
    return f


def _mle(
    family: str, t: np.ndarray, observed: np.ndarray, guess: tuple[float, float] | None = None
) -> tuple[float, float]:
    fast = likelihood.mle(family, t, observed, guess)
    if fast is not None:
        return fast
    from scipy import stats  # the fallback: scipy's generic censored fit (Nelder-Mead)

    dist = getattr(stats, _SCIPY_NAMES[family])
    data = stats.CensoredData(uncensored=t[observed], right=t[~observed])
    args = () if guess is None else (guess[1],)
    kw = {} if guess is None else {"scale": guess[0]}
    shape, _, scale = dist.fit(data, *args, floc=0, **kw)
    return float(scale), float(shape)


def _intervals(family: str, scale: float, shape: float, t: np.ndarray, observed: np.ndarray):
    """95% Wald intervals in log-parameters from the numerical observed information."""
    if family == "exponential":
        # exact for the exponential: var(log scale) = 1 / events
        se_log = 1.0 / math.sqrt(observed.sum())
        return (scale * math.exp(-1.96 * se_log), scale * math.exp(1.96 * se_log)), (1.0, 1.0)
    x0 = np.log([scale, shape])
    f = lambda x: -loglik(family, math.exp(x[0]), math.exp(x[1]), t, observed)
    h = 1e-4
    e0, e1 = np.array([h, 0.0]), np.array([0.0, h])
    f0 = f(x0)
    H = np.empty((2, 2))
    H[0, 0] = (f(x0 + e0) - 2 * f0 + f(x0 - e0)) / h**2
    H[1, 1] = (f(x0 + e1) - 2 * f0 + f(x0 - e1)) / h**2
    H[0, 1] = H[1, 0] = (f(x0 + e0 + e1) - f(x0 + e0 - e1) - f(x0 - e0 + e1) + f(x0 - e0 - e1)) / (
        4 * h * h
    )
    try:
        cov = np.linalg.inv(H)
        se = np.sqrt(np.maximum(np.diag(cov), 0.0))
    except np.linalg.LinAlgError:
        se = np.array([math.inf, math.inf])
    ci = lambda v, s: (v * math.exp(-1.96 * s), v * math.exp(1.96 * s))
    return ci(scale, se[0]), ci(shape, se[1])


def kaplan_meier(t: np.ndarray, observed: np.ndarray):
    """Kaplan-Meier survival with a 95% log-log (Greenwood) band, at the distinct event times."""
    return likelihood.kaplan_meier(t, observed)


#: bootstrap draws refitted together (:func:`likelihood.mle_many`), at most this many durations
#: in all (memory), and progress told after each batch
_BATCH_DRAWS = 16
_BATCH_DURATIONS = 2_000_000


def _gof(
    f: Fit,
    t: np.ndarray,
    observed: np.ndarray,
    B: int,
    rng: np.random.Generator,
    progress: Callable[[int], None] | None = None,
) -> tuple[float, float]:
    """The Kaplan-Meier distance of ``f`` to the data and its parametric-bootstrap p-value over
    ``B`` draws: samples of the fitted model censored by times drawn from the data's censoring
    times, each refitted from ``f``'s estimate. The draws are taken one after the other from
    ``rng`` (the same samples whatever the batching), then refitted a batch at a time
    (:func:`likelihood.mle_many`; a draw it does not converge alone, as :func:`_mle`)."""
    km_t, km_s = likelihood.km_survival(t, observed)
    stat = float(np.max(np.abs(km_s - f.sf(km_t))))
    cens = t[~observed]
    n = t.size
    dist = f.distribution(1.0)
    # the distinct censoring times, and which each censored duration is
    support, which = (
        np.unique(cens, return_inverse=True) if cens.size else (np.array([t.max()]), None)
    )
    per_batch = max(1, min(_BATCH_DRAWS, _BATCH_DURATIONS // n))
    worse = 0
    done = 0
    left = B
    while left:
        m = min(per_batch, left)
        left -= m
        draws = [_gof_sample(dist, cens, support, which, n, rng) for _ in range(m)]
        for stat_b in _gof_refit(f, draws):
            if stat_b is not None:
                worse += stat_b >= stat
                done += 1
        if progress is not None:
            progress(m)
    return stat, (worse + 1) / (done + 1)


_Draw = tuple[np.ndarray, np.ndarray, likelihood.Grouped]


def _gof_sample(
    dist: Distribution,
    cens: np.ndarray,
    support: np.ndarray,
    which: np.ndarray | None,
    n: int,
    rng: np.random.Generator,
) -> _Draw | None:
    """One bootstrap sample of :func:`_gof`: ``n`` lifetimes of ``dist`` censored by times drawn
    from ``cens`` (its distinct values ``support``, ``which`` of them each is; no censoring: all
    at ``support[0]``, the data's longest duration), as durations, event flags and grouped (None:
    no event, or a duration of 0: not refitted). The draws from ``rng`` are ``rng.choice(cens,
    n)``'s (a test checks it): the numbers drawn say which censoring time each lifetime gets."""
    life = dist.sample(rng, n)
    # the draws of rng.choice(cens, n), as positions
    j = rng.choice(cens.size, n) if cens.size else None
    c = np.full(n, support[0]) if j is None else cens[j]
    obs_b = life <= c
    tb = np.minimum(life, c)
    if not obs_b.any() or np.any(tb <= 0):
        return None
    cen = ~obs_b
    if j is None or which is None:
        w = np.array([float(cen.sum())])
    else:
        w = np.bincount(which[j[cen]], minlength=support.size).astype(float)
    nz = w > 0
    return tb, obs_b, likelihood.Grouped(tb[obs_b], support[nz], w[nz])


def _gof_refit(f: Fit, draws: list[_Draw | None]) -> list[float | None]:
    """The Kaplan-Meier distance of each draw to its refit (None: a draw that is None or cannot
    be refitted): the draws refitted together where the family allows
    (:func:`likelihood.mle_many`, from ``f``'s estimate), one at a time otherwise."""
    guess = (f.scale_, f.shape_)
    live = {i: d for i, d in enumerate(draws) if d is not None}
    fits: dict[int, tuple[float, float] | None] = {}
    if f.family in likelihood.BATCHED and live:
        groups = [d[2] for d in live.values()]
        fits = dict(zip(live, likelihood.mle_many(f.family, groups, guess)))
    out: list[float | None] = []
    for i, d in enumerate(draws):
        if d is None:
            out.append(None)
            continue
        tb, obs_b, grouped = d
        est = fits.get(i)
        if est is None:
            try:
                est = _mle(f.family, tb, obs_b, guess=guess)
            except Exception:
                out.append(None)
                continue
        kt, ks = grouped.km_survival()
        out.append(float(np.max(np.abs(ks - likelihood.sf(f.family, est[0], est[1], kt)))))
    return out


def _fit_errors() -> tuple[type[Exception], ...]:
    """What a family that cannot be fitted raises: scipy.optimize's ``OptimizeWarning`` (as an
    error where warnings are) among them once scipy.optimize is loaded (before, nothing raised it:
    it is loaded only by a fit that needs it)."""
    opt = sys.modules.get("scipy.optimize")
    warn = (opt.OptimizeWarning,) if opt is not None else ()
    return (ValueError, RuntimeError, FloatingPointError, *warn)


def fit_all(
    t: np.ndarray,
    observed: np.ndarray,
    families: tuple[str, ...] = FIT_FAMILIES,
    *,
    bootstrap: int = 0,
    seed: int = 0,
    what: str = "fit",
    progress: Callable[[int], None] | None = None,
) -> FitReport:
    """Fit every family of ``families`` that converges (:func:`fit_family`, each bootstrap on its
    own stream from ``seed``), ranked by AIC, with the Kaplan-Meier curve. ``progress(n)``: called
    as bootstrap draws are done (``bootstrap`` per family in all, a family that does not converge
    counted at once)."""
    t = np.asarray(t, float)
    observed = np.asarray(observed, bool)
    _check(t, observed, what)
    ss = np.random.SeedSequence(seed)
    rngs = [np.random.default_rng(x) for x in ss.spawn(len(families))]
    fits = []
    for fam, rng in zip(families, rngs):
        try:
            fits.append(
                fit_family(
                    fam, t, observed, bootstrap=bootstrap, rng=rng, what=what, progress=progress
                )
            )
        except _fit_errors():
            if progress is not None and bootstrap:  # its draws will not run
                progress(bootstrap)
            continue
    if not fits:
        raise InputError(f"{what}: no family could be fitted")
    fits.sort(key=lambda f: f.AIC_)
    km_t, km_s, km_lo, km_hi = kaplan_meier(t, observed)
    return FitReport(
        tuple(fits),
        int(t.size),
        int(observed.sum()),
        int((~observed).sum()),
        km_t,
        km_s,
        km_lo,
        km_hi,
        t_max=float(t.max()),
        exponential_mean=float(t.sum() / observed.sum()),
    )


# -- from node to cluster -----------------------------------------------------------------------------
def cluster_mtbf(
    f: Fit, n_nodes: int, *, draws: int = 20_000, seed: int = 0
) -> tuple[float, float, float, str]:
    """Mean time to the first failure among ``n_nodes`` iid nodes, with a 95% CI, and the method.

    Exponential and Weibull have closed forms (the minimum is of the same family); others are
    integrated numerically. The CI propagates the parameters' uncertainty by drawing them from
    their (log-normal Wald) sampling distribution.
    """
    from cprsim.failures.distributions import min_of_iid_mean

    point = min_of_iid_mean(f.distribution(1.0), n_nodes)
    method = (
        "closed form" if f.family in ("exponential", "weibull") else "numerical integral of S(t)^N"
    )
    rng = np.random.default_rng(seed)
    se_sc = (math.log(f.scale_ci_[1]) - math.log(f.scale_)) / 1.96
    se_sh = (
        (math.log(f.shape_ci_[1]) - math.log(f.shape_)) / 1.96 if f.family != "exponential" else 0.0
    )
    m = 200 if f.family not in ("exponential", "weibull") else draws
    vals = []
    for sc, sh in zip(
        f.scale_ * np.exp(rng.normal(0, se_sc, m)), f.shape_ * np.exp(rng.normal(0, se_sh, m))
    ):
        if f.family == "loglogistic" and sh <= 1:
            continue
        vals.append(
            min_of_iid_mean(
                Distribution(f.family, float(sc), float(sh if f.family != "exponential" else 1.0)),
                n_nodes,
            )
        )
    lo, hi = np.percentile(vals, [2.5, 97.5]) if vals else (math.nan, math.nan)
    return point, float(lo), float(hi), method
