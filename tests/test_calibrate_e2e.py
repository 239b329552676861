"""The end-to-end check of the simulator's cost model (cprsim.calibrate.costs.end_to_end): its
verdict rule on hand-made differences, its simulator side on hand-computable inputs, and one small
real run. No timing is asserted: the real run's figures are checked for consistency only."""

from __future__ import annotations

import dataclasses
import math
import os
import statistics
import tomllib

import pytest

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as `cprsim calibrate` (before torch loads)
torch = pytest.importorskip("torch")
stats = pytest.importorskip("scipy.stats")

from cprsim.calibrate import runner as R  # noqa: E402
from cprsim.calibrate.calibration import to_toml  # noqa: E402
from cprsim.calibrate.costs import E2E_REPEATS, _simulate, e2e_repeats, end_to_end, verdict  # noqa: E402

pytestmark = pytest.mark.dlrm

TINY = dataclasses.replace(
    R.PRESETS["quick"],
    name="tiny-e2e",
    train_samples=16_384,
    test_samples=2_048,
    batch=256,
    seeds=(0,),
    budgets=(0.5,),
)


def _ci(d: list[float], level: float = 0.95) -> tuple[float, float]:
    """Mean +- t(n-1) x sd / sqrt(n), by hand."""
    n = len(d)
    h = stats.t.ppf(0.5 + level / 2, n - 1) * statistics.stdev(d) / math.sqrt(n)
    m = statistics.fmean(d)
    return m - h, m + h


# -- the verdict rule -----------------------------------------------------------------------------
SIM = [0.5, 0.48, 0.52, 0.5, 0.5]  # mean 0.5: the tolerance is 20% of it, 0.1


def test_t_quantile_is_the_textbook_one():
    assert stats.t.ppf(0.975, 4) == pytest.approx(2.776, abs=1e-3)  # a t table's 4-df entry


def test_unbiased_narrow_differences_confirm():
    d = [0.01, -0.02, 0.015, -0.005, 0.0]
    lo, hi = _ci(d)
    v = verdict(d, SIM)
    assert (v["lo"], v["hi"]) == (pytest.approx(lo), pytest.approx(hi))
    assert v["tolerance"] == pytest.approx(0.1) and -0.1 < lo < 0 < hi < 0.1
    assert v["verdict"] == "confirmed" and not v["excludes_zero"]


def test_biased_differences_refute():
    d = [0.30, 0.32, 0.28, 0.31, 0.29]  # measured 30 points above the prediction, consistently
    lo, _hi = _ci(d)
    v = verdict(d, SIM)
    assert lo > 0.1 and v["lo"] == pytest.approx(lo)
    assert v["verdict"] == "refuted" and v["excludes_zero"]
    assert verdict([-x for x in d], SIM)["verdict"] == "refuted"  # below the prediction, too


def test_wide_differences_are_inconclusive():
    d = [0.3, -0.3, 0.25, -0.2, 0.0]  # holds 0, but the CI is wider than the tolerance band
    lo, hi = _ci(d)
    assert lo < -0.1 and hi > 0.1
    assert verdict(d, SIM)["verdict"] == "inconclusive"


def test_small_but_significant_difference_within_tolerance_confirms():
    d = [0.050, 0.051, 0.049, 0.050]  # not 0, but well within 20% of the prediction
    v = verdict(d, SIM[:4])
    assert v["excludes_zero"] and v["hi"] < 0.1 and v["verdict"] == "confirmed"


def test_ci_straddling_the_tolerance_edge_is_inconclusive():
    d = [0.08, 0.12, 0.09, 0.11]  # mean 0.1 = the tolerance: neither inside nor outside
    lo, hi = _ci(d)
    assert lo < 0.1 < hi and verdict(d, SIM[:4])["verdict"] == "inconclusive"


def test_one_repetition_cannot_decide():
    v = verdict([0.0], [0.5])
    assert math.isinf(v["half_width"]) and v["verdict"] == "inconclusive"


def test_repeats_per_preset():
    assert all(e2e_repeats(R.PRESETS[k]) == r >= 2 for k, r in E2E_REPEATS.items())
    assert e2e_repeats(TINY) >= 2


# -- the simulator side ---------------------------------------------------------------------------
def test_simulate_no_failures_is_the_saves():
    # 100 iterations in 10 s, a save every 10 (at 10, 20, ..., 90: 9 saves) of 0.2 s each
    o, wall, ck = _simulate(10.0, 100, 10, 4, 0.2, 0.05, [])
    assert ck == 9
    assert o == pytest.approx(9 * 0.2 / 10.0, rel=1e-9)
    assert wall == pytest.approx(10.0 + 9 * 0.2, rel=1e-9)
    assert _simulate(10.0, 100, 30, 4, 0.2, 0.05, [])[2] == 3  # at 30, 60, 90


