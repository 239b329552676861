"""The node lifecycle ([lifecycle], issue 16): regression, closed forms, hand-computed timelines.

Statistical tests compare the simulator's mean (fixed seed) with a closed form through the 95%
confidence interval of the mean.
"""

from __future__ import annotations

import csv
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from scenario_builder import merged, small
from scipy import stats

from cprsim import analytic
from cprsim import scenario as sc
from cprsim.failures.distributions import Distribution
from cprsim.scenario import HOUR
from cprsim.sim.engine import Runaway, simulate_one
from cprsim.sim.lifecycle import fast_sample
from cprsim.sim.replicate import estimate, run_replications

GOLDEN = Path(__file__).parent / "golden"


# -- 1. without [lifecycle], the engine is the one before it --------------------------------------
def _golden():
    sys.path.insert(0, str(GOLDEN))
    try:
        import make_lifecycle_off
    finally:
        sys.path.remove(str(GOLDEN))
    return make_lifecycle_off


def _mismatches(want: dict, got: dict, rtol: float) -> list[str]:
    """Where ``got`` differs from ``want``: integers and strings exactly, floats beyond ``rtol``."""
    out = []
    for part in ("rows", "events"):
        w, g = want[part], got[part]
        if len(w) != len(g):
            out.append(f"{part}: {len(g)} entries, want {len(w)}")
            continue
        for i, (a, b) in enumerate(zip(w, g)):
            if len(a) != len(b):
                out.append(f"{part}[{i}]: {b!r}, want {a!r}")
                continue
            for x, y in zip(a, b):
                if isinstance(x, float) or isinstance(y, float):
                    if not math.isclose(x, y, rel_tol=rtol, abs_tol=rtol):
                        out.append(f"{part}[{i}]: {y!r}, want {x!r}")
                elif x != y:
                    out.append(f"{part}[{i}]: {b!r}, want {a!r}")
    return out


def test_every_builtin_without_a_lifecycle_gives_the_results_it_gave_before_the_lifecycle_existed():
    """Results and event logs of the engine at 50ea55a (tests/golden/make_lifecycle_off.py), compared
    at the file's relative tolerance: floats may differ in their last bits between CPUs (NumPy's
    kernels), event kinds, nodes and counts may not."""
    g = _golden()
    golden = json.loads((GOLDEN / "lifecycle_off.json").read_text())
    assert golden["fields"] == g.FIELDS and golden["rtol"] == g.RTOL <= 1e-9
    want = golden["cases"]
    got = {k: g.values(s) for k, s in g.cases()}
    assert set(got) == set(want)
    bad = {k: m[:3] for k in want if (m := _mismatches(want[k], got[k], g.RTOL))}
    assert bad == {}


def test_the_golden_comparison_fails_on_a_change_of_the_model():
    """The tolerance is far below any real change: a job 1e-7 longer (18 ms of 50 h) is caught."""
    g = _golden()
    golden = json.loads((GOLDEN / "lifecycle_off.json").read_text())
    key, s = next((k, s) for k, s in g.cases() if k == "toy/full/blocking")
    assert _mismatches(golden["cases"][key], g.values(s), g.RTOL) == []
    longer = s.with_updates({"job.duration_h": s.job.duration_h * (1 + 1e-7)})
    assert _mismatches(golden["cases"][key], g.values(longer), g.RTOL) != []


def test_same_seed_gives_identical_bytes_on_one_machine(tmp_path):
    """On one machine the promise is bytes: the same case run here and in a fresh process."""
    import subprocess

    g = _golden()
    key, s = next((k, s) for k, s in g.cases() if k == "toy/mfu/blocking")
    here = g.digest(g.values(s))
    code = (
        f"import sys; sys.path.insert(0, {str(GOLDEN)!r}); import make_lifecycle_off as g;"
        f"print(g.digest(g.values(dict(g.cases())[{key!r}])))"
    )
    there = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert there.stdout.strip() == here == g.digest(g.values(s))


BASE = small()


def scen(**upd) -> sc.Scenario:
    return merged(BASE, **upd)


def cli_runs(s: sc.Scenario, n: int, folder: Path) -> list[dict[str, float]]:
    """``s`` written as a scenario file and run by ``cprsim simulate FILE -n n --out``: the rows
    of its replications.csv (what a user of the command line gets)."""
    from cli_helpers import run

    f = folder / "scenario.toml"
    f.write_text(sc.to_toml(sc.effective_dict(s)))
    r = run("simulate", str(f), "-n", str(n), "--out", str(folder / "out"))
    assert r.exit_code == 0, r.output
    with open(folder / "out" / "replications.csv", newline="") as fh:
        rows = [{k: float(v) for k, v in row.items()} for row in csv.DictReader(fh)]
    assert len(rows) == n
    return rows


