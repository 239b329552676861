"""Closed-form expectations under exponential (Poisson) failures.

Used by the planner and as test oracles. Notation: ``W`` failure-free work (s), ``tau``
checkpoint interval (s of progress), ``delta`` blocking save (s), ``lam`` rate of failure events
that interrupt the job (1/s), ``R`` recovery = rescheduling wait + restore (s). The functions
take them as parameter objects, each parameter documented (with its unit) once, on its object:
:class:`Job` (``W``, ``delta``), :class:`Failures` (``lam``, ``R`` and how a recovery is struck:
``lam_recovery``, ``restore_s``), :class:`ShardFailures` (the PLS forms), :class:`SplitFailures`
(embedding and trainer failures apart) and :class:`PrioritizedSaves`; ``tau``, the interval the
planner varies for one job, is an argument of its own.

**Recovery** (``recovery_time``). ``R`` is a wait of ``w = R - restore_s`` (rescheduling) then a
restore of ``restore_s`` (a load). A failure during the wait restarts the wait; one during the
restore restarts the recovery from its wait. Failures strike the wait at ``lam_recovery`` and the
restore at ``lam``::

    E[rec] = exp(lam*L) * (exp(x*w) - 1)/x + (exp(lam*L) - 1)/lam       x = lam_recovery, L = restore_s

The defaults (``lam_recovery = lam``, ``restore_s = 0``) are the classic "a failure restarts the
recovery at the full rate": ``E[rec] = (exp(lam*R) - 1)/lam``.

*Which one the simulator is.* A node that is being rescheduled cannot fail again, and the job waits
until every failed node is back (``cprsim/sim/engine.py``). With ``N`` identical exponential nodes
of rate ``mu`` and one node down per failure, ``lam = N*mu`` during compute, saves and restores,
and at most ``(N-1)*mu`` during the wait: ``lam_recovery = (N-1)*mu`` (``(N-k)*mu`` for ``k`` nodes
per failure), ``restore_s`` = the load. That is exact while at most one node is down at a time and
an upper bound otherwise (two nodes down fail at ``(N-2)*mu``). The exact mean wait is the busy
period of ``N`` independent up/down nodes (``node_wait``: ``((1 + mu*rho)^N - 1)/(N*mu)`` for any
reschedule distribution of mean ``rho``), and ``lam_recovery_nodes`` turns it into the
``lam_recovery`` that reproduces it, so that the full-recovery form below is then exact for
per-node exponential failures. ``lam_recovery = lam`` overcharges each recovery: noticeably in a
small cluster (4 nodes, node MTBF 1 h, 400 s reschedule: +7% per wait).

**Full recovery, exact** (Poisson failures, restart model above). The job is a chain of segments
of ``a = tau + delta`` (the last one ``W - k*tau`` with no save). A segment is retried from its
start after every failure, and each failure costs a recovery (Daly 2006, eq. 3, with our
segment)::

    E[T(a)] = (exp(lam*a) - 1) * (1/lam + E[rec])          = (exp(lam*a) - 1) * exp(lam*R) / lam  by default

Evaluated in logarithms: where the expectation exceeds the largest float it is ``math.inf``
(never an ``OverflowError``), and ``full_optimum``/``hopeless`` minimise its logarithm, so that any
regime (``lam*W`` of 1e4 and more) has an optimal interval and a finite log of the ratio.

**Partial recovery, exact** (same assumptions): the compute never restarts; every failure in the
``W`` seconds of compute costs a recovery, and a save is retried after a failure::

    E[wall] = W * (1 + lam*E[rec]) + n_saves * (exp(lam*delta) - 1) * (1/lam + E[rec])

By default ``E[wall] = W*exp(lam*R) + n_saves*(exp(lam*delta) - 1)*exp(lam*R)/lam``.
``partial_wall_split`` charges each failure its own restore: an embedding-server failure a shard
load, a trainer failure the dense copy from a peer, and a recovery whose episode holds both the
longer of the two (as the simulator's ``Partial.load_s``); per-node rates ``mu_*`` lower the
rate during the wait as above. Exact for the simulator up to two nodes down at once during a wait
and ``shard_load_s(k)`` for ``k > 1`` (constant when the shard load is measured).

**First order** (the DESIGN.md forms): full ``delta/tau + lam*(tau/2 + R)``, partial
``delta/tau + lam*R``; Young ``sqrt(2*delta/lam)``; Daly's higher-order interval.

**Hopeless regimes.** ``hopeless`` says, before any simulation, whether full recovery at its
optimal interval needs more than ``limit`` times ``W`` (failures come faster than a save plus a
recovery); ``mtbf_for_ratio`` gives the MTBF that brings the best ratio down to a target.

**PLS** (portion of lost samples) of vanilla partial recovery, a failure taking ``k`` of ``N_e``
uniformly sharded servers at rate ``lam``: each loses the progress since its last save, on
average ``tau/2`` (``tau`` if the failure strikes during a save), so to first order
``E[PLS] ~= lam * (k/N_e) * tau/2``; for per-node failures with mean ``M`` this is
``tau / (2*M)``, DESIGN.md's form. ``expected_pls`` with its defaults counts the failures that
strike during compute and saves (the shard's own previous failure cutting the age, ``mean_age``)
and misses those that strike while the job is stalled in another node's recovery: the progress
does not advance then, but the shard still loses its updates since its last save. With
``stall_s`` (the mean recovery a failure of another node causes) it counts them: the shard's
losses are then a Poisson process in progress of rate ``nu = mu + (lam_stall - mu)*q``
(``q = 1 - exp(-mu*stall_s)``, the chance it fails during one such stall), so
``E[PLS] = nu*mean_age(W, tau, nu)`` plus the save points. Exact for Poisson per-node failures,
one node per event, but for one approximation: ``q`` from the stall's mean rather than its
distribution (Jensen: ``q`` is high by at most ``mu^2 E[stall^2]/2``). Measured against the
simulator at 4 servers, node MTBF 5 h, 400 s reschedule: within 0.3% (the defaults: -5%).
``expected_pls_prioritized`` takes the same shard failures (and the two save durations).
"""

