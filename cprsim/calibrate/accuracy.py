"""The accuracy model: accuracy loss as a function of PLS, of when the loss happens and of how old
the restored state was; fitted, selected on held-out seeds, and tested for pooling (torch-free).

**Candidates.** Every model is through the origin (no lost update, no loss) and linear in its
coefficients, with the run's PLS, loss-weighted failure ``position`` and restored-state ``age``
(fractions of the run, :meth:`cprsim.pls.ShardLedger.timing`):

=================  ==============================================================
``slope``          ``loss = PLS x b0``
``position``       ``loss = PLS x (b0 + b1 (position - 1/2))``
``age``            ``loss = PLS x (b0 + b2 age)``
``curvature``      ``loss = PLS x (b0 + b3 PLS)``
``position+age``   ``loss = PLS x (b0 + b1 (position - 1/2) + b2 age)``
=================  ==============================================================

``b0`` is the loss per unit PLS of a failure in the middle of training that restored a state of
"just now"; ``b1`` how much more a unit of PLS costs per unit later in training (later failures
leave less training to recover); ``b2`` how much more it costs per unit of restored-state age (a
shard reset to its initial values late in training loses more than the last hour of updates:
early updates are the large ones); ``b3`` how much more each unit costs when much is lost at once
(a convex loss: losing half the updates costs more than twice losing a quarter).

**Pooled, per strategy, or in between** (for each candidate). Each strategy's coefficients are
shrunk toward the pooled ones by the data's own evidence, never switched by a threshold (a hard
F-test switch let one seed move a plan by seven grid steps). With ``F = ((RSS_pooled - RSS_sep) /
q) / (RSS_sep / nu)``, ``q = (k - 1) p`` restrictions and ``nu = n - k p``, the pooling weight is
the positive-part Stein rule (Judge and Bock 1978): ``B = min(1, c / F)``, ``c = (q - 2) / q x nu /
(nu + 2)`` where ``q >= 3``, and ``c = 1`` (the moment estimate of the share of the strategies'
spread that sampling noise explains) where the Stein rule does not apply (``q < 3``). A strategy's
coefficients are then the model average ``b = B b_pooled + (1 - B) b_own`` with covariance ``B
C_pooled + (1 - B) C_own + B (1 - B) d d'`` (``d = b_own - b_pooled``: the two fits' disagreement
counts as uncertainty), residual scatter weighted the same way and the strategy's own residual
degrees of freedom. ``B = 1``
is the pooled fit (``coef["*"]``), ``B = 0`` the strategy's own; every estimate moves
continuously with the data. The F-test's p-value is reported beside the weight.

**Each strategy's own terms.** Where a strategy has its own coefficients, its own runs decide
which of the candidate's terms they support (:func:`own_terms`: the same held-out rule on its runs
alone); a term they do not support is fixed at 0 in its own fit (``own_terms`` in the file). The
case: vanilla CPR restores states at most a few percent of the run old, so its age coefficient is
noise (its standard error larger than the coefficient, and collinear with ``b0``): with 24 seeds
leaving one out moved vanilla's ``b2`` by more than its value and the plan by up to seven grid
steps. SSU, whose restored states range up to 40% of the run, keeps its age term.

**Selection on held-out data.** Each candidate (with its pooling) is refitted with one seed left
out and predicts that seed's runs (leave-one-seed-out cross-validation: a seed's runs share a
baseline, so they are not independent of each other). The chosen model is the simplest one whose
held-out squared error is within one standard error of the best's (the one-standard-error rule,
with the standard error of the mean paired difference clustered by seed, :func:`paired_se`: a
seed's held-out errors move together): a richer model is used only when the held-out data
support it.

**Constrained to be a model of lost updates.** A loss that falls as more updates are lost, or is
negative, is not a model of lost updates. Every fit (each strategy's own, the pooled one, each
fold of the cross-validation) is least squares subject to the mean loss's derivative in PLS being
non-negative at every corner of the strategy's measured box (PLS 0 and its largest, position and
age at their smallest and largest: :func:`monotone_rows`); the derivative is linear in the
covariates, so it is then non-negative over the whole box, and with no loss at PLS 0 the mean loss
is never negative and never falls. Where the free fit keeps the constraints it is the fit; where it
breaks one, the constrained least squares (:func:`ols`). Constraining, not dropping, keeps the
selection continuous: with the 16 seeds of the matched file shipped before, leaving out one seed
made SSU's free age fit negative at age 0, which dropped the age candidate and moved the PLS bound
4.4x; the constrained fit keeps the candidate (16 of 16 seed-out refits keep the choice) and the
bound within 1.35x. The coefficients' covariance stays the free fit's ``s^2 (X'X)^-1`` (with the
constrained RSS): conservative where a constraint binds, never a variance of 0 at the boundary. A
mean loss of exactly 0 is then possible only on the edge of the measured box where a constraint
binds (e.g. SSU restoring a fresh state); a candidate that loses nothing at its largest measured
PLS in the middle of the box is still not eligible (``inadmissible`` in the model table says why).
(A curvature fit with a negative linear term, which made small PLS cost nothing, is the case the
constraint rules out: its linear term is held at 0 instead.)

**Uncertainty: the mean and a single run.** Coefficients carry their covariance ``C = s^2
(X'X)^-1``; the 95% CI of the *mean* loss at ``x`` is ``x'b +- t(0.975, dof) sqrt(x' C x)``. A
single training run scatters around that mean: its *predictive* distribution is ``x'b + t_dof
sqrt(v(PLS) + x' C x)``, with ``v(PLS) = v0 PLS + v1 PLS^2`` the residual variance, which vanishes
at PLS 0 (no lost update: the very run without failures) and grows with PLS; fitted to the squared
residuals by non-negative least squares and scaled to average ``s^2`` (:func:`residual_model`).
The planner's per-run promise is judged on the predictive distribution (:meth:`Coef.predictive`),
never on the CI of the mean. The runs' scatter has a heavier tail than Student-t's, heavier at
small PLS, so where the calibration has the runs for it (:class:`HeldOutResiduals`: 3 seeds, 40
runs per PLS bin) the planner takes the quantile of ``z`` in ``x'b + z sqrt(v(PLS) + x' C x)``
from the calibration's own standardized residuals on seeds held out of the fit, in the run's PLS
bin (a conformal-style rank of leave-one-seed-out residuals), instead of ``t_dof``;
:func:`held_out_coverage` checks both on held-out seeds.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import platform
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from cprsim import quantiles
from cprsim.names import VANILLA
from cprsim.quantiles import f_sf, t_ppf

#: candidate -> its terms beyond PLS (each multiplies PLS)
CANDIDATES: dict[str, tuple[str, ...]] = {
    "slope": (),
    "position": ("position",),
    "age": ("age",),
    "curvature": ("pls",),
    "position+age": ("position", "age"),
}
FORMULAS = {
    "slope": "loss = PLS x b0",
    "position": "loss = PLS x (b0 + b1 (position - 1/2))",
    "age": "loss = PLS x (b0 + b2 age)",
    "curvature": "loss = PLS x (b0 + b3 PLS)",
    "position+age": "loss = PLS x (b0 + b1 (position - 1/2) + b2 age)",
}
#: the covariates the planner assumes when it only has a PLS (a failure mid-training restoring a
#: fresh save): the reference point of ``b0``
REFERENCE = {
    "position": 0.5,
    "age": 0.0,
    "pls": 0.1,
}  #: ``pls``: where "loss per unit PLS" is quoted


def design(
    terms: Sequence[str], pls: np.ndarray, position: np.ndarray, age: np.ndarray
) -> np.ndarray:
    """The model's columns: PLS, then PLS x (position - 1/2), PLS x age and/or PLS x PLS."""
    pls = np.asarray(pls, float)
    cols = [pls]
    for t in terms:
        if t == "position":
            cols.append(pls * (np.asarray(position, float) - 0.5))
        elif t == "age":
            cols.append(pls * np.asarray(age, float))
        elif t == "pls":
            cols.append(pls * pls)
        else:
            raise ValueError(f"unknown term {t!r}")
    return np.column_stack(cols)


