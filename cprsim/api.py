"""The public API: ``from cprsim import load_scenario, simulate, plan, fit, Sweep, ...``.

A small surface over the simulator, the planner, sweeps and the failure-log fits, for notebooks
and scripts; the command line (``cprsim ...``) does the same from a terminal. Every name here is
re-exported by ``cprsim`` itself (imported on first use: ``import cprsim`` stays light)::

    from cprsim import load_scenario, simulate, plan

    s = load_scenario("toy", interval_h=1.0, strategy="partial")
    runs = simulate(s, 20)                  # 20 replications: runs.results, runs.summary()
    p = plan(s, max_accuracy_loss=0.001)    # p.recommended_option, p.to_frame()

**Units**, as everywhere in cprsim: times of the simulation in seconds (``*_s``), checkpoint
intervals and failure-time parameters in hours (``*_h``), sizes in GB (1e9 bytes) and
bandwidths in GB/s; overheads, PLS (the portion of lost samples) and ETTR are fractions
(0.05 = 5%). Bad input (an unknown scenario key, a missing file, a malformed log) raises
:class:`InputError` with a one-line message naming the key or file; a bad value of a function's
parameter, :class:`ParameterError` (an InputError) naming the parameter (``.param``).

Optional dependencies: pandas for the ``to_frame()`` methods (an ImportError naming ``pip
install pandas`` without it), torch for :func:`run_calibration` (the ``dlrm`` extra).
"""

from __future__ import annotations

import copy
import dataclasses
import math
import numbers
import os
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from cprsim import names
from cprsim import scenario as _sc
from cprsim.calibrate.calibration import Calibration, load_calibration
from cprsim.costs import Costs
from cprsim.errors import InputError, ParameterError, validation_line
from cprsim.optional import require_pandas
from cprsim.planner.records import Option
from cprsim.planner.records import Plan as _PlanRecord
from cprsim.plots import save_figure
from cprsim.plots.calibration import plot_calibration, write_calibration_figure
from cprsim.plots.gantt import plot_timeline
from cprsim.plots.sweep import plot_breakdown, plot_overhead, plot_pls
from cprsim.scenario import Scenario
from cprsim.sim.records import Event, ReplicationResult
from cprsim.sim.replicate import Estimate, Precision
from cprsim.sweep.results import PointSummary, SweepResults, load_results
from cprsim.usecases import check_plannable, prepare_plan, prepare_simulation

if TYPE_CHECKING:  # pragma: no cover - imported on first use (scipy.stats is slow to import)
    import pandas

    from cprsim.failures.fit import Fit, FitReport
    from cprsim.failures.traces import Trace
    from cprsim.plots.fit import plot_fit
    from cprsim.sweep.spec import Sweep as _ExpandedSweep

__all__ = [
    # scenarios
    "load_scenario",
    "scenario_names",
    "checkpoint_costs",
    "Scenario",
    "Costs",
    # simulation
    "simulate",
    "Runs",
    "ReplicationResult",
    "Event",
    "Estimate",
    # planning
    "plan",
    "Plan",
    "Option",
    "pls_bound",
    "load_calibration",
    "Calibration",
    "run_calibration",
    # sweeps
    "Sweep",
    "SweepResults",
    "PointSummary",
    "load_results",
    # failure logs
    "fit",
    "read_trace",
    "FitReport",
    "Fit",
    "Trace",
    # figures
    "plot_overhead",
    "plot_pls",
    "plot_breakdown",
    "plot_timeline",
    "plot_fit",
    "plot_calibration",
    "save_figure",
    # errors
    "InputError",
    "ParameterError",
]

#: names defined in modules that are slow to import (scipy.stats): imported on first use
_LAZY = {
    "FitReport": "cprsim.failures.fit",
    "Fit": "cprsim.failures.fit",
    "Trace": "cprsim.failures.traces",
    "plot_fit": "cprsim.plots.fit",
}


# -- parameter checks -----------------------------------------------------------------------------
# Each raises a one-line ParameterError naming the parameter and what it takes (", or None" where
# None is allowed) before any work is done; a valid value passes unchanged.
def _shown(value: Any) -> str:
    """``value`` as an error shows it: its repr when short and on one line, else its type."""
    text = repr(value)
    return text if len(text) <= 60 and "\n" not in text else f"a {type(value).__name__}"


def _refuse(param: str, expected: str, value: Any, none: bool = False) -> NoReturn:
    raise ParameterError(
        param, f"must be {expected}{', or None' if none else ''}, got {_shown(value)}"
    )


def _check_int(param: str, value: Any, least: int = 0, *, none: bool = False) -> None:
    """A whole number (not a bool, not a float) >= ``least``."""
    if value is None and none:
        return
    if not (
        isinstance(value, numbers.Integral) and not isinstance(value, bool) and int(value) >= least
    ):
        _refuse(param, f"a whole number >= {least}", value, none)


def _check_number(
    param: str,
    value: Any,
    *,
    above: float | None = None,
    least: float | None = None,
    below: float | None = None,
    finite: bool = True,
    none: bool = False,
) -> None:
    """A real number (not a bool, never NaN; finite unless ``finite`` is False) > ``above`` or
    >= ``least``, and < ``below`` (each where given; ``below`` with a lower bound)."""
    if value is None and none:
        return
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and not math.isnan(value)
    ok = ok and (math.isfinite(value) or not finite)
    ok = ok and (above is None or value > above) and (least is None or value >= least)
    ok = ok and (below is None or value < below)
    if ok:
        return
    low = f"({above:g}" if above is not None else f"[{least:g}" if least is not None else ""
    if low and below is not None:
        expected = f"a number in {low}, {below:g})"
    else:
        bound = f" > {above:g}" if above is not None else f" >= {least:g}" if low else ""
        expected = ("a finite number" if finite else "a number") + bound
    _refuse(param, expected, value, none)


def _check_bool(param: str, value: Any) -> None:
    """True or False (a numpy bool too)."""
    if not isinstance(_plain(value), bool):
        _refuse(param, "True or False", value)


def _check_choice(param: str, value: Any, choices: Sequence[str], *, none: bool = False) -> None:
    """One of the strings ``choices``."""
    if value is None and none:
        return
    if not (isinstance(value, str) and value in choices):
        _refuse(param, f"one of {', '.join(choices)}", value, none)


def _check_callable(param: str, value: Any) -> None:
    """A function (a callback), or None."""
    if value is not None and not callable(value):
        _refuse(param, "a function", value, True)


def _check_path(param: str, value: Any, *, none: bool = False) -> None:
    """A path: a str or an os.PathLike."""
    if value is None and none:
        return
    if not isinstance(value, (str, os.PathLike)):
        _refuse(param, "a path (a str or os.PathLike)", value, none)


def _check_scenario(param: str, value: Any) -> None:
    """A built-in scenario's name, a TOML file's path or a Scenario."""
    if not isinstance(value, (str, os.PathLike, Scenario)):
        _refuse(param, "a built-in scenario's name, a TOML file's path or a Scenario", value)


