"""The engine's shortcuts change nothing: the quiet-phase clock skip gives the same bytes as one
SimPy timeout per phase; ``cprsim --help``'s static command table matches the commands' own help."""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

import pytest

from cprsim import scenario as sc
from cprsim.sim import engine
from cprsim.sim.engine import simulate_one

CASES = [
    ("toy", {"name": "full"}),
    ("toy", {"name": "partial"}),
    ("cpr-production", {"name": "partial"}),
    ("cpr-production", {"name": "mfu"}),
    ("cpr-production", {"name": "ecrm"}),
    ("cpr-production", {"name": "checknrun"}),
    ("infinitehbd-hardware", {"name": "full"}),
    ("dlrm-spares", {"name": "partial"}),  # degraded trainers: a rate that varies
    ("toy", {"name": "mfu"}),
]


@pytest.mark.parametrize("name, strategy", CASES)
def test_quiet_phases_give_the_same_bytes_as_one_event_per_phase(name, strategy, monkeypatch):
    s = sc.load(name).with_updates({"strategy": strategy})
    if name == "toy":  # two-phase saves too
        s2 = s.with_updates({"checkpoint.mode": "two-phase"})
    else:
        s2 = None
    # with the event log and without (only then do whole quiet cycles run in one call:
    # Run._quiet_cycles)
    for scen in filter(None, (s, s2)):
        for rec in (True, False):
            fast = [pickle.dumps(simulate_one(scen, r, record=rec)) for r in range(12)]
            monkeypatch.setattr(engine, "QUIET_PHASES", False)
            slow = [pickle.dumps(simulate_one(scen, r, record=rec)) for r in range(12)]
            monkeypatch.setattr(engine, "QUIET_PHASES", True)
            assert fast == slow


def test_a_steady_rate_is_the_rate_the_strategy_would_give(monkeypatch):
    """Where a strategy says its rate does not vary (``rate_varies``: the engine then computes at
    ``rate`` without asking ``rate_at``), ``rate_at`` would give ``rate`` and no change is due;
    checked at every compute phase of replications with degraded trainers."""
    from cprsim.sim.strategies import Partial

    asked = {"steady": 0, "varies": 0}
    orig = Partial.rate_varies

    def checked(self):
        v = orig(self)
        asked["varies" if v else "steady"] += 1
        if not v:
            # the engine's own view (RunView) is not needed: a steady Partial reads no run state
            now = 0.0
            assert self.rate_at(None, now) == self.rate
            assert self.next_rate_change(None, now) == float("inf")
        return v

    monkeypatch.setattr(Partial, "rate_varies", checked)
    s = sc.load("toy").with_updates({"strategy": {"name": "partial"}})
    degraded = 0.0
    for r in range(8):
        res, _ = simulate_one(s, r)
        degraded += res.degraded_s
    assert degraded > 0 and asked["varies"] > 0 and asked["steady"] > 0


def test_a_rate_from_a_mixin_after_partial_is_not_taken_for_steady(monkeypatch):
    """Partial.rate_varies says "steady" only when no class of the strategy besides Partial and
    Strategy defines a rate: a mixin after Partial that ``super()`` reaches slows training as the
    same rate defined in a subclass does (the same replications, byte for byte)."""
    from cprsim.sim import strategies
    from cprsim.sim.strategies import Partial, PartialParams, Strategy

    class Throttle(Strategy):
        def rate_at(self, run, now):
            return 0.8 * super().rate_at(run, now)

    class MixedIn(Partial, Throttle):
        name = "test-throttled-mixin"
        Params = PartialParams

    class Subclassed(Partial):
        name = "test-throttled-subclass"
        Params = PartialParams

        def rate_at(self, run, now):  # Throttle's rate, then Partial's share: MixedIn's MRO
            r = 0.8 * self.rate
            return r * self._trainer_share(run, now) if self.degraded else r

    monkeypatch.setitem(strategies.REGISTRY, MixedIn.name, MixedIn)
    monkeypatch.setitem(strategies.REGISTRY, Subclassed.name, Subclassed)
    base = sc.load("toy")
    a = [
        simulate_one(base.with_updates({"strategy": {"name": MixedIn.name}}), r)[0]
        for r in range(4)
    ]
    b = [
        simulate_one(base.with_updates({"strategy": {"name": Subclassed.name}}), r)[0]
        for r in range(4)
    ]
    plain = [
        simulate_one(base.with_updates({"strategy": {"name": "partial"}}), r)[0] for r in range(4)
    ]
    assert [x.wall_s for x in a] == [x.wall_s for x in b]
    assert all(x.wall_s > y.wall_s for x, y in zip(a, plain))  # slower than plain partial


def test_the_static_command_table_matches_each_commands_help():
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    try:
        import startup
    finally:
        sys.path.pop(0)
    assert startup.summaries_match() == []


def test_a_replication_processes_no_event_for_nobody(monkeypatch):
    """The timeout of a phase a failure cut short stays queued (SimPy cannot cancel it); the job
    abandons it, so the quiet phases pass over it and SimPy never processes it. cpr-production
    then costs two SimPy events per failure (the failure, its interrupt of the job) plus the two
    processes' starts and the job's end, whatever its checkpoints and recoveries."""
    import simpy

    processed: list[bool] = []  # per event SimPy processes: did anything wait for it
    step = simpy.Environment.step

    def counted(env):
        processed.append(bool(env._queue[0][3].callbacks))
        return step(env)

    monkeypatch.setattr(simpy.Environment, "step", counted)
    s = sc.load("cpr-production")
    failures = 0
    for r in range(10):
        processed.clear()
        res, _ = simulate_one(s, r)
        assert all(processed)
        assert len(processed) == 2 * res.failure_events + 3
        failures += res.failure_events
    assert failures > 20  # failures in most replications
