"""The interval search and its confirmation.

**Grid.** Intervals come from one fixed geometric grid, ``1 h x 2^(j/4)`` (steps of 19%), so
plans made with different replication counts land on comparable points ("within one grid step"),
plus caps (the full-checkpoint interval, the job) where they bind.

**Criterion.** The accuracy bound is a promise about single runs: ``P(a run's accuracy loss <=
bound) >= q`` (``q`` the confidence, default 0.9), each run's loss taken at the upper end of the
accuracy model's 95% CI at the run's own PLS, failure position and restored-state age (with the
slope model: ``P(PLS <= PLS bound) >= q``); a run beyond the PLS cap (twice the calibrated range)
fails too. An interval passes on a set of replications when the
one-sided 95% Clopper-Pearson lower bound of the share of runs within the bound is at least
``q``. ``confidence = None`` keeps the older criterion on the mean (mean PLS <= bound).

**Search, then confirm.** The search runs on replications ``0 .. n_search - 1`` with common random
numbers (every interval sees the same failures), starting from the analytic interval, jumping by
the PLS-is-proportional-to-the-interval rule, then stepping one grid point at a time to the
largest passing interval. The chosen interval is then confirmed on a block of replications the
search never saw (``streams.REPLICATION_BLOCKS["confirm"]``); if it fails there, the interval
steps down the grid until it passes, or the grid ends (the option then does not meet the bound).
A cap on the steps would turn a few percent's move of a PLS bound into "partial recovery does not
pay" where a shorter interval passes.

**Early stopping that keeps the proof exact: curtailment.** The verdict on ``n`` replications is
"at least ``need(n)`` runs within the bound" (``need`` the fewest successes whose Clopper-Pearson
bound reaches ``q``). Replications are run in index order and counted: the verdict is settled
once ``need`` runs are within (pass) or more than ``n - need`` are not (fail), whatever the
remaining replications would show, so stopping there gives exactly the verdict of all ``n``
(:func:`curtailed`): the same 95% guarantee, no extra error. Each step runs exactly the fewest
further replications that could settle the verdict, so nothing is wasted. A failing interval is
settled after ``n - need + 1`` failures, usually after a fraction of ``n``; a passing one needs
at least ``need`` runs, so the planner's confirmation completes a pass to all ``n`` (at most
``n - need`` more: 13 of 200 at q = 0.9) and shows the figures of all ``n``, as without
curtailment; the search stops a pass where it is settled (its lower bound would be
``cp_lower(k, n)``, the bound all ``n`` give if every remaining run failed: never above theirs).
The criterion on the mean (``confidence = None``) is never curtailed.

**The adaptive search** (the planner's default) starts from a pilot of the first replications at
the analytic interval, jumps by the proportional rule using the pilot's estimate of the
statistic, then judges each interval with curtailment; every interval's replications are a
prefix of one sequence (:class:`Runs`), so a pilot is never run twice and common random numbers
still hold.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import special

from cprsim.quantiles import beta_ppf, betabinom_sf
from cprsim.scenario import HOUR, Scenario
from cprsim.sim.records import ReplicationResult
from cprsim.sim.replicate import run_replications
from cprsim.streams import REPLICATION_BLOCKS

GRID_RATIO = 2.0**0.25
LEVEL = 0.95  #: one-sided confidence of the Clopper-Pearson bound


def grid_below(cap: float, lo: float) -> list[float]:
    """Grid intervals in [lo, cap), ascending, then ``cap`` itself."""
    if cap <= lo:
        return [cap]
    j_lo = math.ceil(math.log(lo / HOUR, GRID_RATIO) - 1e-9)
    j_hi = math.floor(math.log(cap / HOUR, GRID_RATIO) - 1e-9)
    pts = [HOUR * GRID_RATIO**j for j in range(j_lo, j_hi + 1)]
    pts = [p for p in pts if p < cap * (1 - 1e-9)]
    return pts + [cap]


def cp_lower(successes: int, n: int, level: float = LEVEL) -> float:
    """One-sided Clopper-Pearson lower confidence bound of a binomial proportion."""
    if n <= 0 or successes <= 0:
        return 0.0

    return float(beta_ppf(1.0 - level, successes, n - successes + 1))


@functools.lru_cache(maxsize=256)  # asked for the same (n, q) at every interval of a search
def min_successes(n: int, q: float, level: float = LEVEL) -> int | None:
    """The fewest runs within the bound (of n) whose lower bound reaches q (None: n is too small)."""
    lo, hi = 0, n
    if cp_lower(n, n, level) < q:
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if cp_lower(mid, n, level) >= q:
            hi = mid
        else:
            lo = mid + 1
    return lo


@functools.lru_cache(maxsize=64)
def search_share(q: float, n_confirm: int, n_search: int, level: float = LEVEL) -> float:
    """The ``q`` a search on ``n_search`` replications proves (by Clopper-Pearson, as
    :func:`judge`) so that its runs within the bound are also at least the share with which the
    confirmation on ``n_confirm`` fresh ones (needing ``min_successes(n_confirm, q)`` within)
    passes half the time: ``q`` itself for a large confirmation; more for a small one (40 fresh
    runs prove 90% only if all 40 are within: a share of 0.5^(1/40) = 98.3% passes half the time,
    where a search proving 90% on 200 runs admits 94%). ``judge(x, b, search_share(...))`` then
    asks for ``ceil(share x n_search)`` runs within, or what proving ``q`` asks if more."""
    need = min_successes(n_confirm, q, level)
    if need is None:
        return q
    # the share p at which P(Binomial(n_confirm, p) >= need) = 1/2: that probability is the
    # regularized incomplete beta I_p(need, n_confirm - need + 1), so p is its inverse at 1/2 (in
    # closed form, from scipy.special: no root search, and no scipy.stats or scipy.optimize to
    # import; tests/test_plan_speed.py checks it against the root of scipy.stats.binom.sf)
    half = float(special.betaincinv(need, n_confirm - need + 1, 0.5))
    k = min(n_search, math.ceil(half * n_search - 1e-9))
    base = min_successes(n_search, q, level)
    if base is not None and k <= base:
        return q  # proving q already asks for as many runs within: q itself, exactly
    return max(q, cp_lower(k, n_search, level))


def min_replications(q: float, level: float = LEVEL) -> int:
    """Replications needed for a perfect record to prove q: (1 - level)^(1/n) >= q."""
    return max(2, math.ceil(math.log(1.0 - level) / math.log(q)))


@dataclass(frozen=True)
class Verdict:
    """Whether one interval's runs pass the PLS bound, and the evidence: the share within it, its
    lower confidence bound, and the statistic compared."""

    passed: bool
    within: float  #: share of runs with PLS <= bound
    within_lo: float  #: its Clopper-Pearson lower bound
    statistic: float  #: the PLS compared with the bound (the required quantile, or the mean)


def judge(pls: Sequence[float] | np.ndarray, bound: float, q: float | None) -> Verdict:
    """The verdict of runs with these PLS (or scores) against ``bound``: at least the share ``q`` of
    runs within it, proved at :data:`LEVEL` by a one-sided Clopper-Pearson bound
    (:func:`min_successes`); with ``q`` None, their mean within it."""
    x = np.asarray(pls, dtype=float)
    n = x.size
    k = int(np.sum(x <= bound * (1 + 1e-12)))
    lo = cp_lower(k, n)
    if q is None:
        m = float(x.mean())
        return Verdict(m <= bound * (1 + 1e-12), k / n, lo, m)
    need = min_successes(n, q)
    stat = float(np.sort(x)[need - 1]) if need else math.inf  # the need-th smallest PLS
    return Verdict(need is not None and k >= need, k / n, lo, stat)


def simulate(
    s: Scenario,
    tau: float,
    strategy: str,
    params: dict[str, Any],
    n: int,
    block: str = "search",
    progress: Callable[[int], None] | None = None,
) -> list[ReplicationResult]:
    """``n`` replications (block ``block``'s, from its first) of ``strategy`` with ``params`` at
    interval ``tau`` (s of progress, at most ``W``); ``progress(1)`` as each completes."""
    upd = {
        "checkpoint.interval_h": min(tau, s.duration_s) / HOUR,
        "strategy": {"name": strategy, **params},
    }
    res, _ = run_replications(
        s.with_updates(upd), n, first=REPLICATION_BLOCKS[block], progress=progress
    )
    return res


class Runs:
    """Replications ``0, 1, 2, ...`` of a block for one interval and strategy, run on demand and
    kept: whoever asks for ``n`` gets the same first ``n`` (a pilot, a search, a confirmation).
    ``progress(1)`` is called as each replication run completes."""

    def __init__(
        self,
        s: Scenario,
        tau: float,
        strategy: str,
        params: dict[str, Any],
        block: str = "search",
        progress: Callable[[int], None] | None = None,
    ) -> None:
        upd = {
            "checkpoint.interval_h": min(tau, s.duration_s) / HOUR,
            "strategy": {"name": strategy, **params},
        }
        self.s = s.with_updates(upd)
        self.first = REPLICATION_BLOCKS[block]
        self.progress = progress
        self.results: list[ReplicationResult] = []

    def __len__(self) -> int:
        return len(self.results)

    def upto(self, n: int) -> list[ReplicationResult]:
        """The first ``n`` replications, running those not run yet."""
        if n > len(self.results):
            more, _ = run_replications(
                self.s,
                n - len(self.results),
                first=self.first + len(self.results),
                progress=self.progress,
            )
            self.results.extend(more)
        return self.results[:n]

    def values(self, n: int, metric: str = "overhead") -> np.ndarray:
        """``metric`` of each of the first ``n`` replications."""
        return np.array([getattr(r, metric) for r in self.upto(n)], dtype=float)


#: after a failure, the search tries the top of the bracket itself when the rule's target is at
#: most this many grid steps below it (a failure there costs little; a pass ends the search)
NEAR_TOP = 2

#: the search's predictive stop: looks from this many replications on, every PRED_STEP more
PRED_MIN, PRED_STEP = 40, 10


def p_pass(k: int, m: int, n: int, need: int) -> float:
    """Given ``k`` of the first ``m`` runs within the bound, the probability that at least
    ``need`` of all ``n`` are (Beta-binomial predictive, uniform prior on the share)."""
    r, left = need - k, n - m
    if r <= 0:
        return 1.0
    if r > left:
        return 0.0
    return betabinom_sf(r - 1, left, k + 1, m - k + 1)


def curtailed(
    runs: Runs,
    n: int,
    q: float | None,
    score: Callable[[list[ReplicationResult]], np.ndarray],
    bound: float = 1.0,
    predictive: float | None = None,
    complete_pass: bool = False,
) -> tuple[Verdict, list[ReplicationResult]]:
    """The verdict of :func:`judge` on ``n`` replications, stopped as soon as the rest cannot
    change it (curtailment: exact, see the module doc); and the replications it ran.

    ``complete_pass``: a pass then runs the rest of the ``n`` anyway (at most ``n - need`` more)
    and returns :func:`judge`'s verdict on all of them (the same verdict, with the figures of all
    ``n``): only failures are cut short. ``predictive = g`` (the search only, never a
    confirmation) also stops once the verdict of all ``n`` is predicted with probability ``1 - g``
    (:func:`p_pass`): a guess, not a proof.

    With a confidence ``q``, ``score`` must score each run on its own (a run's value does not
    depend on the others scored with it, as the planner's per-run promise): each run is scored
    once, when it is run, instead of the whole prefix at every step."""
    need = min_successes(n, q) if q is not None else None
    if q is None or need is None:
        res = runs.upto(n)
        return judge(score(res), bound, q), res
    m = k = 0
    guess: bool | None = None
    x = np.empty(0)  # the scores of the runs so far: each scored once, as it comes
    while True:
        # the fewest further runs that could settle it: need - k more within, or n - need - f + 1 more not
        step = min(need - k, n - need - (m - k) + 1)
        if predictive is not None and m + step > PRED_MIN:
            step = min(step, max(PRED_MIN - m, PRED_STEP))
        m = min(n, m + max(1, step))
        res = runs.upto(m)
        x = np.concatenate([x, score(res[x.size :])])
        k = int(np.sum(x <= bound * (1 + 1e-12)))
        if k >= need or m - k > n - need or m >= n:
            break
        if predictive is not None and m >= PRED_MIN:
            p = p_pass(k, m, n, need)
            if p >= 1.0 - predictive or p <= predictive:
                guess = p >= 1.0 - predictive
                break
    passed = k >= need if guess is None else guess
    if passed and complete_pass and m < n:
        res = runs.upto(n)
        return judge(np.concatenate([x, score(res[m:])]), bound, q), res
    return Verdict(passed, k / m, cp_lower(k, n), pilot_statistic(x, n, q)), res


def pilot_statistic(x: np.ndarray, n: int, q: float | None) -> float:
    """From a pilot's scores, an estimate of the statistic :func:`judge` would compute on ``n``
    runs: the ``need(n)/n`` quantile (or the mean, for the criterion on the mean)."""
    x = np.sort(np.asarray(x, dtype=float))
    if x.size == 0:
        return math.nan
    if q is None:
        return float(x.mean())
    need = min_successes(n, q)
    if need is None:
        return math.inf
    return float(x[min(x.size - 1, max(0, math.ceil(need / n * x.size) - 1))])


@dataclass
class PlsSearch:
    """The largest grid interval whose PLS passes, for one strategy and parameter family."""

    s: Scenario
    strategy: str
    params_at: Callable[[float], dict[str, Any]]  #: interval -> parameters (e.g. MFU's full_every)
    bound: float
    q: float | None
    n_search: int
    #: called with the replications run (``tick(1)`` as each completes): the plan's progress
    tick: Callable[[int], None]
    #: runs -> the values compared with ``bound`` (default: their PLS); the planner passes each run's
    #: accuracy loss relative to the accuracy bound, so that ``bound`` is 1
    score: Callable[[list[ReplicationResult]], np.ndarray] | None = None
    #: adaptive: a pilot at the analytic interval, then curtailed verdicts on :class:`Runs`
    #: (``runs_of(tau)``); else every interval on all ``n_search`` replications
    runs_of: Callable[[float], Runs] | None = None
    pilot: int = 40
    #: adaptive: stop a search verdict once predicted with this probability of error (p_pass)
    predictive: float | None = 0.05

    def __post_init__(self) -> None:
        self.cache: dict[float, Verdict] = {}

    def _score(self, res: list[ReplicationResult]) -> np.ndarray:
        return self.score(res) if self.score is not None else np.array([r.pls for r in res])

    def ok(self, tau: float) -> Verdict:
        """The verdict at interval ``tau`` (s): computed once (curtailed if adaptive)."""
        if tau not in self.cache:
            if self.runs_of is not None:
                v, _ = curtailed(
                    self.runs_of(tau),
                    self.n_search,
                    self.q,
                    self._score,
                    self.bound,
                    self.predictive,
                )
            else:
                res = simulate(
                    self.s,
                    tau,
                    self.strategy,
                    self.params_at(tau),
                    self.n_search,
                    progress=self.tick,
                )
                v = judge(self._score(res), self.bound, self.q)
            self.cache[tau] = v
        return self.cache[tau]

    def run(self, cands: list[float], guess: float) -> float | None:
        """Largest candidate that passes (PLS grows with the interval); None if none does."""
        if not cands:
            return None
        i = max(0, int(np.searchsorted(cands, guess * (1 + 1e-9), side="right")) - 1)
        if self.runs_of is not None:
            return self._run_adaptive(cands, i)
        v = self.ok(cands[i])
        if 0 < v.statistic < math.inf:  # one jump: PLS is about proportional to the interval
            target = cands[i] * self.bound / v.statistic
            j = max(0, int(np.searchsorted(cands, target * (1 + 1e-9), side="right")) - 1)
            if j != i:
                i, v = j, self.ok(cands[j])
        if v.passed:
            while i + 1 < len(cands) and self.ok(cands[i + 1]).passed:
                i += 1
            return cands[i]
        while i > 0:
            i -= 1
            if self.ok(cands[i]).passed:
                return cands[i]
        return None

    def _run_adaptive(self, cands: list[float], i: int) -> float | None:
        """As :meth:`run`, from a pilot: jump by the proportional rule from the pilot's estimate,
        then from every verdict jump again by the rule fitted through the last two estimates
        (log-log secant: MFU's and SSU's PLS are not proportional to the interval), within the
        grid steps not yet settled (above the largest pass, below the smallest failure), until a
        pass sits just below a failure: the same answer as :meth:`run`'s walk whenever passing is
        monotone in the interval.

        After a failure, the next verdict is one grid step above the rule's target (the top of the
        bracket itself when the target is within :data:`NEAR_TOP` steps of it): a pass is the
        expensive verdict (it needs about ``need(n)`` runs, where a failure settles after
        ``n - need + 1``), and the answer needs exactly one pass, at the top of the bracket; aiming
        high trades a second pass just below the answer for, at worst, a failure above it."""
        assert self.runs_of is not None
        x = self._score(self.runs_of(cands[i]).upto(min(self.pilot, self.n_search)))
        pts = [(cands[i], pilot_statistic(x, self.n_search, self.q))]
        best: int | None = None  # the largest index known to pass
        hi = len(cands) - 1  # every index above hi fails
        j = self._target(cands, pts, 0, hi, i)
        while True:  # the bracket (best, hi] shrinks at every step
            v = self.ok(cands[j])
            pts.append((cands[j], v.statistic))
            if v.passed:
                best = j
                if j >= hi:
                    return cands[j]
                j = self._target(cands, pts, j + 1, hi, j + 1)
                continue
            hi = j - 1
            if hi < 0:
                return None
            if best is not None and best >= hi:
                return cands[best]
            j = self._target(cands, pts, 0 if best is None else best + 1, hi, hi)
            j = hi if j >= hi - NEAR_TOP else j + 1

    def _target(
        self, cands: list[float], pts: list[tuple[float, float]], lo: int, hi: int, default: int
    ) -> int:
        good = [(t, s) for t, s in pts if 0 < s < math.inf]
        if not good:
            return min(hi, max(lo, default))
        t1, s1 = good[-1]
        b = 1.0
        if len(good) >= 2:
            t0, s0 = good[-2]
            if t0 != t1 and s0 != s1:
                est = math.log(s1 / s0) / math.log(t1 / t0)
                if 0.2 <= est <= 5.0:
                    b = est
        target = t1 * (self.bound / s1) ** (1.0 / b)
        k = max(0, int(np.searchsorted(cands, target * (1 + 1e-9), side="right")) - 1)
        return min(hi, max(lo, k))
