"""The embedding-access skew model: Zipf per table.

Every sample looks up one row in each of ``T`` tables. Within table ``t`` of ``n_t`` rows, the
row of popularity rank ``i`` is accessed with probability ``p_ti = i^-a / H(n_t, a)`` per sample
(``H`` the generalised harmonic number), one exponent ``a`` for all tables. A row's share of all
accesses is ``p_ti / T``.

From this:

* ``coverage(r)``: the share of accesses that the top fraction ``r`` of all rows (ranked over
  every table) receives. BagPipe's statement "1% of rows take 92% of accesses" is
  ``coverage(0.01) = 0.92``; ``AccessModel.from_skew`` solves it for ``a``.
* ``touched(n)``: the expected fraction of rows accessed at least once by ``n`` samples,
  ``sum_ti 1 - (1 - p_ti)^n`` over all rows (what a differential checkpoint must write).
* ``sampled_coverage(r, m)``: the expected access share of the top-``r`` rows chosen from
  *counts* of ``m`` samples (MFU: all samples of an interval; SSU: a sub-sample), each row's
  count being Poisson(``m p_ti``) and ties at the threshold broken at random. With few samples
  the ranking is noisy and the coverage falls below ``coverage(r)``.

Computation: the first 512 ranks of every table are kept exactly; the rest are grouped into
geometric bins (ratio 1.02) whose mass comes from exact generalised harmonic numbers
(Euler-Maclaurin beyond 512 terms), so a model of 34 M rows is ~10 k bins and every query is
vectorised over bins.

**Caches.** Answers are kept in memory (a scenario's layout and model, ranked shares, rows
touched), and the ones every ``cprsim plan`` process would otherwise recompute (the skew's
exponent, ranked shares, rows touched: a few milliseconds each, some 0.3 s a plan) also on disk,
in ``$CPRSIM_CACHE_DIR`` (default ``$XDG_CACHE_HOME/cprsim``, else ``~/.cache/cprsim``; an empty
``CPRSIM_CACHE_DIR`` turns it off). The file is named by a hash of this module's source and of
the numpy, scipy and cprsim versions, so a change to any of them starts a new one; entries are
the exact floats (JSON keeps every bit), written at exit by merging into the file (temporary
file + rename); an unreadable or unwritable cache is ignored.
"""

from __future__ import annotations

import atexit
import csv
import hashlib
import json
import math
import os
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any, overload

import numpy as np

from cprsim.errors import InputError
from cprsim.io import (
    atomic_write_text,
    cache_dir,
    check_input_file,
    decode_errors,
    open_input_text,
    read_input_text,
    short,
)

#: Criteo Kaggle (Display Advertising Challenge) table cardinalities, as used by DLRM
CRITEO_KAGGLE = (
    1460,
    583,
    10131227,
    2202608,
    305,
    24,
    12517,
    633,
    3,
    93145,
    5683,
    8351593,
    3194,
    27,
    14992,
    5461306,
    10,
    5652,
    2173,
    4,
    7046547,
    18,
    15,
    286181,
    105,
    142572,
)

_EXACT = 512
_SC_CACHE: dict[tuple, RankedShare] = {}
_TOUCHED: dict[tuple, float] = {}
_LAYOUTS: dict[tuple, Layout] = {}
_RATIO = 1.02


def gen_harmonic(k: np.ndarray | float, a: float) -> np.ndarray:
    """H(k, a) = sum_{i=1..k} i^-a for integer k >= 0 (exact to ~1e-12 relative)."""
    k = np.asarray(k, dtype=float)
    head = np.cumsum(np.arange(1, _EXACT + 1, dtype=float) ** -a)
    out = np.empty_like(k)
    small = k <= _EXACT
    ki = k[small].astype(int)
    out[small] = np.where(ki > 0, head[np.maximum(ki, 1) - 1], 0.0)
    big = ~small
    if np.any(big):
        # sum_{i=m+1..k} i^-a by Euler-Maclaurin from m = _EXACT
        m, kb = float(_EXACT), k[big]
        if abs(a - 1.0) < 1e-12:
            integral = np.log(kb / m)
        else:
            integral = (kb ** (1 - a) - m ** (1 - a)) / (1 - a)
        em = (
            integral
            + 0.5 * (kb**-a - m**-a)
            - a / 12.0 * (kb ** (-a - 1) - m ** (-a - 1))
            + a * (a + 1) * (a + 2) / 720.0 * (kb ** (-a - 3) - m ** (-a - 3))
        )
        out[big] = head[-1] + em
    return out


