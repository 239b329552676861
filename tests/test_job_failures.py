"""Job-level interruptions (``[failures.job]``): every strategy rolls back to its last full checkpoint."""

from __future__ import annotations

import numpy as np
import pytest
from scenario_builder import small, validated

from cprsim import analytic
from cprsim import scenario as sc
from cprsim.costs import costs_of
from cprsim.pls import ShardLedger
from cprsim.scenario import HOUR
from cprsim.sim.engine import simulate_one
from cprsim.sim.replicate import estimate, run_replications

BASE = small(
    name="jobfail",
    seed=11,
    replications=300,
    cluster={"embedding_servers": 8, "embedding_gb": 40.0, "dense_gb": 0.4},
    job={"duration_h": 20.0, "samples_per_s": 10000.0},
    reschedule={"mean_s": 120.0},
    failures={"job": {"family": "exponential", "mtbf_h": 4.0, "restart_s": 200.0}},
)


def scen(**upd) -> sc.Scenario:
    return validated(BASE, **upd)


def test_only_job_failures_cost_full_and_partial_recovery_the_same():
    """Partial recovery helps only node failures: with job-level interruptions alone it is full recovery."""
    full, _ = run_replications(scen(**{"strategy.name": "full"}), 100)
    part, _ = run_replications(scen(**{"strategy.name": "partial"}), 100)
    assert sum(r.failures_job for r in full) > 100  # the test exercises the process
    for a, b in zip(full, part):  # common random numbers: identical, not only within the CI
        assert a.wall_s == pytest.approx(b.wall_s, rel=1e-12) and b.pls == 0.0
    ef, ep = estimate([r.overhead for r in full]), estimate([r.overhead for r in part])
    assert ef.lo <= ep.mean <= ef.hi


def test_job_failures_match_the_exact_poisson_oracle():
    """Exponential job failures, constant restart: E[wall] = analytic.full_wall with R = restart + load."""
    s = scen(**{"strategy.name": "full"})
    res, _ = run_replications(s, 400)
    c = costs_of(s)
    expect = analytic.full_wall(
        analytic.Job(work_s=s.duration_s, save_s=c.save_s),
        s.interval_s,
        analytic.Failures(rate=1 / (4.0 * HOUR), recovery_s=200.0 + c.load_s),
    )
    e = estimate([r.wall_s for r in res])
    assert e.lo <= expect <= e.hi, (e, expect)
    assert all(r.failures_trainer == r.failures_embedding == 0 for r in res)


def test_mfu_rolls_back_to_its_last_full_save_not_its_last_partial_one():
    """Hand-computed: with K = 4, the saves at 1, 2, 3 and 5 h of progress are partial and the one
    at 4 h is full; a job failure at 5.5 h of wall time rolls back to progress 4 h, and the restore
    is a full load of every node."""
    s = scen(
        **{
            "strategy": {
                "name": "mfu",
                "top_fraction": 0.1,
                "full_every": 4,
                "counter_overhead": 0.0,
            },
            "failures.job": {"family": "constant", "mtbf_h": 5.5, "restart_s": 200.0},
            "failures.start": "fresh",
        }
    )
    r, ev = simulate_one(s, 0, record=True)
    first_fail = next(e.time_s for e in ev if e.kind == "fail")
    assert first_fail == pytest.approx(5.5 * HOUR)
    starts = [e.time_s for e in ev if e.kind == "save_start" and e.time_s < first_fail]
    ends = [e.time_s for e in ev if e.kind == "save_end" and e.time_s < first_fail]
    assert len(starts) == len(ends) == 5
    progress = first_fail - sum(b - a for a, b in zip(starts, ends))
    rb = next(e for e in ev if e.kind == "rollback")
    assert rb.value == pytest.approx(progress - 4 * HOUR, rel=1e-9)
    loads = [e.value for e in ev if e.kind == "load_start"]
    assert loads[0] == pytest.approx(costs_of(s).load_s)
    assert r.failures_job >= 1 and r.lost_s >= rb.value


def test_vanilla_partial_rolls_back_to_its_last_save():
    s = scen(
        **{
            "strategy.name": "partial",
            "failures.job": {"family": "constant", "mtbf_h": 3.5, "restart_s": 200.0},
            "failures.start": "fresh",
        }
    )
    _r, ev = simulate_one(s, 0, record=True)
    rb = next(e for e in ev if e.kind == "rollback")
    # every vanilla save is a full checkpoint: at most one interval is lost
    assert 0 < rb.value < s.interval_s


def test_ledger_rollback_forgives_updates_that_will_be_re_executed():
    led = ShardLedger(2)
    led.saved(10.0)
    led.fail(0, 30.0)  # loses (10, 30) of shard 0: 20 x 1/2
    assert led.lost == pytest.approx(10.0)
    healed = led.rollback(20.0)  # a full checkpoint at 20: (20, 30) will be re-executed
    assert healed == pytest.approx(5.0) and led.lost == pytest.approx(5.0)
    assert np.all(led.markers == 20.0)
    assert led.rollback(5.0) == pytest.approx(5.0) and led.lost == pytest.approx(0.0)