from __future__ import annotations

import functools
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

#: log of the largest float: an expectation whose log exceeds it is reported as math.inf
_LOG_MAX = math.log(sys.float_info.max)


# -- parameters ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Job:
    """The job that checkpoints: ``W`` and ``delta`` of the notation above. The checkpoint interval
    ``tau`` (s of progress) is not part of it: the functions take it on its own, as the planner
    varies it for one job."""

    work_s: float  #: ``W``: failure-free work (s of progress)
    save_s: float  #: ``delta``: the blocking time of one save (s)


@dataclass(frozen=True)
class Failures:
    """The failure events that interrupt the job and the recovery each one costs (``lam``, ``R``).

    The defaults of ``wait_rate`` and ``restore_s`` are the classic model, a failure restarting
    the whole recovery at ``rate`` (see ``recovery_time``)."""

    rate: float  #: ``lam``: failure events that interrupt the job (per second)
    recovery_s: float  #: ``R``: rescheduling wait + restore (s)
    #: ``lam_recovery``: failure events during the rescheduling wait (per second); None: ``rate``
    wait_rate: float | None = None
    restore_s: float = 0.0  #: the restore part of ``recovery_s`` (s), in ``[0, recovery_s]``


@dataclass(frozen=True)
class ShardFailures:
    """Failure events that take embedding shards away, for the PLS forms (``expected_pls``)."""

    rate: float  #: ``lam``: failure events that take shards (per second)
    per_event: float  #: ``k``: shards each event takes
    shards: int  #: ``n_e``: shards in all (uniformly sharded servers)
    #: the mean recovery (s) that a failure of another node stalls the job for; 0: not counted
    stall_s: float = 0.0
    #: ``lam_stall``: every failure event that stalls the job, trainers too (per second); None: ``rate``
    stall_rate: float | None = None


@dataclass(frozen=True)
class SplitFailures:
    """Embedding-server and trainer failures that cost different restores (``partial_wall_split``)."""

    embedding_rate: float  #: ``lam_emb``: embedding-server failure events (per second)
    embedding_recovery_s: float  #: ``R_emb``: wait + shard load (s)
    trainer_rate: float  #: ``lam_tr``: trainer failure events (per second)
    trainer_recovery_s: float  #: ``R_tr``: wait + dense copy from a peer (s)
    #: the rescheduling wait both recoveries include (s); 0: the whole recovery is a restore,
    #: restarted by any failure
    wait_s: float = 0.0
    #: ``mu_emb``: one embedding server's failure rate (per second): the node being rescheduled
    #: cannot fail, so the wait after its failure sees ``embedding_rate - mu_emb``
    embedding_node_rate: float = 0.0
    trainer_node_rate: float = 0.0  #: ``mu_tr``: one trainer's failure rate (per second), as above


@dataclass(frozen=True)
class PrioritizedSaves:
    """Prioritized saving (CPR-MFU/SSU): partial saves every ``tau``, a full one every ``K``-th."""

    full_every: int  #: ``K``: every ``K``-th save is full, the others partial
    #: the blocking time of a full save (s); the PLS forms use it only with a stall
    full_s: float = 0.0
    #: the blocking time of a partial save (s); the PLS forms use it only with a stall
    partial_s: float = 0.0


# -- numerics -------------------------------------------------------------------------------------
def _exp(x: float) -> float:
    return math.exp(x) if x < _LOG_MAX else math.inf


def _log(x: float) -> float:
    return math.log(x) if x > 0 else -math.inf


def _logadd(a: float, b: float) -> float:
    """log(exp(a) + exp(b)) without overflow (either may be -inf)."""
    if a < b:
        a, b = b, a
    if b == -math.inf:
        return a
    return a + math.log1p(math.exp(b - a))


def _log_expm1(x: float) -> float:
    """log(exp(x) - 1) for x > 0."""
    if x > 40.0:
        return x + math.log1p(-math.exp(-x))
    return math.log(math.expm1(x))


def _log_expm1_over(x: float, t: float) -> float:
    """log((exp(x*t) - 1)/x) for x >= 0, t >= 0 (log t for x -> 0)."""
    if t <= 0:
        return -math.inf
    if x <= 0 or x * t < 1e-12:
        return math.log(t)
    return _log_expm1(x * t) - math.log(x)


def _check_restore(R: float, restore_s: float) -> float:
    if not 0.0 <= restore_s <= R * (1 + 1e-12):
        raise ValueError(f"restore_s ({restore_s}) must lie in [0, R] (R = {R})")
    return max(0.0, R - restore_s)


# -- recoveries -----------------------------------------------------------------------------------
def _log_recovery_time(R: float, lam: float, lam_recovery: float | None, restore_s: float) -> float:
    """log E[rec] (see ``recovery_time``); -inf for a zero recovery."""
    w = _check_restore(R, restore_s)
    x = lam if lam_recovery is None else lam_recovery
    L = restore_s
    lam = max(lam, 0.0)
    wait = _log_expm1_over(x, w)  # the wait with its restarts
    return _logadd(lam * L + wait, _log_expm1_over(lam, L))


