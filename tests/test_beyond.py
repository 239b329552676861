"""ECRM, Check-N-Run, lookahead + trainer caches and two-phase checkpoints against their oracles."""

from __future__ import annotations

import math

import numpy as np
import pytest
from click.testing import CliRunner
from scenario_builder import bare_run, small, validated

from cprsim import scenario as sc
from cprsim.cli import main
from cprsim.costs import costs_of
from cprsim.scenario import HOUR
from cprsim.sim.engine import simulate_one
from cprsim.sim.replicate import estimate, run_replications

_BASE = small(
    seed=11,
    replications=200,
    cluster={"embedding_servers": 8, "embedding_gb": 40.0, "dense_gb": 0.2},
    job={"duration_h": 20.0, "samples_per_s": 10000.0},
    storage={"write_gbps": 2.0, "read_gbps": 4.0, "latency_s": 2.0},
    reschedule={"mean_s": 120.0},
)


def _scen(**upd):
    return validated(_BASE, **upd)


def _rows(scale: float) -> int:
    """Criteo Kaggle's row count divided by ``scale`` (the old ``table_scale``)."""
    from cprsim.access import CRITEO_KAGGLE

    return round(sum(CRITEO_KAGGLE) / scale)


def _strategy(s):
    from cprsim.sim import strategies

    run = bare_run(s)
    cls = strategies.get(s.strategy.name)
    return cls(cls.Params.model_validate(s.strategy.params), run)


# -- ECRM ----------------------------------------------------------------------------------------------
def test_ecrm_overhead_is_steady_slowdown_plus_degraded_rebuilds():
    """Single-node embedding failures, 2 parities per stripe (stripe loss practically impossible).

    Oracle: wall = W / r + (failures x rebuild window x (1 - theta)) / r + saves, where r is the
    steady rate, theta the rebuild throughput and the window runs from the failure to the end of
    the rebuild (rescheduling + k x shard / node bandwidth); failures = lambda x E[wall].
    """
    s = _scen(
        **{
            "failures.embedding": {"family": "exponential", "mtbf_h": 40.0},
            "strategy": {
                "name": "ecrm",
                "k": 2,
                "m": 2,
                "parity_slowdown": 0.03,
                "rebuild_throughput": 0.8,
            },
            "checkpoint.interval_h": 10.0,
        }
    )
    res, _ = run_replications(s, 300)
    assert all(r.lost_s == 0 and r.pls == 0 for r in res)
    strat = _strategy(s)
    r, theta = strat.rate, 0.8
    window = s.reschedule.dist.mean() + strat.rebuild_s
    lam = s.cluster.embedding_servers / (40.0 * HOUR)
    wall = estimate([x.wall_s for x in res])
    saves = np.mean([x.save_s for x in res])
    # E[wall] solves wall = W/r + lam*wall*window*(1-theta) (overlapping rebuilds are rare) + saves
    expect = (s.duration_s / r + saves) / (1 - lam * window * (1 - theta))
    overlap = lam * window  # chance that a rebuild overlaps another: the oracle's neglected term
    assert abs(wall.mean - expect) <= wall.half_width + overlap * (expect - s.duration_s)


def test_ecrm_stripe_loss_falls_back_to_checkpoint_or_partial_recovery():
    # servers 4 and 5 are in the same stripe (k=2, m=1 -> stripes of 3: 4,5,6 are ids 0,1,2)
    s = _scen(
        **{
            "strategy": {"name": "ecrm", "k": 2, "m": 1, "parity_slowdown": 0.0},
            "checkpoint.interval_h": 5.0,
        }
    )
    t1, t2 = 6.0 * HOUR, 6.0 * HOUR + 10.0  # within the first one's rebuild
    sched = [(t1, (4,), (120.0,)), (t2, (5,), (120.0,))]
    full, ev = simulate_one(s, 0, record=True, schedule=sched)
    assert any(e.kind == "stripe_loss" for e in ev)
    # progress at the 2nd failure: one save before t1, then 10 s at the rebuild throughput
    theta = 0.9  # ECRMParams.rebuild_throughput default
    assert full.lost_s == pytest.approx(
        t1 - 5.0 * HOUR - costs_of(s).save_s + (t2 - t1) * theta, rel=1e-9
    )
    assert full.pls == 0
    part, _ = simulate_one(
        s.with_updates({"strategy.stripe_loss": "partial"}), 0, record=True, schedule=sched
    )
    assert part.lost_s == 0 and part.pls > 0
    # one failure alone: rebuilt from parity, nothing lost, no stall beyond rescheduling
    one, _ = simulate_one(s, 0, schedule=sched[:1])
    assert one.lost_s == 0 and one.pls == 0 and one.load_s == 0


