"""The calibration's scale ladder in the plan: which loss per unit PLS a plan assumes for the user's
model (``cprsim.planner.accuracy.ladder_scale``), what the factor does to the accuracy model, and the
plan's statement of it (``--model-rows``, ``--loss-scale``, ``plan.scale``, the notes)."""

from __future__ import annotations

import dataclasses
import json
import math
from types import SimpleNamespace

import numpy as np
import pytest

from cprsim.calibrate.calibration import load_calibration, to_toml
from cprsim.planner.accuracy import ladder_scale, plan_accuracy

REF_ROWS = 33_798


def _rung(rows: int, ratio: float, real: bool = False) -> dict:
    """A rung as ``cprsim.calibrate.pipeline.scale_table`` writes it."""
    return {
        "preset": "p",
        "embedding_rows": rows,
        "train_samples": 1_000_000,
        "real_data": real,
        "data": "d",
        "seeds": [0, 1, 2],
        "auc_slope": 0.01 * ratio,
        "auc_slope_lo": 0.005 * ratio,
        "auc_slope_hi": 0.015 * ratio,
        "auc_ratio": ratio,
        "auc_ratio_lo": ratio / 2,
        "auc_ratio_hi": ratio * 2,
        "logloss_ratio": ratio,
        "logloss_ratio_lo": ratio / 2,
        "logloss_ratio_hi": ratio * 2,
    }


def _ladder(**rungs: dict) -> dict:
    ref = {**_rung(REF_ROWS, 1.0), "data": "ref"}
    for k in [k for k in ref if "_ratio" in k]:
        del ref[k]
    return {"scale": {"reference": ref, **rungs}}


LADDER = _ladder(
    **{
        "rows-x10": _rung(10 * REF_ROWS, 2.0),
        "rows-x100": _rung(100 * REF_ROWS, 1.5),
        "movielens-100k": _rung(2_625, 4.0, real=True),
    }
)


@pytest.mark.parametrize(
    ("rows", "factor", "basis", "outside"),
    [
        (10_000, 4.0, "movielens-100k", ""),  # the real-data rung is smaller: it counts
        (10**9, 4.0, "movielens-100k", "above"),  # beyond every rung: the largest ratio, said so
        (1_000, 4.0, "movielens-100k", "below"),  # real data counts whatever the size
        (None, 4.0, "movielens-100k", ""),  # rows unknown: every rung counts
    ],
)
def test_the_largest_ratio_on_a_model_no_larger_than_yours(rows, factor, basis, outside):
    sc = ladder_scale(LADDER, "auc", rows)
    assert (sc["factor"], sc["basis"], sc["outside"]) == (factor, basis, outside)
    assert sc["measured_rows"] == [2_625, 100 * REF_ROWS]


def test_the_synthetic_ladder_alone_follows_the_rows():
    raw = _ladder(
        **{"rows-x10": _rung(10 * REF_ROWS, 2.0), "rows-x100": _rung(100 * REF_ROWS, 3.0)}
    )
    assert ladder_scale(raw, "auc", 5 * REF_ROWS)["factor"] == 1.0
    assert ladder_scale(raw, "auc", 10 * REF_ROWS)["basis"] == "rows-x10"
    assert ladder_scale(raw, "auc", 100 * REF_ROWS)["factor"] == 3.0


def test_a_length_rung_is_reported_not_applied_and_the_factor_never_falls_with_the_rows():
    half = {**_rung(REF_ROWS, 5.0), "train_samples": 500_000}
    raw = _ladder(**{"half-length": half, "rows-x10": _rung(10 * REF_ROWS, 2.0)})
    sc = ladder_scale(raw, "auc", 10**9)
    assert sc["factor"] == 2.0 and {r["name"]: r["kind"] for r in sc["rungs"]}["half-length"] == (
        "length"
    )
    grid = [10**k for k in range(2, 11)]
    for ladder in (raw, LADDER):
        factors = [ladder_scale(ladder, "auc", n)["factor"] for n in grid]
        assert factors == sorted(factors)


