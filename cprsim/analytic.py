"""Closed-form expectations under exponential (Poisson) failures.

Used by the planner and as test oracles. Notation: ``W`` failure-free work (s), ``tau``
checkpoint interval (s of progress), ``delta`` blocking save (s), ``lam`` rate of failure events
that interrupt the job (1/s), ``R`` recovery = rescheduling + restore (s), during which a further
failure restarts the recovery.

**Full recovery, exact** (for Poisson failures and a constant ``R``). The job is a chain of
segments of ``a = tau + delta`` (the last one ``W - k*tau`` with no save). A segment is retried
from its start after every failure, and each failure costs a recovery that itself restarts on
failure, so (the classic derivation, e.g. Daly 2006, eq. 3 with our segment)::

    E[T(a)] = (exp(lam*a) - 1) * exp(lam*R) / lam

**Partial recovery, exact** (same assumptions): the compute never restarts; every failure in the
``W`` seconds of compute costs a restarting recovery ``(exp(lam*R)-1)/lam``, and a save is retried
after a failure::

    E[wall] = W*exp(lam*R) + n_saves * (exp(lam*delta) - 1) * exp(lam*R) / lam

**First order** (the DESIGN.md forms): full ``delta/tau + lam*(tau/2 + R)``, partial
``delta/tau + lam*R``; Young ``sqrt(2*delta/lam)``; Daly's higher-order interval.

**PLS** (portion of lost samples) of vanilla partial recovery, a failure taking ``k`` of ``N_e``
uniformly sharded servers at rate ``lam``: each loses the progress since its last save, on
average ``tau/2`` (``tau`` if the failure strikes during a save), so to first order
``E[PLS] ~= lam * (k/N_e) * tau/2``; for per-node failures with mean ``M`` this is
``tau / (2*M)``, DESIGN.md's form. ``expected_pls`` is exact for a finite job and for a shard
that fails twice between saves (``mean_age``).
"""

from __future__ import annotations

import math

from scipy import optimize


def n_saves(W: float, tau: float) -> int:
    """Checkpoints taken in a failure-free run: at tau, 2 tau, ... strictly before W."""
    return max(0, math.ceil(W / tau - 1e-12) - 1)


def segment_time(a: float, lam: float, R: float) -> float:
    if lam <= 0:
        return a
    return math.expm1(lam * a) * math.exp(lam * R) / lam


def full_wall(W: float, tau: float, delta: float, lam: float, R: float) -> float:
    """Exact E[wall] for full recovery under Poisson failures (constant R)."""
    k = n_saves(W, tau)
    return k * segment_time(tau + delta, lam, R) + segment_time(W - k * tau, lam, R)


def full_overhead(W: float, tau: float, delta: float, lam: float, R: float) -> float:
    return full_wall(W, tau, delta, lam, R) / W - 1.0


def partial_wall(W: float, tau: float, delta: float, lam: float, R: float) -> float:
    """Exact E[wall] for partial recovery under Poisson failures (constant R)."""
    if lam <= 0:
        return W + n_saves(W, tau) * delta
    return W * math.exp(lam * R) + n_saves(W, tau) * segment_time(delta, lam, R)


def partial_overhead(W: float, tau: float, delta: float, lam: float, R: float) -> float:
    return partial_wall(W, tau, delta, lam, R) / W - 1.0


def expected_failures(wall: float, lam: float) -> float:
    """Failure events of a Poisson process up to the (stopping) time wall: Wald's identity."""
    return lam * wall


def full_overhead_first_order(tau: float, delta: float, lam: float, R: float) -> float:
    return delta / tau + lam * (tau / 2.0 + R)


def partial_overhead_first_order(tau: float, delta: float, lam: float, R: float) -> float:
    return delta / tau + lam * R


def young(delta: float, mtbf: float) -> float:
    return math.sqrt(2.0 * delta * mtbf)


