"""``cprsim sweep``: a factorial what-if grid on local processes or a Dask cluster, resumable."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from cprsim.cli.common import console, max_events_option, progress_bar


@click.command("sweep")
@click.argument("sweep_file", metavar="SWEEP.toml", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=1, show_default=True,
              help="Local worker processes.")
@click.option("--scheduler", metavar="tcp://HOST:PORT",
              help="Run on this Dask distributed scheduler instead of local processes.")
@click.option("--dask-local", type=click.IntRange(min=1), metavar="N",
              help="Start a Dask LocalCluster of N worker processes on loopback and run there.")
@click.option("--resume", is_flag=True, help="Finish a sweep in --out: skip its completed points.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              help="Output folder (default: out/<sweep name>).")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="Extra fixed override for every point (dotted, TOML value), like the sweep's [set].")
@max_events_option
def command(sweep_file: Path, jobs: int, scheduler: str | None, dask_local: int | None, resume: bool,
            out: Path | None, sets: tuple[str, ...], max_events: float) -> None:
    """Run every combination of a sweep file's grid values x strategies x replications.

    Results are appended to OUT/results.csv as each point completes; a killed sweep is finished
    with --resume (nothing written is lost, nothing is run twice). The files are identical
    whatever --jobs or the scheduler. Then draw them with `cprsim plot`.
    """
    from cprsim import scenario as sc
    from cprsim.sweep import load_sweep, run_sweep
    from cprsim.sweep.runner import check_out

    if scheduler is not None and dask_local is not None:
        raise click.UsageError("give --scheduler or --dask-local, not both")
    sw = load_sweep(sweep_file, sc.parse_set(sets), max_events=max_events)
    out = out if out is not None else Path("out") / sw.name
    check_out(sw, out, resume)
    n = len(sw.points)
    where = (f"Dask scheduler {scheduler}" if scheduler else f"Dask LocalCluster ({dask_local} workers)"
             if dask_local else f"{jobs} local process{'es' if jobs > 1 else ''}")
    if sys.stderr.isatty():
        click.echo(f"{sw.name}: {n} points ({len(sw.keys)} grid keys x {len(sw.strategies)} strategies) x "
                   f"{sw.replications} replications, seed {sw.seed}, on {where}", err=True)
    with progress_bar(n, f"sweep {sw.name}") as advance:
        res = run_sweep(sw, out, jobs=jobs, scheduler=scheduler, dask_local=dask_local, resume=resume,
                        progress=advance, sweep_text=sweep_file.read_bytes())
    con = console()
    if res.repaired:
        con.print(f"resume repaired {out}: {', '.join(res.repaired)}")
    con.print(f"{res.points} points ({res.ran} run now, {res.points - res.ran} already done) -> "
              f"{res.results}, {res.summary}")