def test_never_below_the_calibration_and_the_users_factor_wins():
    raw = _ladder(**{"rows-x10": _rung(10 * REF_ROWS, 0.5)})
    assert ladder_scale(raw, "auc", 10**9)[("factor")] == 1.0
    sc = ladder_scale(raw, "auc", 10**9, override=3.0)
    assert (sc["factor"], sc["basis"], sc["outside"]) == (3.0, "user", "above")


def test_a_calibration_without_a_ladder_is_taken_as_measured():
    sc = ladder_scale({"provenance": {}}, "auc", 10**9)
    assert (sc["factor"], sc["basis"], sc["measured_rows"], sc["outside"]) == (
        1.0,
        "reference",
        [None, None],
        "",
    )
    sc = ladder_scale({"provenance": {"embedding_rows": 100}}, "auc", 10**9)
    assert sc["measured_rows"] == [100, 100] and sc["outside"] == "above"


def test_a_scaled_model_is_the_calibrated_one_at_the_bound_divided():
    acc = plan_accuracy(load_calibration(), "auc")
    k = 3.0
    big = dataclasses.replace(acc, scale=k)
    for st in ("partial", "mfu"):
        for q in (0.9, None):
            assert math.isclose(big.pls_bound(0.003, st, q), acc.pls_bound(0.001, st, q))
        m0, lo0, hi0 = acc.loss(0.1, st)
        assert np.allclose(big.loss(0.1, st), (k * m0, k * lo0, k * hi0))
    runs = [SimpleNamespace(pls=p, replication=i) for i, p in enumerate((0.0, 0.05, 0.2))]
    assert np.allclose(big.run_draws(runs, "partial", 7), k * acc.run_draws(runs, "partial", 7))
    assert np.allclose(big.mean_loss(runs, "partial"), k * np.array(acc.mean_loss(runs, "partial")))
    assert np.allclose(
        big.run_losses(runs, "partial"), k * np.array(acc.run_losses(runs, "partial"))
    )


@pytest.fixture(scope="module")
def laddered(tmp_path_factory):
    """The shipped calibration with a scale ladder whose smallest rung is 4x its loss per PLS."""
    raw = dict(load_calibration().raw)
    raw["scale"] = _ladder(**{"rows-x10": _rung(10 * REF_ROWS, 4.0)})["scale"]
    path = tmp_path_factory.mktemp("cal") / "calibration.toml"
    path.write_text(to_toml(raw))
    return path


QUICK = ("--strategies", "partial", "--replications", "40", "--search-replications", "40")


@pytest.mark.slow
def test_the_plan_assumes_the_ladders_factor_and_says_so(cli, laddered):
    r = cli("plan", "toy", "--max-accuracy-loss", "0.001", "--calibration", laddered, *QUICK)
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    # the toy scenario's model is far larger than the ladder's largest rung: outside, said plainly
    assert "figures assume 4x the calibrated loss per unit PLS (rung rows-x10)" in text
    assert "OUTSIDE what was measured" in text and "WARNING: your model" in text
    r = cli(
        "plan", "toy", "--max-accuracy-loss", "0.001", "--calibration", laddered, *QUICK,
        "--model-rows", str(REF_ROWS), "--json",
    )  # fmt: skip
    plan = json.loads(r.output)
    assert plan["scale"]["factor"] == 1.0 and plan["scale"]["rows_from"] == "given"
    acc = plan_accuracy(load_calibration(laddered), "auc")
    assert math.isclose(plan["pls_bound"], acc.pls_bound(0.001, "partial", 0.9))


@pytest.mark.slow
def test_a_loss_scale_is_the_bound_divided(cli):
    """--loss-scale k plans as the calibrated model would for the bound / k: the same PLS bounds
    (an oracle computed from the model) and the same recommendation."""
    r = cli("plan", "toy", "--max-accuracy-loss", "0.002", "--loss-scale", "2", *QUICK, "--json")
    assert r.exit_code == 0, r.output
    scaled = json.loads(r.output)
    r = cli("plan", "toy", "--max-accuracy-loss", "0.001", "--loss-scale", "1", *QUICK, "--json")
    plain = json.loads(r.output)
    assert scaled["scale"]["factor"] == 2.0 and scaled["scale"]["basis"] == "user"
    acc = plan_accuracy(load_calibration(), "auc")
    assert math.isclose(scaled["pls_bound"], acc.pls_bound(0.001, "partial", 0.9))
    assert scaled["pls_bound"] == plain["pls_bound"]
    assert [o["interval_h"] for o in scaled["options"]] == [
        o["interval_h"] for o in plain["options"]
    ]
    assert scaled["recommended"] == plain["recommended"]


