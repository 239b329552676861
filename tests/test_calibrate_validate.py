"""``cprsim calibrate --validate`` (cprsim.calibrate.validate): a plan's accuracy promise checked on
held-out runs. (a) the simulator-to-DLRM schedule, by hand and against a real replication; (b) the
binomial report against scipy.stats; (c) end to end through the CLI at tiny sizes (torch)."""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pytest

from cprsim import scenario as sc
from cprsim.calibrate import validate as V
from cprsim.calibrate.fromsim import sim_schedule
from cprsim.errors import InputError
from cprsim.names import FAIL, SAVE_FULL, SAVE_PARTIAL
from cprsim.scenario import HOUR
from cprsim.sim.engine import simulate_one
from cprsim.sim.records import Event
from cprsim.streams import REPLICATION_BLOCKS

P, F = (SAVE_PARTIAL, -1), (SAVE_FULL, -1)


def _plan(scenario: str, seed: int, strategy: str = "mfu", **extra: object) -> dict:
    """A plan document as `cprsim plan --out` writes it, reduced to what a validation reads."""
    params = {"top_fraction": 0.1, "full_every": 3} if strategy in ("mfu", "ssu") else {}
    if strategy == "ssu":
        params["sample_rate"] = 0.05
    opt = {
        "label": "X",
        "strategy": strategy,
        "interval_s": 1.5 * HOUR,
        "params": params,
        "full_interval_s": 1.5 * HOUR * params.get("full_every", 1),
    }
    full = {"label": "full (Daly)", "strategy": "full", "interval_s": HOUR, "params": {}}
    d = {
        "scenario": scenario,
        "seed": seed,
        "metric": "auc",
        "accuracy_bound": 0.001,
        "confidence": 0.9,
        "recommended": "X",
        "options": [full, opt],
        "calibration": {"preset": "standard"},
    }
    d.update(extra)
    return d


def _write(tmp_path, doc: dict, name: str = "plan.json"):
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


# -- (a) the schedule ----------------------------------------------------------------------------------
def _ev(kind: str, value: float, node: int = -1) -> Event:
    return Event(0.0, kind, node, value)


def test_events_map_to_iterations_shards_and_the_strategys_saves_by_hand():
    # W = 100 s, 10 iterations (one per 10 s of progress), 2 trainers, a full save every 3rd
    events = [
        _ev("save_end", 20.0),  # save 1: partial, iteration 2
        _ev("fail", 0.0, 3),  # the failure itself maps to nothing: its restore does
        _ev("restore", 27.0, 3),  # node 3 = shard 1, iteration round(2.7) = 3
        _ev("restore", 27.0, 5),  # a second node of the same episode: shard 3, same iteration
        _ev("save_end", 40.0),  # save 2: partial
        _ev("save_end", 60.0),  # save 3: full
        _ev("restore", 71.0, 2),  # shard 0 at iteration 7: undone by the rollback below
        _ev("save_end", 80.0),  # save 4: partial, undone too
        _ev("rollback", 20.0),  # back to the full save at 60 s: re-executed from there
        _ev("save_end", 80.0),  # save 4 again: partial (the count restarted at the full save)
        _ev("restore", 88.0, 4),  # shard 2, iteration 9
        _ev("restore", 99.0, 2),  # iteration round(9.9) = 10 is past the run: its last one, 9
    ]
    sch = V.map_events(events, 100.0, 10, 2, full_every=3)
    assert sch.actions == {
        2: (P,),
        3: ((FAIL, 1), (FAIL, 3)),
        4: (P,),
        6: (F,),
        8: (P,),
        9: ((FAIL, 2), (FAIL, 0)),
    }
    assert (sch.failures, sch.full_saves, sch.partial_saves) == (4, 1, 3)
    # vanilla CPR: every save is a full one
    vanilla = V.map_events(events[:6], 100.0, 10, 2)
    assert vanilla.actions == {2: (F,), 3: ((FAIL, 1), (FAIL, 3)), 4: (F,), 6: (F,)}


def _toy_target(tmp_path, strategy: str = "mfu"):
    toy = sc.load("toy")
    plan = _plan("toy", toy.seed, strategy)
    return V.target_of(plan, _write(tmp_path, plan))


