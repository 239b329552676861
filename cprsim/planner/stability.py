"""Whether one calibration seed could move a plan: the plan made again with the calibration's
accuracy model refitted without each seed (issue 24: "leave-one-seed-out refits keep the same
choice and the plan's interval moves by at most one grid step").

The calibration file's own ``[model.<metric>.stability]`` is a proxy that needs no scenario: it
compares each refit's PLS bound at reference covariates. This is the check itself, for one
scenario and bound: each refit (:func:`cprsim.calibrate.accuracy.model_table` on the points of
the other seeds) is a calibration of its own, and :func:`cprsim.planner.make_plan` runs with it on
the same scenario, bound and settings (the same simulated replications: common random numbers).
The recommendation's interval is compared in steps of the planner's interval grid
(``2^(1/4)``). One plan per seed: with 8 or 16 seeds, 8 or 16 times the plan's time.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import Any

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


def plan_stability(plan_again: Callable[[Any], Any], reference: Any, cal: Any) -> dict[str, Any]:
    """The plan ``reference`` made again (``plan_again(calibration)``) with each of
    :func:`refits_without_each_seed` of ``cal``: per refit the recommendation and its interval
    (hours, and grid steps from the reference's) and mean overhead; ``kept``: refits recommending
    the same option, ``max_steps``: the largest move of the interval among them, ``overhead_range``:
    the refits' smallest and largest mean overhead (what a move costs or saves), ``stable``: every
    refit keeps the option and its interval within one grid step."""
    rec = reference.option(reference.recommended)
    rows = []
    for seed, c in refits_without_each_seed(cal):
        p = plan_again(c)
        o = p.option(p.recommended)
        rows.append(
            {
                "seed_left_out": seed,
                "recommended": o.label,
                "interval_h": o.interval_s / 3600.0,
                "full_interval_h": o.full_interval_s / 3600.0,
                "steps": grid_steps(rec.interval_s, o.interval_s),
                "overhead": o.overhead.mean,
            }
        )
    kept = sum(r["recommended"] == rec.label for r in rows)
    max_steps = max((abs(r["steps"]) for r in rows), default=0)
    return {
        "check": "leave one calibration seed out, refit the accuracy model, plan again",
        "recommended": rec.label,
        "interval_h": rec.interval_s / 3600.0,
        "overhead": rec.overhead.mean,
        "refits": rows,
        "kept": kept,
        "max_steps": max_steps,
        "overhead_range": [
            min((r["overhead"] for r in rows), default=rec.overhead.mean),
            max((r["overhead"] for r in rows), default=rec.overhead.mean),
        ],
        "stable": kept == len(rows) and max_steps <= 1,
    }
