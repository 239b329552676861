"""Strategies see a small protocol, not the engine's ``Run`` (cprsim.sim.protocol; issue 17, item 3).

Every built-in strategy (and the example plugin) is simulated with its hooks handed a recording proxy
that implements :class:`RunView` (and its constructor and ``make_ledger`` one that implements
:class:`RunSetup`) and raises ``AttributeError`` on any other name and on every attribute write: a
strategy that reaches past the protocol fails here. The names they touch, together, must be exactly
the protocol's (it declares nothing they do not use). ``Run`` satisfies the protocols, and is built
in one step: every field has its value once it is constructed.
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import sys
from pathlib import Path
from types import MappingProxyType
from typing import Any
from unittest import mock

import pytest
from scenario_builder import bare_run

from cprsim import scenario as sc
from cprsim.costs import costs_of
from cprsim.sim import engine, strategies
from cprsim.sim.protocol import RunSetup, RunView, members
from cprsim.sim.tiers import TierState
from cprsim.streams import LazyStream

SETUP = members(RunSetup)
VIEW = members(RunView)
#: the simulation hooks, each called with the run as its first argument
HOOKS = (
    "save_s",
    "on_commit",
    "on_failure",
    "on_job_failure",
    "on_rollback",
    "on_node_back",
    "rate_at",
    "next_rate_change",
    "load_s",
    "full_load_s",
)
EXAMPLE = (
    Path(__file__).resolve().parents[1] / "examples" / "plugin_strategy" / "cprsim_compressed.py"
)
#: a stochastic plugin: the one that reads the strategy's own stream (``rng``)
JITTER = Path(__file__).resolve().parent / "plugins" / "cprsim_jitter.py"
#: parameters that reach the strategies' rarer paths (a stripe loss restores shards alone; caches)
PARAMS: dict[str, dict[str, Any]] = {
    "ecrm": {"k": 2, "m": 1, "placement": "contiguous", "stripe_loss": "partial"},
    "lookahead": {"cache_fraction": 0.1},
}
#: toy: trainers 0-1, embedding servers 2-5 (ECRM's first stripe: 2, 3, 4). Two servers of one
#: stripe at once (a stripe loss), a degraded trainer then the other (no trainer holds the dense
#: part), both trainers at once
SCHEDULE = [
    (4000.0, (2, 3), (200.0, 200.0)),
    (9000.0, (0,), (300.0,)),
    (9100.0, (1,), (300.0,)),
    (20000.0, (0, 1), (300.0, 300.0)),
]
VARIANTS: dict[str, dict[str, Any]] = {
    "blocking": {},
    "two-phase": {"checkpoint.mode": "two-phase"},
    "tiered": {"checkpoint.mode": "tiered"},
    "sharded": {"cluster.dense": "sharded"},
    "lifecycle": {"lifecycle": {"standbys": 1, "spares": 1}},
}


class Guard:
    """A proxy of a run that implements a protocol: the protocol's names are read through to the
    run (and recorded), ``up_at`` as a read-only mapping; any other name, and any write, raises."""

    __slots__ = ("_guard_allowed", "_guard_run", "_guard_seen")

    def __init__(self, run: Any, allowed: frozenset[str], seen: set[str]) -> None:
        object.__setattr__(self, "_guard_run", run)
        object.__setattr__(self, "_guard_allowed", allowed)
        object.__setattr__(self, "_guard_seen", seen)

    def __getattr__(self, name: str) -> Any:
        if name not in self._guard_allowed:
            raise AttributeError(f"a strategy read run.{name}: not part of the protocol")
        self._guard_seen.add(name)
        value = getattr(self._guard_run, name)
        return MappingProxyType(value) if name == "up_at" else value

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"a strategy set run.{name}: the protocol's attributes are read-only")


def guarded(
    cls: type, seen_setup: set[str], seen_view: set[str], called: set[str] | None = None
) -> type:
    """A subclass of strategy ``cls`` whose constructor, ``make_ledger`` and hooks get guards
    (``called``: the hooks called, recorded)."""
    called = set() if called is None else called

    def hook(name: str):
        f = getattr(cls, name)

        def call(self, run, *args):
            called.add(name)
            return f(self, Guard(run, VIEW, seen_view), *args)

        return call

    ns: dict[str, Any] = {h: hook(h) for h in HOOKS}
    ns["__init__"] = lambda self, params, setup: cls.__init__(
        self, params, Guard(setup, SETUP, seen_setup)
    )
    ns["make_ledger"] = lambda self, setup: cls.make_ledger(self, Guard(setup, SETUP, seen_setup))
    return type(cls.__name__, (cls,), ns)  # no own `name`: not registered, labels untouched


@pytest.fixture(scope="module")
def example_plugin():
    """The example plugin's strategy and the stochastic test plugin's, registered for this module
    only."""
    strategies.ensure_loaded()
    saved = dict(strategies.REGISTRY)
    loaded = []
    try:
        for name, path in (
            ("cprsim_compressed_protocol_test", EXAMPLE),
            ("cprsim_jitter_protocol_test", JITTER),
        ):
            spec = importlib.util.spec_from_file_location(name, path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module
            loaded.append(spec.name)
            spec.loader.exec_module(module)
        yield
    finally:
        strategies.REGISTRY.clear()
        strategies.REGISTRY.update(saved)
        for name in loaded:
            del sys.modules[name]


def names() -> list[str]:
    return [*strategies.builtin_names(), "compressed", "jitter"]


@functools.cache
def exercise(name: str) -> tuple[frozenset[str], frozenset[str], frozenset[str], int]:
    """Simulate strategy ``name`` in every variant it accepts, its hooks guarded: (the setup names
    it read, the view names it read, the hooks called, the number of replications run)."""
    cls = strategies.get(name)
    seen_setup: set[str] = set()
    seen_view: set[str] = set()
    called: set[str] = set()
    g = guarded(cls, seen_setup, seen_view, called)
    reps = 0
    for label, sets in VARIANTS.items():
        if label == "tiered" and not cls.supports_tiers:
            continue
        s = sc.load(
            "toy",
            {
                "strategy": {"name": name, **PARAMS.get(name, {})},
                "failures.job": {"family": "exponential", "mtbf_h": 5.0},
                **sets,
            },
        )
        with (
            mock.patch.object(strategies, "get", lambda n: g if n == name else cls),
            mock.patch.object(engine, "_last_prepared", None),
        ):
            for rep in range(3):
                res, _ = engine.simulate_one(s, rep, record=rep == 0, schedule=SCHEDULE)
                assert res.wall_s >= res.useful_s
                reps += 1
    return frozenset(seen_setup), frozenset(seen_view), frozenset(called), reps


@pytest.mark.parametrize("name", names())
def test_each_strategy_uses_only_what_the_protocol_declares(name, example_plugin):
    seen_setup, seen_view, called, reps = exercise(name)  # a name outside the protocol raises
    assert reps >= 12
    assert {"save_s", "on_commit", "on_failure", "on_job_failure", "load_s"} <= called
    assert seen_setup <= SETUP and seen_view <= VIEW
    assert "costs" in seen_setup  # the guard saw the strategy being made


def test_the_protocol_declares_exactly_what_the_strategies_use(example_plugin):
    """Together the strategies read every member (the protocol lists nothing they do not need), and
    every hook was called (the lifecycle's on_node_back included)."""
    used: set[str] = set()
    hooks: set[str] = set()
    for name in names():
        seen_setup, seen_view, called, _ = exercise(name)
        used |= seen_setup | seen_view
        hooks |= called
    assert used == VIEW, f"declared but unused: {sorted(VIEW - used)}"
    assert hooks == set(HOOKS)


# -- the guard catches a strategy that reaches past the protocol (the tests above can fail) ----------
class _PeeksAtTheClock(strategies.Strategy):
    def on_failure(self, run, nodes):
        run.env.now  # noqa: B018 - the engine's SimPy environment is not a strategy's
        return super().on_failure(run, nodes)


class _WritesTheCheckpoint(strategies.Strategy):
    def on_commit(self, run, progress):
        run.ckpt_progress = progress  # the former way: an attribute write, not commit_full


class _CountsCheckpoints(strategies.Strategy):
    def save_s(self, run):
        return self.costs.save_s * (1 + run.checkpoints % 2)


class _MarksNodesUp(strategies.Strategy):
    def on_failure(self, run, nodes):
        run.up_at[nodes[0]] = run.now  # up_at is read-only
        return None


@pytest.mark.parametrize(
    "cls, error, match",
    [
        (_PeeksAtTheClock, AttributeError, "run.env"),
        (_WritesTheCheckpoint, AttributeError, "set run.ckpt_progress"),
        (_CountsCheckpoints, AttributeError, "run.checkpoints"),
        (_MarksNodesUp, TypeError, "mappingproxy"),
    ],
)
def test_the_guard_stops_a_strategy_that_reaches_past_the_protocol(cls, error, match):
    s = sc.load("toy")
    g = guarded(cls, set(), set())
    with (
        mock.patch.object(strategies, "get", lambda n: g),
        mock.patch.object(engine, "_last_prepared", None),
        pytest.raises(error, match=match),
    ):
        engine.simulate_one(s, 0, schedule=SCHEDULE)


def test_the_guard_implements_the_protocol():
    """Every member of RunView reads through a view guard, and not through a setup guard. (Not
    ``isinstance``: from Python 3.12 a runtime-checkable protocol looks members up statically,
    so a proxy that forwards them with ``__getattr__`` never matches, whatever it forwards.)"""
    run = bare_run(sc.load("toy"))
    assert isinstance(run, RunView)
    view, setup = Guard(run, VIEW, set()), Guard(run, SETUP, set())
    assert all(hasattr(view, name) for name in VIEW)
    assert not all(hasattr(setup, name) for name in VIEW)


# -- Run: satisfies the protocols, built in one step ---------------------------------------------------
def test_run_satisfies_the_protocols():
    run = bare_run(sc.load("toy"))
    assert isinstance(run, RunView) and isinstance(run, RunSetup)
    for name in VIEW:
        assert hasattr(engine.Run, name), name  # a field (slot), a property or a method
        declared = inspect.getattr_static(RunView, name)
        if inspect.isfunction(declared):  # a method: the same parameters, the same defaults
            assert inspect.signature(getattr(engine.Run, name)) == inspect.signature(declared), name
        else:  # a read-only attribute
            assert isinstance(declared, property), name


def test_a_strategy_is_made_from_the_setup_alone():
    """The setup the engine makes a strategy from is exactly a RunSetup: no view of a half-built run."""
    # its fields, the strategy's stream (``stream``) read as ``rng``
    assert set(engine._Setup._fields) - {"stream"} | {"rng"} == SETUP
    assert SETUP < VIEW
    s = sc.load("toy")
    setup = engine._Setup(
        s, costs_of(s), 2, 4, s.duration_s, s.interval_s, 6, {}, LazyStream(s.seed, 0, "strategy")
    )  # a RunSetup and no more
    assert isinstance(setup, RunSetup) and not isinstance(setup, RunView)


@pytest.mark.parametrize("mode", ["blocking", "tiered"])
def test_run_is_built_in_one_step(mode):
    s = sc.load("toy", {"strategy.name": "partial", "checkpoint.mode": mode})
    run = bare_run(s)
    for part in (run, run.acct, run.phases, run.book, run.ckpt):
        for name in type(part).__slots__:
            getattr(part, name)  # every field has a value (an unset slot raises AttributeError)
    assert type(run.strategy) is strategies.Partial
    assert run.ledger is not None and run.ledger.weights.shape == (4,)
    assert run.ckpt.next == run.tau and run.job_node == 6 and run.book.sharded is False
    assert isinstance(run.tiers, TierState) if mode == "tiered" else run.tiers is None
    assert run.ckpt.tiers is run.tiers  # the checkpoints' tiers are the run's
    assert run.fleet is None and run.job is None
