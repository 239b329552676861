"""``cprsim sweep``: a factorial what-if grid on local processes or a Dask cluster, resumable."""

from __future__ import annotations

import contextlib
import signal
from pathlib import Path
from typing import TYPE_CHECKING

import click

from cprsim.cli.common import console, max_events_option, model_option
from cprsim.cli.progress import (
    Interrupted,
    Progress,
    Signalled,
    Terminated,
    signals_raise,
    stopped,
)
from cprsim.io import read_input_bytes

if TYPE_CHECKING:  # pragma: no cover - imported where used (`cprsim --help` imports neither)
    from cprsim.sweep import Outcome, Sweep

__all__ = ["Interrupted", "Terminated", "command"]


@click.command("sweep")
@click.argument("sweep_file", metavar="SWEEP.toml", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--jobs",
    "-j",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Local worker processes (started at once and kept; a point's replications are split "
    "across them when points are few, small points batched together).",
)
@click.option(
    "--scheduler",
    metavar="tcp://HOST:PORT",
    help="Run on this Dask distributed scheduler instead of local processes.",
)
@click.option(
    "--dask-local",
    type=click.IntRange(min=1),
    metavar="N",
    help="Start a Dask LocalCluster of N worker processes on loopback and run there.",
)
@click.option(
    "--connect-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=10.0,
    show_default=True,
    metavar="SECONDS",
    help="How long to try reaching --scheduler before giving up (nothing is written "
    "before it answers).",
)
@click.option("--resume", is_flag=True, help="Finish a sweep in --out: skip its completed points.")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    help="Output folder (default: out/<sweep name>).",
)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["csv", "parquet"]),
    default="csv",
    show_default=True,
    help="parquet: also write results.parquet and summary.parquet (the same tables, typed columns; "
    "needs pip install 'cprsim[parquet]'). results.csv and summary.csv are always written "
    "(`cprsim plot` reads them).",
)
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="Extra fixed override for every point (dotted, TOML value), like the sweep's [set].",
)
@click.option(
    "--precision",
    type=click.FloatRange(min=0, min_open=True),
    metavar="REL",
    help="Adaptive replication (replaces the file's `precision`): each point runs replications until "
    "the 95% CI half-width of its mean `precision_metric` (default overhead) is within REL of "
    "the mean, checked after --min-replications and every 10 more in replication order; the "
    "sweep's `replications` is then the most.",
)
@click.option(
    "--min-replications",
    type=click.IntRange(min=2),
    help="With adaptive replication: replications before the first check (default: the file's "
    "`min_replications`, else 20).",
)
@model_option
@max_events_option
def command(
    sweep_file: Path,
    jobs: int,
    scheduler: str | None,
    dask_local: int | None,
    connect_timeout: float,
    resume: bool,
    out: Path | None,
    output_format: str,
    overrides: tuple[str, ...],
    precision: float | None,
    min_replications: int | None,
    model: str | None,
    max_events: float,
) -> None:
    """Run every combination of a sweep file's grid values x strategies x replications.

    Results are appended to OUT/results.csv as each point completes; a killed sweep is finished
    with --resume (nothing written is lost, nothing is run twice). The files are identical
    whatever --jobs or the scheduler, with or without adaptive replication (--precision, or
    `precision` in the file). Then draw them with `cprsim plot`.

    SIGTERM or Ctrl-C stops the workers at once and exits with 128 + the signal's number; the
    points completed are kept (finish with --resume). Workers never outlive the sweep, even
    killed with kill -9.
    """
    from cprsim import scenario as sc
    from cprsim.sim import strategies
    from cprsim.sweep import load_sweep
    from cprsim.sweep.runner import check_format, check_out

    strategies.ensure_loaded()  # a broken plugin is one line here, whatever --jobs

    if scheduler is not None and dask_local is not None:
        raise click.UsageError("give --scheduler or --dask-local, not both")
    sw = load_sweep(
        sweep_file,
        sc.parse_set(overrides),
        max_events=max_events,
        precision=precision,
        min_replications=min_replications,
        model=model,
    )
    if min_replications is not None and sw.precision is None:
        raise click.UsageError(
            "--min-replications needs --precision (or `precision` in the sweep file)"
        )
    out = out if out is not None else Path("out") / sw.name
    check_format(output_format)
    check_out(sw, out, resume)
    n = len(sw.points)
    bar = Progress(n, f"sweep {sw.name}", "points")
    if bar.mode != "off":  # with the progress: on a terminal, and in a log
        _announce(sw, jobs, scheduler, dask_local)
    sweep_text = read_input_bytes(sweep_file, "sweep file", "config")
    res = _run(
        sw,
        out,
        bar,
        jobs,
        scheduler,
        dask_local,
        resume,
        sweep_text,
        output_format,
        connect_timeout,
    )
    con = console()
    if res.repaired:
        con.print(f"resume repaired {out}: {', '.join(res.repaired)}")
    con.print(
        f"{res.points} points ({res.ran} run now, {res.points - res.ran} already done) -> "
        f"{', '.join(str(f) for f in (res.results, res.summary, *res.parquet))}"
    )


def _announce(sw: Sweep, jobs: int, scheduler: str | None, dask_local: int | None) -> None:
    """One line on stderr: the points, replications, seed, and where they run."""
    where = (
        f"Dask scheduler {scheduler}"
        if scheduler
        else f"Dask LocalCluster ({dask_local} workers)"
        if dask_local
        else f"{jobs} local process{'es' if jobs > 1 else ''}"
    )
    reps = (
        f"{sw.replications} replications"
        if sw.precision is None
        else f"{sw.precision.first_look}-{sw.replications} replications ({sw.precision.describe()})"
    )
    click.echo(
        f"{sw.name}: {len(sw.points)} points ({len(sw.keys)} grid keys x {len(sw.strategies)} "
        f"strategies) x {reps}, seed {sw.seed}, on {where}",
        err=True,
    )


def _run(
    sw: Sweep,
    out: Path,
    bar: Progress,
    jobs: int,
    scheduler: str | None,
    dask_local: int | None,
    resume: bool,
    sweep_text: bytes,
    output_format: str,
    connect_timeout: float,
) -> Outcome:
    """Run the sweep with its progress; a signal stops the workers and says what is kept."""
    from cprsim.sweep import run_sweep
    from cprsim.sweep.runner import LocalWorkers

    try:
        with signals_raise(), contextlib.ExitStack() as stack:
            # local workers start before the progress bar's thread: they can then be forked, warm;
            # leaving on an exception (a signal) kills them
            workers = (
                stack.enter_context(LocalWorkers(jobs))
                if jobs > 1 and scheduler is None and dask_local is None
                else None
            )
            with bar:
                return run_sweep(
                    sw,
                    out,
                    jobs=jobs,
                    scheduler=scheduler,
                    dask_local=dask_local,
                    resume=resume,
                    progress=bar.advance,
                    resumed=bar.resumed,
                    sweep_text=sweep_text,
                    workers=workers,
                    output_format=output_format,
                    connect_timeout=connect_timeout,
                )
    except Signalled as e:
        name = signal.Signals(e.signum).name
        if not (out / "manifest.json").exists():
            raise stopped(f"{name}: sweep stopped before writing anything", e.signum) from None
        raise stopped(
            f"{name}: sweep stopped, workers ended; {bar.done} of {len(sw.points)} points complete "
            f"in {out} (finish with --resume)",
            e.signum,
        ) from None