# -- Check-N-Run ----------------------------------------------------------------------------------------
def test_differential_bytes_grow_with_the_interval_and_stay_below_full():
    s0 = _scen(
        **{
            "strategy": {"name": "checknrun", "bits": 32, "full_every": 4, "policy": "one-shot"},
            "access.rows": _rows(100),
        }
    )
    full_bytes = costs_of(s0).embedding_bytes
    prev = 0.0
    for tau_h in (0.01, 0.1, 1.0, 5.0):
        b = _strategy(s0.with_updates({"checkpoint.interval_h": tau_h})).bytes_per_save()
        assert prev < b <= full_bytes
        prev = b
    q = _strategy(s0.with_updates({"strategy.bits": 8})).bytes_per_save()
    assert q == pytest.approx(_strategy(s0).bytes_per_save() / 4)


@pytest.mark.parametrize("policy", ["one-shot", "consecutive"])
def test_checknrun_restore_reads_what_its_policy_kept(policy):
    """Hand-computed: a failure after the 3rd save (baseline, increments 1 and 2). One-shot reads the
    baseline and increment 2 (rows touched in 2 intervals); consecutive reads the baseline and both
    increments; the dense part once, unquantized; the quantized rows are dequantized."""
    s = _scen(
        **{
            "strategy": {"name": "checknrun", "bits": 16, "full_every": 4, "policy": policy},
            "access.rows": _rows(1000),
            "checkpoint.interval_h": 1.0,
        }
    )
    t = 3 * HOUR + 3 * 60.0
    res, ev = simulate_one(s, 0, record=True, schedule=[(t, (0,), (60.0,))])
    c = costs_of(s)
    from cprsim import access

    model = access.of(s)
    R = s.job.samples_per_s * s.interval_s
    d1, d2 = float(model.touched(R)), float(model.touched(2 * R))
    share = 1 + (2 * d1 if policy == "consecutive" else d2)
    per_byte = (c.load_s - c.latency_s) / (c.embedding_bytes + c.dense_bytes)
    expect = (
        c.latency_s
        + per_byte * (0.5 * share * c.embedding_bytes + c.dense_bytes)
        + share * c.embedding_bytes / (2e9 * s.cluster.embedding_servers)
    )
    loads = [e.value for e in ev if e.kind == "load_end"]
    assert loads == [pytest.approx(expect, rel=1e-12)]
    assert res.pls == 0 and res.lost_s > 0
    saves = [e.time_s for e in ev if e.kind in ("save_start", "save_end")]
    durations = [b - a for a, b in zip(saves[0::2], saves[1::2])]
    inc = [c.save_fraction_s(0.5 * x) for x in ((d1, d1) if policy == "consecutive" else (d1, d2))]
    assert durations[:3] == [
        pytest.approx(c.save_fraction_s(0.5)),
        pytest.approx(inc[0]),
        pytest.approx(inc[1]),
    ]


@pytest.mark.parametrize("scale", [1.0, 1000.0])
@pytest.mark.parametrize("tau_h", [0.25, 0.7, 2.0])
def test_intermittent_checknrun_is_never_costlier_than_full(scale, tau_h):
    """Same failures (common random numbers), same interval: not significantly costlier (paired CI),
    whether nearly every row is dirty (Criteo-sized tables) or few are (tables / 1000)."""
    s = _scen(
        **{
            "failures.embedding": {"family": "exponential", "mtbf_h": 20.0},
            "access.rows": _rows(scale),
            "checkpoint.interval_h": tau_h,
        }
    )
    full, _ = run_replications(s, 150)
    cnr, _ = run_replications(s.with_updates({"strategy": {"name": "checknrun"}}), 150)
    d = estimate([a.overhead - b.overhead for a, b in zip(cnr, full)])
    assert d.lo <= 0.0, (
        f"Check-N-Run costs more than full recovery at {tau_h} h (scale {scale}): {d}"
    )