def recovery_time(failures: Failures) -> float:
    """E[time] from a failure until the job runs again: a wait of ``recovery_s - restore_s`` that a
    failure (at ``wait_rate``) restarts, then a restore of ``restore_s`` that a failure (at
    ``rate``) sends back to the wait. ``math.inf`` if astronomically large."""
    f = failures
    return _exp(_log_recovery_time(f.recovery_s, f.rate, f.wait_rate, f.restore_s))


def node_wait(rho: float, mu: float, n: int) -> float:
    """Exact mean wait until ``n`` identical nodes are all up again after one of them failed.

    Each node fails at ``mu`` (exponential) while up and is rescheduled in a time of mean ``rho``
    (any distribution), during which it cannot fail: the busy period of ``n`` independent up/down
    nodes, ``((1 + mu*rho)^n - 1)/(n*mu)`` (renewal reward: all nodes are up a share
    ``(1 + mu*rho)^-n`` of the time, in periods of mean ``1/(n*mu)``).
    """
    if n < 1:
        raise ValueError("n must be >= 1")
    if mu <= 0 or rho <= 0:
        return max(rho, 0.0)
    return _exp(_log_expm1(n * math.log1p(mu * rho)) - math.log(n * mu))


def lam_recovery_nodes(rho: float, mu: float, n: int) -> float:
    """The ``lam_recovery`` whose restarted wait of ``rho`` has ``node_wait(rho, mu, n)`` as its mean.

    Pass it with ``restore_s`` = the load to ``full_wall``/``segment_time``/``recovery_time``:
    their result is then exact for ``n`` identical exponential nodes, one down per failure
    (a little below ``(n-1)*mu``, the rate while only the first failed node is down).
    """
    if mu <= 0 or rho <= 0 or n <= 1:
        return 0.0
    target = math.log(node_wait(rho, mu, n))
    f = lambda x: _log_expm1_over(x, rho) - target
    hi = (n - 1) * mu
    if f(hi) <= 0:  # rounding: the bound itself
        return hi
    return float(_brentq(f, 0.0, hi, xtol=1e-15 * hi + 1e-300, rtol=1e-12))


# -- full recovery --------------------------------------------------------------------------------
def n_saves(W: float, tau: float) -> int:
    """Checkpoints taken in a failure-free run: at tau, 2 tau, ... strictly before W."""
    return max(0, math.ceil(W / tau - 1e-12) - 1)


def _log_segment_time(
    a: float, lam: float, R: float, lam_recovery: float | None = None, restore_s: float = 0.0
) -> float:
    if lam <= 0:
        return _log(a)
    if a <= 0:
        return -math.inf
    # E[T(a)] = expm1(lam a) * (1/lam + E[rec])
    return _log_expm1(lam * a) + _logadd(
        -math.log(lam), _log_recovery_time(R, lam, lam_recovery, restore_s)
    )


def segment_time(a: float, failures: Failures) -> float:
    """E[time] to complete ``a`` seconds that a failure sends back to their start, each failure
    costing a recovery (``recovery_time``); ``math.inf`` if astronomically large."""
    f = failures
    if f.rate <= 0:
        return a
    return _exp(_log_segment_time(a, f.rate, f.recovery_s, f.wait_rate, f.restore_s))


def _log_full_wall(
    W: float,
    tau: float,
    delta: float,
    lam: float,
    R: float,
    lam_recovery: float | None = None,
    restore_s: float = 0.0,
) -> float:
    k = n_saves(W, tau)
    last = _log_segment_time(W - k * tau, lam, R, lam_recovery, restore_s)
    if k == 0:
        return last
    return _logadd(
        math.log(k) + _log_segment_time(tau + delta, lam, R, lam_recovery, restore_s), last
    )


def full_wall(job: Job, tau: float, failures: Failures) -> float:
    """Exact E[wall] for full recovery under Poisson failures at interval ``tau`` (s of progress;
    ``math.inf`` if astronomically large)."""
    W, delta, f = job.work_s, job.save_s, failures
    if f.rate <= 0:
        k = n_saves(W, tau)
        return k * (tau + delta) + (W - k * tau)
    return _exp(_log_full_wall(W, tau, delta, f.rate, f.recovery_s, f.wait_rate, f.restore_s))


def full_overhead(job: Job, tau: float, failures: Failures) -> float:
    """Exact E[wall]/W - 1 of full recovery under Poisson failures (:func:`full_wall` over ``W``;
    ``math.inf`` if astronomically large)."""
    return full_wall(job, tau, failures) / job.work_s - 1.0


def full_optimum(job: Job, failures: Failures) -> float:
    """The interval minimising the exact E[wall] of full recovery.

    With ``m`` saves (``W/(m+1) <= tau < W/m``) the last segment ``W - m tau`` is never longer
    than the others and E[wall] grows with ``tau``, so the optimum is ``W/j`` for an integer ``j``
    (equal segments). The search runs over ``j`` on ``log E[wall]`` (finite even where E[wall] is
    not a float): a geometric grid of ``j`` in ``[1, W / max(delta/1000, 1 s)]``, then a
    ternary search between the grid neighbours of the best point.
    """
    return _full_optimum_log(job, failures)[0]


def _tau_for_segments(W: float, j: int) -> float:
    """W/j, nudged up if rounding would make it take j saves instead of j - 1."""
    tau = W / j
    while n_saves(W, tau) > j - 1:
        tau = math.nextafter(tau, math.inf)
    return tau