def test_a_simulated_replication_lands_where_its_progress_says(tmp_path):
    t = _toy_target(tmp_path)
    s, n = t.scenario, 500
    assert (s.strategy.name, s.interval_s, s.strategy.params["full_every"]) == ("mfu", 5400.0, 3)
    assert t.full_every == 3 and t.full_interval_s == 3 * 5400.0
    W, nt = s.duration_s, s.cluster.trainers
    for i in range(40):  # the first validation replication with two shard restores or more
        res, events = simulate_one(s, REPLICATION_BLOCKS["validate"] + i, record=True)
        kinds = [e.kind for e in events]
        if kinds.count("restore") >= 2 and "rollback" not in kinds:
            break
    else:
        pytest.fail("no validation replication of toy has two shard restores")
    sch, res2, st = V.simulate_schedule(t, n, i)
    assert res2 == res  # the same replication: 2^41 + i
    want: dict[int, list] = {}
    saves = 0
    for e in events:
        if e.kind == "restore":
            want.setdefault(round(e.value / W * n), []).append((FAIL, e.node - nt))
        elif e.kind == "save_end":
            saves += 1
            want.setdefault(round(e.value / W * n), []).append(F if saves % 3 == 0 else P)
    assert sch.actions == {k: tuple(v) for k, v in want.items()}
    assert sch.failures == kinds.count("restore") >= 2
    assert sch.full_saves + sch.partial_saves == kinds.count("save_end") == saves
    assert sch.full_saves == saves // 3
    assert all(
        0 <= j < s.cluster.embedding_servers for a in st.actions.values() for k, j in a if k == FAIL
    )
    assert (st.strategy, st.top_fraction, st.interval) == ("mfu", 0.1, round(5400 / W * n))


def test_vanilla_cpr_maps_exactly_as_the_from_sim_schedule(tmp_path):
    """fromsim.sim_schedule is the vanilla special case (every save a full one)."""
    t = _toy_target(tmp_path, "partial")
    s, n = t.scenario, 400
    for rep in range(3):
        acts, pls, _, n_e = sim_schedule(s, n, REPLICATION_BLOCKS["validate"] + rep)
        sch, res, _ = V.simulate_schedule(t, n, rep)
        assert sch.actions == acts and res.pls == pls and n_e == 4
        assert sch.partial_saves == 0 and t.full_every == 1


def test_plans_that_cannot_be_validated_say_why_in_one_line(tmp_path):
    toy = sc.load("toy")
    quick = _plan("quick-form", 1)
    with pytest.raises(InputError, match="quick options"):
        V.target_of(quick, _write(tmp_path, quick))
    full = _plan("toy", toy.seed, recommended="full (Daly)")
    with pytest.raises(InputError, match="loses no update"):
        V.target_of(full, _write(tmp_path, full))
    mean = _plan("toy", toy.seed, confidence=None)
    with pytest.raises(InputError, match="only the mean"):
        V.target_of(mean, _write(tmp_path, mean))
    moved = _plan("toy", toy.seed + 1)
    with pytest.raises(InputError, match="changed since the plan"):
        V.target_of(moved, _write(tmp_path, moved))
    mine = _plan("my-cluster", toy.seed)
    with pytest.raises(InputError, match="not built in"):
        V.target_of(mine, _write(tmp_path, mine))
    # a scenario file named after the plan's scenario, beside the plan, is found
    (tmp_path / "my-cluster.toml").write_text(
        sc.to_toml({**sc.load_raw("toy")[0], "name": "my-cluster"})
    )
    assert V.target_of(mine, tmp_path / "plan.json").scenario.name == "my-cluster"
    (tmp_path / "bad.json").write_text("[1, 2]")
    with pytest.raises(InputError, match="not a plan"):
        V.read_plan(tmp_path / "bad.json")


# -- (b) the statistics --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "k, n, q",
    [(36, 40, 0.9), (31, 40, 0.9), (40, 40, 0.9), (0, 40, 0.9), (17, 20, 0.95), (5, 7, 0.6)],
)
def test_the_binomial_report_is_scipys(k, n, q):
    stats = pytest.importorskip("scipy.stats")
    r = V.binomial_report(k, n, q)
    bt = stats.binomtest(k, n, q, alternative="less")
    assert r["p_value"] == pytest.approx(bt.pvalue, rel=1e-9, abs=1e-15)
    assert r["p_value"] == pytest.approx(stats.binom.cdf(k, n, q), rel=1e-9, abs=1e-15)
    ci = stats.binomtest(k, n, q).proportion_ci(0.95, method="exact")
    assert r["ci95"] == [pytest.approx(ci.low, abs=1e-12), pytest.approx(ci.high, abs=1e-12)]
    assert (r["within"], r["n"], r["share"]) == (k, n, k / n)
    assert r["rejected"] == (bt.pvalue < 0.05)


def test_the_verdicts_of_typical_counts():
    assert not V.binomial_report(36, 40, 0.9)["rejected"]  # 90%: exactly as promised
    assert not V.binomial_report(33, 40, 0.9)["rejected"]  # p = 0.14
    assert V.binomial_report(31, 40, 0.9)["rejected"]  # p = 0.026
    with pytest.raises(InputError):
        V.binomial_report(3, 2, 0.9)


