"""Bad nodes: the two-rate Poisson mixture over per-node failure counts and `cprsim fit --bad-nodes`.

Synthetic populations with a known truth: 2,000 nodes observed 2,000 h each, good nodes failing
once per 5,000 h, 5% bad nodes failing 20 times as often (so about half the failures come from
the bad nodes, as in the clusters that motivate the model).
"""

from __future__ import annotations

import itertools
import json
import re
import tomllib

import numpy as np
import pytest
from scipy import special, stats

from cprsim.errors import InputError
from cprsim.failures.mixture import (
    Mixture,
    NodeCounts,
    analyse,
    bootstrap_intervals,
    fit_mixture,
    fit_poisson,
    log_likelihood,
    node_counts,
    posterior_bad,
    simulate,
)
from cprsim.failures.traces import NodeHistory, Trace, read_trace, write_csv

from cli_helpers import one_line_error, run

TRUTH = Mixture(pi=0.05, lam=1 / 5000, k=20.0)
NODES, WINDOW_H = 2000, 2000.0


def _draw(seed: int, m: Mixture = TRUTH, nodes: int = NODES) -> tuple[np.ndarray, np.ndarray]:
    T = np.full(nodes, WINDOW_H)
    return simulate(m, T, np.random.default_rng(seed)), T


def node_counts_of(nodes: tuple[str, ...], n: np.ndarray, T: np.ndarray) -> NodeCounts:
    return NodeCounts(nodes, n, T)


def _hand_loglik(m: Mixture, n: np.ndarray, T: np.ndarray) -> float:
    """The mixture's log-likelihood written out with scipy.stats (independent of the module's)."""
    good = np.log1p(-m.pi) + stats.poisson.logpmf(n, m.lam * T)
    bad = np.log(m.pi) + stats.poisson.logpmf(n, m.k * m.lam * T)
    return float(np.sum(special.logsumexp(np.stack([good, bad]), axis=0)))


# -- 1. recovery, intervals, coverage ------------------------------------------------------------------
@pytest.mark.slow
def test_the_mle_and_its_bootstrap_interval_recover_a_known_population():
    n, T = _draw(1)
    nodes = tuple(f"n{i}" for i in range(NODES))
    rep = analyse(node_counts_of(nodes, n, T), bootstrap=200, seed=0)
    assert rep.not_identified is None
    for key in ("pi", "k", "lam"):
        lo, hi = rep.ci[key]
        assert lo < getattr(rep.estimate, key) < hi, key
        assert lo < getattr(TRUTH, key) < hi, (key, lo, hi)
    assert rep.ci["pi"][1] - rep.ci["pi"][0] < 0.05  # informative, not [0, 1]
    assert rep.p_value == pytest.approx(1 / 201)  # no null draw comes near: "no bad nodes" rejected
    # the nodes the posterior flags are mostly the truly bad ones
    bad = np.random.default_rng(1).random(NODES) < TRUTH.pi  # the labels simulate() drew
    flagged = rep.posterior >= 0.5
    assert (flagged & bad).sum() / flagged.sum() > 0.9 and (flagged & bad).sum() / bad.sum() > 0.8


@pytest.mark.slow
def test_90_percent_intervals_cover_the_truth_about_90_percent_of_the_time():
    """40 independent populations, 40 bootstrap refits each (about 5 s): the 90% intervals of pi and
    k must cover the truth in a fraction compatible with 0.9 (one-sided binomial test at 1%; a
    method covering 75% of the time fails it with probability 0.9). More datasets or refits would
    exceed the test's time budget."""
    hits = {"pi": 0, "k": 0}
    for i in range(40):
        n, T = _draw(1000 + i)
        m, _ = fit_mixture(n, T)
        ci = bootstrap_intervals(m, T, 40, seed=i, level=0.9)
        for key in hits:
            hits[key] += ci[key][0] <= getattr(TRUTH, key) <= ci[key][1]
    for key, h in hits.items():
        assert stats.binomtest(h, 40, 0.9, alternative="less").pvalue > 0.01, (key, h)
        assert h < 40 or key == "k"  # not trivially wide for pi


