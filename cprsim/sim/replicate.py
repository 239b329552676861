"""Replications of a scenario and their summary (means with 95% confidence intervals); adaptive
replication (:class:`Precision`: as many replications as a target precision of the mean needs)."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from cprsim.costs import costs_of
from cprsim.errors import InputError
from cprsim.metrics import BY_NAME, NAMES
from cprsim.quantiles import t_ppf
from cprsim.scenario import Scenario
from cprsim.sim.engine import simulate_one
from cprsim.sim.records import Event, ReplicationResult

#: metrics summarized over replications, in report order (:mod:`cprsim.metrics`)
METRICS = NAMES

#: the tails reported beside every mean and its P50: the worst 10% and the worst 1% of single runs,
#: in the metric's bad direction (docs/concepts.md, "Tails point the user's way")
TAIL_SHARES = (10, 1)


def tail_names(higher_is_better: bool = False) -> tuple[str, str]:
    """The percentiles that are the worst 10% and the worst 1% of single runs: ``("p90", "p99")``
    for a cost (higher is worse), ``("p10", "p1")`` for a metric where higher is better (ETTR)."""
    return ("p10", "p1") if higher_is_better else ("p90", "p99")


@dataclass(frozen=True, slots=True)
class Estimate:
    """The mean of one metric over replications, its 95% CI, and the spread of single runs.

    The spread is the median and the **bad tail**: ``worst10`` and ``worst1``, the values the worst
    10% and the worst 1% of runs reach or pass. For a cost (overhead, PLS, times, counts) they are
    the P90 and the P99; for a metric where higher is better (``higher_is_better``: ETTR) the P10
    and the P1. :meth:`as_dict` names them by their percentile (``p90``/``p99`` or ``p10``/``p1``);
    the properties ``p10``, ``p90``, ``p1``, ``p99`` are the plain percentiles whatever the
    direction (the good tail is kept in ``best10``/``best1``, so :meth:`oriented` can turn it).
    """

    mean: float
    lo: float  #: 95% confidence interval of the mean (Student t over replications)
    hi: float
    sd: float
    n: int
    p50: float = math.nan  #: median of single replications (percentiles: linear interpolation)
    #: the worst 10% of single runs are at or beyond it: the P90 (higher is better: the P10)
    worst10: float = math.nan
    #: the worst 1% of single runs are at or beyond it: the P99 (higher is better: the P1)
    worst1: float = math.nan
    higher_is_better: bool = False  #: ETTR: the bad tail is the low one
    best10: float = math.nan  #: the good tail: the P10 (higher is better: the P90)
    best1: float = math.nan  #: the P1 (higher is better: the P99)

    @property
    def half_width(self) -> float:
        """Half the width of the 95% CI of the mean (in the metric's unit)."""
        return (self.hi - self.lo) / 2.0

    @property
    def p90(self) -> float:
        """The 90th percentile of single replications (a cost's worst 10%)."""
        return self.best10 if self.higher_is_better else self.worst10

    @property
    def p99(self) -> float:
        """The 99th percentile of single replications (a cost's worst 1%)."""
        return self.best1 if self.higher_is_better else self.worst1

    @property
    def p10(self) -> float:
        """The 10th percentile of single replications (ETTR's worst 10%)."""
        return self.worst10 if self.higher_is_better else self.best10

    @property
    def p1(self) -> float:
        """The 1st percentile of single replications (ETTR's worst 1%)."""
        return self.worst1 if self.higher_is_better else self.best1

    @property
    def tails(self) -> tuple[str, str]:
        """The names of the bad tail's percentiles: ``("p90", "p99")``, or ``("p10", "p1")``
        where higher is better (:func:`tail_names`)."""
        return tail_names(self.higher_is_better)

    def percentile(self, q: int) -> float:
        """The P``q`` of single replications, ``q`` one of 1, 10, 50, 90, 99."""
        return {1: self.p1, 10: self.p10, 50: self.p50, 90: self.p90, 99: self.p99}[q]

    def worst(self, share: int) -> float:
        """The value the worst ``share`` % of single runs reach or pass (``share``: 10 or 1)."""
        return {10: self.worst10, 1: self.worst1}[share]

    def oriented(self, higher_is_better: bool) -> Estimate:
        """The same estimate with its bad tail on the side ``higher_is_better`` says."""
        if higher_is_better == self.higher_is_better:
            return self
        return replace(
            self,
            worst10=self.best10,
            worst1=self.best1,
            best10=self.worst10,
            best1=self.worst1,
            higher_is_better=higher_is_better,
        )

    def as_dict(self) -> dict[str, float | list[float] | int]:
        """Plain data: the mean, ``ci95`` as [lo, hi], sd, n, the median ``p50`` and the bad tail
        by its percentiles: ``p90``, ``p99`` (a cost) or ``p10``, ``p1`` (higher is better)."""
        t10, t1 = self.tails
        return {
            "mean": self.mean,
            "ci95": [self.lo, self.hi],
            "sd": self.sd,
            "n": self.n,
            "p50": self.p50,
            t10: self.worst10,
            t1: self.worst1,
        }


def estimate(
    values: Sequence[float] | np.ndarray,
    level: float = 0.95,
    non_negative: bool | None = None,
    higher_is_better: bool = False,
) -> Estimate:
    """Mean with a Student-t CI, the median and the tails (P1, P10, P90, P99) of the values; the
    bad tail (``worst10``, ``worst1``) is the high one, or the low one with ``higher_is_better``.

    ``non_negative`` (default: all values are >= 0) clips the CI at 0: a mean of non-negative
    quantities is never negative, and an interval must not say it could be.
    """
    x = np.asarray(values, dtype=float)
    n = x.size
    m = float(x.mean()) if n else math.nan
    if n == 0:
        return Estimate(m, m, m, 0.0, 0, higher_is_better=higher_is_better)
    p1, p10, p50, p90, p99 = (float(v) for v in np.percentile(x, _PERCENTILES))
    tails = (p10, p1, p90, p99) if higher_is_better else (p90, p99, p10, p1)
    if n < 2:
        return Estimate(m, m, m, 0.0, n, p50, tails[0], tails[1], higher_is_better, *tails[2:])
    sd = float(x.std(ddof=1))
    h = _t_quantile(n - 1, level) * sd / math.sqrt(n)
    lo = m - h
    if (non_negative if non_negative is not None else bool(np.all(x >= 0))) and lo < 0:
        lo = 0.0
    return Estimate(m, lo, m + h, sd, n, p50, tails[0], tails[1], higher_is_better, *tails[2:])


#: the percentiles :func:`estimate` computes
_PERCENTILES = (1, 10, 50, 90, 99)


def estimate_metric(name: str, values: Sequence[float] | np.ndarray) -> Estimate:
    """:func:`estimate` of the metric ``name`` (:mod:`cprsim.metrics`): its bad tail on its side,
    and ETTR's CI capped at 1 (useful time is at most the wall time). Other names: a cost."""
    m = BY_NAME.get(name)
    e = estimate(values, higher_is_better=m is not None and m.higher_is_better)
    if name == "ettr" and e.hi > 1.0:  # a ratio of useful to wall time is at most 1: so is its CI
        e = replace(e, hi=1.0)
    return e


def summarize(results: Sequence[ReplicationResult]) -> dict[str, Estimate]:
    """Every metric's :class:`Estimate` over the replications (:func:`estimate_metric`: each
    bad tail on its metric's side, ETTR's CI capped at 1)."""
    return {k: estimate_metric(k, [getattr(r, k) for r in results]) for k in METRICS}


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


# -- adaptive replication ----------------------------------------------------------------------------
#: the confidence level of :class:`Precision`'s interval unless it says otherwise
DEFAULT_LEVEL = 0.95


@functools.lru_cache(maxsize=4096)
def _t_quantile(df: int, level: float) -> float:
    """The two-sided Student-t quantile (scipy.stats is imported when first needed: it is slow to import)."""

    return float(t_ppf(0.5 + level / 2.0, df))


@dataclass(frozen=True)
class Precision:
    """Adaptive replication: as many replications as the mean of ``metric`` needs.

    **The rule** (a fixed-relative-width sequential confidence interval, Chow & Robbins 1965;
    Nádas 1969): run replications ``0, 1, 2, ...`` in index order and look at the Student-t CI
    (of confidence ``level``, default 95%) of the metric's mean after ``min_n`` replications and
    then after every ``batch`` more; stop at the first look where its half-width is at most
    ``rel x |mean|``, or at ``cap``.
    The looks fall on replication counts fixed in advance and each one reads only the
    replications before it, in index order, so the number of replications is a function of the
    seed alone: whoever runs them, in whatever order they complete, stops at the same count
    (:meth:`stop_at` recomputes it from the values).

    **Validity.** As ``rel`` goes to 0 the stopped interval's coverage tends to ``level`` and the
    number of replications to ``(t sd / (rel mean))^2`` (the theorem of Chow and Robbins); for a
    finite ``rel`` it can fall a little short of it, chiefly when a few early replications agree
    by chance: ``min_n`` (default 20) guards against that. A metric that is constant (every
    value equal) stops at ``min_n``; one whose mean is 0 with some spread runs to ``cap``.
    """

    rel: float  #: target half-width of the CI (of confidence ``level``), relative to |mean|
    cap: int  #: never more replications than this
    min_n: int = 20  #: the first look (at most ``cap``)
    batch: int = 10  #: replications between two looks
    metric: str = "overhead"
    level: float = DEFAULT_LEVEL  #: the CI's confidence level, in (0, 1)

    def __post_init__(self) -> None:
        if not (isinstance(self.rel, (int, float)) and math.isfinite(self.rel) and self.rel > 0):
            raise InputError(
                f"the precision must be a finite number > 0 (e.g. 0.02), got {self.rel!r}"
            )
        if self.cap < 1 or self.min_n < 2 or self.batch < 1:
            raise InputError(
                f"adaptive replication needs cap >= 1, a minimum >= 2 and batches >= 1 "
                f"(got cap {self.cap}, minimum {self.min_n}, batch {self.batch})"
            )
        if self.metric not in METRICS:
            raise InputError(
                f"the precision's metric must be one of {', '.join(METRICS)}, got {self.metric!r}"
            )
        if not (isinstance(self.level, (int, float)) and 0 < self.level < 1):
            raise InputError(
                f"the precision's confidence level must be in (0, 1) (e.g. 0.95), got {self.level!r}"
            )

    @property
    def first_look(self) -> int:
        """The first look: ``min_n`` replications, at most ``cap``."""
        return min(self.min_n, self.cap)

    def looks(self) -> Iterator[int]:
        """The replication counts at which the rule is checked, ascending, ending at ``cap``."""
        n = self.first_look
        while n < self.cap:
            yield n
            n += self.batch
        yield self.cap

    def next_look(self, n: int) -> int:
        """The first look at ``n`` replications or more (``cap`` at most)."""
        n0 = self.first_look
        if n <= n0:
            return n0
        return min(self.cap, n0 + -(-(n - n0) // self.batch) * self.batch)

    def met(self, values: Sequence[float] | np.ndarray) -> bool:
        """Is the CI of the mean of ``values`` narrow enough?"""
        x = np.asarray(values, dtype=float)
        n = x.size
        if n < 2:
            return False
        m = float(x.mean())
        h = _t_quantile(n - 1, self.level) * float(x.std(ddof=1)) / math.sqrt(n)
        return h <= self.rel * abs(m)

    def stop_at(self, values: Sequence[float] | np.ndarray) -> int | None:
        """The count at which replications with these values (in index order) stop; None when
        the rule asks for more than ``len(values)``."""
        x = np.asarray(values, dtype=float)
        for n in self.looks():
            if n > x.size:
                return None
            if n >= self.cap or self.met(x[:n]):
                return n
        return None  # pragma: no cover - looks() always ends at cap

    def describe(self) -> str:
        """One line stating the rule."""
        return (
            f"adaptive: until the {100 * self.level:g}% CI of the mean {self.metric} is within {100 * self.rel:g}% of it "
            f"(checked after {self.first_look} replications and every {self.batch} more, at most {self.cap})"
        )

    def as_dict(self) -> dict[str, Any]:
        """The rule as plain data for a sweep's manifest (what :meth:`from_dict` reads).

        ``level`` only when it is not the default (95%): a sweep's fingerprint hashes this dict
        (:func:`cprsim.sweep.spec.expand`) and its manifest holds it, so the adaptive sweeps
        made before the level was written keep their fingerprint (and resume) and their manifest.
        """
        d: dict[str, Any] = {
            "precision": self.rel,
            "metric": self.metric,
            "min_replications": self.min_n,
            "batch": self.batch,
            "max_replications": self.cap,
        }
        if self.level != DEFAULT_LEVEL:
            d["level"] = self.level
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Precision:
        """The rule :meth:`as_dict` wrote (a sweep's manifest)."""
        return cls(
            float(d["precision"]),
            int(d["max_replications"]),
            int(d["min_replications"]),
            int(d["batch"]),
            str(d["metric"]),
            float(d.get("level", DEFAULT_LEVEL)),  # absent: the default (see as_dict)
        )


def run_adaptive(
    s: Scenario,
    precision: Precision,
    *,
    first: int = 0,
    record_first: bool = False,
    progress: Callable[[int], None] | None = None,
) -> tuple[list[ReplicationResult], list[Event]]:
    """Replications ``first, first+1, ...`` until ``precision`` stops them (see :class:`Precision`)."""
    c = costs_of(s)
    out: list[ReplicationResult] = []
    values: list[float] = []
    events: list[Event] = []
    for look in precision.looks():
        while len(out) < look:
            i = first + len(out)
            res, ev = simulate_one(s, i, record=record_first and i == first, costs=c)
            if ev:
                events = ev
            out.append(res)
            values.append(getattr(res, precision.metric))
            if progress is not None:
                progress(1)
        if look >= precision.cap or precision.met(values):
            break
    return out, events