@dataclass(frozen=True)
class RankedShare:
    """What a save of the top rows ranked by a window's counts protects.

    ``in_sample``: the share of *that window's* accesses (all of them, counted or not) that land
    on the selected rows: what a partial save at the end of the window protects of the window's
    updates (MFU's and SSU's protected share). It is at least the population coverage for MFU
    (the top counts of a sample over-represent their rows) and at least ``r`` for any ranking that
    counts something.

    ``out_of_sample``: the share of an *independent* window's accesses (the population share) on
    the selected rows; at most ``coverage(r)`` (a noisy ranking picks some colder rows). This is
    what a ranking by future accesses (lookahead) protects of the past window's updates.
    """

    in_sample: float
    out_of_sample: float


@dataclass(frozen=True)
class AccessModel:
    """Zipf(``alpha``) access over tables of sizes ``tables`` (one lookup per table per sample)."""

    tables: tuple[int, ...]
    alpha: float

    def __post_init__(self) -> None:
        if not self.tables or any(int(n) < 1 for n in self.tables):
            raise InputError("access tables: every table needs at least one row")
        if not (math.isfinite(self.alpha) and 0 <= self.alpha <= 5):
            raise InputError(f"access alpha must be in [0, 5], got {self.alpha}")

    # -- constructors ------------------------------------------------------------------------------
    @classmethod
    def criteo(cls, alpha: float = 1.0, scale: float = 1.0) -> AccessModel:
        """Criteo Kaggle's 26 tables (:data:`CRITEO_KAGGLE`), each divided by ``scale`` (rounded, at
        least one row), with Zipf exponent ``alpha``."""
        return cls(tuple(max(1, int(round(n / scale))) for n in CRITEO_KAGGLE), alpha)

    @classmethod
    def from_skew(
        cls, tables: tuple[int, ...], top_fraction: float = 0.01, top_share: float = 0.92
    ) -> AccessModel:
        """The exponent for which the top ``top_fraction`` of rows take ``top_share`` of accesses."""
        if not 0 < top_fraction < 1 or not 0 < top_share < 1:
            raise InputError("skew: top_fraction and top_share must be in (0, 1)")
        key = f"{_tables_key(tables)}|{float(top_fraction)!r}|{float(top_share)!r}"
        cached = _disk_get("alpha", key)
        if cached is not None:  # solved (and checked) before
            return cls(tables, float(cached))
        lo = cls(tables, 0.0).coverage(top_fraction)
        if top_share <= lo:
            raise InputError(
                f"skew: {top_share:.3g} of accesses on the top {top_fraction:.3g} of rows is "
                f"less than uniform access gives ({lo:.3g})"
            )
        hi = cls(tables, 5.0).coverage(top_fraction)
        if top_share >= hi:
            raise InputError(
                f"skew: {top_share:.3g} on the top {top_fraction:.3g} of rows is more "
                f"skewed than Zipf can reach with these tables ({hi:.4g})"
            )
        from scipy import optimize

        a = optimize.brentq(
            lambda x: cls(tables, x).coverage(top_fraction) - top_share, 0.0, 5.0, xtol=1e-10
        )
        _disk_put("alpha", key, float(a))
        return cls(tables, float(a))

    @classmethod
    def fit_counts(cls, path: str | os.PathLike[str]) -> AccessModel:
        """Fit ``alpha`` by maximum likelihood to a CSV of per-row access counts.

        Columns ``table,count`` (one row per embedding row; rows absent from the file are taken
        as never accessed only through the table size column ``rows`` if given). Within each
        table the counts are ranked; the log-likelihood of the multinomial is
        ``-a sum c_i ln(rank_i) - sum_t C_t ln H(n_t, a)``.
        """
        p = check_input_file(path, "access-count file")
        counts: dict[str, list[float]] = {}
        sizes: dict[str, int] = {}
        with open_input_text(p, "access-count file") as f, decode_errors(p):
            reader = csv.DictReader(f)
            if reader.fieldnames is None or not {"table", "count"} <= set(reader.fieldnames):
                raise InputError(f"{p}: line 1: expected columns table,count[,rows]")
            for line, row in enumerate(reader, start=2):
                try:
                    c = float(row["count"])
                except (TypeError, ValueError):
                    raise InputError(
                        f"{short(p)}: line {line}: column count: expected a number"
                    ) from None
                if not math.isfinite(c) or c < 0:
                    raise InputError(f"{p}: line {line}: count must be a finite number >= 0")
                counts.setdefault(row["table"], []).append(c)
                if row.get("rows"):
                    try:
                        n = int(row["rows"])
                    except ValueError:
                        n = 0
                    if n < 1:
                        raise InputError(
                            f"{short(p)}: line {line}: column rows: expected a whole number >= 1"
                        )
                    sizes[row["table"]] = n
        if not counts:
            raise InputError(f"{p}: no rows")
        ranked = [np.sort(np.asarray(v))[::-1] for v in counts.values()]
        ns = [max(sizes.get(t, 0), len(v)) for t, v in zip(counts, ranked)]
        slog = sum(float(np.sum(v * np.log(np.arange(1, len(v) + 1)))) for v in ranked)
        tot = [float(v.sum()) for v in ranked]

        def nll(a: float) -> float:
            return a * slog + sum(C * math.log(float(gen_harmonic(n, a))) for C, n in zip(tot, ns))

        from scipy import optimize

        res = optimize.minimize_scalar(
            nll, bounds=(0.0, 5.0), method="bounded", options={"xatol": 1e-8}
        )
        return cls(tuple(ns), float(res.x))

    # -- bins ---------------------------------------------------------------------------------------
    @cached_property
    def bins(self) -> tuple[np.ndarray, np.ndarray]:
        """(per-row access probability per sample within its table, rows in the bin), over all tables."""
        probs, counts = [], []
        for n in self.tables:
            n = int(n)
            edges = [0] + list(range(1, min(n, _EXACT) + 1))
            k = _EXACT
            while k < n:
                k = min(n, max(k + 1, int(k * _RATIO)))
                edges.append(k)
            e = np.asarray(edges, dtype=float)
            H = gen_harmonic(e, self.alpha)
            mass = np.diff(H) / H[-1]
            cnt = np.diff(e)
            probs.append(mass / cnt)
            counts.append(cnt)
        p = np.concatenate(probs)
        c = np.concatenate(counts)
        order = np.argsort(-p, kind="stable")
        return p[order], c[order]

    @property
    def n_tables(self) -> int:
        """Tables ``T`` (one lookup in each per sample)."""
        return len(self.tables)

    @property
    def rows(self) -> int:
        """Rows of all the tables."""
        return int(sum(self.tables))

    # -- queries ------------------------------------------------------------------------------------
    @overload
    def coverage(self, r: float) -> float: ...
    @overload
    def coverage(self, r: np.ndarray) -> np.ndarray: ...
    def coverage(self, r: float | np.ndarray) -> np.ndarray | float:
        """Share of accesses on the top fraction r of rows (exact ranking)."""
        p, c = self.bins
        share = p * c / self.n_tables
        cum_rows = np.concatenate([[0.0], np.cumsum(c)]) / self.rows
        cum_share = np.concatenate([[0.0], np.cumsum(share)])
        out = np.interp(np.clip(r, 0.0, 1.0), cum_rows, cum_share)
        return float(out) if np.ndim(out) == 0 else out

    @overload
    def touched(self, n_samples: float) -> float: ...
    @overload
    def touched(self, n_samples: np.ndarray) -> np.ndarray: ...
    def touched(self, n_samples: float | np.ndarray) -> np.ndarray | float:
        """Expected fraction of rows accessed at least once by n samples (a scalar's answer is
        cached: every MFU/SSU replication asks for the same ones)."""
        if np.ndim(n_samples) == 0:
            key = (self.tables, self.alpha, float(n_samples))
            got = _TOUCHED.get(key)
            if got is None:
                if len(_TOUCHED) > 4096:
                    _TOUCHED.clear()
                dkey = f"{_tables_key(self.tables)}|{self.alpha!r}|{float(n_samples)!r}"
                got = _disk_get("touched", dkey)
                if got is None:
                    got = float(self._touched(float(n_samples)))
                    _disk_put("touched", dkey, got)
                _TOUCHED[key] = got
            return got
        return self._touched(n_samples)

    def _touched(self, n_samples: float | np.ndarray) -> np.ndarray | float:
        p, c = self.bins
        n = np.atleast_1d(np.asarray(n_samples, dtype=float))
        # 1 - (1-p)^n computed stably
        out = np.array(
            [float(np.sum(c * -np.expm1(x * np.log1p(-np.minimum(p, 1 - 1e-16))))) for x in n]
        )
        out /= self.rows
        return float(out[0]) if np.ndim(n_samples) == 0 else out

    def sampled_coverage(self, r: float, m_samples: float) -> float:
        """Expected access share (out of sample) of the top fraction r of rows ranked by counts of m samples."""
        return self.ranked_share(r, m_samples).out_of_sample

    def in_sample_coverage(self, r: float, m_samples: float, sample_rate: float = 1.0) -> float:
        """Expected share of a window's accesses on the top fraction r of rows ranked by the counts
        of that window (MFU) or of a sub-sample of it at ``sample_rate`` (SSU)."""
        return self.ranked_share(r, m_samples, sample_rate).in_sample

    def ranked_share(self, r: float, m_samples: float, sample_rate: float = 1.0) -> RankedShare:
        """The access shares of the top fraction ``r`` of rows ranked by counting the accesses of
        ``m_samples x sample_rate`` of a window's ``m_samples`` samples (see :class:`RankedShare`)."""
        key = (self.tables, self.alpha, float(r), float(m_samples), float(sample_rate))
        got = _SC_CACHE.get(key)
        if got is None:
            if len(_SC_CACHE) > 4096:
                _SC_CACHE.clear()
            dkey = f"{_tables_key(self.tables)}|{self.alpha!r}|{key[2]!r}|{key[3]!r}|{key[4]!r}"
            pair = _disk_get("ranked", dkey)
            if pair is not None:
                got = RankedShare(float(pair[0]), float(pair[1]))
            else:
                got = self._ranked_share(float(r), float(m_samples), float(sample_rate))
                _disk_put("ranked", dkey, [got.in_sample, got.out_of_sample])
            _SC_CACHE[key] = got
        return got

    def _ranked_share(self, r: float, m: float, s: float) -> RankedShare:
        from scipy import special  # here, not at import (every command's start)

        if not 0 <= r <= 1:
            raise InputError(f"top fraction must be in [0, 1], got {r}")
        if not 0 < s <= 1:
            raise InputError(f"sample rate must be in (0, 1], got {s}")
        if not (math.isfinite(m) and m >= 0):
            raise InputError(f"samples must be a finite number >= 0, got {m}")
        if (
            r in (0.0, 1.0) or m == 0
        ):  # nothing or everything, or a ranking by nothing (random rows)
            return RankedShare(r, r)
        p, c = self.bins
        mu = m * s * p  # counted accesses per row: Y ~ Poisson(mu)
        want = r * self.rows

        def above(k: int) -> float:  # E[# rows with Y > k]
            return float(np.sum(c * special.pdtrc(k, mu)))

        # the threshold count k: rows with Y > k are in, a share q of the rows with Y == k too
        # bracket: near the count expected of the population's threshold row (rows are sorted by p)
        at = min(int(np.searchsorted(np.cumsum(c), want)), len(mu) - 1)
        k0, spread = float(mu[at]), 8.0 * math.sqrt(float(mu[at])) + 8.0
        lo, hi = max(0, int(k0 - spread)), int(k0 + spread) + 1
        if lo > 0 and above(lo) <= want:
            lo = 0
        if above(hi) > want:
            hi = int(float(mu.max()) + 10.0 * math.sqrt(float(mu.max())) + 50.0)
        while lo < hi:  # smallest k with E[# rows with Y > k] <= want
            mid = (lo + hi) // 2
            if above(mid) <= want:
                hi = mid
            else:
                lo = mid + 1
        k = lo
        gt = special.pdtrc(k, mu)  # P(Y > k)
        eq = np.exp(special.xlogy(k, mu) - mu - special.gammaln(k + 1.0))  # P(Y = k)
        ge = gt + eq  # P(Y >= k)
        n_gt, n_eq = float(np.sum(c * gt)), float(np.sum(c * eq))
        q = 0.0 if n_eq <= 0 else min(1.0, max(0.0, (want - n_gt) / n_eq))
        sel = gt + q * eq  # P(row selected)
        out = float(np.sum(c * p * sel)) / self.n_tables
        # E[X; selected] with X = Y + Z, Z ~ Poisson((1 - s) m p) the uncounted accesses:
        # E[Y; Y > k] = mu P(Y >= k), E[Y; Y = k] = k P(Y = k)
        counted = mu * ge + q * k * eq
        inside = float(np.sum(c * (counted + (1.0 - s) * m * p * sel))) / (m * self.n_tables)
        return RankedShare(min(1.0, inside), min(1.0, out))

    def describe(self) -> str:
        """One line: the exponent, the tables and rows, and the share of accesses the top 1% of rows
        take."""
        return (
            f"Zipf alpha={self.alpha:.4f} over {self.n_tables} tables, {self.rows:,} rows; "
            f"top 1% of rows take {100 * self.coverage(0.01):.1f}% of accesses"
        )