# -- 2. a homogeneous population -------------------------------------------------------------------------
@pytest.mark.slow
def test_a_homogeneous_population_shows_no_bad_nodes():
    n, T = _draw(7, Mixture(0.0, 1 / 5000, 1.0))
    rep = analyse(node_counts_of(tuple(map(str, range(NODES))), n, T), bootstrap=100, seed=0)
    assert rep.p_value > 0.01
    assert rep.not_identified is not None or rep.ci["pi"][0] == 0.0, (rep.raw, rep.ci)


def test_equal_counts_are_reported_as_not_identified():
    T = np.full(50, 1000.0)
    rep = analyse(node_counts_of(tuple(map(str, range(50))), np.full(50, 2), T), bootstrap=20)
    assert rep.not_identified is not None and rep.ci == {}
    assert rep.estimate == Mixture(0.0, 2 / 1000, 1.0) and not rep.posterior.any()


# -- 3. the optimum against a hand check -----------------------------------------------------------------
@pytest.mark.parametrize("varied_windows", [False, True])
def test_the_estimate_maximises_the_likelihood(varied_windows):
    rng = np.random.default_rng(3)
    T = rng.uniform(200.0, 4000.0, 800) if varied_windows else np.full(800, WINDOW_H)
    n = simulate(TRUTH, T, rng)
    m, ll = fit_mixture(n, T)
    assert ll == pytest.approx(_hand_loglik(m, n, T), abs=1e-8)
    assert log_likelihood(TRUTH, n, T) == pytest.approx(_hand_loglik(TRUTH, n, T), abs=1e-8)
    assert ll >= _hand_loglik(TRUTH, n, T)
    for f_pi, f_lam, f_k in itertools.product((0.8, 0.95, 1.0, 1.05, 1.25), repeat=3):
        near = Mixture(m.pi * f_pi, m.lam * f_lam, 1 + (m.k - 1) * f_k)
        assert ll >= _hand_loglik(near, n, T) - 1e-9, (f_pi, f_lam, f_k)
    rate, ll1 = fit_poisson(n, T)
    assert rate == pytest.approx(n.sum() / T.sum())
    assert ll1 == pytest.approx(float(stats.poisson.logpmf(n, rate * T).sum()))
    # P(bad) by Bayes' rule, by hand
    good = (1 - m.pi) * stats.poisson.pmf(n, m.lam * T)
    bad = m.pi * stats.poisson.pmf(n, m.k * m.lam * T)
    assert posterior_bad(m, n, T) == pytest.approx(bad / (good + bad), abs=1e-12)


# -- counting failures and exposures in a trace ----------------------------------------------------------
def test_node_counts_read_windows_failures_and_unseen_nodes():
    a = NodeHistory(
        "a",
        "node",
        10.0,
        110.0,
        [
            (20.0, "fail", "x"),
            (20.0, "fail", "y"),
            (21.0, "repair", ""),
            (50.0, "other", "z"),
            (60.0, "fail", "x"),
        ],
    )
    b = NodeHistory("b", "node", None, None, [(200.0, "fail", "x")])
    c = node_counts(Trace({"a": a, "b": b}, "t"), "t.csv", nodes=5)
    assert c.nodes == ("a", "b", "unseen-00000", "unseen-00001", "unseen-00002")
    assert c.failures.tolist() == [
        2,
        1,
        0,
        0,
        0,
    ]  # simultaneous failures once; other causes not at all
    assert c.exposure_h.tolist() == [
        100.0,
        200.0,
        200.0,
        200.0,
        200.0,
    ]  # b: 0 to the horizon; unseen: the span
    assert c.unseen == 3 and c.span_h == 200.0


# -- 4. through the CLI -----------------------------------------------------------------------------------
def _write_log(path, seed: int = 11) -> int:
    """A log of the failing nodes only (each with its window), drawn from TRUTH; returns how many."""
    rng = np.random.default_rng(seed)
    n = simulate(TRUTH, np.full(NODES, WINDOW_H), rng)
    nodes = {}
    for i in np.flatnonzero(n):
        times = np.sort(rng.uniform(0.0, WINDOW_H, n[i]))
        nodes[f"n{i:05d}"] = NodeHistory(
            f"n{i:05d}", "node", 0.0, WINDOW_H, [(float(t), "fail", "synthetic") for t in times]
        )
    path.write_text(write_csv(Trace(nodes, "synthetic")))
    return len(nodes)


