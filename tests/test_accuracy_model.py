"""The accuracy model (cprsim.calibrate.accuracy): candidates, held-out selection, pooling, the
calibration file round trip, and the planner evaluating it on each run's own covariates."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from scipy import stats

from cprsim.calibrate.accuracy import (
    CANDIDATES,
    AccuracyFit,
    Coef,
    Data,
    HeldOutResiduals,
    RunLaws,
    design,
    f_test,
    fit_candidate,
    held_out_errors,
    model_table,
    ols,
    own_terms,
    paired_se,
    pooling_weight,
    raw_quantile,
    restricted_ols,
    select,
    shrunk,
    single_run_quantile,
)
from cprsim.pls import ShardLedger

STRATS = ("partial", "mfu", "ssu")


def _data(rng, b0=0.004, b1=0.0, b2=0.0, per=(1.0, 1.0, 1.0), seeds=3, n=18, sd=2e-4):
    """Runs like the calibration's: PLS 0.01-0.5, position 0.2-0.8, age 0-PLS-ish."""
    st, seed, pls, pos, age, y = [], [], [], [], [], []
    for k, s in enumerate(STRATS):
        for sd_ in range(seeds):
            x = rng.uniform(0.01, 0.5, n)
            p = rng.uniform(0.2, 0.8, n)
            a = rng.uniform(0.0, 0.5, n)
            st += [s] * n
            seed += [sd_] * n
            pls += list(x)
            pos += list(p)
            age += list(a)
            y += list(per[k] * x * (b0 + b1 * (p - 0.5) + b2 * a) + rng.normal(0, sd, n))
    return Data(
        np.array(st), np.array(seed), np.array(pls), np.array(pos), np.array(age), np.array(y)
    )


def _unit_law(pls: float, b0: float = 0.0) -> Coef:
    """Coefficients of ``loss = b0 PLS + sqrt(PLS / pls) Z``: mean 0 (b0 = 0) and scale 1 at
    ``pls``, no coefficient uncertainty."""
    return Coef(np.array([b0]), np.zeros((1, 1)), 100, 1.0, 101, (1.0 / pls, 0.0))


def _points(d: Data) -> dict:
    out: dict = {}
    for s in d.strategies:
        m = d.strategy == s
        out[s] = {
            "seed": d.seed[m].tolist(),
            "pls": d.pls[m].tolist(),
            "position": d.position[m].tolist(),
            "age": d.age[m].tolist(),
            "d_auc": d.y[m].tolist(),
            "d_logloss": (2 * d.y[m]).tolist(),
        }
    return out


def _write_calibration(path, pts):
    """A calibration file with these points and the [model] table calibrate would write for them."""
    from cprsim.calibrate.calibration import to_toml

    doc = {
        "provenance": {"calibrated": True, "preset": "test"},
        "fit": {
            s: {f"{m}_slope{k}": 0.01 for m in ("auc", "logloss") for k in ("", "_lo", "_hi")}
            for s in STRATS
        },
        "points": pts,
        "model": model_table(pts),
    }
    path.write_text(to_toml(doc))
    return path


def test_ols_matches_the_normal_equations_and_its_ci_covers_the_truth():
    rng = np.random.default_rng(3)
    d = _data(rng, b0=0.004, b2=0.01)
    X = d.X(("age",))
    c = ols(X, d.y)
    b = np.linalg.solve(X.T @ X, X.T @ d.y)
    assert np.allclose(c.b, b)
    s2 = float(np.sum((d.y - X @ b) ** 2)) / (d.y.size - 2)
    assert np.allclose(c.cov, s2 * np.linalg.inv(X.T @ X))
    h = stats.t.ppf(0.975, c.dof) * np.sqrt(np.diag(c.cov))
    assert abs(c.b[0] - 0.004) <= h[0] and abs(c.b[1] - 0.01) <= h[1]


def test_a_real_age_effect_is_chosen_and_a_pure_slope_stays_simple():
    rng = np.random.default_rng(7)
    rich = select(_data(rng, b0=0.002, b2=0.012), "auc")
    assert "age" in rich.chosen.terms and rich.cv_mse[rich.chosen.name] < rich.cv_mse["slope"]
    simple = select(_data(rng, b0=0.004), "auc")
    assert simple.chosen.name == "slope"  # the richer fits are not better by a standard error
    # every candidate was fitted: compared on held-out seeds, or set aside with its reason (here:
    # no strategy's own runs support its extra terms, the same model as the slope)
    assert set(simple.cv_mse) | set(simple.inadmissible) == set(CANDIDATES)
    assert "slope" in simple.cv_mse


def test_without_timing_covariates_only_pls_models_are_fitted():
    rng = np.random.default_rng(1)
    d = _data(rng)
    flat = Data(d.strategy, d.seed, d.pls, np.full(d.y.size, 0.5), np.zeros(d.y.size), d.y)
    sel = select(flat, "auc")
    assert sel.chosen.name == "slope" and "slope" in sel.cv_mse
    assert set(sel.cv_mse) | set(sel.inadmissible) == {"slope", "curvature"}


def test_a_convex_loss_is_chosen_as_curvature():
    """Loss growing as PLS^2 (losing much at once costs more than proportionally)."""
    rng = np.random.default_rng(12)
    d = _data(rng)
    y = d.pls * (0.001 + 0.01 * d.pls) + rng.normal(0, 2e-4, d.y.size)
    sel = select(Data(d.strategy, d.seed, d.pls, d.position, d.age, y), "auc")
    assert sel.chosen.name == "curvature"
    for c in sel.chosen.coef.values():  # pooled or shrunk toward the pooled fit: each covers truth
        h = stats.t.ppf(0.975, c.dof) * np.sqrt(np.diag(c.cov))
        assert abs(c.b[0] - 0.001) <= h[0] and abs(c.b[1] - 0.01) <= h[1]


def test_the_paired_se_is_clustered_by_seed_and_matches_the_means_true_spread():
    """Runs of one seed move together (a shared baseline): the one-SE rule's standard error of a
    mean paired difference must be that of the per-seed sums. Oracle: differences with a seed
    effect (sd a) and run noise (sd e), G seeds of k runs: Var(mean) = a^2 / G + e^2 / (G k). Over
    R simulated data sets the clustered SE^2 averages to it (unbiased for equal clusters; tolerance
    4 standard errors of that average), while the per-run SE^2 falls short by most of the seed
    term (the rule's former SE, which let one seed flip a choice)."""
    rng = np.random.default_rng(11)
    G, k, a, e, R = 24, 18, 1.0, 2.0, 600
    truth = a**2 / G + e**2 / (G * k)
    seed = np.repeat(np.arange(G), k)
    clustered, per_run = [], []
    for _ in range(R):
        d = np.repeat(rng.normal(0.0, a, G), k) + rng.normal(0.0, e, G * k)
        clustered.append(paired_se(d, seed) ** 2)
        per_run.append(float(np.var(d, ddof=1) / d.size))
    clustered_, per_run_ = np.array(clustered), np.array(per_run)
    tol = 4 * clustered_.std(ddof=1) / math.sqrt(R)
    assert abs(clustered_.mean() - truth) < tol
    assert per_run_.mean() < 0.5 * truth  # the independent-runs SE misses the seed effect
    # NaN runs are left out; one run per seed (no clustering to do) is the runs' own SE
    d = rng.normal(size=30)
    d[3] = np.nan
    ok = np.isfinite(d)
    assert paired_se(d, np.arange(30)) == pytest.approx(
        np.std(d[ok], ddof=1) / math.sqrt(29), rel=0.05
    )


