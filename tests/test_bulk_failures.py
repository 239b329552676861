"""Bulk failure streams (:mod:`cprsim.sim.failstreams`, issue 15): the same model as the per-node
streams, common random numbers across strategies, intervals and cluster sizes, lazy extension.

Oracles, no pinned numbers: (a) two-sample tests between the per-node and the bulk layouts
(Kolmogorov-Smirnov on the distribution, a Welch confidence interval on the mean) of overhead,
PLS and failure counts, at the 1% family-wise level with a Bonferroni correction over every
p-value of the family; (b, c, e) exact equalities of draws; (d) the compensator of a Poisson
process (failures over a random run length against Poisson, a 99.9% interval). Fixed seeds.
"""

from __future__ import annotations

import math
import pickle
from functools import cache

import numpy as np
import pytest
from scipy import stats
from test_stationary import CASES, equilibrium_cdf

from cprsim import scenario as sc
from cprsim.costs import costs_of
from cprsim.failures.distributions import Distribution
from cprsim.sim import engine
from cprsim.sim.engine import simulate_one
from cprsim.sim.failstreams import BulkFailures, Units
from cprsim.streams import stream


def scaled(ne: int, **upd) -> sc.Scenario:
    """cpr-production's cluster with ``ne`` embedding servers (bytes and bandwidth scaled with them)."""
    base = sc.load("cpr-production", {"failures.domains": [], "checkpoint.interval_h": 1.0})
    return base.with_updates(
        {
            "cluster.embedding_servers": ne,
            "cluster.embedding_gb": 400.0 * ne / 18,
            "storage.write_gbps": 7.0 * ne / 18,
            "storage.read_gbps": 20.0 * ne / 18,
            **upd,
        }
    )


RACKS = {
    "name": "rack",
    "node_type": "embedding",
    "nodes": 16,
    "membership": "fixed",
    "failure": {"family": "exponential", "mtbf_h": 800.0},
}


# -- (a) statistically identical --------------------------------------------------------------------------
def _cases() -> dict[str, tuple[sc.Scenario, int]]:
    """label -> (scenario, replications per layout)."""
    cpr = sc.load("cpr-production")
    # cpr-production's only failures come from a random-membership domain, whose stream is the same in
    # both layouts (see test_random_membership_domains_keep_their_streams): test its fixed-group twin
    fixed = cpr.with_updates(
        {
            "failures.domains": [
                {
                    "name": "ps-group",
                    "node_type": "embedding",
                    "nodes": 4,
                    "membership": "fixed",
                    "failure": {"family": "weibull", "shape": 0.517, "mtbf_h": 50.0},
                }
            ]
        }
    )
    big = scaled(
        1800,
        **{
            "failures.embedding": {"family": "weibull", "shape": 0.7, "mtbf_h": 3000.0},
            "failures.trainer": {"family": "exponential", "mtbf_h": 300.0},
            "failures.domains": [RACKS],
        },
    )
    return {
        "toy": (sc.load("toy"), 1500),
        "cpr-production-fixed-groups": (fixed, 800),
        "infinitehbd-hardware": (sc.load("infinitehbd-hardware"), 1200),
        "1800-servers": (big, 100),
    }


#: (label, strategy) pairs; "full" overhead is the most sensitive to failure times, "partial" has PLS
RUNS = [
    (label, strat)
    for label in ("toy", "cpr-production-fixed-groups", "infinitehbd-hardware")
    for strat in ("full", "partial")
] + [("1800-servers", "partial")]


def _metrics(strategy: str) -> tuple[str, ...]:
    return ("overhead", "failures") + (("pls",) if strategy == "partial" else ())


#: every p-value of the family: KS and Welch for each metric of each run; Bonferroni divides the level
FAMILY = sum(2 * len(_metrics(s)) for _, s in RUNS)
ALPHA = 0.01


