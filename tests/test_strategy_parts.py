"""A strategy in parts (issue 28, item 1): its own random stream, its planning part, its calibration
emulation part.

* **Stream**: a strategy that draws from ``setup.rng``/``run.rng`` (the stochastic test plugin
  tests/plugins/cprsim_jitter.py) gives the same bytes for a sweep at ``--jobs 1`` and ``--jobs 2``
  and on a rerun, as the example plugin does (tests/test_plugin.py); its draws depend on the seed
  and the replication only.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest
from scenario_builder import bare_run
from test_plugin import cprsim, example_site, make_dist, ok

from cprsim import scenario as sc
from cprsim.sim import engine, strategies

JITTER_FILE = Path(__file__).resolve().parent / "plugins" / "cprsim_jitter.py"
JITTER = JITTER_FILE.read_text()


@pytest.fixture
def registered():
    """Register strategies at test time (``load(path, module_name)``); the registry is restored
    after."""
    strategies.ensure_loaded()
    saved = dict(strategies.REGISTRY)
    added: list[str] = []

    def load(path: Path, name: str):
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        added.append(name)
        spec.loader.exec_module(module)
        return module

    yield load
    strategies.REGISTRY.clear()
    strategies.REGISTRY.update(saved)
    for name in added:
        sys.modules.pop(name, None)


# -- the strategy's own random stream ------------------------------------------------------------------
def test_a_strategy_draws_from_its_own_stream_per_replication(registered):
    registered(JITTER_FILE, "cprsim_jitter_parts_test")
    s = sc.load("toy", {"strategy.name": "jitter"})
    full = sc.load("toy", {"strategy.name": "full"})

    def run(s, rep):
        return engine.simulate_one(s, rep)[0]

    a, b, again = run(s, 0), run(s, 1), run(s, 0)
    assert a == again  # the seed and the replication decide the draws
    assert a.save_s != b.save_s  # one stream per replication
    # the draws change the saves' times, and nothing else: the failures are full recovery's
    f = run(full, 0)
    assert a.save_s != f.save_s
    assert (a.failures_trainer, a.failures_embedding) == (f.failures_trainer, f.failures_embedding)
    # a strategy that never draws makes no generator
    r = bare_run(full)
    assert r.setup.stream._rng is None


SWEEP = """
name = "stochastic"
scenario = "toy"
replications = 3
strategies = ["full", "jitter", { name = "jitter", label = "j9", spread = 0.9 }, "compressed"]
[grid]
"checkpoint.interval_h" = [0.25, 0.5]
"""


@pytest.mark.slow
def test_a_stochastic_plugin_sweeps_to_the_same_bytes_whatever_the_workers(tmp_path):
    site = example_site(tmp_path / "site")
    make_dist(site, {"jitter": "cprsim_jitter"}, {"cprsim_jitter": JITTER}, name="cprsim-jitter")
    sweep = tmp_path / "s.toml"
    sweep.write_text(SWEEP)
    outs = {}
    for label, jobs in (("j1", "1"), ("j2", "2"), ("j1-again", "1")):
        outs[label] = tmp_path / label
        ok(cprsim("sweep", sweep, "--jobs", jobs, "--out", outs[label], site=site, cwd=tmp_path))
    rows = (outs["j1"] / "summary.csv").read_text().splitlines()
    assert [row.split(",")[1] for row in rows[1:]] == ["full", "jitter", "j9", "compressed"] * 2
    for name in ("results.csv", "summary.csv"):
        ref = (outs["j1"] / name).read_bytes()
        assert (outs["j2"] / name).read_bytes() == ref, name
        assert (outs["j1-again"] / name).read_bytes() == ref, name


# -- a strategy the calibration measures, added in one module ------------------------------------------
DIRTIEST_FILE = Path(__file__).resolve().parent / "plugins" / "cprsim_dirtiest.py"


@pytest.mark.slow
@pytest.mark.dlrm
def test_a_strategy_added_in_one_module_is_calibrated_end_to_end(registered, tmp_path):
    """The toy strategy (tests/plugins/cprsim_dirtiest.py: its emulation part saves the rows with
    the most unsaved updates) is registered here, emulated by the DLRM calibration beside vanilla
    CPR and MFU, and its points and fit land in calibration.toml; no calibration module knows its
    name."""
    pytest.importorskip("torch")
    import tomllib

    from cprsim import api
    from cprsim.calibrate import emulation

    registered(DIRTIEST_FILE, "cprsim_dirtiest_parts_test")
    assert "dirtiest" in emulation.emulated()
    doc = api.run_calibration(
        tmp_path / "cal",
        "quick",
        measure_costs=False,
        train_samples=8_192,
        test_samples=2_048,
        batch=256,
        seeds=(0, 1),
        budgets=(2.0, 0.125),
        strategies=("partial", "mfu", "dirtiest"),
    )
    saved = tomllib.loads((tmp_path / "cal" / "calibration.toml").read_text())
    for d in (doc, saved):
        pts = d["points"]["dirtiest"]  # columns: one entry per run
        assert sorted(zip(pts["seed"], pts["budget"])) == [
            (0, 0.125),
            (0, 2.0),
            (1, 0.125),
            (1, 2.0),
        ]
        assert "dirtiest" in d["fit"]
    # its saves are its own part's: with one partial save in the run (budget 2) the rows it keeps
    # are not MFU's, and neither is its PLS (its part left out, MFU's would run: the same PLS)
    pls = {
        st: dict(zip(zip(c["seed"], c["budget"]), c["pls"])) for st, c in saved["points"].items()
    }
    assert pls["dirtiest"][(0, 2.0)] != pls["mfu"][(0, 2.0)]
    assert pls["dirtiest"][(0, 2.0)] < pls["partial"][(0, 2.0)]


def test_the_emulator_refuses_a_strategy_without_an_emulation_in_one_line():
    pytest.importorskip("torch")
    from cprsim.calibrate.emulation import emulation_of

    with pytest.raises(
        ValueError,
        match=r"^strategy 'ecrm' has no calibration emulation; the emulator runs partial, mfu, ssu, lookahead$",
    ):
        emulation_of("ecrm")


# -- the planning part -----------------------------------------------------------------------------------
def test_a_strategy_whose_planning_part_lacks_a_member_is_refused_in_one_line(registered):
    """Required members are enforced at registration, never defaulted: a part without
    ``full_interval`` does not get ``tau`` for it (wrong for a strategy whose full saves are every
    4th)."""
    from cprsim.errors import InputError
    from cprsim.sim.planning_parts import (
        OneVariant,
        PartialPlanning,
        RollbackOverhead,
    )

    class EveryFourthPlanning(OneVariant, RollbackOverhead, PartialPlanning):
        rank = 7

        def expected_pls(self, s, params, tau, rates) -> float:
            return 0.01

    class EveryFourth(strategies.Partial):
        name = "every-fourth"
        Planning = EveryFourthPlanning

    with pytest.raises(InputError) as e:
        strategies.register(EveryFourth)
    assert str(e.value) == (
        "strategy 'every-fourth': its planning part "
        "test_a_strategy_whose_planning_part_lacks_a_member_is_refused_in_one_line.<locals>."
        "EveryFourthPlanning lacks full_interval, with_full_interval"
    )
    assert "every-fourth" not in strategies.REGISTRY

    class NoPart(strategies.Strategy):  # no planning part at all: every member is missing
        name = "no-part"

    with pytest.raises(
        InputError, match=r"^strategy 'no-part': its planning part Planning lacks "
    ) as e:
        strategies.register(NoPart)
    assert "\n" not in str(e.value)
    for member in ("expected_overhead", "full_interval", "search", "variants", "kind", "rank"):
        assert member in str(e.value), member
    assert "no-part" not in strategies.REGISTRY


def test_every_registered_strategy_has_a_whole_planning_part_bound_to_it():
    from cprsim.sim.planning_parts import PartialPlanning, RollbackPlanning, missing_members

    strategies.ensure_loaded()
    for name in strategies.builtin_names():
        cls = strategies.get(name)
        assert not missing_members(cls.Planning), name
        assert cls.planning.strategy is cls, name  # SSU's part calls SSU's model, not MFU's
        assert isinstance(cls.planning, PartialPlanning | RollbackPlanning), name
    assert strategies.get("ssu").planning.variants(None)[0]["sample_rate"] == 0.01


# -- no switches on kinds or names where the parts answer ------------------------------------------------
ROOT = Path(__file__).resolve().parents[1]
#: a comparison with a strategy's name (its constant or its literal), or with a planning kind
SWITCH = re.compile(
    r"""(==|!=)\s*(MFU|SSU|LOOKAHEAD|PARTIAL|ECRM|CHECKNRUN|"(mfu|ssu|lookahead|partial|ecrm|checknrun)")"""
    r"""|\b(MFU|SSU|LOOKAHEAD|PARTIAL|ECRM|CHECKNRUN)\s*(==|!=)"""
    r"""|\bin\s*\((MFU|SSU|LOOKAHEAD|PARTIAL)\b|plan_kind"""
)


def switches(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if SWITCH.search(line)]


def test_the_planner_and_the_calibration_ask_the_parts_not_the_names():
    """cprsim/planner and cprsim/calibrate compare no strategy name and no planning kind: the
    strategy's parts answer (full recovery, the planner's baseline, and vanilla CPR, the
    calibration's reference, are roles: ``FULL`` and ``VANILLA``)."""
    found = {
        str(p.relative_to(ROOT)): hits
        for folder in ("cprsim/planner", "cprsim/calibrate")
        for p in sorted((ROOT / folder).rglob("*.py"))
        if (hits := switches(p.read_text()))
    }
    assert found == {}
    # the check can fail: the chains it replaced
    assert switches("        if st == MFU:\n") and switches("if setting.strategy == SSU")
    assert switches('if cls.plan_kind == "pls":') and switches("if st != PARTIAL:")
    assert switches('elif strategy == "lookahead":')
