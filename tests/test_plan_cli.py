"""`cprsim plan` and `cprsim access` through the command line."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from cprsim.cli import main

QUICK = [
    "plan",
    "--embedding-servers",
    "16",
    "--trainers",
    "8",
    "--node-mtbf-h",
    "2000",
    "--save-s",
    "120",
    "--load-s",
    "60",
    "--samples-per-s",
    "1e5",
    "--duration-h",
    "20",
    "-n",
    "40",
    "--search-replications",
    "40",
]


@pytest.mark.slow
def test_quick_form_plans_and_writes_json(tmp_path):
    out = tmp_path / "plan.json"
    r = CliRunner().invoke(
        main, QUICK + ["--max-accuracy-loss", "0.001", "--json", "--out", str(out)]
    )
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert json.loads(out.read_text()) == d
    assert d["scenario"] == "quick-form"  # not "quick", the calibration preset's name
    labels = [o["label"] for o in d["options"]]
    assert labels[:3] == ["full (Young)", "full (Daly)", "full (simulated optimum)"]
    assert d["recommended"] in labels
    rec = next(o for o in d["options"] if o["label"] == d["recommended"])
    assert rec["meets_bound"]
    # no option that meets the bound is significantly cheaper than the recommendation
    for o in d["options"]:
        if o["meets_bound"] and not o["oracle"]:
            assert o["overhead"]["ci95"][1] >= rec["overhead"]["ci95"][0]
    # tails and ETTR beside every mean
    for o in d["options"]:
        assert {"p50", "p90", "p99"} <= set(o["overhead"]) and 0 < o["ettr"]["mean"] <= 1


def test_the_plan_says_when_it_rests_on_an_uncalibrated_model(tmp_path):
    cal = tmp_path / "cal.toml"
    cal.write_text(
        '[provenance]\ncalibrated = false\nsource = "test"\n\n[fit.partial]\n'
        + "".join(
            f"{m}_slope{s} = {v}\n"
            for m in ("auc", "logloss")
            for s, v in (("", 0.02), ("_hi", 0.03))
        )
    )
    r = CliRunner().invoke(
        main, QUICK + ["--max-accuracy-loss", "0.001", "--calibration", str(cal)]
    )
    assert r.exit_code == 0, r.output
    assert "UNCALIBRATED" in r.output and "Recommendation" in r.output


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--max-accuracy-loss", "-0.01"], "max-accuracy-loss"),
        (["--max-accuracy-loss", "nan"], "max-accuracy-loss"),
        (["--max-accuracy-loss", "0.001", "--strategies", "partial,bogus"], "bogus"),
        (["--max-accuracy-loss", "0.001", "--metric", "accuracy"], "accuracy"),
    ],
)
def test_plan_refuses_bad_input_in_one_line(args, needle, one_line_error):
    assert needle in one_line_error(CliRunner().invoke(main, QUICK + args))


def test_plan_without_scenario_or_quick_options_says_what_is_missing(one_line_error):
    line = one_line_error(CliRunner().invoke(main, ["plan", "--max-accuracy-loss", "0.001"]))
    assert "--node-mtbf-h" in line


@pytest.mark.slow
def test_access_prints_and_plots(tmp_path):
    png = tmp_path / "a.png"
    r = CliRunner().invoke(
        main, ["access", "--table-scale", "100", "--samples", "1e3,1e5", "--plot", str(png)]
    )
    assert r.exit_code == 0, r.output
    assert "top 1% of rows take 92.0% of accesses" in " ".join(r.output.split())
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    "args", [["--skew", "0.01"], ["--skew", "0.5:0.1"], ["--counts", "missing.csv"]]
)
def test_access_bad_input(args, one_line_error):
    one_line_error(CliRunner().invoke(main, ["access", *args]))


@pytest.mark.slow
def test_the_sensitivity_table_is_the_plan_of_a_model_that_loses_k_times_more(tmp_path):
    """`--sensitivity 4`: the row for k = 4 is the plan the planner makes with a calibration whose
    loss per unit PLS is 4x the shipped one (coefficients x4, their covariance and the single-run
    variance x16, measured losses x4): same recommendation, same intervals."""
    import json
    import tomllib

    from cprsim.calibrate.calibration import default_path, to_toml

    path = default_path()
    assert path is not None
    doc = tomllib.loads(path.read_text())
    k = 4.0
    for metric in ("auc", "logloss"):
        for c in doc["model"][metric]["coef"].values():
            c["b"] = [k * x for x in c["b"]]
            c["cov"] = [[k * k * x for x in row] for row in c["cov"]]
            c["rss"] *= k * k
            if "resid_var" in c:
                c["resid_var"] = [k * k * x for x in c["resid_var"]]
        for p in doc["points"].values():
            p[f"d_{metric}"] = [k * x for x in p[f"d_{metric}"]]
    scaled = tmp_path / "scaled.toml"
    scaled.write_text(to_toml(doc))
    common = ["plan", "toy", "-n", "40", "--search-replications", "40", "--json"]
    r = CliRunner().invoke(main, [*common, "--max-accuracy-loss", "0.001", "--sensitivity", "4"])
    assert r.exit_code == 0, r.output
    row = json.loads(r.output)["sensitivity"][0]
    assert row["factor"] == 4.0 and row["accuracy_bound"] == pytest.approx(0.00025)
    r = CliRunner().invoke(
        main, [*common, "--max-accuracy-loss", "0.001", "--calibration", str(scaled)]
    )
    assert r.exit_code == 0, r.output
    other = json.loads(r.output)
    assert other["recommended"] == row["recommended"]
    mine = {o["label"]: o for o in other["options"] if o["pls_bound"] is not None}
    assert set(mine) == {o["label"] for o in row["options"]}
    for o in row["options"]:
        assert mine[o["label"]]["interval_h"] == pytest.approx(o["interval_h"])
        assert mine[o["label"]]["meets_bound"] == o["meets_bound"]


def test_sensitivity_factors_must_be_positive():
    r = CliRunner().invoke(
        main, ["plan", "toy", "--max-accuracy-loss", "0.001", "--sensitivity", "2,-1"]
    )
    assert r.exit_code == 2 and "--sensitivity" in r.output and "'-1'" in r.output