# -- 2. closed forms --------------------------------------------------------------------------------
@pytest.mark.slow
def test_ample_standbys_give_the_closed_form_of_full_recovery_with_rho_the_swap_time(tmp_path):
    """Exponential failures, 1,000 warm standbys, no detection delay, unlimited repair: a failed node
    is back after the swap time, so the exact mean wall of full recovery (analytic.full_wall with the
    nodes-still-up recovery rate, as for [reschedule]) holds with rho = swap."""
    N, mu, rho, d, L = 4, 1 / HOUR, 400.0, 30.0, 30.0
    s = scen(
        seed=11,
        cluster={"embedding_servers": N},
        reschedule={"family": "constant", "mean_s": 5.0},
        failures={"embedding": {"family": "exponential", "mtbf_h": 1 / mu / HOUR}},
        costs={"save_s": d, "load_s": L},
        checkpoint={"interval_h": 0.07},
        strategy={"name": "full"},
        lifecycle={"standbys": 1000, "swap": {"family": "constant", "mean_s": rho}},
    )
    res = cli_runs(s, 1500, tmp_path)
    wall = estimate([r["wall_s"] for r in res])
    W, tau = s.duration_s, s.interval_s
    job = analytic.Job(work_s=W, save_s=d)
    exact = analytic.full_wall(
        job,
        tau,
        analytic.Failures(
            rate=N * mu,
            recovery_s=rho + L,
            wait_rate=analytic.lam_recovery_nodes(rho, mu, N),
            restore_s=L,
        ),
    )
    assert wall.lo <= exact <= wall.hi, (exact, wall)
    # the [reschedule] time (5 s) is not used for nodes: with it the wall would be far shorter
    short = analytic.full_wall(
        job,
        tau,
        analytic.Failures(
            rate=N * mu,
            recovery_s=5.0 + L,
            wait_rate=analytic.lam_recovery_nodes(5.0, mu, N),
            restore_s=L,
        ),
    )
    assert short < wall.lo
    assert all(r["detection_s"] == 0 and r["wait_s"] == 0 for r in res)


@pytest.mark.slow
@pytest.mark.parametrize("spares,crews", [(2, None), (1, 2)])
def test_with_spares_and_no_standby_the_fleet_availability_is_the_machine_repair_queue(
    spares, crews, tmp_path
):
    """4 embedding slots failing at 1/h each, exponential repairs of mean 1.5 h, `spares` spares that
    take over at once, `crews` repair crews: the share of wall time with every slot filled is the
    M/M/c//(N+s) machine-repair chain's P(k <= s) (analytic.machine_repair_availability)."""
    N, lam, repair_h = 4, 1 / HOUR, 1.5
    s = scen(
        seed=5,
        cluster={"embedding_servers": N},
        job={"duration_h": 150.0},
        failures={"embedding": {"family": "exponential", "mtbf_h": 1.0}, "start": "fresh"},
        costs={"save_s": 1.0, "load_s": 1.0},
        checkpoint={"interval_h": 0.02},
        lifecycle={
            "spares": spares,
            "select": {"mean_s": 0.0},
            "repair": {
                "auto": {"family": "exponential", "mean_s": repair_h * HOUR},
                "crews": crews,
            },
        },
    )
    res = cli_runs(s, 60, tmp_path)
    avail = estimate([1.0 - r["unfilled_s"] / r["wall_s"] for r in res], non_negative=False)
    exact = analytic.machine_repair_availability(N, spares, lam, 1 / (repair_h * HOUR), crews)
    assert avail.lo <= exact <= avail.hi, (exact, avail)
    # the chain without spares (every failure leaves a slot empty) is far from it: the test can fail
    assert (
        not avail.lo
        <= analytic.machine_repair_availability(N, spares - 1, lam, 1 / (repair_h * HOUR), crews)
        <= avail.hi
    )