@cache
def _sample(
    label: str, strategy: str, streams: str, mtbf_scale: float = 1.0
) -> dict[str, np.ndarray]:
    s, n = _cases()[label]
    s = s.with_updates({"strategy": {"name": strategy}})
    if mtbf_scale != 1.0:
        s = s.with_updates({"failures.embedding.mtbf_h": s.failures.embedding.mtbf_h * mtbf_scale})
    c = costs_of(s)
    res = [simulate_one(s, i, costs=c, streams=streams)[0] for i in range(n)]
    return {
        "overhead": np.array([r.overhead for r in res]),
        "pls": np.array([r.pls for r in res]),
        "failures": np.array(
            [r.failures_trainer + r.failures_embedding + r.failures_job for r in res], float
        ),
    }


def welch(a: np.ndarray, b: np.ndarray, level: float) -> tuple[float, float, float]:
    """(difference of means b - a, the half-width of its Welch interval at ``level``, the p-value)."""
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    se = math.sqrt(va + vb)
    if se == 0:
        return float(b.mean() - a.mean()), 0.0, 1.0 if a.mean() == b.mean() else 0.0
    df = (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))
    d = float(b.mean() - a.mean())
    return d, float(stats.t.ppf(0.5 + level / 2, df)) * se, float(2 * stats.t.sf(abs(d) / se, df))


def two_sample(
    old: dict[str, np.ndarray], new: dict[str, np.ndarray], metrics
) -> dict[str, dict[str, float]]:
    out = {}
    for m in metrics:
        a, b = old[m], new[m]
        ks = 1.0 if np.all(a == a[0]) and np.all(b == a[0]) else float(stats.ks_2samp(a, b).pvalue)
        d, h, p = welch(a, b, 1 - ALPHA / FAMILY)
        out[m] = {
            "ks": ks,
            "welch": p,
            "diff": d,
            "half_width": h,
            "old": float(a.mean()),
            "new": float(b.mean()),
        }
    return out


@pytest.mark.slow
@pytest.mark.parametrize("label, strategy", RUNS)
def test_bulk_streams_are_statistically_identical_to_per_node_streams(label, strategy):
    """No difference at the 1% family-wise level (Bonferroni over the FAMILY p-values of all runs):
    each KS p-value >= 0.01 / FAMILY, and each mean's Welch interval at 1 - 0.01 / FAMILY holds 0."""
    res = two_sample(
        _sample(label, strategy, "per-node"), _sample(label, strategy, "bulk"), _metrics(strategy)
    )
    for m, r in res.items():
        print(
            f"{label:28s} {strategy:8s} {m:9s} old {r['old']:.5g} new {r['new']:.5g} "
            f"KS p={r['ks']:.3g} Welch p={r['welch']:.3g}"
        )
        assert r["ks"] >= ALPHA / FAMILY, (label, strategy, m, r)
        assert abs(r["diff"]) <= r["half_width"], (label, strategy, m, r)


@pytest.mark.slow
def test_the_two_sample_test_sees_a_20_percent_shorter_mtbf():
    """Power: the same test, at the same level, rejects bulk streams whose embedding MTBF is 20% shorter."""
    res = two_sample(
        _sample("toy", "full", "per-node"), _sample("toy", "full", "bulk", 0.8), ("failures",)
    )
    assert (
        res["failures"]["ks"] < ALPHA / FAMILY
        and abs(res["failures"]["diff"]) > res["failures"]["half_width"]
    )


def test_random_membership_domains_keep_their_streams():
    """cpr-production fails only through a random-membership domain: both layouts give the same bytes."""
    s = sc.load("cpr-production")
    for i in range(5):
        assert simulate_one(s, i, streams="bulk") == simulate_one(s, i, streams="per-node")


@pytest.mark.slow
@pytest.mark.parametrize("family, shape", CASES)
def test_the_vectorised_residual_life_follows_the_equilibrium_distribution(family, shape):
    d = Distribution.from_mean(family, 10.0, shape)
    n = 20_000
    r = d.sample_residual(np.random.default_rng(2024), n)
    assert r.shape == (n,)
    for q in (0.1, 0.25, 0.5, 0.75, 0.9):
        t = float(np.quantile(r, q))
        p = equilibrium_cdf(d, t)
        assert abs(float((r <= t).mean()) - p) <= 4 * math.sqrt(p * (1 - p) / n) + 1 / n, (q, t, p)


