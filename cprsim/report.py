"""Summaries of replications as plain data (for JSON) and as rich tables (for the terminal)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from cprsim import metrics
from cprsim.scenario import HOUR, Scenario
from cprsim.sim.records import ReplicationResult
from cprsim.sim.replicate import Estimate, summarize
from cprsim.version import __version__

#: (metric, label, kind): kind "time" is shown in hours and % of W (:mod:`cprsim.metrics`)
ROWS = tuple((m.name, m.row_label, m.kind) for m in metrics.ALL if m.table == "core")
#: rows shown after "rescheduling" when the scenario has a node lifecycle ([lifecycle])
LIFECYCLE_ROWS = tuple((m.name, m.row_label, m.kind) for m in metrics.ALL if m.table == "lifecycle")
#: rows shown after "checkpoints completed" with tiered checkpoints
TIER_ROWS = tuple((m.name, m.row_label, m.kind) for m in metrics.ALL if m.table == "tiers")
#: the headers of the tail columns: the worst 10% and 1% of single runs, whichever side is bad
TAIL_HEADERS = ("worst 10%", "worst 1%")
#: what they are, under the table
TAIL_CAPTION = "worst 10%, 1%: of single runs (P90, P99; ETTR: P10, P1)"


def rows(s: Scenario) -> tuple[tuple[str, str, str], ...]:
    """The table's rows for scenario ``s``."""
    out: tuple[tuple[str, str, str], ...] = ROWS
    if s.lifecycle is not None:
        i = [k for k, _, _ in out].index("reschedule_s") + 1
        out = out[:i] + LIFECYCLE_ROWS + out[i:]
    if s.checkpoint.mode == "tiered":
        i = [k for k, _, _ in out].index("checkpoints") + 1
        out = out[:i] + TIER_ROWS + out[i:]
    return out


def badput(results: Sequence[ReplicationResult]) -> dict[str, dict[str, float]]:
    """The mean wall time lost per cause (seconds) and its share of all lost time, with the P90 of
    single runs: detection, waiting for a machine, replacement (swap-in, host selection or
    rescheduling), load, re-execution, save stalls, degraded progress."""
    per = [r.badput for r in results]
    total = float(np.mean([r.wall_s - r.useful_s for r in results])) if results else 0.0
    out = {}
    for cause in per[0] if per else ():
        v = np.array([b[cause] for b in per])
        out[cause] = {
            "mean_s": float(v.mean()),
            "p90_s": float(np.percentile(v, 90)),
            "share": float(v.mean() / total) if total > 0 else 0.0,
        }
    return out


def accuracy(
    s: Scenario,
    est: dict[str, Estimate],
    calibration: Any = None,
    results: Sequence[ReplicationResult] | None = None,
) -> dict[str, Any] | None:
    """The accuracy loss implied by the runs' PLS (the calibration a plan of ``s`` uses unless
    given: :func:`cprsim.calibrate.calibration.calibration_for`), or None
    when the strategy lost no update. Mean with the model's 95% range, and the P90 of single runs'
    expected losses; with ``results``, each run at its own PLS, failure position and restored-state
    age (else at the mean and P90 PLS, mid-training, fresh state)."""
    if not (est["pls"].mean > 0):
        return None
    from cprsim.calibrate.calibration import calibration_for
    from cprsim.planner.accuracy import plan_accuracy

    model = calibration if calibration is not None else calibration_for(s)
    out: dict[str, Any] = {
        "calibrated": bool(getattr(model, "calibrated", False)),
        "preset": getattr(model, "provenance", {}).get("preset"),
    }
    for metric in ("auc", "logloss"):
        acc = plan_accuracy(model, metric)
        if results:
            m, lo, hi = acc.mean_loss(results, s.strategy.name)
            p90 = float(np.percentile(acc.run_losses(results, s.strategy.name)[0], 90))
        else:
            m, lo, hi = acc.loss(est["pls"].mean, s.strategy.name)
            p90 = acc.loss(est["pls"].p90, s.strategy.name)[0]
        rng = acc.measured_range(s.strategy.name)
        out[metric] = {
            "mean": m,
            "ci95": [lo, hi],
            "p90": p90,
            "model": acc.description,
            "calibrated_pls_range": [0.0, rng] if rng is not None else None,
            "extrapolated": rng is not None and est["pls"].p90 > rng,
        }
    return out


def footprint(s: Scenario) -> dict[str, float] | None:
    """What the strategy writes and stores against full checkpoints (strategies that say: Check-N-Run)."""
    from cprsim.costs import costs_of
    from cprsim.sim import strategies

    cls = strategies.get(s.strategy.name)
    describe = getattr(cls, "describe", None)
    return describe(s, costs_of(s)) if describe is not None else None


