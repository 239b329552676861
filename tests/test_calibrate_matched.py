"""``cprsim calibrate --scenario`` (cprsim.calibrate.matched): a calibration on a scenario's own
failure schedules, and the planner's use of it. (a) the settings against the simulator and the
planner's rules, without training; (b) the scenario digest; (c) the planner: notes, the variants it
measured only, the packaged file's lookup; (d) end to end through the CLI at tiny sizes (torch)."""

from __future__ import annotations

import math

import pytest
from click.testing import CliRunner

from cprsim import scenario as sc
from cprsim.calibrate import matched as M
from cprsim.calibrate.validate import map_events
from cprsim.names import FAIL, MFU, PARTIAL, SAVE_FULL, SAVE_PARTIAL, SSU
from cprsim.planner.search import Runs
from cprsim.scenario import HOUR
from cprsim.sim.engine import simulate_one
from cprsim.streams import REPLICATION_BLOCKS


def _preset(strategies=(PARTIAL, MFU, SSU)):
    R = pytest.importorskip("cprsim.calibrate.runner")
    import dataclasses

    return dataclasses.replace(R.PRESETS["quick"], strategies=tuple(strategies)), R


# -- (a) the settings --------------------------------------------------------------------------------
def test_settings_replay_the_simulators_schedules_with_the_planners_parameters():
    s = sc.load("cpr-production")
    p, R = _preset()
    p2, fn, info = M.matched_settings(p, s)
    assert p2.n_shards == s.cluster.embedding_servers == info["embedding_servers"]
    young, T_F = M.young_interval(s)
    # Young's interval from its definition: sqrt(2 x full save x MTBF of the failure events)
    from cprsim.costs import costs_of
    from cprsim.planner.rates import failure_rates

    assert young == pytest.approx(
        math.sqrt(2 * costs_of(s).save_s / failure_rates(s).total), rel=1e-12
    )
    taus = [f * young for f in M.FACTORS]
    assert info["intervals_h"] == pytest.approx([t / HOUR for t in taus])
    n = R.n_iters_of(p)
    sets = fn(n, 1)
    assert len(sets) == len(M.FACTORS) * 3
    for k, (budget, st) in enumerate(sets):
        i, strategy = divmod(k, 3)
        assert st.strategy == (PARTIAL, MFU, SSU)[strategy]
        assert budget == pytest.approx(taus[i] / s.duration_s)
        # the very replication the module names, run as the planner runs the option
        prm = {} if st.strategy == PARTIAL else {"top_fraction": p.top_fraction}
        if st.strategy == SSU:
            prm["sample_rate"] = 0.01  # the planner's SSU variants
        if st.strategy != PARTIAL:
            prm["full_every"] = int(math.floor(T_F / taus[i] * (1 + 1e-9)))
        rep = REPLICATION_BLOCKS["calibrate"] + 1 * len(M.FACTORS) + i
        _, events = simulate_one(
            Runs(s, taus[i], st.strategy, prm, "calibrate").s, rep, record=True
        )
        want = map_events(events, s.duration_s, n, s.cluster.trainers, prm.get("full_every", 1))
        assert st.actions == want.actions
        assert st.top_fraction == prm.get("top_fraction", 1.0)
        assert st.sample_rate == prm.get("sample_rate", 1.0)
        kinds = [a[0] for acts in st.actions.values() for a in acts]
        shards = [j for acts in st.actions.values() for kind, j in acts if kind == FAIL]
        assert all(0 <= j < s.cluster.embedding_servers for j in shards)
        if st.strategy == PARTIAL:
            assert SAVE_PARTIAL not in kinds  # vanilla CPR: every save is full
    # a full save no less often than T_F for MFU at the shortest interval: partial saves between
    mfu = sets[1][1]
    kinds = [a[0] for acts in mfu.actions.values() for a in acts]
    assert kinds.count(SAVE_PARTIAL) > kinds.count(SAVE_FULL) >= 1
    # seeds replay different replications; the same seed the same ones
    assert fn(n, 1)[0][1].actions == sets[0][1].actions
    assert fn(n, 2)[0][1].actions != sets[0][1].actions