# -- (b) common random numbers across strategies and intervals --------------------------------------------------
def fails(events, upto: float) -> list[tuple[float, int, float]]:
    return [(e.time_s, e.node, e.value) for e in events if e.kind == "fail" and e.time_s < upto]


def test_strategies_and_intervals_see_the_same_failures():
    s = scaled(
        1500,
        **{
            "failures.embedding": {"family": "weibull", "shape": 0.6, "mtbf_h": 20_000.0},
            "failures.trainer": {"family": "gamma", "shape": 0.8, "mtbf_h": 1_000.0},
            "failures.domains": [RACKS],
            "reschedule": {"family": "exponential", "mean_s": 300.0},
            "failures.start": "fresh",
        },
    )
    variants = [
        s,
        s.with_updates({"strategy.name": "partial"}),
        s.with_updates({"checkpoint.interval_h": 0.5}),
        s.with_updates({"checkpoint.interval_h": 2.5, "strategy.name": "partial"}),
    ]
    seen = 0
    for rep in range(3):
        runs = [simulate_one(v, rep, record=True) for v in variants]
        upto = min(r.wall_s for r, _ in runs)
        ref = fails(runs[0][1], upto)
        seen += len(ref)
        for _, ev in runs[1:]:
            assert fails(ev, upto) == ref
        assert len({r.wall_s for r, _ in runs}) > 1  # the job really ran differently
    assert seen >= 30


# -- (c) a node's draws do not depend on the cluster size ---------------------------------------------------------
def test_a_nodes_failures_do_not_depend_on_the_cluster_size():
    """Embedding server j (and trainer j) fails at the same times in a 100- and a 3,000-server cluster,
    with 4 or 40 trainers: the draws are named by the node's index within its type."""
    spec = {
        "failures.embedding": {"family": "weibull", "shape": 0.8, "mtbf_h": 500.0},
        "failures.trainer": {"family": "exponential", "mtbf_h": 200.0},
        "strategy.name": "partial",
        "reschedule.mean_s": 10.0,
    }
    small = scaled(100, **spec, **{"cluster.trainers": 4})
    large = scaled(3000, **spec, **{"cluster.trainers": 40})
    seen = 0
    for rep in range(3):
        (ra, ea), (rb, eb) = (
            simulate_one(small, rep, record=True),
            simulate_one(large, rep, record=True),
        )
        upto = min(ra.wall_s, rb.wall_s)

        def by_type(ev, nt, upto=upto):
            return [
                (t, ("t", n) if n < nt else ("e", n - nt), v)
                for t, n, v in fails(ev, upto)
                if n < min(nt, 4) or nt <= n < nt + 100
            ]

        a, b = by_type(ea, 4), by_type(eb, 40)
        assert a == b
        seen += len(a)
    assert seen >= 10


def _unit_failures(
    units: Units, unit: int, horizon: float, first_window: float
) -> list[tuple[float, tuple, tuple]]:
    bulk = BulkFailures([units], first_window)
    out = []
    while bulk.horizon < horizon:
        out += [f for f in bulk.advance() if f[1][0] == units.first + unit * units.k]
    return [f for f in out if f[0] < horizon]


@pytest.mark.slow
@pytest.mark.parametrize("k", [1, 4])
def test_a_units_draws_do_not_depend_on_the_unit_count_nor_on_the_windows(k):
    """Node 5 (k = 1) or group 5 (k = 4) of 100 or 3,000 units, drawn in one window or in many."""
    d, rho = Distribution.from_mean("weibull", 100.0, 0.7), Distribution("exponential", 1.0)

    def units(count: int) -> Units:
        return Units(7, count * k, k, d, rho, True, lambda b: stream(11, 2, "node-block", 1, b))

    ref = _unit_failures(units(100), 5, 5_000.0, 5_000.0)
    assert len(ref) > 20
    assert _unit_failures(units(3000), 5, 5_000.0, 5_000.0) == ref
    assert _unit_failures(units(3000), 5, 5_000.0, 10.0) == ref  # hundreds of lazy extensions
    assert _unit_failures(units(100), 5, 5_000.0, 0.5) == ref
    # column 5 of the next block: a different stream
    far = _unit_failures(units(3000), 5 + units(3000).width, 5_000.0, 5_000.0)
    assert [f[0] for f in far] != [f[0] for f in ref]


