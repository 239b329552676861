"""The plan-level stability check (issue 24): the plan made again with the calibration's accuracy
model refitted without each seed; the recommendation and its interval's move in grid steps."""

from __future__ import annotations

import json
import math

import pytest
from click.testing import CliRunner

from cprsim import scenario as sc
from cprsim.calibrate.calibration import load_calibration, matched_path
from cprsim.cli import main
from cprsim.errors import InputError
from cprsim.planner import make_plan
from cprsim.planner.stability import GRID_STEP, grid_steps, refits_without_each_seed


def test_grid_steps_count_the_planners_grid():
    assert grid_steps(3600.0, 3600.0) == 0
    assert grid_steps(3600.0, 3600.0 * GRID_STEP) == 1
    assert grid_steps(3600.0, 3600.0 / GRID_STEP**3) == -3
    assert grid_steps(3600.0, 7200.0) == 4


def test_a_refit_keeps_the_plan_when_it_recommends_the_option_or_has_it_tied(monkeypatch):
    """The verdict's rule on made-up plans: a refit that recommends another option but has the
    reference's tied with it keeps the plan; one that does not list it as tied, or cannot plan it,
    does not; the interval compared is the reference option's, as the refit plans it."""
    from types import SimpleNamespace as NS

    from cprsim.planner import stability

    def opt(label, hours, mean):
        return NS(
            label=label, interval_s=hours * 3600.0, full_interval_s=7200.0, overhead=NS(mean=mean)
        )

    def plan(rec, tied, *opts):
        return NS(
            recommended=rec,
            tied=tied,
            options=opts,
            option=lambda lab: next(o for o in opts if o.label == lab),
        )

    ref = plan("A", (), opt("A", 1.0, 0.10), opt("B", 2.0, 0.11))
    refits = {
        1: plan("A", (), opt("A", GRID_STEP, 0.10), opt("B", 2.0, 0.11)),
        2: plan("B", ("A",), opt("A", 1.0, 0.10), opt("B", 2.0, 0.09)),
    }
    monkeypatch.setattr(stability, "refits_without_each_seed", lambda cal: list(refits.items()))
    st = stability.plan_stability(lambda c: c, ref, None)
    assert (st["kept"], st["same"], st["max_steps"], st["stable"]) == (2, 1, 1, True)
    assert [r["steps"] for r in st["refits"]] == [1, 0]
    assert st["overhead_range"] == [0.09, 0.10]
    refits[2] = plan("B", (), opt("A", 1.0, 0.10), opt("B", 2.0, 0.05))  # B clearly cheaper
    st = stability.plan_stability(lambda c: c, ref, None)
    assert (st["kept"], st["same"], st["stable"]) == (1, 1, False)
    refits[2] = plan("B", (), opt("B", 2.0, 0.05))  # A cannot be planned without seed 2
    st = stability.plan_stability(lambda c: c, ref, None)
    assert st["max_steps"] is None and st["refits"][1]["steps"] is None and not st["stable"]
    refits[2] = plan("A", (), opt("A", GRID_STEP**2, 0.10))  # kept, but two grid steps away
    st = stability.plan_stability(lambda c: c, ref, None)
    assert (st["kept"], st["max_steps"], st["stable"]) == (2, 2, False)


def test_the_promise_as_each_refit_judges_it(monkeypatch):
    """With a judge, each refit row has the reference option's runs within (as that refit's model
    judges them) and their 95% lower bound; ``promise`` counts the refits whose bound reaches the
    plan's confidence: a refit that would not confirm the plan as it is does not count."""
    from types import SimpleNamespace as NS

    from cprsim.planner import stability
    from cprsim.planner.search import cp_lower

    o = NS(label="A", interval_s=3600.0, full_interval_s=7200.0, overhead=NS(mean=0.1))
    ref = NS(recommended="A", tied=(), options=(o,), option=lambda lab: o)
    within = {1: 195, 2: 188, 3: 186}
    monkeypatch.setattr(stability, "refits_without_each_seed", lambda cal: [(s, s) for s in within])
    st = stability.plan_stability(lambda c: ref, ref, None, lambda c: (within[c], 200), 0.9)
    assert [r["promise_within"] for r in st["refits"]] == [195, 188, 186]
    assert [r["promise_lo"] for r in st["refits"]] == [cp_lower(k, 200) for k in (195, 188, 186)]
    pr = st["promise"]
    assert pr["runs"] == 200 and pr["within_range"] == [186, 195]
    # 188 of 200: the lower bound just above 0.9; 186: below it
    assert cp_lower(188, 200) >= 0.9 > cp_lower(186, 200) and pr["kept"] == 2
    assert pr["lo_min"] == cp_lower(186, 200)
    assert stability.plan_stability(lambda c: ref, ref, None)["promise"] is None


