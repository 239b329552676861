"""A sweep file: a factorial grid over scenario keys x strategies x replications.

::

    name = "interval"                     # default: the file's stem
    description = "overhead against the checkpoint interval"
    scenario = "cpr-production"           # a built-in name, or a TOML file relative to this one
    replications = 40                     # per point (default: the scenario's); with precision, the most
    precision = 0.02                      # optional: adaptive replication (see below)
    seed = 2021                           # default: the scenario's
    strategies = ["full", "partial", { name = "mfu", top_fraction = 0.05, label = "mfu-5%" }]

    [set]                                 # fixed overrides, applied to every point
    "storage.write_gbps" = 5.0

    [grid]                                # every combination of these values (dotted keys)
    "checkpoint.interval_h" = [0.5, 1, 2, 4]
    "cluster.embedding_servers" = [18, 36]

    [plan]                                # optional: the planner's choice on the base scenario -> plan.json
    max_accuracy_loss = 0.001

A strategy entry replaces the scenario's whole ``[strategy]`` table (its parameters are those
given in the entry, else the strategy's defaults); ``label`` names it in the results (default:
the name). Nested tables are flattened, so ``[grid.checkpoint] interval_h = [...]`` is the same
as ``"checkpoint.interval_h" = [...]``. Points are numbered grid-major in file order, strategies
innermost; every point is validated before anything runs, and an error names the sweep file, the
point and the key.

**Adaptive replication** (``precision``, with ``min_replications = 20`` and ``precision_metric =
"overhead"``): each point runs replications until the 95% CI half-width of its mean
``precision_metric`` is within ``precision`` of the mean, checked after ``min_replications`` and
every 10 more in replication order, at most ``replications``
(:class:`cprsim.sim.replicate.Precision`); points then have different numbers of rows, each
number a function of the seed alone.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from cprsim import scenario as sc
from cprsim.errors import InputError, ParameterError, validation_line
from cprsim.io import read_toml, short
from cprsim.names import FULL, PLAN_DEFAULT
from cprsim.sim.replicate import Precision
from cprsim.version import __version__


class SweepError(InputError):
    """A bad sweep file: one line naming the file and the key."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


class PlanSpec(_Model):
    """A sweep's ``[plan]`` table: plan every point for this accuracy bound, with the options of
    ``cprsim plan``."""

    max_accuracy_loss: float = Field(
        ..., gt=0, lt=0.5, description="accuracy loss accepted (AUC or log-loss)"
    )
    metric: Literal["auc", "logloss"] = "auc"
    strategies: tuple[str, ...] = Field(PLAN_DEFAULT, strict=False)
    replications: int | None = Field(None, ge=2)
    confidence: float | Literal["mean"] = Field(
        0.9, description="P(a run's PLS <= bound) promised, or 'mean'"
    )
    objective: Literal["mean", "p90"] = "mean"
    max_checkpoint_age_h: float | None = Field(None, gt=0)
    max_extra_memory: float | None = Field(
        None, ge=0, description="leave out options adding more memory (a fraction of the tables)"
    )
    precision: float | Literal["off"] = Field(
        0.1, description="the planner's adaptive replication, or 'off'"
    )

    @model_validator(mode="after")
    def _known(self) -> PlanSpec:
        from cprsim.planner import ALL_STRATEGIES

        bad = [x for x in self.strategies if x not in ALL_STRATEGIES]
        if bad:
            raise ValueError(f"unknown strategy {bad[0]!r} (known: {', '.join(ALL_STRATEGIES)})")
        if self.confidence != "mean" and not (0.5 <= float(self.confidence) < 1):
            raise ValueError(f"confidence must be in [0.5, 1) or 'mean', got {self.confidence!r}")
        if self.precision != "off" and not (0 < float(self.precision) < 1):
            raise ValueError(f"precision must be in (0, 1) or 'off', got {self.precision!r}")
        return self


