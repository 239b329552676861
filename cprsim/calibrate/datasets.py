"""Training data for ``cprsim calibrate``: one interface over synthetic data, MovieLens-100k, a
Criteo TSV and a user's own CSV or Parquet file (numpy only; no torch here).

A data source yields a :class:`Split`: a training and a held-out :class:`~cprsim.calibrate.data.
Dataset`, the embedding tables' sizes (one table per categorical column; row 0 of every table
is "missing or unknown"), the columns' names and a one-line description for the provenance of
``calibration.toml``. The number of categorical and dense columns comes from the data; the DLRM
takes its shapes from it.

Sources (``cprsim calibrate --data``):

* ``synthetic`` (the default): :func:`cprsim.calibrate.data.synthetic`, the Criteo-like generator;
  each seed draws its own training samples, every seed the same held-out samples
  (:func:`synthetic_split`). Its numbers are those of earlier versions, unchanged.
* ``movielens-100k``: the GroupLens MovieLens-100k ratings, read from the files that the
  ``recbole`` package ships inside its wheel (``recbole/dataset_example/ml-100k``), located with
  :mod:`importlib.metadata` and read as text: recbole is never imported and nothing is
  downloaded. recbole's own dependencies cap Python at 3.11 (ray), so it is installed without
  them, on any Python: ``pip install --no-deps recbole==1.2.1`` (``make test`` does). Or the
  folder named by ``CPRSIM_MOVIELENS_DIR`` holding the same three files. Either way the files'
  SHA-256 must be those of recbole 1.2.1's (``MOVIELENS_SHA256``). Features:
  :func:`read_movielens_100k`.
* a Criteo Kaggle/Terabyte ``.tsv`` (or ``.txt``) file: :func:`cprsim.calibrate.data.read_criteo_tsv`
  (hashed rows over the preset's scaled Criteo tables); the last 20% of the lines are held out.
* a ``.csv`` (or ``.tsv`` with a schema) or ``.parquet`` file with ``--schema schema.toml``:
  :func:`read_table` (the schema's format: :func:`read_schema`). Parquet needs pyarrow
  (``pip install 'cprsim[parquet]'``).

**One epoch.** With real data the calibration trains on the data's own size: every training
sample once (one epoch), in an order shuffled per seed (:func:`seed_data`), as a production
recommender sees each sample once. There is no multi-epoch option, so no over-fitting to guard
against: ML-100k's 80,367 training ratings make 156 batches of 512 (:func:`sized`).

**Fingerprint.** A file's SHA-256 (MovieLens: its three files'; a table: the data's and the
schema's) is part of the calibration's configuration, so ``--resume`` refuses other data; each
worker checks it again when it loads the file.

Every bad input is a one-line :class:`cprsim.errors.InputError` naming the file and the key,
column or line.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import math
import numbers
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from cprsim.calibrate import data as D
from cprsim.errors import InputError, ParameterError
from cprsim.io import (
    check_input_file,
    decode_errors,
    open_input_binary,
    open_input_text,
    read_input_text,
    read_toml,
    short,
)

#: the data sources named, not files
NAMED = ("synthetic", "movielens-100k")
#: a calibration on real data needs at least this many training batches (else the budgets and
#: failure times, fractions of the run, round to the same few iterations)
MIN_ITERS = 20
#: the fraction of a Criteo TSV's lines held out (its last lines), and a schema's default
HELD_OUT = 0.2
#: the package whose wheel holds MovieLens-100k, and where
MOVIELENS_PACKAGE = "recbole"
MOVIELENS_DIR = "recbole/dataset_example/ml-100k"
MOVIELENS_FILES = ("ml-100k.inter", "ml-100k.user", "ml-100k.item")
#: the SHA-256 of each file as recbole 1.2.1's wheel ships it (the data the calibration stands for)
MOVIELENS_SHA256 = {
    "ml-100k.inter": "4edb74e2a81178c2ba9ff381495f754f996c4aea351b1272ca36b43da0935eff",
    "ml-100k.user": "4f670007d9cfbeb9807e757209af1555b9bcc186bde25e767f67cb67c6dd5972",
    "ml-100k.item": "51d7cdf777ce5c0f5b32c1d947a4a81fe07d75e78abbe761e0cd4d0756064532",
}
#: a folder holding the three files, used instead of the installed recbole's
MOVIELENS_ENV = "CPRSIM_MOVIELENS_DIR"
#: how to get the files on any Python (pip's own option, not one of cprsim's)
MOVIELENS_INSTALL = "pip install --no-deps recbole==1.2.1"
#: a hashed categorical column has at most this many buckets (an embedding table of 10 M rows)
MAX_BUCKETS = 10_000_000


@dataclass(frozen=True)
class Split:
    """A data set split into training and held-out samples, with its tables and description."""

    train: D.Dataset
    test: D.Dataset
    tables: tuple[int, ...]
    cat_names: tuple[str, ...]
    dense_names: tuple[str, ...]
    description: str

    @property
    def n_cat(self) -> int:
        """Categorical columns (one embedding table each)."""
        return len(self.tables)

    @property
    def n_dense(self) -> int:
        """Dense columns."""
        return len(self.dense_names)


@dataclass(frozen=True)
class DataSpec:
    """Which real data a calibration trains on (the preset's ``data``; ``None`` is synthetic).

    ``path`` is the data file (MovieLens: the folder of its files), ``sha256`` its digest
    (MovieLens: of its three files' digests), ``schema``/``schema_sha256`` the schema file of a
    table, ``package`` the package that ships the data.
    """

    source: str  #: "movielens-100k", "criteo" or "table"
    path: str
    sha256: str
    schema: str = ""
    schema_sha256: str = ""
    package: str = ""

    @property
    def name(self) -> str:
        """A short name for the data: the source for MovieLens, else the file's name."""
        return self.source if self.source == "movielens-100k" else Path(self.path).name

    def fingerprint(self) -> dict[str, str]:
        """What the calibration's numbers depend on (not where the files lie)."""
        d = {"source": self.source, "sha256": self.sha256}
        if self.source != "movielens-100k":
            d["file"] = Path(self.path).name
        if self.schema:
            d["schema"] = Path(self.schema).name
            d["schema_sha256"] = self.schema_sha256
        if self.package:
            d["package"] = self.package
        return d


def _sha256(path: Path) -> str:
    try:
        with open_input_binary(path) as f:
            return hashlib.file_digest(f, "sha256").hexdigest()
    except OSError as e:
        raise InputError(f"{short(path)}: cannot read this file ({e.strerror or e})") from None


# -- choosing a source -------------------------------------------------------------------------------
def resolve(data: str, schema: str | Path | None = None) -> DataSpec | None:
    """The source ``data`` (and ``schema``) name: ``None`` for synthetic data. A bad one raises
    :class:`~cprsim.errors.ParameterError` naming ``data`` or ``schema``."""
    if data in NAMED:
        if schema is not None:
            raise ParameterError(
                "schema",
                f"describes the columns of a .csv or .parquet `data` file, not {data} data",
                also=("data",),
            )
        if data == "synthetic":
            return None
        root = movielens_root()
        return DataSpec(
            "movielens-100k",
            str(root),
            _movielens_digest(root),
            package=f"{MOVIELENS_PACKAGE} {_version(MOVIELENS_PACKAGE)}",
        )
    p = Path(data)
    if not p.exists():
        raise ParameterError(
            "data",
            "no such data file (expected synthetic, movielens-100k, a Criteo .tsv, or a "
            ".csv/.parquet file with `schema`)",
            short(data),
            also=("schema",),
        )
    p = check_input_file(p, "data file").resolve()
    suffix = p.suffix.lower()
    if schema is not None:
        s = check_input_file(schema, "schema file", "config").resolve()
        read_schema(s)  # a malformed schema fails now, not in the workers
        return DataSpec("table", str(p), _sha256(p), str(s), _sha256(s))
    if suffix in (".tsv", ".txt"):
        return DataSpec("criteo", str(p), _sha256(p))
    if suffix in (".csv", ".parquet", ".pq"):
        raise ParameterError(
            "data",
            f"a {suffix} file needs `schema`, a schema.toml naming its label, categorical and "
            "dense columns (docs/calibration.md, Data)",
            short(data),
            also=("schema",),
        )
    raise ParameterError(
        "data",
        "unknown kind of data file (expected a Criteo .tsv/.txt, or a .csv/.tsv/.parquet file "
        "with `schema`)",
        short(data),
        also=("schema",),
    )


@lru_cache(maxsize=2)
def load(spec: DataSpec, scale: float = 1000.0) -> Split:
    """The source's split (cached in this process); ``scale`` sizes a Criteo file's tables."""
    if spec.source == "movielens-100k":
        root = Path(spec.path)
        if _movielens_digest(root) != spec.sha256:
            raise InputError(
                f"{short(root)}: the MovieLens-100k files changed while the calibration "
                f"ran (their SHA-256 differs from the configuration's)"
            )
        return read_movielens_100k(root)
    p = Path(spec.path)
    if _sha256(check_input_file(p, "data file")) != spec.sha256:
        raise InputError(
            f"{short(p)}: the file changed while the calibration ran (its SHA-256 "
            f"differs from the configuration's)"
        )
    if spec.source == "criteo":
        return read_criteo_split(p, scale)
    if spec.source == "table":
        return read_table(p, spec.schema)
    raise InputError(f"unknown data source {spec.source!r}")


def read_criteo_split(path: str | Path, scale: float = 1000.0, held_out: float = HELD_OUT) -> Split:
    """A Criteo TSV (:func:`cprsim.calibrate.data.read_criteo_tsv`); its last lines held out."""
    tables = D.scaled_tables(scale)
    ds = D.read_criteo_tsv(path, tables=tables)
    n = len(ds)
    n_test = int(round(n * held_out))
    if n_test < 1 or n_test >= n:
        raise InputError(
            f"{short(path)}: {n} samples are too few to hold out {held_out:.0%} of them"
        )
    desc = (
        f"Criteo TSV {Path(path).name}: {n} samples; 26 hashed tables = Criteo Kaggle / {scale:g} "
        f"({sum(tables)} rows), 13 log1p integer features; split: the last {held_out:.0%} of the "
        f"lines held out ({n_test}), the rest train ({n - n_test})"
    )
    return Split(
        ds.slice(0, n - n_test),
        ds.slice(n - n_test, n),
        tables,
        tuple(f"C{t + 1}" for t in range(D.N_CAT)),
        tuple(f"I{i + 1}" for i in range(D.N_DENSE)),
        desc,
    )


def synthetic_split(
    train_samples: int, test_samples: int, seed: int, scale: float = 1000.0
) -> Split:
    """Synthetic Criteo-like data for ``seed``: its own training samples, the common held-out set
    (exactly the samples earlier versions drew)."""
    train = D.synthetic(train_samples, seed=seed + 1, scale=scale)
    test = D.synthetic(test_samples, seed=0, scale=scale, start_chunk=1 << 20)
    tables = D.scaled_tables(scale)
    return Split(
        train,
        test,
        tables,
        tuple(f"C{t + 1}" for t in range(D.N_CAT)),
        tuple(f"I{i + 1}" for i in range(D.N_DENSE)),
        synthetic_description(scale),
    )


def synthetic_description(scale: float) -> str:
    """The provenance line of the synthetic data at table ``scale``: its tables, rows and Zipf
    exponent."""
    tables = D.scaled_tables(scale)
    return (
        f"synthetic Criteo-like (cprsim.calibrate.data): 26 tables = Criteo Kaggle / "
        f"{scale:g} ({sum(tables)} rows), Zipf alpha {D.default_alpha(tables):.4f}"
    )


# -- a preset on real data -------------------------------------------------------------------------
def sized(p: Any, spec: DataSpec | None, limit: Sequence[int] | None = None) -> Any:
    """The preset ``p`` (a :class:`cprsim.calibrate.runner.Preset`) on ``spec``'s data: its
    training and held-out sample counts become the data's own (one epoch), at most ``limit =
    (train, test)`` (a slice: the earliest training and held-out samples); its other settings are
    kept. Synthetic data (``spec`` None) keeps the preset's counts, capped by ``limit``."""
    lim_tr, lim_te = (None, None) if limit is None else (int(limit[0]), int(limit[1]))
    if spec is None:
        if limit is None:
            return p
        return dataclasses.replace(
            p, train_samples=min(p.train_samples, lim_tr), test_samples=min(p.test_samples, lim_te)
        )
    s = load(spec, p.scale)
    n_tr = len(s.train) if lim_tr is None else min(lim_tr, len(s.train))
    n_te = len(s.test) if lim_te is None else min(lim_te, len(s.test))
    if n_tr // p.batch < MIN_ITERS:
        raise InputError(
            f"{spec.name}: {n_tr} training samples make {n_tr // p.batch} batches of "
            f"{p.batch}; a calibration needs at least {MIN_ITERS} "
            f"({MIN_ITERS * p.batch} training samples)"
        )
    for what, lab in (("training", s.train.label[:n_tr]), ("held-out", s.test.label[:n_te])):
        pos = int(lab.sum())
        if pos == 0 or pos == len(lab):
            raise InputError(
                f"{spec.name}: the {what} samples all have label {int(lab[0])}; "
                f"a calibration needs both labels (AUC is undefined otherwise)"
            )
    return dataclasses.replace(p, train_samples=n_tr, test_samples=n_te, data=spec)


def seed_data(
    spec: DataSpec, seed: int, train_samples: int, test_samples: int, scale: float = 1000.0
) -> tuple[D.Dataset, D.Dataset, tuple[int, ...]]:
    """Seed ``seed``'s training samples (the first ``train_samples`` of the split's training
    part, in an order shuffled by the seed) and the held-out samples (the first
    ``test_samples``), with the tables' sizes."""
    s = load(spec, scale)
    if train_samples > len(s.train) or test_samples > len(s.test):
        raise InputError(
            f"{spec.name}: {train_samples} training / {test_samples} held-out samples "
            f"asked, the data has {len(s.train)} / {len(s.test)}"
        )
    order = np.random.default_rng(np.random.SeedSequence([seed, 0x5EED0DA7])).permutation(
        train_samples
    )
    tr = s.train
    train = D.Dataset(tr.dense[order], tr.cat[order], tr.label[order])
    te = s.test.slice(0, test_samples)
    test = D.Dataset(
        np.ascontiguousarray(te.dense), np.ascontiguousarray(te.cat), np.ascontiguousarray(te.label)
    )
    return train, test, s.tables


def table_rows(p: Any) -> int:
    """The embedding rows (all tables) of a calibration of preset ``p``: the synthetic tables at
    its scale, or the real data's own."""
    spec = getattr(p, "data", None)
    tables = D.scaled_tables(p.scale) if spec is None else load(spec, p.scale).tables
    return int(sum(tables))


def describe(p: Any) -> str:
    """The provenance's ``data`` line of a calibration of preset ``p``."""
    spec = getattr(p, "data", None)
    if spec is None:
        return (
            f"{synthetic_description(p.scale)}, {p.train_samples} train / {p.test_samples} "
            f"held-out samples, batch {p.batch}"
        )
    s = load(spec, p.scale)
    used = (
        "all" if (p.train_samples, p.test_samples) == (len(s.train), len(s.test)) else "the first"
    )
    shipped = f"; files of the {spec.package} wheel" if spec.package else ""
    return (
        f"{s.description}{shipped}; sha256 {spec.sha256[:16]}; {used} {p.train_samples} train / "
        f"{p.test_samples} held-out samples used, one epoch, training order shuffled per seed, "
        f"batch {p.batch}"
    )


# -- MovieLens-100k ------------------------------------------------------------------------------
def _version(dist: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "?"


def movielens_root() -> Path:
    """The folder of the MovieLens-100k files: ``$CPRSIM_MOVIELENS_DIR``, else the installed
    recbole's (not imported); each file's SHA-256 checked against recbole 1.2.1's."""
    import os
    from importlib import metadata

    need = (
        "movielens-100k reads the MovieLens-100k files that recbole's wheel ships: "
        f"{MOVIELENS_INSTALL} (any Python; recbole is never imported), "
        f"or set {MOVIELENS_ENV} to a folder with {', '.join(MOVIELENS_FILES)}"
    )
    env = os.environ.get(MOVIELENS_ENV)
    if env:
        root, where = Path(env), f"{MOVIELENS_ENV}={env}"
    else:
        try:
            dist = metadata.distribution(MOVIELENS_PACKAGE)
        except metadata.PackageNotFoundError:
            raise ParameterError("data", f"{need} (recbole is not installed)") from None
        root = Path(str(dist.locate_file(MOVIELENS_DIR)))
        where = f"recbole {dist.version}"
    missing = [f for f in MOVIELENS_FILES if not (root / f).is_file()]
    if missing:
        raise ParameterError("data", f"{need} ({where} has no {missing[0]})")
    for f in MOVIELENS_FILES:
        got = _sha256(check_input_file(root / f, "MovieLens-100k file"))
        if got != MOVIELENS_SHA256[f]:
            raise InputError(
                f"{short(root / f)}: SHA-256 {got[:12]}…, expected {MOVIELENS_SHA256[f][:12]}… "
                "(the MovieLens-100k file of recbole 1.2.1): not the data the calibration reads"
            )
    return root


def _movielens_digest(root: Path) -> str:
    h = hashlib.sha256()
    for f in MOVIELENS_FILES:
        h.update(f"{f}:{_sha256(check_input_file(root / f, 'MovieLens-100k file'))}\n".encode())
    return h.hexdigest()


def _tsv_rows(path: Path, header: str) -> list[tuple[int, list[str]]]:
    text = read_input_text(path, "MovieLens-100k file", max_bytes=64 * 2**20)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines or lines[0].rstrip("\r") != header:
        raise InputError(f"{short(path)}: line 1: expected the header {header!r}")
    width = header.count("\t") + 1
    out = []
    for i, line in enumerate(lines[1:], start=2):
        f = line.rstrip("\r").split("\t")
        if len(f) != width:
            raise InputError(
                f"{short(path)}: line {i}: expected {width} tab-separated fields, got {len(f)}"
            )
        out.append((i, f))
    if not out:
        raise InputError(f"{short(path)}: no rows after the header")
    return out


def _int(path: Path, line: int, name: str, s: str) -> int:
    try:
        return int(s)
    except ValueError:
        raise InputError(f"{short(path)}: line {line}: {name}: expected an integer") from None


#: MovieLens-1M's age groups (the 100k file has exact ages): rows 1..7
ML_AGE_EDGES = (18, 25, 35, 45, 50, 56)
#: release years in 5-year buckets from 1920 (row 1: before 1925) to 1995-1999 (row 16)
ML_YEAR0, ML_YEAR_STEP, ML_YEAR_BUCKETS = 1920, 5, 16
#: the first three genres of a movie, one table each
ML_GENRE_TABLES = 3
ML_CAT = (
    "user",
    "movie",
    "age_group",
    "gender",
    "occupation",
    "zip_area",
    "genre1",
    "genre2",
    "genre3",
    "release_5y",
)
ML_DENSE = (
    "log1p_user_train_ratings",
    "log1p_movie_train_ratings",
    "log1p_movie_age_years",
    "hour_utc",
    "weekday",
)


def read_movielens_100k(root: str | Path | None = None) -> Split:
    """MovieLens-100k as calibration data (the files in ``root``, by default recbole's).

    * **label**: rating >= 4 (55% of the ratings);
    * **split** (by time, per user): each user's ratings sorted by (timestamp, movie id); the
      latest ``k // 5`` of a user's ``k`` ratings are held out (every ML-100k user has at least 20
      ratings, so at least 4 are), the rest train (80,367 train, 19,633 held out); both parts are
      then ordered by (timestamp, user id, movie id). Per user, every held-out rating is at least
      as late as every training rating; a global time cut
      would hold out mostly users who joined late (85% of the latest 20,000 ratings are by users
      with no earlier rating), whose embeddings training never touched, so accuracy would hardly
      depend on the lost embedding updates this calibration measures;
    * **categorical** (row 0: missing or unknown in every table): ``user`` (row = user id),
      ``movie`` (row = movie id), ``age_group`` (MovieLens-1M's groups: <18, 18-24, 25-34, 35-44,
      45-49, 50-55, 56+), ``gender``, ``occupation`` (the user file's 21, sorted), ``zip_area``
      (first digit of the ZIP code; 11 = not a US code), ``genre1``..``genre3`` (the movie's
      first three genres, in the file's order, over its 19 sorted genres; 67 of the 1,682 movies
      have more, which are dropped; none = row 0), ``release_5y`` (release year in 5-year buckets
      from 1920; an unknown year = row 0);
    * **dense**: log1p of the user's and of the movie's number of ratings in the *training*
      split (0 for a user or movie it does not hold: the held-out ratings are never counted),
      log1p of the movie's age in years when rated (rating year - release year, 0 if unknown),
      the hour of the day (UTC) / 23 and the weekday (Monday = 0) / 6 of the rating.

    The user and movie tables cover the catalogue (the user and item files), not only the ids
    seen in training: a held-out rating of a user first seen after the split uses that user's
    untrained row.
    """
    root = movielens_root() if root is None else Path(root)
    fi, fu, fm = (root / f for f in MOVIELENS_FILES)
    users = _tsv_rows(
        fu, "user_id:token\tage:token\tgender:token\toccupation:token\tzip_code:token"
    )
    items = _tsv_rows(
        fm, "item_id:token\tmovie_title:token_seq\trelease_year:token\tclass:token_seq"
    )
    inter = _tsv_rows(fi, "user_id:token\titem_id:token\trating:float\ttimestamp:float")
    n_users, occupations, u_cat, known_user = _ml_users(fu, users)
    n_items, genres, m_cat, m_year, known_item = _ml_movies(fm, items)
    r = _ml_ratings(fi, inter, fu, fm, known_user, known_item)
    n = len(r)
    r, n_train, n_test = _ml_split_by_user(fi, r)
    u, m, rating, ts = r[:, 0], r[:, 1], r[:, 2], r[:, 3]
    # categorical
    cat = np.empty((n, len(ML_CAT)), np.int64)
    cat[:, 0], cat[:, 1] = u, m
    cat[:, 2:6] = u_cat[u]
    cat[:, 6:10] = m_cat[m]
    tables = (
        n_users + 1,
        n_items + 1,
        len(ML_AGE_EDGES) + 2,
        3,
        len(occupations) + 1,
        12,
        *([len(genres) + 1] * ML_GENRE_TABLES),
        ML_YEAR_BUCKETS + 1,
    )
    dense = _ml_dense(u, m, ts, n_train, m_year, n_users + 1)
    label = (rating >= 4).astype(np.float32)
    ds = D.Dataset(dense, cat, label)
    desc = (
        f"MovieLens-100k (GroupLens): {n} ratings by {int(known_user.sum())} users of "
        f"{int(known_item.sum())} movies; "
        f"label rating >= 4 ({label.mean():.1%} positive); {len(tables)} tables "
        f"({', '.join(ML_CAT)}: {sum(tables)} rows), {len(ML_DENSE)} dense features "
        f"(user and movie rating counts of the training split, movie age, hour, weekday); split by "
        f"time per user: each user's latest fifth of ratings held out ({n_test}), the rest train "
        f"({n_train})"
    )
    return Split(ds.slice(0, n_train), ds.slice(n_train, n), tables, ML_CAT, ML_DENSE, desc)


def _ml_users(fu: Path, users: list) -> tuple[int, list[str], np.ndarray, np.ndarray]:
    """The user file's rows checked: the largest user id, the sorted occupations, each user's
    categorical rows (age group, gender, occupation, ZIP area) and which ids the file has."""
    n_users = max(_int(fu, ln, "user_id", f[0]) for ln, f in users)
    if n_users < 1 or n_users > 10_000_000:
        raise InputError(f"{short(fu)}: user ids must be 1..10,000,000, the largest is {n_users}")
    occupations = sorted({f[3] for _, f in users})
    occ_row = {o: i + 1 for i, o in enumerate(occupations)}
    u_cat = np.zeros((n_users + 1, 4), np.int64)  # age group, gender, occupation, zip area
    known_user = np.zeros(n_users + 1, bool)
    for ln, f in users:
        uid = _int(fu, ln, "user_id", f[0])
        if uid < 1 or known_user[uid]:
            raise InputError(
                f"{short(fu)}: line {ln}: user_id: not positive, or repeats an earlier line's"
            )
        age_y = _int(fu, ln, "age", f[1])
        if not 0 < age_y < 150:
            raise InputError(f"{short(fu)}: line {ln}: age: expected 1..149 years")
        if f[2] not in ("M", "F"):
            raise InputError(f"{short(fu)}: line {ln}: gender: expected M or F")
        known_user[uid] = True
        zip_area = int(f[4][0]) + 1 if f[4][:1].isdigit() and f[4][:1].isascii() else 11
        u_cat[uid] = (
            1 + int(np.searchsorted(ML_AGE_EDGES, age_y, side="right")),
            1 if f[2] == "M" else 2,
            occ_row[f[3]],
            zip_area,
        )
    return n_users, occupations, u_cat, known_user


def _ml_movies(fm: Path, items: list) -> tuple[int, list[str], np.ndarray, np.ndarray, np.ndarray]:
    """The item file's rows checked: the largest movie id, the sorted genres, each movie's
    categorical rows (first genres, release bucket), its release year (-1: unknown) and which
    ids the file has."""
    n_items = max(_int(fm, ln, "item_id", f[0]) for ln, f in items)
    if n_items < 1 or n_items > 10_000_000:
        raise InputError(f"{short(fm)}: movie ids must be 1..10,000,000, the largest is {n_items}")
    genres = sorted({g for _, f in items for g in f[3].split()})
    g_row = {g: i + 1 for i, g in enumerate(genres)}
    m_cat = np.zeros((n_items + 1, ML_GENRE_TABLES + 1), np.int64)  # genres, release bucket
    m_year = np.full(n_items + 1, -1, np.int64)
    known_item = np.zeros(n_items + 1, bool)
    for ln, f in items:
        mid = _int(fm, ln, "item_id", f[0])
        if mid < 1 or known_item[mid]:
            raise InputError(
                f"{short(fm)}: line {ln}: item_id: not positive, or repeats an earlier line's"
            )
        known_item[mid] = True
        gs = f[3].split()[:ML_GENRE_TABLES]
        m_cat[mid, : len(gs)] = [g_row[g] for g in gs]
        y = f[2]
        if (
            y.isdigit() and y.isascii() and 1800 <= int(y) <= 2100
        ):  # recbole's file has "unkonwn", "V"
            m_year[mid] = int(y)
            m_cat[mid, ML_GENRE_TABLES] = 1 + min(
                max((int(y) - ML_YEAR0) // ML_YEAR_STEP, 0), ML_YEAR_BUCKETS - 1
            )
    return n_items, genres, m_cat, m_year, known_item


def _ml_ratings(
    fi: Path, inter: list, fu: Path, fm: Path, known_user: np.ndarray, known_item: np.ndarray
) -> np.ndarray:
    """The ratings file's rows checked, as (user, movie, stars, timestamp) rows; every user and
    movie must be in the user and item files."""
    r = np.empty((len(inter), 4), np.int64)
    for i, (ln, f) in enumerate(inter):
        uid, mid = _int(fi, ln, "user_id", f[0]), _int(fi, ln, "item_id", f[1])
        stars, t_s = _int(fi, ln, "rating", f[2]), _int(fi, ln, "timestamp", f[3])
        if not (0 < uid < len(known_user) and known_user[uid]):
            raise InputError(f"{short(fi)}: line {ln}: user_id: not in {fu.name}")
        if not (0 < mid < len(known_item) and known_item[mid]):
            raise InputError(f"{short(fi)}: line {ln}: item_id: not in {fm.name}")
        if not 1 <= stars <= 5:
            raise InputError(f"{short(fi)}: line {ln}: rating: expected 1..5")
        if t_s < 0:
            raise InputError(f"{short(fi)}: line {ln}: timestamp: expected seconds since 1970")
        r[i] = (uid, mid, stars, t_s)
    return r


def _ml_dense(
    u: np.ndarray, m: np.ndarray, ts: np.ndarray, n_train: int, m_year: np.ndarray, n_user_rows: int
) -> np.ndarray:
    """The ratings' dense features: log1p of the user's and the movie's training-split rating
    counts, log1p of the movie's age when rated, the hour / 23 and the weekday / 6."""
    # counts over the training split only
    u_count = np.bincount(u[:n_train], minlength=n_user_rows)
    m_count = np.bincount(m[:n_train], minlength=len(m_year))
    year = ts.astype("datetime64[s]").astype("datetime64[Y]").astype(np.int64) + 1970
    age = np.where(m_year[m] >= 0, np.maximum(year - m_year[m], 0), 0)
    dense = np.stack(
        [
            np.log1p(u_count[u]),
            np.log1p(m_count[m]),
            np.log1p(age),
            (ts // 3600 % 24) / 23.0,
            ((ts // 86400 + 3) % 7) / 6.0,
        ],
        axis=1,
    ).astype(np.float32)
    return dense


def _ml_split_by_user(fi: Path, r: np.ndarray) -> tuple[np.ndarray, int, int]:
    """The ratings with each user's latest fifth (by time, then movie id) held out: the training
    rows then the held-out ones, each by (time, user, movie); with how many of each."""
    n = len(r)
    # per user: the latest fifth of the user's ratings (by time, then movie id) is held out
    r = r[np.lexsort((r[:, 1], r[:, 3], r[:, 0]))]  # by user, then time, then movie
    start = np.searchsorted(r[:, 0], r[:, 0], side="left")
    count = np.bincount(r[:, 0])[r[:, 0]]
    held = (np.arange(n) - start) >= count - count // 5
    n_test = int(held.sum())
    if n_test < 1:
        raise InputError(f"{short(fi)}: {n} ratings are too few to hold out a fifth of each user's")
    n_train = n - n_test
    tr, te = r[~held], r[held]
    r = np.concatenate(
        [
            tr[np.lexsort((tr[:, 1], tr[:, 0], tr[:, 3]))],  # each by time, user, movie
            te[np.lexsort((te[:, 1], te[:, 0], te[:, 3]))],
        ]
    )
    return r, n_train, n_test


# -- a user's table and its schema ---------------------------------------------------------------------
TRANSFORMS = ("none", "log1p", "standardize")
_SCHEMA_KEYS = (
    "label",
    "label_threshold",
    "categorical",
    "dense",
    "held_out",
    "order_by",
    "delimiter",
)


@dataclass(frozen=True)
class Column:
    """One column of a table's schema: its name, the schema key that names it, and its encoding
    (categorical: hashed into ``buckets`` rows, else a vocabulary; dense: ``transform``)."""

    name: str
    key: str  #: where the schema names it, e.g. "dense[2]"
    buckets: int | None = None  #: categorical: hash into this many rows (else a vocabulary)
    transform: str = "none"  #: dense: "none", "log1p" or "standardize"


@dataclass(frozen=True)
class Schema:
    """A table's columns (``schema.toml``; the format is :func:`read_schema`'s)."""

    path: str
    label: str
    categorical: tuple[Column, ...]
    dense: tuple[Column, ...]
    label_threshold: float | None = None
    held_out: float = HELD_OUT
    order_by: str | None = None
    delimiter: str = ","

    def columns(self) -> list[tuple[str, str]]:
        """Every column the data must have, with the schema key that names it."""
        out = [(self.label, "label")] + [(c.name, c.key) for c in self.categorical + self.dense]
        if self.order_by is not None and self.order_by not in [n for n, _ in out]:
            out.append((self.order_by, "order_by"))
        return out


def _is_number(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def read_schema(path: str | Path) -> Schema:
    """A ``schema.toml``::

        label = "clicked"            # the label column: 0 or 1 ...
        label_threshold = 4          # ... or, if given, label = (value >= threshold)
        categorical = ["user", "item", {column = "city", buckets = 1000}]
        dense = ["price", {column = "visits", transform = "log1p"}]
        held_out = 0.2               # the last 20% of the rows are held out (default 0.2)
        order_by = "timestamp"       # sort the rows by this numeric column first (default: file order)
        delimiter = ","              # CSV only (default ","; "\\t" for a TSV)

    A categorical column maps its values to rows by a vocabulary of the training split's values
    (sorted; an unseen value is row 0), or, with ``buckets = N``, by hashing into rows 1..N
    (CRC-32 of the value's UTF-8 text); a missing value is row 0. A dense column is a number,
    missing = 0; ``transform = "log1p"`` takes ``log1p(max(x, 0))`` (counts; as for Criteo's
    integer features), ``"standardize"`` ``(x - mean) / sd`` with the training split's mean and
    sd. At least one categorical and one dense column.
    """
    raw = read_toml(path, "schema file")
    src = short(path)
    unknown = sorted(set(raw) - set(_SCHEMA_KEYS))
    if unknown:
        raise InputError(
            f"{src}: unknown key {unknown[0]!r} (a schema has {', '.join(_SCHEMA_KEYS)})"
        )
    label = raw.get("label")
    if not isinstance(label, str) or not label:
        raise InputError(
            f"{src}: label: expected the label column's name (a string), "
            f"got {short(repr(label)) if 'label' in raw else 'nothing'}"
        )
    thr = raw.get("label_threshold")
    if thr is not None and not (_is_number(thr) and math.isfinite(thr)):
        raise InputError(f"{src}: label_threshold: expected a number, got {short(repr(thr))}")
    cols: dict[str, tuple[Column, ...]] = {}
    for kind, opt, allowed in (
        ("categorical", "buckets", ()),  # (no transform)
        ("dense", "transform", TRANSFORMS),
    ):
        cols[kind] = _schema_columns(src, raw, kind, opt, allowed)
    seen = {label: "label"}
    for c in cols["categorical"] + cols["dense"]:
        if c.name in seen:
            raise InputError(
                f"{src}: {c.key}: column {c.name!r} is already {seen[c.name]} "
                f"(a column is the label or one feature)"
            )
        seen[c.name] = c.key
    held = raw.get("held_out", HELD_OUT)
    if not (_is_number(held) and 0 < held < 1):
        raise InputError(
            f"{src}: held_out: expected a fraction between 0 and 1, got {short(repr(held))}"
        )
    order_by = raw.get("order_by")
    if order_by is not None and (not isinstance(order_by, str) or not order_by):
        raise InputError(
            f"{src}: order_by: expected a column name (a string), got {short(repr(order_by))}"
        )
    delim = raw.get("delimiter", ",")
    if not isinstance(delim, str) or len(delim) != 1 or delim in ('"', "\n", "\r"):
        raise InputError(
            f'{src}: delimiter: expected one character (e.g. "," or "\\t"), '
            f"got {short(repr(delim))}"
        )
    return Schema(
        str(path),
        label,
        cols["categorical"],
        cols["dense"],
        None if thr is None else float(thr),
        float(held),
        order_by,
        delim,
    )


def _schema_columns(
    src: str, raw: dict[str, Any], kind: str, opt: str, allowed: tuple[str, ...]
) -> tuple[Column, ...]:
    """A schema's ``categorical`` or ``dense`` list checked: each entry a column name or a table
    ``{column = NAME, <opt> = ...}`` (``buckets`` for a categorical, ``transform`` for a dense)."""
    v = raw.get(kind)
    if not isinstance(v, list) or not v:
        raise InputError(
            f"{src}: {kind}: expected a non-empty list of column names (or tables "
            f"{{column = NAME, {opt} = ...}}), got {short(repr(v)) if kind in raw else 'nothing'}"
        )
    out = []
    for i, e in enumerate(v):
        key = f"{kind}[{i}]"
        if isinstance(e, str):
            e = {"column": e}
        if not isinstance(e, dict):
            raise InputError(
                f"{src}: {key}: expected a column name or a table {{column = NAME, "
                f"{opt} = ...}}, got {short(repr(e))}"
            )
        bad = sorted(set(e) - {"column", opt})
        if bad:
            raise InputError(f"{src}: {key}: unknown key {bad[0]!r} (expected column, {opt})")
        name = e.get("column")
        if not isinstance(name, str) or not name:
            raise InputError(
                f"{src}: {key}.column: expected a column name (a string), got {short(repr(name))}"
            )
        if kind == "categorical":
            b = e.get("buckets")
            bad_b = not isinstance(b, int) or isinstance(b, bool) or not 1 <= b <= MAX_BUCKETS
            if b is not None and bad_b:
                raise InputError(
                    f"{src}: {key}.buckets: expected an integer 1..{MAX_BUCKETS:,}, "
                    f"got {short(repr(b))}"
                )
            out.append(Column(name, key, buckets=b))
        else:
            t = e.get("transform", "none")
            if t not in allowed:
                raise InputError(
                    f"{src}: {key}.transform: expected one of {', '.join(allowed)}, "
                    f"got {short(repr(t))}"
                )
            out.append(Column(name, key, transform=t))
    return tuple(out)


class _Table:
    """A file's needed columns (lists of raw values) and where each row is (for errors)."""

    def __init__(
        self, src: str, columns: dict[str, list[Any]], where: Callable[[int], str]
    ) -> None:
        self.src, self.columns, self.where = src, columns, where
        self.n = len(next(iter(columns.values())))


def _missing_column(
    src: str, schema: Schema, name: str, key: str, have: Sequence[str]
) -> InputError:
    return InputError(  # the file's own column names are its content: counted, never shown
        f"{src}: no column {name!r} (named by {short(schema.path)}: {key}) among the "
        f"{len(have)} column{'' if len(have) == 1 else 's'} of its header"
    )


def _read_csv(path: Path, schema: Schema) -> _Table:
    src = short(path)
    need = schema.columns()
    fh = open_input_text(path, "data file")
    with fh, decode_errors(path):
        reader = csv.reader(fh, delimiter=schema.delimiter, strict=True)
        header = next(reader, None)
        if header is None:
            raise InputError(f"{src}: empty file (expected a header line naming the columns)")
        seen: dict[str, int] = {}
        for j, h in enumerate(header, start=1):
            if h in seen:
                raise InputError(
                    f"{src}: line 1: header fields {seen[h]} and {j} name the same column"
                )
            seen[h] = j
        idx = {}
        for name, key in need:
            if name not in header:
                raise _missing_column(src, schema, name, key, header)
            idx[name] = header.index(name)
        cols: dict[str, list[str]] = {name: [] for name in idx}
        lines: list[int] = []
        width = len(header)
        pairs = [(cols[name], j) for name, j in idx.items()]
        for row in reader:
            if len(row) != width:
                if not row:
                    raise InputError(f"{src}: line {reader.line_num}: empty line")
                raise InputError(
                    f"{src}: line {reader.line_num}: expected {width} fields (as the header), "
                    f"got {len(row)}"
                )
            for c, j in pairs:
                c.append(row[j])
            lines.append(reader.line_num)
    if not lines:
        raise InputError(f"{src}: no data rows (only a header)")
    return _Table(src, cols, lambda i: f"line {lines[i]}")


def _read_parquet(path: Path, schema: Schema) -> _Table:
    src = short(path)
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise InputError(
            f"{src}: reading Parquet needs pyarrow: pip install 'cprsim[parquet]'"
        ) from None
    try:
        pf = pq.ParquetFile(path)
        names = list(pf.schema_arrow.names)
    except (pa.ArrowException, OSError, ValueError) as e:
        raise InputError(f"{src}: not a Parquet file ({short(e, 120)})") from None
    need = schema.columns()
    for name, key in need:
        if name not in names:
            raise _missing_column(src, schema, name, key, names)
    try:
        table = pf.read(columns=[n for n, _ in need])
    except (pa.ArrowException, OSError, ValueError) as e:
        raise InputError(f"{src}: cannot read this Parquet file ({short(e, 120)})") from None
    if table.num_rows == 0:
        raise InputError(f"{src}: no data rows")
    cols = {n: table.column(n).to_pylist() for n, _ in need}
    return _Table(src, cols, lambda i: f"row {i + 1}")


class _Bad(Exception):
    pass


def _number(v: Any) -> float | None:
    """A value as a float; ``None`` if missing (empty text, null, a NaN of a typed column)."""
    if v is None:
        return None
    if isinstance(v, str):
        s = v.strip()
        if s == "":
            return None
        try:
            x = float(s)
        except ValueError:
            raise _Bad from None
        if not math.isfinite(x):
            raise _Bad
        return x
    if isinstance(v, (numbers.Real, bool)):
        x = float(v)
        if math.isnan(x):
            return None
        if math.isinf(x):
            raise _Bad
        return x
    raise _Bad


def _numbers(t: _Table, name: str, what: str) -> tuple[np.ndarray, np.ndarray]:
    """The column as float64 values and a missing mask; a value that is no number is an error."""
    vals = t.columns[name]
    x = np.zeros(t.n, np.float64)
    miss = np.zeros(t.n, bool)
    for i, v in enumerate(vals):
        try:
            y = _number(v)
        except _Bad:
            raise InputError(
                f"{t.src}: {t.where(i)}: column {name!r} ({what}): expected a finite "
                "number or nothing"
            ) from None
        if y is None:
            miss[i] = True
        else:
            x[i] = y
    return x, miss


def _key(v: Any) -> str | None:
    if v is None or (isinstance(v, str) and v == "") or (isinstance(v, float) and math.isnan(v)):
        return None
    if isinstance(v, (list, dict, tuple)):
        raise _Bad
    return v if isinstance(v, str) else str(v)


def read_table(path: str | Path, schema: str | Path | Schema) -> Split:
    """A user's CSV or Parquet file with its schema (:func:`read_schema`) as calibration data.

    Rows are ordered by ``order_by`` (a stable sort; else file order) and the last ``held_out``
    fraction is held out. Vocabularies and standardization use the training rows only.
    """
    sch = schema if isinstance(schema, Schema) else read_schema(schema)
    p = check_input_file(path, "data file")
    t = _read_parquet(p, sch) if p.suffix.lower() in (".parquet", ".pq") else _read_csv(p, sch)
    src, n = t.src, t.n
    label = _table_label(t, sch)
    # order and split
    if sch.order_by is not None:
        key, kmiss = _numbers(t, sch.order_by, "order_by")
        if kmiss.any():
            i = int(np.argmax(kmiss))
            raise InputError(f"{src}: {t.where(i)}: column {sch.order_by!r} (order_by) is empty")
        order = np.argsort(key, kind="stable")
    else:
        order = np.arange(n)
    n_test = int(round(n * sch.held_out))
    if n_test < 1 or n_test >= n:
        raise InputError(f"{src}: {n} rows are too few to hold out {sch.held_out:g} of them")
    n_train = n - n_test
    train_rows = order[:n_train]
    dense = _table_dense(t, sch, train_rows)
    cat, tables, n_vocab = _table_categorical(t, sch, train_rows)
    ds = D.Dataset(dense[order], cat[order], label[order])
    lab = f"label {sch.label!r}" + (
        "" if sch.label_threshold is None else f" >= {sch.label_threshold:g}"
    )
    desc = (
        f"{p.name} with schema {Path(sch.path).name} (sha256 {_sha256(Path(sch.path))[:16]}): "
        f"{n} rows; "
        f"{lab} ({label.mean():.1%} positive); {len(tables)} tables "
        f"({', '.join(c.name for c in sch.categorical)}: {sum(tables)} rows; {n_vocab} by the training "
        f"rows' vocabulary, {len(tables) - n_vocab} hashed), {len(sch.dense)} dense features "
        f"({', '.join(c.name for c in sch.dense)}); split: the last {sch.held_out:g} of the rows "
        f"({'by ' + repr(sch.order_by) if sch.order_by else 'in file order'}) held out ({n_test}), "
        f"the rest train ({n_train})"
    )
    return Split(
        ds.slice(0, n_train),
        ds.slice(n_train, n),
        tuple(tables),
        tuple(c.name for c in sch.categorical),
        tuple(c.name for c in sch.dense),
        desc,
    )


def _table_label(t: _Table, sch: Schema) -> np.ndarray:
    """The label column as 0/1 floats: 0 or 1 in the file, or ``value >= label_threshold``."""
    y, miss = _numbers(t, sch.label, "the label")
    if miss.any():
        i = int(np.argmax(miss))
        raise InputError(f"{t.src}: {t.where(i)}: label column {sch.label!r} is empty")
    if sch.label_threshold is None:
        bad = (y != 0) & (y != 1)
        if bad.any():
            i = int(np.argmax(bad))
            raise InputError(
                f"{t.src}: {t.where(i)}: label column {sch.label!r}: expected 0 or 1 (or set "
                f"label_threshold in {short(sch.path)})"
            )
        label = y.astype(np.float32)
    else:
        label = (y >= sch.label_threshold).astype(np.float32)
    return label


def _table_dense(t: _Table, sch: Schema, train_rows: np.ndarray) -> np.ndarray:
    """The dense columns, transformed (standardized by the training rows' mean and sd), a
    missing value 0."""
    dense = np.zeros((t.n, len(sch.dense)), np.float32)
    for j, c in enumerate(sch.dense):
        x, m = _numbers(t, c.name, "dense")
        if c.transform == "log1p":
            x = np.log1p(np.maximum(x, 0.0))
        elif c.transform == "standardize":
            ok = train_rows[~m[train_rows]]
            mu = float(x[ok].mean()) if len(ok) else 0.0
            sd = float(x[ok].std()) if len(ok) else 0.0
            x = (x - mu) / (sd if sd > 0 else 1.0)
        x[m] = 0.0
        dense[:, j] = x
    return dense


def _table_categorical(
    t: _Table, sch: Schema, train_rows: np.ndarray
) -> tuple[np.ndarray, list[int], int]:
    """The categorical columns as rows of their tables (hashed, or by the training rows'
    vocabulary), with each table's size and how many go by vocabulary."""
    cat = np.zeros((t.n, len(sch.categorical)), np.int64)
    tables = []
    n_vocab = 0
    for j, c in enumerate(sch.categorical):
        keys = []
        for i, v in enumerate(t.columns[c.name]):
            try:
                keys.append(_key(v))
            except _Bad:
                raise InputError(
                    f"{t.src}: {t.where(i)}: column {c.name!r} (categorical): expected a "
                    "single value (text or a number)"
                ) from None
        if c.buckets is not None:
            b = c.buckets
            cat[:, j] = [0 if k is None else 1 + zlib.crc32(k.encode("utf-8")) % b for k in keys]
            tables.append(b + 1)
        else:
            vocab = sorted({keys[i] for i in train_rows.tolist()} - {None})
            rows = {k: r + 1 for r, k in enumerate(vocab)}
            cat[:, j] = [rows.get(k, 0) for k in keys]
            tables.append(len(vocab) + 1)
            n_vocab += 1
    return cat, tables, n_vocab