def test_runs_above_their_own_predictive_quantile_are_a_binomial_tail():
    stats = pytest.importorskip("scipy.stats")
    loss = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    r = V.own_quantile_check(loss, np.array([0.5, 2.0, 2.0, 9.0, 9.0]), 0.9)
    assert (r["n"], r["runs"], r["expected"]) == (5, 2, pytest.approx(0.5))
    assert r["p_value"] == pytest.approx(stats.binom.sf(1, 5, 0.1))
    assert V.own_quantile_check(loss, loss, 0.9)["p_value"] == 1.0  # none above: nothing to see


def test_the_predicted_quantiles_are_the_mixtures():
    from cprsim.calibrate.accuracy import RunLaws

    stats = pytest.importorskip("scipy.stats")
    m, sd, dof = np.array([1e-4]), np.array([2e-4]), 20
    one = RunLaws(m=m, sd=sd, dof=dof)
    for q, x in zip(V.QUANTILES, V.mixture_quantiles(one, V.QUANTILES)):
        assert x == pytest.approx(1e-4 + 2e-4 * stats.t.ppf(q, dof), rel=1e-9)
    m2, sd2 = np.array([0.0, 1e-3, 5e-4]), np.array([1e-4, 3e-4, 0.0])  # one run: a point mass
    three = RunLaws(m=m2, sd=sd2, dof=dof)
    qs = V.mixture_quantiles(three, (0.1, 0.5, 0.9))
    for q, x in zip((0.1, 0.9), (qs[0], qs[2])):
        assert V.mixture_cdf(three, x) == pytest.approx(q, abs=1e-9)
    assert qs[1] == pytest.approx(5e-4)  # the median falls on the point mass's jump
    assert V.mixture_cdf(three, 5e-4 * (1 - 1e-9)) < 0.5 < V.mixture_cdf(three, 5e-4)
    draws = np.concatenate(
        [
            mu + s * stats.t.rvs(dof, size=200_000, random_state=j)
            for j, (mu, s) in enumerate(zip(m2, sd2))
        ]
    )
    assert qs[2] == pytest.approx(float(np.quantile(draws, 0.9)), rel=0.02)
    assert V.mixture_cdf(three, 5e-4) == pytest.approx(
        (stats.t.cdf(5.0, dof) + stats.t.cdf(-5 / 3, dof) + 1.0) / 3
    )
    inf = RunLaws.points(np.array([math.inf]))  # no scatter estimate: unbounded
    assert V.mixture_quantiles(inf, (0.5,)) == [math.inf] and V.mixture_cdf(inf, 1.0) == 0.0


def test_the_predicted_quantiles_follow_the_held_out_residuals_where_the_plan_does():
    """With held-out residuals (the planner's quantiles), a run's predictive CDF at ``m + sd z`` is
    its PLS bin's share of residuals <= z over n + 1 (1 from the largest on: the plan's draws never
    exceed it), and the one-run mixture's q-quantile is the plan's own q-quantile (``m + sd``
    times the bin's ceil((n+1)q)-th smallest residual, the largest where (n + 1) q > n)."""
    from cprsim.calibrate.accuracy import Coef, HeldOutResiduals, RunLaws

    a, b = np.array([-1.0, 0.0, 0.5, 2.0]), np.arange(-2.0, 7.0)  # 4 and 9 residuals
    res = HeldOutResiduals((0.01, 0.2), (a, b))
    # loss = 0.01 PLS + sqrt(1e-6 PLS) Z: mean 1e-4 and 2e-3, scale 1e-4 and 4.47e-4 at the medians
    c = Coef(np.array([0.01]), np.zeros((1, 1)), 100, 1.0, 101, (1e-6, 0.0))
    pls = np.array([0.01, 0.2])  # one run at each bin's median PLS
    m, sd = c.predictive(pls[:, None])
    laws = RunLaws.of(c, (), res, pls, 0.5, 0.0)
    # z = 0.25 in the first bin (2 of 4 at most it), -0.75 in the second (2 of 9): both below the
    # median, where the law is as fitted
    x = (m[0] + 0.25 * sd[0], m[1] - 0.75 * sd[1])
    assert laws.cdf(x[0])[0] == pytest.approx(2 / 5) and laws.cdf(x[1])[1] == pytest.approx(2 / 10)
    assert laws.cdf(m[1] + 6.0001 * sd[1])[1] == 1.0  # past the largest, 6
    second = RunLaws.of(c, (), res, pls[1:], 0.5, 0.0)
    for q in (0.3, 0.5, 0.7, 0.95):  # 0.95: (9 + 1) 0.95 > 9, the largest residual
        (x2,) = V.mixture_quantiles(second, (q,))
        want = b[min(9, math.ceil(10 * q - 1e-9)) - 1]
        assert float(res.ppf(q, 0.2)) == want
        assert x2 == pytest.approx(m[1] + sd[1] * want, rel=1e-9)
    (x1,) = V.mixture_quantiles(RunLaws.of(c, (), res, pls[:1], 0.5, 0.0), (0.5,))
    assert x1 == pytest.approx(m[0] + sd[0] * a[3 - 1], rel=1e-9)  # ceil((4 + 1) 0.5) = 3