def _check_calibration(param: str, value: Any) -> None:
    """A Calibration, a calibration.toml's path, or None (the shipped one)."""
    if value is not None and not isinstance(value, (Calibration, str, os.PathLike)):
        _refuse(param, "a Calibration or a calibration.toml's path", value, True)


def _check_mapping(param: str, value: Any, *, none: bool = False) -> None:
    """A dict (a Mapping) whose keys are strings."""
    if value is None and none:
        return
    if not (isinstance(value, Mapping) and all(isinstance(k, str) for k in value)):
        _refuse(param, "a dict with string keys", value, none)


def _names(param: str, value: Any, what: str, *, none: bool = False) -> Any:
    """A string, or a list (any iterable but a mapping) of strings as a list: ``what`` says which
    names. None where ``none``."""
    if (value is None and none) or isinstance(value, str):
        return value
    if isinstance(value, Iterable) and not isinstance(value, (bytes, Mapping)):
        items = list(value)
        if all(isinstance(x, str) for x in items):
            return items
    _refuse(param, f"{what} or a list of them", value, none)


def _factors(param: str, value: Any, what: str) -> tuple[float, ...]:
    """A list (any iterable but a string or mapping) of finite numbers > 0, as a tuple."""
    if isinstance(value, Iterable) and not isinstance(value, (str, bytes, Mapping)):
        items = tuple(value)
        if all(
            isinstance(k, numbers.Real)
            and not isinstance(k, bool)
            and math.isfinite(k)
            and float(k) > 0
            for k in items
        ):
            return items
    _refuse(param, what, value)


def _set_items(value: Any) -> Mapping[str, Any] | list[str]:
    """``set``: dotted keys to values, or ``key=value`` strings as a list (one string, a list of
    them, or None: no strings)."""
    if isinstance(value, Mapping):
        _check_mapping("set", value)
        return value
    if value is None or isinstance(value, str):
        return [] if value is None else [value]
    if isinstance(value, Iterable) and not isinstance(value, bytes):
        items = list(value)
        if all(isinstance(x, str) for x in items):
            return items
    _refuse("set", "a dict of dotted keys to values or a list of 'key=value' strings", value, True)


def _check_strategy_name(param: str, value: Any) -> None:
    """A registered strategy's name (a built-in or an installed plugin's)."""
    from cprsim import registry

    registry.ensure_loaded()
    if not (isinstance(value, str) and value in registry.REGISTRY):
        raise ParameterError(
            param,
            f"unknown strategy {_shown(value)} (known: {', '.join(sorted(registry.REGISTRY))})",
        )


def _check_apart(param: str, key: str, given: Mapping[str, str], *, shown: bool) -> None:
    """A ParameterError unless the dotted ``key`` that ``param`` sets is apart from the keys
    ``given`` by other parameters (key -> parameter; ``set``'s own keys apply in order): equal
    keys, or a table and a key inside it, would let one silently replace the other. ``shown``:
    the error shows ``key`` after the parameter's name (a keyword override's)."""
    for other, by in given.items():
        if by == param == "set":
            continue
        if other == key or key.startswith(other + ".") or other.startswith(key + "."):
            what = "set" if shown and other == key else f"{other} is set"
            raise ParameterError(
                param,
                f"{what} by `{by}` too: give each key in one place",
                key=key if shown else None,
                also=(by,),
            )


# -- scenarios ------------------------------------------------------------------------------------
def _plain(v: Any) -> Any:
    """A value the scenario's strict validation takes: numpy scalars as Python numbers, tuples as lists."""
    if hasattr(v, "item") and type(v).__module__ == "numpy":
        return v.item()
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    return v


def _distribution_table(fit_: Any, unit: str) -> dict[str, Any]:
    """A fitted family (``Fit``, or a ``FitReport``'s best) as a scenario distribution table: the
    scale in hours (``unit="h"``: failures, ``lifecycle.repair.recur``) or seconds (``"s"``:
    ``reschedule``, ``lifecycle``'s delays), its shape or sigma
    (what ``cprsim fit --out`` writes)."""
    f = getattr(fit_, "best", fit_)
    scale = f.scale_ if unit == "h" else f.scale_ * 3600.0
    d: dict[str, Any] = {"family": f.family, f"scale_{unit}": float(scale)}
    if f.family == "lognormal":
        d["sigma"] = float(f.shape_)
    elif f.family != "exponential":
        d["shape"] = float(f.shape_)
    return d


def _override(key: str, value: Any) -> Any:
    if (hasattr(value, "scale_") and hasattr(value, "family")) or (
        hasattr(value, "best") and hasattr(value, "fits")
    ):
        seconds = key.split(".")[0] in ("reschedule", "lifecycle") and not key.endswith("recur")
        return _distribution_table(value, "s" if seconds else "h")
    return _plain(value)


