"""Result files read back (for plots and notebooks): never re-runs a simulation.

``load_results(PATH)`` accepts a sweep's output folder (or its ``results.csv``, even while the
sweep still runs: only complete points are used) and a ``cprsim simulate --out`` folder (its
``replications.csv`` becomes one point). Each point is summarized from its replication rows with
the same estimator as ``cprsim simulate`` and the sweep's ``summary.csv`` (mean, 95% Student-t
interval over replications, the P50 and the bad tail of single replications: P90/P99, ETTR's
P10/P1).
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import pandas

from cprsim import metrics
from cprsim.errors import InputError, ParameterError
from cprsim.io import decode_text, read_input_bytes, short
from cprsim.sim.replicate import METRICS, Estimate, Precision, estimate_metric, tail_names

#: summarized per point: the simulator's metrics and the failure-free time W (useful_s)
SUMMARIZED = (*METRICS, "useful_s")
#: columns added with the node lifecycle and tiered checkpoints (issue 16): 0 in a table written
#: before them
OPTIONAL = metrics.OPTIONAL
#: summary.csv's columns of each metric: ``<metric>_<stat>``, the ``Estimate`` attribute of that
#: name; ``p90``, ``p99``: the bad tail, ``p10``, ``p1`` for a metric where higher is better (ETTR)
SUMMARY_STATS = ("mean", "lo", "hi", "p50", "p90", "p99")


def summary_stats(metric: str) -> tuple[str, ...]:
    """summary.csv's statistics of ``metric``: the mean, its 95% CI, the median and the bad tail
    (``p90``, ``p99``; ETTR's ``p10``, ``p1``)."""
    return (*SUMMARY_STATS[:4], *tail_names(metric in metrics.HIGHER_IS_BETTER))


@dataclass(frozen=True)
class PointSummary:
    """One point of a sweep (or a whole ``cprsim simulate`` run): its strategy label, grid values and
    checkpoint interval (hours), and each metric's :class:`~cprsim.sim.replicate.Estimate` over its
    ``n`` replications (``point["overhead"]``: mean, 95% CI, the P50 and the bad tail ``worst10``,
    ``worst1``; times in seconds)."""

    point: int
    strategy: str
    values: dict[str, Any]  #: grid key -> value
    interval_h: float
    n: int
    metrics: dict[str, Estimate]

    def __getitem__(self, metric: str) -> Estimate:
        """The :class:`~cprsim.sim.replicate.Estimate` of one metric (``point["pls"].p90``)."""
        return self.metrics[metric]


@dataclass(frozen=True)
class SweepResults:
    """Summarized results: one :class:`PointSummary` per point (a sweep's grid values x strategies,
    or the single point of a ``cprsim simulate`` run), read back by :func:`load_results`, returned
    by :meth:`cprsim.Sweep.run` or built from replications by :meth:`from_runs`. ``plan``: the
    sweep's ``plan.json`` (if any); ``failure_free_s``: W, the failure-free training time (seconds)."""

    source: Path
    keys: tuple[str, ...]
    points: tuple[PointSummary, ...]
    name: str = ""
    plan: dict[str, Any] | None = None
    failure_free_s: float | None = None
    manifest: dict[str, Any] = field(default_factory=dict)

    @property
    def strategies(self) -> list[str]:
        """The strategy labels of the points, in order of first appearance."""
        return list(dict.fromkeys(p.strategy for p in self.points))

    def varying(self) -> list[str]:
        """Grid keys that take more than one value among the points."""
        return [k for k in self.keys if len({json.dumps(p.values[k]) for p in self.points}) > 1]

    def where(self, conditions: dict[str, Any]) -> SweepResults:
        """The points whose grid values equal ``conditions`` (``{"checkpoint.interval_h": 0.5}``;
        numbers compare to a relative 1e-12). An unknown key raises
        :class:`~cprsim.errors.ParameterError` about ``conditions``; no matching point, an
        InputError."""
        for k in conditions:
            if k not in self.keys:
                raise ParameterError(
                    "conditions",
                    f"not a grid key of {self.source} (keys: {', '.join(self.keys) or 'none'})",
                    key=k,
                )
        pts = tuple(
            p for p in self.points if all(_same(p.values[k], v) for k, v in conditions.items())
        )
        if not pts:
            raise InputError(
                f"{self.source}: no point has {', '.join(f'{k}={v}' for k, v in conditions.items())}"
            )
        return SweepResults(
            self.source, self.keys, pts, self.name, self.plan, self.failure_free_s, self.manifest
        )

    def to_frame(self, stats: tuple[str, ...] | None = None) -> pandas.DataFrame:
        """A pandas DataFrame with one row per point: ``point``, ``strategy``, the grid keys,
        ``interval_h`` (hours), ``n`` (replications), then ``<metric>_<stat>`` for every summarized
        metric: by default ``summary.csv``'s columns (``mean``; ``lo``/``hi``: the 95% CI of the
        mean; ``p50`` and the bad tail of single replications, ``p90``/``p99``, or ETTR's
        ``p10``/``p1``), else the :class:`~cprsim.sim.replicate.Estimate` attributes ``stats``
        (e.g. ``("mean", "worst10")``). Times in seconds, overheads and PLS as fractions.

        pandas is optional: without it this raises an ImportError that names ``pip install pandas``."""
        from cprsim.optional import require_pandas

        pd = require_pandas("SweepResults.to_frame()")
        metrics = list(self.points[0].metrics) if self.points else list(SUMMARIZED)
        per = {m: summary_stats(m) if stats is None else stats for m in metrics}
        cols = ["point", "strategy", *self.keys, "interval_h", "n"]
        cols += [f"{m}_{s}" for m in metrics for s in per[m]]
        rows = []
        for p in self.points:
            row: list[Any] = [
                p.point,
                p.strategy,
                *(p.values.get(k) for k in self.keys),
                p.interval_h,
                p.n,
            ]
            row += [getattr(p.metrics[m], s) for m in metrics for s in per[m]]
            rows.append(row)
        return pd.DataFrame(rows, columns=cols)

    @classmethod
    def from_runs(cls, scenario: Any, results: Any, name: str | None = None) -> SweepResults:
        """One point summarized from replications of one scenario (a list of
        :class:`~cprsim.sim.records.ReplicationResult`), with the estimator :func:`load_results`
        applies to a ``cprsim simulate --out`` folder: what the sweep figures take."""
        if not results:
            raise InputError("no replications to summarize")
        ests = {m: estimate_metric(m, [float(getattr(r, m)) for r in results]) for m in SUMMARIZED}
        pt = PointSummary(
            0, scenario.strategy.name, {}, float(scenario.checkpoint.interval_h), len(results), ests
        )
        return cls(
            Path(f"<{scenario.name}: {len(results)} replications>"),
            (),
            (pt,),
            name or scenario.name,
            None,
            float(scenario.duration_s),
        )


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(float(a), float(b), rel_tol=1e-12)
    return a == b


def _value(text: str) -> Any:
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _read_csv(path: Path) -> tuple[list[str], list[list[str]]]:
    data = read_input_bytes(path, "sweep results table")
    cut = data.rfind(b"\n")  # a sweep still running may have a torn last line
    rows = list(csv.reader(decode_text(data[: cut + 1], short(path)).splitlines()))
    if not rows:
        raise InputError(f"{path}: empty results file")
    return rows[0], rows[1:]


def _summaries(
    path: Path,
    head: list[str],
    rows: list[list[str]],
    keys: list[str],
    expected_n: int | None,
    rule: Precision | None = None,
) -> list[PointSummary]:
    col = {c: i for i, c in enumerate(head)}
    missing = [m for m in SUMMARIZED if m not in col and m not in OPTIONAL]
    if missing:
        raise InputError(f"{path}: not a cprsim results table (no column {missing[0]})")
    groups: dict[int, list[list[str]]] = {}
    for line, r in enumerate(rows, start=2):
        if len(r) != len(head):
            raise InputError(f"{path}:{line}: expected {len(head)} columns, got {len(r)}")
        groups.setdefault(int(r[col["point"]]) if "point" in col else 0, []).append(r)
    out = []
    for i in sorted(groups):
        g = groups[i]
        if expected_n is not None and not point_complete(
            g, col["replication"], expected_n, rule, head
        ):
            continue  # a point still running in a sweep's journal
        first = g[0]
        ests = {}
        for m in SUMMARIZED:
            try:
                ests[m] = estimate_metric(m, [float(r[col[m]]) if m in col else 0.0 for r in g])
            except ValueError:
                raise InputError(f"{path}: column {m}: expected numbers") from None
        out.append(
            PointSummary(
                point=i,
                strategy=first[col["strategy"]] if "strategy" in col else "",
                values={k: _value(first[col[k]]) for k in keys},
                interval_h=float(first[col["interval_h"]]) if "interval_h" in col else math.nan,
                n=len(g),
                metrics=ests,
            )
        )
    return out


def point_complete(
    rows: list[list[str]], rep_col: int, replications: int, rule: Precision | None, head: list[str]
) -> bool:
    """Are these journal rows one whole point? Replications 0 .. m-1 once each, with m the
    replications (or, with adaptive replication, the count where the rule stops on these values:
    a point cut short by a kill has not reached its stop, so the rule asks for more)."""
    m = len(rows)
    if {r[rep_col] for r in rows} != {str(k) for k in range(m)}:
        return False
    if rule is None:
        return m == replications
    col = head.index(rule.metric)
    try:
        values = [float(r[col]) for r in sorted(rows, key=lambda r: int(r[rep_col]))]
    except ValueError:
        return False
    return rule.stop_at(values) == m


def load_results(path: str | Path) -> SweepResults:
    """Read results back without re-running anything: a sweep's output folder (or its
    ``results.csv``, even while the sweep still runs: complete points only) or a ``cprsim simulate
    --out`` folder (one point). Each point summarized like ``cprsim simulate`` (mean, 95% Student-t
    CI, the P50 and the bad tail of single replications; times in seconds)."""
    p = Path(path)
    if p.is_file():
        folder = p.parent
        table = p
    elif p.is_dir():
        folder = p
        table = p / "results.csv" if (p / "results.csv").exists() else p / "replications.csv"
    else:
        raise InputError(f"{p}: no such file or folder")
    if not table.is_file():
        raise InputError(
            f"{p}: no results.csv (a sweep's output) or replications.csv (a simulation's run folder)"
        )
    head, rows = _read_csv(table)
    plan = _json(folder / "plan.json")
    if "point" in head:  # a sweep
        manifest = _json(folder / "manifest.json") or {}
        try:
            keys = head[head.index("strategy") + 1 : head.index("interval_h")]
        except ValueError:
            raise InputError(
                f"{table}: not a sweep's results table (needs strategy and interval_h columns)"
            ) from None
        rule = Precision.from_dict(manifest["precision"]) if manifest.get("precision") else None
        points = _summaries(table, head, rows, keys, manifest.get("replications"), rule)
        W = None
        cfg = folder / "config.toml"
        if cfg.is_file():
            W = _failure_free_s(cfg)
        return SweepResults(
            table, tuple(keys), tuple(points), manifest.get("name", folder.name), plan, W, manifest
        )
    summary = _json(folder / "summary.json")
    if summary is None:
        raise InputError(
            f"{folder}: replications.csv without summary.json: not a simulation's run folder"
        )
    pts = _summaries(table, head, rows, [], None)
    pt = pts[0]
    pt = PointSummary(0, summary["strategy"], {}, float(summary["interval_h"]), pt.n, pt.metrics)
    return SweepResults(
        table, (), (pt,), summary.get("scenario", folder.name), plan, summary.get("failure_free_s")
    )


def _json(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError:
        raise InputError(f"{path}: invalid JSON") from None


def _failure_free_s(cfg: Path) -> float | None:
    from cprsim import scenario as sc

    try:
        return sc.load(str(cfg)).duration_s
    except InputError:
        return None