def _printed(label: str, output: str) -> tuple[str, float, float]:
    m = re.search(rf"{label}\s*│\s*(\S+)\s*│\s*\[(\S+), (\S+)\]", output)
    assert m, output
    return m.group(1), float(m.group(2)), float(m.group(3))


@pytest.mark.slow
def test_cli_reports_the_truth_within_its_intervals_and_writes_the_model(tmp_path):
    log, model, report = tmp_path / "failures.csv", tmp_path / "m.toml", tmp_path / "r.json"
    failing = _write_log(log)
    r = run(
        "fit",
        log,
        "--bad-nodes",
        "--nodes",
        NODES,
        "--bootstrap",
        100,
        "--out",
        model,
        "--report",
        report,
    )
    assert r.exit_code == 0, r.output
    pi_s, pi_lo, pi_hi = _printed("bad fraction π", r.output)
    k_s, k_lo, k_hi = _printed("bad multiplier k", r.output)
    assert pi_lo <= TRUTH.pi <= pi_hi and k_lo <= TRUTH.k <= k_hi
    assert (
        f"{NODES - failing} of them not in the log" in r.output
        and "parametric-bootstrap" in r.output
    )
    health = tomllib.loads(model.read_text())["lifecycle"]["health"]
    assert set(health) == {"bad_fraction", "bad_multiplier"}
    assert f"{health['bad_fraction']:.4g}" == pi_s and f"{health['bad_multiplier']:.4g}" == k_s
    doc = json.loads(report.read_text())
    assert doc["estimate"]["bad_fraction"] == health["bad_fraction"]
    assert doc["estimate"]["bad_multiplier"] == health["bad_multiplier"]
    assert doc["ci"]["bad_fraction"] == pytest.approx([pi_lo, pi_hi], rel=1e-3)
    assert doc["nodes"] == NODES and doc["unseen_nodes"] == NODES - failing
    assert "sha256" in model.read_text() and "95% CI" in model.read_text()


def test_cli_writes_no_bad_nodes_when_not_identified(tmp_path):
    log, model = tmp_path / "even.csv", tmp_path / "m.toml"
    nodes = {
        f"n{i}": NodeHistory(f"n{i}", "node", 0.0, 100.0, [(10.0, "fail", ""), (60.0, "fail", "")])
        for i in range(20)
    }
    log.write_text(write_csv(Trace(nodes, "even")))
    r = run("fit", log, "--bad-nodes", "--bootstrap", 10, "--out", model)
    assert r.exit_code == 0, r.output
    assert "bad nodes not identified:" in r.output and "bad fraction π" not in r.output
    assert tomllib.loads(model.read_text())["lifecycle"]["health"] == {
        "bad_fraction": 0.0,
        "bad_multiplier": 1.0,
    }


@pytest.mark.slow
def test_cli_keeps_no_bad_nodes_when_the_test_does_not_reject(tmp_path):
    """16 nodes with exponential lifetimes, all alike: the fit finds some mixture, the test does not
    reject one rate, and the model file holds no bad nodes (with the mixture in its comments)."""
    from pathlib import Path

    log = Path(__file__).parents[1] / "traces" / "examples" / "exponential-16.csv"
    model, report = tmp_path / "m.toml", tmp_path / "r.json"
    r = run("fit", log, "--bad-nodes", "--bootstrap", 50, "--out", model, "--report", report)
    assert r.exit_code == 0, r.output
    doc = json.loads(report.read_text())
    assert doc["identified"] and doc["test_no_bad_nodes"]["p_value"] > 0.05
    assert "does not reject 'no bad nodes'" in r.output
    assert tomllib.loads(model.read_text())["lifecycle"]["health"] == {
        "bad_fraction": 0.0,
        "bad_multiplier": 1.0,
    }
    assert f"bad_fraction = {doc['estimate']['bad_fraction']:.6g}" in model.read_text()
    assert doc["health"]["no_bad_nodes_because"].startswith("the test does not reject")
    # how the estimates map onto the lifecycle (issue 26): said on screen, in the JSON and in
    # the model file; the cure probabilities are not estimated by per-node counts
    assert "maps onto [lifecycle.health]" in " ".join(r.output.split())
    keys = doc["lifecycle_keys"]
    assert keys["lifecycle.health.bad_fraction"].startswith("estimated")
    assert keys["lifecycle.repair.cure_auto_p"].startswith("not estimated")
    assert "cure_auto_p" in model.read_text()
    from cprsim import scenario as sc

    s = sc.load("dlrm-spares")  # the file is a model a lifecycle scenario reads
    merged = sc.with_model(s, model)
    assert merged.lifecycle is not None and merged.lifecycle.repair.cure_auto_p == 0.0


