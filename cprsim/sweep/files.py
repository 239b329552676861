"""A sweep's output folder: the journal (results.csv and its checksums), the header files
(sweep.toml, config.toml, manifest.json), the summary, the Parquet copies and plan.json, every
one written atomically or appended with ``fsync``; and the checks of a folder before a sweep
writes to it or resumes it (tampering refused with one line naming the file).

What goes in the files comes from elsewhere (the points' rows from :mod:`cprsim.sweep.points`,
the plan from :mod:`cprsim.sweep.planning`); :mod:`cprsim.sweep.runner` calls this module, never
the other way around.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cprsim import scenario as sc
from cprsim.errors import ParameterError
from cprsim.io import (
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_text,
    csv_text,
    dumps_json,
    read_input_bytes,
    short,
)
from cprsim.report import versions
from cprsim.sim.replicate import METRICS, Precision, estimate_metric
from cprsim.sweep.points import RESULT_METRICS, PointRun, header, prefix
from cprsim.sweep.results import point_complete, summary_stats
from cprsim.sweep.spec import Point, Sweep
from cprsim.version import __version__

if TYPE_CHECKING:  # pragma: no cover - the planner is imported by whoever plans
    from cprsim.planner.records import Plan

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


def read_resume_file(path: Path, what: str) -> bytes:
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
        data = read_resume_file(self.sums, "sweep journal checksum file")
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
        data = read_resume_file(self.path, "sweep results table")
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
            prefixes[i] = next(csv.reader([csv_text(None, [prefix(self.points[i])])]))
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

    def finish(self, read: dict[int, list[list[str]]], ran: dict[int, tuple[str, bytes]]) -> None:
        """Rewrite the journal sorted by point, as :meth:`rewrite` does, from the points a resume
        read (``read``) and those this call ran (``ran``: their text and checksums as appended):
        the same bytes, without reading back and re-checking the rows this process wrote."""
        texts, sums = [csv_text(self.head, [])], []
        for i in sorted({*read, *ran}):
            if i in ran:
                text, digests = ran[i]
            else:
                text = csv_text(None, read[i])
                digests = b"".join(self.digest(r).hex().encode() + b"\n" for r in read[i])
            texts.append(text)
            sums.append(digests)
        atomic_write_text(self.path, "".join(texts))
        atomic_write_bytes(self.sums, b"".join(sums))

    def append(self, text: str) -> None:
        """Append ``text`` (whole rows) to the file and fsync it."""
        _append(self.path, text.encode("utf-8"))

    def seal(self, text: str) -> bytes:
        """Append the checksums of ``text``'s rows (about to be appended) to the checksum file;
        returns them."""
        rows = csv.reader(io.StringIO(text))
        data = b"".join(self.digest(r).hex().encode() + b"\n" for r in rows)
        _append(self.sums, data)
        return data


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


def has_rows(out: Path) -> bool:
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


def remove_own_files(out: Path, keep: set[str]) -> None:
    """A fresh sweep that failed (not a signal: that one is resumed): the files it wrote (not those
    in ``keep``, there before) and its temporaries removed, so that the folder, if the sweep made
    it, can go too."""
    for name in OWN_FILES:
        if name not in keep:
            (out / name).unlink(missing_ok=True)
    remove_stale_temporaries(out)


def remove_stale_temporaries(out: Path) -> list[str]:
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
        old = read_manifest(manifest_path)
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
            if hashlib.sha256(read_resume_file(copy, "sweep file copy")).hexdigest() != sha:
                raise tampered(copy, "differs from the sweep file the sweep started with")
        config = out / "config.toml"
        if config.exists():
            text = sc.to_toml(sweep.points[0].raw).encode("utf-8")
            if read_resume_file(config, "sweep configuration") != text:
                raise tampered(config, "differs from the configuration of point 0")


def read_manifest(path: Path) -> dict[str, Any]:
    """manifest.json read back (``{}`` when there is none); not a JSON object: tampering."""
    if not path.exists():
        return {}
    data = read_resume_file(path, "sweep manifest")
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


def summary_row(cells: Sequence[Any], n: int, values: Sequence[Sequence[float]]) -> list[Any]:
    """A point's summary.csv row: its opening ``cells`` (point, strategy, grid values, interval),
    ``n`` replications, then for each metric of ``METRICS`` (``values``, in that order) the
    statistics of :func:`summary_stats`."""
    row: list[Any] = [*cells, n]
    for m, v in zip(METRICS, values, strict=True):
        e = estimate_metric(m, v)
        row += [getattr(e, s) for s in summary_stats(m)]
    return row


def run_summary(r: PointRun, text: str) -> list[Any]:
    """The summary row of a point this process ran (``text``: its rows as journaled), from the
    values in memory (each is what its cell reads back as: ``repr`` round-trips), computed as the
    point completes, while the workers run the others."""
    cells = next(csv.reader(io.StringIO(text)))[: len(prefix(r.point))]
    assert r.stop is not None
    cols = [1 + RESULT_METRICS.index(m) for m in METRICS]
    rows = [r.rows[i] for i in range(r.stop)]
    return summary_row(cells, r.stop, [[float(x[k]) for x in rows] for k in cols])


def write_summary(
    sweep: Sweep,
    path: Path,
    done: Mapping[int, list[list[str]]],
    ready: Mapping[int, list[Any]],
) -> None:
    """summary.csv (:func:`summary_header`): one row per point: ``ready``'s row (a point this
    process ran: :func:`run_summary`), else made from the point's rows in ``done`` (as read back
    from the journal)."""
    head = header(sweep)
    k0 = head.index("replication")
    cols = [head.index(m) for m in METRICS]
    rows = []
    for p in sweep.points:
        if p.index in ready:
            rows.append(ready[p.index])
            continue
        recs = done[p.index]  # point, strategy, grid values, interval as written
        rows.append(
            summary_row(recs[0][:k0], len(recs), [[float(r[k]) for r in recs] for k in cols])
        )
    atomic_write_text(path, csv_text(summary_header(sweep), rows))


def write_plan(path: Path, plan: Plan) -> None:
    """plan.json: the plan a sweep's ``[plan]`` asked for, as ``cprsim plan --json`` prints it."""
    atomic_write_json(path, plan.as_dict())