# -- (c) end to end ------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.dlrm
def test_validate_end_to_end_through_the_cli(tmp_path, cli):
    pytest.importorskip("torch")
    from cprsim.calibrate.calibration import load_calibration
    from cprsim.calibrate.runner import PRESETS

    prod = sc.load("cpr-production")
    plan = _write(tmp_path, _plan("cpr-production", prod.seed, "ssu"))
    out = tmp_path / "val"
    tiny = ["--preset", "quick", "--limit-samples", "8192", "2048", "--out", out]
    r = cli("calibrate", "--validate", plan, *tiny, "--runs", "2", "--jobs", "2")
    assert r.exit_code == 0, r.output
    assert "validate X (quick): 2/2" in r.output  # progress lines (stderr: no terminal)
    assert "runs with auc loss <= 0.001:" in r.output and "binomial test" in r.output
    rows = list(csv.DictReader((out / "validation.csv").open()))
    assert [int(x["run"]) for x in rows] == [0, 1]
    # the runs: seeds no calibration uses, replications of the validate block
    seeds = {int(x["seed"]) for x in rows}
    assert seeds == {V.FRESH_SEED, V.FRESH_SEED + 1}
    used = set(load_calibration().provenance["seeds"]) | {
        s for p in PRESETS.values() for s in p.seeds
    }
    assert not seeds & used
    assert [int(x["replication"]) for x in rows] == [2**41, 2**41 + 1]
    for x in rows:
        loss = float(x["baseline_auc"]) - float(x["auc"])
        assert float(x["loss"]) == loss and int(x["within"]) == (loss <= 0.001)
        assert int(x["full_saves"]) + int(x["partial_saves"]) > 0
        assert math.isfinite(float(x["pred_q"])) and float(x["pred_q"]) >= float(x["pred_mean"])
    doc = json.loads((out / "validation.json").read_text())
    assert doc["finished"] and doc["preset"] == "quick" and doc["embedding_servers"] == 18
    assert doc["result"]["n"] == 2
    assert doc["result"]["within"] == sum(int(x["within"]) for x in rows)
    above = sum(float(x["loss"]) > float(x["pred_q"]) for x in rows)
    assert doc["over_own_quantile"]["runs"] == above and "predictive P90" in r.output
    assert doc["plan"]["strategy"] == "ssu" and doc["seeds"] == sorted(seeds)
    assert doc["loss"]["measured"]["mean"] == pytest.approx(
        np.mean([float(x["loss"]) for x in rows])
    )
    # resumed with one run more: the two finished runs are kept, one is trained
    r2 = cli("calibrate", "--validate", plan, *tiny, "--runs", "3", "--jobs", "1", "--resume")
    assert r2.exit_code == 0, r2.output
    assert "2 of 3 runs already in" in r2.output
    rows2 = list(csv.DictReader((out / "validation.csv").open()))
    assert rows2[:2] == rows and int(rows2[2]["seed"]) == V.FRESH_SEED + 2
    assert json.loads((out / "validation.json").read_text())["result"]["n"] == 3


def test_a_plan_made_for_a_larger_loss_per_pls_is_judged_at_its_bound_over_the_factor(tmp_path):
    """A plan that assumed the user's model loses k x the calibration's loss per unit PLS promised
    a loss <= B for that model: on the calibration's own DLRM, a loss <= B / k."""
    toy = sc.load("toy")
    plan = _plan("toy", toy.seed, "mfu")
    plain = V.target_of(plan, _write(tmp_path, plan))
    assert plain.factor == 1.0 and plain.bound == plan["accuracy_bound"]
    plan["scale"] = {"factor": 4.0, "basis": "rows-x10"}
    t = V.target_of(plan, _write(tmp_path, plan))
    assert t.factor == 4.0 and t.bound == plan["accuracy_bound"] / 4.0
    for bad in (0, -1.0, "4", True, None):
        plan["scale"] = {"factor": bad}
        with pytest.raises(InputError, match=r"scale\.factor"):
            V.target_of(plan, _write(tmp_path, plan))
