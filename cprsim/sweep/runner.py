"""Running a sweep: points on local processes or a Dask cluster, a journal that survives ``kill -9``.

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

**No orphans.** Local workers (:class:`LocalWorkers`) die with the sweep: on Linux each sets
``PR_SET_PDEATHSIG`` (SIGKILL when its parent dies), and everywhere a watcher thread in each worker
exits it when the sweep process is gone (its parent sentinel closes, or its parent pid changes).
They ignore SIGINT (a terminal's Ctrl-C reaches the whole process group: the sweep decides). An
exception in the sweep (a signal turned into one by ``cprsim sweep``) kills the workers instead of
waiting for their running chunks.

**Reproducibility.** A point's numbers depend only on its scenario (seed included), never on the
worker that ran it: every replication draws from streams named by ``(seed, replication, ...)``.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import logging
import math
import os
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor
from concurrent.futures import wait as futures_wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cprsim import scenario as sc
from cprsim.errors import InputError, ParameterError
from cprsim.io import (
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_text,
    csv_text,
    dumps_json,
    make_dirs,
    read_input_bytes,
    remove_made_dirs,
    short,
)
from cprsim.report import versions
from cprsim.sim.records import ReplicationResult
from cprsim.sim.replicate import METRICS, Precision, estimate_metric, run_replications
from cprsim.sweep.results import point_complete, summary_stats
from cprsim.sweep.spec import Point, Sweep, SweepError
from cprsim.version import __version__
from cprsim.workers import die_with_parent

log = logging.getLogger(__name__)

RESULT_METRICS = [c for c in ReplicationResult.columns() if c != "replication"]


def _cell(v: Any) -> Any:
    return v if isinstance(v, (int, float, str)) and not isinstance(v, bool) else json.dumps(v)


def header(sweep: Sweep) -> list[str]:
    """results.csv's columns: point, strategy, the grid keys, interval_h, replication, and every
    metric of a replication."""
    return ["point", "strategy", *sweep.keys, "interval_h", "replication", *RESULT_METRICS]


def _prefix(p: Point) -> tuple[Any, ...]:
    """The cells that open every row of a point."""
    return (
        p.index,
        p.strategy,
        *(_cell(v) for _, v in p.values),
        p.raw["checkpoint"]["interval_h"],
    )


def _version() -> str:
    from cprsim.version import __version__

    return __version__


# -- work: chunks of a point's replications, batched into tasks ------------------------------------
#: a chunk: (point index, the point's raw scenario, first replication, count)
Item = tuple[int, dict[str, Any], int, int]

#: per worker process: each point's scenario, validated once however many chunks of it the worker runs
_SCENARIOS: dict[tuple[str, int], sc.Scenario] = {}


def _scenario(key: str, index: int, raw: dict[str, Any]) -> sc.Scenario:
    s = _SCENARIOS.get((key, index))
    if s is None:
        if len(_SCENARIOS) >= 512:
            _SCENARIOS.clear()
        s = _SCENARIOS[(key, index)] = sc.validate(dict(raw), f"point {index}")
    return s


class PointFailed(InputError):
    """A replication of point ``index`` that cannot run (it would never finish: :class:`Runaway`, a
    fleet out of machines); raised in a worker, named with the point's settings by the sweep."""

    def __init__(self, index: int, message: str) -> None:
        super().__init__(index, message)  # both in args: it crosses process boundaries (pickle)
        self.index, self.message = index, message

    def __str__(self) -> str:
        return f"point {self.index}: {self.message}"


def run_items(key: str, items: Sequence[Item]) -> list[list[tuple[Any, ...]]]:
    """Runs in a worker: each chunk's replications as ``(replication, *RESULT_METRICS)`` tuples.
    ``key`` (the sweep's fingerprint) names the scenarios a long-lived worker keeps."""
    out = []
    for index, raw, first, count in items:
        try:
            res, _ = run_replications(_scenario(key, index, raw), count, first=first)
        except InputError as e:
            raise PointFailed(index, str(e)) from None
        out.append([(r.replication, *(getattr(r, c) for c in RESULT_METRICS)) for r in res])
    return out


def _point_failed(e: PointFailed, runs: list[_PointRun]) -> InputError:
    """One line: which point (its strategy and grid values), which replication, why; what to do."""
    p = next((r.point for r in runs if r.point.index == e.index), None)
    where = (
        ""
        if p is None
        else " (" + ", ".join([p.strategy, *(f"{k}={_cell(v)}" for k, v in p.values)]) + ")"
    )
    return InputError(
        f"point {e.index}{where}: {e.message}; the sweep stops at the first replication that "
        "cannot run: take the point out of the grid or change its settings"
    )


