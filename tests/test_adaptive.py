"""Adaptive replication (issue 15): the stopping rule against an analytic oracle, determinism across
workers, exact curtailment of the planner's proof, and the adaptive planner against the exhaustive
one and against fresh replications."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest
from scenario_builder import FakeRuns
from scipy import stats

from cprsim import scenario as sc
from cprsim.errors import InputError
from cprsim.planner import make_plan
from cprsim.planner.search import GRID_RATIO, cp_lower, curtailed, judge, min_successes, p_pass
from cprsim.scenario import HOUR
from cprsim.sim.replicate import Precision, _t_quantile, run_adaptive, run_replications
from cprsim.streams import REPLICATION_BLOCKS
from cprsim.sweep import load_results, load_sweep, run_sweep

#: why the Dask-backend tests skip when the distributed extra is absent
NO_DASK = "the Dask backends need the distributed extra (pip install 'cprsim[distributed]')"


def rows(path: Path) -> list[list[str]]:
    with path.open(newline="") as f:
        return list(csv.reader(f))


# -- the stopping rule ---------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("rel", [0.1, 0.05])
def test_stopping_rule_matches_the_fixed_width_oracle_on_exponential_values(rel):
    """Exponential values have sd = mean, so the rule should stop near n* = (z / rel)^2 (Chow and
    Robbins: E[N] = n* + O(1); the looks every `batch` add batch/2 on average), and the stopped
    95% interval should cover the true mean in about 95% of sequences."""
    rule = Precision(rel, cap=100_000, min_n=20, batch=10)
    rng = np.random.default_rng(20261123)
    mu, trials = 2.0, 400
    ns, covered = [], 0
    for _ in range(trials):
        x = rng.exponential(mu, size=int(3 * (1.96 / rel) ** 2))
        n = rule.stop_at(x)
        assert n is not None
        ns.append(n)
        m = x[:n].mean()
        h = _t_quantile(n - 1, 0.95) * x[:n].std(ddof=1) / math.sqrt(n)
        assert h <= rel * m  # it stopped because the rule was met ...
        if n > rule.first_look:  # ... and not at the look before
            k = n - rule.batch
            assert _t_quantile(k - 1, 0.95) * x[:k].std(ddof=1) / math.sqrt(k) > rel * x[:k].mean()
        covered += m - h <= mu <= m + h
    n_star = (stats.norm.ppf(0.975) / rel) ** 2
    ns_arr = np.array(ns, dtype=float)
    se = ns_arr.std(ddof=1) / math.sqrt(trials)
    assert abs(ns_arr.mean() - (n_star + rule.batch / 2)) <= 3 * se + rule.batch / 2, (
        ns_arr.mean(),
        n_star,
    )
    # coverage: a binomial 3-sigma band below 95% (the rule's coverage tends to 95% as rel -> 0)
    assert covered / trials >= 0.95 - 3 * math.sqrt(0.95 * 0.05 / trials)


def test_stopping_rule_looks_cap_and_constant_metrics():
    rule = Precision(0.01, cap=45, min_n=20, batch=10)
    assert list(rule.looks()) == [20, 30, 40, 45]
    assert [rule.next_look(n) for n in (0, 20, 21, 30, 44, 45)] == [20, 20, 30, 30, 45, 45]
    rng = np.random.default_rng(1)
    assert rule.stop_at(rng.exponential(size=44)) is None  # needs its cap
    assert rule.stop_at(rng.exponential(size=45)) == 45
    assert (
        Precision(0.01, cap=100).stop_at(np.full(30, 3.0)) == 20
    )  # constant: met at the first look
    assert Precision(0.01, cap=5).stop_at(np.ones(5)) == 5  # a cap below the minimum
    for bad in (
        dict(rel=0.0, cap=10),
        dict(rel=float("nan"), cap=10),
        dict(rel=0.1, cap=0),
        dict(rel=0.1, cap=10, min_n=1),
        dict(rel=0.1, cap=10, metric="nope"),
        dict(rel=0.1, cap=10, level=1.0),
        dict(rel=0.1, cap=10, level=0.0),
    ):
        with pytest.raises(InputError):
            Precision(**bad)


def test_a_confidence_level_round_trips_through_the_manifest_and_is_described():
    """A level other than 95% survives as_dict/from_dict (a sweep's manifest) and is the one the
    rule states; the default level is not written, so the manifests and the fingerprints of
    existing adaptive sweeps (which hash as_dict) are unchanged and they still resume."""
    rule = Precision(0.05, cap=200, min_n=30, batch=5, metric="wall_s", level=0.9)
    assert Precision.from_dict(json.loads(json.dumps(rule.as_dict()))) == rule
    assert "the 90% CI of the mean wall_s" in rule.describe()
    default = Precision(0.05, cap=200)
    assert default.as_dict() == {
        "precision": 0.05,
        "metric": "overhead",
        "min_replications": 20,
        "batch": 10,
        "max_replications": 200,
    }
    assert Precision.from_dict(default.as_dict()) == default
    assert "the 95% CI" in default.describe()


def test_run_adaptive_stops_where_the_rule_says_on_a_prefix_of_the_fixed_replications():
    s = sc.load("toy", {"checkpoint.interval_h": 0.5})
    rule = Precision(0.08, cap=300, min_n=20)
    res, _ = run_adaptive(s, rule)
    n = len(res)
    assert 20 <= n < 300
    assert rule.stop_at([r.overhead for r in res]) == n  # the count follows from the values alone
    fixed, _ = run_replications(s, n)
    assert res == fixed  # the same replications 0 .. n-1: adaptive only decides how many


def test_simulate_precision_is_reproducible_and_capped(tmp_path, cli, one_line_error):
    out = []
    for tag in ("a", "b"):
        r = cli(
            "simulate", "toy", "--precision", "0.08", "-n", "300", "--json", "--out", tmp_path / tag
        )
        assert r.exit_code == 0, r.output
        out.append(json.loads(r.output))
    assert (tmp_path / "a" / "replications.csv").read_bytes() == (
        tmp_path / "b" / "replications.csv"
    ).read_bytes()
    a = out[0]["adaptive"]
    n = a["replications"]
    assert a["reached"] and 20 <= n < 300 and out[0]["replications"] == n
    ov = out[0]["metrics"]["overhead"]
    assert (ov["ci95"][1] - ov["ci95"][0]) / 2 <= 0.08 * ov["mean"]
    capped = json.loads(cli("simulate", "toy", "--precision", "0.001", "-n", "30", "--json").output)
    assert capped["adaptive"]["replications"] == 30 and not capped["adaptive"]["reached"]
    assert "needs --precision" in one_line_error(cli("simulate", "toy", "--min-replications", "5"))
    assert "--precision" in one_line_error(cli("simulate", "toy", "--precision", "0"))


# -- sweeps ---------------------------------------------------------------------------------------------
ADAPTIVE_SWEEP = """
name = "a"
scenario = "toy"
replications = 300
precision = 0.1
min_replications = 20
strategies = ["full", {{ name = "partial", label = "cpr" }}]
[set]
"storage.write_gbps" = 0.4
[grid]
"checkpoint.interval_h" = {intervals}
"""


def _adaptive_sweep(tmp_path: Path, intervals: str = "[0.25, 0.5, 1.0]") -> Path:
    p = tmp_path / "a.toml"
    p.write_text(ADAPTIVE_SWEEP.format(intervals=intervals))
    return p


@pytest.mark.slow
def test_adaptive_sweep_gives_identical_files_on_every_backend(tmp_path, cli):
    pytest.importorskip("distributed", reason=NO_DASK)
    sweep = _adaptive_sweep(tmp_path)
    outs = {}
    for label, extra in (
        ("j1", ["--jobs", "1"]),
        ("j2", ["--jobs", "2"]),
        ("j3", ["--jobs", "3"]),
        ("dask", ["--dask-local", "2"]),
    ):
        out = tmp_path / label
        r = cli("sweep", sweep, "--out", out, *extra)
        assert r.exit_code == 0, r.output
        outs[label] = out
    for name in ("results.csv", "summary.csv", "manifest.json"):
        ref = (outs["j1"] / name).read_bytes()
        for label in ("j2", "j3", "dask"):
            assert (outs[label] / name).read_bytes() == ref, (label, name)
    manifest = json.loads((outs["j1"] / "manifest.json").read_text())
    rule = Precision.from_dict(manifest["precision"])
    res = load_results(outs["j1"])
    counts = [p.n for p in res.points]
    assert len(set(counts)) > 1 and all(
        20 <= n <= 300 for n in counts
    )  # the points needed different counts
    # each point stopped where the rule says on its own values, and equals `cprsim simulate --precision`
    table = rows(outs["j1"] / "results.csv")
    head = table[0]
    for p in res.points:
        values = [float(r[head.index("overhead")]) for r in table[1:] if r[0] == str(p.point)]
        assert rule.stop_at(values) == len(values) == p.n
    sim = json.loads(
        cli(
            "simulate",
            "toy",
            "--set",
            "storage.write_gbps=0.4",
            "--interval",
            "0.5",
            "--strategy",
            "partial",
            "-n",
            "300",
            "--precision",
            "0.1",
            "--json",
        ).output
    )
    assert sim["replications"] == res.points[3].n


@pytest.mark.slow
def test_adaptive_sweep_resume_reruns_a_point_cut_short(tmp_path, cli):
    """A point's rows cut before the rule's stop are not a complete point: resume runs it again."""
    sweep = _adaptive_sweep(tmp_path)
    ref = tmp_path / "ref"
    assert cli("sweep", sweep, "--out", ref).exit_code == 0
    table = rows(ref / "results.csv")
    n0 = sum(1 for r in table[1:] if r[0] == "0")
    assert n0 > 25
    out = tmp_path / "cut"
    out.mkdir()
    for name in ("manifest.json", "config.toml", "sweep.toml", "journal.sha256"):
        (out / name).write_bytes((ref / name).read_bytes())
    lines = (ref / "results.csv").read_text().splitlines(keepends=True)
    (out / "results.csv").write_text(
        "".join(lines[: 1 + n0 - 5])
    )  # point 0 without its last 5 replications
    r = cli("sweep", sweep, "--out", out, "--resume")
    assert r.exit_code == 0, r.output
    assert "6 run now, 0 already done" in r.output
    for name in ("results.csv", "summary.csv"):
        assert (out / name).read_bytes() == (ref / name).read_bytes(), name


def test_sweep_precision_options_and_errors(tmp_path, cli, one_line_error):
    plain = tmp_path / "p.toml"
    plain.write_text(ADAPTIVE_SWEEP.format(intervals="[0.5]").replace("precision = 0.1\n", ""))
    assert load_sweep(plain).precision is None
    sw = load_sweep(plain, precision=0.2, min_replications=30)
    assert sw.precision == Precision(0.2, 300, 30)
    assert (
        sw.fingerprint
        != load_sweep(plain).fingerprint
        != load_sweep(plain, precision=0.3).fingerprint
    )
    r = cli("sweep", plain, "--min-replications", "5", "--out", tmp_path / "x")
    assert "needs --precision" in one_line_error(r)
    assert not (tmp_path / "x").exists()
    bad = tmp_path / "b.toml"
    for text, needle in (
        ("precision = -0.1\n", "precision"),
        ('precision = 0.1\nprecision_metric = "x"\n', "precision_metric"),
    ):
        bad.write_text(text + 'scenario = "toy"\n')
        assert needle in one_line_error(cli("sweep", bad, "--out", tmp_path / "o"))


class _Recorder:
    """A backend that runs tasks in-process and records them (which chunks went together)."""

    def __init__(self, slots: int) -> None:
        self.slots, self.tasks, self.done, self.n = slots, [], {}, 0

    def submit(self, fn, *args):
        self.n += 1
        self.tasks.append([(i, first, count) for i, _, first, count in args[1]])
        self.done[self.n] = fn(*args)
        return self.n

    def wait(self, handles):
        h = handles[0]
        return [(h, self.done.pop(h))]


def test_the_scheduler_splits_few_points_and_batches_small_ones(tmp_path):
    from cprsim.sweep import points

    one = tmp_path / "one.toml"
    one.write_text('name = "one"\nscenario = "toy"\nreplications = 200\n')
    sw = load_sweep(one)
    rec = _Recorder(slots=4)
    runs = [points.PointRun(p, sw.replications, None) for p in sw.points]
    done = list(points.schedule(runs, rec, sw.fingerprint))
    assert [r.point.index for r in done] == [0]
    chunks = [c for t in rec.tasks for c in t]
    assert len(chunks) >= 4  # one point, four workers: its replications are split
    assert sorted((first, first + count) for _, first, count in chunks)[0][0] == 0
    assert sum(count for _, _, count in chunks) == 200
    many = tmp_path / "many.toml"
    many.write_text(
        'name = "many"\nscenario = "toy"\nreplications = 2\n[grid]\n'
        '"checkpoint.interval_h" = [0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6]\n'
    )
    sw = load_sweep(many)
    rec = _Recorder(slots=2)
    runs = [points.PointRun(p, sw.replications, None) for p in sw.points]
    assert sorted(r.point.index for r in points.schedule(runs, rec, sw.fingerprint)) == list(
        range(12)
    )
    assert (
        len(rec.tasks) < 12 and max(len(t) for t in rec.tasks) > 1
    )  # tiny points go several to a task
    # whatever the split, the rows are those of one process
    out1, out4 = tmp_path / "o1", tmp_path / "o4"
    run_sweep(load_sweep(one), out1)
    run_sweep(load_sweep(one), out4, jobs=4)
    assert (out1 / "results.csv").read_bytes() == (out4 / "results.csv").read_bytes()


# -- the planner ------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_curtailment_gives_exactly_the_verdict_of_all_replications():
    """Curtailed or not, the verdict is judge's on all n; it stops at the first replication where
    the rest can no longer change it; its lower bound is never above the full n's."""
    rng = np.random.default_rng(7)
    for trial in range(300):
        n = int(rng.choice([40, 100, 200]))
        q = float(rng.choice([0.8, 0.9]))
        share = float(rng.uniform(0.8, 1.0))
        x = np.where(rng.random(n) < share, 0.5, 2.0)
        runs = FakeRuns(x)
        v, res = curtailed(runs, n, q, lambda rs: np.array([r.pls for r in rs]))
        full = judge(x, 1.0, q)
        assert v.passed == full.passed, trial
        need = min_successes(n, q)
        within = np.cumsum(x <= 1.0)
        settled = [
            m for m in range(1, n + 1) if within[m - 1] >= need or m - within[m - 1] > n - need
        ]
        assert len(res) == runs.asked == (settled[0] if settled else n)
        assert v.within_lo <= full.within_lo + 1e-12
        if v.passed:
            assert v.within_lo >= q
        # the planner's confirmation: a pass completes its n runs (the figures of all n), a failure stops
        v2, res2 = curtailed(
            FakeRuns(x), n, q, lambda rs: np.array([r.pls for r in rs]), complete_pass=True
        )
        if full.passed:
            assert len(res2) == n and v2 == full
        else:
            assert not v2.passed and len(res2) == len(res)


def test_predictive_probability_matches_a_direct_sum():
    for k, m, n, need in (
        (38, 40, 200, 187),
        (90, 100, 200, 187),
        (150, 160, 200, 187),
        (10, 40, 200, 187),
    ):
        r, left = need - k, n - m
        direct = sum(
            math.comb(left, j)
            * math.exp(
                math.lgamma(k + 1 + j)
                + math.lgamma(m - k + 1 + left - j)
                - math.lgamma(m + 2 + left)
                - math.lgamma(k + 1)
                - math.lgamma(m - k + 1)
                + math.lgamma(m + 2)
            )
            for j in range(max(r, 0), left + 1)
        )
        assert p_pass(k, m, n, need) == pytest.approx(direct, rel=1e-9, abs=1e-12)


@pytest.fixture
def jobbed(jobbed_scenario):
    return {**jobbed_scenario, "replications": 100}


@pytest.fixture(scope="module")
def production_plans(linear_accuracy):
    s = sc.load("cpr-production", {"replications": 120})
    kw = dict(calibration=linear_accuracy(), replications=120, search_replications=120)
    return s, make_plan(s, 0.001, **kw), make_plan(s, 0.001, precision=None, **kw)


@pytest.mark.slow
@pytest.mark.parametrize("case", ["cpr-production", "jobbed"])
def test_adaptive_plans_land_within_one_grid_step_of_the_exhaustive_planner(
    case, production_plans, linear_accuracy, jobbed
):
    if case == "cpr-production":
        _, adaptive, exhaustive = production_plans
    else:
        s = sc.validate(jobbed, "t")
        kw = dict(calibration=linear_accuracy(0.01), strategies=["partial", "mfu"])
        adaptive, exhaustive = make_plan(s, 0.05, **kw), make_plan(s, 0.05, precision=None, **kw)
    assert adaptive.precision == 0.1 and exhaustive.precision is None
    ex = {o.label: o for o in exhaustive.options}
    assert set(ex) == {o.label for o in adaptive.options}
    for o in adaptive.options:
        e = ex[o.label]
        step = 8**0.125 if o.label == "full (simulated optimum)" else GRID_RATIO  # the two lattices
        assert max(o.interval_s, e.interval_s) / min(o.interval_s, e.interval_s) <= step * (
            1 + 1e-9
        ), o.label
        assert o.meets_bound == e.meets_bound or o.strategy == "full", o.label
        if o.strategy != "full":
            assert (
                o.overhead.n >= min_successes(adaptive.replications, adaptive.confidence)
                or not o.meets_bound
            )
    assert ex[adaptive.recommended].meets_bound


@pytest.mark.slow
def test_the_adaptive_plan_keeps_its_promise_on_a_fresh_validation_block(production_plans):
    """P(a run's PLS <= bound) >= 0.9, proven with curtailment: on a third block of replications
    (neither searched nor confirmed with), the share within is not significantly below 0.9."""
    s, plan, _ = production_plans
    rec = plan.option(plan.recommended)
    assert rec.strategy != "full" and rec.meets_bound and rec.within_lo >= 0.9
    upd = {
        "checkpoint.interval_h": rec.interval_s / HOUR,
        "strategy": {"name": rec.strategy, **rec.params},
    }
    res, _ = run_replications(s.with_updates(upd), 400, first=REPLICATION_BLOCKS["validate"])
    k = sum(r.pls <= rec.pls_bound * (1 + 1e-12) for r in res)
    upper = 1.0 - cp_lower(len(res) - k, len(res))  # one-sided 95% upper bound of the share within
    assert upper >= 0.9, f"only {k}/{len(res)} fresh runs within the bound"


@pytest.mark.slow
def test_the_adaptive_planner_simulates_fewer_replications(
    production_plans, monkeypatch, linear_accuracy
):
    """Not a timing: the number of replications each planner simulates."""
    import cprsim.planner.search as search

    s = sc.load("cpr-production", {"replications": 120})
    counted = {"n": 0}
    real = search.run_replications

    def counting(sc_, n=None, **kw):
        res = real(sc_, n, **kw)
        counted["n"] += len(res[0])
        return res

    monkeypatch.setattr(search, "run_replications", counting)
    kw = dict(calibration=linear_accuracy(), replications=120, search_replications=120)
    make_plan(s, 0.001, **kw)
    adaptive = counted["n"]
    counted["n"] = 0
    make_plan(s, 0.001, precision=None, **kw)
    assert adaptive < 0.6 * counted["n"], (adaptive, counted["n"])


@pytest.mark.slow
def test_plan_precision_option(tmp_path, one_line_error, cli, linear_accuracy):
    quick = [
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
        "0.001",
        "--strategies",
        "partial",
        "-n",
        "40",
        "--search-replications",
        "40",
        "--json",
    ]
    d = json.loads(cli(*quick, "--precision", "off").output)
    assert d["precision"] is None
    d = json.loads(cli(*quick, "--precision", "0.2").output)
    assert d["precision"] == 0.2
    assert "off" in one_line_error(cli(*quick, "--precision", "2"))
    with pytest.raises(InputError, match="precision"):
        make_plan(sc.load("toy"), 0.001, calibration=linear_accuracy(), precision=1.5)