def _updates(
    set_: Mapping[str, Any] | Sequence[str] | None,
    overrides: Mapping[str, Any],
    origin: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The dotted-key updates of ``set`` and the keyword ``overrides``; ``origin`` (when given)
    receives the parameter each key came from. A key of an override that ``set`` or another
    override sets too (or a table holding it) raises a ParameterError."""
    items = _set_items(set_)
    out: dict[str, Any] = {}
    if isinstance(items, Mapping):
        out.update(items)
    elif items:
        out.update(_sc.parse_set(items, "set"))
    given = {k: "set" for k in out}
    for k, v in overrides.items():
        key = k.replace("__", ".")
        _check_apart("overrides", key, given, shown=True)
        out[key], given[key] = v, "overrides"
    if origin is not None:
        origin.update(given)
    return {k: _override(k, v) for k, v in out.items()}


def load_scenario(
    name_or_path: str | os.PathLike[str] | Scenario,
    *,
    set: Mapping[str, Any] | Sequence[str] | None = None,
    strategy: str | Mapping[str, Any] | None = None,
    interval_h: float | None = None,
    replications: int | None = None,
    seed: int | None = None,
    model: str | os.PathLike[str] | None = None,
    **overrides: Any,
) -> Scenario:
    """A validated scenario: ``name_or_path`` a built-in name (:func:`scenario_names`), a TOML
    file, or a Scenario to change, with overrides applied (like ``cprsim simulate NAME --set
    KEY=VALUE``).

    * ``set``: dotted keys and values, ``{"cluster.trainers": 40, "storage.write_gbps": 5.0}``
      (or the CLI's ``["cluster.trainers=40"]``); a value may be a whole table (``{"strategy":
      {"name": "mfu", "top_fraction": 0.05}}``) or a fitted distribution (a ``Fit``, or a
      ``FitReport`` for its best family: ``{"failures.embedding": report}`` writes its family,
      ``scale_h`` in hours and shape; under ``reschedule``, ``scale_s`` in seconds);
    * keyword overrides, ``__`` for the dots: ``cluster__trainers=40``;
    * shortcuts: ``strategy`` (a name sets ``strategy.name``, like ``--strategy``; a dict replaces
      the whole ``[strategy]`` table), ``interval_h`` (``checkpoint.interval_h``, hours of
      progress between checkpoints), ``replications`` and ``seed``;
    * ``model``: a failure model file fitted by ``cprsim fit --out`` (``--model FILE``): its
      lifetimes replace the scenario's node failures (per-node, domains, injected, replayed), its
      repair times go to the scenario's ``[lifecycle]`` repair (unused without one: repairing a
      machine is not the job's ``[reschedule]``); ``Scenario.sources`` says what came from it.
      Applied before the overrides.

    Units: ``*_h`` hours, ``*_s`` seconds, ``*_gb`` GB, ``*_gbps`` GB/s. An unknown key or an
    impossible value raises :class:`InputError` naming it (a :class:`ParameterError` naming
    ``set``, ``overrides`` and the key, or the shortcut, when an override is at fault). A key that
    two of ``set``, the keyword overrides and the shortcuts give (or a table and a key inside it)
    raises a ParameterError naming the later one: neither silently wins.
    """
    _check_scenario("name_or_path", name_or_path)
    if strategy is not None and not isinstance(strategy, (str, Mapping)):
        _refuse("strategy", "a strategy's name or a dict of its table", strategy, True)
    _check_number("interval_h", interval_h, above=0, none=True)
    _check_int("replications", replications, 1, none=True)
    _check_int("seed", seed, none=True)
    _check_path("model", model, none=True)
    origin: dict[str, str] = {}  # scenario key -> the parameter that set it
    upd = _updates(set, overrides, origin)
    shortcut: dict[str, str] = {}  # scenario key -> the shortcut parameter that set it
    if strategy is not None:
        key = "strategy.name" if isinstance(strategy, str) else "strategy"
        _check_apart("strategy", key, origin, shown=False)
        upd[key] = strategy if isinstance(strategy, str) else _plain(dict(strategy))
        shortcut[key] = "strategy"
    for key, param, value in (
        ("checkpoint.interval_h", "interval_h", None if interval_h is None else float(interval_h)),
        ("replications", "replications", replications),
        ("seed", "seed", seed),
    ):
        if value is not None:
            _check_apart(param, key, origin, shown=False)
            upd[key], shortcut[key] = _plain(value), param
    try:
        if isinstance(name_or_path, Scenario):
            s = name_or_path if model is None else _sc.with_model(name_or_path, model)
            return s.with_updates(upd, param="overrides") if upd else s
        return _sc.load(os.fspath(name_or_path), upd or None, model)
    except _sc.OverrideError as e:  # a shortcut's value: the error names the shortcut
        if e.key in shortcut:
            raise e.replace(param=shortcut[e.key], key=None) from None
        raise


def _as_scenario(scenario: str | os.PathLike[str] | Scenario) -> Scenario:
    _check_scenario("scenario", scenario)
    return scenario if isinstance(scenario, Scenario) else load_scenario(scenario)


def scenario_names() -> list[str]:
    """The names of the built-in scenarios (``cprsim scenarios``), sorted."""
    return _sc.builtin_names()


def checkpoint_costs(scenario: str | os.PathLike[str] | Scenario) -> Costs:
    """The scenario's derived checkpoint costs (``cprsim show``): ``save_s`` (a blocking full save,
    seconds), ``load_s`` (every node reloads), ``shard_load_s(k)`` (k embedding shards restored at
    once), ``dense_copy_s``, the bytes (``embedding_bytes``, ``dense_bytes``, ``shard_bytes``) and
    bandwidths (bytes/s); measured costs in the scenario's ``[costs]`` table replace derived ones."""
    from cprsim.costs import costs_of

    return costs_of(_as_scenario(scenario))


# -- simulation -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Runs:
    """Replications of one scenario (what :func:`simulate` returns): a sequence of
    :class:`ReplicationResult` (``runs[0]``, ``len(runs)``, ``for r in runs``).

    ``scenario``: the scenario simulated (seed and replications included); ``results``: one
    :class:`ReplicationResult` per replication, in replication order (times in seconds, overheads
    and PLS fractions); ``events``: the events of the first replication when ``simulate(...,
    record=True)`` (else empty: :meth:`timeline` re-runs any replication); ``precision``: the
    adaptive-replication rule, if any.
    """

    scenario: Scenario
    results: list[ReplicationResult]
    events: list[Event] = field(default_factory=list, repr=False)
    precision: Precision | None = None

    def __len__(self) -> int:
        """The number of replications."""
        return len(self.results)

    def __iter__(self) -> Iterator[ReplicationResult]:
        """The replications' results, in replication order."""
        return iter(self.results)

    def __getitem__(self, i: int) -> ReplicationResult:
        """The ``i``-th result (a position in ``results``, not a replication index)."""
        return self.results[i]

    def __repr__(self) -> str:
        s = self.scenario
        return (
            f"Runs({s.name}: {s.strategy.name}, interval {s.checkpoint.interval_h:g} h, "
            f"{len(self.results)} replications, seed {s.seed})"
        )

    def estimates(self) -> dict[str, Estimate]:
        """Every metric's :class:`Estimate` over the replications: mean, 95% Student-t CI of the
        mean, the P50 and the bad tail of single replications (``worst10``, ``worst1``: a cost's
        P90 and P99, ETTR's P10 and P1) (``runs.estimates()["overhead"].mean``)."""
        from cprsim.sim.replicate import summarize

        return summarize(self.results)

    def summary(self) -> dict[str, Any]:
        """The summary ``cprsim simulate --json`` prints, as a dict: the scenario, strategy,
        interval (hours), seed, replications, W (``failure_free_s``, seconds), every metric's
        estimate (``metrics``: mean, ``ci95``, sd, n, p50 and the bad tail: p90/p99, ETTR's
        p10/p1), the badput by cause (seconds),
        the accuracy loss implied by the PLS (shipped calibration), the strategy's footprint, and
        ``adaptive`` with a precision rule. NaNs become null in JSON (``cprsim.io.dumps_json``)."""
        from cprsim.runfiles import run_summary

        return run_summary(self.scenario, self.results, self.precision)

    def to_frame(self) -> pandas.DataFrame:
        """A pandas DataFrame, one row per replication (the columns of ``replications.csv``: times
        in seconds, overheads and PLS fractions). pandas is optional (``pip install pandas``)."""
        return ReplicationResult.to_frame(self.results)

    def to_results(self) -> SweepResults:
        """The replications as one summarized point (:class:`SweepResults`), as the sweep figures
        and ``load_results`` of a ``cprsim simulate --out`` folder have it."""
        return SweepResults.from_runs(self.scenario, self.results)

    def timeline(self, replication: int | None = None) -> list[Event]:
        """The events of one replication (default: the first), re-run alone with event recording
        (each replication is reproducible on its own): times in seconds (:class:`Event`)."""
        _check_int("replication", replication, none=True)
        first = self.results[0].replication if self.results else 0
        i = first if replication is None else int(replication)
        if self.events and i == first:
            return list(self.events)
        from cprsim.sim.replicate import run_replications

        _, events = run_replications(self.scenario, 1, first=i, record_first=True)
        return events

    def save(self, folder: str | os.PathLike[str]) -> Path:
        """Write the files of ``cprsim simulate --out FOLDER`` (all or none): ``config.toml`` (the
        effective scenario), ``summary.json``, ``replications.csv`` and ``events.csv`` (of the first
        replication), readable by :func:`load_results` and ``cprsim plot``. Returns the folder."""
        from cprsim.runfiles import write_run

        _check_path("folder", folder)
        out = Path(folder)
        write_run(out, self.scenario, self.results, self.timeline(), self.summary())
        return out


