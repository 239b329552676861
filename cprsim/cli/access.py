"""``cprsim access``: the embedding-access skew model."""

from __future__ import annotations

from pathlib import Path

import click
import numpy as np

from cprsim.access import AccessModel, table_sizes
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
    if counts is not None:
        m = AccessModel.fit_counts(counts)
    else:
        sizes = table_sizes(tables, table_scale)
        if alpha is not None:
            m = AccessModel(sizes, alpha)
        else:
            try:
                frac, share = (float(x) for x in skew.split(":"))
            except ValueError:
                raise click.BadParameter(
                    f"{skew!r} is not FRACTION:SHARE like 0.01:0.92", param_hint="--skew"
                ) from None
            m = AccessModel.from_skew(sizes, frac, share)
    try:
        ns = [float(x) for x in samples.split(",")]
    except ValueError:
        raise click.BadParameter(
            f"{samples!r} is not a comma-separated list of numbers", param_hint="--samples"
        ) from None
    from rich.table import Table

    con = console()
    con.print(m.describe())
    t = Table(title="coverage of the top fraction r of rows")
    t.add_column("r", justify="right")
    t.add_column("c(r) exact", justify="right")
    for n in ns:
        t.add_column(f"ranked from {n:.0e} samples", justify="right")
    for r in (0.001, 0.01, 0.05, 0.1, 0.2, 0.5):
        t.add_row(
            f"{r:g}", f"{m.coverage(r):.4f}", *(f"{m.sampled_coverage(r, n):.4f}" for n in ns)
        )
    con.print(t)
    t2 = Table(title="rows touched (differential-checkpoint dirty fraction)")
    t2.add_column("samples", justify="right")
    t2.add_column("fraction of rows", justify="right")
    for n, f in zip(ns, np.atleast_1d(m.touched(ns))):
        t2.add_row(f"{n:.0e}", f"{f:.5f}")
    con.print(t2)
    if plot is not None:
        import matplotlib.pyplot as plt

        from cprsim.plots import figure_format, save_figure

        figure_format(plot)
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
        r = np.geomspace(1e-5, 1, 200)
        a1.semilogx(r, m.coverage(r), label="exact ranking")
        for n in ns[::2]:
            a1.semilogx(
                r[::10],
                [m.sampled_coverage(x, n) for x in r[::10]],
                "--",
                label=f"ranked from {n:.0e} samples",
            )
        a1.set_xlabel("top fraction of rows r")
        a1.set_ylabel("share of accesses c(r)")
        a1.legend(fontsize=8)
        a1.set_title(f"coverage (Zipf alpha={m.alpha:.3f})")
        nn = np.geomspace(1e2, 1e9, 40)
        a2.loglog(nn, m.touched(nn))
        a2.set_xlabel("samples")
        a2.set_ylabel("fraction of rows touched")
        a2.set_title("rows touched after n samples")
        fig.tight_layout()
        save_figure(fig, plot)
