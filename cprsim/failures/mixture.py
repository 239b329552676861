"""Bad nodes: a two-rate Poisson mixture over per-node failure counts.

Node ``i`` is observed for ``T_i`` hours (its observation window) and fails ``N_i`` times. A
node is *good* with probability ``1 - pi`` and fails at ``lam`` per hour, or *bad* with
probability ``pi`` and fails at ``k * lam`` per hour (``k > 1``)::

    N_i ~ (1 - pi) Poisson(lam T_i) + pi Poisson(k lam T_i)

``fit_mixture`` maximises the log-likelihood (``logsumexp`` of the two components' Poisson
log-pmfs) on ``(logit pi, log lam, log(k - 1))`` from several starts, with the analytic gradient
(SLSQP with bounds: scipy's L-BFGS-B is many times slower when other processes keep the cores
busy, through OpenBLAS's threads). ``fit_poisson`` is the one-rate model (``pi = 0``, the null
"no bad nodes").

Inference (``analyse``), all by parametric bootstrap with a fixed seed:

* **Intervals** on ``pi``, ``k``, ``lam`` and the share of failures from bad nodes: percentiles
  (the ``(B + 1) q`` order statistic, numpy's ``weibull`` method) of the refits of counts drawn
  from the fitted mixture (fresh good/bad labels per draw).
* **Test of "no bad nodes"**: the likelihood ratio ``LR = 2 (log L_mix - log L_one)``; its null
  distribution is not chi-square (``pi = 0`` is on the boundary and ``k`` is then undefined), so
  the p-value is ``(1 + #{LR* >= LR}) / (1 + B)`` over counts drawn from the fitted one-rate model.
* **Identifiability**: a fit is *degenerate* when the data cannot separate the components (fewer
  than half a bad or half a good node expected, ``k < 1.01``, ``LR < 1e-4``, ``k > 1e4`` or a
  good rate that goes to 0); it is then reported as ``pi = 0, k = 1`` (one rate), in the
  estimate and in the bootstrap draws.
* Each node's posterior probability of being bad, ``P(bad | N_i, T_i)`` at the estimate.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TypeVar

import numpy as np
from scipy import optimize, special

from cprsim.errors import InputError, ParameterError
from cprsim.failures.traces import Trace

_T = TypeVar("_T")

#: a fit with fewer than this many expected bad (or good) nodes is the one-rate model
MIN_EXPECTED_NODES = 0.5
#: a multiplier below this: the two rates coincide
MIN_MULTIPLIER = 1.01
#: a multiplier above this (the largest ``[lifecycle.health]`` takes), or a good rate below 1e-10 of
#: the pooled rate: the good nodes' rate goes to 0, i.e. the counts look like a fraction of nodes
#: that never fail, and k is unbounded
MAX_MULTIPLIER = 1e4
#: a likelihood ratio below this: the mixture fits no better than one rate
MIN_LR = 1e-4
#: bounds of the transformed parameters (logit pi; log lam relative to the pooled rate; log(k - 1))
_BOUNDS = [(-25.0, 25.0), (-25.0, 5.0), (-12.0, 14.0)]
#: the starts (pi, k) of every fit; lam starts where the pooled rate is matched
_STARTS = ((0.02, 30.0), (0.3, 2.5), (0.1, 8.0), (0.01, 200.0))
#: the bootstrap refits of draws from a fitted mixture start from it and from these
_REFIT_STARTS = _STARTS[1:2]


# -- the data ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class NodeCounts:
    """Per-node failure counts and exposures (hours), in node order."""

    nodes: tuple[str, ...]
    failures: np.ndarray  #: failures of each node (count)
    exposure_h: np.ndarray  #: observation window of each node (hours)
    unseen: int = 0  #: nodes added by ``nodes=`` (zero failures over the whole span)
    span_h: float = 0.0  #: the trace's span (hours): the exposure of the unseen nodes
    dropped: int = 0  #: nodes left out because their window is empty


def node_counts(
    trace: Trace, what: str, *, nodes: int | None = None, node_type: str | None = None
) -> NodeCounts:
    """Each node's failures (``fail`` rows of the kept causes; simultaneous ones count once) and its
    window in hours (``start``..``end``; 0 and the trace's horizon when the log gives none).

    ``nodes``: the cluster's size; ``nodes - len(trace's nodes)`` nodes never seen in the log are
    added with zero failures over the trace's span. ``what`` names the log in error messages.
    """
    hist = [h for h in trace.nodes.values() if not node_type or h.node_type == node_type]
    if not hist:
        raise InputError(
            f"{what}: no node ids{' of node type ' + node_type if node_type else ''} in the log "
            "(expected failures of named nodes)"
        )
    hz = trace.horizon()
    t0 = min(0.0 if h.start is None else h.start for h in hist)
    names, fails, expo = [], [], []
    for h in hist:
        start, end = (0.0 if h.start is None else h.start), (hz if h.end is None else h.end)
        names.append(h.node)
        fails.append(len({t for t, ev, _ in h.events if ev == "fail"}))
        expo.append(end - start)
    unseen = _unseen(nodes, len(hist), what)
    names += [f"unseen-{i:05d}" for i in range(unseen)]
    fails += [0] * unseen
    expo += [hz - t0] * unseen
    n, T = np.asarray(fails, np.int64), np.asarray(expo, float)
    keep = T > 0
    if keep.sum() < 2:
        raise ParameterError(
            "nodes",
            f"{int(keep.sum())} node(s) with a non-empty window; the bad-node mixture needs at "
            "least 2 (give the cluster's node count: the nodes that never failed count too)",
            what,
        )
    if n[keep].sum() == 0:
        raise InputError(f"{what}: no failures among {int(keep.sum())} nodes: nothing to fit")
    return NodeCounts(
        tuple(np.asarray(names, object)[keep]),
        n[keep],
        T[keep],
        unseen,
        hz - t0,
        int((~keep).sum()),
    )


def _unseen(nodes: int | None, in_log: int, what: str) -> int:
    if nodes is None:
        return 0
    if nodes < in_log:
        raise ParameterError(
            "nodes",
            f"{nodes} is less than the {in_log} different nodes in the log (expected the "
            "cluster's total node count)",
            what,
        )
    return nodes - in_log


# -- the model ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Mixture:
    """``pi``: fraction of bad nodes; ``lam``: the good nodes' failure rate (per hour); ``k``: the
    bad nodes' rate over the good nodes' (> 1; 1 with ``pi = 0`` is the one-rate model)."""

    pi: float
    lam: float
    k: float

    @property
    def bad_share(self) -> float:
        """The long-run fraction of failures that come from bad nodes (equal exposures)."""
        return self.pi * self.k / (1.0 - self.pi + self.pi * self.k)


@dataclass(frozen=True)
class _Data:
    """Counts grouped by distinct (count, exposure), with multiplicities: the likelihood's terms."""

    n: np.ndarray
    T: np.ndarray
    w: np.ndarray
    const: float  #: -sum log(n_i!)
    rate0: float  #: the pooled rate sum n / sum T (per hour)

    @classmethod
    def of(cls, n: np.ndarray, T: np.ndarray) -> _Data:
        pairs, w = np.unique(
            np.column_stack([np.asarray(n, float), np.asarray(T, float)]),
            axis=0,
            return_counts=True,
        )
        gn, gT = pairs[:, 0], pairs[:, 1]
        return cls(
            gn,
            gT,
            w.astype(float),
            -float(np.sum(w * special.gammaln(gn + 1))),
            float(np.sum(w * gn) / np.sum(w * gT)),
        )