_CACHE: dict[tuple, AccessModel] = {}

# -- the cache on disk ----------------------------------------------------------------------------------
_DISK: dict[str, dict[str, object]] | None = None  #: loaded on first use
_NEW: dict[str, dict[str, object]] = {}  #: entries computed by this process, written at exit
_DISK_MAX = 20_000  #: entries per kind; beyond, the file starts over


@lru_cache(maxsize=64)
def _tables_key(tables: tuple[int, ...]) -> str:
    return hashlib.sha256(",".join(map(str, tables)).encode()).hexdigest()[:16]


@lru_cache(maxsize=1)
def _disk_path() -> Path | None:
    base = cache_dir()
    if base is None:
        return None
    import scipy

    from cprsim.version import __version__

    h = hashlib.sha256()
    h.update(Path(__file__).read_bytes())
    h.update(f"{np.__version__}|{scipy.__version__}|{__version__}".encode())
    return base / f"access-{h.hexdigest()[:16]}.json"


def _read_disk(path: Path) -> dict[str, dict[str, object]]:
    try:
        data = json.loads(read_input_text(path, "access cache", "data"))
    except (InputError, ValueError, RecursionError):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, dict)} if isinstance(data, dict) else {}


def _disk_get(kind: str, key: str) -> Any:
    """The JSON value :func:`_disk_put` stored under ``kind``/``key`` (its caller knows the shape:
    a number, or a pair for ``ranked``), or None."""
    global _DISK
    try:
        path = _disk_path()
    except OSError:
        return None
    if path is None:
        return None
    if _DISK is None:
        _DISK = _read_disk(path)
    got = _DISK.get(kind, {}).get(key)
    return got if got is not None else _NEW.get(kind, {}).get(key)


