"""Planning a dense model (no embedding shards: nothing loses updates) gives only the notes that
concern the options considered (issue 25, item 4): no accuracy-model or calibration notes, no
full-checkpoint interval for partial options that are not planned, one line for the partial-
recovery strategies left out, and a recommendation that says why."""

from __future__ import annotations

from pathlib import Path

import pytest

from cprsim import scenario as sc
from cprsim.errors import InputError
from cprsim.planner import make_plan

TOY = Path(sc.__file__).parent / "scenarios" / "toy.toml"


def _dense(tmp_path: Path) -> sc.Scenario:
    text = TOY.read_text().replace('name = "toy"', 'name = "dense-toy"')
    text = text.replace("embedding_servers = 4", "embedding_servers = 0")
    text = text.replace("embedding_gb = 10.0", "embedding_gb = 0.0")
    text = text.split("[failures.embedding]")[0]  # no embedding nodes to fail
    path = tmp_path / "dense-toy.toml"
    path.write_text(text)
    return sc.load(str(path))


@pytest.mark.slow
def test_a_dense_plan_says_only_what_concerns_its_options(tmp_path):
    s = _dense(tmp_path)
    assert s.cluster.embedding_servers == 0
    plan = make_plan(s, 0.001, replications=40, search_replications=40, confidence=None)
    notes = " | ".join(plan.notes)
    assert "accuracy model" not in notes and "calibration" not in notes
    assert "partial-recovery options keep a full checkpoint" not in notes
    left_out = [n for n in plan.notes if "not planned" in n]
    assert len(left_out) == 1 and "CPR-vanilla, CPR-MFU, CPR-SSU" in left_out[0]
    assert all(o.strategy == "full" for o in plan.options)
    assert "the model has no embedding shards: no option loses updates" in plan.message
    # the same scenario with embedding shards keeps its accuracy and full-interval notes
    toy = make_plan(sc.load("toy"), 0.001, replications=40, search_replications=40, confidence=None)
    toy_notes = " | ".join(toy.notes)
    assert "accuracy model" in toy_notes
    assert "partial-recovery options keep a full checkpoint" in toy_notes
    assert not any("not planned" in n for n in toy.notes)


def test_a_dense_model_plans_without_an_accuracy_bound(tmp_path):
    """No option of a dense model loses updates: `cprsim plan` needs no --max-accuracy-loss (the
    plan's bound is NaN, JSON null, and the headline says why), while a model with embedding
    shards still needs one (a usage error naming the option, before anything is simulated)."""
    import json

    from click.testing import CliRunner

    from cprsim.cli import main

    s = _dense(tmp_path)
    plan = make_plan(s, None, replications=40, search_replications=40, confidence=None)
    assert plan.accuracy_bound != plan.accuracy_bound  # NaN
    assert all(o.strategy == "full" for o in plan.options)
    path = tmp_path / "dense-toy.toml"
    args = ["plan", str(path), "-n", "40", "--search-replications", "40", "--confidence", "mean"]
    r = CliRunner().invoke(main, [*args, "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["accuracy_bound"] is None and d["recommended"].startswith("full")
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    assert "a dense model: no option loses updates" in " ".join(r.output.split())
    r = CliRunner().invoke(main, ["plan", "toy", "-n", "40"])
    assert r.exit_code == 2 and "--max-accuracy-loss" in r.output and "embedding shards" in r.output
    with pytest.raises(InputError, match="accuracy bound is needed"):
        make_plan(sc.load("toy"), None)