def _components(m: Mixture, d: _Data) -> tuple[np.ndarray, np.ndarray]:
    """log[(1 - pi) P(n | good)], log[pi P(n | bad)] per group, without the log(n!) terms."""
    mu = m.lam * d.T
    good = special.xlogy(d.n, mu) - mu + math.log1p(-m.pi)
    bad = special.xlogy(d.n, m.k * mu) - m.k * mu + math.log(m.pi)
    return good, bad


def log_likelihood(m: Mixture, n: np.ndarray, T: np.ndarray) -> float:
    """The mixture's log-likelihood of counts ``n`` over exposures ``T`` (hours); ``pi = 0``: one rate."""
    d = _Data.of(n, T)
    if m.pi <= 0.0:
        return _poisson_ll(m.lam, d)
    good, bad = _components(m, d)
    return float(np.sum(d.w * np.logaddexp(good, bad)) + d.const)


def posterior_bad(m: Mixture, n: np.ndarray, T: np.ndarray) -> np.ndarray:
    """Each node's probability of being bad given its count ``n`` and exposure ``T`` (hours)."""
    if m.pi <= 0.0:
        return np.zeros(len(n))
    mu = m.lam * np.asarray(T, float)
    n = np.asarray(n, float)
    good = special.xlogy(n, mu) - mu + math.log1p(-m.pi)
    bad = special.xlogy(n, m.k * mu) - m.k * mu + math.log(m.pi)
    return np.exp(bad - np.logaddexp(good, bad))