def test_held_out_errors_leave_one_seed_out_by_hand():
    rng = np.random.default_rng(5)
    d = _data(rng)
    err = held_out_errors(d, "slope")
    for g in range(3):
        tr, te = d.seed != g, d.seed == g
        b = float(np.dot(d.pls[tr], d.y[tr]) / np.dot(d.pls[tr], d.pls[tr]))  # pooled: same slopes
        assert np.allclose(err[te], (d.y[te] - b * d.pls[te]) ** 2)


def test_pooling_f_test_is_calibrated_under_the_null_and_detects_different_slopes():
    """Under equal slopes the p-value is uniform: its rejection rate at 5% lies in a 99.9% binomial
    interval around 5%; a tripled slope for one strategy is rejected, and the pooled fit then has
    almost no weight."""
    rng = np.random.default_rng(11)
    reps = 300
    rej = sum(f_test(_data(rng, n=6), ())[0] < 0.05 for _ in range(reps))
    lo, hi = stats.binom.ppf([0.0005, 0.9995], reps, 0.05)
    assert lo <= rej <= hi, rej
    f = fit_candidate(_data(rng, per=(1.0, 3.0, 1.0)), "slope")
    assert not f.pooled and f.f_p_value < 0.05 and f.pooling_weight < 0.05
    assert f.coef["mfu"].b[0] > 2 * f.coef["partial"].b[0]


def test_pooling_weight_is_the_positive_part_stein_rule_by_hand():
    """B = min(1, c / F), c = (q - 2)/q x nu/(nu + 2) for q >= 3 restrictions, 1 below; each
    strategy's coefficients are B pooled + (1 - B) own, the covariance the model average's."""
    rng = np.random.default_rng(4)
    d = _data(rng, b0=0.003, b2=0.01, per=(1.0, 1.3, 0.8), n=10)
    terms = ("age",)
    X, y = d.X(terms), d.y
    pooled = np.linalg.lstsq(X, y, rcond=None)[0]
    rss_p = float(np.sum((y - X @ pooled) ** 2))
    own, rss_s = {}, 0.0
    for st in STRATS:
        m = d.strategy == st
        own[st] = np.linalg.lstsq(X[m], y[m], rcond=None)[0]
        rss_s += float(np.sum((y[m] - X[m] @ own[st]) ** 2))
    q, nu = 2 * 2, y.size - 3 * 2
    F = ((rss_p - rss_s) / q) / (rss_s / nu)
    c = (q - 2) / q * nu / (nu + 2)
    B = min(1.0, c / F)
    assert 0 < B < 1  # the case under test: neither pooled nor separate
    f = fit_candidate(d, "age")
    assert f.pooling_weight == pytest.approx(B, rel=1e-12)
    assert f.f_p_value == pytest.approx(stats.f.sf(F, q, nu), rel=1e-9)
    _, cp, cs, *_ = f_test(d, terms)
    for st in STRATS:
        want = B * pooled + (1 - B) * own[st]
        assert np.allclose(f.coef[st].b, want, rtol=1e-10, atol=0)
        dl = own[st] - pooled
        cov = B * cp.cov + (1 - B) * cs[st].cov + B * (1 - B) * np.outer(dl, dl)
        assert np.allclose(f.coef[st].cov, cov, rtol=1e-10, atol=0)
        assert f.coef[st].dof == int(np.sum(d.strategy == st)) - 2
    assert pooling_weight(0.5, 2, 50) == 1.0 and pooling_weight(4.0, 2, 50) == 0.25
    assert pooling_weight(float("inf"), 4, 50) == 0.0


def test_the_stein_rule_beats_separate_fits_when_the_strategies_barely_differ():
    """Its raison d'etre (Judge and Bock): with equal or nearly equal slopes the shrunk
    coefficients are closer to the truth than each strategy's own fit. Mean squared error over
    200 replications, paired: the upper end of the 99% CI of (shrunk - own) is below 0."""
    rng = np.random.default_rng(21)
    for per in ((1.0, 1.0, 1.0), (1.0, 1.1, 0.95)):
        diff = []
        for _ in range(200):
            d = _data(rng, b0=0.003, b2=0.01, per=per, n=6, sd=4e-4)
            _, pooled, sep, F, q, nu = f_test(d, ("age",), scatter=False)
            B = pooling_weight(F, q, nu)
            e_s = e_o = 0.0
            for k, st in enumerate(STRATS):
                truth = np.array([0.003, 0.01]) * per[k]
                m = d.strategy == st
                sh = shrunk(sep[st], pooled, B, d.take(m).X(("age",)), d.y[m])
                e_s += float(np.sum(((sh.b - truth) / truth) ** 2))
                e_o += float(np.sum(((sep[st].b - truth) / truth) ** 2))
            diff.append(e_s - e_o)
        diff = np.asarray(diff)
        hi = diff.mean() + stats.norm.ppf(0.995) * diff.std(ddof=1) / math.sqrt(diff.size)
        assert hi < 0, (per, diff.mean(), hi)


def test_no_threshold_the_fit_moves_continuously_as_the_strategies_part():
    """The old hard switch (pooled iff p >= 0.05) jumped the moment p crossed 0.05. Now, as one
    strategy's slope is scaled up step by step across that point, its fitted slope moves in steps
    no larger than a few times the typical step, and pools fully only when F <= c."""
    rng = np.random.default_rng(8)
    base = _data(rng, b0=0.003, per=(1.0, 1.0, 1.0), n=12, sd=3e-4)
    mfu = base.strategy == "mfu"
    slopes, ps = [], []
    for k in np.linspace(0.0, 0.6, 61):
        y = base.y + np.where(mfu, k * 0.003 * base.pls, 0.0)
        f = fit_candidate(
            Data(base.strategy, base.seed, base.pls, base.position, base.age, y), "slope"
        )
        slopes.append(f.coef_for("mfu").b[0])
        ps.append(f.f_p_value)
    steps = np.abs(np.diff(slopes))
    assert min(ps) < 0.05 < max(ps)  # the p-value crosses 0.05
    assert np.max(steps) <= 4 * np.median(steps), (np.max(steps), np.median(steps))


def test_a_strategy_keeps_only_the_terms_its_own_runs_support():
    """Vanilla-like runs (restored states at most 5% of the run old, no age effect) keep the slope
    alone; SSU-like runs (ages up to 50%, a real age effect) keep their age term; a term left out
    is fixed at 0 with no variance, and the rest is least squares on the kept columns."""
    rng = np.random.default_rng(9)
    d = _data(rng, b0=0.003, b2=0.02, seeds=8, n=12, sd=3e-4)
    narrow = d.strategy == "partial"
    age = np.where(narrow, d.age * 0.1, d.age)  # vanilla: 0-5% of the run
    y = np.where(narrow, 0.003 * d.pls, d.pls * (0.003 + 0.02 * age)) + rng.normal(
        0, 3e-4, d.y.size
    )
    d = Data(d.strategy, d.seed, d.pls, d.position, age, y)
    part, ssu = d.take(narrow), d.take(d.strategy == "ssu")
    assert own_terms(part, ("age",)) == ()
    assert own_terms(ssu, ("age",)) == ("age",)
    c = restricted_ols(part, ("age",), (), True)
    b = float(part.pls @ part.y / (part.pls @ part.pls))
    assert c.b[1] == 0 and c.cov[1, 1] == 0 and c.cov[0, 1] == 0
    assert c.b[0] == pytest.approx(b, rel=1e-10) and c.dof == part.y.size - 1
    # shrunk toward the fit pooled over all strategies *of its own terms* (slope alone): no age
    # coefficient is mixed in from the strategies that support one
    f = fit_candidate(d, "age")
    B = f.pooling_weight
    assert not f.pooled and f.coef["partial"].own_terms == () and f.coef["partial"].b[1] == 0
    pooled_slope = float(d.pls @ d.y / (d.pls @ d.pls))
    assert f.coef["partial"].b[0] == pytest.approx(B * pooled_slope + (1 - B) * b, rel=1e-10)
    assert f.coef["ssu"].own_terms is None and f.coef["ssu"].b[1] > 0