def test_partial_pls_is_forgiven_after_a_job_rollback():
    """With node and job failures, PLS never exceeds what vanilla would lose without job failures."""
    upd = {
        "strategy.name": "partial",
        "failures.embedding": {"family": "exponential", "mtbf_h": 30.0},
    }
    with_job, _ = run_replications(scen(**upd), 60)
    without, _ = run_replications(
        scen(**upd, **{"failures.job": None})
        if False
        else sc.validate(
            {
                **BASE,
                "failures": {"embedding": {"family": "exponential", "mtbf_h": 30.0}},
                "strategy": {"name": "partial"},
            },
            "t",
        ),
        60,
    )
    assert all(0.0 <= r.pls <= 1.0 for r in with_job)
    assert np.mean([r.pls for r in with_job]) <= np.mean([r.pls for r in without]) + 1e-12


def test_summary_has_tails_and_ettr():
    res, _ = run_replications(scen(), 50)
    from cprsim.report import summary_dict

    d = summary_dict(scen(), res)
    for k in ("overhead", "ckpt_overhead", "pls", "ettr"):
        m = d["metrics"][k]
        if k == "ettr":  # higher is better: its bad tail is the low one
            assert {"p50", "p10", "p1", "mean", "ci95"} <= set(m)
            assert m["p50"] >= m["p10"] >= m["p1"]
        else:
            assert {"p50", "p90", "p99", "mean", "ci95"} <= set(m)
            assert m["p50"] <= m["p90"] <= m["p99"]
        assert m["ci95"][0] >= 0
    x = np.array([r.overhead for r in res])
    assert d["metrics"]["overhead"]["p90"] == pytest.approx(float(np.percentile(x, 90)))
    assert d["metrics"]["ettr"]["mean"] == pytest.approx(
        np.mean([r.useful_s / r.wall_s for r in res])
    )


def test_non_negative_metrics_never_get_a_negative_lower_bound():
    e = estimate([0.0] * 18 + [1.0, 5.0])
    assert e.lo == 0.0 and e.hi > 0
    e2 = estimate([-1.0, 1.0, 2.0])
    assert e2.lo < 0  # signed quantities keep their interval


def test_simulate_reports_the_accuracy_loss_implied_by_pls(tmp_path):
    from click.testing import CliRunner

    from cprsim.calibrate.calibration import calibration_for
    from cprsim.cli import main
    from cprsim.planner.accuracy import plan_accuracy

    out = tmp_path / "run"
    r = CliRunner().invoke(
        main,
        [
            "simulate",
            "cpr-production",
            "--strategy",
            "partial",
            "--interval",
            "6h",
            "-n",
            "30",
            "--out",
            str(out),
        ],
    )
    assert r.exit_code == 0, r.output
    assert "AUC loss from PLS" in r.output and "P90" in r.output
    import json

    d = json.loads((out / "summary.json").read_text())
    import csv

    import numpy as np
    from scipy import stats

    from cprsim import scenario as sc
    from cprsim.calibrate.accuracy import design

    # the chosen model of the calibration a plan of cpr-production uses (its matched one)
    fit = plan_accuracy(calibration_for(sc.load("cpr-production")), "auc").fit
    rows = list(csv.DictReader((out / "replications.csv").open()))
    X = design(
        fit.terms,
        [float(r["pls"]) for r in rows],
        [float(r["pls_position"]) for r in rows],
        [float(r["pls_age"]) for r in rows],
    )
    c = fit.coef_for("partial")
    x = X.mean(
        axis=0
    )  # the model is linear in its columns: the mean loss is the prediction at the mean column
    m = float(x @ c.b)
    h = float(stats.t.ppf(0.975, c.dof)) * float(np.sqrt(x @ c.cov @ x))
    a = d["accuracy_loss"]["auc"]
    assert a["mean"] == pytest.approx(max(0.0, m), abs=1e-12)
    assert a["ci95"] == pytest.approx([max(0.0, m - h), max(0.0, m + h)], abs=1e-12)
    assert a["p90"] == pytest.approx(
        max(0.0, float(np.percentile(np.maximum(X @ c.b, 0.0), 90))), abs=1e-12
    )
    full = CliRunner().invoke(main, ["simulate", "cpr-production", "-n", "5", "--json"])
    assert json.loads(full.output)["accuracy_loss"] is None  # full recovery loses no update


def test_fit_as_job_writes_a_job_level_process_a_scenario_can_use(tmp_path):
    from pathlib import Path

    from click.testing import CliRunner

    from cprsim.cli import main
    from cprsim.failures.fit import fit_all
    from cprsim.failures.traces import read_trace

    trace = Path(__file__).resolve().parents[1] / "traces" / "examples" / "weibull-64.csv"
    out = tmp_path / "job.toml"
    r = CliRunner().invoke(
        main,
        [
            "fit",
            str(trace),
            "--as",
            "job",
            "--cluster-size",
            "38",
            "--bootstrap",
            "0",
            "--out",
            str(out),
        ],
    )
    assert r.exit_code == 0, r.output
    t, obs = read_trace(trace, "csv", {}, None).lifetimes(None)
    best = fit_all(t, obs, bootstrap=0).best
    scen = tmp_path / "s.toml"
    scen.write_text('name = "j"\n[job]\nduration_h = 50.0\n[failures]\nmodel = "job.toml"\n')
    s = sc.load(str(scen))
    assert s.failures.job is not None and s.failures.job.family == "exponential"
    assert s.failures.job.mtbf_h == pytest.approx(best.mean_ / 38, rel=1e-9)
    bad = CliRunner().invoke(
        main, ["fit", str(trace), "--as", "job", "--out", str(tmp_path / "x.toml")]
    )
    assert bad.exit_code == 2 and "--cluster-size" in bad.output