def _full_optimum_log(job: Job, failures: Failures) -> tuple[float, float]:
    """(tau, log E[wall]) at the optimum."""
    W, delta = job.work_s, job.save_s
    lam, R, lam_recovery, restore_s = (
        failures.rate,
        failures.recovery_s,
        failures.wait_rate,
        failures.restore_s,
    )
    if lam <= 0:
        return W, math.log(W)
    J = max(1, math.floor(W / max(delta * 1e-3, 1.0)))
    memo: dict[int, float] = {}

    def f(j: int) -> float:
        if j not in memo:
            memo[j] = _log_full_wall(
                W, _tau_for_segments(W, j), delta, lam, R, lam_recovery, restore_s
            )
        return memo[j]

    grid = sorted({int(round(x)) for x in np.geomspace(1, J, 200)} | {1, J})
    i = min(range(len(grid)), key=lambda n: f(grid[n]))
    a, b = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
    while b - a > 4:  # ternary search (E[wall] is unimodal in j)
        m1, m2 = a + (b - a) // 3, b - (b - a) // 3
        if f(m1) <= f(m2):
            b = m2
        else:
            a = m1
    j = min(range(a, b + 1), key=f)
    return _tau_for_segments(W, j), f(j)


# -- hopeless regimes -----------------------------------------------------------------------------
class Feasibility(NamedTuple):
    """What full recovery at its optimal interval costs: ``hopeless`` if ``ratio > limit``."""

    hopeless: bool
    ratio: float  #: best E[wall] / W (math.inf if beyond the largest float)
    tau: float  #: the interval that achieves it (s)
    log10_ratio: float  #: always finite: for messages about astronomically long jobs


@functools.lru_cache(maxsize=4096)  # a sweep's points share it (issue 27: checked before running)
def hopeless(job: Job, failures: Failures, limit: float = 10.0) -> Feasibility:
    """Whether full recovery (exact Poisson form, at its optimal interval) would take more than
    ``limit`` times its work ``W``: failures come faster than a save plus a recovery.

    Never overflows. The default limit, 10, already flags a cluster failing every 2 min with
    85 s saves and 345 s recoveries (about 78x): a job that needs 10x its work does not finish in
    any useful sense, and simulating it costs about ``lam * ratio * W`` failure events per run.
    """
    if job.work_s <= 0:
        raise ValueError("W must be > 0")
    tau, lw = _full_optimum_log(job, failures)
    log_ratio = lw - math.log(job.work_s)
    return Feasibility(
        log_ratio > math.log(limit), _exp(log_ratio), tau, log_ratio / math.log(10.0)
    )


def mtbf_for_ratio(
    job: Job,
    recovery_s: float,
    ratio: float = 2.0,
    recovery_share: float = 1.0,
    restore_s: float = 0.0,
) -> float:
    """The MTBF (s, of the failure events that interrupt the job) at which full recovery at its
    optimal interval needs ``ratio`` times ``W`` (solved numerically; any longer MTBF needs less).

    ``recovery_s``, ``restore_s``: as in :class:`Failures`; ``recovery_share``: its
    ``wait_rate / rate`` (``(N-1)/N`` for ``N`` identical nodes).
    """
    W, delta, R = job.work_s, job.save_s, recovery_s
    if not ratio > 1.0:
        raise ValueError("ratio must be > 1")
    if not math.isfinite(W + delta + R + restore_s):  # an infinite mean recovery, say
        raise ValueError("no finite MTBF reaches this ratio (a save or recovery takes forever)")
    target = math.log(ratio)

    def g(log_m: float) -> float:
        lam = math.exp(-log_m)
        return (
            _full_optimum_log(
                job,
                Failures(
                    rate=lam, recovery_s=R, wait_rate=recovery_share * lam, restore_s=restore_s
                ),
            )[1]
            - math.log(W)
            - target
        )

    lo = hi = math.log(max(W, delta + R, 1.0))
    while g(hi) >= 0:
        hi += math.log(10.0)
        if hi > 700:
            raise ValueError(
                "no finite MTBF reaches this ratio (is ratio above 1 + the saves' share?)"
            )
    while g(lo) <= 0:
        lo -= math.log(10.0)
    return math.exp(_brentq(g, lo, hi, xtol=1e-10, rtol=1e-10))


# -- partial recovery -----------------------------------------------------------------------------
def partial_wall(job: Job, tau: float, failures: Failures) -> float:
    """Exact E[wall] for partial recovery under Poisson failures at interval ``tau`` (s of
    progress), every failure costing the same recovery (``recovery_time``; ``math.inf`` if
    astronomically large)."""
    W, delta, lam = job.work_s, job.save_s, failures.rate
    n = n_saves(W, tau)
    if lam <= 0:
        return W + n * delta
    rec = recovery_time(failures)
    wall = W * (1.0 + lam * rec)
    if n:
        wall += n * segment_time(delta, failures)
    return wall


def partial_overhead(job: Job, tau: float, failures: Failures) -> float:
    """Exact E[wall]/W - 1 of partial recovery under Poisson failures (:func:`partial_wall` over
    ``W``; ``math.inf`` if astronomically large)."""
    return partial_wall(job, tau, failures) / job.work_s - 1.0


