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
    assert st["kept"] == sum(x["recommended"] == d["recommended"] for x in st["refits"])
    assert st["max_steps"] == max(abs(x["steps"]) for x in st["refits"])
    assert st["stable"] == (st["kept"] == n and st["max_steps"] <= 1)
    rec = next(o for o in d["options"] if o["label"] == d["recommended"])
    assert st["overhead"] == rec["overhead"]["mean"]
    assert st["overhead_range"] == [
        min(x["overhead"] for x in st["refits"]),
        max(x["overhead"] for x in st["refits"]),
    ]
    for x in st["refits"]:
        assert x["steps"] == round(4 * math.log2(x["interval_h"] / rec["interval_h"]))
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