def test_a_scenario_it_cannot_calibrate_on_is_refused_in_one_line():
    from cprsim.errors import InputError

    p, _ = _preset()
    with pytest.raises(InputError, match="no embedding servers"):
        M.matched_settings(p, sc.load("llm-16k-gpus"))  # a dense model
    with pytest.raises(InputError, match=r"top_fraction 0\.3"):
        M.strategy_params(sc.load("cpr-production"), MFU, 0.3)


# -- (b) the digest ------------------------------------------------------------------------------------
def test_the_digest_ignores_the_strategy_and_interval_and_sees_the_cluster():
    s = sc.load("cpr-production")
    d = M.scenario_digest(s)
    same = s.with_updates({"checkpoint.interval_h": 3.0, "strategy": {"name": "mfu"}})
    assert M.scenario_digest(same) == d
    assert M.scenario_digest(s.with_updates({"cluster.embedding_servers": 16})) != d
    assert M.scenario_digest(s.with_updates({"storage.write_gbps": 5.0})) != d


# -- (c) the planner ------------------------------------------------------------------------------------
def _matched_doc(s, top_fraction=0.1):
    """A small calibration document in the matched form, built by the library's own writer."""
    from cprsim.calibrate.pipeline import calibration_doc
    from cprsim.calibrate.runner import Point

    pts = []
    for seed in range(4):
        for k, x in enumerate((0.005, 0.01, 0.02, 0.04)):
            for st, slope in ((PARTIAL, 0.02), (MFU, 0.025), (SSU, 0.02)):
                y = slope * x * (1 + 0.2 * ((seed + k) % 3 - 1))
                pts.append(Point(st, x, seed, x, y, 0.7 * y, 0.79, 0.38, 0.5, 0.1))
    info = {
        "scenario": s.name,
        "scenario_digest": M.scenario_digest(s),
        "embedding_servers": s.cluster.embedding_servers,
        "young_interval_h": 0.8,
        "intervals_h": [0.1, 0.2],
        "full_interval_h": 25.0,
        "strategy_params": {
            MFU: {"top_fraction": top_fraction},
            SSU: {"top_fraction": top_fraction, "sample_rate": 0.01},
        },
    }
    prov = {"calibrated": True, "preset": "matched", "seeds": [0, 1, 2, 3], "matched": info}
    return calibration_doc(pts, prov)


def _write_cal(tmp_path, doc, name="cal.toml"):
    from cprsim.calibrate.calibration import to_toml

    path = tmp_path / name
    path.write_text(to_toml(doc))
    return path


@pytest.mark.slow
def test_the_plan_says_which_schedules_and_plans_only_the_measured_variants(tmp_path):
    from cprsim.calibrate.calibration import load_calibration
    from cprsim.planner import make_plan

    s = sc.load("cpr-production")
    cal = load_calibration(_write_cal(tmp_path, _matched_doc(s)))
    plan = make_plan(
        s, 0.001, calibration=cal, replications=60, search_replications=60, confidence=None
    )
    notes = " | ".join(plan.notes)
    assert "calibrated on the failure schedules of scenario 'cpr-production'" in notes
    assert "WARNING: the calibration was made on" not in notes
    assert "mfu: only the variant the calibration measured (top_fraction=0.1)" in notes
    for o in plan.options:
        if o.strategy in (MFU, SSU):
            assert o.params["top_fraction"] == pytest.approx(0.1)
    # another scenario's plan with this file: said plainly
    other = s.with_updates({"cluster.embedding_servers": 16})
    plan2 = make_plan(
        other, 0.001, calibration=cal, replications=60, search_replications=60, confidence=None
    )
    assert any(
        "WARNING: the calibration was made on the schedules of scenario 'cpr-production'" in n
        for n in plan2.notes
    )
    # a scenario no packaged file is matched to gets the generic calibration, and says its
    # schedules are not the scenario's
    slower = s.with_updates({"storage.write_gbps": 5.0})
    plan3 = make_plan(slower, 0.001, replications=60, search_replications=60, confidence=None)
    assert "matched" not in plan3.calibration
    assert any("failure schedules are generic" in n for n in plan3.notes)