def split_recovery_times(
    lams: Sequence[float],
    restores: Sequence[float],
    wait_s: float,
    mus: Sequence[float] | None = None,
) -> list[float]:
    """E[recovery] after a failure of each type, failures of type ``i`` coming at ``lams[i]``.

    A recovery waits ``wait_s`` (restarted by any failure; during it a failure of type ``i`` comes
    at ``lams[i]``, less ``mus[i]`` if the last failed node is of that type: it cannot fail while
    being rescheduled), then restores for the longest ``restores[i]`` among the types that failed
    since the recovery began (a failure during it goes back to the wait). A small linear system
    over (types in the episode, type of the last failure); ``math.inf`` if it has no finite
    solution.
    """
    n = len(lams)
    mus = [0.0] * n if mus is None else list(mus)
    if not (len(restores) == len(mus) == n) or n == 0:
        raise ValueError("lams, restores and mus must have the same, non-zero length")
    lam = sum(lams)
    states = [(m, y) for m in range(1, 1 << n) for y in range(n) if m >> y & 1]
    index = {s: i for i, s in enumerate(states)}
    A = np.eye(len(states))
    c = np.zeros(len(states))
    for (m, y), i in index.items():
        rates = [max(0.0, lams[z] - (mus[z] if z == y else 0.0)) for z in range(n)]
        a = sum(rates)
        p_wait = math.exp(-a * wait_s)  # the wait completes
        c[i] += wait_s if a * wait_s < 1e-12 else -math.expm1(-a * wait_s) / a
        for z in range(n):
            if a > 0:
                A[i, index[(m | 1 << z, z)]] -= (1.0 - p_wait) * rates[z] / a
        L = max(restores[z] for z in range(n) if m >> z & 1)
        p_load = math.exp(-lam * L)
        c[i] += p_wait * (L if lam * L < 1e-12 else -math.expm1(-lam * L) / lam)
        for z in range(n):
            if lam > 0:
                A[i, index[(m | 1 << z, z)]] -= p_wait * (1.0 - p_load) * lams[z] / lam
    try:
        v = np.linalg.solve(A, c)
    except np.linalg.LinAlgError:
        return [math.inf] * n
    out = [float(v[index[(1 << y, y)]]) for y in range(n)]
    return [x if math.isfinite(x) and x >= 0 else math.inf for x in out]


def partial_wall_split(job: Job, tau: float, failures: SplitFailures) -> float:
    """E[wall] of partial recovery when embedding-server and trainer failures cost different restores.

    ``trainer_rate = 0`` is :func:`partial_wall` with ``Failures(rate=embedding_rate,
    recovery_s=embedding_recovery_s, wait_rate=embedding_rate - embedding_node_rate,
    restore_s=embedding_recovery_s - wait_s)``.
    """
    W, delta, f = job.work_s, job.save_s, failures
    lam_emb, R_emb, lam_tr, R_tr = (
        f.embedding_rate,
        f.embedding_recovery_s,
        f.trainer_rate,
        f.trainer_recovery_s,
    )
    wait_s, mu_emb, mu_tr = f.wait_s, f.embedding_node_rate, f.trainer_node_rate
    lam = lam_emb + lam_tr
    n = n_saves(W, tau)
    if lam <= 0:
        return W + n * delta
    restores = []
    for rate, R in ((lam_emb, R_emb), (lam_tr, R_tr)):
        if rate > 0 and wait_s * (1 - 1e-12) > R:
            raise ValueError(f"a recovery ({R} s) shorter than its wait ({wait_s} s)")
        restores.append(max(0.0, R - wait_s) if rate > 0 else 0.0)
    rec = split_recovery_times([lam_emb, lam_tr], restores, wait_s, [mu_emb, mu_tr])
    per_event = (lam_emb * rec[0] if lam_emb > 0 else 0.0) + (
        lam_tr * rec[1] if lam_tr > 0 else 0.0
    )
    wall = W * (1.0 + per_event)
    if n:
        wall += n * math.expm1(lam * delta) * (1.0 / lam + per_event / lam)
    return wall


def expected_failures(wall: float, lam: float) -> float:
    """Failure events of a Poisson process up to the (stopping) time wall: Wald's identity."""
    return lam * wall


def full_overhead_first_order(tau: float, delta: float, lam: float, R: float) -> float:
    """First-order E[wall]/W - 1 of full recovery: ``delta/tau + lam*(tau/2 + R)``."""
    return delta / tau + lam * (tau / 2.0 + R)


def partial_overhead_first_order(tau: float, delta: float, lam: float, R: float) -> float:
    """First-order E[wall]/W - 1 of partial recovery (no re-execution): ``delta/tau + lam*R``."""
    return delta / tau + lam * R


def young(delta: float, mtbf: float) -> float:
    """Young's optimum interval (s): ``sqrt(2*delta*mtbf)``, ``delta`` the save and ``mtbf`` the
    mean time between failure events (s)."""
    return math.sqrt(2.0 * delta * mtbf)


def daly(delta: float, mtbf: float) -> float:
    """Daly's (2006) higher-order optimum interval."""
    if delta >= 2.0 * mtbf:
        return mtbf
    x = delta / (2.0 * mtbf)
    return math.sqrt(2.0 * delta * mtbf) * (1.0 + math.sqrt(x) / 3.0 + x / 9.0) - delta


# -- PLS ------------------------------------------------------------------------------------------
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


def _stall_rate(mu: float, lam_others: float, stall_s: float) -> float:
    """nu: the shard's loss events per second of progress, counting those during others' stalls."""
    return mu + lam_others * -math.expm1(-mu * stall_s)


