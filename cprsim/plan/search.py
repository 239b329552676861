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
steps down the grid until it passes (at most ``max_steps`` times).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
from scipy import stats

from cprsim.scenario import HOUR, Scenario
from cprsim.sim.records import ReplicationResult
from cprsim.sim.replicate import run_replications
from cprsim.sim.streams import REPLICATION_BLOCKS

GRID_RATIO = 2.0 ** 0.25
LEVEL = 0.95  #: one-sided confidence of the Clopper-Pearson bound


def grid_below(cap: float, lo: float) -> list[float]:
    """Grid intervals in [lo, cap), ascending, then ``cap`` itself."""
    if cap <= lo:
        return [cap]
    j_lo = math.ceil(math.log(lo / HOUR, GRID_RATIO) - 1e-9)
    j_hi = math.floor(math.log(cap / HOUR, GRID_RATIO) - 1e-9)
    pts = [HOUR * GRID_RATIO ** j for j in range(j_lo, j_hi + 1)]
    pts = [p for p in pts if p < cap * (1 - 1e-9)]
    return pts + [cap]


def cp_lower(successes: int, n: int, level: float = LEVEL) -> float:
    """One-sided Clopper-Pearson lower confidence bound of a binomial proportion."""
    if n <= 0 or successes <= 0:
        return 0.0
    return float(stats.beta.ppf(1.0 - level, successes, n - successes + 1))


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


def min_replications(q: float, level: float = LEVEL) -> int:
    """Replications needed for a perfect record to prove q: (1 - level)^(1/n) >= q."""
    return max(2, math.ceil(math.log(1.0 - level) / math.log(q)))


@dataclass(frozen=True)
class Verdict:
    passed: bool
    within: float  #: share of runs with PLS <= bound
    within_lo: float  #: its Clopper-Pearson lower bound
    statistic: float  #: the PLS compared with the bound (the required quantile, or the mean)


def judge(pls: Sequence[float] | np.ndarray, bound: float, q: float | None) -> Verdict:
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


def simulate(s: Scenario, tau: float, strategy: str, params: dict[str, Any], n: int,
             block: str = "search") -> list[ReplicationResult]:
    upd = {"checkpoint.interval_h": min(tau, s.duration_s) / HOUR, "strategy": {"name": strategy, **params}}
    res, _ = run_replications(s.with_updates(upd), n, first=REPLICATION_BLOCKS[block])
    return res


@dataclass
class PlsSearch:
    """The largest grid interval whose PLS passes, for one strategy and parameter family."""

    s: Scenario
    strategy: str
    params_at: Callable[[float], dict[str, Any]]  #: interval -> parameters (e.g. MFU's full_every)
    bound: float
    q: float | None
    n_search: int
    tick: Callable[[int], None]
    #: runs -> the values compared with ``bound`` (default: their PLS); the planner passes each run's
    #: accuracy loss relative to the accuracy bound, so that ``bound`` is 1
    score: Callable[[list[ReplicationResult]], np.ndarray] | None = None

    def __post_init__(self) -> None:
        self.cache: dict[float, Verdict] = {}

    def ok(self, tau: float) -> Verdict:
        if tau not in self.cache:
            res = simulate(self.s, tau, self.strategy, self.params_at(tau), self.n_search)
            self.tick(1)
            vals = self.score(res) if self.score is not None else np.array([r.pls for r in res])
            self.cache[tau] = judge(vals, self.bound, self.q)
        return self.cache[tau]

    def run(self, cands: list[float], guess: float) -> float | None:
        """Largest candidate that passes (PLS grows with the interval); None if none does."""
        if not cands:
            return None
        i = max(0, int(np.searchsorted(cands, guess * (1 + 1e-9), side="right")) - 1)
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
