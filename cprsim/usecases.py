"""The use cases both front ends run, each sequence written once: the API (:mod:`cprsim.api`)
checks its parameters and calls them; the CLI (:mod:`cprsim.cli`) parses options, shows progress
and formats output, and calls them too. Neither repeats the steps in between.

* simulate: :func:`prepare_simulation` (the checks before simulating, then the adaptive rule)
  and :meth:`Simulation.run` (the replications), whose :class:`Simulated` gives the summary;
* plan: :func:`check_plannable` (the checks before planning), :func:`prepare_plan` (the
  calibration) and :meth:`Planning.run` (the planner).

Each use case comes in two steps so that a front end can do its own work between them (the CLI
starts its progress display only once the checks have passed). They take a validated
:class:`~cprsim.scenario.Scenario` and library values; their errors are the library's
(:class:`~cprsim.errors.InputError`, :class:`~cprsim.errors.ParameterError` naming a parameter),
never a CLI option. Imports of the engine and the planner happen on first use: ``cprsim simulate``
loads this module without the planner's search or the calibration.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover - imported where used (the engine is slow to import)
    from cprsim.calibrate.calibration import Calibration
    from cprsim.planner.records import Plan
    from cprsim.scenario import Scenario
    from cprsim.sim.records import Event, ReplicationResult
    from cprsim.sim.replicate import Precision

__all__ = [
    "Planning",
    "Simulated",
    "Simulation",
    "check_plannable",
    "prepare_plan",
    "prepare_simulation",
]


# -- simulate -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Simulated:
    """Replications of ``scenario`` as run: ``results`` in replication order, ``events`` of the
    first replication when recorded (else empty), ``rule`` the adaptive rule they ran under."""

    scenario: Scenario
    results: list[ReplicationResult]
    events: list[Event] = field(default_factory=list)
    rule: Precision | None = None

    def summary(self) -> dict[str, Any]:
        """The summary ``cprsim simulate --json`` prints and ``summary.json`` holds
        (:func:`cprsim.runfiles.run_summary`)."""
        from cprsim.runfiles import run_summary

        return run_summary(self.scenario, self.results, self.rule)


@dataclass(frozen=True)
class Simulation:
    """A scenario that passed the checks before simulating, and the adaptive rule (None: exactly
    ``scenario.replications``) its replications will run under."""

    scenario: Scenario
    rule: Precision | None

    def run(
        self,
        *,
        first: int = 0,
        record: bool = False,
        progress: Callable[[int], None] | None = None,
    ) -> Simulated:
        """Run the replications from index ``first`` (under the rule, if any), keeping the events
        of the first when ``record``; ``progress(n)`` is called as replications complete."""
        from cprsim.sim.replicate import run_adaptive, run_replications

        s = self.scenario
        if self.rule is None:
            results, events = run_replications(
                s, first=first, record_first=record, progress=progress
            )
        else:
            results, events = run_adaptive(
                s, self.rule, first=first, record_first=record, progress=progress
            )
        return Simulated(s, results, events, self.rule)


def prepare_simulation(
    scenario: Scenario,
    *,
    precision: float | None = None,
    min_replications: int = 20,
    precision_metric: str = "overhead",
    max_events: float = 1e7,
    force: bool = False,
    warn: Callable[[str], None] | None = None,
) -> Simulation:
    """The first step of simulating ``scenario``: the checks of :func:`cprsim.runfiles.preflight`
    (the event budget ``max_events``, numbers no simulation survives, and unless ``force`` a
    hopeless regime: InputError; no failure source: ``warn(message)``), then the adaptive rule
    when ``precision`` is given (the 95% CI half-width of the mean ``precision_metric`` within
    that fraction of the mean, checked after ``min_replications``, at most the scenario's
    replications)."""
    from cprsim.runfiles import preflight
    from cprsim.sim.replicate import Precision

    preflight(scenario, max_events, force, warn=warn)
    rule = (
        Precision(precision, scenario.replications, min_replications, metric=precision_metric)
        if precision is not None
        else None
    )
    return Simulation(scenario, rule)


# -- plan -----------------------------------------------------------------------------------------
def check_plannable(scenario: Scenario) -> None:
    """The checks before planning ``scenario``, before any replication: a cost or a time no
    arithmetic downstream survives, and (unless its failures are a replayed log) a regime hopeless
    even for the full-recovery baseline, raise InputError naming the keys they come from."""
    from cprsim.planner import feasibility

    feasibility.check_numbers(scenario)
    if not scenario.failures.replay:
        feasibility.check(scenario, "rollback")  # the full-recovery baseline (make_plan's check)


@dataclass(frozen=True)
class Planning:
    """A scenario to plan and the calibration to plan it with (None: the shipped one, chosen by
    the planner for the scenario's model)."""

    scenario: Scenario
    calibration: Calibration | None

    def run(
        self,
        max_accuracy_loss: float | None,
        metric: str,
        *,
        strategies: Sequence[str],
        progress: Callable[[int], None] | None = None,
        **options: Any,
    ) -> Plan:
        """The plan for the accuracy bound: :func:`cprsim.planner.make_plan` over full recovery
        and ``strategies`` (names the registry knows), with its keyword ``options``
        (``replications``, ``confidence``, ``objective``, ...); ``progress(n)`` as it advances."""
        from cprsim.planner import make_plan

        return make_plan(
            self.scenario,
            max_accuracy_loss,
            metric,
            calibration=self.calibration,
            strategies=list(strategies),
            progress=progress,
            **options,
        )


def prepare_plan(
    scenario: Scenario, calibration: Calibration | str | os.PathLike[str] | None = None
) -> Planning:
    """The second step of planning ``scenario`` (after :func:`check_plannable`): its calibration
    read, a Calibration as given, a calibration.toml loaded (InputError naming the file), None
    for the shipped one."""
    from cprsim.calibrate.calibration import Calibration, load_calibration

    cal = calibration
    if cal is not None and not isinstance(cal, Calibration):
        cal = load_calibration(Path(cal))
    return Planning(scenario, cal)
