"""The accuracy side of a plan: PLS -> accuracy loss, honestly.

* **One pooled slope unless the data say otherwise.** The calibration measures ``loss = slope x
  PLS`` (through the origin) per strategy. Whether MFU/SSU/lookahead lose a different amount of
  accuracy *per unit PLS* than vanilla CPR is a question the calibration answers with an F-test
  of "one slope for all" against "a slope per strategy" (``p < 0.05``: the strategies' own slopes;
  otherwise one slope fitted on every point). The plan says which, with the p-value.
* **Conservative.** A bound promised to a user must also hold for the calibration's noise: the
  PLS bound is ``accuracy bound / upper end of the slope's 95% CI``.
* **Within the measured range.** The linear model is only known on the PLS range the calibration
  measured for that strategy (``[0, max measured PLS]``): beyond it the plan warns, and beyond
  twice it the planner does not go unless asked (``allow_extrapolation``).

Calibrations without points (a placeholder, or a test model) keep their own slopes and have no
range: the plan then says it cannot check the range.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from scipy import stats


class AccuracyModel(Protocol):
    calibrated: bool
    provenance: dict

    def accuracy_loss(self, pls: float, metric: str = "auc", strategy: str = "partial") -> float: ...

    def max_pls(self, bound: float, metric: str = "auc", strategy: str = "partial") -> float: ...


@dataclass(frozen=True)
class SlopeFit:
    slope: float
    lo: float
    hi: float
    n: int


def fit_through_origin(x: np.ndarray, y: np.ndarray) -> tuple[SlopeFit, float]:
    """Least squares ``y = b x``, its 95% Student-t CI, and the residual sum of squares."""
    sxx = float(np.dot(x, x))
    b = float(np.dot(x, y) / sxx) if sxx > 0 else 0.0
    rss = float(np.sum((y - b * x) ** 2))
    n = x.size
    if n < 2 or sxx <= 0:
        return SlopeFit(b, -math.inf, math.inf, n), rss
    se = math.sqrt(rss / (n - 1) / sxx)
    h = float(stats.t.ppf(0.975, n - 1)) * se
    return SlopeFit(b, b - h, b + h, n), rss


@dataclass(frozen=True)
class PlanAccuracy:
    """The accuracy model as the planner uses it, for one metric."""

    metric: str
    calibrated: bool
    provenance: dict[str, Any]
    slopes: dict[str, SlopeFit]  #: strategy -> the slope the plan uses for it (pooled or own)
    ranges: dict[str, float]  #: strategy -> the largest PLS the calibration measured for it
    pooled: bool | None  #: None: no points to test
    p_value: float | None
    description: str
    fallback: Any = field(default=None, repr=False)  #: a model without points: asked directly

    def _fit(self, strategy: str) -> SlopeFit | None:
        return self.slopes.get(strategy, self.slopes.get("partial"))

    def slope_hi(self, strategy: str) -> float:
        f = self._fit(strategy)
        if f is not None:
            return f.hi
        return self.fallback.accuracy_loss(1.0, self.metric, strategy)

    def pls_bound(self, bound: float, strategy: str) -> float:
        """The largest PLS whose loss stays within ``bound`` at the slope's upper 95% end."""
        if self._fit(strategy) is None:
            return float(self.fallback.max_pls(bound, self.metric, strategy))
        s = self.slope_hi(strategy)
        return math.inf if s <= 0 else bound / s

    def loss(self, pls: float, strategy: str) -> tuple[float, float, float]:
        """Expected loss at this PLS and its 95% range from the slope's CI (never negative)."""
        f = self._fit(strategy)
        if f is None:
            v = max(0.0, float(self.fallback.accuracy_loss(pls, self.metric, strategy)))
            return v, v, v
        return max(0.0, f.slope * pls), max(0.0, f.lo * pls), max(0.0, f.hi * pls)

    def measured_range(self, strategy: str) -> float | None:
        if not self.ranges:
            return None
        return self.ranges.get(strategy, self.ranges.get("partial"))


def plan_accuracy(model: Any, metric: str, significance: float = 0.05) -> PlanAccuracy:
    """Pooled or per-strategy slopes from the calibration's points (F-test), and their ranges."""
    raw = getattr(model, "raw", {}) or {}
    points = raw.get("points") if isinstance(raw, dict) else None
    prov = dict(getattr(model, "provenance", {}))
    calibrated = bool(getattr(model, "calibrated", False))
    data: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    if isinstance(points, dict):
        for st, p in points.items():
            if isinstance(p, dict) and "pls" in p and f"d_{metric}" in p:
                x = np.asarray(p["pls"], dtype=float)
                y = np.asarray(p[f"d_{metric}"], dtype=float)
                if x.size == y.size and x.size >= 2 and np.all(np.isfinite(x)) and np.all(np.isfinite(y)):
                    data[st] = (x, y)
    if not data:
        return PlanAccuracy(metric, calibrated, prov, {}, {}, None, None,
                            "the accuracy model's own slopes (no calibration points to pool or to bound "
                            "the PLS range)", fallback=model)
    own = {st: fit_through_origin(x, y) for st, (x, y) in data.items()}
    ranges = {st: float(np.max(x)) for st, (x, _) in data.items()}
    xs = np.concatenate([x for x, _ in data.values()])
    ys = np.concatenate([y for _, y in data.values()])
    pooled_fit, rss_pool = fit_through_origin(xs, ys)
    k, n = len(data), xs.size
    rss_sep = sum(r for _, r in own.values())
    p_value: float | None = None
    if k >= 2 and n > k and rss_sep > 0:
        F = ((rss_pool - rss_sep) / (k - 1)) / (rss_sep / (n - k))
        p_value = float(stats.f.sf(F, k - 1, n - k))
    differ = p_value is not None and p_value < significance
    if differ or k == 1:
        slopes = {st: f for st, (f, _) in own.items()}
        desc = (f"each strategy's own {metric} slope: an F-test rejects one common slope (p = {p_value:.3g})"
                if differ else f"vanilla CPR's {metric} slope (the only strategy calibrated)")
    else:
        slopes = {st: pooled_fit for st in data}
        desc = (f"one {metric} slope pooled over {', '.join(data)} ({n} runs): the strategies' slopes do not "
                f"differ significantly (F-test p = {p_value:.3g})")
    return PlanAccuracy(metric, calibrated, prov, slopes, ranges, not differ and k >= 2, p_value, desc)
