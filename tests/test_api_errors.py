"""The public API checks its parameters at the boundary (issue 27): a misuse (a wrong type, NaN or
inf, a number out of range, a bool for a number, an unknown name, two parameters setting one key)
raises a one-line :class:`cprsim.ParameterError` (an InputError) naming the parameter and what it
takes, before any work is done, never a bare TypeError, KeyError or ValueError nor a silent
default; valid calls behave as before."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from cprsim import (
    InputError,
    ParameterError,
    Runs,
    Sweep,
    checkpoint_costs,
    fit,
    load_scenario,
    plan,
    pls_bound,
    read_trace,
    run_calibration,
    simulate,
)

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT / "traces" / "examples" / "weibull-64.csv"
NAN, INF = math.nan, math.inf
#: durations in hours a fit takes (two families converge on them)
HOURS = [1.0, 2.5, 3.0, 4.5, 7.0, 9.0]


@pytest.fixture(scope="module")
def ctx() -> SimpleNamespace:
    """``ctx.s``: the toy scenario with 2 replications; ``ctx.runs``: its 2 replications."""
    s = load_scenario("toy", replications=2)
    return SimpleNamespace(s=s, runs=simulate(s))


#: (id, call(ctx), the parameter its error names)
MISUSES: list[tuple[str, Callable[[Any], Any], str]] = [
    # -- the reproductions
    ("pls_bound unknown strategy", lambda c: pls_bound(0.001, "nope"), "strategy"),
    ("plan search_replications=0", lambda c: plan(c.s, 0.001, search_replications=0), "search_replications"),
    ("simulate min_replications=nan", lambda c: simulate(c.s, 2, precision=0.1, min_replications=NAN), "min_replications"),
    ("fit bootstrap=-1", lambda c: fit(HOURS, bootstrap=-1), "bootstrap"),
    ("load_scenario set and cluster=", lambda c: load_scenario("toy", set={"cluster.trainers": 4}, cluster={"trainers": 5}), "overrides"),
    ("simulate first='0'", lambda c: simulate(c.s, 2, first="0"), "first"),
    ("fit unknown family", lambda c: fit(HOURS, families=["nope"], bootstrap=0), "families"),
    # -- load_scenario
    ("load_scenario name_or_path int", lambda c: load_scenario(3), "name_or_path"),
    ("load_scenario set int", lambda c: load_scenario("toy", set=3), "set"),
    ("load_scenario set non-str keys", lambda c: load_scenario("toy", set={1: 2}), "set"),
    ("load_scenario strategy int", lambda c: load_scenario("toy", strategy=3), "strategy"),
    ("load_scenario unknown strategy", lambda c: load_scenario("toy", strategy="nope"), "strategy"),
    ("load_scenario interval_h str", lambda c: load_scenario("toy", interval_h="1"), "interval_h"),
    ("load_scenario interval_h nan", lambda c: load_scenario("toy", interval_h=NAN), "interval_h"),
    ("load_scenario interval_h inf", lambda c: load_scenario("toy", interval_h=INF), "interval_h"),
    ("load_scenario interval_h bool", lambda c: load_scenario("toy", interval_h=True), "interval_h"),
    ("load_scenario interval_h 0", lambda c: load_scenario("toy", interval_h=0), "interval_h"),
    ("load_scenario replications 0", lambda c: load_scenario("toy", replications=0), "replications"),
    ("load_scenario replications float", lambda c: load_scenario("toy", replications=2.0), "replications"),
    ("load_scenario seed -1", lambda c: load_scenario("toy", seed=-1), "seed"),
    ("load_scenario model int", lambda c: load_scenario("toy", model=3), "model"),
    ("load_scenario set and kwarg, one key", lambda c: load_scenario("toy", set={"cluster.trainers": 4}, cluster__trainers=5), "overrides"),
    ("load_scenario two kwargs, one key", lambda c: load_scenario("toy", cluster={"trainers": 4}, cluster__trainers=5), "overrides"),
    ("load_scenario set and interval_h", lambda c: load_scenario("toy", set={"checkpoint.interval_h": 4}, interval_h=2), "interval_h"),
    ("load_scenario set and seed", lambda c: load_scenario("toy", set=["seed=1"], seed=2), "seed"),
    ("load_scenario set and strategy table", lambda c: load_scenario("toy", set={"strategy.top_fraction": 0.05}, strategy={"name": "mfu"}), "strategy"),
    ("load_scenario set table and strategy", lambda c: load_scenario("toy", set={"strategy": {"name": "mfu"}}, strategy="ssu"), "strategy"),
    ("checkpoint_costs scenario int", lambda c: checkpoint_costs(3), "scenario"),
    # -- simulate and Runs
    ("simulate scenario int", lambda c: simulate(3, 2), "scenario"),
    ("simulate replications 0", lambda c: simulate(c.s, 0), "replications"),
    ("simulate replications nan", lambda c: simulate(c.s, NAN), "replications"),
    ("simulate replications 2.5", lambda c: simulate(c.s, 2.5), "replications"),
    ("simulate replications bool", lambda c: simulate(c.s, True), "replications"),
    ("simulate seed str", lambda c: simulate(c.s, 2, seed="1"), "seed"),
    ("simulate seed -1", lambda c: simulate(c.s, 2, seed=-1), "seed"),
    ("simulate first nan", lambda c: simulate(c.s, 2, first=NAN), "first"),
    ("simulate first -1", lambda c: simulate(c.s, 2, first=-1), "first"),
    ("simulate first bool", lambda c: simulate(c.s, 2, first=True), "first"),
    ("simulate precision -1", lambda c: simulate(c.s, 2, precision=-1), "precision"),
    ("simulate precision inf", lambda c: simulate(c.s, 2, precision=INF), "precision"),
    ("simulate min_replications 1", lambda c: simulate(c.s, 2, precision=0.1, min_replications=1), "min_replications"),
    ("simulate precision_metric", lambda c: simulate(c.s, 2, precision=0.1, precision_metric="nope"), "precision_metric"),
    ("simulate record str", lambda c: simulate(c.s, 2, record="yes"), "record"),
    ("simulate force int", lambda c: simulate(c.s, 2, force=2), "force"),
    ("simulate max_events str", lambda c: simulate(c.s, 2, max_events="1e7"), "max_events"),
    ("simulate max_events nan", lambda c: simulate(c.s, 2, max_events=NAN), "max_events"),
    ("simulate max_events 0", lambda c: simulate(c.s, 2, max_events=0), "max_events"),
    ("simulate progress int", lambda c: simulate(c.s, 2, progress=3), "progress"),
    ("Runs.timeline str", lambda c: c.runs.timeline("1"), "replication"),
    ("Runs.timeline -1", lambda c: c.runs.timeline(-1), "replication"),
    ("Runs.save int", lambda c: c.runs.save(3), "folder"),
    # -- plan
    ("plan scenario int", lambda c: plan(3, 0.001), "scenario"),
    ("plan max_accuracy_loss nan", lambda c: plan(c.s, NAN), "max_accuracy_loss"),
    ("plan max_accuracy_loss 0.7", lambda c: plan(c.s, 0.7), "max_accuracy_loss"),
    ("plan max_accuracy_loss str", lambda c: plan(c.s, "0.001"), "max_accuracy_loss"),
    ("plan metric", lambda c: plan(c.s, 0.001, "acc"), "metric"),
    ("plan strategies int", lambda c: plan(c.s, 0.001, strategies=3), "strategies"),
    ("plan unknown strategy", lambda c: plan(c.s, 0.001, strategies=("partial", "nope")), "strategies"),
    ("plan confidence nan", lambda c: plan(c.s, 0.001, confidence=NAN), "confidence"),
    ("plan confidence 1", lambda c: plan(c.s, 0.001, confidence=1), "confidence"),
    ("plan objective", lambda c: plan(c.s, 0.001, objective="p50"), "objective"),
    ("plan max_checkpoint_age_h str", lambda c: plan(c.s, 0.001, max_checkpoint_age_h="1"), "max_checkpoint_age_h"),
    ("plan replications 0", lambda c: plan(c.s, 0.001, replications=0), "replications"),
    ("plan replications nan", lambda c: plan(c.s, 0.001, replications=NAN), "replications"),
    ("plan search_replications bool", lambda c: plan(c.s, 0.001, search_replications=True), "search_replications"),
    ("plan precision 1", lambda c: plan(c.s, 0.001, precision=1.0), "precision"),
    ("plan calibration int", lambda c: plan(c.s, 0.001, calibration=3), "calibration"),
    ("plan allow_extrapolation str", lambda c: plan(c.s, 0.001, allow_extrapolation="yes"), "allow_extrapolation"),
    ("plan allow_no_full_checkpoint None", lambda c: plan(c.s, 0.001, allow_no_full_checkpoint=None), "allow_no_full_checkpoint"),
    ("plan progress str", lambda c: plan(c.s, 0.001, progress="bar"), "progress"),
    ("plan sensitivity negative", lambda c: plan(c.s, 0.001, sensitivity=[2, -1]), "sensitivity"),
    ("plan sensitivity str", lambda c: plan(c.s, 0.001, sensitivity="2,4"), "sensitivity"),
    ("plan model_rows 0", lambda c: plan(c.s, 0.001, model_rows=0), "model_rows"),
    ("plan loss_scale inf", lambda c: plan(c.s, 0.001, loss_scale=INF), "loss_scale"),
    ("plan checkpoint_modes int", lambda c: plan(c.s, 0.001, checkpoint_modes=3), "checkpoint_modes"),
    ("plan unknown checkpoint mode", lambda c: plan(c.s, 0.001, checkpoint_modes="nope"), "checkpoint_modes"),
    ("plan max_extra_memory -1", lambda c: plan(c.s, 0.001, max_extra_memory=-1), "max_extra_memory"),
    # -- pls_bound
    ("pls_bound strategy int", lambda c: pls_bound(0.001, 3), "strategy"),
    ("pls_bound max_accuracy_loss bool", lambda c: pls_bound(True), "max_accuracy_loss"),
    ("pls_bound max_accuracy_loss nan", lambda c: pls_bound(NAN), "max_accuracy_loss"),
    ("pls_bound metric", lambda c: pls_bound(0.001, metric="acc"), "metric"),
    ("pls_bound calibration int", lambda c: pls_bound(0.001, calibration=3), "calibration"),
    ("pls_bound confidence nan", lambda c: pls_bound(0.001, confidence=NAN), "confidence"),
    ("pls_bound confidence bool", lambda c: pls_bound(0.001, confidence=True), "confidence"),
    ("pls_bound loss_scale 0", lambda c: pls_bound(0.001, loss_scale=0), "loss_scale"),
    # -- run_calibration (checked before torch is imported)
    ("run_calibration out int", lambda c: run_calibration(3), "out"),
    ("run_calibration jobs 0", lambda c: run_calibration("o", jobs=0), "jobs"),
    ("run_calibration threads float", lambda c: run_calibration("o", threads=1.5), "threads"),
    ("run_calibration resume str", lambda c: run_calibration("o", resume="no"), "resume"),
    ("run_calibration progress int", lambda c: run_calibration("o", progress=1), "progress"),
    # -- Sweep
    ("Sweep scenario int", lambda c: Sweep(3), "scenario"),
    ("Sweep grid list", lambda c: Sweep("toy", [1]), "grid"),
    ("Sweep strategies str", lambda c: Sweep("toy", strategies="partial"), "strategies"),
    ("Sweep unknown strategy", lambda c: Sweep("toy", strategies=["full", "nope"]), "strategies"),
    ("Sweep unknown strategy table", lambda c: Sweep("toy", strategies=[{"name": "nope"}]), "strategies"),
    ("Sweep set int", lambda c: Sweep("toy", set=3), "set"),
    ("Sweep replications 0", lambda c: Sweep("toy", replications=0), "replications"),
    ("Sweep seed str", lambda c: Sweep("toy", seed="1"), "seed"),
    ("Sweep name int", lambda c: Sweep("toy", name=3), "name"),
    ("Sweep description None", lambda c: Sweep("toy", description=None), "description"),
    ("Sweep precision str", lambda c: Sweep("toy", precision="0.1"), "precision"),
    ("Sweep min_replications nan", lambda c: Sweep("toy", precision=0.1, min_replications=NAN), "min_replications"),
    ("Sweep precision_metric", lambda c: Sweep("toy", precision=0.1, precision_metric="nope"), "precision_metric"),
    ("Sweep plan list", lambda c: Sweep("toy", plan=[0.001]), "plan"),
    ("Sweep max_events str", lambda c: Sweep("toy", max_events="1e7"), "max_events"),
    ("Sweep.run jobs 0", lambda c: Sweep("toy", replications=2).run(jobs=0), "jobs"),
    ("Sweep.run jobs str", lambda c: Sweep("toy", replications=2).run(jobs="2"), "jobs"),
    ("Sweep.run resume without out", lambda c: Sweep("toy", replications=2).run(resume=True), "resume"),
    ("Sweep.run out int", lambda c: Sweep("toy", replications=2).run(3), "out"),
    ("Sweep.run dask_local 0", lambda c: Sweep("toy", replications=2).run(dask_local=0), "dask_local"),
    ("Sweep.run scheduler int", lambda c: Sweep("toy", replications=2).run(scheduler=8786), "scheduler"),
    ("Sweep.save int", lambda c: Sweep("toy", replications=2).save(3), "folder"),
    # -- read_trace and fit
    ("read_trace path int", lambda c: read_trace(3), "path"),
    ("read_trace format", lambda c: read_trace(TRACE, "nope"), "format"),
    ("read_trace filters int", lambda c: read_trace(TRACE, filters=3), "filters"),
    ("read_trace filter value int", lambda c: read_trace(TRACE, filters={"node": 3}), "filters"),
    ("read_trace node_count 0", lambda c: read_trace(TRACE, "infinitehbd", node_count=0), "node_count"),
    ("fit families str", lambda c: fit(HOURS, families="nope", bootstrap=0), "families"),
    ("fit families empty", lambda c: fit(HOURS, families=[], bootstrap=0), "families"),
    ("fit families int", lambda c: fit(HOURS, families=3, bootstrap=0), "families"),
    ("fit bootstrap nan", lambda c: fit(HOURS, bootstrap=NAN), "bootstrap"),
    ("fit bootstrap str", lambda c: fit(HOURS, bootstrap="9"), "bootstrap"),
    ("fit seed str", lambda c: fit(HOURS, bootstrap=0, seed="1"), "seed"),
    ("fit seed -1", lambda c: fit(HOURS, bootstrap=0, seed=-1), "seed"),
    ("fit data strings", lambda c: fit(["a", "b"], bootstrap=0), "data"),
    ("fit data nan", lambda c: fit([1.0, NAN, 3.0], bootstrap=0), "data"),
    ("fit data negative", lambda c: fit([1.0, -2.0, 3.0], bootstrap=0), "data"),
    ("fit observed of another length", lambda c: fit(HOURS, [True, False], bootstrap=0), "observed"),
    ("fit observed with a log", lambda c: fit(TRACE, [True], bootstrap=0), "observed"),
    ("fit observed with a Trace", lambda c: fit(read_trace(TRACE), [True], bootstrap=0), "observed"),
    ("fit format", lambda c: fit(TRACE, format="nope", bootstrap=0), "format"),
    ("fit interarrival", lambda c: fit(TRACE, interarrival="nope", bootstrap=0), "interarrival"),
    ("fit node_type int", lambda c: fit(TRACE, node_type=1, bootstrap=0), "node_type"),
    ("fit node_count str", lambda c: fit(TRACE, node_count="4", bootstrap=0), "node_count"),
    ("fit progress int", lambda c: fit(HOURS, bootstrap=0, progress=1), "progress"),
]  # fmt: skip


@pytest.mark.parametrize("call, param", [m[1:] for m in MISUSES], ids=[m[0] for m in MISUSES])
def test_a_misuse_is_a_one_line_error_naming_the_parameter(
    ctx: SimpleNamespace, call: Callable[[Any], Any], param: str
) -> None:
    with pytest.raises(InputError) as e:
        call(ctx)
    assert isinstance(e.value, ParameterError) and e.value.param == param, repr(e.value)
    message = str(e.value)
    assert param in message and "\n" not in message and "--" not in message, message


def test_an_error_says_what_was_expected_and_what_came() -> None:
    """The messages of the issue's reproductions, in full."""
    cases: list[tuple[Callable[[], Any], str]] = [
        (lambda: simulate("toy", 2, first="0"), "first: must be a whole number >= 0, got '0'"),
        (
            lambda: simulate("toy", 2, precision=0.1, min_replications=NAN),
            "min_replications: must be a whole number >= 2, got nan",
        ),
        (
            lambda: plan("toy", 0.001, search_replications=0),
            "search_replications: must be a whole number >= 1, or None, got 0",
        ),
        (lambda: fit(HOURS, bootstrap=-1), "bootstrap: must be a whole number >= 0, or None, got -1"),
        (
            lambda: fit(HOURS, families=["nope"]),
            "families: must be one of exponential, weibull, gamma, lognormal, loglogistic, "
            "got 'nope'",
        ),
        (
            lambda: load_scenario("toy", set={"cluster.trainers": 4}, cluster={"trainers": 5}),
            "overrides cluster: cluster.trainers is set by `set` too: give each key in one place",
        ),
        (
            lambda: load_scenario("toy", set={"checkpoint.interval_h": 4}, interval_h=2),
            "interval_h: checkpoint.interval_h is set by `set` too: give each key in one place",
        ),
        (lambda: plan("toy", 0.001, confidence=1), "confidence: must be a number in [0.5, 1), or None, got 1"),
        (lambda: simulate(3), "scenario: must be a built-in scenario's name, a TOML file's path or a Scenario, got 3"),
    ]  # fmt: skip
    for call, message in cases:
        with pytest.raises(ParameterError) as e:
            call()
        assert str(e.value) == message
    with pytest.raises(ParameterError) as e:
        pls_bound(0.001, "nope")
    assert str(e.value).startswith("strategy: unknown strategy 'nope' (known: ")
    assert "partial" in str(e.value) and "full" in str(e.value)
    with pytest.raises(ParameterError) as e:  # a long value is shown by its type
        fit([[1.0] * 40, ["x"] * 40])
    assert str(e.value) == (
        "data: must be a failure log's path, a Trace or durations in hours, got a list"
    )