# -- 5. bad input ------------------------------------------------------------------------------------------
def _tiny(tmp_path, body: str):
    f = tmp_path / "t.csv"
    f.write_text("node,node_type,event,time_h,cause\n" + body)
    return f


@pytest.mark.parametrize(
    "body,args,needle",
    [
        (
            "a,node,fail,5,\nb,node,fail,7,\nc,node,fail,9,\n",
            ("--nodes", 2),
            "--nodes: 2 is less than the 3 different nodes in the log",
        ),
        ("a,node,fail,5,\na,node,fail,7,\n", (), "1 node(s) with a non-empty window"),
        (
            "a,node,start,0,\na,node,end,9,\nb,node,start,0,\nb,node,end,9,\n",
            (),
            "no failures among 2 nodes",
        ),
        (
            "a,node,fail,5,\nb,node,fail,7,\n",
            ("--node-type", "gpu"),
            "no node ids of node type gpu",
        ),
    ],
)
def test_bad_input_is_one_line_naming_the_file(tmp_path, body, args, needle):
    f = _tiny(tmp_path, body)
    line = one_line_error(run("fit", f, "--bad-nodes", *args))
    assert needle in line and "t.csv" in line


def test_options_that_do_not_apply_are_refused(tmp_path):
    f = _tiny(tmp_path, "a,node,fail,5,\nb,node,fail,7,\n")
    assert "--nodes applies with --bad-nodes only" in one_line_error(run("fit", f, "--nodes", 5))
    assert "--plot does not apply" in one_line_error(
        run("fit", f, "--bad-nodes", "--plot", tmp_path / "x.png")
    )
    with pytest.raises(InputError, match="less than the 2 different nodes"):
        node_counts(read_trace(f, "csv"), "t.csv", nodes=1)


def test_a_bad_nodes_model_file_feeds_a_scenario_with_a_lifecycle(tmp_path):
    """`cprsim fit --bad-nodes --out m.toml` -> `failures.model = "m.toml"` in a scenario with a
    [lifecycle] table: its health is the file's (and a scenario without [lifecycle] stays without)."""
    import tomllib

    from cprsim import scenario as sc

    m = tmp_path / "m.toml"
    m.write_text("# header\n[lifecycle.health]\nbad_fraction = 0.04\nbad_multiplier = 12.5\n")
    base = tomllib.loads(sc.to_toml(sc.load("toy").model_dump(mode="python", exclude_none=True)))
    with_lc = {
        **base,
        "failures": {**base["failures"], "model": str(m)},
        "lifecycle": {"standbys": 1},
    }
    f = tmp_path / "s.toml"
    f.write_text(sc.to_toml(with_lc))
    s = sc.load(str(f))
    assert (s.lifecycle.health.bad_fraction, s.lifecycle.health.bad_multiplier) == (0.04, 12.5)
    without = {**base, "failures": {**base["failures"], "model": str(m)}}
    f.write_text(sc.to_toml(without))
    assert sc.load(str(f)).lifecycle is None


def test_a_node_count_beyond_the_cap_is_refused_at_once(tmp_path):
    """`--nodes 100000000` used to run for about an hour (issue 27): refused, naming the option."""
    from cli_helpers import one_line_error

    f = _tiny(tmp_path, "a,node,fail,5,\nb,node,fail,7,\nc,node,fail,9,\n")
    line = one_line_error(run("fit", f, "--bad-nodes", "--nodes", 100_000_000))
    assert "--nodes" in line and "1,000,000" in line, line