def _worker_init() -> None:
    """A local worker's initializer: default SIGTERM, ignore SIGINT, die with the sweep."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not a handler a forked worker inherited
    signal.signal(
        signal.SIGINT, signal.SIG_IGN
    )  # Ctrl-C reaches the process group: the sweep stops us
    die_with_parent()


class WorkerDied(SweepError):
    """A worker process died (killed, out of memory): the completed points are kept for a resume."""


def _warm() -> str:
    """Import what a worker runs (the engine, every strategy) before its first chunk arrives."""
    from cprsim.sim import engine, strategies  # noqa: F401

    strategies.ensure_loaded()
    return _version()


#: a task is worth its start-up (pickling, a queue round trip: about a millisecond) above this many
#: first-order events (``feasibility.events_per_replication``: checkpoints + failures + nodes)
MIN_TASK_EVENTS = 1_000.0
#: tasks per worker a sweep is cut into (the last ones finish close together), at most
TASKS_PER_WORKER = 16


@dataclass
class _PointRun:
    """One point being run: its replications as they come back, and when it may stop."""

    point: Point
    cap: int
    rule: Precision | None
    _cost: float | None = None
    rows: dict[int, tuple[Any, ...]] = field(default_factory=dict)
    values: list[float] = field(
        default_factory=list
    )  #: the rule's metric, replications 0 .. ready-1
    ready: int = 0  #: replications 0 .. ready-1 are all back
    sent: int = 0  #: replications 0 .. sent-1 were handed out
    checked: int = 0  #: the rule was checked at every look up to here
    stop: int | None = None  #: the point's number of replications, once decided

    def add(self, rows: list[tuple[Any, ...]]) -> None:
        for r in rows:
            self.rows[r[0]] = r
        col = 1 + RESULT_METRICS.index(self.rule.metric) if self.rule is not None else 0
        while self.ready in self.rows:
            if self.rule is not None:
                self.values.append(float(self.rows[self.ready][col]))
            self.ready += 1
        if self.stop is not None:
            return
        if self.rule is None:
            if self.ready >= self.cap:
                self.stop = self.cap
            return
        while True:  # in replication order, each look on the replications before it
            look = self.rule.next_look(self.checked + 1)
            if look > self.ready:
                break
            self.checked = look
            if look >= self.cap or self.rule.met(self.values[:look]):
                self.stop = look
                break

    @property
    def cost(self) -> float:
        """First-order events of one replication (sizes the chunks; computed when first needed)."""
        if self._cost is None:
            self._cost = _cost(self.point)
        return self._cost

    def due(self) -> int:
        """The replications the next decision needs (all of them without a rule)."""
        if self.rule is None:
            return self.cap
        return self.rule.next_look(self.checked + 1)

    def text(self) -> str:
        prefix = _prefix(self.point)
        assert self.stop is not None
        return csv_text(None, ([*prefix, *self.rows[i]] for i in range(self.stop)))


def _schedule(runs: list[_PointRun], backend: _Backend, key: str) -> Iterator[_PointRun]:
    """Hand out the points' replications in chunks and yield each point when it is complete.

    Chunks are cut so that a sweep makes about ``TASKS_PER_WORKER`` tasks per worker, a point's
    replications split across workers when points are few, and small points batched together so
    that no task is below ``MIN_TASK_EVENTS``. Work the next decisions need goes first (the
    replications up to each started point's next look, then new points in order); when nothing
    else is left, idle workers run ahead on undecided points (speculation: replications past the
    rule's stop are dropped). Decisions read replications in index order only, so the result
    never depends on which worker ran what, or when."""
    slots = max(1, backend.slots)
    pending = list(reversed(runs))  # popped from the end: index order
    active: list[_PointRun] = []
    if slots == 1 or not runs:
        target = math.inf
    else:  # the expected work, from a sample of at most 64 points spread over the sweep
        sample = runs[:: max(1, len(runs) // 64)]
        expect = (
            len(runs)
            * sum(
                r.cost * (r.cap if r.rule is None else min(r.cap, 4 * r.rule.first_look))
                for r in sample
            )
            / len(sample)
        )
        target = max(MIN_TASK_EVENTS, expect / (slots * TASKS_PER_WORKER))
    inflight: dict[Any, list[tuple[_PointRun, int, int]]] = {}

    def pick() -> tuple[_PointRun, int] | None:
        for r in active:  # owed: what the next decisions need
            if r.stop is None and r.sent < r.due():
                return r, r.due()
        if pending:
            r = pending.pop()
            active.append(r)
            return r, r.due()
        if slots == 1:
            return None
        ahead = [r for r in active if r.stop is None and r.sent < r.cap and r.rule is not None]
        if ahead:  # speculation, one look further for the point least ahead
            r = min(ahead, key=lambda r: (r.sent - r.due(), r.point.index))
            assert r.rule is not None  # `ahead` holds points with a rule only
            return r, r.rule.next_look(r.sent + 1)
        return None

    def task() -> list[tuple[_PointRun, int, int]]:
        items: list[tuple[_PointRun, int, int]] = []
        events = 0.0
        while events < target:
            got = pick()
            if got is None:
                break
            r, upto = got
            room = target - events
            n = (
                upto - r.sent
                if math.isinf(room)
                else max(1, min(upto - r.sent, math.ceil(room / max(r.cost, 1.0))))
            )
            items.append((r, r.sent, n))
            r.sent += n
            events += n * r.cost
            if math.isinf(
                target
            ):  # one process: one chunk at a time, each point's rows out as soon as done
                break
        return items

    try:
        while True:
            while len(inflight) < (1 if slots == 1 else 2 * slots):
                items = task()
                if not items:
                    break
                h = backend.submit(
                    run_items,
                    key,
                    [(r.point.index, r.point.raw, first, n) for r, first, n in items],
                )
                inflight[h] = items
            if not inflight:
                break
            for h, result in backend.wait(list(inflight)):
                for (r, _, _), rows in zip(inflight.pop(h), result):
                    if r.stop is not None and r.ready >= r.stop:
                        continue  # speculation past the point's stop
                    r.add(rows)
                    if r.stop is not None and r.ready >= r.stop:
                        active.remove(r)
                        yield r
    except PointFailed as e:  # a worker's (or, one process, this one's)
        raise _point_failed(e, runs) from None
    left = [r.point.index for r in runs if r.stop is None or r.ready < r.stop]
    if left:  # pragma: no cover - a scheduling bug
        raise SweepError(f"points {left[:5]} did not complete")


# -- backends --------------------------------------------------------------------------------------
class _Backend:
    slots = 1

    def submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        raise NotImplementedError

    def wait(self, handles: list[Any]) -> list[tuple[Any, Any]]:
        raise NotImplementedError

    def close(self, abort: bool = False) -> None:
        pass


class _Inline(_Backend):
    """``--jobs 1``: every task runs in this process as it is handed out."""

    def __init__(self) -> None:
        self.done: dict[int, Any] = {}
        self.n = 0

    def submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        self.n += 1
        self.done[self.n] = fn(*args)
        return self.n

    def wait(self, handles: list[Any]) -> list[tuple[Any, Any]]:
        return [(h, self.done.pop(h)) for h in handles]


class LocalWorkers(_Backend):
    """``--jobs N``: N worker processes, started at once and kept for the whole sweep.

    The workers are forked from this process when it runs no other thread (they start in
    milliseconds with everything imported: warm), else from a ``forkserver`` that imports the
    simulator once (they then inherit no threads or locks, e.g. a progress bar's). Create them
    before starting threads (``cprsim sweep`` does, before its progress bar).

    The workers die with this process (:func:`cprsim.workers.die_with_parent`). :meth:`close` waits for the
    running chunks; ``close(abort=True)`` (and leaving the ``with`` block on an exception, e.g. a
    signal) kills the workers at once. A forkserver exits by itself once its workers are gone and
    this process exits (CPython closes its pipe)."""

    def __init__(self, jobs: int) -> None:
        import multiprocessing as mp

        self.slots = jobs
        ctx: mp.context.BaseContext
        if "fork" in mp.get_all_start_methods() and threading.active_count() == 1:
            ctx = mp.get_context("fork")
        else:
            ctx = mp.get_context("forkserver")
            ctx.set_forkserver_preload(["cprsim.sweep.runner"])
        self.method = ctx.get_start_method()
        self.ex = ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=_worker_init)
        try:
            for _ in range(
                jobs
            ):  # start every worker now (fork: all at the first submit) and import
                self.ex.submit(_warm)
        except BaseException:
            self.close(abort=True)
            raise

    def submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn(*args)`` in a worker; returns its future (a dead worker raises
        :class:`SweepError`)."""
        try:
            return self.ex.submit(fn, *args)
        except BrokenProcessPool:
            raise self._broken() from None

    def wait(self, handles: list[Any]) -> list[tuple[Any, Any]]:
        """Wait until at least one of ``handles`` is done (in one-second slices); returns the done
        ones with their results."""
        while True:  # in slices: a signal is handled within a second whatever thread receives it
            done, _ = futures_wait(handles, timeout=1.0, return_when=FIRST_COMPLETED)
            if done:
                break
        try:
            return [(f, f.result()) for f in done]
        except BrokenProcessPool:
            raise self._broken() from None

    @staticmethod
    def _broken() -> SweepError:
        return WorkerDied(
            "a worker process died (killed, or out of memory?); the completed points are kept: "
            "resume the sweep to run the others"
        )

    def close(self, abort: bool = False) -> None:
        """Cancel the chunks not started and wait for the running ones (``abort``: kill the workers
        first)."""
        if abort:
            self._kill()
        self.ex.shutdown(wait=True, cancel_futures=True)

    def _kill(self) -> None:
        """SIGKILL every worker now (their running chunks are lost; a resume reruns those points)."""
        kill = getattr(self.ex, "kill_workers", None)  # Python >= 3.14
        if kill is not None:
            try:
                kill()
                return
            except Exception:  # pragma: no cover - fall back to the processes themselves
                pass
        for p in list((getattr(self.ex, "_processes", None) or {}).values()):
            try:
                p.kill()
            except (OSError, ValueError, AttributeError):  # already gone or not started
                pass

    def __enter__(self) -> LocalWorkers:
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        self.close(abort=exc_type is not None)


class _DaskBackend(_Backend):
    def __init__(self, client: Any, cluster: Any) -> None:
        from distributed import as_completed as dask_completed

        self.client, self.cluster = client, cluster
        self.slots = max(1, sum(client.nthreads().values()))
        self.ac = dask_completed()

    def submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        f = self.client.submit(fn, *args, pure=False)
        self.ac.add(f)
        return f

    def wait(self, handles: list[Any]) -> list[tuple[Any, Any]]:
        f = next(self.ac)
        return [(f, f.result())]

    def close(self, abort: bool = False) -> None:
        self.client.close()  # releases its futures: the scheduler drops their chunks
        if self.cluster is not None:
            self.cluster.close()


def _dask_connect(
    scheduler: str | None, local_workers: int | None, timeout: float = 10.0
) -> tuple[Any, Any]:
    """A connected Dask client (and its LocalCluster, if one was started), checked before the
    sweep writes anything: a missing extra, an unreachable scheduler or workers running another
    cprsim version are one-line errors and leave no output folder behind. The workers import the
    simulator now (warm), not at their first chunk. ``timeout``: seconds to reach ``scheduler``."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise InputError(
            "a Dask scheduler needs the distributed extra: pip install 'cprsim[distributed]'"
        ) from None
    quiet = max(logging.WARNING, logging.getLogger().getEffectiveLevel())
    for name in (
        "distributed",
        "distributed.scheduler",
        "distributed.nanny",
        "distributed.worker",
        "distributed.core",
        "distributed.http.proxy",
    ):
        logging.getLogger(name).setLevel(quiet)  # dask logs every worker start at INFO
    cluster = client = None
    try:
        if local_workers is not None:
            cluster = LocalCluster(
                n_workers=local_workers,
                threads_per_worker=1,
                processes=True,
                host="127.0.0.1",
                dashboard_address="127.0.0.1:0",
                silence_logs=logging.CRITICAL,
            )
            client = Client(cluster)
        else:
            try:
                client = Client(scheduler, timeout=f"{timeout:g}s")
            except (OSError, ValueError, TypeError) as e:
                raise ParameterError(
                    "scheduler", f"cannot connect ({short(e, 120)})", key=short(scheduler)
                ) from None
        versions = {str(v) for v in client.run(_warm).values()}
        if versions != {__version__}:
            raise InputError(
                f"Dask workers run cprsim {', '.join(sorted(versions)) or '(none)'}, this client "
                f"{__version__}: install the same version on every worker"
            )
        return client, cluster
    except BaseException:
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()
        raise


# -- the journal --------------------------------------------------------------------------------
#: beside results.csv: a checksum of each row the sweep wrote (a resume keeps only rows it vouches for)
SUMS = "journal.sha256"


def tampered(path: Path | str, detail: str) -> ParameterError:
    """A resume refused: a file of the sweep changed after the sweep wrote it (one line naming the
    file, and the line where known; never its content)."""
    return ParameterError(
        "resume",
        f"{detail}: the sweep's files were changed after it wrote them; start afresh: leave out "
        "`resume`, or choose another `out`",
        short(path),
        also=("resume", "out"),
    )


#: the cap on reading back a file the sweep wrote itself (results.csv of a million-row sweep is
#: hundreds of MB): only a regular file is checked, not its size
OWN_FILE_BYTES = 1 << 62


def _read_resume_file(path: Path, what: str) -> bytes:
    """A file of an existing sweep read back (a resume, the end of a run): a regular file (not a
    FIFO or a device), else a one-line error; any size (the sweep wrote it)."""
    return read_input_bytes(path, what, OWN_FILE_BYTES)


@dataclass
class Journal:
    """The results table of a sweep under way (results.csv): read back by a resume, rewritten, and
    appended to a point's rows at a time.

    Each row the sweep writes has its checksum (SHA-256 of the sweep's fingerprint and the row)
    in ``journal.sha256`` beside it, appended and fsync'd before the row (:meth:`seal`): a kill
    leaves at most a torn last line without one (dropped, with the rest of its point, which runs
    again) and checksums of rows not yet written (ignored). A complete row without a checksum, a
    row that is not one of the sweep's, a bad header or a malformed checksum file is tampering:
    a resume refuses it with the file and line."""

    path: Path
    head: list[str]
    replications: int  #: a point's replications (with ``rule``: the most)
    rule: Precision | None = None  #: adaptive replication: a point is complete where the rule stops
    key: str = ""  #: the sweep's fingerprint (in every row's checksum)
    points: Sequence[Point] = ()  #: the sweep's points (rows are checked against them)

    @property
    def sums(self) -> Path:
        """The checksum file beside the journal."""
        return self.path.with_name(SUMS)

    def digest(self, row: Sequence[str]) -> bytes:
        """A row's checksum (128 bits of SHA-256 over the fingerprint and the row as written)."""
        buf = self._buf
        buf.seek(0)
        buf.truncate()
        self._writer.writerow(
            row
        )  # the cells as read back: strings, written as csv_text wrote them
        h = self._seed.copy()
        h.update(buf.getvalue().encode("utf-8", "surrogateescape"))
        return h.digest()[:16]

    def __post_init__(self) -> None:
        self._buf = io.StringIO()
        self._writer = csv.writer(self._buf, lineterminator="\n")
        self._seed = hashlib.sha256(self.key.encode() + b"\n")

    def _known(self) -> set[bytes]:
        if not self.sums.exists():
            return set()
        data = _read_resume_file(self.sums, "sweep journal checksum file")
        cut = data.rfind(b"\n")  # a torn last line (a kill during its write) is not one
        known = set()
        for n, line in enumerate(data[: cut + 1].split(b"\n")[:-1], start=1):
            try:
                if len(line) != 32:
                    raise ValueError
                known.add(bytes.fromhex(line.decode("ascii")))
            except ValueError:
                raise tampered(f"{self.sums}:{n}", "not a checksum") from None
        return known

    def read(self) -> tuple[dict[int, list[list[str]]], list[int]]:
        """Complete points' rows (by point) and the order they were written in; a torn last line
        dropped (its point is incomplete); tampering refused (:func:`tampered`)."""
        data = _read_resume_file(self.path, "sweep results table")
        known = self._known()
        cut = data.rfind(b"\n")
        text = data[: cut + 1].decode("utf-8", "surrogateescape")
        reader = csv.reader(io.StringIO(text))
        try:
            first = next(reader, None)
        except csv.Error:
            first = None
        if first != self.head:
            raise tampered(f"{self.path}:1", "not the header of this sweep's results table")
        by_point: dict[int, list[list[str]]] = {}
        order: list[int] = []
        prefixes: dict[int, list[str]] = {}
        rep_col = self.head.index("replication")
        line = 2
        while True:
            try:
                r = next(reader)
            except StopIteration:
                break
            except csv.Error:  # pragma: no cover - the reader is not strict
                break
            if self.digest(r) not in known:
                why = (
                    f"a row not written by the sweep (no checksum in {SUMS})"
                    if self.sums.exists()
                    else f"a row without {SUMS}: the folder was written before cprsim kept "
                    "checksums of its rows, or the file was deleted"
                )
                raise tampered(f"{self.path}:{line}", why)
            i = self._check(r, prefixes, rep_col)
            if i is None:
                raise tampered(f"{self.path}:{line}", "a row that does not belong to this sweep")
            if i not in by_point:
                by_point[i] = []
                order.append(i)
            by_point[i].append(r)
            line = reader.line_num + 1
        complete = {
            i: rs
            for i, rs in by_point.items()
            if point_complete(rs, rep_col, self.replications, self.rule, self.head)
        }
        return complete, [i for i in order if i in complete]

    def _check(self, r: list[str], prefixes: dict[int, list[str]], rep_col: int) -> int | None:
        """The point of a checksummed row whose cells are what the sweep writes, else None."""
        if len(r) != len(self.head) or not _is_int(r[0]):
            return None
        i = int(r[0])
        if not 0 <= i < len(self.points) or self.points[i].index != i:
            return None
        if i not in prefixes:
            prefixes[i] = next(csv.reader([csv_text(None, [_prefix(self.points[i])])]))
        if r[:rep_col] != prefixes[i] or not _is_int(r[rep_col]):
            return None
        if not 0 <= int(r[rep_col]) < self.replications:
            return None
        if not all(_is_float(c) for c in r[rep_col + 1 :]):
            return None
        return i

    def rewrite(self, points: dict[int, list[list[str]]], order: Sequence[int]) -> None:
        """Replace the file atomically with the rows of ``points``, in ``order``, then the
        checksums (a kill between the two leaves checksums of every row: a set, in any order)."""
        rows = [r for i in order for r in points[i]]
        atomic_write_text(self.path, csv_text(self.head, rows))
        atomic_write_bytes(self.sums, b"".join(self.digest(r).hex().encode() + b"\n" for r in rows))

    def append(self, text: str) -> None:
        """Append ``text`` (whole rows) to the file and fsync it."""
        _append(self.path, text.encode("utf-8"))

    def seal(self, text: str) -> None:
        """Append the checksums of ``text``'s rows (about to be appended) to the checksum file."""
        rows = csv.reader(io.StringIO(text))
        _append(self.sums, b"".join(self.digest(r).hex().encode() + b"\n" for r in rows))


def _append(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
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
        _dask_connect(scheduler, dask_local, connect_timeout)
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
            (isinstance(e, (KeyboardInterrupt, WorkerDied)) or _has_rows(out))
            and (out / "manifest.json").exists()
        ):
            _remove_own_files(out, keep=before)
            remove_made_dirs(made)
        raise


def _has_rows(out: Path) -> bool:
    """Has the sweep in ``out`` journaled a row (a completed point)? Then a failure, whatever it
    is, keeps the folder for ``--resume``: nothing computed is thrown away."""
    path = out / "results.csv"
    if not path.is_file() or path.is_symlink():  # the sweep's own file: never a FIFO to block on
        return False
    try:
        with path.open("rb") as f:
            return f.read(1 << 16).count(b"\n") >= 2  # the header and a row
    except OSError:
        return False


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
    repaired = _remove_stale_temporaries(out)
    head = header(sweep)
    journal = Journal(
        out / "results.csv",
        head,
        sweep.replications,
        sweep.precision,
        sweep.fingerprint,
        sweep.points,
    )
    manifest_path = out / "manifest.json"
    manifest = {
        "cprsim_version": __version__,
        "versions": versions(),
        "name": sweep.name,
        "description": sweep.description,
        "source": sweep.source,
        "fingerprint": sweep.fingerprint,
        "seed": sweep.seed,
        "replications": sweep.replications,
        "keys": list(sweep.keys),
        "strategies": list(sweep.strategies),
        **({"precision": sweep.precision.as_dict()} if sweep.precision is not None else {}),
        "points": [
            {"point": p.index, "strategy": p.strategy, "values": {k: v for k, v in p.values}}
            for p in sweep.points
        ],
        **(
            {"sweep_sha256": hashlib.sha256(sweep_text).hexdigest()}
            if sweep_text is not None
            else {}
        ),
    }
    fresh = not manifest_path.exists()
    # a sweep.toml the folder already had (the user's) is kept and not the sweep's copy: a resume
    # compares only the copy the sweep wrote
    copy = out / "sweep.toml"
    manifest["sweep_copy"] = sweep_text is not None and (
        not copy.exists()
        or (copy.is_file() and _read_resume_file(copy, "sweep file copy") == sweep_text)
    )  # (a copy an interrupted first run left is the sweep's too)
    if (
        sweep_text is not None
        and not (out / "sweep.toml").exists()
        and (fresh or _read_manifest(manifest_path).get("sweep_sha256") == manifest["sweep_sha256"])
    ):
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
        journal.rewrite(done, order)
    todo = [p for p in sweep.points if p.index not in done]
    tell = resumed if resumed is not None else progress
    if tell is not None and done:
        tell(len(done))
    parallel = connection is not None or workers is not None or (jobs > 1 and len(todo) > 0)
    runs = [_PointRun(p, sweep.replications, sweep.precision) for p in todo]
    own = None
    if connection is not None:
        backend: _Backend = _DaskBackend(*connection)
    elif workers is not None:
        backend = workers
    elif parallel:
        backend = own = LocalWorkers(jobs)
    else:
        backend = _Inline()
    finished = False
    try:
        for r in _schedule(runs, backend, sweep.fingerprint):
            text = r.text()
            journal.seal(text)  # the checksums first: every complete row has one
            journal.append(text)
            r.rows.clear()
            if progress is not None:
                progress(1)
        finished = True
    finally:
        if own is not None or connection is not None:
            backend.close(abort=not finished)
    done, _ = journal.read()
    missing = [p.index for p in sweep.points if p.index not in done]
    if missing:  # pragma: no cover - a backend that lost points silently
        raise SweepError(f"{out}: points {missing[:5]} did not complete; resume the sweep")
    journal.rewrite(done, sorted(done))
    _write_summary(sweep, out / "summary.csv", done)
    parquet: list[Path] = []
    if output_format == "parquet":
        for name in ("results", "summary"):
            parquet.append(write_parquet(out / f"{name}.csv", out / f"{name}.parquet"))
    if sweep.plan is not None and not (out / "plan.json").exists():
        _write_plan(sweep, out / "plan.json")
    return Outcome(
        out,
        len(sweep.points),
        len(todo),
        journal.path,
        out / "summary.csv",
        tuple(repaired),
        tuple(parquet),
    )


#: the files a sweep writes (their temporaries are ``.<name>.<random>.tmp`` beside them)
OWN_FILES = (
    "results.csv",
    "summary.csv",
    "manifest.json",
    "sweep.toml",
    "config.toml",
    "plan.json",
    SUMS,
    "results.parquet",
    "summary.parquet",
)

#: ``output_format`` values: the CSV tables always, Parquet copies in addition
FORMATS = ("csv", "parquet")


def check_format(output_format: str) -> None:
    """A known output format whose writer is installed (before anything is created)."""
    if output_format not in FORMATS:
        raise ParameterError(
            "output_format",
            f"must be one of {', '.join(FORMATS)}, got {short(output_format)!r}",
        )
    if output_format == "parquet":
        try:
            import pyarrow
            import pyarrow.parquet  # noqa: F401
        except ImportError:
            raise ParameterError(
                "output_format", "parquet needs pyarrow: pip install 'cprsim[parquet]'"
            ) from None


def _is_int(text: str) -> bool:
    t = text[1:] if text[:1] in "+-" else text
    return t.isascii() and t.isdigit() and -(2**63) <= int(text) < 2**63


def _is_float(text: str) -> bool:
    if "_" in text or text != text.strip():
        return False
    try:
        float(text)
    except ValueError:
        return False
    return True


def parquet_column(cells: Sequence[str]) -> Any:
    """A CSV column as a typed Arrow array: int64 if every cell reads as an int, else float64 if
    every cell reads as a float (``repr`` round-trips, so the values are exact), else string."""
    import pyarrow as pa

    if all(_is_int(c) for c in cells):
        return pa.array([int(c) for c in cells], pa.int64())
    if all(_is_float(c) for c in cells):
        return pa.array([float(c) for c in cells], pa.float64())
    return pa.array(list(cells), pa.string())


def write_parquet(csv_path: Path, path: Path) -> Path:
    """``csv_path``'s table as Parquet at ``path`` (same columns, typed by :func:`parquet_column`),
    written atomically; the same CSV gives the same bytes."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    with csv_path.open(newline="", encoding="utf-8") as f:
        table = list(csv.reader(f))
    head, body = table[0], table[1:]
    cols = [parquet_column([r[j] for r in body]) for j in range(len(head))]
    sink = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_arrays(cols, names=head), sink, compression="snappy")
    return atomic_write_bytes(path, sink.getvalue().to_pybytes())


def _cost(p: Point) -> float:
    """First-order events of one replication of a point (sizes its chunks)."""
    from cprsim.planner.feasibility import events_per_replication

    try:
        return max(
            1.0, float(events_per_replication(sc.validate(dict(p.raw), f"point {p.index}"))[0])
        )
    except (InputError, ValueError, ZeroDivisionError):  # pragma: no cover - points were validated
        return 1.0


def _remove_own_files(out: Path, keep: set[str]) -> None:
    """A fresh sweep that failed (not a signal: that one is resumed): the files it wrote (not those
    in ``keep``, there before) and its temporaries removed, so that the folder, if the sweep made
    it, can go too."""
    for name in OWN_FILES:
        if name not in keep:
            (out / name).unlink(missing_ok=True)
    _remove_stale_temporaries(out)


def _remove_stale_temporaries(out: Path) -> list[str]:
    """Temporary files an interrupted atomic write left in ``out`` (only the sweep's own)."""
    gone = []
    for name in OWN_FILES:
        for tmp in out.glob(f".{name}.*.tmp"):
            tmp.unlink(missing_ok=True)
            gone.append(f"removed {tmp.name}")
    return gone


def check_out(sweep: Sweep, out: Path, resume: bool) -> None:
    """Refuse to overwrite another run's results, or to resume a different sweep, or one whose
    manifest.json, sweep.toml or config.toml changed after the sweep wrote them (the rows of
    results.csv are checked against their checksums when the sweep reads them back)."""
    manifest_path = out / "manifest.json"
    if (out / "results.csv").exists() or manifest_path.exists():
        if not resume:
            raise ParameterError(
                "out",
                "already holds a sweep's results; pass `resume` to finish it, or choose another "
                "folder",
                str(out),
                also=("resume",),
            )
        old = _read_manifest(manifest_path)
        if old.get("fingerprint") != sweep.fingerprint:
            raise ParameterError(
                "resume",
                f"its results come from a different sweep (fingerprint "
                f"{short(old.get('fingerprint'), 40)} != {sweep.fingerprint}); choose another `out`",
                str(out),
                also=("out",),
            )
        expected = {
            "seed": sweep.seed,
            "replications": sweep.replications,
            "keys": list(sweep.keys),
            "strategies": list(sweep.strategies),
            "precision": sweep.precision.as_dict() if sweep.precision is not None else None,
            "points": [
                {"point": p.index, "strategy": p.strategy, "values": {k: v for k, v in p.values}}
                for p in sweep.points
            ],
        }
        for k, v in expected.items():
            if json.loads(dumps_json(v)) != old.get(k):
                raise tampered(manifest_path, f"{k} differs from the sweep's")
        sha = old.get("sweep_sha256")
        if sha is not None and not isinstance(sha, str):
            raise tampered(manifest_path, "sweep_sha256 is not a checksum")
        copy = out / "sweep.toml"
        if copy.exists() and sha is not None and old.get("sweep_copy", True):
            if hashlib.sha256(_read_resume_file(copy, "sweep file copy")).hexdigest() != sha:
                raise tampered(copy, "differs from the sweep file the sweep started with")
        config = out / "config.toml"
        if config.exists():
            text = sc.to_toml(sweep.points[0].raw).encode("utf-8")
            if _read_resume_file(config, "sweep configuration") != text:
                raise tampered(config, "differs from the configuration of point 0")


def _read_manifest(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    data = _read_resume_file(path, "sweep manifest")
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        raise tampered(path, "not a cprsim sweep manifest (invalid JSON)") from None
    if not isinstance(doc, dict):
        raise tampered(path, "not a cprsim sweep manifest (a JSON object expected)")
    return doc


def summary_header(sweep: Sweep) -> list[str]:
    """summary.csv's columns: point, strategy, the grid keys, interval_h, n, then
    ``<metric>_<stat>`` for every metric and its :func:`summary_stats`."""
    cols = ["point", "strategy", *sweep.keys, "interval_h", "n"]
    for m in METRICS:
        cols += [f"{m}_{s}" for s in summary_stats(m)]
    return cols


def _write_summary(sweep: Sweep, path: Path, done: dict[int, list[list[str]]]) -> None:
    head = header(sweep)
    k0 = head.index("replication")
    rows = []
    for p in sweep.points:
        recs = done[p.index]
        row: list[Any] = [
            *recs[0][:k0],
            len(recs),
        ]  # point, strategy, grid values, interval as written
        for m in METRICS:
            e = estimate_metric(m, [float(r[head.index(m)]) for r in recs])
            row += [getattr(e, s) for s in summary_stats(m)]
        rows.append(row)
    atomic_write_text(path, csv_text(summary_header(sweep), rows))


def _plan_base(sweep: Sweep) -> sc.Scenario:
    """The scenario a sweep's ``[plan]`` plans: its base, else its first point's."""
    try:
        return sc.validate(dict(sweep.base_raw), sweep.source)
    except sc.ScenarioError:
        return sc.validate(dict(sweep.points[0].raw), sweep.source)


def check_plan(sweep: Sweep) -> None:
    """A sweep's ``[plan]`` that the planner would refuse for its replications, refused before any
    point runs (a one-line :class:`SweepError` naming the key), not after all of them."""
    from cprsim.planner.search import min_replications

    p = sweep.plan
    if p is None or p.confidence == "mean":
        return
    n = p.replications or _plan_base(sweep).replications
    need = min_replications(float(p.confidence))
    if n < need:
        raise SweepError(
            f"{sweep.source}: plan.replications: proving P(PLS <= bound) >= {float(p.confidence):g} "
            f"takes at least {need} replications, the plan would have {n} (set plan.replications, "
            'or plan.confidence = "mean")'
        )


def _write_plan(sweep: Sweep, path: Path) -> None:
    from cprsim.planner import make_plan

    base = _plan_base(sweep)
    p = sweep.plan
    assert p is not None
    plan = make_plan(
        base,
        p.max_accuracy_loss,
        p.metric,
        replications=p.replications,
        strategies=list(p.strategies),
        confidence=None if p.confidence == "mean" else p.confidence,
        objective=p.objective,
        max_checkpoint_age_h=p.max_checkpoint_age_h,
        precision=None if p.precision == "off" else float(p.precision),
        max_extra_memory=p.max_extra_memory,
    )
    atomic_write_json(path, plan.as_dict())
