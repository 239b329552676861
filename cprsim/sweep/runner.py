"""Running a sweep: points on local processes or a Dask cluster, a journal that survives ``kill -9``.

**Files** (in the output folder):

* ``results.csv``: one row per (point, replication). While the sweep runs it is a *journal*: each
  point's rows are appended with a single ``write`` + ``fsync`` as soon as the point completes, in
  completion order. When every point is done it is rewritten (temp file + rename) sorted by point
  and replication, so the bytes do not depend on ``--jobs`` or the scheduler.
* ``summary.csv``: one row per point: for every metric (ETTR included), the mean and its 95% CI
  (``<metric>_mean``, ``_lo``, ``_hi``) and the P50/P90/P99 of single replications
  (``_p50``, ``_p90``, ``_p99``: the spread of runs, not of the mean); written at the end.
* ``manifest.json``: the sweep's fingerprint, points, seed, version; ``sweep.toml``: the sweep file
  as given; ``config.toml``: the effective config of point 0; ``plan.json`` if the sweep asks.

**Resume.** A sweep killed at any instant (``kill -9`` included) has lost at most the points that
were running: the journal holds whole lines of whole points, except possibly a torn last write,
which ``--resume`` discards (it keeps only points with every replication present and rewrites
the journal atomically before appending). A resumed sweep skips completed points and never
duplicates one. Resuming with a changed sweep file is refused (the fingerprint differs).

**Reproducibility.** A point's numbers depend only on its scenario (seed included), never on the
worker that ran it: every replication draws from streams named by ``(seed, replication, ...)``.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from cprsim import __version__
from cprsim import scenario as sc
from cprsim.errors import InputError
from cprsim.io import atomic_write_bytes, atomic_write_json, atomic_write_text, csv_text, short
from cprsim.sim.records import ReplicationResult
from cprsim.sim.replicate import METRICS, estimate, run_replications
from cprsim.sweep.spec import Point, Sweep, SweepError

log = logging.getLogger(__name__)

RESULT_METRICS = [c for c in ReplicationResult.columns() if c != "replication"]

#: a unit of work: (point index, prefix cells of its rows, the point's raw scenario)
Task = tuple[int, tuple[Any, ...], dict[str, Any]]


def _cell(v: Any) -> Any:
    return v if isinstance(v, (int, float, str)) and not isinstance(v, bool) else json.dumps(v)


def header(sweep: Sweep) -> list[str]:
    return ["point", "strategy", *sweep.keys, "interval_h", "replication", *RESULT_METRICS]


def tasks(points: Sequence[Point]) -> list[Task]:
    return [(p.index, (p.index, p.strategy, *(_cell(v) for _, v in p.values), p.raw["checkpoint"]["interval_h"]),
             p.raw) for p in points]


def run_point(index: int, prefix: tuple[Any, ...], raw: dict[str, Any]) -> tuple[int, str]:
    """Every replication of one point, as CSV rows (no header). Runs in a worker process."""
    s = sc.validate(dict(raw), f"point {index}")
    results, _ = run_replications(s)
    rows = ([*prefix, r.replication, *(getattr(r, c) for c in RESULT_METRICS)] for r in results)
    return index, csv_text(None, rows)


def _version() -> str:
    import cprsim

    return cprsim.__version__


# -- backends: each yields (index, rows) as points complete ---------------------------------------
def _serial(work: list[Task]) -> Iterator[tuple[int, str]]:
    for t in work:
        yield run_point(*t)


def _processes(work: list[Task], jobs: int) -> Iterator[tuple[int, str]]:
    # forkserver: workers fork from a clean server process that has imported the simulator once,
    # so they start fast and inherit no threads or locks from this process (a progress bar's, dask's)
    ctx = get_context("forkserver")
    ctx.set_forkserver_preload(["cprsim.sweep.runner"])
    ex = ProcessPoolExecutor(max_workers=jobs, mp_context=ctx)
    try:
        futures = [ex.submit(run_point, *t) for t in work]
        for f in as_completed(futures):
            yield f.result()
    finally:
        ex.shutdown(wait=True, cancel_futures=True)


def _dask_connect(scheduler: str | None, local_workers: int | None) -> tuple[Any, Any]:
    """A connected Dask client (and its LocalCluster, if one was started), checked before the
    sweep writes anything: a missing extra, an unreachable scheduler or workers running another
    cprsim version are one-line errors and leave no output folder behind."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise InputError("a Dask scheduler needs the distributed extra: pip install 'cprsim[distributed]'") from None
    quiet = max(logging.WARNING, logging.getLogger().getEffectiveLevel())
    for name in ("distributed", "distributed.scheduler", "distributed.nanny", "distributed.worker",
                 "distributed.core", "distributed.http.proxy"):
        logging.getLogger(name).setLevel(quiet)  # dask logs every worker start at INFO
    cluster = client = None
    try:
        if local_workers is not None:
            cluster = LocalCluster(n_workers=local_workers, threads_per_worker=1, processes=True,
                                   host="127.0.0.1", dashboard_address="127.0.0.1:0", silence_logs=logging.ERROR)
            client = Client(cluster)
        else:
            try:
                client = Client(scheduler, timeout="10s")
            except (OSError, ValueError, TypeError) as e:
                raise InputError(f"--scheduler {short(scheduler)}: cannot connect ({short(e, 120)})") from None
        versions = {str(v) for v in client.run(_version).values()}
        if versions != {__version__}:
            raise InputError(f"Dask workers run cprsim {', '.join(sorted(versions)) or '(none)'}, this client "
                             f"{__version__}: install the same version on every worker")
        return client, cluster
    except BaseException:
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()
        raise