def test_model_table_round_trips_through_calibration_toml(tmp_path):
    from cprsim.calibrate.calibration import load_calibration

    rng = np.random.default_rng(2)
    d = _data(rng, b0=0.002, b2=0.012)
    pts = _points(d)
    path = _write_calibration(tmp_path / "calibration.toml", pts)
    cal = load_calibration(path)
    sel = select(Data.from_points(pts, "auc"), "auc")
    fit = cal.models["auc"]
    assert fit.name == sel.chosen.name and fit.pooled == sel.chosen.pooled
    got = fit.predict("mfu", [0.1, 0.3], [0.4, 0.7], [0.1, 0.2])
    want = sel.chosen.predict("mfu", [0.1, 0.3], [0.4, 0.7], [0.1, 0.2])
    for a, b in zip(got, want):
        assert np.allclose(a, b)
    assert cal.raw["model"]["range"]["partial"]["pls"] == pytest.approx(
        [d.pls[d.strategy == "partial"].min(), d.pls[d.strategy == "partial"].max()]
    )


def test_a_malformed_model_table_is_a_one_line_error(tmp_path):
    from cprsim.calibrate.calibration import load_calibration
    from cprsim.errors import InputError

    base = (
        "[provenance]\ncalibrated = true\n[fit.partial]\nauc_slope = 0.01\nauc_slope_hi = 0.02\n"
        "logloss_slope = 0.01\nlogloss_slope_hi = 0.02\n"
    )
    cases = {
        '[model.auc]\nchosen = "cubic"\n': "model.auc.chosen",
        '[model.auc]\nchosen = "age"\n[model.auc.coef."*"]\nb = [0.1]\ncov = [[1.0]]\ndof = 3\nrss = 1.0\nn = 4\n': "coefficients",
        '[model.auc]\nchosen = "slope"\n[model.auc.coef."*"]\nb = [0.1]\ncov = [[1.0, 2.0]]\ndof = 3\nrss = 1.0\nn = 4\n': "cov",
        '[model.auc]\nchosen = "slope"\n[model.auc.coef.mfu]\nb = [0.1]\ncov = [[1.0]]\ndof = 3\nrss = 1.0\nn = 4\n': "'partial'",
        '[model.auc]\nchosen = "slope"\n[model.auc.coef."*"]\nb = [nan]\ncov = [[1.0]]\ndof = 3\nrss = 1.0\nn = 4\n': "model.auc.coef.*.b[0]",
        '[model.auc]\nchosen = "slope"\n[model.auc.coef."*"]\nb = [0.1]\ncov = [[1.0]]\ndof = 3\nrss = 1.0\nn = 4\n'
        '[model.range.partial]\npls = "x"\n': "model.range.partial.pls",
        '[model.auc]\nchosen = "slope"\n[model.auc.coef."*"]\nb = [0.1]\ncov = [[1.0]]\ndof = 3\nrss = 1.0\nn = 4\n'
        "[model.range]\npartial = 3\n": "model.range.partial",
    }
    for i, (extra, needle) in enumerate(cases.items()):
        p = tmp_path / f"c{i}.toml"
        p.write_text(base + extra)
        with pytest.raises(InputError) as e:
            load_calibration(p)
        assert needle in str(e.value) and "\n" not in str(e.value) and str(p) in str(e.value)


class _R:
    def __init__(self, pls, pos, age):
        self.pls, self.pls_position, self.pls_age = pls, pos, age


def test_the_planner_evaluates_each_run_at_its_own_position_and_age():
    from cprsim.planner.accuracy import plan_accuracy

    rng = np.random.default_rng(4)
    d = _data(rng, b0=0.002, b2=0.012)

    class Cal:
        calibrated = True
        provenance = {"preset": "test"}
        raw = {"points": _points(d)}

    acc = plan_accuracy(Cal(), "auc")
    assert acc.fit is not None and "age" in acc.fit.terms and acc.model == acc.fit.name
    runs = [_R(0.1, 0.5, 0.0), _R(0.1, 0.5, 0.4), _R(0.2, 0.9, 0.1)]
    mean, hi = acc.run_losses(runs, "partial")
    c = acc.fit.coef_for("partial")
    X = design(acc.fit.terms, [0.1, 0.1, 0.2], [0.5, 0.5, 0.9], [0.0, 0.4, 0.1])
    assert np.allclose(mean, np.maximum(X @ c.b, 0))
    t = stats.t.ppf(0.975, c.dof)
    assert np.allclose(hi, X @ c.b + t * np.sqrt(np.einsum("ij,jk,ik->i", X, c.cov, X)))
    assert hi[1] > hi[0]  # an older restored state costs more at the same PLS
    # the mean loss is the prediction at the mean column (the model is linear)
    m, lo, h = acc.mean_loss(runs, "partial")
    assert m == pytest.approx(float(X.mean(axis=0) @ c.b)) and lo <= m <= h
    # the PLS bound for the analytic start is at the reference covariates (mid-training, fresh state)
    # on the mean: the upper end of the mean's CI; per run: a single run's predictive 90% quantile
    assert acc.pls_bound(0.001, "partial", None) == pytest.approx(
        0.001 / acc.fit.slope_at("partial")[2]
    )
    # (with 3 seeds the quantile is the held-out residuals' of the run's PLS bin; without them,
    # Student-t's)
    assert acc.fit.residuals is not None
    for fit in (acc.fit, replace(acc.fit, residuals=None)):
        x = replace(acc, fit=fit).pls_bound(0.001, "partial", 0.9)
        X0 = design(acc.fit.terms, [x], [0.5], [0.0])
        sd = np.sqrt(np.einsum("ij,jk,ik->i", X0, c.cov, X0) + c.residual_variance([x]))
        k = fit.residuals.ppf(0.9, x) if fit.residuals else stats.t.ppf(0.9, c.dof)
        assert float((X0 @ c.b + k * sd)[0]) == pytest.approx(0.001, rel=1e-6)
        assert x < acc.pls_bound(0.001, "partial", None)  # a single run scatters beyond the mean
    assert isinstance(AccuracyFit.from_selection(select(d, "auc")), AccuracyFit)


def test_ledger_timing_by_hand():
    led = ShardLedger(4)
    led.saved(10.0)
    led.fail(1, 30.0)  # 1/4 x 20 lost at 30, restored state of age 20
    led.fail(2, 90.0)  # 1/4 x 80 lost at 90, age 80
    a1, a2 = 0.25 * 20, 0.25 * 80
    pos, age = led.timing(100.0)
    assert pos == pytest.approx((a1 * 0.3 + a2 * 0.9) / (a1 + a2))
    assert age == pytest.approx((a1 * 0.2 + a2 * 0.8) / (a1 + a2))
    assert ShardLedger(2).timing(100.0) == (0.0, 0.0)
    led.rollback(
        50.0
    )  # the second loss is re-executed from 50: only (10, 30) and (50, 90)... healed
    pos2, _ = led.timing(100.0)
    assert led.lost == pytest.approx(a1 + 0.25 * 40) and math.isfinite(pos2)