def daly(delta: float, mtbf: float) -> float:
    """Daly's (2006) higher-order optimum interval."""
    if delta >= 2.0 * mtbf:
        return mtbf
    x = delta / (2.0 * mtbf)
    return math.sqrt(2.0 * delta * mtbf) * (1.0 + math.sqrt(x) / 3.0 + x / 9.0) - delta


def full_optimum(W: float, delta: float, lam: float, R: float) -> float:
    """The interval minimising the exact E[wall] of full recovery (bounded search)."""
    lo, hi = max(delta * 1e-3, 1.0), W
    res = optimize.minimize_scalar(lambda t: full_wall(W, t, delta, lam, R), bounds=(lo, hi),
                                   method="bounded", options={"xatol": 1.0})
    return float(res.x)


def mean_age(W: float, T: float, mu: float) -> float:
    """Mean over a failure at uniform progress p in [0, W] of min(p mod T, time since the shard's
    previous failure), the shard failing as a Poisson process of rate ``mu`` (per second of progress).

    ``int_0^x (1 - exp(-mu u)) / mu du = x/mu - (1 - exp(-mu x))/mu^2`` per whole save period,
    plus the last, partial one; ``mu -> 0`` gives the plain mean of ``p mod T`` (``T/2`` for
    ``W >> T``).
    """
    def block(x: float) -> float:
        if mu * x < 1e-8:
            return x * x / 2.0
        return x / mu + math.expm1(-mu * x) / (mu * mu)

    T = min(T, W)
    n = math.floor(W / T + 1e-12)
    rem = max(0.0, W - n * T)
    return (n * block(T) + block(rem)) / W


def expected_pls(W: float, tau: float, delta: float, lam: float, k: float, n_e: int) -> float:
    """E[PLS] of vanilla partial recovery, failure events at rate ``lam`` taking ``k`` of ``n_e`` shards.

    Each shard fails at ``mu = lam k / n_e``; a failure loses the shard's progress since its last
    save or its own previous failure (``mean_age``); failures during a save (expected
    ``lam x n_saves x delta``) lose a whole interval. ``PLS = mu x mean age`` (+ the save term).
    Exact for Poisson failures up to the time spent outside compute.
    """
    mu = lam * k / n_e
    return mu * mean_age(W, tau, mu) + lam * (k / n_e) * n_saves(W, tau) * delta * tau / W


def interval_for_pls(bound: float, W: float, delta: float, lam: float, k: int, n_e: int) -> float:
    """The largest interval whose first-order E[PLS] is <= bound (inverse of expected_pls)."""
    if lam <= 0:
        return W
    f = lambda t: expected_pls(W, t, delta, lam, k, n_e) - bound  # noqa: E731
    if f(W) <= 0:
        return W
    lo = 1e-6
    if f(lo) > 0:
        return 0.0
    return float(optimize.brentq(f, lo, W, xtol=1e-6))


# -- prioritized saving (CPR-MFU/SSU) -------------------------------------------------------------
def prioritized_save_s(full_s: float, partial_s: float, K: int) -> float:
    """Mean blocking time of a save when every K-th save is full and the others partial."""
    return (full_s + (K - 1) * partial_s) / K


def expected_pls_prioritized(W: float, tau: float, lam: float, k: float, n_e: int, coverage: float,
                             K: int) -> float:
    """E[PLS] with partial saves every tau and a full save every K*tau.

    The saved rows (access share ``coverage``) lose the progress since the last save, the others
    since the last full save, both cut short by the shard's own previous failure (``mean_age``).
    ``K = 1`` is vanilla partial recovery without the save term.
    """
    mu = lam * k / n_e
    return mu * (coverage * mean_age(W, tau, mu) + (1.0 - coverage) * mean_age(W, K * tau, mu))


def prioritized_overhead(W: float, tau: float, full_s: float, partial_s: float, K: int, lam: float,
                         R: float, counter: float) -> float:
    """E[wall]/W - 1 for partial recovery with prioritized saves and a counting slowdown."""
    return partial_wall(W * (1.0 + counter), tau * (1.0 + counter),
                        prioritized_save_s(full_s, partial_s, K), lam, R) / W - 1.0