def _dask(work: list[Task], client: Any, cluster: Any) -> Iterator[tuple[int, str]]:
    from distributed import as_completed as dask_completed

    try:
        futures = [client.submit(run_point, *t, pure=False) for t in work]
        for f in dask_completed(futures):
            yield f.result()
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


# -- the journal --------------------------------------------------------------------------------
@dataclass
class Journal:
    path: Path
    head: list[str]
    replications: int

    def read(self) -> tuple[dict[int, list[list[str]]], list[int]]:
        """Complete points' rows (by point) and the order they were written in; torn tails dropped."""
        data = self.path.read_bytes()
        cut = data.rfind(b"\n")
        text = data[: cut + 1].decode("utf-8") if cut >= 0 else ""
        rows = list(csv.reader(io.StringIO(text)))
        if not rows or rows[0] != self.head:
            raise SweepError(f"{self.path}: not the results table of this sweep (header differs)")
        by_point: dict[int, list[list[str]]] = {}
        order: list[int] = []
        for r in rows[1:]:
            if len(r) != len(self.head):
                continue
            try:
                i = int(r[0])
            except ValueError:
                continue
            if i not in by_point:
                by_point[i] = []
                order.append(i)
            by_point[i].append(r)
        rep_col = self.head.index("replication")
        want = {str(k) for k in range(self.replications)}
        complete = {i: rs for i, rs in by_point.items()
                    if len(rs) == self.replications and {r[rep_col] for r in rs} == want}
        return complete, [i for i in order if i in complete]

    def rewrite(self, points: dict[int, list[list[str]]], order: Sequence[int]) -> None:
        atomic_write_text(self.path, csv_text(self.head, (r for i in order for r in points[i])))

    def append(self, text: str) -> None:
        data = text.encode("utf-8")
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        try:
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            os.fsync(fd)
        finally:
            os.close(fd)


@dataclass(frozen=True)
class Outcome:
    out: Path
    points: int
    ran: int  #: points run by this call (the others were already in the journal)
    results: Path
    summary: Path
    repaired: tuple[str, ...] = ()  #: what a resume repaired (missing header files, stale temporaries)


def run_sweep(
    sweep: Sweep,
    out: Path,
    *,
    jobs: int = 1,
    scheduler: str | None = None,
    dask_local: int | None = None,
    resume: bool = False,
    progress: Callable[[int], None] | None = None,
    sweep_text: bytes | None = None,
) -> Outcome:
    """Run (or finish) a sweep into ``out``. Identical files whatever the backend.

    Nothing is created before the inputs and the backend are checked. The header files are
    written sweep.toml, config.toml, then manifest.json (the marker that a sweep lives here); a
    resume rewrites a missing sweep.toml or config.toml and removes the temporary files an
    interrupted write left (``Outcome.repaired`` says what it repaired)."""
    check_out(sweep, out, resume)
    connection = _dask_connect(scheduler, dask_local) if scheduler is not None or dask_local is not None else None
    out.mkdir(parents=True, exist_ok=True)
    repaired = _remove_stale_temporaries(out)
    head = header(sweep)
    journal = Journal(out / "results.csv", head, sweep.replications)
    manifest_path = out / "manifest.json"
    manifest = {
        "cprsim_version": __version__, "name": sweep.name, "description": sweep.description,
        "source": sweep.source, "fingerprint": sweep.fingerprint, "seed": sweep.seed,
        "replications": sweep.replications, "keys": list(sweep.keys), "strategies": list(sweep.strategies),
        "points": [{"point": p.index, "strategy": p.strategy, "values": {k: v for k, v in p.values}}
                   for p in sweep.points],
    }
    fresh = not manifest_path.exists()
    if sweep_text is not None and not (out / "sweep.toml").exists():
        atomic_write_bytes(out / "sweep.toml", sweep_text)
        if not fresh:
            repaired.append("sweep.toml")
    if not (out / "config.toml").exists():
        atomic_write_text(out / "config.toml", sc.to_toml(sweep.points[0].raw))
        if not fresh:
            repaired.append("config.toml")
    if fresh:
        atomic_write_json(manifest_path, manifest)
    if journal.path.exists():
        done, order = journal.read()
        journal.rewrite(done, order)  # drops a torn tail or an incomplete point, atomically
    else:
        done, order = {}, []
        atomic_write_text(journal.path, csv_text(head, []))
    todo = [p for p in sweep.points if p.index not in done]
    if progress is not None and done:
        progress(len(done))
    work = tasks(todo)
    if connection is not None:
        stream = _dask(work, *connection)
    elif jobs > 1 and len(work) > 1:
        stream = _processes(work, min(jobs, len(work)))
    else:
        stream = _serial(work)
    for _, rows in stream:
        journal.append(rows)
        if progress is not None:
            progress(1)
    done, _ = journal.read()
    missing = [p.index for p in sweep.points if p.index not in done]
    if missing:  # pragma: no cover - a backend that lost points silently
        raise SweepError(f"{out}: points {missing[:5]} did not complete; run again with --resume")
    journal.rewrite(done, sorted(done))
    _write_summary(sweep, out / "summary.csv", done)
    if sweep.plan is not None and not (out / "plan.json").exists():
        _write_plan(sweep, out / "plan.json")
    return Outcome(out, len(sweep.points), len(todo), journal.path, out / "summary.csv", tuple(repaired))


