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
average ``tau/2`` (``tau`` if the failure strikes during a save), so
``E[PLS] ~= lam * (k/N_e) * (W*tau/2 + n_saves*delta*tau) / W``; for per-node failures with mean
``M`` this is ``tau / (2*M)``, DESIGN.md's form. First order in ``lam*tau``: it ignores a shard
failing twice between two saves.
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


def expected_pls(W: float, tau: float, delta: float, lam: float, k: int, n_e: int) -> float:
    """First-order E[PLS] of vanilla partial recovery (see the module docstring)."""
    return lam * (k / n_e) * (W * tau / 2.0 + n_saves(W, tau) * delta * tau) / W


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
