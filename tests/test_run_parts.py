"""A replication's state is split into parts with one job each (issue 28, item 2).

``Run`` (cprsim.sim.engine) and ``Fleet`` (cprsim.sim.lifecycle) hold and coordinate their parts
(:mod:`cprsim.sim.runparts`; ``Health``, ``Pools``, ``FleetAccounts``); here:

* no class of the run's state has more than :data:`MAX_FIELDS` fields: ``Run``, ``Fleet`` and
  every part reachable from them after a replication (counted from ``__slots__``, or the instance's
  attributes), and a slotted part takes no attribute outside its slots;
* the parts work alone, without a replication (the accounts' totals, the failure bookkeeping, the
  checkpoints, the pools, the fleet's accounts);
* no function of ``cprsim/`` is longer than :data:`MAX_LINES` lines unless a ``# long:
  <reason>`` comment in its signature says why.
"""

from __future__ import annotations

import ast
import math
from pathlib import Path
from typing import Any

import pytest
from scenario_builder import bare_run

from cprsim import scenario as sc
from cprsim.sim import engine
from cprsim.sim.lifecycle import Fleet, FleetAccounts, Health, Pools
from cprsim.sim.runparts import (
    COMPUTE,
    IDLE,
    LOAD,
    Accounts,
    Checkpoints,
    FailureBook,
    Phases,
)
from cprsim.sim.strategies import Strategy

MAX_FIELDS = 20
MAX_LINES = 80
PKG = Path(__file__).resolve().parents[1] / "cprsim"
INF = math.inf


def fields(obj: Any) -> set[str]:
    """The fields of ``obj``: its class's slots (along the MRO), plus its instance attributes."""
    names: set[str] = set()
    for c in type(obj).__mro__:
        slots = c.__dict__.get("__slots__", ())
        names.update((slots,) if isinstance(slots, str) else slots)
    names.update(getattr(obj, "__dict__", {}))
    names.discard("__weakref__")
    names.discard("__dict__")
    return names


def parts(obj: Any, seen: dict[type, Any]) -> None:
    """``obj`` and, recursively, the engine's objects its fields hold (not a strategy: the
    strategies' state is theirs), by class."""
    if type(obj) in seen:
        return
    seen[type(obj)] = obj
    for name in fields(obj):
        value = getattr(obj, name, None)
        mod = type(value).__module__
        if mod.startswith("cprsim.sim.") and not isinstance(value, Strategy | tuple):
            parts(value, seen)