@pytest.mark.slow
@pytest.mark.parametrize("modes", [None, ("two-phase",), ("blocking", "tiered")])
def test_the_judge_sees_the_runs_the_plan_confirmed_on(modes):
    """The stability check's judge re-simulates the recommended option's confirmation block, in
    the checkpoint mode it was confirmed in (a tiered option with its persist period): with the
    plan's own calibration it finds exactly the share of runs within the plan reports."""
    from cprsim.calibrate.calibration import calibration_for
    from cprsim.planner import _promise_judge

    s = sc.load("cpr-production")
    plan = make_plan(s, 0.001, checkpoint_modes=modes)
    o = plan.option(plan.recommended)
    assert math.isfinite(o.pls_bound)  # a partial option: a per-run promise to judge
    if modes:
        assert o.checkpoint_mode in modes
    k, n = _promise_judge(plan, s)(calibration_for(s))
    assert n == plan.replications and k == round(o.within * n)


@pytest.mark.slow
def test_each_refit_leaves_exactly_one_seed_out():
    cal = load_calibration(matched_path("cpr-production"))
    seeds = sorted({int(x) for c in cal.raw["points"].values() for x in c["seed"]})
    refits = refits_without_each_seed(cal)
    assert [s for s, _ in refits] == seeds
    for seed, c in refits:
        left = {int(x) for cols in c.raw["points"].values() for x in cols["seed"]}
        assert left == set(seeds) - {seed}
        n = sum(len(cols["seed"]) for cols in c.raw["points"].values())
        assert n < sum(len(cols["seed"]) for cols in cal.raw["points"].values())
        assert "auc" in c.models  # a model chosen again on the rest


def test_a_calibration_without_points_cannot_be_checked(tmp_path):
    from cprsim.calibrate.calibration import placeholder

    with pytest.raises(InputError, match="points"):
        refits_without_each_seed(placeholder())


@pytest.mark.slow
def test_plan_check_stability_replans_once_per_seed():
    """On the toy scenario with the packaged cpr-production calibration: one plan more per seed;
    the report's counts agree with its rows, and `stable` is what its rule says."""
    cal_path = matched_path("cpr-production")
    n = len(load_calibration(cal_path).provenance["seeds"])
    args = ["plan", "toy", "--max-accuracy-loss", "0.001", "--calibration", str(cal_path)]
    args += ["-n", "40", "--search-replications", "40", "--check-stability"]
    r = CliRunner().invoke(main, [*args, "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    st = d["stability"]
    assert len(st["refits"]) == n and st["recommended"] == d["recommended"]
    assert st["same"] == sum(x["recommended"] == d["recommended"] for x in st["refits"])
    assert st["kept"] == sum(x["keeps"] for x in st["refits"]) >= st["same"]
    for x in st["refits"]:  # kept: recommended, or tied with the refit's recommendation
        assert x["keeps"] == (x["recommended"] == d["recommended"] or x["tied_in_refit"])
    if all(x["steps"] is not None for x in st["refits"]):
        assert st["max_steps"] == max(abs(x["steps"]) for x in st["refits"])
    else:
        assert st["max_steps"] is None
    assert st["stable"] == (
        st["kept"] == n and (st["max_steps"] or 0) <= 1 and st["max_steps"] is not None
    )
    rec = next(o for o in d["options"] if o["label"] == d["recommended"])
    assert st["overhead"] == rec["overhead"]["mean"]
    pr = st["promise"]  # the plan's own option judged by each refit (a partial one only)
    if rec["pls_bound"] is None or not math.isfinite(rec["pls_bound"]):
        assert pr is None
    else:
        assert pr["runs"] == 40 and pr["confidence"] == d["confidence"]
        assert pr["kept"] == sum(x["promise_lo"] >= d["confidence"] for x in st["refits"])
    assert st["overhead_range"] == [
        min(x["overhead"] for x in st["refits"]),
        max(x["overhead"] for x in st["refits"]),
    ]
    for x in st["refits"]:  # the reference's option as each refit plans it
        if x["recommended"] == d["recommended"]:
            assert x["option_interval_h"] == x["interval_h"]
        if x["option_interval_h"] is not None:
            assert x["steps"] == round(4 * math.log2(x["option_interval_h"] / rec["interval_h"]))
    # the file's proxy warning (when its record says "not stable") carries this plan's verdict
    file_stable = load_calibration(cal_path).raw["model"]["auc"]["stability"]["stable"]
    warned = [x for x in d["notes"] if x.startswith("WARNING: the auc model's choice")]
    assert len(warned) == (0 if file_stable else 1)
    for x in warned:
        want = "finds it stable" if st["stable"] else "finds it NOT stable"
        assert f"this plan's own check {want} ({st['kept']} of {n} seed refits" in x
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0 and "Stability:" in r.output and f"of {n} keep" in r.output
    assert "mean overhead" in " ".join(r.output.split())
    # the same through the library, and nothing recorded without the flag
    plain = make_plan(
        sc.load("toy"),
        0.001,
        calibration=load_calibration(cal_path),
        replications=40,
        search_replications=40,
    )
    assert plain.stability == {}
