"""A simulation run and a plan as files: what ``cprsim simulate`` and ``cprsim plan`` do besides
printing, callable from Python.

* :func:`preflight`: the checks before simulating (event budget, no failure source, a hopeless
  regime);
* :func:`run_summary`: the summary ``cprsim simulate --json`` prints (and ``summary.json``);
* :func:`run_files` / :func:`write_run`: the run folder (``config.toml``, ``summary.json``,
  ``replications.csv``, ``events.csv``), written as a set;
* :func:`write_timeline`: one replication as a Chrome/Perfetto trace (JSON);
* :func:`write_plan`: a plan as the JSON of ``cprsim plan --out``.

Units as everywhere in cprsim: times in seconds (``*_s``; the events' ``t``), checkpoint
intervals and failure-time parameters in hours (``*_h``), overheads and PLS as fractions. Every
file is written atomically (:mod:`cprsim.io`): a reader never sees a half-written file.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cprsim.io import atomic_write_json, atomic_write_set, csv_text, dumps_json

if TYPE_CHECKING:  # pragma: no cover - imported where used (the engine is slow to import)
    from cprsim.planner.records import Plan
    from cprsim.scenario import Scenario
    from cprsim.sim.records import Event, ReplicationResult
    from cprsim.sim.replicate import Precision

#: the files of a run folder, in the order :func:`write_run` returns them
RUN_FILES = ("config.toml", "summary.json", "replications.csv", "events.csv")


def no_failure_source(scenario: Scenario) -> bool:
    """True when nothing in ``scenario`` can fail (no failure process, domain, injected failure,
    job-level interruption or replayed log)."""
    f = scenario.failures
    return not (f.trainer or f.embedding or f.domains or f.injected or f.job or f.replay)


def preflight(
    scenario: Scenario,
    max_events: float | None = 1e7,
    force: bool = False,
    warn: Callable[[str], None] | None = None,
) -> None:
    """The checks before simulating ``scenario``, in this order:

    1. the event budget: a scenario whose replications would each simulate more than
       ``max_events`` events (checkpoints + failures + nodes, first order) raises InputError
       (``None``: no budget, as ``cprsim show``);
       then its numbers (:func:`cprsim.planner.feasibility.check_numbers`, whatever ``force``
       says): a cost, a delay or the failure-free time that is not finite or beyond any
       simulated time raises InputError naming the keys it comes from;
    2. no failure source: ``warn(message)`` is called (default: :func:`warnings.warn`);
    3. unless ``force`` or the failures are a replayed log: a regime the analytic check calls
       hopeless (the job would never finish) raises InputError saying why and what would help;
       so does a job that cannot progress at its own checkpoint interval (a save, restore or
       delay too long for the time between failures or for the job:
       :func:`cprsim.planner.feasibility.check_progress`), naming the keys that drive it.

    The strategy registry must be loaded (``cprsim.sim.strategies.ensure_loaded()``) for a plugin
    strategy's name to be known.
    """
    from cprsim.planner import feasibility
    from cprsim.sim import strategies as registry

    if max_events is not None:
        feasibility.check_budget(scenario, max_events)
    feasibility.check_numbers(scenario)
    if no_failure_source(scenario):
        message = (
            f"{scenario.name}: no failure source ([failures] is empty or missing): "
            "nothing will fail"
        )
        if warn is None:
            warnings.warn(message, stacklevel=2)
        else:
            warn(message)
    if not force and not scenario.failures.replay:
        kind = registry.get(scenario.strategy.name).planning.kind
        feasibility.check(scenario, kind)
        feasibility.check_progress(scenario, kind)


def run_summary(
    scenario: Scenario,
    results: Sequence[ReplicationResult],
    precision: Precision | None = None,
) -> dict[str, Any]:
    """The summary of replications of ``scenario``: what ``cprsim simulate --json`` prints and
    ``summary.json`` holds. Scenario, strategy, interval (hours), seed, replications, W
    (``failure_free_s``, seconds), every metric's estimate (mean, ``ci95``, sd, n, p50 and the
    bad tail: p90/p99, ETTR's p10/p1; overheads and PLS as fractions, times in seconds), badput by cause (seconds), the accuracy
    loss the PLS implies. With ``precision`` (the adaptive rule the replications ran under), also
    ``adaptive``: the rule, the replications run and whether the precision was ``reached``."""
    from cprsim.report import summary_dict

    summary = summary_dict(scenario, results)
    if precision is not None:
        summary["adaptive"] = {
            **precision.as_dict(),
            "replications": len(results),
            "reached": len(results) < precision.cap
            or precision.met([getattr(r, precision.metric) for r in results]),
        }
    return summary


def run_files(
    scenario: Scenario,
    results: Sequence[ReplicationResult],
    events: Sequence[Event],
    summary: dict[str, Any] | None = None,
) -> dict[str, str]:
    """The text of each file of a run folder, by name (:data:`RUN_FILES`): ``config.toml`` (the
    effective scenario, defaults included), ``summary.json`` (``summary``, default
    :func:`run_summary` without a precision rule), ``replications.csv`` (one row per replication:
    times in seconds, overheads and PLS as fractions) and ``events.csv`` (the recorded events of
    one replication, times in seconds; empty but for its header when none were recorded)."""
    from cprsim import scenario as sc
    from cprsim.sim.records import Event, ReplicationResult

    columns = ReplicationResult.columns()
    return {
        "config.toml": sc.to_toml(sc.effective_dict(scenario)),
        "summary.json": dumps_json(
            summary if summary is not None else run_summary(scenario, results)
        ),
        "replications.csv": csv_text(columns, ([getattr(r, c) for c in columns] for r in results)),
        "events.csv": csv_text(Event._fields, events),
    }


def write_run(
    out_dir: str | os.PathLike[str],
    scenario: Scenario,
    results: Sequence[ReplicationResult],
    events: Sequence[Event],
    summary: dict[str, Any] | None = None,
) -> list[Path]:
    """Write the run folder ``out_dir`` (created if needed) as a set, all files or none
    (:func:`cprsim.io.atomic_write_set`): the files of :func:`run_files`. ``cprsim plot breakdown``
    / ``timeline`` and ``cprsim.load_results`` read it. Returns the paths written, in the order of
    :data:`RUN_FILES`."""
    files = run_files(scenario, results, events, summary)
    folder = atomic_write_set(out_dir, dict(files))
    return [folder / name for name in files]


def write_timeline(
    path: str | os.PathLike[str], scenario: Scenario, events: Sequence[Event]
) -> Path:
    """Write ``events`` (one replication's, times in seconds) as a Chrome/Perfetto trace JSON at
    ``path`` (open it in ui.perfetto.dev or chrome://tracing; microseconds there), one track per
    trainer of ``scenario``. Returns the path."""
    from cprsim.timeline import chrome_trace

    return atomic_write_json(path, chrome_trace(events, scenario.cluster.trainers, scenario.name))


def write_plan(path: str | os.PathLike[str], plan: Plan) -> Path:
    """Write ``plan`` as the JSON of ``cprsim plan --out`` (``plan.as_dict()``: intervals in
    seconds, overheads and PLS as fractions; NaN and infinities as null). Returns the path."""
    return atomic_write_json(path, plan.as_dict())
