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
from cprsim.errors import ParameterError
from cprsim.plan import _modes, make_plan

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
    # the baseline is the scenario's own mode when listed: two-phase first changes no label of it
    plain = make_plan(
        sc.load(str(path)),
        None,
        replications=40,
        search_replications=40,
        confidence=None,
        checkpoint_modes=["two-phase", "blocking"],
    )
    assert {o.label for o in plain.options} >= {"full (Daly)", "full (Daly), two-phase"}


def test_setting_a_tiered_scenarios_mode_drops_its_tiers():
    llm = sc.load("llm-16k-gpus")
    assert llm.checkpoint.mode == "tiered" and llm.checkpoint.tiers is not None
    s = sc.load("llm-16k-gpus", {"checkpoint.mode": "blocking"})
    assert s.checkpoint.mode == "blocking" and s.checkpoint.tiers is None
    r = CliRunner().invoke(main, ["show", "llm-16k-gpus", "--set", "checkpoint.mode=two-phase"])
    assert r.exit_code == 0 and "\n[checkpoint.tiers]\n" not in r.output
