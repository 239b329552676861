"""The engine's shortcuts through SimPy (``cprsim/sim/simpy_adapter.py``) against SimPy's own
behaviour, on the pinned version range; and no module but the adapter touching SimPy's private
state (issue 28)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import simpy

from cprsim.sim.simpy_adapter import SUPPORTED, Env

ROOT = Path(__file__).resolve().parents[1]


def test_the_installed_simpy_is_in_the_pinned_range():
    major, minor = (int(x) for x in simpy.__version__.split(".")[:2])
    lo, hi = SUPPORTED
    assert lo <= (major, minor) < hi, simpy.__version__
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    pin = next(d for d in deps if d.startswith("simpy"))
    assert pin.replace(" ", "") == f"simpy>={lo[0]}.{lo[1]},<{hi[0]}.{hi[1]}", pin


def _order(env: simpy.Environment, events: list[tuple[str, simpy.Event]]) -> list[str]:
    seen: list[str] = []
    for name, ev in events:
        ev.callbacks.append(lambda _e, n=name: seen.append(f"{n}@{env.now:g}"))
    env.run()
    return seen


def test_urgent_comes_before_a_normal_timeout_of_the_same_time():
    env = Env()
    normal = env.timeout(5)  # scheduled first
    urgent = env.urgent(5)
    assert _order(env, [("normal", normal), ("urgent", urgent)]) == ["urgent@5", "normal@5"]
    assert urgent.ok and urgent.value is None


def test_urgent_at_fires_at_exactly_t():
    env = Env()
    env.run(until=1.1)
    t = 6.8
    assert env.now + (t - env.now) != t  # the float case urgent_at exists for
    ev = env.urgent_at(t)
    seen: list[float] = []
    ev.callbacks.append(lambda _e: seen.append(env.now))
    env.run()
    assert seen == [t]


def test_fire_triggers_a_pending_event_urgently():
    """The waiter resumes before a NORMAL timeout of the same time scheduled earlier (an
    ``Event.succeed`` would come after it), with the value None."""
    env = Env()
    pending = env.event()
    order: list[tuple[str, object]] = []

    def waiter():
        value = yield pending
        order.append(("waiter", value))

    env.process(waiter())
    env.run(until=1.0)  # the process starts and waits
    env.timeout(0).callbacks.append(lambda _e: order.append(("normal", None)))
    env.fire(pending)
    env.run()
    assert order == [("waiter", None), ("normal", None)]


def test_skip_to_moves_the_clock_only_when_nothing_is_due_before():
    env = Env()
    assert env.skip_to(3.0) and env.now == 3.0  # an empty queue
    env.timeout(2.0)  # due at 5
    assert env.skip_to(4.5) and env.now == 4.5
    assert not env.skip_to(5.0) and env.now == 4.5  # a tie: the event first
    assert not env.skip_to(6.0) and env.now == 4.5
    env.run()
    assert env.now == 5.0


def test_only_the_adapter_touches_simpys_private_state():
    private = re.compile(r"\b(?!self\b)\w+\.(_now|_queue|_eid|_ok|_value|_defused|_processing)\b")
    offenders = [
        f"{p.relative_to(ROOT)}:{i}"
        for p in sorted((ROOT / "cprsim").rglob("*.py"))
        if p.name != "simpy_adapter.py"
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if private.search(line)
    ]
    assert not offenders, offenders
    adapter = (ROOT / "cprsim/sim/simpy_adapter.py").read_text()
    assert private.search(adapter)  # the pattern finds what it looks for