def versions() -> dict[str, str]:
    """The Python and package versions behind a result, for ``summary.json`` and a sweep's
    ``manifest.json`` (read from the installed metadata, nothing imported)."""
    import platform
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version(), "cprsim": __version__}
    for name in ("numpy", "scipy", "simpy"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:  # pragma: no cover (all three are dependencies)
            out[name] = "unknown"
    return out


def summary_dict(s: Scenario, results: Sequence[ReplicationResult]) -> dict[str, Any]:
    """summary.json's document: the versions, the scenario's settings, every metric's estimate, the
    badput by cause, the accuracy loss, the strategy's footprint, and the definitions."""
    est = summarize(results)
    return {
        "cprsim_version": __version__,
        "versions": versions(),
        "scenario": s.name,
        "strategy": s.strategy.name,
        "interval_h": s.checkpoint.interval_h,
        "seed": s.seed,
        "replications": len(results),
        "failure_free_s": s.duration_s,
        "failure_start": s.failures.start,
        "metrics": {k: e.as_dict() for k, e in est.items()},
        "badput": badput(results),
        "accuracy_loss": accuracy(s, est, results=results),
        "strategy_footprint": footprint(s),
        "definitions": {
            **metrics.definitions(),
            "badput": "wall - W by cause (mean seconds, P90 of single runs, share of wall - W): detection and "
            "waiting for a machine (node lifecycle), replacement (swap-in, host selection, or the "
            "[reschedule] time), load, re-execution, save stalls, degraded progress",
            "p50/p90/p99": "percentiles of single replications (the spread of runs; ci95 is the mean's); "
            "beside the median, each metric's bad tail: p90 and p99 of a cost (the worst 10% and 1% "
            "of runs are at or above them)",
            "p10/p1": "the bad tail of a metric where higher is better (ettr): the worst 10% and 1% "
            "of runs are at or below them",
        },
    }


def _value(v: float, kind: str) -> str:
    """One value as the table shows it: times in hours (the unit is in the row's label)."""
    if kind == "time":
        return f"{v / HOUR:.3f}"
    if kind == "pct":
        return f"{100 * v:.3f}%"
    if kind == "frac":
        return f"{v:.5f}"
    return f"{v:.2f}"


def summary_table(
    s: Scenario,
    results: Sequence[ReplicationResult],
    title: str | None = None,
    summary: dict[str, Any] | None = None,
):
    """The runs as a table (under 100 columns): each metric's mean, 95% CI of the mean, share of
    the failure-free time W (times), and the P50 and the worst 10% and 1% of single runs (a cost's
    P90 and P99, ETTR's P10 and P1: :data:`TAIL_HEADERS`); ``summary`` (from ``summary_dict``)
    spares recomputing the accuracy."""
    from rich import box
    from rich.table import Table

    est = summarize(results)
    W = s.duration_s
    t = Table(
        title=title
        or f"{s.name}: {s.strategy.name}, interval {s.checkpoint.interval_h:.4g} h, "
        f"{len(results)} replications, seed {s.seed}",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        collapse_padding=True,
    )
    t.add_column("metric")
    t.add_column("mean", justify="right")
    t.add_column("95% CI", justify="right")
    t.add_column("% of W", justify="right")
    for q in ("P50", *TAIL_HEADERS):
        t.add_column(q, justify="right")
    for key, label, kind in rows(s):
        e = est[key]
        t.add_row(
            f"{label} (h)" if kind == "time" else label,
            _value(e.mean, kind),
            f"[{_value(e.lo, kind)}, {_value(e.hi, kind)}]",
            f"{100 * e.mean / W:.2f}%" if kind == "time" else "",
            *(_value(v, kind) for v in (e.p50, e.worst10, e.worst1)),
        )
    acc = summary["accuracy_loss"] if summary is not None else accuracy(s, est, results=results)
    t.caption = TAIL_CAPTION
    if acc is not None:
        t.caption += (
            "; accuracy: the calibration's model at each run's PLS, CI of its slope; (!) P90 PLS "
            "unmeasured"
        )
        for metric in ("auc", "logloss"):
            a = acc[metric]
            name = "AUC loss" if metric == "auc" else "log-loss increase"
            t.add_row(
                f"{name} from PLS" + ("" if acc["calibrated"] else " (UNCALIBRATED)"),
                f"{a['mean']:.2g}",
                f"[{a['ci95'][0]:.2g}, {a['ci95'][1]:.2g}]",
                "",
                "",
                f"{a['p90']:.2g}" + (" (!)" if a["extrapolated"] else ""),
                "",
            )
    return t