@pytest.mark.slow
def test_the_packaged_matched_file_is_used_only_for_its_own_scenario(tmp_path, monkeypatch):
    from cprsim.calibrate import calibration as C

    s = sc.load("cpr-production")
    path = _write_cal(tmp_path, _matched_doc(s))
    monkeypatch.setattr(C, "matched_path", lambda name: path if name == s.name else None)
    cal = C.calibration_for(s)
    assert cal.provenance["matched"]["scenario"] == "cpr-production"
    shipped = C.load_calibration()
    assert "scale" in shipped.raw  # the shipped file has a scale ladder (issue 24)
    # the matched file's ladder is the shipped one's, and says so
    assert cal.raw["scale"]["reference"] == shipped.raw["scale"]["reference"]
    assert cal.raw["scale"]["note"].startswith("the shipped generic calibration's scale ladder")
    changed = s.with_updates({"failures.domains.0.failure.mtbf_h": 20.0})
    assert "matched" not in C.calibration_for(changed).provenance
    assert "matched" not in C.calibration_for(sc.load("toy")).provenance


# -- (d) end to end ---------------------------------------------------------------------------------------
@pytest.mark.slow
def test_cli_calibrates_on_a_scenarios_schedules_and_the_plan_reads_it(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    from cprsim.calibrate.calibration import load_calibration
    from cprsim.cli import main

    monkeypatch.setattr(M, "FACTORS", (0.5, 2.0))
    out = tmp_path / "m"
    args = ["calibrate", "--preset", "quick", "--scenario", "cpr-production", "--no-costs"]
    args += ["--limit-samples", "6000", "2000", "--jobs", "1", "--out", str(out)]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    cal = load_calibration(out / "calibration.toml")
    m = cal.provenance["matched"]
    assert m["scenario"] == "cpr-production" and m["embedding_servers"] == 18
    assert m["scenario_digest"] == M.scenario_digest(sc.load("cpr-production"))
    assert len(m["intervals_h"]) == 2
    n_pts = {st: len(v["pls"]) for st, v in cal.raw["points"].items()}
    assert n_pts == {PARTIAL: 4, MFU: 4, SSU: 4}  # 2 seeds x 2 intervals
    assert (
        "calibrated on the failure schedules of scenario 'cpr-production'"
        in cal.provenance["mfu_ssu"]
    )
    # the two schedule sources together, or a ladder with a scenario: refused, exit 2
    r = CliRunner().invoke(
        main, ["calibrate", "--scenario", "toy", "--from-sim", "toy", "--out", str(tmp_path / "x")]
    )
    assert r.exit_code == 2 and "give one" in r.output
    r = CliRunner().invoke(
        main,
        ["calibrate", "--preset", "shipped", "--scenario", "toy", "--out", str(tmp_path / "y")],
    )
    assert r.exit_code == 2 and "--scenario" in r.output
    # --show prints which schedules a matched file stands for; a scenario without one: one line
    r = CliRunner().invoke(main, ["calibrate", "--show", str(out / "calibration.toml")])
    assert r.exit_code == 0 and "schedules: calibrated on the failure schedules of" in r.output
    r = CliRunner().invoke(main, ["calibrate", "--show", "shipped:toy"])
    assert r.exit_code == 1 and "no calibration matched to scenario 'toy'" in r.output


def test_the_shipped_matched_calibration_is_current_for_its_scenario():
    """cprsim ships a calibration matched to cpr-production: it must load, stand for the scenario
    as it is now (a change to the scenario's cluster, failures or costs needs a recalibration:
    `cprsim calibrate --preset matched --scenario cpr-production`), and be what its plans use."""
    from cprsim.calibrate import calibration as C

    path = C.matched_path("cpr-production")
    assert path is not None, "cprsim/data/calibrations/cpr-production.toml is not packaged"
    cal = C.load_calibration(path)
    s = sc.load("cpr-production")
    m = cal.provenance["matched"]
    assert m["scenario_digest"] == M.scenario_digest(s), "the scenario changed: recalibrate"
    # 48 seeds: where the AUC model's own stability check passes (issue 24; docs/calibration.md)
    assert cal.provenance["seeds"] == list(range(48))
    used = C.calibration_for(s)
    assert used.provenance["fingerprint"] == cal.provenance["fingerprint"]
    assert "scale" in used.raw  # the shipped ladder, carried over
    # every strategy's slope positive: no zero-loss promise (issue 24)
    for st, f in cal.raw["fit"].items():
        assert f["auc_slope"] > 0, st