def test_unknown_calibration_preset_and_field_name_the_parameter() -> None:
    pytest.importorskip("torch")
    with pytest.raises(ParameterError) as e:
        run_calibration("o", "nope")
    assert e.value.param == "preset" and str(e.value).startswith("preset: must be one of quick")
    with pytest.raises(ParameterError) as e:
        run_calibration("o", bogus=1)
    assert (e.value.param, e.value.key) == ("changes", "bogus")
    assert str(e.value).startswith("changes bogus: not a field of the preset (fields: ")


@pytest.mark.slow
def test_plan_scenario_for_names_its_parameters() -> None:
    p = plan(
        "toy",
        0.001,
        confidence=None,
        replications=4,
        search_replications=4,
        strategies="partial",
        precision=None,
    )
    assert p.scenario_for().strategy.name == p.recommended_option.strategy
    for call, param in (
        (lambda: p.scenario_for("nope"), "label"),
        (lambda: p.scenario_for(scenario="toy"), "scenario"),
        (lambda: type(p)._of(p).scenario_for(), "scenario"),  # a plan without its scenario
    ):
        with pytest.raises(ParameterError) as e:
            call()
        assert e.value.param == param and "\n" not in str(e.value)


# -- valid calls behave as before -------------------------------------------------------------------
def test_keys_set_in_different_places_that_do_not_overlap_are_fine() -> None:
    s = load_scenario(
        "toy", set={"cluster.trainers": 4}, storage__write_gbps=2.0, interval_h=2, seed=np.int64(9)
    )
    assert (s.cluster.trainers, s.storage.write_gbps, s.checkpoint.interval_h, s.seed) == (
        4,
        2.0,
        2.0,
        9,
    )
    # a strategy's name beside its parameters; a table and then a key inside it, in one `set`
    for s in (
        load_scenario("toy", set={"strategy.top_fraction": 0.05}, strategy="mfu"),
        load_scenario("toy", set={"strategy": {"name": "mfu"}, "strategy.top_fraction": 0.05}),
        load_scenario("toy", set=iter(["strategy.name='mfu'", "strategy.top_fraction=0.05"])),
    ):
        assert s.strategy.name == "mfu" and s.strategy.params["top_fraction"] == 0.05
    assert load_scenario("toy", interval_h=1).checkpoint.interval_h == 1.0