def test_the_plan_uses_the_chosen_model_per_run_and_keeps_its_promise_on_fresh_runs(tmp_path):
    """Through the CLI: a calibration whose loss grows with the restored state's age. The plan names
    the model; its confirmation share is each run's predictive draw <= the bound, recomputed here by
    hand from the file's coefficients and the ("training", replication) streams; and on a block of
    runs the planner never saw, with each run's loss drawn from the TRUE process the calibration
    points came from, the share within the bound is compatible with the promised 90% (one-sided
    binomial test at 1%)."""
    import json

    from click.testing import CliRunner

    from cprsim.calibrate.calibration import load_calibration
    from cprsim.cli import main
    from cprsim.planner.quick import quick_scenario
    from cprsim.planner.search import simulate

    rng = np.random.default_rng(8)
    d = _data(rng, b0=0.001, b2=0.03, sd=5e-5)
    pts = _points(d)
    path = _write_calibration(tmp_path / "cal.toml", pts)
    fit = load_calibration(path).models["auc"]
    assert "age" in fit.terms
    bound = 0.001
    args = [
        "plan",
        "--embedding-servers",
        "16",
        "--trainers",
        "8",
        "--node-mtbf-h",
        "300",
        "--save-s",
        "120",
        "--load-s",
        "60",
        "--duration-h",
        "20",
        "--max-accuracy-loss",
        str(bound),
        "--strategies",
        "partial",
        "--calibration",
        str(path),
        "-n",
        "100",
        "--search-replications",
        "100",
        "--json",
    ]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert f"model '{fit.name}'" in out["accuracy_model"]
    o = next(x for x in out["options"] if x["strategy"] == "partial")
    s = quick_scenario(  # the CLI's defaults for the rest
        embedding_servers=16,
        trainers=8,
        node_mtbf_h=300.0,
        save_s=120.0,
        load_s=60.0,
        duration_h=20.0,
    )
    c = fit.coef_for("partial")

    def share(res):
        from cprsim.streams import stream

        X = design(
            fit.terms, [x.pls for x in res], [x.pls_position for x in res], [x.pls_age for x in res]
        )
        sd = np.sqrt(np.einsum("ij,jk,ik->i", X, c.cov, X) + c.residual_variance(X[:, 0]))
        u = np.array([stream(s.seed, x.replication, "training").random() for x in res])
        draw = X @ c.b + sd * stats.t.ppf(u, c.dof)
        return float(np.mean(draw <= bound * (1 + 1e-12)))

    res = simulate(s, o["interval_s"], "partial", o["params"], 100, block="confirm")
    assert share(res) == pytest.approx(o["within"])
    fresh = simulate(s, o["interval_s"], "partial", o["params"], 300, block="validate")
    truth = np.random.default_rng(99)  # the process the calibration's points were drawn from
    y = np.array([x.pls * (0.001 + 0.03 * x.pls_age) for x in fresh]) + truth.normal(0, 5e-5, 300)
    k = int(np.sum(y <= bound))
    assert stats.binom.cdf(k, 300, 0.9) > 0.01, k


# -- a single run, not the mean (issue 24) ----------------------------------------------------------
def test_the_predictive_quantile_covers_fresh_single_runs_where_the_mean_ci_does_not():
    """Runs scattering around the mean with sd proportional to PLS (as the shipped calibration's
    do): on 2,000 fresh runs from the same process, the predictive 90% quantile covers a share
    compatible with 0.9 (two-sided binomial test at 1%), and the upper end of the mean's 95% CI
    covers far fewer (it describes the mean, not a run)."""
    rng = np.random.default_rng(24)
    d = _data(rng, b0=0.008, sd=0.0, seeds=8)
    y = d.pls * 0.008 + rng.normal(0, 1, d.y.size) * 0.004 * d.pls
    sel = select(Data(d.strategy, d.seed, d.pls, d.position, d.age, y), "auc")
    assert sel.chosen.name == "slope"
    c = sel.chosen.coef_for("partial")
    assert c.resid_var is not None and c.resid_var[1] > 0  # the scatter grows with PLS: detected
    x = rng.uniform(0.01, 0.5, 2000)
    fresh = x * 0.008 + rng.normal(0, 1, x.size) * 0.004 * x
    q90 = sel.chosen.predictive_quantile("partial", 0.9, x)
    k = int(np.sum(fresh <= q90))
    assert 0.005 < stats.binom.cdf(k, x.size, 0.9) < 0.995, k / x.size
    hi = sel.chosen.predict("partial", x)[2]
    assert np.mean(fresh <= hi) < 0.75


def test_a_single_runs_scatter_vanishes_with_pls_and_recovers_its_scale():
    """Residuals with sd 0.004 x PLS: the fitted variance v0 PLS + v1 PLS^2 is 0 at PLS 0 (the run
    without a lost update is the baseline itself), and at PLS 0.3 its sd is within 25% of the
    truth (0.0012) on 8 seeds of runs."""
    rng = np.random.default_rng(7)
    d = _data(rng, b0=0.008, sd=0.0, seeds=8)
    y = d.pls * 0.008 + rng.normal(0, 1, d.y.size) * 0.004 * d.pls
    f = fit_candidate(Data(d.strategy, d.seed, d.pls, d.position, d.age, y), "slope")
    for c in f.coef.values():
        assert c.residual_variance([0.0])[0] == 0.0
        assert abs(math.sqrt(c.residual_variance([0.3])[0]) / 0.0012 - 1) < 0.25


def test_the_constrained_fit_is_the_best_feasible_active_set_fit():
    """The Lawson-Hanson solve (one NNLS finds the active set) against the brute-force oracle, the
    feasible equality-constrained fit of smallest RSS over every set of active rows: the same
    coefficients on random problems whose free fit breaks a constraint."""
    from cprsim.calibrate.accuracy import _breaks, _constrained, _constrained_by_enumeration

    rng = np.random.default_rng(7)
    checked = 0
    for _ in range(400):
        n, p = int(rng.integers(4, 30)), int(rng.integers(1, 4))
        X, y = rng.normal(size=(n, p)), rng.normal(size=n)
        G = rng.normal(size=(int(rng.integers(1, 10)), p))
        b = np.linalg.lstsq(X, y, rcond=None)[0]
        if not _breaks(G, b):
            continue
        H = np.linalg.inv(X.T @ X)
        fast, brute = _constrained(X, y, b, H, G), _constrained_by_enumeration(X, y, b, H, G)
        assert not _breaks(G, fast)
        np.testing.assert_allclose(fast, brute, rtol=1e-9, atol=1e-12)
        checked += 1
    assert checked > 100


def test_a_fit_that_loses_accuracy_by_losing_less_is_constrained_not_dropped():
    """The shipped calibration's old pattern: one large-PLS run makes curvature fit a negative
    linear term (small PLS cost nothing, and the loss falls before it rises). The fit is
    constrained instead (the mean loss never falls as PLS grows, never negative): ``b0 >= 0`` binds,
    every candidate stays a model of lost updates, and the chosen one is admissible."""
    rng = np.random.default_rng(12)
    d = _data(rng)
    y = d.pls * (-0.002 + 0.02 * d.pls) + rng.normal(0, 2e-4, d.y.size)
    d2 = Data(d.strategy, d.seed, d.pls, d.position, d.age, y)
    free = np.linalg.lstsq(d2.X(("pls",)), y, rcond=None)[0]
    assert free[0] < 0  # the free fit falls at small PLS
    f = fit_candidate(d2, "curvature")
    sel = select(d2, "auc")
    assert "curvature" not in sel.inadmissible
    assert f.inadmissible(sel.ranges) is None and sel.chosen.inadmissible(sel.ranges) is None
    for c in f.coef.values():
        assert c.b[0] >= 0 and c.b[1] > 0
    for c in sel.chosen.coef.values():
        assert c.b[0] >= 0


