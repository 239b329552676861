"""Trace readers, censored fitting (parameter recovery, lifelines agreement), replay, the fit CLI."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
from click.testing import CliRunner
from scipy import stats

from cprsim import scenario as sc
from cprsim.cli import main
from cprsim.errors import InputError
from cprsim.failures.distributions import Distribution
from cprsim.failures.fit import FIT_FAMILIES, cluster_mtbf, fit_all, fit_family
from cprsim.failures.traces import read_trace
from cprsim.sim.engine import simulate_one

TRUTH = {
    "exponential": (100.0, 1.0),
    "weibull": (100.0, 0.7),
    "gamma": (100.0, 2.0),
    "lognormal": (100.0, 0.8),
    "loglogistic": (100.0, 2.5),
}


def censored_sample(family, n, censor_share, rng):
    """n lifetimes; a uniform censoring time chosen so that about `censor_share` are censored."""
    d = Distribution(family, *TRUTH[family])
    life = d.sample(rng, n)
    if censor_share == 0:
        return life, np.ones(n, bool)
    # exponential censoring with a rate giving the wanted share (found on a large pilot sample)
    pilot = d.sample(np.random.default_rng(99), 20000)
    lo, hi = 1e-3, 1e6
    for _ in range(60):
        mid = math.sqrt(lo * hi)
        share = np.mean(np.random.default_rng(98).exponential(mid, 20000) < pilot)
        lo, hi = (mid, hi) if share > censor_share else (lo, mid)
    c = rng.exponential(mid, n)
    return np.minimum(life, c), life <= c


@pytest.mark.slow
@pytest.mark.parametrize("family", FIT_FAMILIES)
@pytest.mark.parametrize("censor_share", [0.0, 0.4, 0.8])
def test_parameter_recovery_coverage(family, censor_share):
    """Over 20 fixed seeds, the 95% intervals cover the truth about 95% of the time.

    Coverage k of 20 is Binomial(20, 0.95) if the intervals are right: P(k <= 15) = 1.6%, so fewer
    than 16 covering fails the test (for each of the scale and the shape).
    """
    scale, shape = TRUTH[family]
    cover_sc = cover_sh = 0
    for seed in range(20):
        t, obs = censored_sample(family, 300, censor_share, np.random.default_rng(1000 + seed))
        f = fit_family(family, t, obs)
        cover_sc += f.scale_ci_[0] <= scale <= f.scale_ci_[1]
        cover_sh += family == "exponential" or f.shape_ci_[0] <= shape <= f.shape_ci_[1]
    assert stats.binom.cdf(15, 20, 0.95) < 0.02
    assert cover_sc >= 16 and cover_sh >= 16, (cover_sc, cover_sh)


@pytest.mark.slow
def test_agreement_with_lifelines():
    lifelines = pytest.importorskip("lifelines")
    rng = np.random.default_rng(5)
    t, obs = censored_sample("weibull", 400, 0.4, rng)
    w = lifelines.WeibullFitter().fit(t, obs)
    f = fit_family("weibull", t, obs)
    assert f.scale_ == pytest.approx(w.lambda_, rel=1e-3) and f.shape_ == pytest.approx(
        w.rho_, rel=1e-3
    )
    assert f.log_likelihood_ == pytest.approx(w.log_likelihood_, rel=1e-4)
    e = lifelines.ExponentialFitter().fit(t, obs)
    assert fit_family("exponential", t, obs).scale_ == pytest.approx(e.lambda_, rel=1e-3)
    ln = lifelines.LogNormalFitter().fit(t, obs)
    fl = fit_family("lognormal", t, obs)
    assert math.log(fl.scale_) == pytest.approx(ln.mu_, rel=1e-3) and fl.shape_ == pytest.approx(
        ln.sigma_, rel=1e-3
    )
    ll = lifelines.LogLogisticFitter().fit(t, obs)
    fll = fit_family("loglogistic", t, obs)
    assert fll.scale_ == pytest.approx(ll.alpha_, rel=1e-3) and fll.shape_ == pytest.approx(
        ll.beta_, rel=1e-3
    )


@pytest.mark.slow
def test_model_selection_and_goodness_of_fit_see_the_truth():
    t, obs = censored_sample("weibull", 600, 0.3, np.random.default_rng(11))
    rep = fit_all(t, obs, bootstrap=39, seed=1)
    assert rep.best.family in ("weibull", "gamma")  # gamma(0.7-ish) is hard to tell apart at n=600
    expo = next(f for f in rep.fits if f.family == "exponential")
    assert expo.AIC_ > rep.best.AIC_ + 10 and expo.p_value_ <= 0.05
    weib = next(f for f in rep.fits if f.family == "weibull")
    assert weib.p_value_ > 0.05


def test_cluster_mtbf_closed_forms():
    f = fit_family(
        "exponential", *censored_sample("exponential", 500, 0.0, np.random.default_rng(3))
    )
    point, lo, hi, method = cluster_mtbf(f, 10)
    assert point == pytest.approx(f.scale_ / 10) and lo < point < hi and method == "closed form"
    g = fit_family("gamma", *censored_sample("gamma", 500, 0.2, np.random.default_rng(4)))
    p2, _lo2, _hi2, m2 = cluster_mtbf(g, 5)
    # against simulation of the minimum of 5 draws
    draws = g.distribution(1.0).sample(np.random.default_rng(0), (200_000, 5)).min(axis=1)
    assert p2 == pytest.approx(draws.mean(), rel=0.01) and "numerical" in m2


# -- the schema reader: malformed input ---------------------------------------------------------------
@pytest.mark.parametrize(
    "body,needle",
    [
        (
            "node,node_type,event,time_h,cause\na,node,fail,5,\na,node,fail,3,\n",
            "line 3: column time_h: before this node's previous event (line 2)",
        ),
        (
            "node,node_type,event,time_h,cause\na,node,fail,-1,\n",
            "line 2: column time_h: expected a finite number >= 0",
        ),
        (
            "node,node_type,event,time_h,cause\na,node,fail,nan,\n",
            "line 2: column time_h: expected a finite number >= 0",
        ),
        (
            "node,node_type,event,time_h,cause\na,node,repair,1,\n",
            "line 2: repair before any failure",
        ),
        ("node,type,event,time\n", "line 1: expected the columns"),
        ("", "empty file"),
        (
            "node,node_type,event,time_h,cause\na,node,crash,1,\n",
            "line 2: column event: expected one of",
        ),
    ],
)
def test_malformed_traces_are_one_line_errors_with_exit_2(tmp_path, body, needle):
    f = tmp_path / "t.csv"
    f.write_text(body)
    with pytest.raises(InputError, match=re.escape(needle)):
        read_trace(f, "csv")
    r = CliRunner().invoke(main, ["fit", str(f)])
    assert r.exit_code == 2 and needle in r.output and len(r.output.strip().splitlines()) == 1


# -- the fit CLI and the model file ---------------------------------------------------------------------
@pytest.mark.slow
def test_fit_cli_writes_a_model_a_scenario_can_use(tmp_path, example_trace):
    trace = example_trace
    model, png = tmp_path / "model.toml", tmp_path / "fit.png"
    r = CliRunner().invoke(
        main,
        [
            "fit",
            str(trace),
            "--out",
            str(model),
            "--plot",
            str(png),
            "--cluster-size",
            "8",
            "--bootstrap",
            "0",
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["fits"][0]["aic"] == min(f["aic"] for f in d["fits"]) and d["cluster"]["nodes"] == 8
    assert png.read_bytes()[:4] == b"\x89PNG"
    scen = tmp_path / "s.toml"
    scen.write_text(
        f'name = "m"\nreplications = 3\n[job]\nduration_h = 50.0\n[failures]\nmodel = "{model.name}"\n'
    )
    s = sc.load(str(scen))
    assert (
        s.failures.embedding is not None and s.failures.embedding.family == d["fits"][0]["family"]
    )


# -- replay ---------------------------------------------------------------------------------------------
def test_replay_maps_trace_failures_onto_nodes(tmp_path):
    f = tmp_path / "r.csv"
    f.write_text(
        "node,node_type,event,time_h,cause\n"
        "e1,embedding,start,0,\ne1,embedding,fail,2.0,x\ne1,embedding,repair,2.1,\ne1,embedding,end,100,\n"
        "t1,trainer,start,0,\nt1,trainer,fail,5.0,y\nt1,trainer,end,100,\n"
    )
    s = sc.validate(
        {
            "name": "r",
            "cluster": {"trainers": 1, "embedding_servers": 1, "embedding_gb": 1.0},
            "job": {"duration_h": 10.0},
            "checkpoint": {"interval_h": 1.0},
            "strategy": {"name": "partial"},
            "failures": {"replay": str(f)},
        },
        "test",
    )
    _r, ev = simulate_one(s, 0, record=True)
    fails = [(e.time_s / 3600, e.node, e.value) for e in ev if e.kind == "fail"]
    assert fails[0][:2] == (2.0, 1) and fails[0][2] == pytest.approx(0.1 * 3600)  # the repair time
    assert fails[1][:2] == (5.0, 0) and fails[1][2] == pytest.approx(
        300.0
    )  # no repair: rescheduling draw
    other = [
        (round(e.time_s, 6), e.node) for e in simulate_one(s, 1, record=True)[1] if e.kind == "fail"
    ]
    assert other != [(round(t * 3600, 6), n) for t, n, _ in fails]  # bootstrap offsets


# -- the public traces: counts as their SOURCE.md states them ----------------------------------------------
@pytest.mark.slow
@pytest.mark.shared
def test_readers_count_what_the_sources_say(public_traces):
    ih = read_trace(public_traces / "InfiniteHBD-Trace" / "fault_trace.json", "infinitehbd")
    assert (
        ih.counts["events"] == 1168
        and ih.counts["fault_start"] == 584
        and ih.counts["fault_end"] == 584
    )
    assert ih.counts["levels"] == {"Hardware": 298, "Other": 262, "Software": 24}
    assert (
        ih.counts["faulty_nodes"] == 231
        and len(ih.nodes) == 400
        and ih.counts["never_failed_nodes"] == 169
    )
    lanl = read_trace(public_traces / "SimEDC" / "trace.csv", "lanl")
    assert lanl.counts["records"] == 23739 and lanl.counts["systems"] == 23
    # each system's `nodes` column: 3,577 nodes fail, 1,430 never do (system 17 gives no count)
    assert (
        lanl.counts["failed_nodes"] == 3577
        and lanl.counts["never_failed_nodes"] == 1430
        and len(lanl.nodes) == 5007
    )
    ti = read_trace(public_traces / "TitanGPULife" / "gc_summary_loc.csv", "titan")
    assert (
        ti.counts["rows"] == 30207 and ti.counts["dead"] == 5089 and ti.counts["censored"] == 25118
    )
    ph = read_trace(public_traces / "philly-traces" / "jobs.json", "philly")
    assert (
        ph.counts["jobs"] == 3034
        and ph.counts["multi_attempt_jobs"] == 816
        and ph.counts["reattempts"] == 1456
    )
    _t, obs = ti.lifetimes()
    assert obs.sum() == 5089 and (~obs).sum() == 25118


@pytest.mark.shared
def test_committed_fits_match_a_refit(public_traces):
    """traces/fitted/ holds numbers derived from ../shared: a refit gives them back."""
    import tomllib
    from pathlib import Path

    fitted = tomllib.loads(
        (Path(__file__).parents[1] / "traces/fitted/infinitehbd-hardware.toml").read_text()
    )
    tr = read_trace(
        public_traces / "InfiniteHBD-Trace" / "fault_trace.json",
        "infinitehbd",
        {"level": "hardware"},
        400,
    )
    rep = fit_all(*tr.lifetimes())
    assert rep.best.family == fitted["failures"]["embedding"]["family"]
    assert rep.best.scale_ == pytest.approx(fitted["failures"]["embedding"]["scale_h"], rel=1e-6)
    assert (
        rep.n == fitted["provenance"]["lifetimes"]
        and rep.censored == fitted["provenance"]["censored"]
    )


def test_a_cause_filter_censors_the_other_causes_and_keeps_every_up_time(tmp_path):
    """Competing risks: a failure of an excluded cause ends the up-time censored; the node's repair
    brings it back at risk (the filter once dropped those repairs: one lifetime per node)."""
    f = tmp_path / "t.csv"
    f.write_text(
        "node,node_type,event,time_h,cause\n"
        "a,node,fail,10,disk\na,node,repair,11,\n"
        "a,node,fail,20,psu\na,node,repair,22,\n"
        "a,node,fail,30,disk\na,node,repair,31,\n"
        "b,node,fail,5,psu\nb,node,repair,6,\n"
        "c,gpu,fail,7,disk\n"
    )
    tr = read_trace(f, "csv", {"cause": "disk"})
    t, obs = tr.lifetimes()
    # the horizon is the last event of the trace, 31 h
    assert sorted(zip(t.tolist(), obs.tolist())) == sorted(
        [
            (10.0, True),
            (9.0, False),
            (8.0, True),  # node a
            (5.0, False),
            (25.0, False),  # node b: psu failure censors; then up to the horizon 31
            (7.0, True),  # node c
        ]
    )
    rt, robs = tr.repairs()
    # only the disk failures' repairs; node c is still down at the horizon (censored)
    assert sorted(zip(rt.tolist(), robs.tolist())) == [(1.0, True), (1.0, True), (24.0, False)]
    assert tr.n_failures() == 3
    only_gpu = read_trace(f, "csv", {"node_type": "gpu"})
    assert list(only_gpu.nodes) == ["c"]
