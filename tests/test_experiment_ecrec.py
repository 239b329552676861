"""experiments/strategy_comparison/ecrec.py: its per-configuration figures against closed forms.

On the smallest ECRec model (Criteo, 25 GB), with cprsim's own cost forms:
* failure-free, Ckpt-30 costs ``n_saves x save / W`` and ECRM ``x / (1 - x)`` (parity slowdown x);
* one server killed 15 min into the run (ECRec's protocol): full recovery takes rescheduling +
  full load + the 15 min re-executed; ECRM rebuilds in ``rho + k x shard / node`` while training
  runs at ``rebuild_throughput``, so the failure costs ``(1 - rebuild_throughput)`` of that window;
* the injected-failure replications pair the same failure times across strategies.
"""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest

from cprsim.costs import costs_of
from cprsim.sim.engine import injected_schedule

PATH = Path(__file__).resolve().parents[1] / "experiments" / "strategy_comparison" / "ecrec.py"


@pytest.fixture(scope="module")
def ecrec():
    spec = importlib.util.spec_from_file_location("ecrec_experiment", PATH)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up
    try:
        spec.loader.exec_module(mod)
        yield mod
    finally:
        sys.modules.pop(spec.name, None)


def test_failure_free_overheads_match_closed_forms(ecrec):
    raw = ecrec.raw_scenario("Criteo", 2.0, False)
    ck = ecrec.configured(raw, "ckpt-30")
    ec = ecrec.configured(raw, "ecrm-k4")
    c = costs_of(ck)
    n_saves = math.ceil(ck.duration_s / ck.interval_s) - 1
    assert ecrec.failure_free_overhead(ck) == pytest.approx(
        n_saves * c.save_s / ck.duration_s, rel=1e-9
    )
    x = ecrec.ecrm_facts(ec)["parity_slowdown"]
    # x = m x samples/s x (26 tables x dim x 4 B) / (N_e x node bandwidth)
    assert x == pytest.approx(ecrec.SAMPLES_PER_S * 26 * 32 * 4 / (5 * 12.5e9), rel=1e-9)
    assert ecrec.failure_free_overhead(ec) == pytest.approx(x / (1 - x), rel=1e-9)
    assert ec.interval_s >= ec.duration_s  # ECRM takes no checkpoint


@pytest.mark.parametrize("k", [2, 4])
def test_paper_protocol_recovery_matches_closed_forms(ecrec, k):
    rho = ecrec.RESCHEDULE_S
    full = ecrec.paper_protocol("Criteo", "ckpt-30")
    s = ecrec.configured(ecrec.raw_scenario("Criteo", 1.25, False), f"ecrm-k{k}")
    c = costs_of(s)
    assert full.recovery_s == pytest.approx(rho + c.load_s + 900.0, rel=1e-9)
    assert full.lost_wall_s == pytest.approx(full.recovery_s, rel=1e-9)
    ecrm = ecrec.paper_protocol("Criteo", f"ecrm-k{k}")
    window = rho + k * c.shard_bytes / c.node_bps
    assert ecrm.recovery_s == pytest.approx(window, rel=1e-9)
    assert ecrm.lost_wall_s == pytest.approx((1 - ecrec.REBUILD_THROUGHPUT) * window, rel=1e-6)
    assert ecrm.resume_s == 0.0  # training never stops


def test_injected_failure_is_common_to_strategies(ecrec):
    raw_f, raw_0 = ecrec.raw_scenario("Criteo", 2.0, True), ecrec.raw_scenario("Criteo", 2.0, False)
    cfgs = ("ckpt-30", "ckpt-60", "ecrm-k4")
    scen = {cfg: ecrec.configured(raw_f, cfg) for cfg in cfgs}
    reps = {cfg: ecrec.recovery_reps(scen[cfg], ecrec.configured(raw_0, cfg), 20) for cfg in cfgs}
    load = costs_of(scen["ckpt-30"]).load_s
    early = 0
    for i in range(20):
        times = {cfg: injected_schedule(scen[cfg], i) for cfg in cfgs}
        assert times["ckpt-30"] == times["ckpt-60"] == times["ecrm-k4"]  # common random numbers
        ((t, _nodes, rhos),) = times["ckpt-30"]
        if (
            t < 1800
        ):  # before either strategy's first save: both re-execute everything since the start
            early += 1
            expect = rhos[0] + load + t
            assert reps["ckpt-30"][i].recovery_s == pytest.approx(expect, rel=1e-9)
            assert reps["ckpt-60"][i].recovery_s == pytest.approx(expect, rel=1e-9)
    assert early > 0
    assert (
        len({round(r.recovery_s, 6) for r in reps["ecrm-k4"]}) == 1
    )  # constant rho: one rebuild window