def simulate(
    scenario: str | os.PathLike[str] | Scenario,
    replications: int | None = None,
    *,
    seed: int | None = None,
    first: int = 0,
    precision: float | None = None,
    min_replications: int = 20,
    precision_metric: str = "overhead",
    record: bool = False,
    force: bool = False,
    max_events: float = 1e7,
    progress: Callable[[int], None] | None = None,
) -> Runs:
    """Simulate replications of a scenario (``cprsim simulate``) and return them as :class:`Runs`.

    ``scenario``: a Scenario, a built-in name or a TOML file; ``replications``: how many (default:
    the scenario's); ``seed``: the root seed of every random stream (default: the scenario's); the
    same seed gives the same numbers. ``first``: the index of the first replication (each one is
    reproducible on its own: replications 100..199 are ``first=100``). ``precision``: adaptive
    replication: stop once the 95% CI half-width of the mean ``precision_metric`` is within this
    fraction of the mean (0.02: 2%), checked after ``min_replications`` and every 10 more, at most
    ``replications``. ``record``: keep the events of the first replication (``runs.events``).

    Before simulating, a scenario whose replications would each simulate more than ``max_events``
    events, or (unless ``force``) a regime the analytic check calls hopeless, raises InputError.
    ``progress(n)`` is called as replications complete. Times in the results are seconds.
    """
    from cprsim.sim.replicate import METRICS

    _check_scenario("scenario", scenario)
    _check_int("replications", replications, 1, none=True)
    _check_int("seed", seed, none=True)
    _check_int("first", first)
    _check_number("precision", precision, above=0, none=True)
    _check_int("min_replications", min_replications, 2)
    _check_choice("precision_metric", precision_metric, METRICS)
    _check_bool("record", record)
    _check_bool("force", force)
    _check_number("max_events", max_events, above=0, finite=False)
    _check_callable("progress", progress)
    s = _as_scenario(scenario)
    if replications is not None or seed is not None:
        s = load_scenario(s, replications=replications, seed=seed)
    # the warning points at simulate's caller: warn <- preflight <- prepare_simulation <- here
    done = prepare_simulation(
        s,
        precision=precision,
        min_replications=min_replications,
        precision_metric=precision_metric,
        max_events=max_events,
        force=force,
        warn=lambda m: warnings.warn(m, stacklevel=5),
    ).run(first=first, record=record, progress=progress)
    return Runs(s, done.results, done.events, done.rule)


# -- planning -------------------------------------------------------------------------------------
class Plan(_PlanRecord):
    """What :func:`plan` returns: the options, each confirmed on fresh replications, and the
    recommendation (a :class:`cprsim.planner.Plan` with a few conveniences).

    Fields: ``scenario`` (name), ``metric`` and ``accuracy_bound`` (the loss accepted), ``pls_bound``
    (CPR-vanilla's PLS bound; each :class:`Option` carries its own), ``options``, ``recommended``
    (an option's label), ``saving`` (best full recovery's overhead minus the recommended one's, a
    fraction of W), ``message``, ``notes``, ``replications`` (confirmation replications per
    option), ``seed``, ``confidence`` (P(a run's PLS <= bound) promised; None: on the mean),
    ``full_interval_s`` (seconds between full checkpoints of every partial option),
    ``accuracy_model`` (the calibration's model, described). ``as_dict()``: the JSON of ``cprsim
    plan --out``. Options: ``interval_s`` (seconds), ``overhead``/``ckpt_overhead``/``pls``/``ettr``
    (:class:`Estimate`, fractions), ``params`` (the strategy's parameters).
    """

    @classmethod
    def _of(cls, record: _PlanRecord, scenario: Scenario | None = None) -> Plan:
        p = cls(**{f.name: getattr(record, f.name) for f in dataclasses.fields(record)})
        object.__setattr__(p, "_scenario", scenario)
        return p

    def __repr__(self) -> str:
        return (
            f"Plan({self.scenario}: "
            + (
                f"{self.metric} loss <= {self.accuracy_bound:g}"
                if math.isfinite(self.accuracy_bound)
                else "dense"
            )
            + ", recommended "
            f"{self.recommended!r} of {len(self.options)} options)"
        )

    @property
    def recommended_option(self) -> Option:
        """The recommended :class:`Option`."""
        return self.option(self.recommended)

    def scenario_for(self, label: str | None = None, scenario: Scenario | None = None) -> Scenario:
        """The planned scenario changed to run one option (default: the recommended one): its
        strategy and parameters, its checkpoint interval (hours; at most the job) and its checkpoint
        mode (an option of another mode than the scenario's: ``checkpoint_modes``). ``scenario``:
        the scenario planned (default: the one given to :func:`plan`)."""
        if scenario is not None and not isinstance(scenario, Scenario):
            _refuse("scenario", "a Scenario", scenario, True)
        base = scenario if scenario is not None else getattr(self, "_scenario", None)
        if base is None:
            raise ParameterError("scenario", "this plan does not hold its scenario: pass it")
        labels = [o.label for o in self.options]
        if label is not None and label not in labels:
            raise ParameterError(
                "label", f"no option {_shown(label)} in this plan (options: {', '.join(labels)})"
            )
        o = self.option(label if label is not None else self.recommended)
        params = dict(o.params)
        updates: dict[str, Any] = {}
        if o.checkpoint_mode and o.checkpoint_mode != base.checkpoint.mode:
            from cprsim.planner.tiered import with_mode

            base = with_mode(base, o.checkpoint_mode)
        if o.checkpoint_mode == "tiered" and "persist_every" in params:
            updates["checkpoint.tiers.persist_every"] = params.pop("persist_every")
        updates["checkpoint.interval_h"] = min(o.interval_s, base.duration_s) / 3600.0
        updates["strategy"] = {"name": o.strategy, **params}
        return base.with_updates(updates, f"{base.name}: {o.label}")

    def to_frame(self) -> pandas.DataFrame:
        """A pandas DataFrame, one row per option: label, strategy, params, ``interval_h`` and
        ``full_interval_h`` (hours), each estimate flattened to ``<name>_mean``, ``_lo``, ``_hi``
        (95% CI of the mean), ``_p50`` and the bad tail ``_p90``, ``_p99`` (``overhead``,
        ``ckpt_overhead``, ``pls``; ETTR, where higher is better: ``ettr_p10``, ``ettr_p1``;
        fractions), the option's PLS bound, accuracy loss, share of runs within
        the bound, ``meets_bound``, ``tied`` and ``recommended``. pandas is optional (``pip
        install pandas``)."""
        pd = require_pandas("Plan.to_frame()")
        rows = []
        for o in self.options:
            d = o.as_dict()
            row: dict[str, Any] = {
                "label": o.label,
                "strategy": o.strategy,
                "params": dict(o.params),
                "interval_h": d["interval_h"],
                "full_interval_h": d["full_interval_h"],
            }
            for k, v in d.items():
                if k in row or k in (
                    "interval_s",
                    "full_interval_s",
                    "label",
                    "strategy",
                    "params",
                ):
                    continue
                if isinstance(v, dict) and "mean" in v and "ci95" in v:
                    row[f"{k}_mean"] = v["mean"]
                    row[f"{k}_lo"], row[f"{k}_hi"] = v["ci95"]
                    for stat in ("p50", "p90", "p99", "p10", "p1"):  # the median, the bad tail
                        if stat in v:
                            row[f"{k}_{stat}"] = v[stat]
                elif v is None and k == "ettr":
                    continue
                else:
                    row[k] = v
            row["recommended"] = o.label == self.recommended
            rows.append(row)
        return pd.DataFrame(rows)