class SweepFile(_Model):
    """A sweep file as written, validated: the scenario, ``[set]`` overrides, the ``[grid]`` axes,
    the strategies, fixed or adaptive replication, and an optional ``[plan]``."""

    name: str | None = Field(
        None,
        pattern=r"^[A-Za-z0-9._-]{1,100}$",
        description="the default output folder is out/<name>: letters, digits, . _ - only",
    )
    description: str = ""
    scenario: str = Field(..., min_length=1, description="built-in scenario name or TOML file")
    replications: int | None = Field(None, ge=1, le=1_000_000)
    seed: int | None = Field(None, ge=0)
    precision: float | None = Field(
        None, gt=0, description="adaptive replication: target relative CI half-width"
    )
    min_replications: int = Field(20, ge=2, le=1_000_000)
    precision_metric: str = "overhead"
    strategies: tuple[str | dict[str, Any], ...] = Field((), strict=False)
    set: dict[str, Any] = {}
    grid: dict[str, Any] = {}
    plan: PlanSpec | None = None

    @field_validator("name")
    @classmethod
    def _inside_out(cls, v: str | None) -> str | None:
        if v is not None and set(v) <= {"."}:
            raise ValueError("the name becomes the folder out/<name>: '.' and '..' are not names")
        return v

    @field_validator("precision_metric")
    @classmethod
    def _metric(cls, v: str) -> str:
        from cprsim.sim.replicate import METRICS

        if v not in METRICS:
            raise ValueError(f"expected one of {', '.join(METRICS)}, got {v!r}")
        return v

    @field_validator("strategies")
    @classmethod
    def _entries(cls, v: tuple) -> tuple:
        for i, e in enumerate(v):
            if isinstance(e, dict) and not isinstance(e.get("name"), str):
                raise ValueError(f"entry {i}: a strategy table needs `name`")
        return v


@dataclass(frozen=True)
class Point:
    """One point of the grid with one strategy: ``replications`` replications of one scenario."""

    index: int
    strategy: str  #: label of the strategy entry
    values: tuple[tuple[str, Any], ...]  #: the grid key values of this point, in grid order
    raw: dict[str, Any]  #: the scenario's raw table with every override applied (validated)


@dataclass(frozen=True)
class Sweep:
    """A sweep expanded into its points (grid x strategies), each validated, with the fingerprint a
    resume checks."""

    name: str
    description: str
    source: str
    base_raw: dict[str, Any]
    keys: tuple[str, ...]  #: grid keys, in file order
    strategies: tuple[str, ...]  #: labels
    points: tuple[Point, ...]
    replications: int
    seed: int
    plan: PlanSpec | None
    fingerprint: str  #: hash of everything that decides the numbers (resume checks it)
    precision: Precision | None = None  #: adaptive replication (``replications`` is then its cap)


