"""The planner charges memory (issue 26): each option records the memory it adds to the embedding
tables (ECRM's parity, m/k), the table and the recommendation show it, and ``max_extra_memory``
(``cprsim plan --max-extra-memory``) leaves out the variants above it, so that options are
compared on the same hardware."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
from click.testing import CliRunner
from scenario_builder import GONE, small

from cprsim import scenario as sc
from cprsim.cli import main
from cprsim.errors import InputError
from cprsim.planner import make_plan
from cprsim.planner.records import Option
from cprsim.planner.report import recommend
from cprsim.registry import extra_memory
from cprsim.sim import strategies
from cprsim.sim.replicate import estimate

import planner_helpers

#: 8 embedding servers whose failures take 2 random servers at once: a 4 + 1 stripe often loses
#: both, so ECRM's cheapest variants carry more parity
PAIRS = small(
    checkpoint=GONE,
    name="mem",
    seed=4,
    replications=30,
    cluster={"embedding_servers": 8, "embedding_gb": 40.0, "dense_gb": 0.4},
    job={"duration_h": 20.0, "samples_per_s": 10000.0},
    reschedule={"mean_s": 120.0},
    failures={
        "domains": [
            {
                "name": "pair",
                "node_type": "embedding",
                "nodes": 2,
                "membership": "random",
                "failure": {"family": "exponential", "mtbf_h": 10.0},
            }
        ]
    },
)


@pytest.fixture
def pairs():
    return sc.validate(PAIRS, "t")


def _plan(s, linear_accuracy, **kw):
    return make_plan(
        s,
        0.001,
        calibration=linear_accuracy(),
        replications=10,
        search_replications=20,
        strategies=["ecrm"],
        confidence=None,
        **kw,
    )


def _variants():
    ecrm = strategies.get("ecrm")
    return [(v, v["m"] / v["k"]) for v in ecrm.planning.variants(None)]


def test_each_strategy_says_what_memory_it_adds(pairs):
    ecrm = strategies.get("ecrm")
    for v, need in _variants():
        assert extra_memory(ecrm, pairs, v) == pytest.approx(need)
    assert extra_memory(ecrm, pairs, {"k": 3, "m": 2}) == pytest.approx(2 / 3)
    for name in ("full", "partial", "mfu", "checknrun"):  # checkpoints live in storage
        assert extra_memory(strategies.get(name), pairs, {}) == 0.0
    # what ECRM's note and description say is the same figure
    s = pairs.with_updates({"strategy": {"name": "ecrm", "k": 2, "m": 2, "parity_slowdown": 0.0}})
    from cprsim.costs import costs_of

    assert ecrm.describe(s, costs_of(s))["memory_overhead"] == pytest.approx(1.0)
    assert "100% extra memory" in ecrm.planning.note(s, costs_of(s))


def test_a_hook_that_gives_no_fraction_is_refused(pairs):
    class BadPlanning(strategies.FullPlanning):
        def extra_memory(self, s, params):
            return params["x"]

    class Bad(strategies.Strategy):  # not registered: only its planning part is asked
        name = "bad-memory"
        Planning = BadPlanning

    for x in (-0.1, math.nan, math.inf, True, "0.5"):
        with pytest.raises(ValueError, match="bad-memory"):
            extra_memory(Bad, pairs, {"x": x})
    assert extra_memory(Bad, pairs, {"x": 0.5}) == 0.5


def test_every_option_records_its_extra_memory(pairs, linear_accuracy):
    p = _plan(pairs, linear_accuracy)
    assert p.max_extra_memory is None
    ecrm = [o for o in p.options if o.strategy == "ecrm"]
    assert ecrm
    for o in p.options:
        want = o.params["m"] / o.params["k"] if o.strategy == "ecrm" else 0.0
        assert o.extra_memory == pytest.approx(want)
    d = json.loads(json.dumps(p.as_dict()))
    assert d["max_extra_memory"] is None
    assert [o["extra_memory"] for o in d["options"]] == [o.extra_memory for o in p.options]
    # the headline says how much memory the recommendation takes, and only when it takes some
    rec = p.option(p.recommended)
    assert ("extra memory" in p.message) == (rec.extra_memory > 0)
    if rec.extra_memory > 0:
        assert f"{100 * rec.extra_memory:.3g}% extra memory" in p.message


@pytest.mark.slow
def test_the_limit_leaves_out_the_variants_above_it(pairs, linear_accuracy):
    free = _plan(pairs, linear_accuracy)
    chosen = next(o for o in free.options if o.strategy == "ecrm")
    limit = 0.3
    # the scenario is made so that the limit matters: left alone, ECRM picks more parity
    assert chosen.extra_memory > limit
    p = _plan(pairs, linear_accuracy, max_extra_memory=limit)
    assert p.max_extra_memory == limit and p.as_dict()["max_extra_memory"] == limit
    for o in p.options:
        assert o.extra_memory <= limit
    ecrm = [o for o in p.options if o.strategy == "ecrm"]
    within = [v for v, need in _variants() if need <= limit]
    assert [o.params for o in ecrm] == within  # the one variant within the limit
    over = [(v, need) for v, need in _variants() if need > limit]
    note = next(n for n in p.notes if "max_extra_memory" in n)
    assert "not planned" in note and "30%" in note
    for v, need in over:
        assert f"k={v['k']}, m={v['m']}: {100 * need:.3g}%" in note
    # nothing within the limit: no ECRM option, and the note names every variant
    none = _plan(pairs, linear_accuracy, max_extra_memory=0.0)
    assert all(o.strategy == "full" for o in none.options)
    assert all(o.extra_memory == 0 for o in none.options)
    note = next(n for n in none.notes if "max_extra_memory" in n)
    assert all(f"k={v['k']}, m={v['m']}" in note for v, _ in _variants())


@pytest.mark.parametrize("bad", [-0.1, math.nan, math.inf, "0.5", True])
def test_a_limit_that_is_no_fraction_is_one_line_error(pairs, bad):
    with pytest.raises(InputError) as e:
        make_plan(pairs, 0.001, strategies=["ecrm"], max_extra_memory=bad)
    assert "\n" not in str(e.value) and "extra memory" in str(e.value)
    assert "--" not in str(e.value)  # the library names no command-line option


def test_the_recommendation_states_its_extra_memory():
    e = estimate

    def opt(label, strategy, overhead, memory):
        return Option(
            label,
            strategy,
            3600.0,
            {},
            math.nan,
            0.0,
            e([overhead] * 5),
            e([0.01] * 5),
            e([0.0] * 5),
            0.0,
            True,
            extra_memory=memory,
        )

    full = opt("full (Daly)", "full", 0.10, 0.0)
    for memory in (0.25, 0.0):
        cheap = opt("cheap", "ecrm", 0.02, memory)
        _, rec, _, msg = recommend([full, cheap], 0.001, "auc", "mean")
        assert rec.label == "cheap"
        assert ("25% extra memory" in msg) == (memory > 0)
        assert ("extra memory" in msg) == (memory > 0)


def test_the_table_shows_extra_memory_only_when_an_option_takes_some(pairs, linear_accuracy):
    from cprsim.cli.plan import plan_table

    def header(plan) -> str:
        table, _ = plan_table(plan, 200)
        return " ".join(str(c.header) for c in table.columns)

    p = _plan(pairs, linear_accuracy)
    assert "extra mem" in header(p)
    flat = dataclasses.replace(
        p, options=tuple(dataclasses.replace(o, extra_memory=0.0) for o in p.options)
    )
    assert "extra mem" not in header(flat)


# -- the command -----------------------------------------------------------------------------------
QUICK = [
    *planner_helpers.QUICK,
    "--max-accuracy-loss",
    "0.001",
    "-n",
    "30",
    "--search-replications",
    "30",
]


@pytest.mark.slow
def test_plan_all_shows_ecrms_extra_memory_and_respects_the_limit(tmp_path):
    """``--strategies all --max-extra-memory 0.3``: the table's extra-mem column shows ECRM's 25%
    (the one variant within 30%), a note names the variants left out with the option, and the
    JSON records the limit and each option's extra memory."""
    out = tmp_path / "plan.json"
    r = CliRunner().invoke(
        main,
        [*QUICK, "--strategies", "all", "--max-extra-memory", "0.3", "--out", str(out)],
        env={"COLUMNS": "200"},
    )
    assert r.exit_code == 0, r.output
    d = json.loads(out.read_text())
    assert d["max_extra_memory"] == 0.3
    ecrm = [o for o in d["options"] if o["strategy"] == "ecrm"]
    assert [o["params"] for o in ecrm] == [{"k": 4, "m": 1}]
    assert all(o["extra_memory"] <= 0.3 for o in d["options"])
    assert {o["strategy"] for o in d["options"] if o["extra_memory"] > 0} == {"ecrm"}
    text = " ".join(r.output.split())
    head = next(ln for ln in r.output.splitlines() if "option" in ln and "┃" in ln)
    assert "extra mem" in head
    row = next(ln for ln in r.output.splitlines() if ln.startswith("│ ECRM"))
    assert " 25% " in row
    assert "(--max-extra-memory)" in text and "max_extra_memory" not in text
    assert "k=4, m=2: 50%; k=2, m=2: 100% extra memory" in text


def test_the_limit_must_be_a_finite_fraction(one_line_error):
    for bad in ("-0.5", "nan", "inf", "lots"):
        r = CliRunner().invoke(main, [*QUICK, "--strategies", "ecrm", "--max-extra-memory", bad])
        line = one_line_error(r)
        assert "--max-extra-memory" in line


def test_the_api_and_a_sweeps_plan_pass_the_limit_on(pairs):
    """``cprsim.api.plan(max_extra_memory=)`` and a sweep's ``[plan] max_extra_memory`` reach the
    planner: nothing above the limit is planned."""
    from cprsim import api
    from cprsim.sweep.spec import PlanSpec

    p = api.plan(
        pairs,
        0.001,
        strategies=["ecrm"],
        replications=10,
        search_replications=20,
        confidence=None,
        max_extra_memory=0.0,
    )
    assert p.as_dict()["max_extra_memory"] == 0.0
    assert all(o["extra_memory"] == 0 for o in p.as_dict()["options"])
    assert PlanSpec(max_accuracy_loss=0.001, max_extra_memory=0.25).max_extra_memory == 0.25
    with pytest.raises(ValueError):
        PlanSpec(max_accuracy_loss=0.001, max_extra_memory=-1.0)
