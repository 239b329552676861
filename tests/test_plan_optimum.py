"""The simulated optimum of full recovery is never reported worse than a candidate it was compared
with on the same confirmation replications (issue 25): by hand on constructed options, and on real
plans of the built-in toy and cpr-production scenarios."""

from __future__ import annotations

import numpy as np
import pytest

from cprsim import scenario as sc
from cprsim.planner import _optimum_not_worse, make_plan
from cprsim.planner.records import Option
from cprsim.sim.replicate import estimate


def _opt(label: str, tau: float, overheads: list[float], note: str = "") -> Option:
    e = estimate(np.asarray(overheads))
    return Option(label, "full", tau, {}, 0.1, 0.0, e, e, estimate(np.zeros(3)), 0.0, True, note)


def test_a_worse_optimum_is_replaced_by_the_better_candidate_and_says_so():
    young = _opt("full (Young)", 3600.0, [0.10, 0.11, 0.12])
    daly = _opt("full (Daly)", 3400.0, [0.09, 0.10, 0.11])
    worse = _opt("full (simulated optimum)", 5000.0, [0.105, 0.115, 0.125], "grid search")
    got = _optimum_not_worse(worse, [young, daly])
    assert got.label == "full (simulated optimum)"
    assert got.interval_s == daly.interval_s and got.overhead == daly.overhead
    assert "83.3 min: grid search" in got.note and "flat within" in got.note
    assert "full (Daly)'s 10%" in got.note
    better = _opt("full (simulated optimum)", 3000.0, [0.08, 0.09, 0.10], "grid search")
    assert _optimum_not_worse(better, [young, daly]) is better  # kept as found
    equal = _opt("full (simulated optimum)", 3400.0, [0.09, 0.10, 0.11], "grid search")
    assert _optimum_not_worse(equal, [young, daly]) is equal  # a tie is no worse


@pytest.mark.parametrize("name", ["toy", "cpr-production"])
def test_no_plan_reports_an_optimum_worse_than_young_or_daly(name):
    s = sc.load(name)
    plan = make_plan(
        s, 0.001, replications=60, search_replications=60, strategies=(), confidence=None
    )
    by = {o.label: o for o in plan.options}
    opt = by["full (simulated optimum)"]
    assert opt.overhead.mean <= min(
        by["full (Young)"].overhead.mean, by["full (Daly)"].overhead.mean
    )