def expected_pls(job: Job, tau: float, shards: ShardFailures) -> float:
    """E[PLS] of vanilla partial recovery at interval ``tau`` (s of progress), failure events at
    rate ``lam`` taking ``k`` of ``n_e`` shards (:class:`ShardFailures`).

    Each shard fails at ``mu = lam k / n_e``; a failure loses the shard's progress since its last
    save or its own previous failure (``mean_age``).

    Defaults (``stall_s = 0``): failures during compute, ``PLS = mu x mean age``, plus those during
    a save (expected ``lam x n_saves x delta``), which lose a whole interval. This misses the
    failures that strike while the job is stalled in another node's recovery (about
    ``lam x stall time`` more: +5% at 4 servers, node MTBF 5 h, 400 s recoveries).

    ``stall_s``: the mean recovery (``recovery_time``: wait + restore, with restarts) that a failure
    event not involving this shard causes; ``lam_stall`` (``stall_rate``): the rate of every
    failure event that stalls the job (trainers too; default ``lam``). Then the shard loses its age at rate
    ``nu = mu + (lam_stall - mu)(1 - exp(-mu stall_s))`` per second of progress, cut short by its
    previous loss (``mean_age(W, tau, nu)``), and at each save point with the chance that it fails
    during the save and the recoveries it suffers, losing ``(1 - exp(-nu tau))/nu``. Exact for Poisson
    per-node failures, one node per event, up to Jensen's term in the chance of failing during a
    stall (``stall_s`` should then exclude this shard's own failures: rates less ``mu``). E.g.
    ``n_e`` identical servers failing at ``mu``, reschedule ``rho``, shard load ``L``, no trainer
    failures: ``stall_s = recovery_time(Failures(rate=(n_e-1) mu, recovery_s=rho + L,
    wait_rate=lam_recovery_nodes(rho, mu, n_e-1), restore_s=L))`` with ``lam = n_e mu, k = 1``;
    ``recovery_time(Failures(rate=lam, recovery_s=rho + L))`` is the first-order stand-in.
    Events of ``k > 1`` servers: first order.
    """
    W, delta = job.work_s, job.save_s
    lam, k, n_e = shards.rate, shards.per_event, shards.shards
    stall_s, lam_stall = shards.stall_s, shards.stall_rate
    mu = lam * k / n_e
    n = n_saves(W, tau)
    if stall_s <= 0 and lam_stall is None:
        return mu * mean_age(W, tau, mu) + lam * (k / n_e) * n * delta * tau / W
    if mu <= 0:
        return 0.0
    others = max(0.0, (lam if lam_stall is None else lam_stall) - mu)
    nu = _stall_rate(mu, others, stall_s)
    pls = nu * mean_age(W, tau, nu)
    if n:
        t_save = delta if others <= 0 else math.expm1(others * delta) * (1.0 / others + stall_s)
        age = -math.expm1(-nu * tau) / nu
        pls += n * -math.expm1(-mu * t_save) * age / W
    return pls


def interval_for_pls(bound: float, job: Job, shards: ShardFailures) -> float:
    """The largest interval whose E[PLS] (``expected_pls``) is <= bound (its inverse)."""
    W = job.work_s
    if shards.rate <= 0:
        return W
    f = lambda t: expected_pls(job, t, shards) - bound
    if f(W) <= 0:
        return W
    lo = 1e-6
    if f(lo) > 0:
        return 0.0
    return float(_brentq(f, lo, W, xtol=1e-6))


# -- prioritized saving (CPR-MFU/SSU) -------------------------------------------------------------
def prioritized_save_s(full_s: float, partial_s: float, K: int) -> float:
    """Mean blocking time of a save when every K-th save is full and the others partial."""
    return (full_s + (K - 1) * partial_s) / K


def expected_pls_prioritized(
    work_s: float,
    tau: float,
    shards: ShardFailures,
    coverage: float,
    saves: PrioritizedSaves,
) -> float:
    """E[PLS] of ``work_s`` (``W``) with partial saves every tau and a full save every K*tau.

    The saved rows (access share ``coverage``) lose the progress since the last save, the others
    since the last full save, both cut short by the shard's own previous failure (``mean_age``).
    ``K = 1`` is vanilla partial recovery without the save term.

    With a stall (``shards.stall_s``/``stall_rate``, see ``expected_pls``) the failures during
    other nodes' recoveries count too, and so do those at the save points (a partial save blocks
    ``saves.partial_s``, a full one ``saves.full_s``): same assumptions and accuracy as
    ``expected_pls``.
    """
    W, K = work_s, saves.full_every
    lam, k, n_e = shards.rate, shards.per_event, shards.shards
    stall_s, lam_stall = shards.stall_s, shards.stall_rate
    save_full_s, save_partial_s = saves.full_s, saves.partial_s
    mu = lam * k / n_e
    if stall_s <= 0 and lam_stall is None:
        return mu * (coverage * mean_age(W, tau, mu) + (1.0 - coverage) * mean_age(W, K * tau, mu))
    if mu <= 0:
        return 0.0
    others = max(0.0, (lam if lam_stall is None else lam_stall) - mu)
    nu = _stall_rate(mu, others, stall_s)
    pls = nu * (coverage * mean_age(W, tau, nu) + (1.0 - coverage) * mean_age(W, K * tau, nu))
    n = n_saves(W, tau)
    if n == 0:
        return pls

    def fails_during(d: float) -> float:  # the chance the shard fails at a save point
        t = d if others <= 0 else math.expm1(others * d) * (1.0 / others + stall_s)
        return -math.expm1(-mu * t)

    age = lambda x: -math.expm1(-nu * x) / nu
    q_part, q_full = fails_during(save_partial_s), fails_during(save_full_s)
    for r in range(min(K, n)):  # save m = r + 1 (mod K): r + 1 intervals since the last full save
        count = n // K + (1 if r < n % K else 0)
        q = q_full if r == K - 1 else q_part
        pls += count * q * (coverage * age(tau) + (1.0 - coverage) * age((r + 1) * tau)) / W
    return pls