@pytest.mark.slow
def test_one_shot_checknrun_beats_consecutive_when_restores_matter():
    s = _scen(
        **{
            "failures.embedding": {"family": "exponential", "mtbf_h": 5.0},
            "access.rows": _rows(1000),
            "checkpoint.interval_h": 0.5,
        }
    )
    one, _ = run_replications(
        s.with_updates({"strategy": {"name": "checknrun", "policy": "one-shot"}}), 150
    )
    con, _ = run_replications(
        s.with_updates({"strategy": {"name": "checknrun", "policy": "consecutive"}}), 150
    )
    assert np.mean([r.load_s for r in one]) < np.mean([r.load_s for r in con])


def test_checknrun_reports_write_and_capacity_ratios(tmp_path):
    import json

    s = _scen(
        **{
            "strategy": {"name": "checknrun", "bits": 8, "full_every": 4, "policy": "one-shot"},
            "access.rows": _rows(1000),
        }
    )
    st = _strategy(s)
    c = costs_of(s)
    from cprsim import access

    R = s.job.samples_per_s * s.interval_s
    d = [float(access.of(s).touched(j * R)) for j in (1, 2, 3)]
    E, D = c.embedding_bytes, c.dense_bytes
    written = [0.25 * E + D] + [0.25 * x * E + D for x in d]
    f = st.footprint()
    assert f["write_ratio"] == pytest.approx((E + D) / (sum(written) / 4))
    assert f["capacity_ratio"] == pytest.approx((E + D) / (0.25 * (1 + d[2]) * E + 2 * D))
    assert f["write_ratio"] > 1 and f["capacity_ratio"] > 1
    out = tmp_path / "run"
    r = CliRunner().invoke(
        main,
        [
            "simulate",
            "toy",
            "--strategy",
            "checknrun",
            "--set",
            "strategy.bits=8",
            "-n",
            "3",
            "--out",
            str(out),
        ],
    )
    assert r.exit_code == 0, r.output
    info = json.loads((out / "summary.json").read_text())["strategy_footprint"]
    assert info["write_ratio"] > 1 and "capacity_ratio" in info


# -- lookahead and trainer caches -------------------------------------------------------------------------
def test_lookahead_protects_less_than_mfu_at_equal_bytes():
    """Ranking by the next window's accesses protects the past window's updates only out of sample:
    on the same failures (common random numbers) and the same save times, lookahead loses at least
    what MFU loses in every replication, and more on average."""
    common = {
        "top_fraction": 0.02,
        "full_every": 6,
        "counter_overhead": 0.0,
        "select_ns_per_row": 0.0,
    }
    s = _scen(
        **{
            "failures.embedding": {"family": "exponential", "mtbf_h": 30.0},
            "checkpoint.interval_h": 0.5,
        }
    )
    mfu, _ = run_replications(s.with_updates({"strategy": {"name": "mfu", **common}}), 100)
    la, _ = run_replications(s.with_updates({"strategy": {"name": "lookahead", **common}}), 100)
    assert all(math.isclose(a.save_s, b.save_s, rel_tol=1e-9) for a, b in zip(mfu, la))
    assert all(b.pls >= a.pls - 1e-15 for a, b in zip(mfu, la))
    assert np.mean([b.pls for b in la]) > np.mean([a.pls for a in mfu])


def test_trainer_cache_losses_match_their_expectation():
    """Only trainers fail: PLS = E[failures] x E[age since write-back] x cache coverage / N_t."""
    wb, frac, mtbf = 600.0, 0.01, 25.0
    s = _scen(
        **{
            "failures.trainer": {"family": "exponential", "mtbf_h": mtbf},
            "strategy": {"name": "lookahead", "cache_fraction": frac, "writeback_s": wb},
        }
    )
    res, _ = run_replications(s, 400)
    pls = estimate([r.pls for r in res])
    from cprsim import access

    cov = access.of(s).coverage(frac)
    n_fail = np.mean([r.failures_trainer for r in res])
    # failures strike uniformly in progress; age = progress mod wb, mean wb/2 (W >> wb)
    expect = n_fail * (wb / 2) * cov / s.cluster.trainers / s.duration_s
    assert pls.lo <= expect * 1.02 and expect * 0.98 <= pls.hi  # 2%: failures outside compute