def _poisson_ll(lam: float, d: _Data) -> float:
    mu = lam * d.T
    return float(np.sum(d.w * (special.xlogy(d.n, mu) - mu)) + d.const)


def fit_poisson(n: np.ndarray, T: np.ndarray) -> tuple[float, float]:
    """The one-rate model: (rate per hour = sum n / sum T, its log-likelihood)."""
    d = _Data.of(n, T)
    return d.rate0, _poisson_ll(d.rate0, d)


# -- maximum likelihood ------------------------------------------------------------------------------
def _unpack(x: np.ndarray, d: _Data) -> Mixture:
    return Mixture(
        float(special.expit(x[0])), float(math.exp(x[1]) * d.rate0), float(1.0 + math.exp(x[2]))
    )


def _pack(m: Mixture, d: _Data) -> np.ndarray:
    x = [special.logit(m.pi), math.log(m.lam / d.rate0), math.log(m.k - 1.0)]
    return np.clip(x, [b[0] for b in _BOUNDS], [b[1] for b in _BOUNDS])


def _negll(x: np.ndarray, d: _Data) -> tuple[float, np.ndarray]:
    """Minus the log-likelihood (without the log n! terms) and its gradient in the packed parameters."""
    m = _unpack(x, d)
    logpi, log1mpi = -np.logaddexp(0.0, -x[0]), -np.logaddexp(0.0, x[0])
    mu = m.lam * d.T
    good = special.xlogy(d.n, mu) - mu + log1mpi
    bad = special.xlogy(d.n, mu) + d.n * math.log(m.k) - m.k * mu + logpi
    tot = np.logaddexp(good, bad)
    r = np.exp(bad - tot)  # P(bad | n)
    g_a = np.sum(d.w * (r - m.pi))
    g_b = np.sum(d.w * (d.n - mu * (1.0 - r + r * m.k)))
    g_c = (m.k - 1.0) * np.sum(d.w * r * (d.n / m.k - mu))
    return -float(np.sum(d.w * tot)), -np.array([g_a, g_b, g_c])


def _fit(d: _Data, extra: Mixture | None = None, grid: tuple = _STARTS) -> tuple[Mixture, float]:
    """The best optimum over the starts ``grid`` of (pi, k) and ``extra``: (estimate, log-likelihood)."""
    starts = [Mixture(p, d.rate0 / (1.0 - p + p * k), k) for p, k in grid]
    if extra is not None and extra.pi > 0.0:
        starts.insert(0, extra)
    best = None
    for s in starts:
        res = optimize.minimize(
            _negll,
            _pack(s, d),
            args=(d,),
            jac=True,
            method="SLSQP",
            bounds=_BOUNDS,
            options={"maxiter": 1000, "ftol": 1e-10},
        )
        if best is None or res.fun < best.fun:
            best = res
    assert best is not None
    return _unpack(best.x, d), -float(best.fun) + d.const


