"""Running a sweep: points on local processes or a Dask cluster, a journal that survives ``kill -9``.

This module sequences a sweep (:func:`run_sweep`); the work is in four modules it calls, each in
one direction: :mod:`cprsim.sweep.points` runs points (scenario in, rows out; no files) on a
backend of :mod:`cprsim.sweep.backends`; :mod:`cprsim.sweep.files` reads and writes the output
folder; :mod:`cprsim.sweep.planning` makes the sweep's ``[plan]``.

**Files** (in the output folder):

* ``results.csv``: one row per (point, replication). While the sweep runs it is a *journal*: each
  point's rows are appended with a single ``write`` + ``fsync`` as soon as the point completes, in
  completion order. When every point is done it is rewritten (temp file + rename) sorted by point
  and replication, so the bytes do not depend on ``--jobs`` or the scheduler.
* ``summary.csv``: one row per point: for every metric (ETTR included), the mean and its 95% CI
  (``<metric>_mean``, ``_lo``, ``_hi``), the P50 and the bad tail of single replications
  (``_p50``, ``_p90``, ``_p99``; ETTR, where higher is better: ``ettr_p10``, ``ettr_p1``: the
  spread of runs, not of the mean); written at the end.
* ``manifest.json``: the sweep's fingerprint, points, seed, the versions of cprsim, Python, numpy,
  scipy and simpy, the SHA-256 of the sweep file; ``sweep.toml``: the sweep file as given;
  ``config.toml``: the effective config of point 0; ``plan.json`` if the sweep asks.
* ``journal.sha256``: a checksum of each row of ``results.csv`` (written before the row), which
  ``--resume`` checks.
* ``results.parquet``, ``summary.parquet`` (``output_format="parquet"``, needs pyarrow): the same
  tables as the CSV files (same columns; a column is int64, float64 or string as all its CSV cells
  read as ints, else as floats, else as text), written at the end in addition to the CSV files.

**Resume.** A sweep killed at any instant (``kill -9`` included) has lost at most the points that
were running: the journal holds whole lines of whole points, except possibly a torn last write,
which ``--resume`` discards (it keeps only points with every replication present and rewrites
the journal atomically before appending). A resumed sweep skips completed points and never
duplicates one. Resuming with a changed sweep file is refused (the fingerprint differs), and so is
a folder changed after the sweep wrote it (:func:`check_out`, :class:`Journal`: a row without its
checksum, a manifest whose points or replications differ, an edited sweep.toml or config.toml, a
file that is not a regular file): one line naming the file and line, saying to start afresh.

**No orphans.** Local workers die with the sweep (:mod:`cprsim.sweep.backends`). An exception
in the sweep (a signal turned into one by ``cprsim sweep``) kills the workers instead of waiting
for their running chunks.

**Reproducibility.** A point's numbers depend only on its scenario (seed included), never on the
worker that ran it: every replication draws from streams named by ``(seed, replication, ...)``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cprsim.io import make_dirs, remove_made_dirs
from cprsim.sweep.backends import (
    Backend,
    DaskBackend,
    Inline,
    LocalWorkers,
    WorkerDied,
    dask_connect,
)
from cprsim.sweep.files import (
    OWN_FILES,
    Journal,
    check_format,
    check_out,
    has_rows,
    journal_of,
    parquet_column,
    remove_own_files,
    remove_stale_temporaries,
    run_summary,
    write_header_files,
    write_parquet,
    write_plan,
    write_summary,
)
from cprsim.sweep.planning import check_plan, sweep_plan
from cprsim.sweep.points import PointRun, schedule
from cprsim.sweep.spec import Sweep, SweepError

__all__ = [
    "Journal",
    "LocalWorkers",
    "Outcome",
    "PointRun",
    "SweepError",
    "check_format",
    "check_out",
    "parquet_column",
    "run_sweep",
    "schedule",
]


@dataclass(frozen=True)
class Outcome:
    """What :func:`run_sweep` did: the output folder, its points and how many this call ran, the
    tables written, and what a resume repaired."""

    out: Path
    points: int
    ran: int  #: points run by this call (the others were already in the journal)
    results: Path
    summary: Path
    repaired: tuple[
        str, ...
    ] = ()  #: what a resume repaired (missing header files, stale temporaries)
    parquet: tuple[Path, ...] = ()  #: the Parquet tables written (``output_format="parquet"``)


def run_sweep(
    sweep: Sweep,
    out: Path,
    *,
    jobs: int = 1,
    scheduler: str | None = None,
    dask_local: int | None = None,
    resume: bool = False,
    progress: Callable[[int], None] | None = None,
    resumed: Callable[[int], None] | None = None,
    sweep_text: bytes | None = None,
    workers: LocalWorkers | None = None,
    output_format: str = "csv",
    connect_timeout: float = 10.0,
) -> Outcome:
    """Run (or finish) a sweep into ``out``. Identical files whatever the backend.

    Nothing is created before the inputs and the backend are checked. The header files are
    written sweep.toml, config.toml, then manifest.json (the marker that a sweep lives here); a
    resume rewrites a missing sweep.toml or config.toml and removes the temporary files an
    interrupted write left (``Outcome.repaired`` says what it repaired). ``workers``: local worker
    processes already started (:class:`LocalWorkers`; default: started here for ``jobs > 1``).
    ``output_format="parquet"``: also write results.parquet and summary.parquet (needs pyarrow,
    checked before anything is created). ``connect_timeout``: seconds to reach ``scheduler``.
    ``progress(n)``: called as points complete; ``resumed(n)``: once, with the points a resume
    found complete (default: ``progress``).
    An exception while points run (a signal that ``cprsim sweep`` turns into one included) kills
    the workers started here (and a Dask cluster's) and leaves the journal for ``--resume``."""
    check_format(output_format)
    check_out(sweep, out, resume)
    check_plan(sweep)
    connection = (
        dask_connect(scheduler, dask_local, connect_timeout)
        if scheduler is not None or dask_local is not None
        else None
    )
    fresh = not (out / "manifest.json").exists()
    before = {n for n in OWN_FILES if os.path.lexists(out / n)}  # (a user's sweep.toml, say)
    made = make_dirs(out)
    try:
        return _run_into(
            sweep, out, jobs, progress, resumed, sweep_text, workers, output_format, connection
        )
    except (Exception, KeyboardInterrupt) as e:
        # a failure leaves nothing behind; a signal (a KeyboardInterrupt: cprsim sweep's SIGTERM
        # too) or a dead worker leaves the journal to resume, once there is one (the manifest
        # comes first)
        if fresh and not (
            (isinstance(e, (KeyboardInterrupt, WorkerDied)) or has_rows(out))
            and (out / "manifest.json").exists()
        ):
            remove_own_files(out, keep=before)
            remove_made_dirs(made)
        raise


def _run_into(
    sweep: Sweep,
    out: Path,
    jobs: int,
    progress: Callable[[int], None] | None,
    resumed: Callable[[int], None] | None,
    sweep_text: bytes | None,
    workers: LocalWorkers | None,
    output_format: str,
    connection: tuple[Any, Any] | None,
) -> Outcome:
    """:func:`run_sweep` once ``out`` exists and its inputs are checked."""
    repaired = remove_stale_temporaries(out)
    repaired += write_header_files(sweep, out, sweep_text)
    journal = journal_of(sweep, out)
    if journal.path.exists():
        done, order = journal.read()
        journal.rewrite(done, order)  # drops a torn tail or an incomplete point, atomically
    else:
        done, order = {}, []
        journal.rewrite(done, order)
    todo = [p for p in sweep.points if p.index not in done]
    tell = resumed if resumed is not None else progress
    if tell is not None and done:
        tell(len(done))
    parallel = connection is not None or workers is not None or (jobs > 1 and len(todo) > 0)
    runs = [PointRun(p, sweep.replications, sweep.precision) for p in todo]
    own = None
    if connection is not None:
        backend: Backend = DaskBackend(*connection)
    elif workers is not None:
        backend = workers
    elif parallel:
        backend = own = LocalWorkers(jobs)
    else:
        backend = Inline()
    ran: dict[int, tuple[str, bytes]] = {}  # this call's points: their rows' text, checksums
    ready: dict[int, list[Any]] = {}  # and their summary rows, made while the others run
    finished = False
    try:
        for r in schedule(runs, backend, sweep.fingerprint):
            text = r.text()
            sums = journal.seal(text)  # the checksums first: every complete row has one
            journal.append(text)
            ran[r.point.index] = (text, sums)
            ready[r.point.index] = run_summary(r, text)
            r.rows.clear()
            if progress is not None:
                progress(1)
        finished = True
    finally:
        if own is not None or connection is not None:
            backend.close(abort=not finished)
    missing = [p.index for p in sweep.points if p.index not in done and p.index not in ran]
    if missing:  # pragma: no cover - a backend that lost points silently
        raise SweepError(f"{out}: points {missing[:5]} did not complete; resume the sweep")
    # sorted by point, from what is in memory: the journal as appended, not read back
    journal.finish(done, ran)
    write_summary(sweep, out / "summary.csv", done, ready)
    parquet: list[Path] = []
    if output_format == "parquet":
        for name in ("results", "summary"):
            parquet.append(write_parquet(out / f"{name}.csv", out / f"{name}.parquet"))
    if sweep.plan is not None and not (out / "plan.json").exists():
        write_plan(out / "plan.json", sweep_plan(sweep))
    return Outcome(
        out,
        len(sweep.points),
        len(todo),
        journal.path,
        out / "summary.csv",
        tuple(repaired),
        tuple(parquet),
    )