def _plan_strategies(strategies: Sequence[str] | str) -> list[str]:
    """The planner's strategy names from :func:`plan`'s ``strategies`` ("all": every one)."""
    from cprsim.planner import ALL_STRATEGIES

    names = (
        list(ALL_STRATEGIES)
        if strategies == "all"
        else ([strategies] if isinstance(strategies, str) else list(strategies))
    )
    unknown = [x for x in names if x not in ALL_STRATEGIES]
    if unknown:
        raise ParameterError(
            "strategies",
            f"unknown {', '.join(map(repr, unknown))} (choose from "
            f"{', '.join(ALL_STRATEGIES)}, or 'all')",
        )
    return names


def plan(  # long: public signature: 19 documented parameters, each checked; the body is 25 lines
    scenario: str | os.PathLike[str] | Scenario,
    max_accuracy_loss: float | None = None,
    metric: str = "auc",
    *,
    strategies: Sequence[str] | str = names.PLAN_DEFAULT,
    confidence: float | None = 0.9,
    objective: str = "mean",
    max_checkpoint_age_h: float | None = None,
    replications: int | None = None,
    search_replications: int | None = None,
    precision: float | None = 0.1,
    calibration: Calibration | str | os.PathLike[str] | None = None,
    allow_extrapolation: bool = False,
    allow_no_full_checkpoint: bool = False,
    progress: Callable[[int], None] | None = None,
    sensitivity: Sequence[float] = (),
    model_rows: int | None = None,
    loss_scale: float | None = None,
    checkpoint_modes: Sequence[str] | str | None = None,
    max_extra_memory: float | None = None,
) -> Plan:
    """Plan the checkpoint intervals and recovery strategy for an accuracy bound (``cprsim plan``).

    ``max_accuracy_loss``: the loss accepted, in the unit of ``metric`` (``"auc"``: AUC points
    lost; ``"logloss"``: the rise in log-loss), in (0, 0.5); None only for a dense model (no
    embedding shards: no option loses updates; ``plan.accuracy_bound`` is then NaN). ``strategies``: the partial-recovery
    and rollback strategies compared with full recovery (``"all"``: every one). ``confidence``:
    P(a run's PLS <= its bound) promised per run (None: on the mean). ``objective``: rank by mean or
    ``"p90"`` overhead. ``max_checkpoint_age_h``: full checkpoints at most this many hours of
    progress apart. ``replications``: fresh replications confirming each option (default: the
    scenario's); ``search_replications``: those of the search. ``precision``: the planner's
    adaptive replication (a fraction of the mean overhead; None: exhaustive). ``calibration``: a
    Calibration or calibration.toml (default: the shipped one). ``allow_extrapolation``: plan to the
    accuracy bound even beyond twice the PLS range the calibration measured;
    ``allow_no_full_checkpoint``: without job-level interruptions or an age cap, allow plans that
    take no full checkpoint. ``progress(n)`` is called as the plan's replications complete.
    ``sensitivity``: factors k (e.g. ``(2, 4, 10)``): the plan again as if the user's model lost k
    times the accuracy per unit PLS the plan assumes; ``plan.sensitivity`` holds a row per factor.
    ``model_rows``: your model's embedding rows (default: the scenario's) and ``loss_scale``: its
    loss per unit PLS as a multiple of the calibration's (default: the calibration's scale ladder's
    choice for those rows); ``plan.scale`` says which factor the plan assumed, why, and whether
    your model lies outside the sizes measured. ``checkpoint_modes``: compare full recovery under
    these modes (``"blocking"``, ``"two-phase"``, ``"tiered"``, or ``"blocking,tiered"``; default:
    the scenario's own, a tiered scenario's blocking and tiered). ``max_extra_memory``: leave out
    the options that add more memory than this fraction of the embedding tables (ECRM's parity:
    ``m/k``; each option's ``extra_memory``); see :func:`cprsim.planner.make_plan`.

    Returns a :class:`Plan`: ``plan.recommended_option``, ``plan.to_frame()``,
    ``plan.scenario_for()`` (the scenario running the recommendation). Intervals in seconds
    (``interval_s``) and hours (``as_dict()["options"][i]["interval_h"]``), overheads and PLS
    fractions.
    """
    _check_scenario("scenario", scenario)
    _check_number("max_accuracy_loss", max_accuracy_loss, above=0, below=0.5, none=True)
    _check_choice("metric", metric, ("auc", "logloss"))
    strategies = _names("strategies", strategies, "a strategy's name (or 'all')")
    _check_number("confidence", confidence, least=0.5, below=1, none=True)
    _check_choice("objective", objective, ("mean", "p90"))
    _check_number("max_checkpoint_age_h", max_checkpoint_age_h, above=0, none=True)
    _check_int("replications", replications, 1, none=True)
    _check_int("search_replications", search_replications, 1, none=True)
    _check_number("precision", precision, above=0, below=1, none=True)
    _check_calibration("calibration", calibration)
    _check_bool("allow_extrapolation", allow_extrapolation)
    _check_bool("allow_no_full_checkpoint", allow_no_full_checkpoint)
    _check_callable("progress", progress)
    sensitivity = _factors(
        "sensitivity", sensitivity, "a list of finite factors > 0, e.g. (2, 4, 10)"
    )
    _check_int("model_rows", model_rows, 1, none=True)
    _check_number("loss_scale", loss_scale, above=0, none=True)
    checkpoint_modes = _names("checkpoint_modes", checkpoint_modes, "a checkpoint mode", none=True)
    _check_number("max_extra_memory", max_extra_memory, least=0, none=True)
    s = _as_scenario(scenario)
    names = _plan_strategies(strategies)
    check_plannable(s)
    record = prepare_plan(s, calibration).run(
        max_accuracy_loss,
        metric,
        strategies=names,
        progress=progress,
        replications=replications,
        search_replications=search_replications,
        confidence=confidence,
        objective=objective,
        max_checkpoint_age_h=max_checkpoint_age_h,
        allow_extrapolation=allow_extrapolation,
        allow_no_full_checkpoint=allow_no_full_checkpoint,
        precision=precision,
        sensitivity=tuple(sensitivity),
        model_rows=model_rows,
        loss_scale=loss_scale,
        checkpoint_modes=checkpoint_modes,
        max_extra_memory=max_extra_memory,
    )
    return Plan._of(record, s)


