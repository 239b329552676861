"""``cprsim access``: the embedding-access skew model."""

from __future__ import annotations

from pathlib import Path

import click

from cprsim.access_report import access_model, coverage_table, parse_samples, touched_table
from cprsim.cli.common import console


@click.command("access")
@click.option(
    "--tables",
    default="criteo-kaggle",
    show_default=True,
    help="'criteo-kaggle' or a CSV with a `rows` column (one line per table).",
)
@click.option(
    "--table-scale",
    type=click.FloatRange(min=1),
    default=1.0,
    show_default=True,
    help="Divide table cardinalities by this.",
)
@click.option(
    "--skew",
    default="0.01:0.92",
    show_default=True,
    metavar="FRACTION:SHARE",
    help="The top FRACTION of rows takes SHARE of accesses (BagPipe: 1% -> 92%).",
)
@click.option("--alpha", type=click.FloatRange(0, 5), help="Zipf exponent (instead of --skew).")
@click.option(
    "--counts",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Fit alpha to a CSV of per-row access counts (columns table,count[,rows]).",
)
@click.option(
    "--samples",
    default="1e3,1e4,1e5,1e6,1e7,1e8",
    show_default=True,
    help="Sample counts for the rows-touched and sampled-coverage columns.",
)
@click.option(
    "--plot", type=click.Path(dir_okay=False, path_type=Path), help="Write a figure (PNG/SVG/PDF)."
)
def command(
    tables: str,
    table_scale: float,
    skew: str,
    alpha: float | None,
    counts: Path | None,
    samples: str,
    plot: Path | None,
) -> None:
    """Coverage c(r) of the top rows, rows touched after n samples, and MFU/SSU ranking noise."""
    m = access_model(tables, table_scale, skew=skew, alpha=alpha, counts=counts)
    ns = parse_samples(samples)
    from rich.table import Table

    con = console()
    con.print(m.describe())
    t = Table(title="coverage of the top fraction r of rows")
    t.add_column("r", justify="right")
    t.add_column("c(r) exact", justify="right")
    for n in ns:
        t.add_column(f"ranked from {n:.0e} samples", justify="right")
    for row in coverage_table(m, ns):
        t.add_row(f"{row.r:g}", f"{row.exact:.4f}", *(f"{c:.4f}" for c in row.sampled))
    con.print(t)
    t2 = Table(title="rows touched (differential-checkpoint dirty fraction)")
    t2.add_column("samples", justify="right")
    t2.add_column("fraction of rows", justify="right")
    for n, f in touched_table(m, ns):
        t2.add_row(f"{n:.0e}", f"{f:.5f}")
    con.print(t2)
    if plot is not None:
        from cprsim.plots import figure_format, save_figure
        from cprsim.plots.access import plot_access

        figure_format(plot)
        save_figure(plot_access(m, ns), plot)