def test_numpy_numbers_and_bools_are_numbers_and_bools(ctx: SimpleNamespace) -> None:
    runs = simulate(ctx.s, np.int64(2), seed=np.int64(7), first=np.int64(0), record=np.bool_(True))
    assert isinstance(runs, Runs) and runs.results == ctx.runs.results and runs.events
    assert simulate(ctx.s, max_events=INF).results == ctx.runs.results  # no event budget
    assert [r.replication for r in ctx.runs] == [0, 1]
    assert ctx.runs.timeline(np.int64(1))
    assert pls_bound(np.float64(0.001)) == pls_bound(0.001)
    assert pls_bound(0.001, "ecrm", confidence=None) > 0  # any registered strategy


def test_fit_takes_one_family_by_name_and_iterables() -> None:
    one = fit(HOURS, families="weibull", bootstrap=0)
    assert [f.family for f in one.fits] == ["weibull"]
    two = fit(np.array(HOURS), families=(f for f in ("weibull", "gamma")), bootstrap=0)
    assert {f.family for f in two.fits} <= {"weibull", "gamma"} and two.fits


def test_a_sweep_takes_iterables_of_strategies_and_overrides() -> None:
    sw = Sweep(
        "toy",
        {"checkpoint.interval_h": (0.5, 1.0)},
        strategies=(x for x in ("full", "partial")),
        set=iter(["cluster.trainers=3"]),
        replications=2,
    )
    listed = Sweep(
        "toy",
        {"checkpoint.interval_h": [0.5, 1.0]},
        strategies=["full", "partial"],
        set={"cluster.trainers": 3},
        replications=2,
    )
    assert len(sw) == 4 and sw.fingerprint == listed.fingerprint
