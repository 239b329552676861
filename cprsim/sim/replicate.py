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
    "failures_trainer", "failures_embedding", "checkpoints", "pls", "overhead", "ckpt_overhead",
)


@dataclass(frozen=True, slots=True)
class Estimate:
    mean: float
    lo: float  #: 95% confidence interval (Student t over replications)
    hi: float
    sd: float
    n: int

    @property
    def half_width(self) -> float:
        return (self.hi - self.lo) / 2.0


def estimate(values: Sequence[float] | np.ndarray, level: float = 0.95) -> Estimate:
    x = np.asarray(values, dtype=float)
    n = x.size
    m = float(x.mean()) if n else math.nan
    if n < 2:
        return Estimate(m, m, m, 0.0, n)
    sd = float(x.std(ddof=1))
    h = float(stats.t.ppf(0.5 + level / 2.0, n - 1)) * sd / math.sqrt(n)
    return Estimate(m, m - h, m + h, sd, n)


def summarize(results: Sequence[ReplicationResult]) -> dict[str, Estimate]:
    return {k: estimate([getattr(r, k) for r in results]) for k in METRICS}


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
