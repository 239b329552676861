"""Whether one calibration seed could move a plan: the plan made again with the calibration's
accuracy model refitted without each seed (issue 24: "leave-one-seed-out refits keep the same
choice and the plan's interval moves by at most one grid step").

The calibration file's own ``[model.<metric>.stability]`` is a proxy that needs no scenario: it
compares each refit's PLS bound at reference covariates. This is the check itself, for one
scenario and bound: each refit (:func:`cprsim.calibrate.accuracy.model_table` on the points of
the other seeds) is a calibration of its own, and :func:`cprsim.planner.make_plan` runs with it on
the same scenario, bound and settings (the same simulated replications: common random numbers).
A refit keeps the plan when it recommends the same option or has it tied with its own
recommendation (the planner cannot tell them apart), and that option's interval is compared in
steps of the planner's interval grid (``2^(1/4)``). One plan per seed: with 24 seeds, 24 times
the plan's time.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import Any

from cprsim.planner.search import cp_lower

#: the planner's interval grid step (``1 h x 2^(j/4)``)
GRID_STEP = 2.0**0.25


def refits_without_each_seed(cal: Any) -> list[tuple[int, Any]]:
    """``(seed, calibration)`` for each seed of ``cal``'s measured points: the calibration with
    that seed's runs left out and its ``[model]`` chosen again (no stability check of its own).
    A calibration without points, or with fewer than 3 seeds, raises :class:`InputError`."""
    from cprsim.calibrate.accuracy import model_table
    from cprsim.calibrate.calibration import from_doc
    from cprsim.errors import InputError

    points = cal.raw.get("points")
    if not isinstance(points, dict) or not points:
        raise InputError(
            "calibration: no measured [points] to refit (a stability check needs the runs)"
        )
    seeds = sorted({int(x) for cols in points.values() for x in cols.get("seed", [])})
    if len(seeds) < 3:
        raise InputError(
            f"calibration: {len(seeds)} seed(s): leaving one out needs at least 3 to refit on"
        )
    out = []
    for seed in seeds:
        doc = copy.deepcopy(cal.raw)
        for st, cols in doc["points"].items():
            keep = [i for i, x in enumerate(cols["seed"]) if int(x) != seed]
            doc["points"][st] = {k: [v[i] for i in keep] for k, v in cols.items()}
        doc["model"] = model_table(doc["points"])
        out.append((seed, from_doc(doc, f"calibration without seed {seed}")))
    return out


def grid_steps(a: float, b: float) -> int:
    """How many grid steps (:data:`GRID_STEP`) interval ``b`` lies from interval ``a``."""
    return round(math.log(b / a) / math.log(GRID_STEP))


def plan_stability(
    plan_again: Callable[[Any], Any],
    reference: Any,
    cal: Any,
    judge: Callable[[Any], tuple[int, int]] | None = None,
    confidence: float | None = None,
) -> dict[str, Any]:
    """The plan ``reference`` made again (``plan_again(calibration)``) with each of
    :func:`refits_without_each_seed` of ``cal``. Per refit: its recommendation and that option's
    interval and mean overhead; the reference's option as the refit plans it (``option_interval_h``,
    ``steps``: grid steps from the reference's interval, None where the refit cannot plan it); and
    whether the refit keeps the reference's option: recommends it, or has it tied with its own
    recommendation (the 95% CIs of their overheads overlap: the planner's own rule for options it
    cannot tell apart, of which it recommends the simplest). ``kept``: refits that keep it
    (``same``: of them, those that recommend it), ``max_steps``: the largest move of its interval
    among all refits, ``overhead_range``: the refits' recommendations' smallest and largest mean
    overhead, ``stable``: every refit keeps it and its interval moves by at most one grid step.

    ``judge(calibration)``: (runs within, runs) of the reference's own option on its confirmation
    runs, judged with a refit's accuracy model (the option as planned here: the reference plan's
    loss scale and PLS cap, only the accuracy model refitted); with it each row has ``promise_within``,
    ``promise_runs`` and ``promise_lo`` (the one-sided 95% Clopper-Pearson lower bound), and
    ``promise`` sums them up: ``kept``, the refits whose bound is at least ``confidence`` (they
    would confirm the reference plan as it is), and the range of runs within. Where a flat share
    of runs within makes the longest interval that passes move, this says whether any one seed
    could break the promise of the plan the user runs."""
    rec = reference.option(reference.recommended)
    rows = []
    for seed, c in refits_without_each_seed(cal):
        p = plan_again(c)
        o = p.option(p.recommended)
        mine = next((x for x in p.options if x.label == rec.label), None)
        secs = mine.interval_s if mine is not None else math.nan
        planned = math.isfinite(secs) and secs > 0
        rows.append(
            {
                "seed_left_out": seed,
                "recommended": o.label,
                "interval_h": o.interval_s / 3600.0,
                "full_interval_h": o.full_interval_s / 3600.0,
                "overhead": o.overhead.mean,
                "option_interval_h": secs / 3600.0 if planned else None,
                "steps": grid_steps(rec.interval_s, secs) if planned else None,
                "tied_in_refit": rec.label in p.tied,
                "keeps": o.label == rec.label or rec.label in p.tied,
            }
        )
        if judge is not None:
            k, n = judge(c)
            rows[-1].update(promise_within=k, promise_runs=n, promise_lo=cp_lower(k, n))
    kept = sum(r["keeps"] for r in rows)
    moves = [abs(r["steps"]) if r["steps"] is not None else math.inf for r in rows]
    max_steps = max(moves, default=0)
    return {
        "check": "leave one calibration seed out, refit the accuracy model, plan again",
        "recommended": rec.label,
        "interval_h": rec.interval_s / 3600.0,
        "overhead": rec.overhead.mean,
        "refits": rows,
        "kept": kept,
        "same": sum(r["recommended"] == rec.label for r in rows),
        "max_steps": max_steps if math.isfinite(max_steps) else None,
        "overhead_range": [
            min((r["overhead"] for r in rows), default=rec.overhead.mean),
            max((r["overhead"] for r in rows), default=rec.overhead.mean),
        ],
        "stable": kept == len(rows) and max_steps <= 1,
        "promise": _promise(rows, confidence) if judge is not None else None,
    }


def _promise(rows: list[dict[str, Any]], confidence: float | None) -> dict[str, Any]:
    """:func:`plan_stability`'s ``promise``: the reference option as the refits judge it."""
    q = confidence if confidence is not None else math.nan
    return {
        "runs": rows[0]["promise_runs"] if rows else 0,
        "confidence": confidence,
        "kept": sum(r["promise_lo"] >= q for r in rows),
        "within_range": [
            min((r["promise_within"] for r in rows), default=0),
            max((r["promise_within"] for r in rows), default=0),
        ],
        "lo_min": min((r["promise_lo"] for r in rows), default=math.nan),
    }