def test_bad_model_characteristics_are_refused(cli, one_line_error):
    one_line_error(cli("plan", "toy", "--max-accuracy-loss", "0.001", "--loss-scale", "0"))
    one_line_error(cli("plan", "toy", "--max-accuracy-loss", "0.001", "--model-rows", "-3"))
    from cprsim.api import load_scenario
    from cprsim.errors import InputError
    from cprsim.planner import make_plan

    s = load_scenario("toy")
    for kw in ({"loss_scale": math.nan}, {"loss_scale": -1.0}, {"model_rows": 0}):
        with pytest.raises(InputError):
            make_plan(s, 0.001, **kw)


@pytest.mark.parametrize("n", [29, 40, 60, 100, 200, 400])
def test_the_search_proves_the_share_a_small_confirmation_needs(n):
    """search_share: a search whose runs within the bound are at the share it asks for passes a
    confirmation of n fresh runs at least half the time (binomial oracle), one run fewer does not
    (unless proving q itself asks for more); a large confirmation asks no more than q."""
    from scipy import stats

    from cprsim.planner.search import min_successes, search_share

    ns = max(200, n // 2)
    q = search_share(0.9, n, ns)
    k = min_successes(ns, q)
    need = min_successes(n, 0.9)
    assert k is not None and need is not None and q >= 0.9
    assert stats.binom.sf(need - 1, n, k / ns) >= 0.5
    if k > min_successes(ns, 0.9):
        assert stats.binom.sf(need - 1, n, (k - 1) / ns) < 0.5
    if n >= 400:
        assert q == 0.9


def test_calibrate_show_prints_the_fits_and_the_ladder(cli, laddered, one_line_error):
    r = cli("calibrate", "--show", laddered)
    assert r.exit_code == 0, r.output
    assert "planner's auc model" in r.output and "scale ladder" in r.output
    rung = next(line for line in r.output.splitlines() if line.strip().startswith("rows-x10"))
    assert f"{10 * REF_ROWS:,} rows" in rung and "ratio 4 [2, 8]" in rung
    r = cli("calibrate", "--show", "shipped")
    assert r.exit_code == 0 and "preset" in r.output, r.output
    one_line_error(cli("calibrate", "--show", laddered.parent / "missing.toml"))


@pytest.mark.parametrize(
    ("rung", "key", "value"),
    [
        ("rows-x10", "embedding_rows", "2.7k"),
        ("rows-x10", "embedding_rows", 0),
        ("rows-x10", "auc_ratio", math.nan),
        ("rows-x10", "auc_ratio", -1.0),
        ("rows-x10", "logloss_ratio_lo", True),
        ("reference", "train_samples", 1.5),
        ("rows-x10", "real_data", "yes"),
    ],
)
def test_a_damaged_ladder_is_a_one_line_error_naming_the_key(
    cli, one_line_error, laddered, tmp_path, rung, key, value
):
    import tomllib

    raw = tomllib.loads(laddered.read_text())
    raw["scale"][rung][key] = value
    path = tmp_path / "bad.toml"
    path.write_text(to_toml(raw))
    for args in (
        ("calibrate", "--show", path),
        ("plan", "toy", "--max-accuracy-loss", "0.001", "--calibration", path),
    ):
        line = one_line_error(cli(*args))
        assert f"scale.{rung}.{key}" in line


def test_the_apis_pls_bound_takes_the_plans_factor():
    from cprsim.api import pls_bound
    from cprsim.errors import InputError

    assert math.isclose(pls_bound(0.003, loss_scale=3.0), pls_bound(0.001))
    for bad in (0.0, math.inf, True):
        with pytest.raises(InputError, match="loss_scale"):
            pls_bound(0.001, loss_scale=bad)