# -- two-phase ------------------------------------------------------------------------------------------
def test_two_phase_without_failures_costs_stalls_plus_persist_slowdown_exactly():
    sigma = 0.25
    s = _scen(
        **{
            "checkpoint.mode": "two-phase",
            "checkpoint.persist_slowdown": sigma,
            "checkpoint.interval_h": 3.0,
        }
    )
    c = costs_of(s)
    res, _ = simulate_one(s, 0)
    n = res.checkpoints
    assert n == 6  # saves at 3, 6, ..., 18 h of a 20 h job; every persist ends before the job
    assert res.wall_s == pytest.approx(
        s.duration_s + n * c.snapshot_s + n * c.save_s * sigma, rel=1e-12
    )
    assert res.degraded_s == pytest.approx(n * c.save_s * sigma, rel=1e-9)


# -- bad parameters -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "sets,needle",
    [
        (['strategy.name="ecrm"', "strategy.k=0"], "strategy: k:"),
        (
            ['strategy.name="ecrm"', "strategy.m=8"],
            "strategy.m (8) must be less than the 8 embedding servers",
        ),
        (
            ['strategy.name="ecrm"', "strategy.k=7", "strategy.m=2"],
            "exceeds the 8 embedding servers",
        ),
        (['strategy.name="checknrun"', "strategy.bits=5"], "bits must be one of 32, 16, 8, 4"),
        (['strategy.name="mfu"', "strategy.top_fraction=1.5"], "top_fraction"),
        (['strategy.name="ssu"', "strategy.bogus=1"], "bogus: unknown key"),
    ],
)
def test_bad_strategy_parameters_are_one_line_errors(tmp_path, sets, needle):
    f = tmp_path / "s.toml"
    f.write_text(sc.to_toml(sc.effective_dict(_scen())))
    args = ["simulate", str(f), "-n", "2"] + [x for kv in sets for x in ("--set", kv)]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in r.output


def test_lookahead_without_throughput_is_a_scenario_error():
    """Its window is tau x samples/s samples: without a throughput there is no ranking to model."""
    raw, _ = sc.load_raw("toy")
    raw["job"] = {"duration_h": 10.0}
    for params in ({"name": "lookahead", "differential": True}, {"name": "lookahead"}):
        raw["strategy"] = params
        with pytest.raises(sc.ScenarioError, match="samples_per_s"):
            sc.validate(raw, "toy")


def test_ecrm_parity_slowdown_follows_the_update_bytes_of_the_layout():
    """m x samples/s x (tables x dim x bytes) / (N_e x node bandwidth): one gradient row per lookup."""
    from cprsim.sim import strategies

    ECRM = strategies.get("ecrm")
    for dim in (32, 128):
        s = _scen(**{"strategy": {"name": "ecrm", "k": 2, "m": 2}, "access.dim": dim})
        c = costs_of(s)
        expect = 2 * 10_000.0 * 26 * dim * 4.0 / (8 * c.node_bps)
        assert ECRM.describe(s, c)["parity_slowdown"] == pytest.approx(expect, rel=1e-12)
    s = _scen(**{"strategy": {"name": "ecrm", "k": 2, "m": 2, "update_bytes_per_sample": 1000.0}})
    assert ECRM.describe(s, costs_of(s))["parity_slowdown"] == pytest.approx(
        2 * 10_000.0 * 1000.0 / (8 * 1.25e9)
    )


@pytest.mark.parametrize("degraded", [True, False])
def test_ecrm_trainer_failure_degrades_like_partial_recovery(degraded):
    """Hand-computed: one trainer of 4 fails inside compute and is back after rho; it then copies
    the dense part (dense_copy_s). With trainer_degraded (the default) the job trains on at 3/4 of
    its rate for T = rho + copy: T/4 of extra wall; without it the job stalls for T. No rebuild,
    no loss either way; ECRM's steady parity slowdown multiplies both."""
    s = _scen(
        **{
            "strategy": {
                "name": "ecrm",
                "k": 2,
                "m": 1,
                "parity_slowdown": 0.05,
                "trainer_degraded": degraded,
            },
            "checkpoint.interval_h": 5.0,
        }
    )
    c = costs_of(s)
    base, ev = simulate_one(s, 0, record=True)
    t = next(e.time_s for e in ev if e.kind == "save_end") + 600.0
    rho = 300.0
    r, _ = simulate_one(s, 0, schedule=[(t, (1,), (rho,))])
    T = rho + c.dense_copy_s
    assert r.wall_s == pytest.approx(base.wall_s + (T / 4 if degraded else T), rel=1e-12)
    assert (
        r.lost_s == 0
        and r.pls == 0
        and r.load_s == (0.0 if degraded else pytest.approx(c.dense_copy_s))
    )