def _qp_by_bounds(X, y, amax):
    """Least squares of ``y = X [b0, b2]`` subject to ``b0 >= 0`` and ``b0 + b2 amax >= 0``,
    solved another way: in the loss per unit PLS at age 0 and at ``amax`` (``c0 = b0``, ``c1 = b0
    + b2 amax``), the constraints are bounds, which ``scipy.optimize.lsq_linear`` handles."""
    from scipy.optimize import lsq_linear

    T = np.array([[1.0, 0.0], [-1.0 / amax, 1.0 / amax]])  # b = T c
    c = lsq_linear(X @ T, y, bounds=(0.0, np.inf), method="bvls", tol=1e-14).x
    return T @ c


def test_the_constrained_fit_is_the_bounded_least_squares_and_free_where_it_can_be():
    """``ols`` with the monotone constraints, against bounded least squares on a reparametrised
    problem (an independent solver), on data whose free fit breaks the constraint at age 0 and at
    the oldest age, and on data whose free fit keeps them (then bit-identical to the free fit)."""
    from cprsim.calibrate.accuracy import monotone_rows

    rng = np.random.default_rng(3)
    n = 60
    pls = rng.uniform(0.01, 0.3, n)
    age = rng.uniform(0.0, 0.4, n)
    # the first two break a constraint (at the youngest, then the oldest age); the third keeps both
    for b_true, breaks in (([-0.002, 0.05], True), ([0.006, -0.04], True), ([0.004, 0.01], False)):
        y = pls * (b_true[0] + b_true[1] * age) + rng.normal(0, 1e-4, n)
        d = Data(np.array(["ssu"] * n), np.zeros(n, int), pls, np.full(n, 0.5), age, y)
        X = d.X(("age",))
        G = monotone_rows(d, ("age",))
        # the corners: derivative in PLS at the smallest and largest age (position fixed)
        assert G.shape == (2, 2)
        np.testing.assert_allclose(sorted(G[:, 1]), [age.min(), age.max()])
        c = ols(X, y, True, G)
        free = ols(X, y, True)
        assert bool(np.any(G @ free.b < 0)) == breaks
        if not breaks:
            assert np.array_equal(c.b, free.b)
            continue
        assert np.all(G @ c.b >= -1e-15)
        # the other solver, with the age origin at the smallest age: b0' = b0 + b2 a0
        a0 = age.min()
        bp = _qp_by_bounds(np.column_stack([X[:, 0], X[:, 0] * (age - a0)]), y, age.max() - a0)
        np.testing.assert_allclose(c.b, [bp[0] - bp[1] * a0, bp[1]], rtol=1e-8, atol=1e-12)
        assert c.rss >= free.rss


def test_the_constrained_fit_moves_continuously_as_its_free_fit_crosses_zero():
    """No switch at the boundary: as the data's loss at age 0 goes from positive to negative, the
    fitted loss per unit PLS at the youngest measured age goes continuously to 0 and stays there (its largest step is
    small next to the free fit's), and the candidate stays eligible throughout."""
    rng = np.random.default_rng(5)
    d = _data(rng, b0=0.0, b2=0.02, sd=1e-4)
    noise = d.y - d.pls * 0.02 * d.age
    b0s = np.linspace(0.002, -0.002, 41)
    fitted, free = [], []
    for b0 in b0s:
        y = d.pls * (b0 + 0.02 * d.age) + noise
        dd = Data(d.strategy, d.seed, d.pls, d.position, d.age, y)
        f = fit_candidate(dd, "age", scatter=False, used={s: ("age",) for s in STRATS})
        assert f.inadmissible(select(dd, "auc").ranges) is None
        own = dd.take(dd.strategy == "ssu")
        at = np.array([1.0, own.age.min()])  # the loss per unit PLS at its youngest measured age
        fitted.append(at @ f.coef_for("ssu").b)
        free.append(at @ np.linalg.lstsq(own.X(("age",)), own.y, rcond=None)[0])
    fitted, free = np.array(fitted), np.array(free)
    assert fitted.min() >= -1e-15 and free.min() < 0  # 0 to rounding where the constraint binds
    assert np.max(np.abs(np.diff(fitted))) <= 1.5 * np.max(np.abs(np.diff(free)))


def test_a_calibration_file_with_a_loss_that_is_not_positive_is_refused(tmp_path):
    """Zero or negative coefficients would give "accuracy loss 0" and "allowed PLS inf": a one-line
    error naming the file and the key, through the CLI."""
    from click.testing import CliRunner

    from cprsim.cli import main

    base = (
        "[provenance]\ncalibrated = true\n[fit.partial]\nauc_slope = 0.01\nauc_slope_hi = 0.02\n"
        "logloss_slope = 0.01\nlogloss_slope_hi = 0.02\n"
    )
    for b in ("0.0", "-0.004"):
        p = tmp_path / f"c{b}.toml"
        p.write_text(
            base + f'[model.auc]\nchosen = "slope"\n[model.auc.coef."*"]\nb = [{b}]\n'
            "cov = [[1e-8]]\ndof = 3\nrss = 1e-8\nn = 4\n"
        )
        r = CliRunner().invoke(
            main, ["plan", "toy", "--max-accuracy-loss", "0.001", "--calibration", str(p)]
        )
        assert r.exit_code == 2, r.output
        line = r.output.strip()
        assert "\n" not in line and str(p) in line and "model.auc.coef" in line
        assert "not a model of lost updates" in line


