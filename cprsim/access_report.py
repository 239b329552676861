"""What ``cprsim access`` reports about the embedding-access skew model, callable from Python.

    from cprsim.access_report import access_model, coverage_table, touched_table

    m = access_model(skew=(0.01, 0.92))          # BagPipe: the top 1% of rows take 92% of accesses
    for row in coverage_table(m, [1e4, 1e6]):
        print(row.r, row.exact, row.sampled)

Fractions everywhere: ``r`` a fraction of the rows, coverage ``c(r)`` the share of accesses the
top ``r`` of rows take, the share of rows touched; sample counts are numbers of training samples.
The figure is :func:`cprsim.plots.access.plot_access`; :func:`scenario_access_lines` is what
``cprsim show`` says about a scenario's embedding rows.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from cprsim.access import AccessModel, table_sizes
from cprsim.errors import ParameterError

if TYPE_CHECKING:  # pragma: no cover - the scenario model imports pydantic
    from cprsim.scenario import Scenario

#: the fractions of rows the coverage table has a row for
COVERAGE_R = (0.001, 0.01, 0.05, 0.1, 0.2, 0.5)
#: the sample counts of ``cprsim access``'s columns by default
DEFAULT_SAMPLES = (1e3, 1e4, 1e5, 1e6, 1e7, 1e8)


def parse_skew(skew: str | tuple[float, float]) -> tuple[float, float]:
    """``(fraction, share)`` from ``"FRACTION:SHARE"`` (``"0.01:0.92"``) or a pair; anything else
    raises :class:`cprsim.errors.ParameterError` naming ``skew``."""
    if isinstance(skew, str):
        try:
            fraction, share = (float(x) for x in skew.split(":"))
        except ValueError:
            raise ParameterError("skew", f"{skew!r} is not FRACTION:SHARE like 0.01:0.92") from None
        return fraction, share
    try:
        fraction, share = (float(x) for x in skew)
    except (TypeError, ValueError):
        raise ParameterError("skew", f"{skew!r} is not a pair (fraction, share)") from None
    return fraction, share


def parse_samples(samples: str | Sequence[float]) -> list[float]:
    """Sample counts from a comma-separated list (``"1e3,1e6"``) or a sequence of numbers;
    anything else raises :class:`cprsim.errors.ParameterError` naming ``samples``."""
    if isinstance(samples, str):
        try:
            return [float(x) for x in samples.split(",")]
        except ValueError:
            raise ParameterError(
                "samples", f"{samples!r} is not a comma-separated list of numbers"
            ) from None
    try:
        return [float(x) for x in samples]
    except (TypeError, ValueError):
        raise ParameterError("samples", f"{samples!r} is not a list of numbers") from None


def access_model(
    tables: str = "criteo-kaggle",
    table_scale: float = 1.0,
    *,
    skew: str | tuple[float, float] = (0.01, 0.92),
    alpha: float | None = None,
    counts: str | os.PathLike[str] | None = None,
) -> AccessModel:
    """The Zipf access model ``cprsim access`` describes, from the first of these given:

    * ``counts``: a CSV of per-row access counts (columns ``table,count[,rows]``): alpha fitted
      to them (``tables`` and the rest are then not used);
    * ``alpha``: the Zipf exponent, over the tables ``tables``;
    * ``skew``: ``(fraction, share)`` or ``"FRACTION:SHARE"``: the top ``fraction`` of rows takes
      ``share`` of the accesses (both in (0, 1)), over the tables ``tables``.

    ``tables``: ``"criteo-kaggle"`` (its 26 tables) or a CSV with a ``rows`` column (one line per
    table); ``table_scale``: divide the table cardinalities by this (>= 1). Checked in that order:
    the counts file, the tables, then the skew.
    """
    if counts is not None:
        return AccessModel.fit_counts(counts)
    sizes = table_sizes(tables, table_scale)
    if alpha is not None:
        return AccessModel(sizes, alpha)
    fraction, share = parse_skew(skew)
    return AccessModel.from_skew(sizes, fraction, share)


@dataclass(frozen=True)
class CoverageRow:
    """One row of the coverage table: ``r`` (a fraction of the rows), ``exact`` (the share of
    accesses the true top ``r`` of rows take, c(r)) and ``sampled`` (the share they take when the
    rows are ranked from each of the sample counts' observed accesses, as MFU/SSU do)."""

    r: float
    exact: float
    sampled: tuple[float, ...]


def coverage_table(
    model: AccessModel, samples: Sequence[float], fractions: Sequence[float] = COVERAGE_R
) -> list[CoverageRow]:
    """The coverage of the top fraction r of rows, one :class:`CoverageRow` per r of
    ``fractions``: exact, and ranked from each sample count of ``samples``."""
    return [
        CoverageRow(
            r,
            model.coverage(r),
            tuple(model.sampled_coverage(r, n) for n in samples),
        )
        for r in fractions
    ]


def touched_table(model: AccessModel, samples: Sequence[float]) -> list[tuple[float, float]]:
    """``(samples, fraction of rows touched)`` per sample count: the expected share of rows
    accessed at least once (the dirty fraction a differential checkpoint saves)."""
    touched = np.atleast_1d(model.touched(np.asarray(list(samples), dtype=float)))
    return [(n, float(f)) for n, f in zip(samples, touched)]


def scenario_access_lines(scenario: Scenario) -> list[str]:
    """What the access model derives from ``scenario``, in sentences (``cprsim show`` prints them):
    the embedding rows (count, tables, dimension, bytes per parameter, GB), the access skew (Zipf
    alpha, the share of accesses the top 1% of rows take) and the rows touched per checkpoint
    interval (with ``job.samples_per_s``; as a percentage of the rows, with the share of the
    interval's updates MFU's top 1%/5% protect)."""
    from cprsim import access

    s = scenario
    if s.cluster.embedding_gb <= 0 or s.cluster.embedding_servers == 0:
        return ["embedding rows: none (no embedding tables: a dense model)"]
    lay, model = access.layout(s), access.of(s)
    how = (
        "rows from embedding_gb / (dim x bytes_per_param)"
        if lay.derived == "rows"
        else "dim from embedding_gb / (rows x bytes_per_param)"
    )
    out = [
        f"embedding rows: {lay.rows:,} in {len(lay.tables)} tables x {lay.dim:.4g} dims x "
        f"{lay.bytes_per_param:g} B = {lay.rows * lay.row_bytes / 1e9:.4g} GB ({how})",
        f"access skew: Zipf alpha {model.alpha:.4f}; the top 1% of rows take {100 * model.coverage(0.01):.1f}% of "
        "accesses",
    ]
    if s.job.samples_per_s is None:
        out.append("rows touched per checkpoint interval: unknown (give job.samples_per_s)")
    else:
        n = s.interval_s * s.job.samples_per_s
        out.append(
            f"rows touched per checkpoint interval ({s.checkpoint.interval_h:g} h = {n:.3g} samples): "
            f"{100 * float(model.touched(n)):.3g}%; MFU's top 1%/5% protect "
            f"{100 * model.in_sample_coverage(0.01, n):.4g}%/{100 * model.in_sample_coverage(0.05, n):.4g}% "
            "of the interval's updates"
        )
    return out