def _flatten(
    d: dict[str, Any], prefix: str = "", table: str = "", source: str = ""
) -> dict[str, Any]:
    """Nested tables as dotted keys; a key given twice (``"a.b" = ...`` and ``[table.a] b = ...``)
    is a one-line :class:`SweepError` naming it (``table``: the table's name in the message)."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        items = _flatten(v, key + ".", table, source).items() if isinstance(v, dict) else [(key, v)]
        for name, value in items:
            if name in out:
                raise SweepError(
                    f"{source}: {table}{'.' if table else ''}{short(name, 120)}: given twice "
                    "(as a dotted key and in a table, or in two tables); give it once"
                )
            out[name] = value
    return out


def _label(entry: str | dict[str, Any]) -> tuple[str, dict[str, Any]]:
    if isinstance(entry, str):
        return entry, {"name": entry}
    table = {k: v for k, v in entry.items() if k != "label"}
    return str(entry.get("label", entry["name"])), table


def load_sweep(
    path: str | Path,
    overrides: dict[str, Any] | None = None,
    max_events: float | None = None,
    *,
    precision: float | None = None,
    min_replications: int | None = None,
    model: str | os.PathLike[str] | None = None,
) -> Sweep:
    """Read, validate and expand a sweep file; ``overrides`` are extra ``[set]`` entries; every
    point must simulate at most ``max_events`` events a replication (default: the budget of
    ``cprsim.planner.feasibility``); ``precision`` and ``min_replications`` replace the file's;
    ``model``: a fitted failure model file whose lifetimes replace the base scenario's node
    failures (``--model``; :func:`cprsim.scenario.merge_model`)."""
    p = Path(path)
    doc = read_toml(p, "sweep file")
    if isinstance(doc, dict):
        doc = dict(doc)
        if precision is not None:
            doc["precision"] = float(precision)
        if min_replications is not None:
            doc["min_replications"] = int(min_replications)
    try:
        spec = SweepFile.model_validate(doc)
    except ValidationError as e:
        raise SweepError(validation_line(e, str(p))) from None
    return expand(spec, p, overrides, max_events, model)


#: a sweep expands to at most this many points
MAX_POINTS = 100_000


def expand(
    spec: SweepFile,
    path: Path,
    overrides: dict[str, Any] | None = None,
    max_events: float | None = None,
    model: str | os.PathLike[str] | None = None,
) -> Sweep:
    """Expand a validated sweep file (at ``path``, which relative scenario paths are relative to)
    into its points: the base scenario with ``[set]`` and ``overrides`` applied, one point per grid
    combination and strategy, each validated and within ``max_events`` events a replication."""
    from cprsim.planner import feasibility
    from cprsim.sim import strategies as registry

    registry.ensure_loaded()
    budget = feasibility.MAX_EVENTS if max_events is None else max_events
    source = str(path)
    base, fixed = _base_scenario(spec, path, source, overrides, model)
    grid = _flatten(spec.grid, table="grid", source=source)
    _check_grid(grid, spec, source)
    entries = _strategy_entries(spec, source)
    keys = tuple(grid)
    n_points = len(entries)
    for k in keys:
        n_points *= len(grid[k])
    if n_points > MAX_POINTS:
        raise SweepError(
            f"{source}: grid x strategies = {n_points:,} points, more than a sweep may have "
            f"({MAX_POINTS:,}): split it"
        )
    points: list[Point] = []
    for combo in itertools.product(*(grid[k] for k in keys)):
        for label, table in entries:
            points.append(
                _point(len(points), base, fixed, keys, combo, label, table, source, budget)
            )
    first = points[0].raw
    cap = int(first["replications"])
    rule = _precision_rule(spec, cap, source)
    fp = _fingerprint(points, rule)
    return Sweep(
        name=spec.name or path.stem,
        description=spec.description,
        source=source,
        base_raw=base,
        keys=keys,
        strategies=tuple(dict.fromkeys(pt.strategy for pt in points)),
        points=tuple(points),
        replications=cap,
        seed=int(first["seed"]),
        plan=spec.plan,
        fingerprint=fp,
        precision=rule,
    )


def _base_scenario(
    spec: SweepFile,
    path: Path,
    source: str,
    overrides: dict[str, Any] | None,
    model: str | os.PathLike[str] | None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The sweep's base scenario (``model`` merged, ``[set]`` and ``overrides`` applied) and the
    fixed keys set on it."""
    scen = spec.scenario
    if not sc.is_builtin(scen) and not Path(scen).is_absolute():
        scen = str(path.parent / scen)
    try:
        base_raw, _ = sc.load_raw(scen)
    except sc.ScenarioError as e:
        raise SweepError(f"{source}: scenario: {e}") from None
    if model is not None:
        try:
            sc.merge_model(base_raw, Path(model), replace=True)
        except InputError as e:
            raise ParameterError("model", str(e)) from None
    fixed = _flatten(spec.set, table="set", source=source)
    fixed.update(overrides or {})
    if spec.seed is not None:
        fixed["seed"] = spec.seed
    if spec.replications is not None:
        fixed["replications"] = spec.replications
    base = copy.deepcopy(base_raw)
    for k, v in fixed.items():
        try:
            sc.set_dotted(base, k, v)
        except ParameterError as e:
            if k in (overrides or {}):
                raise e.replace(where=source) from None
            raise SweepError(f"{source}: set {k}: {e.detail}") from None
    sc.drop_stale_tiers(base, fixed)
    return base, fixed


def _check_grid(grid: dict[str, Any], spec: SweepFile, source: str) -> None:
    """Refuse a grid axis that is empty, varies the strategy, the seed or the replications, or
    holds a value with a line break."""
    for k, vals in grid.items():
        if not isinstance(vals, list) or not vals:
            raise SweepError(f"{source}: grid.{k}: expected a non-empty list of values")
        if k.split(".")[0] == "strategy" and spec.strategies:
            raise SweepError(
                f"{source}: grid.{k}: vary strategies with `strategies`, not in the grid"
            )
        if k in ("seed", "replications"):
            raise SweepError(
                f"{source}: grid.{k}: seed and replications are the sweep's, not a grid axis"
            )
        if any(isinstance(v, str) and ("\n" in v or "\r" in v) for v in vals):
            # a value is a cell of results.csv: a line break in it would make a row of two lines,
            # which a kill could tear into a half the resume takes for tampering
            raise SweepError(f"{source}: grid.{k}: a value with a line break (one line each)")