#: the files a sweep writes (their temporaries are ``.<name>.<random>.tmp`` beside them)
OWN_FILES = ("results.csv", "summary.csv", "manifest.json", "sweep.toml", "config.toml", "plan.json")


def _remove_stale_temporaries(out: Path) -> list[str]:
    """Temporary files an interrupted atomic write left in ``out`` (only the sweep's own)."""
    gone = []
    for name in OWN_FILES:
        for tmp in out.glob(f".{name}.*.tmp"):
            tmp.unlink(missing_ok=True)
            gone.append(f"removed {tmp.name}")
    return gone


def check_out(sweep: Sweep, out: Path, resume: bool) -> None:
    """Refuse to overwrite another run's results, or to resume a different sweep."""
    manifest_path = out / "manifest.json"
    if (out / "results.csv").exists() or manifest_path.exists():
        if not resume:
            raise SweepError(f"{out}: already holds a sweep's results; pass --resume to finish it, "
                             f"or choose another --out")
        old = _read_manifest(manifest_path)
        if old.get("fingerprint") != sweep.fingerprint:
            raise SweepError(f"{out}: its results come from a different sweep (fingerprint "
                             f"{old.get('fingerprint')} != {sweep.fingerprint}); choose another --out")


def _read_manifest(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError:
        raise SweepError(f"{path}: not a cprsim sweep manifest (invalid JSON)") from None


#: summary.csv's columns of each metric: ``<metric>_<stat>``, the ``Estimate`` field of that name
SUMMARY_STATS = ("mean", "lo", "hi", "p50", "p90", "p99")


def summary_header(sweep: Sweep) -> list[str]:
    cols = ["point", "strategy", *sweep.keys, "interval_h", "n"]
    for m in METRICS:
        cols += [f"{m}_{s}" for s in SUMMARY_STATS]
    return cols


def _write_summary(sweep: Sweep, path: Path, done: dict[int, list[list[str]]]) -> None:
    head = header(sweep)
    k0 = head.index("replication")
    rows = []
    for p in sweep.points:
        recs = done[p.index]
        row: list[Any] = [*recs[0][:k0], len(recs)]  # point, strategy, grid values, interval as written
        for m in METRICS:
            e = estimate([float(r[head.index(m)]) for r in recs])
            row += [getattr(e, s) for s in SUMMARY_STATS]
        rows.append(row)
    atomic_write_text(path, csv_text(summary_header(sweep), rows))


def _write_plan(sweep: Sweep, path: Path) -> None:
    from cprsim.plan import make_plan

    try:
        base = sc.validate(dict(sweep.base_raw), sweep.source)
    except sc.ScenarioError:
        base = sc.validate(dict(sweep.points[0].raw), sweep.source)
    p = sweep.plan
    assert p is not None
    plan = make_plan(base, p.max_accuracy_loss, p.metric, replications=p.replications,
                     strategies=list(p.strategies), confidence=None if p.confidence == "mean" else p.confidence,
                     objective=p.objective, max_checkpoint_age_h=p.max_checkpoint_age_h)
    atomic_write_json(path, plan.as_dict())
