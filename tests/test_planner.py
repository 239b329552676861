"""The CPR planner and the MFU/SSU strategies against brute force and analytic oracles."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from cprsim import analytic
from cprsim import scenario as sc
from cprsim.costs import costs_of
from cprsim.errors import InputError
from cprsim.planner import failure_rates, make_plan
from cprsim.planner.search import cp_lower, grid_below, judge
from cprsim.scenario import HOUR
from cprsim.sim import strategies
from cprsim.sim.prioritized import coverage_of
from cprsim.sim.replicate import estimate, run_replications
from cprsim.streams import REPLICATION_BLOCKS

BOUND = 0.001


@pytest.fixture(scope="module")
def base():
    return sc.load("cpr-production", {"replications": 120})


@pytest.fixture(scope="module")
def poisson(base):
    """cpr-production with exponential failure events: the setting of the analytic oracles."""
    return base.with_updates(
        {
            "failures.domains": [
                {
                    "name": "ps-group",
                    "node_type": "embedding",
                    "nodes": 4,
                    "membership": "random",
                    "failure": {"family": "exponential", "mtbf_h": 10.0},
                }
            ]
        }
    )


@pytest.fixture(scope="module")
def plan(base, linear_accuracy):
    return make_plan(
        base, BOUND, calibration=linear_accuracy(), replications=120, search_replications=120
    )


def _run(s, tau_s, strategy, params=None, n=None, seed=None, block="search"):
    upd = {"checkpoint.interval_h": tau_s / HOUR, "strategy": {"name": strategy, **(params or {})}}
    if seed is not None:
        upd["seed"] = seed
    res, _ = run_replications(s.with_updates(upd), n, first=REPLICATION_BLOCKS[block])
    return res


@pytest.mark.slow
def test_full_interval_is_as_good_as_a_brute_force_optimum(base, plan):
    """Paired (common random numbers) comparison with the best of a fine grid: not worse within the CI."""
    daly = plan.option("full (Daly)").interval_s
    grid = daly * np.geomspace(0.3, 3.0, 15)
    runs = {t: np.array([r.overhead for r in _run(base, t, "full", n=200)]) for t in grid}
    best = min(runs, key=lambda t: runs[t].mean())
    for label in ("full (simulated optimum)", "full (Daly)"):
        mine = np.array(
            [r.overhead for r in _run(base, plan.option(label).interval_s, "full", n=200)]
        )
        d = estimate(mine - runs[best])
        assert d.lo <= 0.0, f"{label} is significantly worse than the grid optimum: {d}"
    # and the grid really has a minimum in the inside (the test would notice a monotone curve)
    assert runs[grid[0]].mean() > runs[best].mean() and runs[grid[-1]].mean() > runs[best].mean()


def test_recommendation_meets_its_per_run_bound_on_replications_nobody_searched(base, plan):
    """The promise: P(a run's PLS <= bound) >= 0.9. Checked on a third block of replications (neither
    searched nor confirmed with): the share within the bound is not significantly below 0.9."""
    rec = plan.option(plan.recommended)
    assert rec.strategy != "full" and rec.meets_bound  # on this scenario partial recovery pays
    assert rec.within_lo >= 0.9
    res = _run(base, rec.interval_s, rec.strategy, rec.params, n=400, block="validate")
    k = sum(r.pls <= rec.pls_bound for r in res)
    upper = 1.0 - cp_lower(len(res) - k, len(res))  # one-sided 95% upper bound of the share within
    assert upper >= 0.9, f"only {k}/{len(res)} fresh runs within the bound"
    assert plan.saving > 0


def test_every_partial_option_keeps_a_full_checkpoint(base, plan):
    for o in plan.options:
        if o.strategy != "full":
            assert o.full_interval_s < base.duration_s
            assert o.full_interval_s <= plan.full_interval_s * (1 + 1e-9)


def test_vanilla_interval_is_the_largest_grid_interval_that_passes(base, plan):
    """One grid step longer fails the per-run criterion on the search replications."""
    o = plan.option("CPR-vanilla")
    assert o.meets_bound
    cands = grid_below(plan.full_interval_s, 60.0)
    i = cands.index(min(cands, key=lambda t: abs(t - o.interval_s))) + o.stepped_down
    if i + 1 < len(cands):
        res = _run(base, cands[i + 1], "partial", n=plan.search_replications)
        assert not judge([r.pls for r in res], o.pls_bound, plan.confidence).passed


def test_clopper_pearson_lower_bound_matches_scipy():
    for k, n in ((0, 10), (9, 10), (95, 100), (200, 200), (181, 200)):
        exact = stats.binomtest(k, n).proportion_ci(confidence_level=0.90, method="exact").low
        assert cp_lower(k, n) == pytest.approx(exact, abs=1e-9)


def test_judge_per_run_and_on_the_mean():
    x = (np.arange(200) + 0.5) / 200  # run i has PLS (i + 0.5) / 200
    for bound in (0.91, 0.93, 0.95, 0.97):
        k = int(np.sum(x <= bound))
        v = judge(x, bound, 0.9)
        assert v.within == k / 200 and v.within_lo == pytest.approx(cp_lower(k, 200))
        assert v.passed == (cp_lower(k, 200) >= 0.9)
    assert (
        not judge(x, 0.91, 0.9).passed and judge(x, 0.97, 0.9).passed
    )  # 182/200 > 0.9 proves nothing
    assert judge(x, 0.5, None).passed and not judge(x, 0.49, None).passed


@pytest.mark.slow
def test_confirmation_steps_the_interval_down_until_fresh_runs_pass(base, linear_accuracy):
    """An interval far too long fails on the confirmation block; the plan steps down the grid."""
    from cprsim.planner import _confirm, _Context
    from cprsim.planner.accuracy import plan_accuracy
    from cprsim.planner.rates import failure_rates as rates_of
    from cprsim.sim import strategies

    acc = plan_accuracy(linear_accuracy(), "auc")
    ctx = _Context(
        base,
        BOUND,
        "auc",
        acc,
        0.9,
        100,
        100,
        costs_of(base),
        rates_of(base),
        lambda k=1: None,
        False,
        [],
    )
    bound = acc.pls_bound(BOUND, "partial")
    cands = grid_below(25 * HOUR, 60.0)
    steps = list(reversed(cands[:-1]))  # descending from just below 25 h
    o = _confirm(
        ctx, "CPR-vanilla", strategies.get("partial"), cands[-1], {}, 0.0, 0.0, bound, "", steps
    )
    assert o.stepped_down > 0 and o.meets_bound and o.interval_s == steps[o.stepped_down - 1]
    res = _run(base, o.interval_s, "partial", n=100, block="confirm")
    assert judge([r.pls for r in res], bound, 0.9).passed
    longer = _run(
        base,
        cands[-1] if o.stepped_down == 1 else steps[o.stepped_down - 2],
        "partial",
        n=100,
        block="confirm",
    )
    assert not judge([r.pls for r in longer], bound, 0.9).passed


def test_mfu_loses_no_more_than_ssu_and_ssu_no_more_than_vanilla_at_equal_overhead(base):
    tau = 2 * HOUR
    params = {
        "top_fraction": 0.05,
        "full_every": 8,
        "counter_overhead": 0.0,
        "select_ns_per_row": 0.0,
    }
    mfu = _run(base, tau, "mfu", params, n=150)
    ssu = _run(base, tau, "ssu", {**params, "sample_rate": 0.001}, n=150)
    # equal overhead: same saves, no counting cost -> same save time in every replication
    assert all(math.isclose(a.save_s, b.save_s, rel_tol=1e-9) for a, b in zip(mfu, ssu))
    assert all(a.pls <= b.pls + 1e-15 for a, b in zip(mfu, ssu))
    assert np.mean([a.pls for a in mfu]) < np.mean([b.pls for b in ssu])
    # vanilla with the same save overhead per unit of progress: one full save per delta_avg/tau
    c = costs_of(base)
    MFU = strategies.get("mfu")
    d_avg = analytic.prioritized_save_s(
        c.save_s, MFU.partial_save_cost(base, MFU.Params(**params), tau, c), 8
    )
    van = _run(base, tau * c.save_s / d_avg, "partial", n=150)
    d = estimate([b.pls - v.pls for b, v in zip(ssu, van)])
    assert d.hi < 0, f"SSU should lose less than vanilla at equal save overhead: {d}"


@pytest.mark.parametrize("strategy,rate", [("mfu", 1.0), ("ssu", 0.01)])
def test_prioritized_pls_matches_its_analytic_expectation(poisson, strategy, rate):
    base = poisson
    tau, r, K = 1.5 * HOUR, 0.05, 4
    params = {"top_fraction": r, "full_every": K, "counter_overhead": 0.0}
    if strategy == "ssu":
        params["sample_rate"] = rate
    res = _run(base, tau, strategy, params, n=400)
    pls = estimate([x.pls for x in res])
    rates = failure_rates(base)
    cov = coverage_of(base, tau, r, rate)
    expect = analytic.expected_pls_prioritized(
        base.duration_s,
        tau,
        analytic.ShardFailures(
            rate=rates.embedding, per_event=rates.k, shards=base.cluster.embedding_servers
        ),
        cov,
        analytic.PrioritizedSaves(full_every=K),
    )
    # the oracle counts failures during compute only; those during saves/recoveries (a share
    # (wall - W)/W of the time) add at most that share of PLS
    extra = np.mean([x.wall_s for x in res]) / base.duration_s - 1
    assert pls.lo - extra * expect <= expect <= pls.hi + extra * expect


def test_vanilla_pls_matches_its_analytic_expectation(poisson):
    base = poisson
    tau = 3 * HOUR
    res = _run(base, tau, "partial", n=400)
    pls = estimate([x.pls for x in res])
    rates = failure_rates(base)
    expect = analytic.expected_pls(
        analytic.Job(work_s=base.duration_s, save_s=costs_of(base).save_s),
        tau,
        analytic.ShardFailures(
            rate=rates.embedding, per_event=rates.k, shards=base.cluster.embedding_servers
        ),
    )
    extra = np.mean([x.wall_s for x in res]) / base.duration_s - 1
    assert pls.lo - extra * expect <= expect <= pls.hi + extra * expect


def test_partial_recovery_does_not_pay_for_a_tiny_bound(base, linear_accuracy):
    p = make_plan(
        base, 1e-7, calibration=linear_accuracy(), replications=30, search_replications=30
    )
    assert p.option(p.recommended).strategy == "full"
    assert "does not pay" in p.message


@pytest.mark.parametrize("bound", [-0.001, 0.0, float("nan"), float("inf"), 0.7])
def test_planner_refuses_impossible_bounds(base, bound, linear_accuracy):
    with pytest.raises(InputError, match="accuracy bound"):
        make_plan(base, bound, calibration=linear_accuracy())


def test_planner_refuses_unknown_metric(base, linear_accuracy):
    with pytest.raises(InputError, match="metric"):
        make_plan(base, 0.001, "accuracy", calibration=linear_accuracy())


@pytest.mark.slow
def test_a_failed_confirmation_steps_down_until_it_passes_or_the_grid_ends():
    """No cap on the step-down: every partial-recovery option either meets the bound or was
    stepped down to the grid's smallest interval (it failed at every interval below the search's
    choice); on toy at 0.001 a confirmation takes more than the 3 steps the planner used to stop at
    (the plan of docs/howto-plan-your-interval.md, section 1)."""
    s = sc.load("toy")
    plan = make_plan(s, 0.001, replications=40, search_replications=60)
    lo = max(60.0, 2.0 * costs_of(s).latency_s)
    partial = [o for o in plan.options if math.isfinite(o.pls_bound)]
    assert partial
    for o in partial:
        floor = grid_below(o.full_interval_s, lo)[0]
        assert o.meets_bound or o.interval_s == pytest.approx(floor), (o.label, o.interval_s)
    assert max(o.stepped_down for o in partial) > 3


def test_a_plan_notes_where_a_runs_quantile_falls_as_pls_grows():
    """The held-out residuals' bins can make a single run's q-quantile fall as PLS grows (a bin
    whose residuals' quantile is smaller than the last one's): AccuracyFit.quantile_dip finds the
    fall of the law as fitted, computed here by hand on a two-bin law, the plan's law does not
    fall, and a plan's notes say where it was held; a law whose quantile only grows gets no
    note."""
    from dataclasses import replace as dc_replace
    from types import SimpleNamespace as NS

    from cprsim.calibrate.accuracy import HeldOutResiduals, raw_quantile
    from cprsim.calibrate.calibration import load_calibration
    from cprsim.planner import _dip_note
    from cprsim.planner.accuracy import plan_accuracy

    acc = plan_accuracy(load_calibration(), "auc")
    fit = acc.fit
    assert fit is not None and fit.residuals is not None
    st = next(iter(fit.ranges))
    hi = fit.ranges[st]["pls"][1]
    # the second bin's residuals are a tenth of the first's: its quantile falls from the first
    # center to the second, where the scale has not grown tenfold
    z = np.linspace(-1.0, 9.0, 99)
    falling = dc_replace(fit, residuals=HeldOutResiduals((hi / 100, hi / 10), (z, z / 10)))
    dip = falling.quantile_dip(st, 0.9)
    lo = fit.ranges[st]["pls"][0]
    pls = np.geomspace(lo if lo > 0 else hi / 1000, hi, 400)  # the measured range
    one = np.ones(pls.shape)
    c = falling.coef_for(st)
    v = raw_quantile(c, fit.terms, falling.residuals, 0.9 * one, pls, 0.5 * one, 0 * one)
    top = np.maximum.accumulate(v)
    assert dip is not None and dip[0] == pytest.approx(float(np.max((top - v) / top)))
    # the plan's own law holds the quantile at that maximum instead (within a lattice step)
    mono = falling.predictive_quantile(st, 0.9, pls)
    assert np.all(mono >= v) and np.all(np.diff(mono) >= -1e-3 * mono[1:])
    # from a top below, down to the second bin's center (where its law rules alone; a grid step)
    assert dip[1] < dip[2] and dip[2] == pytest.approx(hi / 10, rel=0.02)
    (note,) = _dip_note(NS(fit=falling, metric="auc"), 0.9)
    assert f"{st} by up to {100 * dip[0]:.3g}%" in note
    growing = dc_replace(fit, residuals=HeldOutResiduals((hi / 100, hi / 10), (z / 10, z)))
    assert growing.quantile_dip(st, 0.9) is None
    assert not _dip_note(NS(fit=growing, metric="auc"), 0.9)


def test_a_plan_warns_where_its_confidence_fails_on_the_calibrations_held_out_seeds():
    """With quantiles from held-out residuals, a plan warns where a PLS bin has too few runs to
    place its confidence's quantile ((n + 1) q > n); with the Student-t scatter, where the
    held-out check at its confidence fails (P < 0.05; made-up checks), not where it passes nor for
    a promise on the mean. A plan's notes carry exactly the rule's warnings."""
    from types import SimpleNamespace as NS

    from cprsim.calibrate.accuracy import HeldOutResiduals
    from cprsim.calibrate.calibration import load_calibration
    from cprsim.planner import _held_out_warning
    from cprsim.planner.accuracy import plan_accuracy

    few = HeldOutResiduals((0.1,), (np.linspace(-1, 2, 30), np.linspace(-1, 3, 120)))
    assert not few.unresolved(0.95) and few.unresolved(0.99)  # 31 x 0.99 > 30
    (w,) = _held_out_warning(NS(fit=NS(residuals=few)), 0.99)
    assert "30, 120 per PLS bin" in w and w.startswith("WARNING")
    assert not _held_out_warning(NS(fit=NS(residuals=few)), 0.95)
    row = {"q": 0.95, "n": 90.0, "within": 78.0, "share": 78 / 90, "p": 0.0018}
    seen = []
    acc = NS(fit=None, held_out=lambda q: seen.append(q) or {"small": row})
    (w,) = _held_out_warning(acc, 0.95)
    assert seen == [0.95] and "0.867" in w and "78 of 90" in w and w.startswith("WARNING")
    assert not _held_out_warning(
        NS(fit=None, held_out=lambda q: {"small": {**row, "p": 0.2}}), 0.95
    )
    assert not _held_out_warning(acc, None)
    s = sc.load("toy")
    for q, n in ((0.9, 40), (0.99, 300)):  # proving 0.99 takes 299 replications
        plan = make_plan(s, 0.001, replications=n, search_replications=n, confidence=q)
        want = _held_out_warning(plan_accuracy(load_calibration(), "auc"), q)
        assert [x for x in plan.notes if x.startswith("WARNING") and "held-out" in x] == want
    # the shipped file's bins (about 144 runs) place a 0.99-quantile but not a 0.999-quantile
    acc = plan_accuracy(load_calibration(), "auc")
    assert acc.fit.residuals is not None and not acc.fit.residuals.unresolved(0.99)
    assert _held_out_warning(acc, 0.999) and not _held_out_warning(acc, 0.99)


def test_a_plan_warns_where_its_runs_lose_less_than_the_scatter_model_was_checked_on():
    """The recommended option's runs mostly below the calibration's smallest quarter of PLS, for a
    strategy whose runs there scatter more than its single-run model (flagged at 5%): the plan
    warns; unflagged, or runs losing more, it does not (made-up records, then toy as planned)."""
    from types import SimpleNamespace as NS

    from cprsim.calibrate.calibration import load_calibration
    from cprsim.planner import _scatter_warning
    from cprsim.planner.accuracy import plan_accuracy

    flagged = {"pls_max": 0.01, "n": 30.0, "ratio": 8.0, "above": 18.0, "p": 0.001}
    rec = NS(label="CPR-MFU", strategy="mfu", pls_bound=0.02, pls=NS(p50=0.004, mean=0.005))
    assert _scatter_warning(NS(scatter={"mfu": flagged}), rec)
    assert not _scatter_warning(NS(scatter={"mfu": {**flagged, "p": 0.2}}), rec)
    assert not _scatter_warning(NS(scatter={"mfu": {**flagged, "ratio": 0.5}}), rec)
    assert not _scatter_warning(NS(scatter={"mfu": {**flagged, "pls_max": 0.003}}), rec)
    assert not _scatter_warning(NS(scatter={}), rec)
    most_lose_nothing = NS(**{**vars(rec), "pls": NS(p50=0.0, mean=0.001)})
    assert not _scatter_warning(NS(scatter={"mfu": flagged}), most_lose_nothing)
    full = NS(label="full (Young)", strategy="full", pls_bound=math.inf, pls=NS(p50=0.0, mean=0.0))
    assert not _scatter_warning(NS(scatter={"full": flagged}), full)
    # a plan's note is the rule applied to its recommendation and its calibration's check
    s = sc.load("toy")
    plan = make_plan(s, 0.001, replications=40, search_replications=60)
    acc = plan_accuracy(load_calibration(), "auc")
    want = _scatter_warning(acc, plan.option(plan.recommended))
    assert [n for n in plan.notes if "scatter" in n and n.startswith("WARNING")] == want


def test_runs_within_judges_with_the_calibration_the_plan_used():
    """`runs_within` without a calibration judges a `cpr-production` plan with the matched file
    the plan was made with (not the shipped generic one): on the plan's own confirmation block it
    reproduces the plan's share within exactly; with the generic file it would not be the plan's
    judgement."""
    from cprsim.calibrate.calibration import calibration_for, load_calibration
    from cprsim.planner import runs_within
    from cprsim.planner.search import simulate

    s = sc.load("cpr-production")
    assert calibration_for(s).provenance.get("matched")  # the scenario has a matched file
    plan = make_plan(s, 0.001, replications=200)
    o = plan.option(plan.recommended)
    res = simulate(s, o.interval_s, o.strategy, o.params, 200, block="confirm")
    assert float(np.mean(runs_within(res, o, plan))) == pytest.approx(o.within)
    assert np.array_equal(runs_within(res, o, plan), runs_within(res, o, plan, calibration_for(s)))
    assert plan.calibration["fingerprint"] != load_calibration().provenance["fingerprint"]