def test_run_draws_are_the_predictive_distribution_and_common_to_intervals():
    """A run's draw depends on its replication only (common random numbers across intervals and
    strategies: the same uniform ``u`` of its ``("training", replication)`` stream). Over many runs
    at one PLS the draws' CDF is the predictive: with the calibration's held-out residuals (4
    seeds), the standardized draws are the residuals' interpolated quantile of u (from the median
    up, at least that: the monotone law) and their CDF is the run's law's (``RunLaws``, DKW band,
    1%); at a bin's median PLS each is one of the bin's
    residuals, with CDF k / (n + 1) at the k-th smallest; without them, Student-t's quantile of u
    (KS test)."""
    from cprsim.planner.accuracy import plan_accuracy
    from cprsim.streams import stream

    rng = np.random.default_rng(4)
    d = _data(rng, b0=0.004, sd=3e-4, seeds=4)

    class Cal:
        calibrated = True
        provenance = {"preset": "test"}
        raw = {"points": _points(d)}

    acc = plan_accuracy(Cal(), "auc")
    res = acc.fit.residuals
    assert res is not None

    class R:
        def __init__(self, rep, pls):
            self.replication, self.pls, self.pls_position, self.pls_age = rep, pls, 0.5, 0.0

    N = 3000
    runs = [R(i, 0.2) for i in range(N)]
    u = np.array([stream(7, i, "training").random() for i in range(N)])
    a = acc.run_draws(runs, "partial", 7)
    assert np.array_equal(a, acc.run_draws(runs, "partial", 7))
    assert not np.array_equal(a, acc.run_draws(runs, "partial", 8))
    m, sd, dof = acc.fit.predictive("partial", [0.2], [0.5], [0.0])
    z = (a - m[0]) / sd[0]
    low = u < 0.5
    assert np.allclose(z[low], res.ppf(u[low], 0.2))  # below the median: the law as fitted
    assert np.all(z >= res.ppf(u, 0.2) - 1e-9)  # from it up, at least that (its running maximum)
    # the draws' CDF is the run's law's (RunLaws, what a validation predicts): within the DKW
    # band (1%)
    dkw = math.sqrt(math.log(2 / 0.01) / (2 * N))
    law = acc.fit.run_laws("partial", [0.2], [0.5], [0.0])
    grid = np.quantile(a, np.linspace(0.02, 0.95, 25))  # below the largest (clipped) value
    assert np.all(np.abs([np.mean(a <= g) - float(law.cdf(g)[0]) for g in grid]) < dkw)
    # at a bin's median PLS a draw is one of that bin's residuals, the k-th smallest with
    # probability 1 / (n + 1) (the largest 2 / (n + 1))
    c = res.centers[1]
    at_c = acc.run_draws([R(i, c) for i in range(N)], "partial", 7)
    mc, sdc, _ = acc.fit.predictive("partial", [c], [0.5], [0.0])
    zc = (at_c - mc[0]) / sdc[0]
    assert np.all(np.min(np.abs(zc[:, None] - res.z[1][None, :]), axis=1) < 1e-9)
    n = res.z[1].size
    for k, zk in enumerate(res.z[1], start=1):
        assert abs(np.mean(zc <= zk + 1e-12) - (k + (k == n)) / (n + 1)) < dkw
    # the same replication at a larger PLS draws the same u of its own predictive
    b = acc.run_draws([R(i, 0.3) for i in range(N)], "partial", 7)
    m3, sd3, _ = acc.fit.predictive("partial", [0.3], [0.5], [0.0])
    assert np.allclose((b - m3[0]) / sd3[0], res.ppf(u, 0.3))
    # without held-out residuals: Student-t's quantile of the same u
    t_acc = replace(acc, fit=replace(acc.fit, residuals=None))
    a_t = t_acc.run_draws(runs, "partial", 7)
    assert stats.kstest((a_t - m[0]) / sd[0], stats.t(dof).cdf).pvalue > 0.01
    assert np.allclose((a_t - m[0]) / sd[0], stats.t.ppf(u, dof))


@pytest.mark.slow
def test_refit_rewrites_the_model_of_a_calibration_file(tmp_path):
    """`cprsim calibrate --refit FILE` (no torch needed): [model] recomputed from [points] with
    today's selection; the points are untouched; the planner reads the result."""
    import tomllib

    from click.testing import CliRunner

    from cprsim.cli import main

    rng = np.random.default_rng(12)
    d = _data(rng)
    y = d.pls * (-0.002 + 0.02 * d.pls) + rng.normal(0, 2e-4, d.y.size)
    pts = _points(Data(d.strategy, d.seed, d.pls, d.position, d.age, y))
    path = _write_calibration(tmp_path / "cal.toml", pts)
    doc = tomllib.loads(path.read_text())
    # what an older cprsim wrote: the free curvature fit, whose loss falls at small PLS (b0 < 0);
    # the planner refuses such a file
    X = design(("pls",), d.pls, d.position, d.age)
    b = np.linalg.lstsq(X, y, rcond=None)[0]
    assert b[0] < 0
    first = next(iter(doc["model"]["auc"]["coef"].values()))
    stale = {**first, "b": b.tolist(), "cov": np.eye(2).tolist()}
    doc["model"]["auc"].update(
        chosen="curvature", terms=["pls", "pls_x_pls"], pooled=True, coef={"*": stale}
    )
    doc["model"]["auc"].pop("pooling_weight", None)
    from cprsim.calibrate.calibration import load_calibration, to_toml
    from cprsim.errors import InputError

    path.write_text(to_toml(doc))
    with pytest.raises(InputError, match="not a model of lost updates"):
        load_calibration(path)
    r = CliRunner().invoke(main, ["calibrate", "--refit", str(path)])
    assert r.exit_code == 0, r.output
    assert "refitted" in r.output
    new = tomllib.loads(path.read_text())
    assert new["points"] == doc["points"]
    # the refit is constrained: no strategy's loss per unit PLS is negative at small PLS
    assert all(c["b"][0] >= 0 for c in new["model"]["auc"]["coef"].values())
    load_calibration(path)
    r = CliRunner().invoke(
        main,
        [
            "plan",
            "toy",
            "--max-accuracy-loss",
            "0.001",
            "--calibration",
            str(path),
            "-n",
            "40",
            "--search-replications",
            "40",
            "--strategies",
            "partial",
        ],
    )
    assert r.exit_code == 0, r.output


@pytest.mark.slow
def test_runs_within_judges_fresh_runs_as_the_planner_judged_its_confirmation():
    """`cprsim.planner.runs_within` on the confirmation block reproduces each option's `within`
    exactly: a user re-checking a plan on other replications uses the planner's own verdict."""
    from cprsim import scenario as sc
    from cprsim.planner import make_plan, runs_within
    from cprsim.planner.search import simulate

    s = sc.load("toy")
    plan = make_plan(
        s, 0.001, "auc", replications=100, search_replications=60, strategies=("partial", "mfu")
    )
    checked = []
    for o in plan.options:
        if o.strategy == "full" or not o.meets_bound:  # a failed verdict may be curtailed early
            continue
        res = simulate(s, o.interval_s, o.strategy, o.params, 100, block="confirm")
        assert float(np.mean(runs_within(res, o, plan))) == pytest.approx(o.within)
        checked.append(o.within)
    assert checked and min(checked) < 1.0  # not a trivial all-within comparison


def test_the_scatter_check_flags_a_noise_floor_the_model_misses():
    """``scatter_check`` on runs drawn from a known single-run law: with a scatter that is the
    model's (variance v1 PLS^2) the smallest quarter of PLS scatters about as the model says and is
    not flagged; with a constant floor added that the model (fitted without it) cannot follow, the
    smallest PLS scatter several times the model's variance, flagged at 5%."""
    from cprsim.calibrate.accuracy import residual_model, scatter_check

    rng = np.random.default_rng(11)
    n = 400
    pls = rng.uniform(0.001, 0.5, n)
    # a floor of sd 1e-3 is flagged in 40 of 40 seeds; without it, 2 of 40 false flags (5% test)
    for floor, flagged in ((0.0, False), (1e-3, True)):
        y = 0.008 * pls + rng.normal(0.0, 1.0, n) * np.sqrt(1e-5 * pls**2 + floor**2)
        d = Data(np.full(n, "partial"), np.arange(n) % 8, pls, np.full(n, 0.5), np.zeros(n), y)
        c = ols(d.X(()), y)
        rv = residual_model(pls, y - d.X(()) @ c.b, c.dof)
        c = replace(c, resid_var=rv)
        chk = scatter_check(c, (), d)
        assert chk is not None and chk["n"] == pytest.approx(n / 4, abs=1)
        assert chk["pls_max"] == pytest.approx(np.quantile(pls, 0.25))
        assert (chk["ratio"] > 1.0 and chk["p"] < 0.05) == flagged, chk


