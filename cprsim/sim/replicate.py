"""Replications of a scenario and their summary (means with 95% confidence intervals)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
from scipy import stats

from cprsim.costs import costs_of
from cprsim.scenario import Scenario
from cprsim.sim.engine import simulate_one
from cprsim.sim.records import Event, ReplicationResult

#: metrics summarized over replications, in report order
METRICS = (
    "wall_s", "save_s", "load_s", "lost_s", "reschedule_s", "degraded_s",
    "failures_trainer", "failures_embedding", "failures_job", "checkpoints", "pls", "overhead", "ckpt_overhead",
    "ettr",
)

#: the percentiles reported beside every mean (the spread of single runs, not of the mean)
PERCENTILES = (50, 90, 99)


@dataclass(frozen=True, slots=True)
class Estimate:
    """The mean of one metric over replications, its 95% CI, and the spread of single runs."""

    mean: float
    lo: float  #: 95% confidence interval of the mean (Student t over replications)
    hi: float
    sd: float
    n: int
    p50: float = math.nan  #: percentiles of single replications (linear interpolation)
    p90: float = math.nan
    p99: float = math.nan

    @property
    def half_width(self) -> float:
        return (self.hi - self.lo) / 2.0

    def percentile(self, q: int) -> float:
        return {50: self.p50, 90: self.p90, 99: self.p99}[q]

    def as_dict(self) -> dict[str, float | list[float] | int]:
        return {"mean": self.mean, "ci95": [self.lo, self.hi], "sd": self.sd, "n": self.n,
                "p50": self.p50, "p90": self.p90, "p99": self.p99}


def estimate(values: Sequence[float] | np.ndarray, level: float = 0.95, non_negative: bool | None = None) -> Estimate:
    """Mean with a Student-t CI, and P50/P90/P99 of the values.

    ``non_negative`` (default: all values are >= 0) clips the CI at 0: a mean of non-negative
    quantities is never negative, and an interval must not say it could be.
    """
    x = np.asarray(values, dtype=float)
    n = x.size
    m = float(x.mean()) if n else math.nan
    if n == 0:
        return Estimate(m, m, m, 0.0, 0)
    p50, p90, p99 = (float(v) for v in np.percentile(x, PERCENTILES))
    if n < 2:
        return Estimate(m, m, m, 0.0, n, p50, p90, p99)
    sd = float(x.std(ddof=1))
    h = float(stats.t.ppf(0.5 + level / 2.0, n - 1)) * sd / math.sqrt(n)
    lo = m - h
    if (non_negative if non_negative is not None else bool(np.all(x >= 0))) and lo < 0:
        lo = 0.0
    return Estimate(m, lo, m + h, sd, n, p50, p90, p99)


def summarize(results: Sequence[ReplicationResult]) -> dict[str, Estimate]:
    out = {k: estimate([getattr(r, k) for r in results]) for k in METRICS}
    e = out["ettr"]
    if e.hi > 1.0:  # a ratio of useful to wall time is at most 1: so is its interval
        out["ettr"] = Estimate(e.mean, e.lo, 1.0, e.sd, e.n, e.p50, e.p90, e.p99)
    return out


def run_replications(
    s: Scenario,
    replications: int | None = None,
    *,
    first: int = 0,
    record_first: bool = False,
    progress: Callable[[int], None] | None = None,
) -> tuple[list[ReplicationResult], list[Event]]:
    """Replications ``first .. first+n-1``; each is independent and reproducible on its own."""
    n = s.replications if replications is None else replications
    c = costs_of(s)
    out: list[ReplicationResult] = []
    events: list[Event] = []
    for i in range(first, first + n):
        res, ev = simulate_one(s, i, record=record_first and i == first, costs=c)
        if ev:
            events = ev
        out.append(res)
        if progress is not None:
            progress(1)
    return out, events