def prioritized_overhead(
    work_s: float, tau: float, saves: PrioritizedSaves, failures: Failures, counter: float
) -> float:
    """E[wall]/W - 1 of ``work_s`` (``W``) for partial recovery with prioritized saves and a
    counting slowdown (``counter``: the share of extra compute counting costs)."""
    W = work_s
    slowed = Job(
        work_s=W * (1.0 + counter),
        save_s=prioritized_save_s(saves.full_s, saves.partial_s, saves.full_every),
    )
    return partial_wall(slowed, tau * (1.0 + counter), failures) / W - 1.0


def _brentq(*args, **kwargs) -> float:
    """scipy.optimize.brentq, imported when first needed (not at every command's start)."""
    from scipy import optimize

    return optimize.brentq(*args, **kwargs)


# -- the node lifecycle -----------------------------------------------------------------------------
def machine_repair_availability(
    n: int, spares: int, lam: float, mu: float, crews: int | None = None
) -> float:
    """Long-run share of time every one of ``n`` slots has a machine (the machine-repair model with
    spares, M/M/c//(n+s)): ``n`` machines in service each fail at ``lam`` (exponential), ``spares``
    idle machines do not fail and replace a failed one at once, a failed machine is repaired in an
    exponential time of rate ``mu`` by one of ``crews`` crews (None: as many as needed).

    With ``k`` machines failed, failures come at ``min(n, n + s - k) lam`` and repairs at
    ``min(k, c) mu``; the birth-death chain's stationary law ``pi_k`` gives ``sum_{k <= s} pi_k``.
    """
    return _machine_repair(n, spares, lam, mu, crews, idle_fail=False)


def _machine_repair(
    n: int, spares: int, lam: float, mu: float, crews: int | None, idle_fail: bool
) -> float:
    """The birth-death chain of :func:`machine_repair_availability` (``idle_fail``: the spares
    fail too, :func:`machine_repair_availability_powered`): ``sum_{k <= s} pi_k``."""
    if n < 1 or spares < 0 or lam <= 0 or mu <= 0:
        raise ValueError("need n >= 1, spares >= 0, lam > 0 and mu > 0")
    total = n + spares
    c = total if crews is None else crews
    logp = [0.0]
    for k in range(1, total + 1):
        up = total - (k - 1)  # machines not in repair
        birth = (up if idle_fail else min(n, up)) * lam
        death = min(k, c) * mu
        logp.append(logp[-1] + math.log(birth) - math.log(death))
    top = max(logp)
    w = [math.exp(x - top) for x in logp]
    return sum(w[: spares + 1]) / sum(w)


def machine_repair_availability_powered(
    n: int, spares: int, lam: float, mu: float, crews: int | None = None
) -> float:
    """:func:`machine_repair_availability` with *hot* spares (``failures.clock = "powered"``): an
    idle spare fails at ``lam`` as a machine in service does. With ``k`` machines failed, failures
    come at ``(n + s - k) lam`` (every machine not in repair) and repairs at ``min(k, c) mu``; the
    share of time every slot has a machine is ``sum_{k <= s} pi_k``."""
    return _machine_repair(n, spares, lam, mu, crews, idle_fail=True)


def full_wall_computing(job: Job, tau: float, failures: Failures) -> float:
    """Exact E[wall] for full recovery when the failure clock runs only while the job computes
    (``failures.clock = "computing"``): Poisson failures at ``lam`` per second of computing, none
    during a save (``delta``) or a recovery (``R``: the wait and the restore). A segment of ``a``
    seconds of compute is retried until it runs through: ``expm1(lam a)`` failures on average
    (geometric), each costing ``R`` plus the compute it lost, ``E[X | X < a]`` for ``X ~
    Exp(lam)``; in all ``E[T(a)] = expm1(lam a) (1/lam + R)``. The job is ``k`` segments of
    ``tau`` each followed by a save, then ``W - k tau`` (:func:`n_saves`). Against
    :func:`full_wall` (the clock in wall time: failures strike saves and recoveries too) it is the
    ``1/(1 + lam R)`` against ``exp(-lam R)`` behaviour of the share of useful time. The failures'
    ``wait_rate`` and ``restore_s`` must be left at their defaults: no failure strikes a
    recovery here."""
    if failures.wait_rate is not None or failures.restore_s != 0.0:
        raise ValueError(
            "full_wall_computing: no failure strikes a recovery (leave wait_rate and restore_s unset)"
        )
    W, delta, lam, R = job.work_s, job.save_s, failures.rate, failures.recovery_s
    k = n_saves(W, tau)
    if lam <= 0:
        return k * (tau + delta) + (W - k * tau)

    def seg(a: float) -> float:
        return math.expm1(lam * a) * (1.0 / lam + R)

    return k * (seg(tau) + delta) + seg(W - k * tau)


#: the states of :func:`health_chain`: good or bad; in service (bad: ``BF`` with a fault a false
#: repair left, which recurs), in automatic repair, in manual repair (``BMc``: a bad machine whose
#: automatic repair cured it, escalated all the same: good when it comes out)
HEALTH_STATES = ("GU", "GA", "GM", "BU", "BF", "BA", "BMc", "BM")