def _disk_put(kind: str, key: str, value: object) -> None:
    try:
        if _disk_path() is None:
            return
    except OSError:
        return
    if not _NEW:
        atexit.register(_flush)
    _NEW.setdefault(kind, {})[key] = value


def _flush() -> None:
    """Merge this process's new entries into the file (temporary file + rename); errors ignored."""
    global _NEW
    new, _NEW = _NEW, {}
    try:
        path = _disk_path()
        if path is None or not new:
            return
        data = _read_disk(path)
        for kind, entries in new.items():
            old = data.get(kind, {})
            data[kind] = {**(old if len(old) + len(entries) <= _DISK_MAX else {}), **entries}
        atomic_write_text(path, json.dumps(data, separators=(",", ":")))
    except (OSError, ValueError):
        pass


#: the embedding dimension assumed when the rows come from the bytes and no ``access.dim`` is given
#: (production DLRMs use 64-256; DLRM's Criteo Terabyte configuration uses 64)
DEFAULT_DIM = 64


def table_sizes(spec: str, scale: float = 1.0) -> tuple[int, ...]:
    """'criteo-kaggle', or a CSV file with a ``rows`` column (one line per table)."""
    if spec == "criteo-kaggle":
        base: tuple[int, ...] = CRITEO_KAGGLE
    else:
        p = Path(spec)
        try:
            check_input_file(p, "tables file")
        except InputError as e:
            raise InputError(f"access.tables: {e} (or use 'criteo-kaggle')") from None
        base = _read_tables(str(p), p.stat().st_mtime_ns)
    return tuple(max(1, int(round(n / scale))) for n in base)