def fit_mixture(
    n: np.ndarray, T: np.ndarray, start: Mixture | None = None
) -> tuple[Mixture, float]:
    """Maximum-likelihood mixture of counts ``n`` over exposures ``T`` (hours), several starts:
    (estimate, its log-likelihood). Not canonicalised (see ``canonical``)."""
    return _fit(_Data.of(n, T), start)


def canonical(m: Mixture, lr: float, n_nodes: int, rate0: float) -> tuple[Mixture, str | None]:
    """The estimate, or ``(pi=0, rate0, k=1)`` with the reason when it is the one-rate model in disguise."""
    reason = None
    if m.pi * n_nodes < MIN_EXPECTED_NODES:
        reason = f"fewer than one bad node expected (pi x nodes = {m.pi * n_nodes:.2g})"
    elif (1.0 - m.pi) * n_nodes < MIN_EXPECTED_NODES:
        reason = (
            f"fewer than one good node expected ((1 - pi) x nodes = {(1.0 - m.pi) * n_nodes:.2g})"
        )
    elif m.k < MIN_MULTIPLIER:
        reason = f"the two rates coincide (k = {m.k:.4g})"
    elif m.k > MAX_MULTIPLIER or m.lam < 1e-10 * rate0:
        reason = (
            "the good nodes' rate goes to 0 and k is unbounded: the counts look like a fraction of nodes "
            "that never fail, not like bad nodes"
        )
    elif lr < MIN_LR:
        reason = f"the mixture fits no better than one rate (likelihood ratio {lr:.2g})"
    return (m, None) if reason is None else (Mixture(0.0, rate0, 1.0), reason)