# -- (d) lazy extension: failures at the analytic rate far beyond the first window ------------------------------
@pytest.mark.slow
def test_a_job_far_longer_than_the_first_window_fails_at_the_poisson_rate():
    """Full recovery with a 10 h interval on a 10 h job and a 2.5 h cluster MTBF: runs last ~10x the
    first window (1.5 x 10 h). Exponential lifetimes: a node is a Poisson process while up, so the
    failures over a run have compensator Lambda = sum over nodes of uptime / MTBF (the run length is a
    stopping time), and (N - Lambda) / sqrt(Lambda) is ~N(0, 1) summed over replications; tested
    separately before and after the first window."""
    mtbf = 15.0 * 3600
    s = sc.load(
        "toy",
        {
            "failures.embedding.mtbf_h": 15.0,
            "failures.trainer.mtbf_h": 15.0,
            "checkpoint.interval_h": 10.0,
            "reschedule": {"family": "constant", "mean_s": 1.0},
            "seed": 99,
        },
    )
    nodes = s.cluster.trainers + s.cluster.embedding_servers
    first = engine.BULK_HORIZON * s.duration_s
    c = costs_of(s)
    n_early = n_late = lam_early = lam_late = 0.0
    walls = []
    for rep in range(300):
        r, ev = simulate_one(s, rep, record=True, costs=c)
        T = r.wall_s
        walls.append(T)
        f = [(e.time_s, e.value) for e in ev if e.kind == "fail"]
        for lo, hi, early in ((0.0, min(first, T), True), (first, T, False)):
            if hi <= lo:
                continue
            down = sum(max(0.0, min(t + rho, hi) - max(t, lo)) for t, rho in f)
            lam = (nodes * (hi - lo) - down) / mtbf
            n = sum(lo <= t < hi for t, _ in f)
            if early:
                n_early, lam_early = n_early + n, lam_early + lam
            else:
                n_late, lam_late = n_late + n, lam_late + lam
    assert np.mean(walls) > 5 * first and lam_late > 2 * lam_early
    z = stats.norm.ppf(1 - 0.001 / 2)
    for n, lam in ((n_early, lam_early), (n_late, lam_late)):
        assert abs(n - lam) <= z * math.sqrt(lam), (n, lam)


def test_bulk_windows_hand_out_every_failure_once_in_order():
    """Many short windows give exactly the failures (and order) of one long window."""
    d, rho = Distribution.from_mean("exponential", 10.0), Distribution("constant", 0.5)
    kinds = [
        Units(0, 30, 1, d, rho, False, lambda b: stream(3, 0, "node-block", 0, b)),
        Units(30, 2000, 1, d, rho, True, lambda b: stream(3, 0, "node-block", 1, b)),
        Units(30, 2000, 8, d, rho, True, lambda b: stream(3, 0, "domain-block", 0, b)),
    ]

    def collect(first: float) -> list:
        b, out = BulkFailures(kinds, first), []
        while b.horizon < 200.0:
            out += b.advance()
        return [f for f in out if f[0] < 200.0]

    one = collect(200.0)
    assert [f[0] for f in one] == sorted(f[0] for f in one)
    assert collect(0.7) == one
    # exact Poisson count check of the node kinds (a renewal process with 0.5 s down after each failure)
    n = sum(1 for f in one if len(f[1]) == 1)
    lam = (
        2030 * 200.0 / 10.5
    )  # long-run rate 1 / (mean up + down); the fresh start of 30 is exponential too
    assert abs(n - lam) <= 4 * math.sqrt(lam)


# -- (e) determinism ------------------------------------------------------------------------------------------------
def _everything() -> sc.Scenario:
    return scaled(
        1100,
        **{
            "failures.embedding": {"family": "gamma", "shape": 0.7, "mtbf_h": 5000.0},
            "failures.trainer": {"family": "lognormal", "sigma": 1.0, "mtbf_h": 500.0},
            "failures.domains": [
                RACKS,
                {
                    "name": "pdu",
                    "node_type": "embedding",
                    "nodes": 3,
                    "membership": "random",
                    "failure": {"family": "exponential", "mtbf_h": 40.0},
                },
            ],
            "failures.job": {"family": "exponential", "mtbf_h": 60.0},
            "failures.injected": [{"count": 2, "node_type": "trainer"}],
            "strategy.name": "partial",
        },
    )