@lru_cache(maxsize=16)
def _read_tables(path: str, mtime_ns: int) -> tuple[int, ...]:
    """A tables file's ``rows`` column, read once per version of the file (every MFU/SSU
    replication asks for the layout)."""
    p = Path(path)
    sizes = []
    with open_input_text(p, "tables file") as f, decode_errors(p):
        reader = csv.DictReader(f)
        if reader.fieldnames is None or "rows" not in reader.fieldnames:
            raise InputError(f"{p}: line 1: expected a `rows` column")
        for line, row in enumerate(reader, start=2):
            try:
                n = int(row["rows"])
            except (TypeError, ValueError, OverflowError):
                raise InputError(
                    f"{short(p)}: line {line}: column rows: expected an integer"
                ) from None
            if n < 1:
                raise InputError(f"{p}: line {line}: rows must be >= 1")
            sizes.append(n)
    if not sizes:
        raise InputError(f"{p}: no tables")
    return tuple(sizes)


def scaled_to(shape: tuple[int, ...], total: int) -> tuple[int, ...]:
    """The table sizes ``shape`` scaled to ``total`` rows in all (each at least one row; the
    rounding remainder goes to the largest table, so the sum is exactly ``total``)."""
    if total < len(shape):
        raise InputError(f"access: {total:,} rows cannot fill {len(shape)} tables")
    f = total / sum(shape)
    out = [max(1, int(round(n * f))) for n in shape]
    big = max(range(len(out)), key=out.__getitem__)
    out[big] += total - sum(out)
    if out[big] < 1:  # pragma: no cover - only when nearly every table is one row
        raise InputError(f"access: {total:,} rows cannot fill {len(shape)} tables")
    return tuple(out)