def test_machine_repair_availability_by_hand():
    # one slot, no spare, one crew: up a share mu / (lam + mu)
    assert analytic.machine_repair_availability(1, 0, 2.0, 3.0, 1) == pytest.approx(3 / 5)
    # one slot, one spare, unlimited crews: states 0,1,2 with rates lam, lam and mu, 2 mu
    lam, mu = 1.0, 2.0
    p = np.array([1.0, lam / mu, lam / mu * lam / (2 * mu)])
    assert analytic.machine_repair_availability(1, 1, lam, mu) == pytest.approx(
        p[:2].sum() / p.sum()
    )


# -- 3. a hand-computed timeline ------------------------------------------------------------------------
def test_detection_standby_warmup_and_waiting_by_hand():
    """Node 2 fails at 1,000 s, node 3 at 1,100 s. Detection 60 s; 1 standby (swap 100 s), 1 spare
    (select 500 s), repairs 1,000 s.

    node 2: detected 1,060, takes the standby: up 1,160; the spare starts warming (ready 1,560).
    node 3: detected 1,160, nothing free: waits; at 1,560 the warmed spare is a standby: up 1,660.
    The job waits 1,000-1,660 (660 s): detection 60 + 60, waiting 400, swap-in 40 + 100.
    """
    s = scen(
        cluster={"trainers": 2, "embedding_servers": 4},
        costs={"save_s": 10.0, "load_s": 20.0},
        lifecycle={
            "detection": {"mean_s": 60.0},
            "standbys": 1,
            "swap": {"mean_s": 100.0},
            "spares": 1,
            "select": {"mean_s": 500.0},
            "repair": {"auto": {"mean_s": 1000.0}},
        },
    )
    res, _ev = simulate_one(
        s, 0, record=True, schedule=[(1000.0, (2,), (0.0,)), (1100.0, (3,), (0.0,))]
    )
    assert res.reschedule_s == pytest.approx(660.0)
    assert res.detection_s == pytest.approx(120.0)
    assert res.wait_s == pytest.approx(400.0)
    assert res.badput["replacement"] == pytest.approx(140.0)
    assert res.unfilled_s == pytest.approx(660.0)
    assert res.lost_s == pytest.approx(1000.0)  # no checkpoint before 3,600 s of progress
    assert res.load_s == pytest.approx(20.0)
    assert res.wall_s == pytest.approx(36000 + 9 * 10 + 1000 + 660 + 20)
    assert sum(res.badput.values()) == pytest.approx(res.wall_s - res.useful_s)


def test_a_degraded_trainer_waits_for_its_machine_while_the_job_goes_on():
    """Partial recovery keeps training on the other trainer while the failed one waits for a machine
    (none free until its repair ends at 1,000 + 3,000 s); the job never stalls."""
    s = scen(
        cluster={"trainers": 2, "embedding_servers": 4},
        costs={"save_s": 10.0, "load_s": 20.0},
        strategy={"name": "partial"},
        lifecycle={"select": {"mean_s": 200.0}, "repair": {"auto": {"mean_s": 3000.0}}},
    )
    res, _ = simulate_one(s, 0, schedule=[(1000.0, (0,), (0.0,))])
    assert res.reschedule_s == 0.0
    # half the rate from 1,000 s until the machine is in service (4,200 s) and has copied the dense
    # part: half that window is lost
    copy = 0.3e9 * 2 / 1.25e9
    assert res.degraded_s == pytest.approx((4200.0 + copy - 1000.0) / 2, rel=1e-9)


def test_a_fleet_that_runs_out_of_machines_is_a_one_line_error():
    s = scen(
        failures={"embedding": {"family": "exponential", "mtbf_h": 1.0}},
        lifecycle={"retirement": {"failures": 1, "window_h": 1000.0}},
    )
    with pytest.raises(
        Runaway,
        match=r"(ran out of machines|fewer machines than node slots) .* add lifecycle\.spares",
    ):
        simulate_one(s, 0)


