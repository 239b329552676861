"""The recommendation: the cheapest option that meets its bound, ties to the simplest, in words."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from cprsim.names import FULL
from cprsim.planner.records import Option
from cprsim.quantiles import binom_ppf
from cprsim.scenario import HOUR


def quantile_ci(values: Any, p: float, level: float = 0.95) -> tuple[float, float]:
    """Distribution-free CI of the p-quantile from order statistics (binomial), clipped to the data."""
    x = np.sort(np.asarray(values, dtype=float))
    n = x.size
    lo_k = int(binom_ppf((1 - level) / 2, n, p))
    hi_k = int(binom_ppf(1 - (1 - level) / 2, n, p))
    return float(x[max(0, lo_k - 1)]), float(x[min(n - 1, hi_k)])


def _value(o: Option, objective: str) -> tuple[float, float, float]:
    e = o.overhead
    if objective == "p90":  # distribution-free: order statistics of the confirmation runs
        return e.p90, o.overhead_p90_ci[0], o.overhead_p90_ci[1]
    return e.mean, e.lo, e.hi


def recommend(
    options: list[Option],
    bound: float,
    metric: str,
    objective: str,
    allow_extrapolation: bool = False,
    confidence: float | None = 0.9,
    no_partial: str | None = None,
) -> tuple[list[Option], Option, tuple[str, ...], str]:
    """Mark ties, pick the recommended option and say why (oracles never; options beyond twice
    the calibrated PLS range only when extrapolation is allowed; the extra memory of one that
    takes some); ``no_partial``: why full recovery wins when no option loses updates (default:
    none meets the bound)."""
    eligible = [
        o
        for o in options
        if o.meets_bound
        and not o.oracle
        and (allow_extrapolation or "twice" not in o.extrapolation)
    ]
    if not eligible:
        eligible = [o for o in options if o.strategy == FULL]
    best = min(eligible, key=lambda o: _value(o, objective)[0])
    _, blo, bhi = _value(best, objective)
    tied = [
        o for o in eligible if _value(o, objective)[1] <= bhi and _value(o, objective)[2] >= blo
    ]
    rec = min(tied, key=lambda o: (o.rank, _value(o, objective)[0]))
    tied_labels = tuple(o.label for o in tied if o.label != rec.label)
    options = [replace(o, tied=o in tied and len(tied) > 1) for o in options]
    best_full = min(
        (o for o in options if o.strategy == FULL), key=lambda o: _value(o, objective)[0]
    )
    if rec.strategy == FULL:
        message = _full_wins(options, rec, best_full, objective, tied_labels, no_partial)
    else:
        message = _partial_wins(rec, best_full, objective, bound, metric, confidence)
    if rec.extra_memory > 0:
        message += (
            f"; it takes {100 * rec.extra_memory:.3g}% extra memory (of the embedding tables; "
            "full recovery takes none)"
        )
    if tied_labels:
        message += (
            f"; tied within the 95% CIs: {', '.join(tied_labels)} (the simplest is recommended)"
        )
    if rec.extrapolation:
        message += f"; WARNING: {rec.extrapolation}"
    return options, rec, tied_labels, message


def _full_wins(
    options: Sequence[Option],
    rec: Option,
    best_full: Option,
    objective: str,
    tied_labels: tuple[str, ...],
    no_partial: str | None,
) -> str:
    """The recommendation's words where full recovery wins: why partial recovery does not pay
    (its cheapest option's cost, or ``no_partial``), and what to use."""
    what = "P90 overhead" if objective == "p90" else "overhead"
    v_rec, v_full = _value(rec, objective)[0], _value(best_full, objective)[0]
    partial = [o for o in options if o.strategy != FULL and o.pls_bound < math.inf]
    if partial:
        p = min(partial, key=lambda o: _value(o, objective)[0])
        why = (
            f"{p.label} every {p.interval_s / HOUR:.3g} h costs {100 * _value(p, objective)[0]:.2f}% "
            f"vs {100 * v_full:.2f}% for {best_full.label}"
            + ("" if p.meets_bound else " and does not meet the bound on fresh replications")
            + (" (tied within the CIs: the simpler wins)" if p.label in tied_labels else "")
        )
    else:
        why = no_partial or "no partial-recovery option meets the bound"
    return (
        f"partial recovery does not pay here: {why}; use {rec.label} every "
        f"{rec.interval_s / HOUR:.3g} h ({what} {100 * v_rec:.2f}%, ETTR {_ettr(rec)})"
    )


def _partial_wins(
    rec: Option,
    best_full: Option,
    objective: str,
    bound: float,
    metric: str,
    confidence: float | None,
) -> str:
    """The recommendation's words where another strategy wins: its intervals, its saving over
    the best full recovery, and what it promises about accuracy."""
    what = "P90 overhead" if objective == "p90" else "overhead"
    v_rec, v_full = _value(rec, objective)[0], _value(best_full, objective)[0]
    saving = v_full - v_rec
    rel = saving / v_full if v_full > 0 else 0.0
    two = (
        f", a full checkpoint every {rec.full_interval_s / HOUR:.3g} h"
        if rec.full_interval_s > rec.interval_s * (1 + 1e-9)
        else ""
    )
    return (
        f"use {rec.label} with saves every {rec.interval_s / HOUR:.3g} h{two}"
        + (f" ({_fmt(rec.params)})" if rec.params else "")
        + f": {what} {100 * v_rec:.2f}% vs {100 * v_full:.2f}% for {best_full.label}, a saving of "
        f"{100 * saving:.2f} points ({100 * rel:.0f}% of it), ETTR {_ettr(rec)}"
        f"{_guarantee(rec, bound, metric, confidence)}"
    )


def _guarantee(rec: Option, bound: float, metric: str, confidence: float | None) -> str:
    """What the recommended option promises about accuracy: the mean loss's bound, a single
    run's (with ``confidence``), or that no update is lost."""
    if math.isfinite(rec.pls_bound) and confidence is None:
        return (
            f"; mean {metric} loss <= {bound:g} (the upper end of its 95% CI; single runs "
            f"scatter beyond it): {rec.accuracy_loss:.2g} "
            f"[{rec.accuracy_loss_ci[0]:.2g}, {rec.accuracy_loss_ci[1]:.2g}] (95% CI of the mean)"
        )
    if math.isfinite(rec.pls_bound) and confidence is not None:
        return (
            f"; a single training run's {metric} loss <= {bound:g} in "
            f"{100 * rec.within:.1f}% of fresh runs (predictive: training scatter and the "
            f"model's uncertainty; 95% lower bound {100 * rec.within_lo:.1f}%; PLS <= "
            f"{rec.pls_bound:.3g} for a fresh restore mid-training); P{100 * confidence:g} of a "
            f"run's {metric} loss {rec.accuracy_loss_tail:.2g}; mean {rec.accuracy_loss:.2g} "
            f"[{rec.accuracy_loss_ci[0]:.2g}, {rec.accuracy_loss_ci[1]:.2g}] (95% CI of the mean)"
        )
    # a strategy that loses no update (ECRM, Check-N-Run): no PLS bound to promise
    return "; no update is lost (no PLS bound applies)"


def _ettr(o: Option) -> str:
    return f"{o.ettr.mean:.4f}" if o.ettr is not None else "-"


def _fmt(p: dict[str, Any]) -> str:
    return ", ".join(
        f"{k}={v:g}" if isinstance(v, (int, float)) else f"{k}={v}" for k, v in p.items()
    )
