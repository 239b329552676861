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


def _interrupted_job(env: Env, abandon: bool, log: list[str]):
    """A process that waits 10 s, is interrupted at 2 s, then waits 1 s more phases (skipping the
    clock where ``skip_to`` lets it, as the engine's quiet phases do)."""

    def job():
        try:
            yield env.timeout(10.0)  # due at 10: the interrupt cuts it short
        except simpy.Interrupt:
            if abandon:
                env.abandon_wait(proc)
            log.append(f"interrupted@{env.now:g}")
        for _ in range(12):
            if not env.skip_to(env.now + 1.0):
                yield env.timeout(1.0)
            log.append(f"{env.now:g}")

    proc = env.process(job())

    def failure():
        yield env.timeout(2.0)
        proc.interrupt()

    env.process(failure())
    return proc


def test_abandon_wait_lets_skip_to_pass_the_interrupted_timeout():
    """The same clock and log as SimPy processing the interrupted job's timeout for nobody at 10,
    without going through SimPy for the phases up to it; the timeout leaves the queue."""
    steps = {}
    logs = {}
    for abandon in (False, True):
        env, log = Env(), []
        _interrupted_job(env, abandon, log)
        n = 0
        while env.peek() < float("inf"):
            env.step()
            n += 1
        steps[abandon], logs[abandon] = n, log
        assert env.now == 14.0
    assert logs[True] == logs[False] == ["interrupted@2"] + [f"{t}" for t in range(3, 15)]
    # SimPy alone: the stale timeout at 10, and the phase ending at 10 that could not skip to it
    assert steps[False] - steps[True] == 2


def test_abandon_wait_leaves_alone_what_is_not_a_forgotten_timeout():
    """An untriggered event (nothing queued) and a timeout something else still waits for stay as
    they are: skip_to still stops at the latter."""
    env = Env()
    shared = env.timeout(5.0)
    seen: list[float] = []
    shared.callbacks.append(lambda _e: seen.append(env.now))
    pending = env.event()

    def job(target):
        try:
            yield target
        except simpy.Interrupt:
            env.abandon_wait(proc)
            yield env.timeout(0)

    for target in (shared, pending):
        proc = env.process(job(target))
        env.step()  # the process starts and waits for its target
        proc.interrupt()
        while env.peek() < 5.0:  # the interrupt: the process abandons its target and ends
            env.step()
    assert env.now == 0.0 and env.peek() == 5.0 and not proc.is_alive
    assert not env.skip_to(6.0)  # the shared timeout at 5 is still due
    env.run()
    assert seen == [5.0] and not pending.triggered and not env._abandoned


def test_abandoned_events_processed_by_simpy_are_forgotten():
    """Abandoned timeouts that SimPy processed anyway (nothing skipped past them) do not pile up."""
    from cprsim.sim import simpy_adapter

    env = Env()
    for _ in range(3 * simpy_adapter.ABANDONED_PURGE):
        env.run(until=_interrupted_once(env))
    assert len(env._abandoned) <= simpy_adapter.ABANDONED_PURGE


def _interrupted_once(env: Env) -> simpy.Process:
    """A job interrupted while waiting 1 s, that then waits 2 s through SimPy (no skip): its
    abandoned timeout is processed by SimPy before it ends."""

    def job():
        try:
            yield env.timeout(1.0)
        except simpy.Interrupt:
            env.abandon_wait(proc)
        yield env.timeout(2.0)

    proc = env.process(job())

    def failure():
        yield env.timeout(0.5)
        proc.interrupt()

    env.process(failure())
    return proc


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