def pls_bound(
    max_accuracy_loss: float,
    strategy: str = names.VANILLA,
    metric: str = "auc",
    calibration: Calibration | str | os.PathLike[str] | None = None,
    confidence: float | None = 0.9,
    loss_scale: float = 1.0,
) -> float:
    """The PLS bound the planner derives from an accuracy bound: the largest PLS (a fraction of
    the job's samples) whose ``metric`` loss stays within ``max_accuracy_loss`` for a failure
    mid-training restoring a fresh state: a single training run's loss at its predictive
    ``confidence``-quantile (the plan's per-run promise), or with ``confidence=None`` the upper
    end of the mean's 95% CI (a promise on the mean) (``plan(...)``'s ``pls_bound`` for
    CPR-vanilla, ``strategy="partial"``). ``calibration``: a Calibration or calibration.toml
    (default: the shipped one). ``inf`` when the loss does not grow with PLS. ``loss_scale``: the
    loss per unit PLS as a multiple of the calibration's (default 1: as calibrated); a plan assumes
    its scale ladder's factor for the scenario's model (``plan.scale["factor"]``): pass it to get
    the plan's bound."""
    import dataclasses as _dc

    from cprsim.planner.accuracy import plan_accuracy

    _check_number("max_accuracy_loss", max_accuracy_loss, above=0)
    _check_strategy_name("strategy", strategy)
    _check_choice("metric", metric, ("auc", "logloss"))
    _check_calibration("calibration", calibration)
    _check_number("confidence", confidence, least=0.5, below=1, none=True)
    _check_number("loss_scale", loss_scale, above=0)
    if isinstance(calibration, Calibration):
        cal = calibration
    else:
        cal = load_calibration(None if calibration is None else Path(calibration))
    q = None if confidence is None else float(confidence)
    acc = _dc.replace(plan_accuracy(cal, metric), scale=float(loss_scale))
    return float(acc.pls_bound(float(max_accuracy_loss), strategy, q))


def run_calibration(
    out: str | os.PathLike[str],
    preset: str = "quick",
    *,
    jobs: int = 1,
    threads: int = 1,
    measure_costs: bool = True,
    resume: bool = False,
    progress: Callable[..., None] | None = None,
    **changes: Any,
) -> dict[str, Any]:
    """Measure accuracy loss against PLS on a real PyTorch DLRM (``cprsim calibrate``; needs torch,
    the ``dlrm`` extra) into the folder ``out``: calibration.toml, points.csv, the figure,
    manifest.json and run.json. Returns the calibration document (the dict of calibration.toml:
    ``plot_calibration`` draws it, ``load_calibration(out / "calibration.toml")`` reads it for
    :func:`plan`).

    ``preset``: ``"quick"``, ``"standard"`` or ``"paper"`` (docs/calibration.md); ``changes``
    replace fields of the preset (``train_samples=12_800, seeds=(0,), budgets=(0.5, 0.125),
    strategies=("partial",)``: budgets are checkpoint intervals as fractions of the run).
    ``jobs``: worker processes, ``threads``: torch threads each; ``measure_costs``: also time
    torch.save/load and the end-to-end check (clock measurements); ``resume``: finish a killed
    calibration in ``out``; ``progress(n, what, resumed)`` is called as runs finish.
    """
    _check_path("out", out)
    _check_int("jobs", jobs, 1)
    _check_int("threads", threads, 1)
    _check_bool("measure_costs", measure_costs)
    _check_bool("resume", resume)
    _check_callable("progress", progress)
    if (
        "torch" not in sys.modules
    ):  # OpenMP threads that sleep while they wait (as `cprsim calibrate`)
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        import torch  # noqa: F401
    except ImportError:
        raise ImportError(
            "run_calibration() needs torch: pip install 'cprsim[dlrm]'", name="torch"
        ) from None
    from cprsim.calibrate.pipeline import calibrate
    from cprsim.calibrate.runner import PRESETS

    _check_choice("preset", preset, tuple(PRESETS))
    p = PRESETS[preset]
    if changes:
        known = {f.name for f in dataclasses.fields(p)}
        bad = [k for k in changes if k not in known]
        if bad:
            raise ParameterError(
                "changes",
                f"not a field of the preset (fields: {', '.join(sorted(known))})",
                key=bad[0],
            )
        fields: dict[str, Any] = {  # checked against the preset's fields above
            k: tuple(v) if isinstance(v, list) else v for k, v in changes.items()
        }
        p = dataclasses.replace(p, **fields)
    kw: dict[str, Any] = {} if progress is None else {"progress": progress}
    return calibrate(
        p,
        Path(out),
        measure_costs=measure_costs,
        jobs=jobs,
        threads=threads,
        resume=resume,
        figure=write_calibration_figure,
        **kw,
    )


# -- sweeps ---------------------------------------------------------------------------------------
def _absolute(raw: dict[str, Any]) -> dict[str, Any]:
    """A scenario table whose file references (a replayed trace, access tables) are absolute."""
    raw = copy.deepcopy(raw)
    fail = raw.get("failures")
    if isinstance(fail, dict) and isinstance(fail.get("replay"), str):
        fail["replay"] = str(Path(fail["replay"]).resolve())
    acc = raw.get("access")
    if (
        isinstance(acc, dict)
        and isinstance(acc.get("tables"), str)
        and acc["tables"] != "criteo-kaggle"
    ):
        acc["tables"] = str(Path(acc["tables"]).resolve())
    return raw


def _strategy_entries(strategies: Any) -> list[str | Mapping[str, Any]]:
    """:class:`Sweep`'s ``strategies`` as a list, each a known name or a table (checked)."""
    listed = (
        list(strategies)
        if isinstance(strategies, Iterable) and not isinstance(strategies, (str, bytes, Mapping))
        else None
    )
    if listed is None or not all(isinstance(e, (str, Mapping)) for e in listed):
        _refuse("strategies", "a list of strategy names or tables (dicts)", strategies)
    for e in listed:
        if isinstance(e, str) or "name" in e:
            _check_strategy_name("strategies", e if isinstance(e, str) else e["name"])
    return listed