def test_held_out_coverage_holds_under_the_models_law_and_flags_a_floor_it_misses():
    """``held_out_coverage`` against the law the runs were drawn from. Normal scatter with the
    model's variance (sd 0.004 PLS): at q = 0.9 the held-out share over 8 seeds x 3 strategies is
    within a two-sided 1% binomial band of 0.9 and not flagged, with the Student-t quantile and
    with the planner's (the other seeds' held-out residuals, nested); the Student-t count equals a
    recount seed by seed (each seed's runs against a fit without it). With a constant noise floor
    added that the model's variance cannot follow, the Student-t quantile covers the smallest PLS
    less than promised and the check flags it (P < 0.05); the held-out residuals of the runs' own
    PLS bin absorb it (not flagged)."""
    from cprsim.calibrate.accuracy import held_out_coverage

    rng = np.random.default_rng(29)
    base = _data(rng, b0=0.008, sd=0.0, seeds=8, n=30)

    def with_y(y):
        return Data(base.strategy, base.seed, base.pls, base.position, base.age, y)

    d = with_y(base.pls * 0.008 + rng.normal(0, 1, base.y.size) * 0.004 * base.pls)
    n = int(np.sum(d.pls > 0))
    lo, hi = stats.binom.ppf(0.005, n, 0.9), stats.binom.ppf(0.995, n, 0.9)
    for residuals in (False, True):
        cov = held_out_coverage(d, "slope", residuals=residuals)
        r90 = next(r for r in cov["all"] if r["q"] == 0.9)
        assert r90["n"] == n
        assert lo <= r90["within"] <= hi, (residuals, r90)
        assert r90["p"] == pytest.approx(stats.binom.cdf(r90["within"], n, 0.9))
        assert r90["p"] >= 0.05
        small = next(r for r in cov["small"] if r["q"] == 0.9)
        assert 0 < small["n"] < n / 3
    cov = held_out_coverage(d, "slope", residuals=False)
    recount = 0
    for s in np.unique(d.seed):
        f = fit_candidate(d.take(d.seed != s), "slope")
        for st in STRATS:
            h = d.take((d.seed == s) & (d.strategy == st))
            recount += int(np.sum(h.y <= f.predictive_quantile(st, 0.9, h.pls)))
    assert recount == cov["all"][1]["within"]
    # a constant floor (sd 1e-3) the model's variance, vanishing at PLS 0, cannot follow
    floor = rng.normal(0, 1, base.y.size) * np.sqrt(1e-5 * base.pls**2 + 1e-3**2)
    d = with_y(base.pls * 0.008 + floor)
    r = next(r for r in held_out_coverage(d, "slope", residuals=False)["small"] if r["q"] == 0.9)
    assert r["share"] < 0.9 and r["p"] < 0.05, r
    r = next(r for r in held_out_coverage(d, "slope")["small"] if r["q"] == 0.9)
    assert r["p"] >= 0.05, r


def test_held_out_residuals_quantiles_by_hand():
    """Two bins of made-up residuals: at a bin's median PLS the q-quantile is its
    ceil((n + 1) q)-th smallest residual; halfway in log PLS between the medians, the mean of the
    two; beyond the outer medians, the nearest bin's; a run's CDF (RunLaws) inverts ``ppf`` at
    each bin's steps (exactly, also where (n + 1) k / (n + 1) rounds above k) and is 1 from the
    largest residual on (the draws' law); tied PLS merge bins rather than leave one empty."""
    a, b = np.arange(1.0, 10.0), np.arange(0.0, 40.0, 2.0)  # 9 and 20 residuals
    r = HeldOutResiduals((0.01, 0.04), (a, b))
    for q in (0.1, 0.5, 0.9):
        ka, kb = math.ceil(10 * q), math.ceil(21 * q)
        assert float(r.ppf(q, 0.01)) == a[ka - 1]
        assert float(r.ppf(q, 0.04)) == b[kb - 1]
        assert float(r.ppf(q, 0.02)) == pytest.approx((a[ka - 1] + b[kb - 1]) / 2)
        assert float(r.ppf(q, 0.001)) == a[ka - 1] and float(r.ppf(q, 0.5)) == b[kb - 1]
    assert float(r.ppf(0.99, 0.01)) == a[-1]  # (n + 1) q > n: the largest stands in
    assert r.unresolved(0.95) and not r.unresolved(0.9)  # 10 x 0.95 > 9; 10 x 0.9 <= 9
    # a run whose loss is the multiplier itself (mean 0, scale 1 at PLS 0.01): its CDF at the
    # k-th residual is k / (n + 1), 1 from the largest on (a draw never exceeds it)
    law = RunLaws.of(_unit_law(0.01), (), r, 0.01, 0.5, 0.0)
    for k in range(1, 10):
        assert float(law.cdf(a[k - 1])[0]) == pytest.approx(k / 10 if k < 9 else 1.0)
    assert float(law.cdf(a[0] - 1)[0]) == 0.0
    assert float(law.cdf(100.0)[0]) == 1.0
    # n = 24: (n + 1) k / (n + 1) rounds above k for some k; the k-th step is still the k-th
    c = np.sort(np.random.default_rng(3).normal(size=24))
    r24 = HeldOutResiduals((0.05,), (c,))
    law24 = RunLaws.of(_unit_law(0.05), (), r24, 0.05, 0.5, 0.0)
    for k in range(1, 25):
        assert float(r24.ppf(k / 25, 0.05)) == c[k - 1]
        if k / 25 < 0.5 or c[k - 1] >= 0:  # from the median up the law is held at >= 0
            assert float(law24.cdf(c[k - 1])[0]) == pytest.approx(k / 25 if k < 24 else 1.0)
    # tied PLS (two levels): bins merge instead of leaving one empty
    d = Data(
        np.full(200, "partial"),
        np.arange(200) % 5,
        np.where(np.arange(200) < 140, 0.01, 0.2),
        np.full(200, 0.5),
        np.zeros(200),
        np.where(np.arange(200) < 140, 0.01, 0.2) * (0.008 + 0.002 * np.sin(np.arange(200))),
    )
    t = HeldOutResiduals.from_data(d, "slope")
    assert t is not None and t.centers == (0.01, 0.2) and t.counts() == [140, 60]
    u = np.linspace(0.001, 0.999, 500)
    v = r.ppf(u, np.full(u.size, 0.02))
    assert np.all(np.diff(v) >= 0)  # a quantile function: non-decreasing in u
    assert np.array_equal(r.ppf_outer(r.quantiles(u), np.array([0.02]))[:, 0], v)


def _falling_law():
    """A two-bin law whose second bin's residuals are a tenth of the first's (its q-quantile
    falls from the first median to the second, where the scale has not grown tenfold), on
    ``loss = 0.004 PLS + sqrt(PLS / 0.01) Z``."""
    z = np.linspace(-1.0, 9.0, 99)
    return _unit_law(0.01, b0=0.004), HeldOutResiduals((0.01, 0.1), (z, z / 10))