@dataclass(frozen=True)
class Coef:
    """Least squares ``y = X b`` (no intercept) with its covariance and residual degrees of freedom."""

    b: np.ndarray
    cov: np.ndarray
    dof: int
    rss: float
    n: int
    #: residual variance ``v0 PLS + v1 PLS^2`` of a single run around the mean (None: ``rss / dof``
    #: at every PLS, files written before it)
    resid_var: tuple[float, float] | None = None
    #: the terms beyond PLS its own runs support (:func:`own_terms`; None: all the candidate's)
    own_terms: tuple[str, ...] | None = None

    def residual_variance(self, pls: Any) -> np.ndarray:
        """The variance of a single run's loss around the model's mean at these PLS."""
        pls = np.asarray(pls, float)
        if self.resid_var is None:
            v = self.rss / self.dof if self.dof > 0 else math.inf
            return np.full(pls.shape, v)
        v0, v1 = self.resid_var
        return v0 * pls + v1 * pls * pls

    def _coef_variance(self, X: np.ndarray) -> np.ndarray:
        """``x' C x`` for each row of ``X`` (>= 0): infinite without residual degrees of freedom
        (no estimate of the coefficients' uncertainty), except at a zero row (PLS 0: no loss)."""
        if self.dof <= 0:
            return np.where(np.any(X != 0, axis=1), math.inf, 0.0)
        return np.maximum(np.einsum("ij,jk,ik->i", X, self.cov, X), 0.0)

    def predictive(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The mean and the scale of a single run's loss for each row of ``X`` (its first column is
        PLS): the run's loss is ``mean + scale x T``, T Student-t with :attr:`dof` degrees of
        freedom (residual scatter plus the coefficients' uncertainty)."""
        X = np.atleast_2d(np.asarray(X, float))
        m = X @ self.b
        return m, np.sqrt(self._coef_variance(X) + self.residual_variance(X[:, 0]))

    def predictive_quantile(self, X: np.ndarray, q: float) -> np.ndarray:
        """The ``q``-quantile of a single run's loss for each row of ``X`` (:meth:`predictive`)."""
        m, sd = self.predictive(X)
        t = t_ppf(q, self.dof) if self.dof > 0 else math.inf
        with np.errstate(invalid="ignore"):
            return m + t * sd

    def predict(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Mean prediction and its 95% CI (lower, upper) for each row of ``X``."""
        X = np.atleast_2d(np.asarray(X, float))
        m = X @ self.b
        sd = np.sqrt(self._coef_variance(X))
        # without residual degrees of freedom the CI is unbounded, except at PLS 0 (no loss)
        h = t_ppf(0.975, self.dof) * sd if self.dof > 0 else np.where(sd > 0, math.inf, 0.0)
        return m, m - h, m + h

    def to_dict(self) -> dict[str, Any]:
        """Plain floats and ints for calibration.toml's ``coef`` tables (what :meth:`from_dict`
        reads)."""
        out: dict[str, Any] = {
            "b": [float(x) for x in self.b],
            "cov": [[float(x) for x in r] for r in self.cov],
            "dof": int(self.dof),
            "rss": float(self.rss),
            "n": int(self.n),
        }
        if self.resid_var is not None:
            out["resid_var"] = [float(x) for x in self.resid_var]
        if self.own_terms is not None:
            out["own_terms"] = list(self.own_terms)
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str) -> Coef:
        """Read :meth:`to_dict`'s table; a missing or malformed entry raises
        :class:`~cprsim.errors.InputError` naming ``where``."""
        from cprsim.errors import InputError

        try:
            b = np.asarray(d["b"], dtype=float).reshape(-1)
            cov = np.asarray(d["cov"], dtype=float)
            dof, rss, n = int(d["dof"]), float(d["rss"]), int(d["n"])
        except (KeyError, TypeError, ValueError, OverflowError):
            raise InputError(
                f"{where}: expected b (numbers), cov (a square array), dof, rss and n"
            ) from None
        if (
            cov.shape != (b.size, b.size)
            or not np.all(np.isfinite(b))
            or np.any(np.isnan(cov))
            or (dof > 0 and not np.all(np.isfinite(cov)))
        ):
            raise InputError(
                f"{where}: b must be finite numbers and cov a finite {b.size}x{b.size} array "
                f"(infinite only when dof <= 0)"
            )
        if not (math.isfinite(rss) and rss >= 0 and n >= 1):
            raise InputError(f"{where}: rss must be a finite number >= 0 and n >= 1")
        rv = d.get("resid_var")
        resid_var = None
        if rv is not None:
            try:
                v0, v1 = (float(x) for x in rv)
            except (TypeError, ValueError):
                raise InputError(f"{where}.resid_var: expected [v0, v1], two numbers") from None
            if not (
                math.isfinite(v0) and math.isfinite(v1) and v0 >= 0 and v1 >= 0 and v0 + v1 > 0
            ):
                raise InputError(
                    f"{where}.resid_var: expected finite v0, v1 >= 0 (residual variance "
                    f"v0 PLS + v1 PLS^2), got {list(rv)!r}"
                )
            resid_var = (v0, v1)
        ot = d.get("own_terms")
        if ot is not None and not (isinstance(ot, list) and all(isinstance(x, str) for x in ot)):
            raise InputError(f"{where}.own_terms: expected a list of term names, got {ot!r}")
        return cls(b, cov, dof, rss, n, resid_var, None if ot is None else tuple(ot))


def ols(X: np.ndarray, y: np.ndarray, scatter: bool = True, G: np.ndarray | None = None) -> Coef:
    """Least squares of ``y`` on the columns of ``X`` without an intercept: the coefficients, their
    covariance ``s^2 (X'X)^-1`` (infinite with no residual degree of freedom), the RSS and the
    degrees of freedom. ``G``: rows ``g`` of constraints ``g . b >= 0`` (:func:`monotone_rows`: the
    mean loss never falls as PLS grows); where the free fit breaks one, the constrained least
    squares (:func:`_constrained`), with the free fit's ``(X'X)^-1`` (module doc)."""
    X, y = np.asarray(X, float), np.asarray(y, float)
    n, p = X.shape
    b, *_ = np.linalg.lstsq(X, y, rcond=None)
    try:
        xtx_inv = np.linalg.inv(X.T @ X)
    except np.linalg.LinAlgError:  # collinear columns: the least-squares solution's covariance
        xtx_inv = np.linalg.pinv(X.T @ X)
    if G is not None and G.size and _breaks(G, b):
        b = _constrained(X, y, b, xtx_inv, G)
    res = y - X @ b
    rss = float(res @ res)
    dof = n - p
    s2 = rss / dof if dof > 0 else math.inf
    cov = s2 * xtx_inv if math.isfinite(s2) else np.full((p, p), math.inf)
    return Coef(b, cov, dof, rss, n, residual_model(X[:, 0], res, dof) if scatter else None)


def _breaks(G: np.ndarray, b: np.ndarray) -> bool:
    """Whether ``b`` breaks a constraint ``G b >= 0`` beyond rounding."""
    tol = 1e-12 * float(np.max(np.abs(G) @ np.abs(b)) or 1.0)
    return bool(np.any(G @ b < -tol))


def _constrained(
    X: np.ndarray, y: np.ndarray, b: np.ndarray, xtx_inv: np.ndarray, G: np.ndarray
) -> np.ndarray:
    """The least squares of ``y`` on ``X`` subject to ``G b >= 0`` (``b``: the free fit), as
    Lawson and Hanson (1974, ch. 23) solve it: with ``X = QR``, ``z = R (c - b)`` turns it into
    the least distance problem ``min |z|`` subject to ``G R^-1 z >= -G b``, whose solution is one
    non-negative least squares (:func:`scipy.optimize.nnls`). That finds the active set; the
    enumeration of :func:`_constrained_by_enumeration` over its subsets then gives the fit exactly
    as over every row (its active constraints at 0 to rounding), in a few solves instead of
    thousands. Where ``X`` is rank deficient, the enumeration over every row."""
    from scipy.linalg import solve_triangular
    from scipy.optimize import nnls

    p = X.shape[1]
    R = np.linalg.qr(X, mode="r")
    d = np.abs(np.diag(R))
    if d.size < p or np.min(d) <= 1e-10 * np.max(d):
        return _constrained_by_enumeration(X, y, b, xtx_inv, G)
    E = solve_triangular(R, G.T, trans="T").T  # G R^-1
    f = -(G @ b)
    A = np.vstack([E.T, f[None, :]])
    rhs = np.zeros(p + 1)
    rhs[-1] = 1.0
    u, _ = nnls(A, rhs, maxiter=50 * A.shape[1])
    r = A @ u - rhs
    if not r[-1] < -1e-12:  # no feasible z (cannot be: b = 0 is feasible); decide by enumeration
        return _constrained_by_enumeration(X, y, b, xtx_inv, G)
    c = b + solve_triangular(R, -r[:-1] / r[-1])
    # the active set: the constraints ``c`` holds at equality (to rounding); the enumeration over
    # its subsets gives the same fit as over every row, exact on its active constraints
    g = G @ c
    tight = np.flatnonzero(np.abs(g) <= 1e-9 * (np.abs(G) @ np.abs(c) + np.abs(G) @ np.abs(b)))
    return _constrained_by_enumeration(X, y, b, xtx_inv, G, tight.tolist())


def _constrained_by_enumeration(
    X: np.ndarray,
    y: np.ndarray,
    b: np.ndarray,
    xtx_inv: np.ndarray,
    G: np.ndarray,
    rows: list[int] | None = None,
) -> np.ndarray:
    """:func:`_constrained` by enumeration: the optimum of this convex problem is the
    equality-constrained fit on its active set, so it is the feasible one with the smallest RSS
    among the fits with each set of (at most ``p``, linearly independent) constraints held at
    equality: ``b - H G_A' (G_A H G_A')^-1 G_A b``, ``H = (X'X)^-1``. Thousands of small solves
    for a pooled fit's corner rows; ``b = 0`` is always feasible. ``rows``: the constraints that may
    be active (default: all)."""
    from itertools import combinations

    p = X.shape[1]
    best, best_rss = np.zeros(p), float(y @ y)
    rows = list(range(G.shape[0])) if rows is None else rows
    for k in range(1, min(p, len(rows)) + 1):
        for A in combinations(rows, k):
            GA = G[list(A)]
            M = GA @ xtx_inv @ GA.T
            if np.linalg.matrix_rank(M) < k:
                continue
            c = b - xtx_inv @ GA.T @ np.linalg.solve(M, GA @ b)
            if _breaks(G, c):
                continue
            res = y - X @ c
            rss = float(res @ res)
            if rss < best_rss:
                best, best_rss = c, rss
    return best  # its active constraints hold to rounding (0 within ~1e-16, not exactly)


def monotone_rows(d: Data, terms: Sequence[str]) -> np.ndarray:
    """The constraints ``g . b >= 0`` that keep a candidate a model of lost updates over each
    strategy's measured box (module doc, Constrained to be a model of lost updates): the mean loss's derivative in PLS,
    ``b0 + b1 (position - 1/2) + b2 age + 2 b3 PLS``, at every corner of the box (PLS 0 and its
    largest, position and age at their smallest and largest). It is linear in the covariates, so
    non-negative on the box where it is at the corners; with no loss at PLS 0 the mean loss is then
    never negative and never falls as PLS grows."""
    rows = []
    for st in d.strategies:
        m = d.strategy == st
        tops = (0.0, float(np.max(d.pls[m])))
        poss = sorted({float(np.min(d.position[m])), float(np.max(d.position[m]))})
        ages = sorted({float(np.min(d.age[m])), float(np.max(d.age[m]))})
        for x in tops:
            for pos in poss:
                for a in ages:
                    g = [1.0]
                    for t in terms:
                        g.append(pos - 0.5 if t == "position" else a if t == "age" else 2.0 * x)
                    rows.append(tuple(g))
    return np.array(sorted(set(rows)), dtype=float).reshape(-1, 1 + len(terms))


def residual_model(pls: np.ndarray, res: np.ndarray, dof: int) -> tuple[float, float] | None:
    """A single run's scatter around the mean as a function of PLS: the variance ``v0 PLS + v1
    PLS^2``, which vanishes with PLS (no lost update: the very run without failures, the same
    seed, data and batch order) and grows with it; fitted to the squared residuals by
    non-negative least squares, then scaled so that it averages to ``rss / dof`` over the runs
    (unbiased as ``s^2`` is). None without residual degrees of freedom."""
    from scipy.optimize import nnls

    n = res.size
    if dof <= 0 or n < 3:
        return None
    s2 = float(res @ res) / dof
    Z = np.column_stack([pls, pls * pls])
    try:
        g, _ = nnls(Z, res * res)
    except (ValueError, RuntimeError):  # pragma: no cover - degenerate columns
        g = np.zeros(2)
    v0, v1 = float(g[0]), float(g[1])
    mean_v = float(np.mean(v0 * pls + v1 * pls * pls))
    if not mean_v > 0:  # no fit: a scatter proportional to PLS with the runs' variance
        v0, v1 = 0.0, 1.0
        mean_v = float(np.mean(pls * pls))
        if not mean_v > 0:
            return None
    k = s2 / mean_v
    return v0 * k, v1 * k


#: P(a normal residual's square exceeds its variance) = P(chi2_1 > 1)
_ABOVE_VARIANCE = math.erfc(math.sqrt(0.5))


def scatter_check(
    coef: Coef, terms: Sequence[str], d: Data, share: float = 0.25
) -> dict[str, float] | None:
    """How a single run's scatter model (:func:`residual_model`) fits the runs with the smallest
    PLS, where it matters for tight bounds: over the runs of ``d`` with PLS > 0 and PLS at most
    their ``share`` quantile, ``ratio``: the mean squared residual around ``coef``'s mean over the
    mean of the model's variance; ``above``: how many runs' squared residuals exceed their
    variance, of ``n``; ``p``: the chance of at least that many if the model were right (each run
    above with probability P(chi2_1 > 1) = 0.317, a normal residual; in-sample residuals, so a
    slight understatement of the scatter, not an overstatement); ``pls_max``: the quantile. None
    without a scatter model or with fewer than 8 such runs."""
    from cprsim.quantiles import binom_sf

    if coef.resid_var is None:
        return None
    m = d.pls > 0
    if not np.any(m):
        return None
    cut = float(np.quantile(d.pls[m], share))
    small = d.take(m & (d.pls <= cut))
    n = int(small.y.size)
    if n < 8:
        return None
    with np.errstate(over="ignore", invalid="ignore"):  # a huge (legitimate) coefficient
        r2 = (small.y - small.X(terms) @ coef.b) ** 2
        v = coef.residual_variance(small.pls)
        above = int(np.sum(r2 > v))
        mean_v, mean_r2 = float(np.mean(v)), float(np.mean(r2))
        ratio = mean_r2 / mean_v if mean_v > 0 else math.inf
    return {
        "pls_max": cut,
        "n": float(n),
        "ratio": ratio,
        "above": float(above),
        "p": binom_sf(above - 1, n, _ABOVE_VARIANCE),
    }


def scatter_underestimated(chk: Mapping[str, float]) -> bool:
    """Whether a :func:`scatter_check` finds the runs scattering more than the model says, at 5%."""
    return chk["ratio"] > 1.0 and chk["p"] < 0.05


#: the shares q at which :func:`held_out_coverage` checks the per-run promise
COVERAGE_Q = (0.8, 0.9, 0.95, 0.99)
#: :class:`HeldOutResiduals`: at most this many PLS bins, each of at least ``RESIDUALS_PER_BIN``
#: runs
RESIDUAL_BINS = 4
RESIDUALS_PER_BIN = 40


def _held_out_fits(d: Data, name: str) -> Iterator[tuple[Any, np.ndarray, Coef, tuple[str, ...]]]:
    """For each seed (each run, with one seed) and strategy among its runs: ``(group, indices of
    those runs in d, coefficients, terms)`` of candidate ``name`` fitted without that seed; each
    strategy's own terms chosen once on all of ``d`` (as :func:`held_out_errors`). A fold that
    leaves a strategy without runs to fit is skipped."""
    terms = CANDIDATES[name]
    used = {st: own_terms(d.take(d.strategy == st), terms) for st in d.strategies}
    groups = d.seed if np.unique(d.seed).size >= 2 else np.arange(d.y.size)
    for g in np.unique(groups):
        test = groups == g
        train = d.take(~test)
        if any(np.sum(train.strategy == st) < 2 for st in np.unique(d.strategy[test])):
            continue  # a strategy without runs to fit once this fold is out
        f = fit_candidate(train, name, used={st: used[st] for st in train.strategies})
        for st in np.unique(d.strategy[test]):
            yield g, np.flatnonzero(test & (d.strategy == st)), f.coef_for(str(st)), f.terms


def _held_out_predictive(d: Data, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each run's predictive mean, scale and Student-t degrees of freedom (:meth:`Coef.predictive`)
    from candidate ``name`` fitted without the run's seed (:func:`_held_out_fits`), coefficients
    and single-run scatter alike. NaN where a fold leaves a strategy without runs."""
    mu, sd, dof = (np.full(d.y.size, np.nan) for _ in range(3))
    for _, i, c, terms in _held_out_fits(d, name):
        mu[i], sd[i] = c.predictive(design(terms, d.pls[i], d.position[i], d.age[i]))
        dof[i] = c.dof
    return mu, sd, dof


# -- the held-out residuals on disk -----------------------------------------------------------------
# They cost a fit per calibration seed (about 0.5 s for the shipped 48-seed file, in every plan), and
# depend only on the runs, the candidate, the bins and the code: kept in cprsim's cache folder
# (:func:`cprsim.io.cache_dir`; an empty ``CPRSIM_CACHE_DIR`` turns it off), one JSON file per
# answer named by a digest of all of those (this module's and cprsim.quantiles' source, numpy's,
# scipy's and cprsim's versions, the machine), with the exact floats (JSON keeps every bit). An
# unreadable, malformed or unwritable file is ignored (computed again); a file read is touched, and
# past ``_RESIDUALS_KEEP`` files the least recently used go. The held-out check's per-fold answers
# (one per seed, used once) stay in memory only.
_RESIDUALS_KEEP = 256
_RESIDUALS_MEMO: dict[str, HeldOutResiduals | None] = {}


@lru_cache(maxsize=1)
def _code_digest() -> bytes | None:
    """The digest of the code the residuals depend on; None where it cannot be read (no cache)."""
    import scipy

    from cprsim.version import __version__

    h = hashlib.sha256()
    try:
        for f in (__file__, quantiles.__file__):
            h.update(Path(f).read_bytes())
    except OSError:
        return None
    h.update(f"{np.__version__}|{scipy.__version__}|{__version__}|{platform.machine()}".encode())
    return h.digest()


def _residuals_key(d: Data, name: str, bins: int, per_bin: int) -> str:
    """The digest naming the held-out residuals of ``d`` under ``name``, ``bins``, ``per_bin``."""
    h = hashlib.sha256(_code_digest() or b"")
    h.update(f"{name}|{bins}|{per_bin}".encode())
    for a in (d.strategy.astype(str), d.seed, d.pls, d.position, d.age, d.y):
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()[:32]


def _residuals_file(key: str) -> Path | None:
    from cprsim.io import cache_dir

    base = cache_dir()
    if base is None or _code_digest() is None:
        return None
    return base / "held-out" / f"{key}.json"


def _read_residuals(path: Path) -> tuple[bool, HeldOutResiduals | None]:
    """(found, the residuals stored at ``path``: None where they were None); (False, None) for a
    missing, unreadable or malformed file."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        if doc.get("none") is True:
            return True, None
        centers = tuple(float(c) for c in doc["centers"])
        z = tuple(np.array(v, dtype=float) for v in doc["z"])
    except (OSError, ValueError, TypeError, KeyError, AttributeError, RecursionError):
        return False, None
    ok = (
        len(centers) == len(z) >= 1
        and all(v.ndim == 1 and v.size >= 1 and np.all(np.isfinite(v)) for v in z)
        and all(math.isfinite(c) and c > 0 for c in centers)
        and list(centers) == sorted(set(centers))
        and all(np.all(np.diff(v) >= 0) for v in z)
    )
    if not ok:
        return False, None
    for v in z:
        v.setflags(write=False)
    with contextlib.suppress(OSError):
        os.utime(path)  # used: the last to go (_write_residuals' pruning)
    return True, HeldOutResiduals(centers, z)


def _write_residuals(path: Path, res: HeldOutResiduals | None) -> None:
    from cprsim.io import atomic_write_text

    doc: dict[str, Any] = (
        {"none": True}
        if res is None
        else {"centers": list(res.centers), "z": [[float(x) for x in v] for v in res.z]}
    )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(doc))
        old = sorted(
            path.parent.glob("*.json"), key=lambda p: (p.stat().st_mtime_ns, p == path, p.name)
        )
        for p in old[: max(0, len(old) - _RESIDUALS_KEEP)]:
            p.unlink(missing_ok=True)
    except OSError:
        pass


@dataclass(frozen=True)
class HeldOutResiduals:
    """A single run's scatter as the calibration's own runs show it on seeds held out of the fit:
    each run's standardized residual ``z = (loss - mean) / scale`` against a fit without its seed
    (:func:`_held_out_predictive`), kept sorted in PLS bins (quantiles of the runs' PLS: the runs
    with small PLS scatter with a heavier tail than the rest). In a bin of ``n`` residuals the
    ``q``-quantile is the ``k = ceil((n + 1) q)``-th smallest, the largest where ``(n + 1) q > n``
    (the conformal rank; but the residuals come from leave-one-seed-out fits, a jackknife, and the
    runs of one seed are correlated, so there is no finite-sample guarantee: the promise is
    checked on held-out seeds instead, :func:`held_out_coverage`). A run's multiplier of its scale
    is that quantile interpolated between the bins' median PLS (linear in log PLS; the nearest
    bin's beyond the outer ones), so that it moves with PLS without a jump at a bin's edge. It
    replaces the Student-t quantile, whose tail is lighter than the runs'."""

    centers: tuple[float, ...]  #: each bin's median PLS, increasing
    z: tuple[np.ndarray, ...]  #: each bin's held-out standardized residuals, sorted

    @classmethod
    def from_data(
        cls,
        d: Data,
        name: str,
        bins: int = RESIDUAL_BINS,
        per_bin: int = RESIDUALS_PER_BIN,
        persist: bool = True,
    ) -> HeldOutResiduals | None:
        """From the runs ``d`` (PLS > 0) and candidate ``name``: as many PLS bins as hold at
        least ``per_bin`` runs each, up to ``bins``; None with fewer than 3 seeds or ``per_bin``
        runs (the Student-t scatter stays). Kept in memory, and on disk (above) unless not
        ``persist``."""
        key = _residuals_key(d, name, bins, per_bin)
        if key in _RESIDUALS_MEMO:
            return _RESIDUALS_MEMO[key]
        path = _residuals_file(key) if persist else None
        found, res = _read_residuals(path) if path is not None else (False, None)
        if not found:
            res = cls._computed(d, name, bins, per_bin)
            if path is not None:
                _write_residuals(path, res)
        _RESIDUALS_MEMO[key] = res
        return res

    @classmethod
    def _computed(cls, d: Data, name: str, bins: int, per_bin: int) -> HeldOutResiduals | None:
        """:meth:`from_data`, computed."""
        if np.unique(d.seed).size < 3:
            return None
        mu, sd, _ = _held_out_predictive(d, name)
        with np.errstate(divide="ignore", invalid="ignore"):
            z = (d.y - mu) / sd
        ok = (d.pls > 0) & np.isfinite(z)
        k = min(bins, int(np.sum(ok)) // per_bin)
        if k < 1:
            return None
        pls, z = d.pls[ok], z[ok]
        edges = np.quantile(pls, np.arange(1, k) / k)
        b = np.searchsorted(edges, pls, side="right")
        # tied PLS can leave a bin empty or two with one median: those merge
        groups: dict[float, list[np.ndarray]] = {}
        for i in range(k):
            if np.any(b == i):
                groups.setdefault(float(np.median(pls[b == i])), []).append(z[b == i])
        centers = tuple(sorted(groups))
        z = tuple(np.sort(np.concatenate(groups[c])) for c in centers)
        for v in z:
            v.setflags(write=False)  # shared: kept in memory for the process (from_data)
        return cls(centers, z)

    def _weights(self, pls: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For each PLS: the bins either side (``lo``, ``hi``) and the weight of ``hi``."""
        c = np.log(np.asarray(self.centers))
        x = np.log(np.maximum(pls, 1e-300))
        hi = np.clip(np.searchsorted(c, x, side="right"), 0, len(c) - 1)
        lo = np.clip(hi - 1, 0, len(c) - 1)
        span = c[hi] - c[lo]
        with np.errstate(divide="ignore", invalid="ignore"):
            w = np.where(span > 0, np.clip((x - c[lo]) / span, 0.0, 1.0), 0.0)
        return lo, hi, w

    def quantiles(self, u: Any) -> np.ndarray:
        """Each bin's ``ceil((n + 1) u)``-th smallest residual (clipped to the bin) for each ``u``
        (flattened): one row per ``u``, one column per bin."""
        u = np.asarray(u, float).ravel()
        cols = []
        for z in self.z:
            # (n + 1) u within rounding of an integer k is k (k / (n + 1) is the k-th residual's step)
            k = np.ceil((z.size + 1) * u - 1e-9).astype(int)
            cols.append(z[np.minimum(np.maximum(k, 1), z.size) - 1])
        return np.stack(cols, axis=1)

    def ppf(self, u: Any, pls: Any) -> np.ndarray:
        """The multiplier of the scale at probability ``u`` for runs at ``pls`` (broadcast): each
        bin's ``ceil((n + 1) u)``-th smallest residual (clipped to the bin), interpolated."""
        u, pls = np.broadcast_arrays(np.asarray(u, float), np.asarray(pls, float))
        z = self.quantiles(u)
        lo, hi, w = self._weights(pls.ravel())
        r = np.arange(z.shape[0])
        return ((1.0 - w) * z[r, lo] + w * z[r, hi]).reshape(u.shape)

    def ppf_outer(self, z: np.ndarray, pls: np.ndarray) -> np.ndarray:
        """:meth:`ppf` at every pair of the ``u`` whose bin quantiles are the rows of ``z``
        (:meth:`quantiles`) and ``pls`` (columns), bitwise."""
        lo, hi, w = self._weights(np.asarray(pls, float).ravel())
        return (1.0 - w) * z[:, lo] + w * z[:, hi]

    def counts(self) -> list[int]:
        """The runs in each bin."""
        return [int(z.size) for z in self.z]

    def unresolved(self, q: float) -> bool:
        """Whether a bin has too few runs to place the ``q``-quantile: ``(n + 1) q > n``, its
        largest residual stands in."""
        return any((z.size + 1) * q > z.size for z in self.z)


#: the monotone law (:func:`single_run_quantile`): its PLS lattice has this many points per
#: decade, from ``10**-ENVELOPE_DECADES`` up (to 1, or past the largest PLS asked beyond it)
ENVELOPE_PER_DECADE = 32
ENVELOPE_DECADES = 6
#: rows of runs whose envelopes are taken at once (bounds the memory: rows x lattice points)
ENVELOPE_ROWS = 2048


def envelope_grid(top: float, centers: Sequence[float] = ()) -> np.ndarray:
    """The PLS lattice of :func:`single_run_quantile`'s running maximum: ``10**(k /
    ENVELOPE_PER_DECADE)`` from ``10**-ENVELOPE_DECADES`` to 1 (further where ``top`` exceeds
    1), with the bins' medians ``centers`` (where the held-out residuals' quantile peaks);
    increasing. Fixed, so that a run's value does not depend on which other runs it is asked
    with."""
    k_hi = max(0, math.ceil(ENVELOPE_PER_DECADE * math.log10(top))) if top > 0 else 0
    k = np.arange(-ENVELOPE_PER_DECADE * ENVELOPE_DECADES, k_hi + 1)
    g = 10.0 ** (k / ENVELOPE_PER_DECADE)
    return np.unique(np.concatenate([g, np.asarray(list(centers), float)]))


def _at(
    c: Coef, terms: Sequence[str], k: np.ndarray, pls: Any, position: Any, age: Any
) -> np.ndarray:
    """``mean + scale x k`` at these covariates (``inf`` at PLS > 0 without degrees of freedom:
    no estimate of the scatter)."""
    m, sd = c.predictive(design(terms, pls, position, age))
    if c.dof <= 0:
        return np.where(np.asarray(pls) > 0, math.inf, 0.0)
    with np.errstate(invalid="ignore"):
        return np.where(sd > 0, m + sd * k, m)


def _multiplier(c: Coef, residuals: HeldOutResiduals | None, u: Any, pls: Any) -> np.ndarray:
    if residuals is not None:
        return residuals.ppf(u, pls)
    from scipy import special  # stats.t.ppf's own kernel, without importing scipy.stats

    return np.broadcast_to(special.stdtrit(max(c.dof, 1), u), np.shape(pls))


def raw_quantile(
    c: Coef,
    terms: Sequence[str],
    residuals: HeldOutResiduals | None,
    u: np.ndarray,
    pls: np.ndarray,
    position: np.ndarray,
    age: np.ndarray,
) -> np.ndarray:
    """A single run's loss at probability ``u`` under the law as fitted (arrays of one shape):
    ``mean + scale x`` the held-out residuals' ``u``-quantile in the run's PLS bin, else
    Student-t's (``inf`` at PLS > 0 without degrees of freedom). It can fall as PLS grows (bins
    whose quantiles disagree, a negative quantile times a growing scale):
    :func:`single_run_quantile` is the law the planner uses."""
    return _at(c, terms, _multiplier(c, residuals, u, pls), pls, position, age)


def _linear_rows(
    c: Coef, terms: Sequence[str], position: np.ndarray, age: np.ndarray
) -> np.ndarray:
    """The runs whose law as fitted, ``a PLS + k sqrt(v0 PLS + W PLS^2)``, has a linear mean with
    ``a >= 0`` at the run's position and age (no ``pls`` term) and a concave scale (``v0, v1 >=
    0``): on a PLS interval where the multiplier ``k`` is constant it is non-decreasing (``k >=
    0``) or convex (``k < 0``), so its maximum there is at an end."""
    rv = c.resid_var
    if "pls" in terms or rv is None or min(rv) < 0:
        return np.zeros(position.shape, bool)
    return design(terms, np.ones(position.shape), position, age) @ c.b >= 0


def _lattice(
    residuals: HeldOutResiduals | None, pls: np.ndarray, linear: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The lattice (:func:`envelope_grid`) and, per run, the points its running maximum needs:
    those below its PLS; for a run of :func:`_linear_rows`, only those from the first bin's
    median to the last one's, where the multiplier varies (outside them it is constant, so the
    law peaks at an end: PLS 0, a median, or the run's PLS), none for Student-t's."""
    centers = residuals.centers if residuals is not None else ()
    g = envelope_grid(float(pls.max()), centers)
    inside = (g >= min(centers)) & (g <= max(centers)) if centers else np.zeros(g.shape, bool)
    need = (g[None, :] < pls[:, None]) & (inside[None, :] | ~linear[:, None])
    cols = np.flatnonzero(np.any(need, axis=0))
    return g[cols], need[:, cols]


def _rising(
    residuals: HeldOutResiduals | None, z: np.ndarray | None, pls: np.ndarray, linear: np.ndarray
) -> np.ndarray:
    """The runs (``u >= 1/2``) whose law as fitted is provably non-decreasing and non-negative
    over ``(0, pls]``, so that its running maximum is the law itself: :func:`_linear_rows` with a
    multiplier that is non-negative and never falls below the run's PLS (Student-t's at ``u >=
    1/2``; the bins' ``u``-quantiles ``z``, :meth:`HeldOutResiduals.quantiles`, non-negative and
    non-decreasing up to the run's bin)."""
    if residuals is None or z is None:
        return linear
    _, hi, _ = residuals._weights(pls)
    step = np.column_stack([z[:, 0] >= 0, np.diff(z, axis=1) >= 0])
    return linear & np.logical_and.accumulate(step, axis=1)[np.arange(pls.size), hi]


def _constant(a: np.ndarray) -> bool:
    return a.size == 0 or bool(np.all(a == a.flat[0]))


def single_run_quantile(
    c: Coef,
    terms: Sequence[str],
    residuals: HeldOutResiduals | None,
    u: Any,
    pls: Any,
    position: Any,
    age: Any,
    cache: dict[Any, np.ndarray] | None = None,
) -> np.ndarray:
    """A single run's loss at probability ``u`` (broadcast with PLS and the covariates): the
    monotone law. Below the median (``u < 1/2``) the law as fitted (:func:`raw_quantile`: a run
    can beat the run without failures by chance, more so the more it lost); from the median up,
    its running maximum over PLS at the run's own ``u``, position and age: the largest of 0 (PLS
    0 loses nothing), the law at the run's PLS and at the points of :func:`envelope_grid` below
    it that can hold a maximum (:func:`_lattice`; none for a run whose law provably never
    falls, :func:`_rising`); the lattice is fixed, so a run's value does not depend on the other
    runs asked with it (but for rounding in the model's matrix products). So for every ``q >=
    1/2`` a run's ``q``-quantile never falls as PLS grows (to within the law's own fall inside
    one lattice step, 1/32 of a decade: at most 0.06% on linear laws whose bins' quantiles fall
    1.5 to 10 fold over 0.3 to 2 decades, 0.14% on random ones with a curvature term), and a run
    drawn at ``u`` never loses less for losing more updates; it stays a quantile function
    (non-decreasing in ``u``). ``cache``: where one ``u``, position and age serve all the runs
    (a plan's bound), the running maximum over the lattice is kept there under that key."""
    shape = np.broadcast_shapes(*(np.shape(a) for a in (u, pls, position, age))) or (1,)
    u, pls, position, age = (
        np.broadcast_to(np.asarray(a, float), shape).ravel() for a in (u, pls, position, age)
    )
    out = np.array(raw_quantile(c, terms, residuals, u, pls, position, age), float)
    _envelope(c, terms, residuals, u, pls, position, age, cache, out)
    return out.reshape(shape)


def _envelope(
    c: Coef,
    terms: Sequence[str],
    residuals: HeldOutResiduals | None,
    u: np.ndarray,
    pls: np.ndarray,
    position: np.ndarray,
    age: np.ndarray,
    cache: dict[Any, np.ndarray] | None,
    out: np.ndarray,
) -> None:
    """:func:`single_run_quantile`'s running maximum, over the law as fitted ``out`` (1-D, in
    place)."""
    up = np.flatnonzero((u >= 0.5) & (pls > 0) & np.isfinite(out))
    if up.size == 0:
        return
    linear = _linear_rows(c, terms, position[up], age[up])
    if _constant(u[up]) and _constant(position[up]) and _constant(age[up]):
        # one law for all: its running maximum over the lattice, read where each PLS enters it
        i0 = up[0]
        g, need = _lattice(residuals, np.array([max(1.0, pls[up].max())]), linear[:1])
        g = g[need[0]]
        key = (float(u[i0]), float(position[i0]), float(age[i0]), g.size)
        top = None if cache is None else cache.get(key)
        if top is None:
            one = np.ones(g.shape)
            top = np.maximum.accumulate(
                raw_quantile(c, terms, residuals, u[i0] * one, g, position[i0] * one, age[i0] * one)
            )
            if cache is not None:
                cache[key] = top
        n = np.searchsorted(g, pls[up], side="left")  # lattice points below each PLS
        env = top[np.maximum(n - 1, 0)] if g.size else np.zeros(n.shape)
        out[up] = np.maximum(out[up], np.maximum(np.where(n > 0, env, -math.inf), 0.0))
        return
    z = residuals.quantiles(u[up]) if residuals is not None else None
    keep = ~_rising(residuals, z, pls[up], linear)
    up, linear = up[keep], linear[keep]
    z = z[keep] if z is not None else None
    for s in range(0, up.size, ENVELOPE_ROWS):
        i = up[s : s + ENVELOPE_ROWS]
        g, need = _lattice(residuals, pls[i], linear[s : s + ENVELOPE_ROWS])
        shape = need.shape
        if z is not None and residuals is not None:
            k = residuals.ppf_outer(z[s : s + ENVELOPE_ROWS], g)
        else:
            k = np.broadcast_to(_multiplier(c, None, u[i], u[i])[:, None], shape)
        q = _at(
            c,
            terms,
            k.ravel(),
            np.broadcast_to(g, shape).ravel(),
            np.broadcast_to(position[i, None], shape).ravel(),
            np.broadcast_to(age[i, None], shape).ravel(),
        ).reshape(shape)
        env = np.where(need, q, -math.inf).max(axis=1, initial=-math.inf)
        out[i] = np.maximum(out[i], np.maximum(env, 0.0))


@dataclass(frozen=True)
class RunLaws:
    """Single runs' loss distributions, one per run, for their CDFs (a validation's predicted
    share within its bound, the quantiles of their mixture). Either as steps: each run's quantile
    function at every ``u`` of :attr:`u` where it changes (``q``, runs x steps, non-decreasing
    along a row; the held-out residuals' laws, point masses), so that ``P(loss <= x)`` is the
    largest step whose quantile is ``<= x`` (0 below the first); or Student-t's in closed form:
    ``m + sd T`` (``dof`` degrees of freedom; ``sd = 0``: a point at ``m``), from the median up
    no more than the law at the lattice points ``need`` below the run's PLS (means ``gm``,
    scales ``gs``) and never below 0 (:func:`single_run_quantile`)."""

    u: np.ndarray | None = None
    q: np.ndarray | None = None
    m: np.ndarray | None = None
    sd: np.ndarray | None = None
    dof: int = 0
    envelope: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  #: (need, gm, gs)
    positive: np.ndarray | None = None  #: the runs with PLS > 0 (the envelope's; None: sd > 0)

    @classmethod
    def points(cls, v: Any) -> RunLaws:
        """A point mass at each of ``v``."""
        return cls(u=np.ones(1), q=np.asarray(v, float).reshape(-1, 1))

    @classmethod
    def of(
        cls,
        c: Coef,
        terms: Sequence[str],
        residuals: HeldOutResiduals | None,
        pls: Any,
        position: Any,
        age: Any,
    ) -> RunLaws:
        """The monotone law (:func:`single_run_quantile`) of runs at these covariates: with the
        held-out residuals, at every step ``k / (n + 1)`` of every bin and at 1 (the largest
        residual's), exactly; else Student-t's, in closed form."""
        pls = np.atleast_1d(np.asarray(pls, float))
        position, age = (np.broadcast_to(np.asarray(a, float), pls.shape) for a in (position, age))
        if pls.size == 0:
            return cls.points(pls)
        if residuals is not None:
            # the law changes at the bins' steps, at 1/2 (from the law as fitted to its running
            # maximum) and at 1; a step's value is the law's on the interval it closes, so the
            # step at 1/2 takes the law as fitted (P(U < 1/2)), those above it the maximum
            steps = [np.arange(1, z.size + 1) / (z.size + 1) for z in residuals.z]
            u = np.unique(np.concatenate(steps + [np.array([0.5, 1.0])]))
            uu, pp, oo, aa = np.broadcast_arrays(
                u[None, :], pls[:, None], position[:, None], age[:, None]
            )
            mono = single_run_quantile(c, terms, residuals, uu, pp, oo, aa)
            raw = raw_quantile(c, terms, residuals, uu.ravel(), pp.ravel(), oo.ravel(), aa.ravel())
            q = np.where(u[None, :] <= 0.5, raw.reshape(mono.shape), mono)
            return cls(u=u, q=np.maximum.accumulate(q, axis=1))
        m, sd = c.predictive(design(terms, pls, position, age))
        if c.dof <= 0:
            return cls.points(np.where(pls > 0, math.inf, 0.0))
        g, need = _lattice(None, np.maximum(pls, 1e-300), _linear_rows(c, terms, position, age))
        need = need & (pls > 0)[:, None]
        shape = need.shape
        gm, gs = c.predictive(
            design(
                terms,
                np.broadcast_to(g, shape).ravel(),
                np.broadcast_to(position[:, None], shape).ravel(),
                np.broadcast_to(age[:, None], shape).ravel(),
            )
        )
        return cls(
            m=m,
            sd=sd,
            dof=c.dof,
            envelope=(need, gm.reshape(shape), gs.reshape(shape)),
            positive=pls > 0,
        )

    def cdf(self, x: float) -> np.ndarray:
        """``P(a run's loss <= x)``, per run."""
        if self.q is not None and self.u is not None:
            n = np.sum(self.q <= x, axis=1)
            return np.concatenate([[0.0], self.u])[n]
        from scipy import special

        assert self.m is not None and self.sd is not None
        m, sd = self.m, self.sd
        with np.errstate(divide="ignore", invalid="ignore"):
            cx = np.where(sd > 0, special.stdtr(self.dof, (x - m) / sd), (x >= m).astype(float))
        if self.envelope is None:
            return cx
        need, gm, gs = self.envelope
        with np.errstate(divide="ignore", invalid="ignore"):
            zg = np.where(gs > 0, (x - gm) / gs, np.where(gm <= x, math.inf, -math.inf))
        zmin = np.where(need, zg, math.inf).min(axis=1, initial=math.inf)
        ce = np.minimum(cx, special.stdtr(self.dof, zmin)) if x >= 0 else np.full(cx.shape, -1.0)
        up = self.positive if self.positive is not None else sd > 0  # the envelope's runs
        return np.where(up, np.where(ce >= 0.5, ce, np.minimum(cx, 0.5)), cx)

    def bracket(self) -> tuple[float, float]:
        """Losses below and above all of the runs' mass (Student-t's: within ``1e-6`` of it)."""
        if self.q is not None:
            return float(np.min(self.q)), float(np.max(self.q))
        assert self.m is not None and self.sd is not None
        from scipy import special

        t = float(special.stdtrit(max(self.dof, 1), 1 - 1e-6))
        lo = float(np.min(self.m - t * self.sd))
        hi = float(np.max(self.m + t * self.sd))
        if self.envelope is not None and np.any(self.envelope[0]):
            need, gm, gs = self.envelope
            hi = max(hi, float(np.max(np.where(need, gm + t * gs, -math.inf))))
        return min(lo, 0.0), max(hi, 0.0)


def held_out_coverage(
    d: Data,
    name: str,
    qs: Sequence[float] = COVERAGE_Q,
    share: float = 0.25,
    residuals: bool = True,
) -> dict[str, list[dict[str, float]]]:
    """The per-run promise checked on runs its fit never saw: each seed's runs (each run, with one
    seed) predicted by candidate ``name`` fitted without them, coefficients and single-run scatter
    alike; ``residuals``: the quantile from :class:`HeldOutResiduals` of the other seeds' runs
    (each of those from fits without its own seed too: nested, as the planner uses it; the
    candidate and each strategy's own terms were chosen on all of ``d``, a small leak), else the
    Student-t quantile; either under the monotone law as the planner uses it
    (:func:`single_run_quantile`). For each ``q``, how many runs with
    PLS > 0 lost at most their predictive ``q``-quantile. ``"all"``: every such run; ``"small"``:
    each strategy's runs with PLS at most its ``share`` quantile, where tight bounds are decided.
    Each entry: ``q``, ``n``, ``within``, ``share``, ``p``, the one-sided binomial chance of so few
    within were the promise exact (``< 0.05``: the promise is optimistic there, at 5%; runs of one
    seed are correlated, so this treats them as more independent than they are), and ``nested``:
    1 where the held-out residuals were used (``residuals`` and at least 4 seeds), else 0."""
    from cprsim.quantiles import binom_cdf

    qs = [float(q) for q in qs]
    bound = np.full((len(qs), d.y.size), np.nan)
    groups = d.seed if np.unique(d.seed).size >= 2 else np.arange(d.y.size)
    res: dict[Any, HeldOutResiduals | None] = {}
    if residuals and np.unique(d.seed).size >= 4:  # 3 seeds left for each fold's residuals
        res = {
            g: HeldOutResiduals.from_data(d.take(groups != g), name, persist=False)
            for g in np.unique(groups)
        }
    nested = bool(res) and all(r is not None for r in res.values())
    for g, i, c, terms in _held_out_fits(d, name):
        for k, q in enumerate(qs):
            bound[k, i] = single_run_quantile(
                c, terms, res[g] if nested else None, q, d.pls[i], d.position[i], d.age[i]
            )
    pos = d.pls > 0
    small = np.zeros(d.y.size, bool)
    for st in d.strategies:
        ms = pos & (d.strategy == st)
        if np.any(ms):
            small |= ms & (d.pls <= np.quantile(d.pls[ms], share))
    out: dict[str, list[dict[str, float]]] = {}
    for key, mask in (("all", pos), ("small", small)):
        rows = []
        for k, q in enumerate(qs):
            ok = mask & np.isfinite(bound[k])
            n = int(np.sum(ok))
            within = int(np.sum(d.y[ok] <= bound[k, ok]))
            rows.append(
                {
                    "q": q,
                    "n": float(n),
                    "within": float(within),
                    "share": within / n if n else math.nan,
                    "p": binom_cdf(within, n, q) if n else math.nan,
                    "nested": 1.0 if nested else 0.0,
                }
            )
        out[key] = rows
    return out


@dataclass(frozen=True)
class Data:
    """The calibration's runs for one metric: strategy, seed, PLS, position, age, loss."""

    strategy: np.ndarray
    seed: np.ndarray
    pls: np.ndarray
    position: np.ndarray
    age: np.ndarray
    y: np.ndarray

    @classmethod
    def from_points(cls, points: Mapping[str, Mapping[str, Any]], metric: str) -> Data:
        """From calibration.toml's ``[points.<strategy>]`` arrays (position/age 0 when absent: files
        written before the timing covariates, which can only support ``slope``)."""
        st, seed, pls, pos, age, y = [], [], [], [], [], []
        for name, p in points.items():
            x = np.asarray(p["pls"], float)
            st += [name] * x.size
            seed += list(np.asarray(p.get("seed", [0] * x.size), int))
            pls += list(x)
            pos += list(np.asarray(p.get("position", [0.5] * x.size), float))
            age += list(np.asarray(p.get("age", [0.0] * x.size), float))
            y += list(np.asarray(p[f"d_{metric}"], float))
        return cls(
            np.asarray(st),
            np.asarray(seed),
            np.asarray(pls, float),
            np.asarray(pos, float),
            np.asarray(age, float),
            np.asarray(y, float),
        )

    def take(self, mask: np.ndarray) -> Data:
        """The runs selected by the boolean ``mask``."""
        return Data(
            self.strategy[mask],
            self.seed[mask],
            self.pls[mask],
            self.position[mask],
            self.age[mask],
            self.y[mask],
        )

    @property
    def strategies(self) -> list[str]:
        """The strategies of the runs, each once, in order of first appearance."""
        return list(dict.fromkeys(self.strategy.tolist()))

    def X(self, terms: Sequence[str]) -> np.ndarray:
        """The design matrix of a candidate's ``terms`` for these runs (:func:`design`)."""
        return design(terms, self.pls, self.position, self.age)


@dataclass(frozen=True)
class Fitted:
    """One candidate fitted with its pooling: ``coef["*"]`` when pooled, else one per strategy."""

    name: str
    terms: tuple[str, ...]
    pooled: bool
    coef: dict[str, Coef]
    f_p_value: float | None
    #: the pooled fit's weight in each strategy's coefficients (1: pooled, 0: each its own)
    pooling_weight: float

    def coef_for(self, strategy: str) -> Coef:
        """The pooled coefficients, else the strategy's own, else vanilla CPR's (``partial``)."""
        return self.coef.get("*") or self.coef.get(strategy) or self.coef[VANILLA]

    def predict(
        self,
        strategy: str,
        pls: Any,
        position: Any = REFERENCE["position"],
        age: Any = REFERENCE["age"],
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Mean loss and its 95% CI at these PLS (position and age broadcast to them)."""
        pls = np.atleast_1d(np.asarray(pls, float))
        position = np.broadcast_to(np.asarray(position, float), pls.shape)
        age = np.broadcast_to(np.asarray(age, float), pls.shape)
        return self.coef_for(strategy).predict(design(self.terms, pls, position, age))

    def predictive_quantile(
        self,
        strategy: str,
        q: float,
        pls: Any,
        position: Any = REFERENCE["position"],
        age: Any = REFERENCE["age"],
    ) -> np.ndarray:
        """The ``q``-quantile of a single run's loss at these PLS (position and age broadcast),
        Student-t's under the law as fitted (:class:`AccuracyFit`, the planner's, holds it
        monotone in PLS and takes the held-out residuals' quantile where it has them)."""
        pls = np.atleast_1d(np.asarray(pls, float))
        position = np.broadcast_to(np.asarray(position, float), pls.shape)
        age = np.broadcast_to(np.asarray(age, float), pls.shape)
        X = design(self.terms, pls, position, age)
        return self.coef_for(strategy).predictive_quantile(X, q)

    def predictive(
        self, strategy: str, pls: Any, position: Any, age: Any
    ) -> tuple[np.ndarray, np.ndarray, int]:
        """Each run's mean loss, the scale of its single-run scatter and the Student-t degrees of
        freedom (:meth:`Coef.predictive`)."""
        pls = np.atleast_1d(np.asarray(pls, float))
        position = np.broadcast_to(np.asarray(position, float), pls.shape)
        age = np.broadcast_to(np.asarray(age, float), pls.shape)
        c = self.coef_for(strategy)
        m, sd = c.predictive(design(self.terms, pls, position, age))
        return m, sd, c.dof

    def inadmissible(self, ranges: Mapping[str, Mapping[str, Sequence[float]]]) -> str | None:
        """Why this fit is not a model of lost updates (None: it is): its mean loss is negative,
        or falls as PLS grows, somewhere in the measured box of a strategy (PLS in ``(0, max]``,
        position and age over their measured ranges; beyond rounding: a constrained fit sits
        exactly on 0 at a corner where its constraint binds), or is not positive at the largest
        PLS in the middle of the box (a model in which losing updates costs nothing)."""
        for st, r in ranges.items():
            top = float(r["pls"][1])
            if not top > 0:
                continue
            b = self.coef_for(st).b
            grid = np.linspace(0.0, top, 65)[1:]
            for pos in {float(r["position"][0]), float(r["position"][1])}:
                for age in {float(r["age"][0]), float(r["age"][1])}:
                    pa = np.full(grid.shape, pos)
                    X = design(self.terms, grid, pa, np.full(grid.shape, age))
                    m = X @ b
                    where = f"{st} at position {pos:.3g}, age {age:.3g}"
                    tol = 1e-9 * float(np.max(np.abs(X) @ np.abs(b)))  # rounding of the terms
                    if np.any(m < -tol):
                        x = float(grid[np.flatnonzero(m < -tol)[0]])
                        return f"negative mean loss at PLS {x:.3g} ({where})"
                    if np.any(np.diff(m) < -max(tol, 1e-12)):
                        return f"mean loss falls as PLS grows ({where})"
            mid = {
                k: np.array([0.5 * (float(r[k][0]) + float(r[k][1]))]) for k in ("position", "age")
            }
            m_top = float((design(self.terms, np.array([top]), mid["position"], mid["age"]) @ b)[0])
            if not m_top > 0:
                return (
                    f"no loss at the largest measured PLS {top:.3g} ({st} in the middle of its "
                    "measured position and age)"
                )
        return None


def f_test(
    d: Data, terms: Sequence[str], scatter: bool = True
) -> tuple[float | None, Coef, dict[str, Coef], float | None, int, int]:
    """p-value of "one coefficient vector for all strategies", the pooled fit, the separate fits
    (``scatter``: with their single-run residual model, :func:`residual_model`), and the F
    statistic with its degrees of freedom ``q``, ``nu`` (None, 0, 0 when there is no test)."""
    pooled = ols(d.X(terms), d.y, scatter, monotone_rows(d, terms))
    sep = {}
    for st in d.strategies:
        own = d.take(d.strategy == st)
        sep[st] = ols(own.X(terms), own.y, scatter, monotone_rows(own, terms))
    k, p, n = len(sep), 1 + len(terms), d.y.size
    rss_sep = sum(c.rss for c in sep.values())
    if k < 2 or n <= k * p or rss_sep <= 0:
        return None, pooled, sep, None, 0, 0
    q, nu = (k - 1) * p, n - k * p
    F = max(0.0, (pooled.rss - rss_sep) / q) / (rss_sep / nu)
    return f_sf(F, q, nu), pooled, sep, F, q, nu


def pooling_weight(F: float, q: int, nu: int) -> float:
    """The weight ``B`` of the pooled fit (module doc): the positive-part Stein rule ``min(1, c /
    F)``, ``c = (q - 2) / q x nu / (nu + 2)`` for ``q >= 3`` restrictions, ``c = 1`` below."""
    c = (q - 2) / q * nu / (nu + 2) if q >= 3 else 1.0
    if not c < F:  # F <= c, or F NaN: nothing to tell the strategies apart
        return 1.0
    return c / F if math.isfinite(F) else 0.0


def shrunk(own: Coef, pooled: Coef, B: float, X: np.ndarray, y: np.ndarray) -> Coef:
    """A strategy's coefficients as the model average of its own fit and the pooled one with
    weight ``B`` on the pooled (module doc); ``X``, ``y``: the strategy's runs (for its RSS)."""
    if B <= 0.0:
        return own
    if B >= 1.0:  # the pooled fit, with the strategy's own runs' RSS and count
        res = y - X @ pooled.b
        return replace(pooled, rss=float(res @ res), n=own.n, dof=own.dof, own_terms=own.own_terms)
    b = B * pooled.b + (1.0 - B) * own.b
    dlt = own.b - pooled.b
    with np.errstate(invalid="ignore"):  # an infinite own covariance (no dof) stays infinite
        cov = B * pooled.cov + (1.0 - B) * own.cov + B * (1.0 - B) * np.outer(dlt, dlt)
    res = y - X @ b
    rv = None
    if own.resid_var is not None and pooled.resid_var is not None:
        rv = (
            B * pooled.resid_var[0] + (1.0 - B) * own.resid_var[0],
            B * pooled.resid_var[1] + (1.0 - B) * own.resid_var[1],
        )
    elif pooled.resid_var is not None:
        rv = pooled.resid_var
    # the strategy's own residual degrees of freedom (the Student-t of its runs: conservative)
    return Coef(b, cov, own.dof, float(res @ res), own.n, rv, own.own_terms)


def _loso_errors(
    d: Data, terms: Sequence[str], subsets: Sequence[Sequence[str]]
) -> list[np.ndarray]:
    """For each subset of ``terms``, each run's squared error from a least-squares fit of that
    subset without the run's seed (every run its own group when there is only one seed): every
    fold at once, a fold's normal equations being the total's less its seed's, one set of
    per-seed sums for all subsets (NaN where a fold's equations are singular)."""
    groups = d.seed if np.unique(d.seed).size >= 2 else np.arange(d.y.size)
    ids, inv = np.unique(groups, return_inverse=True)
    X = d.X(terms)
    p = X.shape[1]
    one_hot = np.zeros((ids.size, d.y.size))
    one_hot[inv, np.arange(d.y.size)] = 1.0
    G = (one_hot @ (X[:, :, None] * X[:, None, :]).reshape(d.y.size, p * p)).reshape(-1, p, p)
    h = one_hot @ (X * d.y[:, None])
    A = G.sum(axis=0) - G
    r = h.sum(axis=0) - h
    out = []
    for t in subsets:
        idx = [0] + [1 + list(terms).index(x) for x in t]
        At, rt = A[np.ix_(range(ids.size), idx, idx)], r[:, idx]
        try:
            b = np.linalg.solve(At, rt[:, :, None])[:, :, 0]
        except np.linalg.LinAlgError:  # a fold without enough runs: those folds predict nothing
            ok = np.linalg.matrix_rank(At) == len(idx)
            b = np.full((ids.size, len(idx)), np.nan)
            if np.any(ok):
                b[ok] = np.linalg.solve(At[ok], rt[ok][:, :, None])[:, :, 0]
        out.append((d.y - np.einsum("ij,ij->i", X[:, idx], b[inv])) ** 2)
    return out


def paired_se(diff: np.ndarray, seed: np.ndarray) -> float:
    """The standard error of the mean of the per-run paired differences ``diff`` (NaN: left
    out), clustered by ``seed``: a seed's runs share a baseline and move together (the held-out
    errors of one seed are correlated), so the mean's variance is that of the per-seed sums,
    ``G / (G - 1) sum_g (sum_{i in g} (d_i - mean))^2 / N^2``; with fewer than 3 seeds, the runs'
    own ``sd / sqrt(N)``."""
    ok = np.isfinite(diff)
    d, g = diff[ok], seed[ok]
    if d.size < 2:
        return 0.0
    ids, inv = np.unique(g, return_inverse=True)
    if ids.size < 3:
        return float(np.std(d, ddof=1) / math.sqrt(d.size))
    sums = np.bincount(inv, weights=d - d.mean(), minlength=ids.size)
    return float(math.sqrt(ids.size / (ids.size - 1) * np.sum(sums**2)) / d.size)


def own_terms(d: Data, terms: Sequence[str]) -> tuple[str, ...]:
    """The terms of ``terms`` that one strategy's own runs ``d`` support: among the candidates
    nested in ``terms``, the simplest whose held-out squared error (its own seeds left out in
    turn) is within one standard error of the best's, as :func:`select` chooses among candidates.
    A strategy whose covariate barely varies (vanilla CPR restores states a few percent of the run
    old) cannot tell an age term from noise: it keeps the slope alone, not a coefficient that
    swings with every seed."""
    nested = [t for t in CANDIDATES.values() if set(t) <= set(terms)]
    if len(nested) < 2 or np.unique(d.seed).size < 3:
        return tuple(terms)
    errs = dict(zip(nested, _loso_errors(d, terms, nested)))
    cv = {t: float(np.nanmean(e)) for t, e in errs.items() if np.any(np.isfinite(e))}
    if len(cv) < len(nested):
        return tuple(terms)
    best = min(cv, key=lambda t: cv[t])
    ok = []
    for t in nested:
        if cv[t] - cv[best] <= paired_se(errs[t] - errs[best], d.seed):
            ok.append(t)
    return min(ok, key=lambda t: (len(t), cv[t]))


def restricted_ols(d: Data, terms: Sequence[str], used: Sequence[str], scatter: bool) -> Coef:
    """Least squares of the candidate ``terms`` with only PLS and ``used`` free (the others'
    coefficients fixed at 0, their variance 0): :func:`ols` in the candidate's layout."""
    if tuple(used) == tuple(terms):
        return ols(d.X(terms), d.y, scatter, monotone_rows(d, terms))
    c = ols(d.X(used), d.y, scatter, monotone_rows(d, used))
    idx = [0] + [1 + list(terms).index(t) for t in used]
    p = 1 + len(terms)
    b = np.zeros(p)
    b[idx] = c.b
    cov = np.zeros((p, p))
    cov[np.ix_(idx, idx)] = c.cov
    return Coef(b, cov, c.dof, c.rss, c.n, c.resid_var, tuple(used))


def fit_candidate(
    d: Data,
    name: str,
    scatter: bool = True,
    used: Mapping[str, tuple[str, ...]] | None = None,
) -> Fitted:
    """Fit candidate ``name``: each strategy's coefficients shrunk toward the pooled ones by the
    pooling weight (:func:`pooling_weight`; ``coef["*"]`` when it is 1, the strategy's own when
    there is only one strategy); ``scatter``: with the single-run residual model (not needed for
    the means of cross-validation); ``used``: each strategy's own terms (:func:`own_terms` of its
    runs in ``d`` when not given)."""
    terms = CANDIDATES[name]
    p_value, pooled, sep, F, q, nu = f_test(d, terms, scatter)
    if len(sep) == 1:
        return Fitted(name, terms, False, sep, None, 0.0)
    B = pooling_weight(F, q, nu) if F is not None else 1.0
    if used is None:
        used = {st: own_terms(d.take(d.strategy == st), terms) for st in sep}
    if B >= 1.0 and all(u == tuple(terms) for u in used.values()):
        return Fitted(name, terms, True, {"*": pooled}, p_value, 1.0)
    # each strategy shrunk toward the pooled fit of its own terms (the pooled age coefficient is
    # not mixed into a strategy whose runs do not support an age term)
    toward = {
        u: pooled if u == tuple(terms) else restricted_ols(d, terms, u, scatter)
        for u in set(used.values())
    }
    coef = {}
    for st in sep:
        own = d.take(d.strategy == st)
        c = restricted_ols(own, terms, used[st], scatter)
        coef[st] = shrunk(c, toward[used[st]], B, own.X(terms), own.y)
    return Fitted(name, terms, False, coef, p_value, B)


def held_out_errors(d: Data, name: str) -> np.ndarray:
    """Each run's squared error when its seed was left out of the fit (every run its own group
    when there is only one seed). Each strategy's own terms are chosen once on all of ``d`` and
    held fixed across the folds (the cross-validation ranks the candidates; the stability refits,
    :func:`stability`, choose them again without each run and each seed)."""
    terms = CANDIDATES[name]
    used = {st: own_terms(d.take(d.strategy == st), terms) for st in d.strategies}
    groups = d.seed if np.unique(d.seed).size >= 2 else np.arange(d.y.size)
    err = np.full(d.y.size, np.nan)
    for g in np.unique(groups):
        test = groups == g
        train = d.take(~test)
        if train.y.size == 0:
            continue
        f = fit_candidate(
            train, name, scatter=False, used={st: used[st] for st in train.strategies}
        )
        held = d.take(test)
        pred = np.empty(held.y.size)
        for st in np.unique(held.strategy):
            m = held.strategy == st
            pred[m] = held.take(m).X(f.terms) @ f.coef_for(str(st)).b
        err[test] = (held.y - pred) ** 2
    return err


@dataclass(frozen=True)
class Selection:
    """The chosen model for one metric, and why."""

    metric: str
    chosen: Fitted
    cv_mse: dict[str, float]  #: candidate -> mean held-out squared error
    cv_se: dict[str, float]  #: candidate -> SE of its paired difference with the best
    best: str
    n: int
    ranges: dict[str, dict[str, tuple[float, float]]]  #: strategy -> covariate -> (min, max)
    rule: str = "leave-one-seed-out cross-validation, one-standard-error rule"
    candidates: dict[str, Fitted] = field(default_factory=dict)
    #: candidate -> why its fit is not a model of lost updates (not eligible)
    inadmissible: dict[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        """One line naming the chosen model, its pooling and the held-out evidence."""
        f = self.chosen
        return _describe(
            self.metric,
            f.name,
            f.pooling_weight,
            sorted(self.ranges),
            f.f_p_value,
            self.rule,
            self.n,
            self.cv_mse,
            f.coef,
        )

    def to_dict(self) -> dict[str, Any]:
        """calibration.toml's ``[model.<metric>]`` table: the chosen model, its formula and terms,
        its pooling, the held-out errors of every candidate, their pooling F-tests and the
        coefficients."""
        f = self.chosen
        out: dict[str, Any] = {
            "chosen": f.name,
            "formula": FORMULAS[f.name],
            "terms": ["pls", *[f"pls_x_{t}" for t in f.terms]],
            "pooled": f.pooled,
            "pooling_weight": float(f.pooling_weight),
            "selection": self.rule,
            "runs": self.n,
            "cv_best": self.best,
            "cv_mse": {k: float(v) for k, v in self.cv_mse.items()},
            "cv_se_vs_best": {k: float(v) for k, v in self.cv_se.items()},
        }
        out["pooling_f_test_p"] = {
            k: (float(c.f_p_value) if c.f_p_value is not None else float("nan"))
            for k, c in self.candidates.items()
        }
        out["pooling_weights"] = {k: float(c.pooling_weight) for k, c in self.candidates.items()}
        if self.inadmissible:
            out["inadmissible"] = dict(self.inadmissible)
        out["coef"] = {k: c.to_dict() for k, c in f.coef.items()}
        return out


def select(d: Data, metric: str) -> Selection:
    """Fit every candidate supported by the data and choose one (module doc)."""
    varies = {"pls": True, "position": bool(np.ptp(d.position) > 0), "age": bool(np.ptp(d.age) > 0)}
    fitted = {
        nm: fit_candidate(d, nm, scatter=False)
        for nm, terms in CANDIDATES.items()
        if all(varies[t] for t in terms)
    }  # files without position/age: slope and curvature
    ranges = {
        st: {
            "pls": _span(d.pls[d.strategy == st]),
            "position": _span(d.position[d.strategy == st]),
            "age": _span(d.age[d.strategy == st]),
        }
        for st in d.strategies
    }
    # an inadmissible fit (negative or falling loss) is no candidate (the slope model stays, as the
    # fallback: a calibration whose slope is not positive is refused when it is read)
    inadmissible = {nm: why for nm, f in fitted.items() if (why := f.inadmissible(ranges))}
    for nm, f in fitted.items():  # a term no strategy keeps: the same model as a simpler one
        kept = {
            t
            for c in f.coef.values()
            for t in (c.own_terms if c.own_terms is not None else f.terms)
        }
        if nm not in inadmissible and set(f.terms) - kept:
            inadmissible[nm] = (
                f"no strategy's own runs support {', '.join(sorted(set(f.terms) - kept))} "
                "(the same model as a simpler candidate)"
            )
    # a candidate needs residual degrees of freedom (a CI) to be chosen; the slope model is always there
    names = [
        nm
        for nm, f in fitted.items()
        if nm == "slope" or (all(c.dof >= 1 for c in f.coef.values()) and nm not in inadmissible)
    ]
    errs = {nm: held_out_errors(d, nm) for nm in names}
    cv = {
        nm: float(np.nanmean(e)) if np.any(np.isfinite(e)) else math.inf for nm, e in errs.items()
    }
    names = [nm for nm in names if nm == "slope" or math.isfinite(cv[nm])]
    best = min(names, key=lambda nm: cv[nm])
    se: dict[str, float] = {}
    for nm in names:
        se[nm] = paired_se(errs[nm] - errs[best], d.seed)

    def size(nm: str) -> int:  # free coefficients
        f = fitted[nm]
        return sum(
            1 + len(c.own_terms if c.own_terms is not None else f.terms) for c in f.coef.values()
        )

    ok = [nm for nm in names if cv[nm] - cv[best] <= se[nm]]
    chosen = min(ok or ["slope"], key=lambda nm: (size(nm), cv[nm]))
    cv = {nm: cv[nm] for nm in names}
    fitted = {nm: fitted[nm] for nm in names}
    fitted[chosen] = fit_candidate(d, chosen)  # with its single-run scatter
    return Selection(
        metric,
        fitted[chosen],
        cv,
        se,
        best,
        int(d.y.size),
        ranges,
        candidates=fitted,
        inadmissible=inadmissible,
    )


#: the planner's interval grid step (``1 h x 2^(j/4)``): a PLS bound that moves by less than this
#: factor moves the planned interval by at most about one grid step
GRID_STEP = 2.0**0.25
#: the loss bound at which a refit's PLS bound is compared (a unit of the metric; for a slope model
#: with scatter proportional to PLS the ratio does not depend on it)
STABILITY_BOUND = 0.001


def stability(d: Data, metric: str) -> dict[str, Any]:
    """Whether one run, or one seed, could flip the model choice or move the plan: the selection
    refitted with each run left out, and with each seed left out; for each, the share of refits that
    keep the chosen model, the other choices made, the range of the chosen model's pooling weight
    (continuous, :func:`pooling_weight`: not a choice) and the largest ratio between
    a refit's PLS bound (each strategy's, a single run's predictive 90% quantile at the reference
    covariates, for a loss of :data:`STABILITY_BOUND`) and the full fit's. ``stable``: every refit
    keeps the choice and every PLS bound within one grid step (:data:`GRID_STEP`)."""
    full = select(d, metric)
    chosen = full.chosen.name
    strategies = d.strategies

    def bounds(sel: Selection) -> dict[str, float]:
        fit = AccuracyFit.from_selection(sel)
        return {st: fit.max_pls(STABILITY_BOUND, st, q=0.9) for st in strategies}

    ref = bounds(full)
    out: dict[str, Any] = {
        "chosen": full.chosen.name,
        "pooled": full.chosen.pooled,
        "pooling_weight": float(full.chosen.pooling_weight),
    }
    ok = True
    groups = {"leave_one_run_out": np.arange(d.y.size), "leave_one_seed_out": d.seed}
    for key, g in groups.items():
        ids = np.unique(g)
        if ids.size < 2:
            continue
        kept, worst = 0, 1.0
        other: dict[str, int] = {}
        weights: list[float] = []
        for i in ids:
            sub = d.take(g != i)
            if any(np.sum(sub.strategy == st) < 2 for st in strategies):
                continue
            sel = select(sub, metric)
            c = sel.chosen.name
            if c == chosen:
                kept += 1
                weights.append(float(sel.chosen.pooling_weight))
            else:
                other[c] = other.get(c, 0) + 1
            for st, b in bounds(sel).items():
                a = ref[st]
                if math.isfinite(a) and math.isfinite(b) and a > 0 and b > 0:
                    worst = max(worst, a / b, b / a)
                elif a != b:
                    worst = math.inf
        n = int(ids.size)
        out[key] = {
            "kept": kept,
            "refits": n,
            "other_choices": other,
            "pooling_weight_range": [min(weights), max(weights)] if weights else [],
            "max_pls_bound_ratio": float(worst),
        }
        ok = ok and kept == n and worst <= GRID_STEP
    out["stable"] = ok
    return out


def _span(x: np.ndarray) -> tuple[float, float]:
    return (float(np.min(x)), float(np.max(x))) if x.size else (math.nan, math.nan)


def model_table(
    points: Mapping[str, Mapping[str, Any]],
    metrics: Iterable[str] = ("auc", "logloss"),
    check_stability: bool = False,
) -> dict[str, Any]:
    """calibration.toml's ``[model]`` table: per metric the chosen model and its evidence, and the
    measured ranges per strategy; with ``check_stability`` (``cprsim calibrate`` and ``--refit``),
    each metric's :func:`stability` (one refit per run and per seed: seconds)."""
    out: dict[str, Any] = {}
    ranges: dict[str, Any] = {}
    for m in metrics:
        d = Data.from_points(points, m)
        sel = select(d, m)
        out[m] = sel.to_dict()
        if check_stability:
            out[m]["stability"] = stability(d, m)
        ranges = sel.ranges
    out["range"] = {st: {k: list(v) for k, v in r.items()} for st, r in ranges.items()}
    return out


def with_held_out_residuals(fit: AccuracyFit, d: Data) -> AccuracyFit:
    """``fit`` with the single-run scatter its calibration's runs ``d`` show on held-out seeds
    (:class:`HeldOutResiduals`), where there are enough of them; else ``fit`` unchanged."""
    if fit.name not in CANDIDATES:
        return fit
    res = HeldOutResiduals.from_data(d, fit.name)
    return fit if res is None else replace(fit, residuals=res)


def _read_ranges(
    ranges: Mapping[str, Any], where: str
) -> dict[str, dict[str, tuple[float, float]]]:
    """The measured ranges (strategy -> covariate -> ``[min, max]``, finite and ordered) as
    tuples; a malformed one raises :class:`~cprsim.errors.InputError` naming its key beside
    ``where``."""
    from cprsim.errors import InputError

    rng: dict[str, dict[str, tuple[float, float]]] = {}
    for st, r in ranges.items():
        if not isinstance(r, dict):
            raise InputError(
                f"{where.rsplit('.', 1)[0]}.range.{st}: expected a table of [min, max] pairs"
            )
        rng[st] = {}
        for k, v in r.items():
            if not (
                isinstance(v, list)
                and len(v) == 2
                and all(
                    isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
                    for x in v
                )
                and v[0] <= v[1]
            ):
                raise InputError(
                    f"{where.rsplit('.', 1)[0]}.range.{st}.{k}: expected [min, max] finite "
                    f"numbers, got {v!r}"
                )
            rng[st][k] = (float(v[0]), float(v[1]))
    return rng


@dataclass(frozen=True)
class AccuracyFit(Fitted):
    """A chosen model for one metric as the planner uses it (read from ``[model.<metric>]``)."""

    metric: str
    ranges: dict[str, dict[str, tuple[float, float]]]
    description: str
    #: a single run's scatter as held-out runs show it (:class:`HeldOutResiduals`, set from the
    #: calibration's points: :func:`with_held_out_residuals`); None: the Student-t scatter
    residuals: HeldOutResiduals | None = None
    #: strategy -> the monotone law's running maxima kept by :func:`single_run_quantile`
    _envelopes: dict[str, dict[Any, np.ndarray]] = field(
        default_factory=dict, init=False, compare=False, repr=False
    )  # not an init field: a fit made by dataclasses.replace starts with its own

    def predictive_quantile(
        self,
        strategy: str,
        q: float,
        pls: Any,
        position: Any = REFERENCE["position"],
        age: Any = REFERENCE["age"],
    ) -> np.ndarray:
        """The ``q``-quantile of a single run's loss at these PLS (``q >= 1/2``: never falling
        as PLS grows, :func:`single_run_quantile`): the predictive mean plus its scale times the
        held-out residuals' quantile (:attr:`residuals`), else Student-t's."""
        return self.draw(strategy, q, pls, position, age)

    def draw(self, strategy: str, u: Any, pls: Any, position: Any, age: Any) -> np.ndarray:
        """A single run's loss at probability ``u`` (one per run: a draw when ``u`` is uniform)
        at these covariates, under the monotone law (:func:`single_run_quantile`): ``mean +
        scale x`` the held-out residuals' ``u``-quantile in the run's PLS bin (:attr:`residuals`),
        else Student-t's (``inf`` at PLS > 0 without degrees of freedom), held from the median
        up at its running maximum over PLS."""
        c = self.coef_for(strategy)
        # a quantile (one u for all) keeps its running maximum; draws (a u per run) do not
        cache = self._envelopes.setdefault(strategy, {}) if np.ndim(u) == 0 else None
        return single_run_quantile(c, self.terms, self.residuals, u, pls, position, age, cache)

    def run_laws(self, strategy: str, pls: Any, position: Any, age: Any) -> RunLaws:
        """Single runs' loss distributions at these covariates, for their CDFs (:class:`RunLaws`,
        the law :meth:`draw` draws from)."""
        c = self.coef_for(strategy)
        return RunLaws.of(c, self.terms, self.residuals, pls, position, age)

    def quantile_dip(self, strategy: str, q: float) -> tuple[float, float, float] | None:
        """Where a single run's ``q``-quantile under the law as fitted (:func:`raw_quantile`,
        reference position and age) falls as PLS grows over the strategy's measured PLS range (400
        points, log-spaced; from a thousandth of the largest where the smallest measured is 0):
        ``(largest relative fall below the running maximum, PLS of that maximum, PLS of the
        fall)``; None where it never falls by more than 0.1%. The held-out residuals' bins can
        make it fall (a bin whose residuals' quantile is smaller than the last one's); the
        planner's law (:meth:`predictive_quantile`) holds it at that maximum instead."""
        lo, hi = self.ranges.get(strategy, {}).get("pls", (0.0, 0.0))
        lo = lo if lo > 0 else hi / 1000
        if self.residuals is None or not (0 < lo < hi):
            return None
        pls = np.geomspace(lo, hi, 400)
        one = np.ones(pls.shape)
        v = raw_quantile(
            self.coef_for(strategy),
            self.terms,
            self.residuals,
            q * one,
            pls,
            REFERENCE["position"] * one,
            REFERENCE["age"] * one,
        )
        top = np.maximum.accumulate(v)
        with np.errstate(divide="ignore", invalid="ignore"):
            fall = np.where(top > 0, (top - v) / top, 0.0)
        i = int(np.argmax(fall))
        if not fall[i] > 1e-3:
            return None
        return float(fall[i]), float(pls[int(np.argmax(v[: i + 1]))]), float(pls[i])

    def slope_at(
        self,
        strategy: str,
        position: float = REFERENCE["position"],
        age: float = REFERENCE["age"],
        pls: float = REFERENCE["pls"],
    ) -> tuple[float, float, float]:
        """Loss per unit PLS at these covariates and this PLS (the curvature model's depends on
        it): (mean, 95% lo, 95% hi)."""
        m, lo, hi = self.predict(strategy, pls, position, age)
        return float(m[0]) / pls, float(lo[0]) / pls, float(hi[0]) / pls

    def max_pls(
        self,
        bound: float,
        strategy: str,
        position: float = REFERENCE["position"],
        age: float = REFERENCE["age"],
        limit: float = 1.0,
        q: float | None = None,
    ) -> float:
        """The largest PLS in ``[0, limit]`` whose loss stays within ``bound`` at these covariates:
        a single run's predictive ``q``-quantile (``q`` given), else the upper 95% end of the mean;
        scanning up from 0 (``inf`` when even ``limit`` stays within: the model allows any PLS; 0
        when the smallest PLS already exceeds it)."""

        def upper(x: Any) -> np.ndarray:
            if q is None:
                return self.predict(strategy, x, position, age)[2]
            return self.predictive_quantile(strategy, q, x, position, age)

        grid = np.linspace(0.0, limit, 4001)[1:]
        hi = upper(grid)
        bad = np.flatnonzero(hi > bound)
        if bad.size == 0:
            # linear in PLS (the mean's CI, or a scatter proportional to PLS): the exact crossing,
            # possibly beyond limit
            c = self.coef_for(strategy)
            if "pls" not in self.terms and (
                q is None or (c.resid_var is not None and c.resid_var[0] == 0)
            ):  # the scatter proportional to PLS too
                s = float(upper(1.0)[0])
                return math.inf if s <= 0 else bound / s
            return math.inf
        i = int(bad[0])
        if i == 0:
            lo_x, hi_x = 0.0, float(grid[0])
        else:
            lo_x, hi_x = float(grid[i - 1]), float(grid[i])
        for _ in range(60):  # bisect the first crossing
            mid = 0.5 * (lo_x + hi_x)
            if float(upper(mid)[0]) > bound:
                hi_x = mid
            else:
                lo_x = mid
        return lo_x

    @classmethod
    def from_selection(cls, sel: Selection) -> AccuracyFit:
        """The chosen model of a :class:`Selection`, as the planner uses it."""
        f = sel.chosen
        return cls(
            f.name,
            f.terms,
            f.pooled,
            dict(f.coef),
            f.f_p_value,
            f.pooling_weight,
            sel.metric,
            sel.ranges,
            sel.describe(),
        )

    @classmethod
    def from_table(
        cls, table: Mapping[str, Any], metric: str, ranges: Mapping[str, Any], where: str
    ) -> AccuracyFit:
        """Read a ``[model.<metric>]`` table and the measured ``ranges`` (strategy -> covariate ->
        ``[min, max]``); a malformed entry raises :class:`~cprsim.errors.InputError` naming its key
        under ``where``."""
        from cprsim.errors import InputError

        name = table.get("chosen")
        if name not in CANDIDATES:
            raise InputError(
                f"{where}.chosen: expected one of {', '.join(CANDIDATES)}, got {name!r}"
            )
        coefs = table.get("coef")
        if not isinstance(coefs, dict) or not coefs:
            raise InputError(f"{where}.coef: expected a table of fits ('*' or one per strategy)")
        coef = {
            k: Coef.from_dict(v if isinstance(v, dict) else {}, f"{where}.coef.{k}")
            for k, v in coefs.items()
        }
        p = 1 + len(CANDIDATES[name])
        for k, c in coef.items():
            if c.b.size != p:
                raise InputError(
                    f"{where}.coef.{k}.b: model '{name}' has {p} coefficients, got {c.b.size}"
                )
        if "*" not in coef and VANILLA not in coef:
            raise InputError(f"{where}.coef: needs '*' (pooled) or {VANILLA!r}")
        pv = table.get("pooling_f_test_p", {})
        p_value = pv.get(name) if isinstance(pv, dict) else None
        p_value = (
            None if not isinstance(p_value, (int, float)) or math.isnan(p_value) else float(p_value)
        )
        rng = _read_ranges(ranges, where)
        cv = table.get("cv_mse")
        runs = table.get("runs")
        pooled = "*" in coef
        w = table.get("pooling_weight")
        if w is None:  # files written before the pooling weight: pooled or each its own
            w = 1.0 if pooled else 0.0
        if (
            isinstance(w, bool)
            or not isinstance(w, (int, float))
            or not 0.0 <= w <= 1.0
            or (pooled and w != 1.0)
        ):
            raise InputError(
                f"{where}.pooling_weight: expected a number in [0, 1] (1 exactly when the "
                f"coefficients are pooled, coef '*'), got {w!r}"
            )
        desc = _describe(
            metric,
            name,
            float(w),
            sorted(rng),
            p_value,
            str(table.get("selection", "held-out selection")),
            runs if isinstance(runs, int) else None,
            cv if isinstance(cv, dict) else {},
            coef,
        )
        fit = cls(name, CANDIDATES[name], pooled, coef, p_value, float(w), metric, rng, desc)
        box = rng or {
            st: {"pls": (0.0, 1.0), "position": (0.5, 0.5), "age": (0.0, 0.0)}
            for st in (coef if not pooled else {VANILLA: None})
        }
        for st, r in box.items():
            why = fit.inadmissible({st: r})
            if why:
                k = "*" if pooled else st if st in coef else VANILLA
                raise InputError(
                    f"{where}.coef.{k}.b: not a model of lost updates ({why}); expected a loss "
                    "that is positive and grows with PLS over the measured range: recalibrate"
                )
        return fit


def _describe(
    metric: str,
    name: str,
    weight: float,
    strategies: Sequence[str],
    p_value: float | None,
    rule: str,
    runs: int | None,
    cv_mse: Mapping[str, Any],
    coef: Mapping[str, Coef] | None = None,
) -> str:
    """One line naming a chosen model, its pooling and the evidence (plan notes, simulate)."""
    test = f" (F-test p = {p_value:.3g})" if p_value is not None else ""
    if weight >= 1.0:
        pool = f"one set of coefficients pooled over {', '.join(strategies) or 'the strategies'}"
    elif weight <= 0.0:
        pool = "each strategy's own coefficients"
    else:
        pool = (
            f"each strategy's own coefficients shrunk toward the pooled ones (weight {weight:.2f})"
        )
    pool += test
    if coef is not None and weight < 1.0:
        terms = CANDIDATES[name]
        less = sorted(
            st for st, c in coef.items() if c.own_terms is not None and c.own_terms != terms
        )
        if less:
            kept = {", ".join(coef[st].own_terms or ()) or "PLS alone" for st in less}
            pool += (
                f"; {', '.join(less)}: own fit with {' / '.join(sorted(kept))} (their own runs do "
                f"not support {', '.join(terms)})"
            )
    alt = ", ".join(f"{k} {v:.3g}" for k, v in cv_mse.items() if isinstance(v, (int, float)))
    return (
        f"{metric} model '{name}': {FORMULAS[name]}; {pool}; chosen by {rule}"
        + (f" over {runs} runs" if runs is not None else "")
        + (f" (held-out MSE: {alt})" if alt else "")
    )


def measured_points(raw: Any, metric: str) -> dict[str, dict[str, Any]]:
    """The strategies of a calibration document's ``[points]`` with at least two finite
    (PLS, loss) pairs of ``metric``, as they are there."""
    points = raw.get("points") if isinstance(raw, dict) else None
    out: dict[str, dict[str, Any]] = {}
    if isinstance(points, dict):
        for st, p in points.items():
            if isinstance(p, dict) and "pls" in p and f"d_{metric}" in p:
                x = np.asarray(p["pls"], dtype=float)
                y = np.asarray(p[f"d_{metric}"], dtype=float)
                if (
                    x.size == y.size
                    and x.size >= 2
                    and np.all(np.isfinite(x))
                    and np.all(np.isfinite(y))
                ):
                    out[st] = p
    return out
