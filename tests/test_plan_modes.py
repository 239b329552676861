"""Checkpoint modes compared from the command line (issue 25, item 4): `cprsim plan
--checkpoint-modes blocking,two-phase,tiered` on any scenario, and `--set checkpoint.mode=...`
on a tiered scenario (its [checkpoint.tiers] go with the mode)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from cprsim import scenario as sc
from cprsim.cli import main
from cprsim.errors import InputError, ParameterError
from cprsim.planner import _modes

TOY = Path(sc.__file__).parent / "scenarios" / "toy.toml"


def _dense(tmp_path: Path) -> Path:
    text = TOY.read_text().replace('name = "toy"', 'name = "dense-toy"')
    text = text.replace("embedding_servers = 4", "embedding_servers = 0")
    text = text.replace("embedding_gb = 10.0", "embedding_gb = 0.0")
    path = tmp_path / "dense-toy.toml"
    path.write_text(text.split("[failures.embedding]")[0])
    return path


def test_modes_default_to_the_scenarios_own_and_are_validated():
    toy, llm = sc.load("toy"), sc.load("llm-16k-gpus")
    assert _modes(toy, None) == ("blocking",) and _modes(llm, None) == ("blocking", "tiered")
    assert _modes(toy, "tiered, blocking,tiered") == ("tiered", "blocking")
    with pytest.raises(ParameterError, match="checkpoint_modes: unknown 'async'"):
        _modes(toy, ["blocking", "async"])
    with pytest.raises(ParameterError, match="include blocking or two-phase"):
        _modes(toy, ["tiered"])
    r = CliRunner().invoke(
        main, ["plan", "toy", "--max-accuracy-loss", "0.001"] + ["--checkpoint-modes", "x"]
    )
    assert r.exit_code == 2 and "--checkpoint-modes" in r.output and "Traceback" not in r.output


@pytest.mark.slow
def test_plan_compares_blocking_two_phase_and_tiered_on_a_blocking_scenario(tmp_path):
    path = _dense(tmp_path)
    args = ["plan", str(path), "-n", "40", "--search-replications", "40", "--confidence", "mean"]
    r = CliRunner().invoke(
        main, [*args, "--checkpoint-modes", "blocking,two-phase,tiered", "--json"]
    )
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    labels = [o["label"] for o in d["options"]]
    assert labels[:3] == ["full (Young)", "full (Daly)", "full (simulated optimum)"]
    assert "full (Daly), two-phase" in labels and "full, tiered" in labels
    notes = " ".join(d["notes"])
    assert "checkpoint modes compared: blocking, two-phase, tiered" in notes
    assert "the default [checkpoint.tiers]" in notes
    # the baseline is the scenario's own mode when listed; each option records its mode, and
    # scenario_for runs it in that mode (tiered: with the persist period the plan chose)
    from cprsim import api

    p = api.plan(
        str(path),
        replications=40,
        search_replications=40,
        confidence=None,
        checkpoint_modes=["two-phase", "tiered", "blocking"],
    )
    modes = {o.label: o.checkpoint_mode for o in p.options}
    assert modes["full (Daly)"] == "blocking" and modes["full (Daly), two-phase"] == "two-phase"
    assert modes["full, tiered"] == "tiered"
    assert all(o.within == 1.0 for o in p.options)  # no bound, nothing lost: every run within
    two = p.scenario_for("full (Daly), two-phase")
    assert two.checkpoint.mode == "two-phase" and two.checkpoint.tiers is None
    tiered = p.scenario_for("full, tiered")
    k = p.option("full, tiered").params["persist_every"]
    assert tiered.checkpoint.mode == "tiered" and tiered.checkpoint.tier_spec.persist_every == k
    assert p.scenario_for("full (Daly)").checkpoint.mode == "blocking"


def test_setting_a_tiered_scenarios_mode_drops_its_tiers():
    llm = sc.load("llm-16k-gpus")
    assert llm.checkpoint.mode == "tiered" and llm.checkpoint.tiers is not None
    s = sc.load("llm-16k-gpus", {"checkpoint.mode": "blocking"})
    assert s.checkpoint.mode == "blocking" and s.checkpoint.tiers is None
    # tiers set in the same updates stay, whatever the order: the mix is refused
    for upd in (
        {"checkpoint.mode": "blocking", "checkpoint.tiers.persist_every": 4},
        {"checkpoint.tiers.persist_every": 4, "checkpoint.mode": "blocking"},
    ):
        with pytest.raises(InputError, match="tiers"):
            sc.load("llm-16k-gpus", upd)
    assert llm.with_updates({"checkpoint.mode": "blocking"}).checkpoint.tiers is None
    r = CliRunner().invoke(main, ["show", "llm-16k-gpus", "--set", "checkpoint.mode=two-phase"])
    assert r.exit_code == 0 and "\n[checkpoint.tiers]\n" not in r.output


def test_a_sweep_over_the_mode_of_a_tiered_scenario_drops_the_tiers_per_point(tmp_path):
    from cprsim.sweep import load_sweep

    f = tmp_path / "sw.toml"
    f.write_text(
        'scenario = "llm-16k-gpus"\nreplications = 2\n[grid]\n'
        '"checkpoint.mode" = ["blocking", "tiered"]\n"checkpoint.interval_h" = [0.1]\n'
    )
    sw = load_sweep(f)
    by_mode = {pt.raw["checkpoint"]["mode"]: pt.raw["checkpoint"] for pt in sw.points}
    assert "tiers" not in by_mode["blocking"] and "tiers" in by_mode["tiered"]