def _health_generator(
    lam: float,
    k: float,
    mu_auto: float,
    turn_bad: float,
    e: float,
    mu_manual: float,
    ca: float,
    cm: float,
    f: float,
    recur_rate: float,
) -> np.ndarray:
    """:func:`health_chain`'s generator matrix Q over ``HEALTH_STATES`` (rows sum to 0)."""
    S = {s: i for i, s in enumerate(HEALTH_STATES)}
    n = len(S)
    Q = np.zeros((n, n))

    def rate(a: str, b: str, r: float) -> None:
        Q[S[a], S[b]] += r

    rate("GU", "GA", lam)
    rate("GU", "BU", turn_bad)
    rate("GA", "GU", mu_auto * (1 - e))
    rate("GA", "GM", mu_auto * e)
    rate("GM", "GU", mu_manual)
    rate("BU", "BA", k * lam)
    rate("BF", "BA", recur_rate)
    rate("BA", "GU", mu_auto * (1 - e) * ca)
    rate("BA", "BF", mu_auto * (1 - e) * (1 - ca) * f)
    rate("BA", "BU", mu_auto * (1 - e) * (1 - ca) * (1 - f))
    rate("BA", "BMc", mu_auto * e * ca)
    rate("BA", "BM", mu_auto * e * (1 - ca))
    rate("BMc", "GU", mu_manual)
    rate("BM", "GU", mu_manual * cm)
    rate("BM", "BF", mu_manual * (1 - cm) * f)
    rate("BM", "BU", mu_manual * (1 - cm) * (1 - f))
    np.fill_diagonal(Q, -Q.sum(axis=1))
    return Q


def _stationary_bad_share(
    Q: np.ndarray, bad: list[int], turn_bad: float, cure_p: float, bad0: float
) -> float:
    """:func:`health_chain`'s long-run share of time bad (``bad``: the bad states' indices)."""
    n = Q.shape[0]
    if turn_bad > 0 and cure_p > 0:  # the long-run law: pi Q = 0, sum pi = 1
        A = np.vstack([Q.T, np.ones(n)])
        b = np.zeros(n + 1)
        b[-1] = 1.0
        return float(np.linalg.lstsq(A, b, rcond=None)[0][bad].sum())
    # no way back one way or the other: every machine ends (or stays) on one side
    return 1.0 if turn_bad > 0 else (0.0 if cure_p > 0 else bad0)


def health_chain(
    lam: float,
    k: float,
    mu_auto: float,
    t: float,
    *,
    bad0: float = 0.0,
    turn_bad: float = 0.0,
    escalate_p: float = 0.0,
    mu_manual: float = 1.0,
    cure_auto_p: float = 0.0,
    cure_manual_p: float = 0.0,
    false_success_p: float = 0.0,
    recur_rate: float = 1.0,
) -> dict[str, float]:
    """One machine of the node lifecycle as a continuous-time Markov chain, from service at time 0
    (bad with probability ``bad0``) to ``t``: the oracle of repairs that cure
    (:mod:`cprsim.sim.lifecycle`, item 2). Exponential lifetimes (a good machine fails at ``lam``,
    a bad one at ``k lam``; a good one in service turns bad at ``turn_bad``), exponential repairs
    (automatic at ``mu_auto``; escalated to manual, rate ``mu_manual``, with probability
    ``escalate_p``), and no wait between repair and service (the machine goes straight back: no
    detection, selection or spare pool). A bad machine's repair cures it with probability
    ``cure_auto_p`` (automatic) or, escalated and not cured yet, ``cure_manual_p`` (manual); an
    uncured one comes back with a persisting fault with probability ``false_success_p`` (its next
    failure at ``recur_rate``), else bad as before. A machine is counted bad until the repair that
    cures it ends.

    Returns per machine: ``bad_share`` (P(bad at t)), ``failures_bad`` and ``failures_good`` (the
    expected failures of the machine while bad / good over ``[0, t]``), ``cures`` (expected cures
    over ``[0, t]``), ``in_service`` (P(in service at t)) and ``bad_share_stationary`` (the
    long-run share of time bad: ``bad0`` when machines neither turn bad nor are cured, 1 or 0
    when only one of the two happens). ``P(t) = p0 exp(Q t)``; the integrals over ``[0, t]`` from the
    block matrix ``exp([[Q, I], [0, 0]] t)`` (Van Loan)."""
    import numpy as np
    from scipy.linalg import expm

    S = {s: i for i, s in enumerate(HEALTH_STATES)}
    n = len(S)
    e, ca, cm, f = escalate_p, cure_auto_p, cure_manual_p, false_success_p
    Q = _health_generator(lam, k, mu_auto, turn_bad, e, mu_manual, ca, cm, f, recur_rate)
    p0 = np.zeros(n)
    p0[S["GU"]], p0[S["BU"]] = 1.0 - bad0, bad0
    big = np.zeros((2 * n, 2 * n))
    big[:n, :n], big[:n, n:] = Q * t, np.eye(n) * t
    E = expm(big)
    p_t = p0 @ E[:n, :n]
    occ = p0 @ E[:n, n:]  # expected time in each state over [0, t]
    bad = [S[x] for x in ("BU", "BF", "BA", "BMc", "BM")]
    cures = (
        occ[S["BA"]] * mu_auto * (1 - e) * ca
        + occ[S["BMc"]] * mu_manual
        + occ[S["BM"]] * mu_manual * cm
    )
    cure_p = (1 - e) * ca + e * (ca + (1 - ca) * cm)  # a bad machine's repair cures it
    stationary = _stationary_bad_share(Q, bad, turn_bad, cure_p, bad0)
    return {
        "bad_share": float(p_t[bad].sum()),
        "failures_bad": float(k * lam * occ[S["BU"]] + recur_rate * occ[S["BF"]]),
        "failures_good": float(lam * occ[S["GU"]]),
        "cures": float(cures),
        "in_service": float(p_t[S["GU"]] + p_t[S["BU"]] + p_t[S["BF"]]),
        "bad_share_stationary": stationary,
    }