# -- 4. bad machines ---------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize(
    "dist",
    [
        Distribution("weibull", 3600.0, 0.6),
        Distribution("gamma", 3600.0, 0.5),
        Distribution("lognormal", 3600.0, 1.2),
        Distribution("exponential", 3600.0),
    ],
)
@pytest.mark.parametrize("after", [0.0, 1800.0])
def test_bad_machine_draws_live_k_times_as_fast(dist, after):
    """A bad machine's lifetime: S(t | t > after) = S(after + k (t - after)) / S(after)
    (Kolmogorov-Smirnov, 1%), so its mean life from ``after`` on is a good one's divided by k (it
    fails k times as often, whatever the family: the CI of the mean covers the closed form)."""
    k, rng = 8.0, np.random.default_rng(4)
    x = np.array([fast_sample(dist, k, rng, after) for _ in range(3000)])
    s_after = float(dist.sf(after)) if after else 1.0
    cdf = lambda t: 1.0 - np.asarray(dist.sf(after + k * (np.asarray(t) - after))) / s_after
    assert stats.kstest(x, cdf).pvalue > 0.01
    # the plain lifetime and k times the hazard (S^k) are rejected: the test can fail
    assert stats.kstest(x, lambda t: 1.0 - np.asarray(dist.sf(t)) / s_after).pvalue < 0.01
    if dist.family != "exponential":  # for the exponential the two coincide
        assert (
            stats.kstest(x, lambda t: 1.0 - (np.asarray(dist.sf(t)) / s_after) ** k).pvalue < 0.01
        )
    if after == 0.0:
        m = estimate(list(x))
        assert m.lo <= dist.mean() / k <= m.hi, (m, dist.mean() / k)


@pytest.mark.slow
def test_bad_machines_fail_as_the_two_state_chain_says():
    """Half the machines bad at 9x the hazard, exponential lifetimes, 200 warm standbys (swapped in
    1 s; none comes back from repair within a replication): each slot is a two-state chain, bad at
    rate k lam, good at lam, its replacement bad with probability pi. P(bad at t) = P* + (pi - P*)
    e^(-r t), r = k lam (1 - pi) + pi lam, P* = pi lam / r; the expected failures of bad machines over
    the wall time T are k lam times its integral. Per replication, bad - q total has mean 0 with q
    the chain's share over the mean wall time (the CI of the mean covers 0); pi = 0.5, the share a
    test that ignored the hazard would expect, is rejected."""
    lam, k, pi, n = 1 / (20 * HOUR), 9.0, 0.5, 6
    s = scen(
        failures={"embedding": {"family": "exponential", "mtbf_h": 20.0}},
        costs={"save_s": 0.01, "load_s": 0.01},
        checkpoint={"interval_h": 0.01},
        lifecycle={
            "standbys": 200,
            "swap": {"mean_s": 1.0},
            "health": {"bad_fraction": pi, "bad_multiplier": k},
        },
    )
    res, _ = run_replications(s, 400)
    T = float(np.mean([r.wall_s for r in res]))
    r_ = k * lam * (1 - pi) + pi * lam
    p_star = pi * lam / r_
    integral = (
        p_star * T + (pi - p_star) * (1 - math.exp(-r_ * T)) / r_
    )  # of P(bad at t) over [0, T]
    bad_mean, good_mean = k * lam * integral, lam * (T - integral)
    q = bad_mean / (bad_mean + good_mean)
    d = estimate([r.failures_bad - q * r.failures_embedding for r in res], non_negative=False)
    assert d.lo <= 0.0 <= d.hi, (q, d)
    wrong = estimate([r.failures_bad - pi * r.failures_embedding for r in res], non_negative=False)
    assert not wrong.lo <= 0.0 <= wrong.hi
    assert sum(r.failures_embedding for r in res) == pytest.approx(
        n * (bad_mean + good_mean) * len(res), rel=0.1
    )


# -- 5. through the CLI --------------------------------------------------------------------------------
def test_simulate_shows_the_badput_breakdown(tmp_path):
    from cli_helpers import run

    out = tmp_path / "run"
    r = run(
        *[
            "simulate",
            "toy",
            "--replications",
            "5",
            "--set",
            "lifecycle.standbys=1",
            "--set",
            "lifecycle.detection.mean_s=30",
            "--out",
            str(out),
        ]
    )
    assert r.exit_code == 0, r.output
    assert "detection" in r.output and "of which no machine free" in r.output
    summary = json.loads((out / "summary.json").read_text())
    assert "detection_s" in summary["metrics"] or "detection_s" in json.dumps(summary)


def test_bad_lifecycle_settings_are_one_line_errors():
    from cli_helpers import run

    for sets, key in (
        (["lifecycle.standbys=-1"], "lifecycle.standbys"),
        (
            ["lifecycle.detection.mean_s=0", 'lifecycle.detection.family="exponential"'],
            "lifecycle.detection",
        ),
        (["lifecycle.health.bad_fraction=1.5"], "lifecycle.health.bad_fraction"),
        (["lifecycle.repair.escalate_p=2"], "lifecycle.repair.escalate_p"),
    ):
        args = ["simulate", "toy", "--replications", "1"]
        for x in sets:
            args += ["--set", x]
        r = run(*args)
        assert r.exit_code != 0 and key in r.output and "Traceback" not in r.output, r.output
        assert len(r.output.strip().splitlines()) == 1, r.output