def _sweep_doc(
    scenario: str | os.PathLike[str] | Scenario,
    grid: Mapping[str, Sequence[Any]] | None,
    strategies: list[str | Mapping[str, Any]],
    set: Any,
    replications: int | None,
    seed: int | None,
    name: str,
    description: str,
    precision: float | None,
    min_replications: int,
    precision_metric: str,
    plan: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The sweep file's document (TOML-ready) for :class:`Sweep`'s checked arguments."""
    if not isinstance(scenario, Scenario):
        ref = os.fspath(scenario)
        if not _sc.is_builtin(ref):
            ref = str(Path(ref).resolve())
    else:
        ref = "scenario.toml"
    doc: dict[str, Any] = {"name": name}
    if description:
        doc["description"] = description
    doc["scenario"] = ref
    if replications is not None:
        doc["replications"] = _plain(replications)
    if seed is not None:
        doc["seed"] = _plain(seed)
    if precision is not None:
        doc["precision"] = float(precision)
        if min_replications != 20:
            doc["min_replications"] = _plain(min_replications)
        if precision_metric != "overhead":
            doc["precision_metric"] = precision_metric
    if strategies:
        doc["strategies"] = [e if isinstance(e, str) else _plain(dict(e)) for e in strategies]
    fixed = _updates(set, {})
    if fixed:
        doc["set"] = fixed
    if grid:
        doc["grid"] = {
            k: [_plain(x) for x in v]
            if isinstance(v, Iterable) and not isinstance(v, (str, bytes, Mapping))
            else v
            for k, v in grid.items()
        }
    if plan is not None:
        doc["plan"] = _plain(dict(plan))
    return doc


class Sweep:
    """A what-if sweep built in Python (no TOML file): every combination of ``grid`` values x
    ``strategies``, each point ``replications`` replications of the base scenario with the
    overrides applied; ``run()`` runs it like ``cprsim sweep`` (same files, same numbers) and
    returns :class:`SweepResults`.

    ``scenario``: the base, a built-in name, a TOML file or a Scenario. ``grid``: dotted keys to
    lists of values, ``{"checkpoint.interval_h": [0.25, 0.5, 1, 2]}`` (hours; as a sweep file's
    ``[grid]``). ``strategies``: names or tables (``{"name": "mfu", "top_fraction": 0.05,
    "label": "mfu-5%"}``), each replacing the scenario's ``[strategy]`` table. ``set``: fixed
    overrides of every point. ``replications``, ``seed``: per point (default: the scenario's).
    ``precision``: adaptive replication (the 95% CI half-width of the mean ``precision_metric``
    within this fraction of the mean, checked after ``min_replications`` and every 10 more;
    ``replications`` is then the most). ``plan``: the planner's choice on the base scenario,
    written to plan.json and marked by :func:`plot_overhead` (``{"max_accuracy_loss": 0.001}``,
    the keys of a sweep file's ``[plan]``). ``name``: the sweep's name (letters, digits, ``. _ -``).

    Every point is validated at construction (an InputError names the point and key).
    :meth:`to_toml` gives the equivalent sweep file: ``cprsim sweep`` on it writes the same bytes.
    ``sweep.expanded``: the expanded sweep (:class:`cprsim.sweep.spec.Sweep`: points, seed,
    fingerprint).
    """

    def __init__(
        self,
        scenario: str | os.PathLike[str] | Scenario,
        grid: Mapping[str, Sequence[Any]] | None = None,
        *,
        strategies: Sequence[str | Mapping[str, Any]] = (),
        set: Mapping[str, Any] | Sequence[str] | None = None,
        replications: int | None = None,
        seed: int | None = None,
        name: str = "sweep",
        description: str = "",
        precision: float | None = None,
        min_replications: int = 20,
        precision_metric: str = "overhead",
        plan: Mapping[str, Any] | None = None,
        max_events: float | None = None,
    ) -> None:
        from cprsim.sim.replicate import METRICS

        _check_scenario("scenario", scenario)
        _check_mapping("grid", grid, none=True)
        strategies = _strategy_entries(strategies)
        set = _set_items(set) if set is not None else None
        _check_int("replications", replications, 1, none=True)
        _check_int("seed", seed, none=True)
        if not isinstance(name, str):
            _refuse("name", "a string", name)
        if not isinstance(description, str):
            _refuse("description", "a string", description)
        _check_number("precision", precision, above=0, none=True)
        _check_int("min_replications", min_replications, 2)
        _check_choice("precision_metric", precision_metric, METRICS)
        _check_mapping("plan", plan, none=True)
        _check_number("max_events", max_events, above=0, finite=False, none=True)
        self._base: Scenario | None = scenario if isinstance(scenario, Scenario) else None
        self._doc = _sweep_doc(
            scenario,
            grid,
            strategies,
            set,
            replications,
            seed,
            name,
            description,
            precision,
            min_replications,
            precision_metric,
            plan,
        )
        #: the expanded sweep (:class:`cprsim.sweep.spec.Sweep`): points, fingerprint, seed
        self.expanded = self._expand(max_events)

    def _expand(self, max_events: float | None) -> _ExpandedSweep:
        """Validate the sweep document as a sweep file and expand it into its points."""
        from pydantic import ValidationError

        from cprsim.sweep.spec import SweepError, SweepFile, expand

        doc = self._doc
        source = Path(f"<Sweep {doc['name']}>")
        with tempfile.TemporaryDirectory(prefix="cprsim-sweep-") as tmp:
            check = dict(doc)
            if self._base is not None:  # the Scenario as a file, for the sweep's loader
                path = Path(tmp) / "scenario.toml"
                path.write_text(self._scenario_toml(), encoding="utf-8")
                check["scenario"] = str(path)
            try:
                spec = SweepFile.model_validate(check)
            except ValidationError as e:
                raise SweepError(validation_line(e, str(source))) from None
            return expand(spec, source, None, max_events)

    def _scenario_toml(self) -> str:
        assert self._base is not None
        return _sc.to_toml(_absolute(_sc.effective_dict(self._base)))

    def __repr__(self) -> str:
        sw = self.expanded
        return (
            f"Sweep({sw.name!r}: {len(sw.points)} points ({', '.join(sw.keys) or 'no grid'} x "
            f"{len(sw.strategies)} strategies), {sw.replications} replications, seed {sw.seed})"
        )

    def __len__(self) -> int:
        """The number of points (grid combinations x strategies)."""
        return len(self.expanded.points)

    @property
    def name(self) -> str:
        """The sweep's name (the default output folder of ``cprsim sweep`` is out/<name>)."""
        return self.expanded.name

    @property
    def points(self) -> tuple[Any, ...]:
        """The points (:class:`cprsim.sweep.spec.Point`: index, strategy label, grid values, the
        effective scenario table), grid-major in ``grid`` order, strategies innermost."""
        return self.expanded.points

    @property
    def fingerprint(self) -> str:
        """The hash of everything that decides the numbers (a resumed run checks it)."""
        return self.expanded.fingerprint

    def to_toml(self) -> str:
        """The equivalent sweep file (``cprsim sweep FILE`` gives the same results). With a
        Scenario as the base, the file refers to ``scenario.toml`` beside it (:meth:`save`
        writes both)."""
        from cprsim.io import dumps_toml

        return dumps_toml(self._doc)

    def save(self, folder: str | os.PathLike[str]) -> Path:
        """Write ``sweep.toml`` (and ``scenario.toml`` for a Scenario base) into ``folder``, for
        ``cprsim sweep FOLDER/sweep.toml``; returns the sweep file's path."""
        from cprsim.io import atomic_write_text

        _check_path("folder", folder)
        out = Path(folder)
        if self._base is not None:
            atomic_write_text(out / "scenario.toml", self._scenario_toml())
        return atomic_write_text(out / "sweep.toml", self.to_toml())

    def run(
        self,
        out: str | os.PathLike[str] | None = None,
        *,
        jobs: int = 1,
        resume: bool = False,
        scheduler: str | None = None,
        dask_local: int | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> SweepResults:
        """Run every point (``cprsim sweep``) and return the summarized :class:`SweepResults`.

        ``out``: the output folder (results.csv, summary.csv, manifest.json, config.toml,
        sweep.toml, plan.json: the files of ``cprsim sweep``, byte for byte); default: a temporary
        folder, removed once read. ``jobs``: local worker processes (the files do not depend on
        it); ``scheduler`` (``tcp://HOST:PORT``) or ``dask_local`` (N workers): run on Dask (the
        distributed extra). ``resume``: finish a sweep killed in ``out``. ``progress(n)`` is
        called as points complete."""
        from cprsim.sweep.runner import run_sweep

        _check_path("out", out, none=True)
        _check_int("jobs", jobs, 1)
        _check_bool("resume", resume)
        if scheduler is not None and not isinstance(scheduler, str):
            _refuse("scheduler", "an address (a str: tcp://HOST:PORT)", scheduler, True)
        _check_int("dask_local", dask_local, 1, none=True)
        _check_callable("progress", progress)
        if out is None:
            if resume:
                raise ParameterError(
                    "resume", "needs the folder of the sweep to finish: pass `out`", also=("out",)
                )
            with tempfile.TemporaryDirectory(prefix="cprsim-sweep-") as tmp:
                return self.run(
                    Path(tmp) / self.name,
                    jobs=jobs,
                    scheduler=scheduler,
                    dask_local=dask_local,
                    progress=progress,
                )
        text = self.to_toml().encode("utf-8") if self._base is None else None
        outcome = run_sweep(
            self.expanded,
            Path(out),
            jobs=jobs,
            scheduler=scheduler,
            dask_local=dask_local,
            resume=resume,
            progress=progress,
            sweep_text=text,
        )
        return load_results(outcome.out)


# -- failure logs ---------------------------------------------------------------------------------
def read_trace(
    path: str | os.PathLike[str],
    format: str = "csv",
    *,
    filters: Mapping[str, str] | None = None,
    node_count: int | None = None,
) -> Trace:
    """Read the failure log at ``path`` (``cprsim fit TRACE --format ...``): ``format`` one of
    ``csv`` (cprsim's schema: node, node_type, event, time_h, cause), ``lanl``, ``titan``,
    ``philly``, ``infinitehbd``; ``filters``: ``{column: value}`` kept (case-insensitive; causes match
    substrings); ``node_count``: InfiniteHBD's node count. Returns a Trace: ``trace.nodes``,
    ``trace.n_failures()``, ``trace.horizon()`` (hours), ``trace.lifetimes()`` (up-times in hours
    and their observed flags; the last of each node right-censored)."""
    from cprsim.failures.traces import read_trace as _read

    _check_path("path", path)
    _check_mapping("filters", filters, none=True)
    if filters and not all(isinstance(v, str) for v in filters.values()):
        _refuse("filters", "a dict of column names to strings", filters, True)
    _check_int("node_count", node_count, 1, none=True)
    return _read(path, format, dict(filters or {}), node_count)


def _fit_families(families: Any) -> list[str] | None:
    """:func:`fit`'s ``families`` as a list of known family names (None: every family)."""
    from cprsim.failures.fit import FIT_FAMILIES

    families = _names("families", families, "a family's name", none=True)
    if isinstance(families, str):
        families = [families]
    for f in families or ():
        _check_choice("families", f, FIT_FAMILIES)
    if families is not None and not families:
        _refuse("families", f"one or more of {', '.join(FIT_FAMILIES)}", families, True)
    return families


def _durations(data: Any, observed: Any) -> tuple[Any, Any]:
    """:func:`fit`'s durations (hours, finite, > 0) and their event flags, as checked arrays."""
    import numpy as np

    try:
        t = np.asarray(data, dtype=float).ravel()
    except (TypeError, ValueError):
        _refuse("data", "a failure log's path, a Trace or durations in hours", data)
    if not np.all(np.isfinite(t) & (t > 0)):
        raise ParameterError("data", "durations must be finite and > 0 (hours)")
    try:
        obs = (
            np.ones(t.size, dtype=bool)
            if observed is None
            else np.asarray(observed, dtype=bool).ravel()
        )
    except (TypeError, ValueError):
        _refuse("observed", "event flags (True: observed, False: right-censored)", observed)
    if obs.size != t.size:
        raise ParameterError("observed", f"has {obs.size} flags for {t.size} durations")
    return t, obs


def fit(
    data: Any,
    observed: Any = None,
    *,
    format: str = "csv",
    filters: Mapping[str, str] | None = None,
    node_type: str | None = None,
    interarrival: str = "repair-to-failure",
    node_count: int | None = None,
    families: Sequence[str] | None = None,
    bootstrap: int | None = None,
    seed: int = 0,
    progress: Callable[[int], None] | None = None,
) -> FitReport:
    """Fit lifetime families to failure times with right-censoring (``cprsim fit``): exponential,
    Weibull, gamma, lognormal and log-logistic by censored maximum likelihood, ranked by AIC.

    ``data``: a failure log's path (read with ``format``, ``filters``, ``node_count`` as
    :func:`read_trace`), a Trace, or durations in hours (``observed``: their event flags, False =
    right-censored; default all observed). From a log, ``interarrival`` picks the lifetimes
    (``"repair-to-failure"`` up-times, or ``"failure-to-failure"``) of ``node_type`` (default: all).
    ``bootstrap``: parametric-bootstrap draws for the goodness-of-fit p-value (default: 49, or 0
    above 5,000 lifetimes); ``seed``: their seed; ``progress(n)`` is called as bootstrap draws are
    done (``bootstrap`` per family in all: most of the time a fit takes).

    Returns a FitReport: ``report.fits`` ranked by AIC (``scale_`` in hours, ``shape_``, their 95%
    CIs, ``mean_`` hours, ``AIC_``, ``p_value_``), ``report.best``, the Kaplan-Meier curve;
    :func:`plot_fit` draws it and ``load_scenario(..., set={"failures.embedding": report})`` uses
    the best family.
    """
    from cprsim.failures.fit import FIT_FAMILIES, fit_all

    families = _fit_families(families)
    _check_int("bootstrap", bootstrap, none=True)
    _check_int("seed", seed)
    if node_type is not None and not isinstance(node_type, str):
        _refuse("node_type", "a node type (a str)", node_type, True)
    _check_callable("progress", progress)
    trace = hasattr(data, "intervals") and hasattr(data, "nodes")
    if observed is not None and (trace or isinstance(data, (str, os.PathLike))):
        raise ParameterError(
            "observed",
            "applies to durations; a failure log says which lifetimes are censored",
        )
    what = "fit"
    if isinstance(data, (str, os.PathLike)):
        what = os.fspath(data)
        data = read_trace(data, format, filters=filters, node_count=node_count)
        trace = True
    if trace:
        what = what if what != "fit" else str(getattr(data, "source", "fit"))
        t, obs = data.intervals(interarrival, node_type)
    else:
        t, obs = _durations(data, observed)
    if t.size == 0:
        raise InputError(
            f"{what}: no lifetimes{' of node type ' + node_type if node_type else ''} to fit"
        )
    B = bootstrap if bootstrap is not None else (49 if t.size <= 5000 else 0)
    return fit_all(
        t,
        obs,
        tuple(families) if families is not None else FIT_FAMILIES,  # checked above
        bootstrap=B,
        seed=seed,
        what=what,
        progress=progress,
    )


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'cprsim.api' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