def replicated_run(overrides: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> engine.Run:
    """The ``Run`` of replication 0 of dlrm-spares (a lifecycle) with ``overrides``, once run."""
    made: list[engine.Run] = []
    Run = engine.Run

    def keep(*args: Any, **kwargs: Any) -> engine.Run:
        run = Run(*args, **kwargs)
        made.append(run)
        return run

    monkeypatch.setattr(engine, "Run", keep)
    engine.simulate_one(sc.load("dlrm-spares", overrides), 0, record=True)
    (run,) = made
    return run


CASES = {
    # tiered checkpoints, the compute clock, the lifecycle
    "tiered": {
        "checkpoint.mode": "tiered",
        "failures.clock.trainer": "computing",
        "failures.clock.embedding": "computing",
    },
    # a two-phase persist under way, idle machines that wear
    "two-phase": {
        "checkpoint.mode": "two-phase",
        "failures.clock.trainer": "powered",
        "failures.clock.embedding": "powered",
    },
}


@pytest.mark.parametrize("case", CASES)
def test_no_part_of_a_run_has_more_than_20_fields(case, monkeypatch):
    run = replicated_run(CASES[case], monkeypatch)
    seen: dict[type, Any] = {}
    parts(run, seen)
    names = {c.__name__ for c in seen}
    must = {"Run", "Fleet", "Accounts", "Phases", "FailureBook", "Checkpoints"}
    must |= {"Health", "Pools", "FleetAccounts", "ComputeClock" if case == "tiered" else "Env"}
    assert must <= names, must - names
    if case == "tiered":
        assert "TierState" in names
    for cls, obj in seen.items():
        n = len(fields(obj))
        assert n <= MAX_FIELDS, f"{cls.__name__} has {n} fields (at most {MAX_FIELDS})"


@pytest.mark.parametrize(
    "cls",
    [engine.Run, Fleet, Accounts, Phases, FailureBook, Checkpoints, Health, Pools, FleetAccounts],
)
def test_the_parts_are_slotted(cls):
    """Their fields are their slots: a new one must be declared (and counted above)."""
    assert "__slots__" in cls.__dict__
    assert len(cls.__slots__) <= MAX_FIELDS
    assert not any("__dict__" in c.__dict__.get("__slots__", ()) for c in cls.__mro__)


def test_a_slotted_part_takes_no_other_attribute():
    acct = Accounts()
    with pytest.raises(AttributeError):
        acct.extra = 1  # type: ignore[attr-defined]


def test_the_field_count_sees_a_part_that_grows():
    """The count fails a class with too many fields (the check above can fail)."""

    class Grown:
        __slots__ = tuple(f"f{i}" for i in range(MAX_FIELDS + 1))

    class Loose:
        def __init__(self) -> None:
            for i in range(MAX_FIELDS + 1):
                setattr(self, f"f{i}", i)

    assert len(fields(Grown())) == MAX_FIELDS + 1
    assert len(fields(Loose())) == MAX_FIELDS + 1


# -- the parts alone ---------------------------------------------------------------------------------
def test_the_accounts_make_the_result():
    a = Accounts()
    a.fails_trainer, a.fails_embedding, a.fails_job = 2, 3, 1
    a.count_restore("memory")
    a.count_restore("storage")
    a.count_restore("storage")
    a.count_restore("none")
    assert (a.memory_restores, a.storage_restores) == (1, 2)
    a.save_s, a.load_s, a.lost_s, a.resched_s = 30.0, 20.0, 40.0, 10.0
    a.compute_s, a.checkpoints, a.fail_events = 1090.0, 3, 4
    W, rate = 1000.0, 0.8
    r = a.result(7, 1200.0, W, rate, None, None)
    assert r.replication == 7 and r.wall_s == 1200.0 and r.useful_s == W
    assert r.lost_s == 40.0 / rate  # lost progress at the strategy's rate: its wall time
    assert r.degraded_s == pytest.approx(1090.0 - W - 50.0)
    assert r.overhead == pytest.approx(0.2) and r.ettr == pytest.approx(W / 1200.0)
    assert r.ckpt_overhead == pytest.approx((30.0 + 20.0 + 50.0 + 40.0) / W)
    assert (r.checkpoints, r.failure_events, r.reschedule_s) == (3, 4, 10.0)
    assert (r.failures_trainer, r.failures_embedding, r.failures_job) == (2, 3, 1)
    assert (r.pls, r.unfilled_s, r.machines_retired, r.memory_restores) == (0.0, 0.0, 0, 1)
    a.compute_s = W + 50.0 + 1e-9  # float rounding of the phase sums: no degraded time
    assert a.result(0, 1200.0, W, rate, None, None).degraded_s == 0.0


def test_the_failure_book():
    b = FailureBook(n_trainers=2, job_node=6, sharded=False)
    b.up_at.update({0: 50.0, 3: INF})
    assert b.is_down(0, 10.0) and not b.is_down(0, 50.0) and not b.is_down(1, 10.0)
    assert not b.dense_lost([3], 10.0)  # no trainer among them
    assert not b.dense_lost([0], 10.0)  # trainer 1 still holds the dense parameters
    b.up_at[1] = 60.0
    assert b.dense_lost([1], 10.0) and not b.dense_lost([1], 55.0)
    assert FailureBook(2, 6, sharded=True).dense_lost([0], 10.0)  # its shard had no replica
    # the job waits for 0 and 3 (3 waits for a machine), then 3 is back
    b.stall({0, 3}, 10.0)
    assert b.recovering and b.episode == {0, 3} and b.down == {0: 50.0, 3: INF}
    assert b.back(3, 80.0) and b.up_at[3] == 80.0 and b.down == {0: 50.0, 3: 80.0}
    assert not b.back(4, 90.0) and 4 not in b.down  # the job does not wait for it
    b.stall({1}, 85.0)  # another failure during the wait: it waits for 1 too, until it is back
    assert b.down == {0: 50.0, 3: 80.0, 1: 85.0} and b.episode == {0, 1, 3}


def test_the_phases():
    p = Phases()
    assert p.phase == IDLE and p.compute_elapsed(5.0, 100.0) == 5.0
    p.phase, p.start, p.rate = COMPUTE, 40.0, 0.5
    assert p.compute_elapsed(5.0, 100.0) == 65.0  # the compute phase under way counts
    p.phase = LOAD
    assert p.compute_elapsed(5.0, 100.0) == 5.0


def test_the_checkpoints():
    c = Checkpoints(tau=100.0, tiers=None, slowdown=0.25)
    assert c.next == 100.0 and c.durable == 0.0 and c.pending is None
    c.pending = (100.0, 300.0)  # a persist of progress 100, durable at 300
    # slowed until the persist ends, which is the next change; then neither
    assert c.persist_window(200.0) == (True, 300.0) and c.persist_window(300.0) == (False, INF)
    assert c.persisted(300.0, strict=True) is None  # not at the very instant of a failure
    assert c.persisted(300.0, strict=False) == (100.0, 300.0) and c.pending is None


def test_the_pools():
    p = Pools(n_slots=4, standbys=1, spares=2, crews=1)
    assert list(p.standby) == [4] and list(p.spare) == [5, 6] and not p.short()
    assert p.repair_start(10.0, 100.0) == 10.0  # the one crew is free
    assert p.repair_start(20.0, 50.0) == 110.0  # it waits for the crew
    assert p.in_repair == 2
    p.take_idle(4)
    assert not p.standby and p.short() and p.mgen[4] == 1
    p.waiting.append(0)
    assert not p.stuck()  # spares left, repairs under way
    p.spare.clear()
    p.in_repair = 0
    assert p.stuck()
    assert Pools(4, 0, 0, None).repair_start(5.0, 9.0) == 5.0  # crews without limit


def test_the_fleet_accounts():
    a = FleetAccounts()
    a.slot_failed(3, 100.0, bad=True)
    a.t_detect[3] = 130.0
    a.slot_failed(4, 110.0, bad=False)
    a.t_detect[4] = 115.0
    assert (a.failures_bad, a.unfilled, a.unfilled_since) == (1, 2, 100.0)
    assert a.finish(150.0) == 50.0
    a.t_assign[3] = 200.0
    # the job waits [105, 260] for 3 (back at 260) and 4 (back at 120): 3 is the critical node
    assert a.critical_split({3: 260.0, 4: 120.0}, 105.0, 260.0) == (25.0, 70.0)
    assert a.critical_split({9: 260.0}, 105.0, 260.0) == (0.0, 0.0)  # not the lifecycle's
    a.filled(220.0)
    a.filled(240.0)
    assert a.unfilled == 0 and a.unfilled_s == 140.0 and a.finish(300.0) == 140.0


# -- function length -----------------------------------------------------------------------------------
def long_functions(path: Path) -> list[str]:
    """The functions of ``path`` longer than :data:`MAX_LINES` without a ``# long:`` reason in
    their signature (the lines from ``def`` to the body)."""
    text = path.read_text()
    lines = text.splitlines()
    out = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            n = (node.end_lineno or node.lineno) - node.lineno + 1
            header = lines[node.lineno - 1 : node.body[0].lineno - 1]
            if n > MAX_LINES and not any("# long:" in line for line in header):
                out.append(f"{path.name}:{node.lineno} {node.name} ({n} lines)")
    return out


def test_no_function_is_too_long_without_a_reason():
    paths = sorted(PKG.rglob("*.py"))
    assert {"engine.py", "lifecycle.py", "runparts.py", "api.py", "planner/__init__.py"} <= {
        p.relative_to(PKG).as_posix().removeprefix("sim/") for p in paths
    }
    assert [f"{p.relative_to(PKG)}: {f}" for p in paths for f in long_functions(p)] == []


def test_the_length_check_sees_a_long_function(tmp_path):
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_LINES))
    p = tmp_path / "m.py"
    p.write_text(f"def f():\n{body}\n\ndef g():  # long: a reason\n{body}")
    assert long_functions(p) == [f"m.py:1 f ({MAX_LINES + 1} lines)"]


def test_a_run_rolls_back_through_its_parts():
    """Without a replication: a rollback moves progress, the next checkpoint, a pending persist,
    the accounts and the ledger together; the tier load is taken once."""
    s = sc.load("toy", {"strategy.name": "partial", "checkpoint.mode": "two-phase"})
    run = bare_run(s)
    run.progress = 2.5 * run.tau
    run.commit_full(2.0 * run.tau)
    run.ckpt.pending = (2.5 * run.tau, 1e9)
    run.rollback()
    assert run.progress == 2.0 * run.tau and run.ckpt.next == 3.0 * run.tau
    assert run.ckpt.pending is None and run.acct.lost_s == 0.5 * run.tau
    run.ckpt.tier_load = 7.0
    assert run.take_tier_load(3.0) == 7.0 and run.take_tier_load(3.0) == 3.0
    run.fail((0, 3), (10.0, 20.0))  # no job process: nothing is interrupted
    assert run.up_at == {0: 10.0, 3: 20.0} and run.book.is_down(3, 15.0)
    assert (run.acct.fails_trainer, run.acct.fails_embedding, run.acct.fail_events) == (1, 1, 0)