def test_same_seed_same_bytes():
    s = _everything()
    for rep in (0, 1, 1 << 40):
        a, b = simulate_one(s, rep, record=True), simulate_one(s, rep, record=True)
        assert pickle.dumps(a[0]) == pickle.dumps(b[0]) and a[1] == b[1]
        assert a[0].failure_events > 0


def test_a_sweep_gives_the_same_bytes_with_one_or_two_jobs(tmp_path, cli):
    """`cprsim simulate` has no --jobs: a sweep over it does (worker processes rebuild every stream)."""
    (tmp_path / "s.toml").write_text(sc.to_toml(sc.effective_dict(_everything())))
    (tmp_path / "w.toml").write_text(
        'name = "w"\nscenario = "s.toml"\nreplications = 3\n'
        'strategies = ["full", "partial"]\n[grid]\n"checkpoint.interval_h" = [0.5, 1.0]\n'
    )
    outs = []
    for jobs in ("1", "2"):
        out = tmp_path / f"j{jobs}"
        r = cli("sweep", tmp_path / "w.toml", "--out", out, "--jobs", jobs)
        assert r.exit_code == 0, r.output
        outs.append((out / "results.csv").read_bytes())
    assert outs[0] == outs[1]


def test_unknown_streams_layout_is_refused():
    with pytest.raises(ValueError, match="streams"):
        simulate_one(sc.load("toy"), 0, streams="per-block")


def test_simultaneous_failures_are_handed_out_as_separate_processes_would():
    """Constant lifetimes and rescheduling draw nothing, so both layouts must give the same run, ties
    included: every node and group fails at the same instants, nodes by id, then fixed groups."""
    s = sc.load(
        "toy",
        {
            "failures.embedding": {"family": "constant", "mtbf_h": 3.0},
            "failures.trainer": {"family": "constant", "mtbf_h": 4.0},
            "failures.domains": [
                {
                    "name": "pair",
                    "node_type": "embedding",
                    "nodes": 3,
                    "failure": {"family": "constant", "mtbf_h": 2.5},
                }
            ],
            "reschedule": {"family": "constant", "mean_s": 600.0},
            "failures.start": "fresh",
            "strategy.name": "partial",
        },
    )
    bulk, per_node = (
        simulate_one(s, 0, record=True),
        simulate_one(s, 0, record=True, streams="per-node"),
    )
    assert bulk == per_node
    times = [e.time_s for e in bulk[1] if e.kind == "fail"]
    assert len(times) > len(set(times)) > 3  # ties, several instants


def test_fixed_groups_take_their_members_down_together_and_the_last_group_is_smaller():
    d, rho = Distribution.from_mean("exponential", 50.0), Distribution("exponential", 3.0)
    units = Units(10, 10, 4, d, rho, False, lambda b: stream(5, 0, "domain-block", 0, b))
    bulk, fails = BulkFailures([units], 2_000.0), []
    while bulk.horizon < 2_000.0:
        fails += bulk.advance()
    groups = {f[1] for f in fails}
    assert groups == {(10, 11, 12, 13), (14, 15, 16, 17), (18, 19)}
    assert all(len(f[2]) == len(f[1]) for f in fails)
    for g in groups:  # a group fails again only after its last member is back
        mine = [f for f in fails if f[1] == g]
        assert all(b[0] >= a[0] + max(a[2]) for a, b in zip(mine, mine[1:]))
    big = Units(0, 50_000, 20_000, d, rho, True, lambda b: stream(5, 0, "domain-block", 1, b))
    assert big.width == 1 and big.n_blocks == 3
    f = BulkFailures([big], 500.0).advance()
    assert {len(x[1]) for x in f} == {20_000, 10_000} and all(len(x[2]) == len(x[1]) for x in f)