def _strategy_entries(
    spec: SweepFile, source: str
) -> list[tuple[str | None, dict[str, Any] | None]]:
    """The sweep's strategies as (label, [strategy] table), each label distinct."""
    # (label, [strategy] table); (None, None): the base scenario's own strategy
    entries: list[tuple[str | None, dict[str, Any] | None]] = [
        _label(e) for e in spec.strategies
    ] or [(None, None)]
    labels = [lab for lab, _ in entries]
    if len(set(labels)) != len(labels):
        raise SweepError(
            f"{source}: strategies: two entries share the label; give each a distinct `label`"
        )
    return entries


def _point(
    idx: int,
    base: dict[str, Any],
    fixed: dict[str, Any],
    keys: tuple[str, ...],
    combo: tuple[Any, ...],
    label: str | None,
    table: dict[str, Any] | None,
    source: str,
    budget: float,
) -> Point:
    """Point ``idx``: the base with the grid values ``combo`` and the strategy ``table``,
    validated and checked feasible (what `cprsim simulate` refuses without --force)."""
    from cprsim.planner import feasibility
    from cprsim.sim import strategies as registry

    raw = copy.deepcopy(base)
    for k, v in zip(keys, combo):
        try:
            sc.set_dotted(raw, k, v)
        except ParameterError as e:
            raise SweepError(f"{source}: grid.{k}: {e.detail}") from None
    sc.drop_stale_tiers(raw, {**fixed, **dict(zip(keys, combo))})
    if table is not None:
        raw["strategy"] = dict(table)
    lab = label or str(raw.get("strategy", {}).get("name", FULL))
    where = ", ".join(f"{k}={short(repr(v), 40)}" for k, v in zip(keys, combo))
    here = f"{source}: point {idx} ({where + '; ' if where else ''}strategy {lab})"
    try:
        s = sc.validate(copy.deepcopy(raw), here)
        # before any point runs, what `cprsim simulate` refuses without --force: a sweep
        # stops at the first replication that cannot run, so a hopeless point would end
        # it anyway, after the points before it had run (a sweep has no --force)
        feasibility.check_budget(s, budget)
        feasibility.check_numbers(s)
        if not s.failures.replay:  # as cprsim simulate: a regime that would never finish
            feasibility.check(s, registry.get(s.strategy.name).planning.kind)
    except sc.ScenarioError as e:
        raise SweepError(str(e)) from None
    except ParameterError as e:  # max_events
        raise e.replace(where=f"{here}: {e.where}" if e.where else here) from None
    except InputError as e:
        raise SweepError(f"{here}: {e}") from None
    return Point(idx, lab, tuple(zip(keys, combo)), sc.effective_dict(s))


def _precision_rule(spec: SweepFile, cap: int, source: str) -> Precision | None:
    """The sweep's adaptive-replication rule (None: fixed replications)."""
    rule = None
    if spec.precision is not None:
        try:
            rule = Precision(
                float(spec.precision), cap, spec.min_replications, metric=spec.precision_metric
            )
        except InputError as e:
            raise SweepError(f"{source}: precision: {e}") from None
    return rule


def _fingerprint(points: list[Point], rule: Precision | None) -> str:
    """The sweep's fingerprint: what its points simulate (and the rule, if adaptive)."""
    ident: dict[str, Any] = {
        "cprsim": __version__,
        # `sources` names the files keys came from, as given: not what a point simulates
        "points": [
            (
                pt.strategy,
                [list(v) for v in pt.values],
                {k: v for k, v in pt.raw.items() if k != "sources"},
            )
            for pt in points
        ],
    }
    if (
        rule is not None
    ):  # (absent otherwise: the fingerprints of fixed-replication sweeps do not change)
        ident["precision"] = rule.as_dict()
    return hashlib.sha256(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()[:16]