def test_simulate_one_failure_adds_one_load():
    o, _, ck = _simulate(10.0, 100, 10, 4, 0.2, 0.05, [(55, 2)])
    assert ck == 9 and o == pytest.approx((9 * 0.2 + 0.05) / 10.0, rel=1e-6)


def test_simulate_failures_on_save_iterations_at_the_end_and_together():
    """A failure right after a save, two at one iteration, one at the last iteration and one at the
    first: each costs one load, none aborts a simulated save or falls after the simulated end."""
    f = [(0, 0), (20, 1), (20, 3), (99, 2)]
    o, wall, ck = _simulate(10.0, 100, 10, 4, 0.2, 0.05, f)
    assert ck == 9
    assert o == pytest.approx((9 * 0.2 + 4 * 0.05) / 10.0, rel=1e-6)
    assert wall == pytest.approx(10.0 + 9 * 0.2 + 4 * 0.05, rel=1e-6)


# -- a small real run -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def e2e():
    prep = R.synthetic_prepared(TINY, 0)
    fails = [(10, 1), (30, 2), (30, 0)]
    return prep, end_to_end(prep, TINY, 0, None, fails, repeats=2, threads=1)


@pytest.mark.slow
def test_real_run_is_well_formed(e2e):
    prep, e = e2e
    n, iv, reps = prep.n_iters, e["interval_iterations"], e["repeats"]
    assert reps == 2 and e["iterations"] == n and e["failures"] == 3 and e["threads"] == 1
    assert iv >= 1 and e["checkpoints"] == len(range(iv, n, iv)) == e["simulated_checkpoints"]
    assert e["verdict"] in ("confirmed", "refuted", "inconclusive")
    for arm in (
        "plain_wall_s",
        "checkpointed_wall_s",
        "measured",
        "simulated",
        "paired_difference",
    ):
        s = e[arm]
        assert len(s["values"]) == reps and s["min"] <= s["p50"] <= s["p90"] <= s["max"], arm
        assert s["mean"] == pytest.approx(statistics.fmean(s["values"])), arm
    assert min(e["plain_wall_s"]["values"]) > 0
    assert e["measured_overhead"] == pytest.approx(e["measured"]["mean"])
    assert e["simulated_overhead"] == pytest.approx(e["simulated"]["mean"])
    assert "page cache" in e["notes"]


@pytest.mark.slow
def test_real_run_pairs_and_predictions_are_consistent(e2e):
    """Each repetition's figures: measured = (checkpointed - plain) / plain; the prediction = its
    own saves and loads over its plain run (the simulator adds nothing else here); the CI and the
    verdict are verdict()'s of the paired differences."""
    _, e = e2e
    P, C = e["plain_wall_s"]["values"], e["checkpointed_wall_s"]["values"]
    for i, (p, c) in enumerate(zip(P, C)):
        m, s = e["measured"]["values"][i], e["simulated"]["values"][i]
        assert m == pytest.approx((c - p) / p)
        c = e["costs"]
        cost = e["checkpoints"] * c["save_s"][i] + e["failures"] * c["shard_load_s"][i]
        assert s == pytest.approx(cost / p, rel=1e-6)
        assert e["paired_difference"]["values"][i] == pytest.approx(m - s)
    v = verdict(e["paired_difference"]["values"], e["simulated"]["values"])
    lo, hi = _ci(e["paired_difference"]["values"])
    assert (e["difference_lo"], e["difference_hi"]) == (pytest.approx(lo), pytest.approx(hi))
    assert e["verdict"] == v["verdict"]
    assert e["tolerance"] == pytest.approx(0.2 * e["simulated_overhead"])


@pytest.mark.slow
def test_real_run_writes_to_toml(e2e):
    _, e = e2e
    back = tomllib.loads(to_toml({"end_to_end": e}))["end_to_end"]
    assert back["verdict"] == e["verdict"]
    assert back["plain_wall_s"]["values"] == e["plain_wall_s"]["values"]


@pytest.mark.slow
def test_given_interval_and_torch_threads_restored():
    prep = R.synthetic_prepared(dataclasses.replace(TINY, train_samples=4_096), 0)
    before = torch.get_num_threads()
    e = end_to_end(prep, TINY, 0, 5, [(7, 1)], repeats=2, threads=1)
    assert torch.get_num_threads() == before
    assert e["interval_iterations"] == 5 and e["checkpoints"] == len(range(5, prep.n_iters, 5))
    assert e["interval_rule"] == "given by the caller"