def test_a_runs_quantile_never_falls_as_pls_grows_from_the_median_up():
    """The monotone law (single_run_quantile): on a law whose q-quantile falls by a third and
    more between two bins, from the median up a run's quantile is the running maximum of the law
    over PLS (a brute-force maximum over 20,000 log-spaced PLS per run, to within the law's own
    fall inside one lattice step), never below the law as fitted nor 0, and non-decreasing in PLS;
    below the median it is the law as fitted; and at every PLS it stays non-decreasing in u."""
    c, res = _falling_law()
    pls = np.geomspace(1e-4, 1.0, 3000)
    one = np.ones(pls.shape)
    for q in (0.3, 0.5, 0.6, 0.9, 0.99):
        raw = raw_quantile(c, (), res, q * one, pls, 0.5 * one, 0 * one)
        mono = single_run_quantile(c, (), res, q, pls, 0.5, 0.0)
        if q < 0.5:
            assert np.array_equal(mono, raw)
            continue
        top = np.maximum.accumulate(raw)
        assert np.max((top - raw) / top) > 0.3  # the law as fitted falls
        assert np.all(mono >= raw) and np.all(mono >= 0)
        assert np.all(np.diff(mono) >= -1e-3 * mono[1:])  # never falls (within a lattice step)
        for x in pls[::300]:  # the brute-force running maximum, from PLS -> 0 (loss 0) up to x
            g = np.geomspace(x * 1e-8, x, 20_000)
            brute = max(
                0.0, float(np.max(raw_quantile(c, (), res, q + 0 * g, g, 0.5 + 0 * g, 0 * g)))
            )
            (m,) = single_run_quantile(c, (), res, q, x, 0.5, 0.0)
            assert brute * (1 - 1e-4) - 1e-15 <= m <= brute * (1 + 1e-4) + 1e-15
    u = np.linspace(0.01, 0.99, 99)
    for x in (0.005, 0.03, 0.2):  # a quantile function in u at each PLS (also across u = 1/2)
        v = single_run_quantile(c, (), res, u, x, 0.5, 0.0)
        assert np.all(np.diff(v) >= 0)


def test_the_planners_draws_and_bounds_use_the_monotone_law():
    """AccuracyFit.draw (the plan's simulated runs), predictive_quantile (its PLS bound) and a
    single run's value are the monotone law; asked alone, or with other runs, or through the
    bound's cache, a run gets the same value; and the plan's largest allowed PLS is where that
    law crosses the bound."""
    c, res = _falling_law()
    fit = AccuracyFit("slope", (), True, {"*": c}, None, 1.0, "auc", {}, "test", res)
    rng = np.random.default_rng(5)
    u, pls = rng.random(400), np.exp(rng.uniform(np.log(1e-3), np.log(0.5), 400))
    pos, age = rng.uniform(0.2, 0.8, 400), np.zeros(400)
    both = fit.draw("partial", u, pls, pos, age)
    assert np.array_equal(both, single_run_quantile(c, (), res, u, pls, pos, age))
    alone = [fit.draw("partial", u[i], pls[i], pos[i], age[i])[0] for i in range(0, 400, 37)]
    assert np.array_equal(np.array(alone), both[::37])
    x = np.geomspace(1e-3, 0.5, 50)
    q9 = fit.predictive_quantile("partial", 0.9, x)
    assert np.array_equal(q9, single_run_quantile(c, (), res, 0.9 + 0 * x, x, 0.5 + 0 * x, 0 * x))
    assert np.array_equal(fit.predictive_quantile("partial", 0.9, x), q9)  # from the cache
    bound = float(q9[30])
    b = fit.max_pls(bound, "partial", q=0.9)
    (at,) = fit.predictive_quantile("partial", 0.9, b)
    (past,) = fit.predictive_quantile("partial", 0.9, b * (1 + 1e-6))
    assert at <= bound < past * (1 + 1e-9)


def test_a_fit_made_by_replace_does_not_reuse_its_originals_running_maxima():
    """The running maxima a fit keeps for its quantiles belong to its own law: a fit made from it
    with dataclasses.replace (other residuals, as with_held_out_residuals makes) starts afresh."""
    c, res = _falling_law()
    fit = AccuracyFit("slope", (), True, {"*": c}, None, 1.0, "auc", {}, "test", res)
    x = np.array([0.0126, 0.05])
    fit.predictive_quantile("partial", 0.9, x)  # fills its cache
    z = np.linspace(-1.0, 9.0, 99)
    growing = replace(fit, residuals=HeldOutResiduals(res.centers, (z / 10, z)))
    fresh = AccuracyFit(
        "slope", (), True, {"*": c}, None, 1.0, "auc", {}, "test", growing.residuals
    )
    assert np.array_equal(
        growing.predictive_quantile("partial", 0.9, x), fresh.predictive_quantile("partial", 0.9, x)
    )


def test_a_runs_cdf_with_no_scale_and_a_negative_mean_is_held_at_zero_from_the_median():
    c = Coef(np.array([-0.01]), np.zeros((1, 1)), 30, 0.0, 31, (0.0, 0.0))
    laws = RunLaws.of(c, (), None, np.array([0.1, 0.0]), 0.5, 0.0)
    assert laws.cdf(-0.001)[0] == 0.5 and laws.cdf(0.0)[0] == 1.0  # mean -0.001 below 1/2, then 0
    assert laws.cdf(-0.002)[0] == 0.0 and laws.cdf(0.0)[1] == 1.0
    assert RunLaws.of(c, (), None, np.empty(0), 0.5, 0.0).cdf(0.0).size == 0


@pytest.mark.parametrize("residuals", [True, False])
def test_a_runs_cdf_inverts_its_monotone_law(residuals):
    """RunLaws (a validation's predicted share within its bound and the quantiles of its mixture)
    is the distribution the planner draws from: at every u (also either side of 1/2, where the
    law switches), P(loss <= Q(u)) >= u and P(loss < Q(u)) <= u, and P(loss <= x) is the share
    of a fine grid of u drawing at most x, for runs where the monotone law binds and where it does
    not, with the held-out residuals (exact, at their steps) and with Student-t's (closed form); a
    run at PLS 0 is a point at 0; a run whose scale is 0 and mean negative is held at 0 from the
    median up."""
    c, res = _falling_law()
    if residuals:  # 40 residuals a bin: 1/2 is not a step, and the law binds at the median
        z = np.linspace(-1.0, 9.0, 40)
        res = HeldOutResiduals((0.01, 0.1), (z, z / 10))
    if not residuals:
        # Student-t's law with a curvature term: a mean that peaks and falls, held by the law
        c = Coef(np.array([0.02, -0.1]), np.diag([1e-6, 1e-5]), 30, 1.0, 32, (1e-6, 1e-5))
    terms = () if residuals else ("pls",)
    r = res if residuals else None
    pls = np.array([0.0, 0.003, 0.02, 0.06, 0.15, 0.3])
    pos, age = np.full(pls.size, 0.5), np.zeros(pls.size)
    laws = RunLaws.of(c, terms, r, pls, pos, age)
    held = 0
    for u in np.concatenate([np.linspace(0.02, 0.98, 49), [0.4999, 0.5, 0.5001]]):
        q = single_run_quantile(c, terms, r, u, pls, pos, age)
        held += int(np.sum(q > raw_quantile(c, terms, r, u + 0 * pls, pls, pos, age)))
        for i, x in enumerate(q):
            assert laws.cdf(x)[i] >= u - 1e-9
            assert laws.cdf(x - 1e-9 * max(abs(x), 1e-12))[i] <= u + 1e-9
    assert held > 0  # the law binds somewhere
    assert laws.cdf(-1e-12)[0] == 0.0 and laws.cdf(0.0)[0] == 1.0
    # the CDF is the share of a fine uniform grid of u whose draws lose at most x
    u = (np.arange(20_000) + 0.5) / 20_000
    for i in range(1, pls.size):
        one = np.ones(u.size)
        draws = single_run_quantile(c, terms, r, u, pls[i] * one, 0.5 * one, 0 * one)
        for x in np.quantile(draws, [0.1, 0.3, 0.45, 0.5, 0.55, 0.7, 0.9]):
            assert laws.cdf(x)[i] == pytest.approx(np.mean(draws <= x), abs=2 / u.size)