@dataclass(frozen=True)
class Layout:
    """Rows and bytes of the embedding tables, as a scenario implies them."""

    tables: tuple[int, ...]
    dim: float  #: parameters per row (derived when the rows are given)
    bytes_per_param: float
    embedding_bytes: float  #: parameters only
    #: what was derived: "rows" (from the bytes and dim) or "dim" (from the bytes and rows)
    derived: str

    @property
    def rows(self) -> int:
        """Rows of all the tables."""
        return int(sum(self.tables))

    @property
    def row_bytes(self) -> float:
        """Parameter bytes of one row (the optimizer state multiplies what a checkpoint writes)."""
        return self.dim * self.bytes_per_param


def layout(s) -> Layout:
    """The table layout of a scenario: rows from ``embedding_gb / (dim x bytes_per_param)`` unless
    the scenario gives the rows (``access.rows``, or a tables file). Cached by the keys it reads
    (a tables file by its version): every MFU/SSU replication and planner step asks for it."""
    a = s.access
    key: tuple = (a.tables, a.table_scale, a.rows, a.dim, a.bytes_per_param, s.cluster.embedding_gb)
    if a.tables != "criteo-kaggle":
        try:
            st = Path(a.tables).stat()
            key += (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        except OSError:
            return _layout(s)  # the error, as _layout words it
    got = _LAYOUTS.get(key)
    if got is None:
        if len(_LAYOUTS) > 256:
            _LAYOUTS.clear()
        got = _LAYOUTS[key] = _layout(s)
    return got


def _layout(s) -> Layout:
    from cprsim.scenario import GB

    a = s.access
    emb = s.cluster.embedding_gb * GB
    if a.tables != "criteo-kaggle" and a.rows is None:
        tabs = table_sizes(a.tables, a.table_scale)
        return Layout(tabs, emb / (sum(tabs) * a.bytes_per_param), a.bytes_per_param, emb, "dim")
    shape = table_sizes(a.tables, a.table_scale)
    if a.rows is not None:
        return Layout(
            scaled_to(shape, a.rows),
            emb / (a.rows * a.bytes_per_param),
            a.bytes_per_param,
            emb,
            "dim",
        )
    dim = a.dim if a.dim is not None else DEFAULT_DIM
    total = int(round(emb / (dim * a.bytes_per_param)))
    if total < len(shape):
        raise InputError(
            f"access: cluster.embedding_gb = {s.cluster.embedding_gb:g} at dim {dim} x "
            f"{a.bytes_per_param:g} bytes is {total:,} rows, fewer than the {len(shape)} tables"
        )
    return Layout(scaled_to(shape, total), float(dim), a.bytes_per_param, emb, "rows")


def of(s) -> AccessModel:
    """The access model of a scenario: its ``[access]`` skew over the tables ``layout(s)`` gives (cached)."""
    cfg = s.access
    tables = layout(s).tables
    key = (tables, cfg.top_fraction, cfg.top_share, cfg.alpha)
    if key not in _CACHE:
        if len(_CACHE) > 64:
            _CACHE.clear()
        _CACHE[key] = (
            AccessModel(tables, cfg.alpha)
            if cfg.alpha is not None
            else AccessModel.from_skew(tables, cfg.top_fraction, cfg.top_share)
        )
    return _CACHE[key]