def simulate(m: Mixture, T: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Counts of nodes with exposures ``T`` (hours) drawn from the mixture (fresh bad/good labels)."""
    bad = rng.random(len(T)) < m.pi
    return rng.poisson(m.lam * np.asarray(T, float) * np.where(bad, m.k, 1.0))


# -- the analysis ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class BadNodeReport:
    """The mixture fit, its one-rate null and their bootstrap inference. Rates per hour."""

    estimate: Mixture  #: canonical: (0, rate, 1) when not identified
    raw: Mixture  #: the optimum as found
    loglik: float
    loglik_one: float
    rate_one: float  #: the one-rate model's rate (per hour)
    not_identified: str | None  #: why the data cannot separate the components (None: they can)
    posterior: np.ndarray  #: P(bad) of each node, in ``counts`` order
    counts: NodeCounts
    bootstrap: int
    seed: int
    level: float
    ci: dict[str, tuple[float, float]] = field(default_factory=dict)  #: pi, k, lam, bad_share
    p_value: float = math.nan  #: of "no bad nodes" (parametric bootstrap)

    @property
    def lr(self) -> float:
        """The likelihood-ratio statistic of the mixture against one rate, ``2 (log L - log L_one)``
        (at least 0)."""
        return max(0.0, 2.0 * (self.loglik - self.loglik_one))

    @property
    def n_nodes(self) -> int:
        """Nodes in the counts."""
        return len(self.counts.nodes)

    def ranked(self) -> np.ndarray:
        """Node indices by P(bad), then failures, then rate, most likely bad first."""
        c = self.counts
        return np.lexsort((c.failures / c.exposure_h, c.failures, self.posterior))[::-1]


def analyse(
    counts: NodeCounts,
    *,
    bootstrap: int = 200,
    seed: int = 0,
    level: float = 0.95,
    progress: Callable[[int], None] | None = None,
) -> BadNodeReport:
    """Fit the mixture and the one-rate model; with ``bootstrap`` > 0, the p-value of "no bad nodes"
    and (when the mixture is identified) the percentile intervals at ``level``, each from
    ``bootstrap`` parametric draws seeded by ``seed``. ``progress(n)``: called as the draws are
    done (``2 x bootstrap`` in all; the intervals' counted at once when they are not computed)."""
    n, T = counts.failures, counts.exposure_h
    raw, ll = fit_mixture(n, T)
    rate1, ll1 = fit_poisson(n, T)
    ll = max(ll, ll1)
    est, why = canonical(raw, 2.0 * (ll - ll1), len(n), rate1)
    rep = BadNodeReport(
        est, raw, ll, ll1, rate1, why, posterior_bad(est, n, T), counts, bootstrap, seed, level
    )
    if bootstrap <= 0:
        return rep
    if why:
        ci: dict[str, tuple[float, float]] = {}
        if progress is not None:
            progress(bootstrap)
    else:
        ci = bootstrap_intervals(raw, T, bootstrap, seed=seed, level=level, progress=progress)
    p = lrt_pvalue(rep.lr, rate1, T, bootstrap, seed=seed, progress=progress)
    return replace(rep, ci=ci, p_value=p)


def _refit(n: np.ndarray, T: np.ndarray, start: Mixture | None) -> tuple[Mixture, float]:
    """A refit of drawn counts, canonicalised, with its likelihood ratio against one rate; from
    ``start`` and one of the starts when given, else from all of them."""
    d = _Data.of(n, T)
    if d.rate0 == 0.0:  # no failures drawn: the one-rate model at rate 0
        return Mixture(0.0, 0.0, 1.0), 0.0
    m, ll = _fit(d, start, _STARTS if start is None else _REFIT_STARTS)
    lr = max(0.0, 2.0 * (ll - _poisson_ll(d.rate0, d)))
    return canonical(m, lr, len(n), d.rate0)[0], lr


def _counted(x: _T, progress: Callable[[int], None] | None) -> _T:
    """``x``, after telling ``progress`` that one more draw is done."""
    if progress is not None:
        progress(1)
    return x


def bootstrap_intervals(
    m: Mixture,
    T: np.ndarray,
    B: int,
    *,
    seed: int = 0,
    level: float = 0.95,
    progress: Callable[[int], None] | None = None,
) -> dict[str, tuple[float, float]]:
    """Percentile intervals at ``level`` of pi, k, lam (per hour) and bad_share, from the refits of
    ``B`` count vectors drawn from ``m`` over exposures ``T`` (hours); a degenerate refit counts as
    pi = 0, k = 1 (see ``canonical``). ``progress(1)``: called after each draw."""
    rng = np.random.default_rng([seed, 1])
    draws = [_counted(_refit(simulate(m, T, rng), T, m)[0], progress) for _ in range(B)]
    q = [50 * (1 - level), 50 * (1 + level)]
    out = {}
    for key in ("pi", "k", "lam", "bad_share"):
        lo, hi = np.percentile([getattr(x, key) for x in draws], q, method="weibull")
        out[key] = (float(lo), float(hi))
    return out


def lrt_pvalue(
    lr: float,
    rate: float,
    T: np.ndarray,
    B: int,
    *,
    seed: int = 0,
    progress: Callable[[int], None] | None = None,
) -> float:
    """The parametric-bootstrap p-value of "no bad nodes": ``(1 + #{LR* >= lr}) / (1 + B)``, LR* the
    likelihood ratios of ``B`` count vectors drawn from one ``rate`` (per hour) over exposures
    ``T``. ``progress(1)``: called after each draw."""
    rng = np.random.default_rng([seed, 2])
    null = Mixture(0.0, rate, 1.0)
    lrs = [_counted(_refit(simulate(null, T, rng), T, None)[1], progress) for _ in range(B)]
    tol = 1e-9 * max(1.0, lr)
    return (1 + sum(s >= lr - tol for s in lrs)) / (1 + B)