def journal_of(sweep: Sweep, out: Path) -> Journal:
    """The journal of ``sweep`` in the folder ``out`` (``out/results.csv``)."""
    return Journal(
        out / "results.csv",
        header(sweep),
        sweep.replications,
        sweep.precision,
        sweep.fingerprint,
        sweep.points,
    )


def manifest_of(sweep: Sweep, sweep_text: bytes | None) -> dict[str, Any]:
    """manifest.json's content: the versions, the sweep's fingerprint, seed, replications, keys,
    strategies, precision rule and points, and the SHA-256 of the sweep file as given."""
    return {
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


def write_header_files(sweep: Sweep, out: Path, sweep_text: bytes | None) -> list[str]:
    """The header files of the folder ``out`` (which exists), in this order: sweep.toml (the sweep
    file as given, ``sweep_text``), config.toml (point 0's effective config), then manifest.json,
    the marker that a sweep lives here (written by a fresh sweep only). A resume rewrites a
    missing sweep.toml (when its bytes match the manifest's checksum) or config.toml; returns
    what it repaired."""
    repaired: list[str] = []
    manifest_path = out / "manifest.json"
    manifest = manifest_of(sweep, sweep_text)
    fresh = not manifest_path.exists()
    # a sweep.toml the folder already had (the user's) is kept and not the sweep's copy: a resume
    # compares only the copy the sweep wrote
    copy = out / "sweep.toml"
    manifest["sweep_copy"] = sweep_text is not None and (
        not copy.exists()
        or (copy.is_file() and read_resume_file(copy, "sweep file copy") == sweep_text)
    )  # (a copy an interrupted first run left is the sweep's too)
    if (
        sweep_text is not None
        and not (out / "sweep.toml").exists()
        and (fresh or read_manifest(manifest_path).get("sweep_sha256") == manifest["sweep_sha256"])
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
    return repaired