def test_the_breakdown_plot_splits_rescheduling_and_reads_tables_from_before_the_lifecycle(
    tmp_path,
):
    from cprsim.plots.sweep import components
    from cprsim.sweep.results import load_results

    from cli_helpers import run

    out = tmp_path / "run"
    r = run(
        "simulate",
        "dlrm-spares",
        "--replications",
        "10",
        "--set",
        "lifecycle.standbys=0",
        "--set",
        "lifecycle.spares=3",
        "--set",
        "lifecycle.retirement.failures=100",
        "--out",
        str(out),
    )
    assert r.exit_code == 0, r.output
    res = load_results(out)
    keys = [k for k, _, _ in components(list(res.points))]
    assert {"detection_s", "wait_s", "replacement_s"} <= set(keys) and "reschedule_s" not in keys
    r = run("plot", "breakdown", str(out), "--out", str(tmp_path / "b.png"))
    assert r.exit_code == 0 and (tmp_path / "b.png").stat().st_size > 0, r.output
    # a results table written before the lifecycle columns existed still loads (they read as 0)
    old = tmp_path / "old.csv"
    text = (out / "replications.csv").read_text().splitlines()
    head = text[0].split(",")
    keep = [
        i
        for i, c in enumerate(head)
        if c
        not in (
            "detection_s",
            "wait_s",
            "unfilled_s",
            "failures_bad",
            "machines_retired",
            "memory_restores",
            "storage_restores",
        )
    ]
    old.write_text("\n".join(",".join(line.split(",")[i] for i in keep) for line in text) + "\n")
    (tmp_path / "summary.json").write_text((out / "summary.json").read_text())
    res = load_results(old)
    assert res.points[0]["detection_s"].mean == 0.0
    assert [k for k, _, _ in components(list(res.points))] == [
        k for k, _, _ in __import__("cprsim.plots.style", fromlist=["COMPONENTS"]).COMPONENTS
    ]


def test_a_job_level_interruption_is_detected_before_it_restarts():
    """A crash at 1,000 s: detected after 60 s, restarted in 200 s: the job waits 260 s, 60 s of it
    detection."""
    s = scen(
        costs={"save_s": 10.0, "load_s": 20.0},
        failures={"job": {"family": "exponential", "mtbf_h": 1e6, "restart_s": 200.0}},
        lifecycle={"detection": {"mean_s": 60.0}},
    )
    job = s.cluster.trainers + s.cluster.embedding_servers
    res, _ = simulate_one(s, 0, schedule=[(1000.0, (job,), (200.0,))])
    assert res.failures_job == 1
    assert res.reschedule_s == pytest.approx(260.0)
    assert res.detection_s == pytest.approx(60.0) and res.wait_s == 0.0


def test_an_aging_machine_lives_as_the_closed_form_says():
    """Exponential lifetimes (rate lam), turning bad at rate a, then k lam: the survival is
    e^-(lam+a)t + a/(lam+a-k lam) (e^-k lam t - e^-(lam+a)t) (Kolmogorov-Smirnov at 1%); without the
    aging term (a plain exponential) the same draws are rejected."""
    from cprsim.sim.lifecycle import draw_lifetime

    lam, a, k = 1 / 100.0, 1 / 50.0, 10.0
    base, rng = Distribution("exponential", 100.0), np.random.default_rng(8)
    draws = [draw_lifetime(base, False, k, a, rng) for _ in range(4000)]
    t = np.array([d[0] for d in draws])
    turned = np.array([d[1] < math.inf for d in draws])

    def cdf(x):
        x = np.asarray(x)
        sf = np.exp(-(lam + a) * x) + a / (lam + a - k * lam) * (
            np.exp(-k * lam * x) - np.exp(-(lam + a) * x)
        )
        return 1.0 - sf

    assert stats.kstest(t, cdf).pvalue > 0.01
    assert stats.kstest(t, lambda x: 1.0 - np.exp(-lam * np.asarray(x))).pvalue < 0.01
    # P(it turns bad before failing) = a / (a + lam)
    ci = stats.binomtest(int(turned.sum()), len(t)).proportion_ci(0.99)
    assert ci.low <= a / (a + lam) <= ci.high
