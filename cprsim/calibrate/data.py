"""Criteo-like data for the calibration DLRM: a synthetic generator and a reader of the real TSV.

Both produce :class:`Dataset` arrays (numpy only; no torch here):

* ``dense`` float32 ``(n, 13)``: ``log1p(max(x, 0))`` of the 13 integer features, 0 if missing;
* ``cat`` int64 ``(n, 26)``: row index *within* each table (``0 <= cat[:, t] < tables[t]``);
* ``label`` float32 ``(n,)`` in {0, 1}.

**Synthetic** (:func:`synthetic`): table ``t`` has ``max(min(n_t, 3), round(n_t / scale))`` rows
(``n_t`` the Criteo Kaggle cardinality). Ids are Zipf(``alpha``) over the table's rows (popularity
rank ``i`` with probability ``∝ i^-alpha``), ranks mapped to rows by a fixed random permutation;
``alpha`` defaults to the access model's exponent for "1% of rows take 92% of accesses" on the
same scaled tables (:mod:`cprsim.access`). Dense features are log-normal counts with 10% missing.
Labels come from a hidden *teacher*: ``logit = b0 + w·dense + Σ_t u_t[id_t] + Σ_(a,b) <v_a[id_a],
v_b[id_b]>`` over a few table pairs, with random per-row effects, scaled so the teacher's own AUC
is about 0.8 (a learned DLRM then reaches ≈ 0.75–0.78). Samples are made in chunks of
``chunk`` rows, chunk ``c`` from the child ``c`` of the seed's ``SeedSequence``, written straight
into preallocated arrays: deterministic, and never held twice.

**Criteo TSV** (:func:`read_criteo_tsv`): the Kaggle/Terabyte format, one sample per line:
``label<TAB>I1..I13<TAB>C1..C26``; integers may be empty (missing) or negative, categoricals are
hex strings or empty. A categorical ``h`` maps to row ``1 + int(h, 16) mod (n_t - 1)`` of table
``t`` (the hashing trick), missing to row 0. A malformed line raises
:class:`cprsim.errors.InputError` naming the file and line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from cprsim.access import CRITEO_KAGGLE, AccessModel
from cprsim.errors import InputError
from cprsim.io import open_input_binary, short

N_DENSE = 13
N_CAT = 26
_TEACHER_PAIRS = ((0, 1), (2, 3), (5, 6), (10, 12), (14, 18))
_LATENT = 4


@dataclass(frozen=True)
class Dataset:
    """Samples as arrays: ``dense`` float32 ``(n, n_dense)``, ``cat`` int64 ``(n, n_cat)`` (rows
    within each table), ``label`` float32 ``(n,)`` in {0, 1}."""

    dense: np.ndarray
    cat: np.ndarray
    label: np.ndarray

    def __len__(self) -> int:
        return len(self.label)

    def slice(self, a: int, b: int) -> Dataset:
        """Samples ``a`` to ``b`` (numpy views, not copies)."""
        return Dataset(self.dense[a:b], self.cat[a:b], self.label[a:b])


def scaled_tables(scale: float) -> tuple[int, ...]:
    """Criteo Kaggle cardinalities divided by ``scale`` (tiny tables keep up to 3 rows)."""
    if scale < 1:
        raise InputError(f"table scale must be >= 1, got {scale}")
    return tuple(max(min(n, 3), int(round(n / scale))) for n in CRITEO_KAGGLE)


@lru_cache(maxsize=8)
def default_alpha(tables: tuple[int, ...]) -> float:
    """Zipf exponent for which 1% of the rows take 92% of accesses (BagPipe's skew)."""
    try:
        return AccessModel.from_skew(tables, 0.01, 0.92).alpha
    except InputError:  # tables too small to be that skewed
        return 1.2


@dataclass(frozen=True)
class _Teacher:
    perms: tuple[np.ndarray, ...]
    cdfs: tuple[np.ndarray, ...]
    u: tuple[np.ndarray, ...]
    v: dict[int, np.ndarray]
    w: np.ndarray
    b0: float


@lru_cache(maxsize=4)
def _teacher(tables: tuple[int, ...], alpha: float, seed: int) -> _Teacher:
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x7EAC4E2]))
    perms, cdfs, us = [], [], []
    for n in tables:
        p = np.arange(1, n + 1, dtype=float) ** -alpha
        cdf = np.cumsum(p)
        cdfs.append(cdf / cdf[-1])
        perms.append(rng.permutation(n))
        us.append(rng.normal(0.0, 0.22, n))
    v = {t: rng.normal(0.0, 0.4, (tables[t], _LATENT)) for pair in _TEACHER_PAIRS for t in pair}
    w = rng.normal(0.0, 0.15, N_DENSE)
    return _Teacher(tuple(perms), tuple(cdfs), tuple(us), v, w, -1.2)


def _make_chunk(
    n: int,
    tables: tuple[int, ...],
    teacher: _Teacher,
    rng: np.random.Generator,
    out: Dataset,
    at: int,
) -> None:
    raw = np.floor(np.exp(rng.normal(1.0, 1.5, (n, N_DENSE)))).astype(np.float64)
    missing = rng.random((n, N_DENSE)) < 0.1
    dense = np.log1p(raw)
    dense[missing] = 0.0
    logit = teacher.b0 + (dense - 1.2) @ teacher.w
    cat = out.cat[at : at + n]
    for t in range(N_CAT):
        rank = np.searchsorted(teacher.cdfs[t], rng.random(n), side="right")
        np.minimum(rank, tables[t] - 1, out=rank)
        cat[:, t] = teacher.perms[t][rank]
        logit += teacher.u[t][cat[:, t]]
    for a, b in _TEACHER_PAIRS:
        logit += np.einsum("ij,ij->i", teacher.v[a][cat[:, a]], teacher.v[b][cat[:, b]])
    p = 1.0 / (1.0 + np.exp(-logit))
    out.dense[at : at + n] = dense
    out.label[at : at + n] = (rng.random(n) < p).astype(np.float32)


def synthetic(
    n: int,
    *,
    seed: int = 0,
    scale: float = 1000.0,
    alpha: float | None = None,
    start_chunk: int = 0,
    chunk: int = 65536,
    data_seed: int = 0,
) -> Dataset:
    """``n`` samples from chunks ``start_chunk, start_chunk + 1, ...`` of stream ``seed``.

    ``data_seed`` fixes the hidden teacher and the tables' id permutations (the "world");
    ``seed`` the samples drawn from it. Train and test sets use disjoint chunk ranges.
    """
    tables = scaled_tables(scale)
    a = default_alpha(tables) if alpha is None else alpha
    teacher = _teacher(tables, a, data_seed)
    out = Dataset(
        np.empty((n, N_DENSE), np.float32), np.empty((n, N_CAT), np.int64), np.empty(n, np.float32)
    )
    for c in range(math.ceil(n / chunk)):
        rng = np.random.default_rng(np.random.SeedSequence([data_seed, seed, start_chunk + c]))
        at = c * chunk
        _make_chunk(min(chunk, n - at), tables, teacher, rng, out, at)
    return out


# ----------------------------------------------------------------------------------------------
def _criteo_line(
    line: str, tables: tuple[int, ...], path: Path, lineno: int, dense: np.ndarray, cat: np.ndarray
) -> float:
    f = line.rstrip("\r\n").split("\t")
    if len(f) != 1 + N_DENSE + N_CAT:
        raise InputError(
            f"{short(path)}: line {lineno}: expected {1 + N_DENSE + N_CAT} tab-separated "
            f"fields (label, 13 integers, 26 hex categoricals), got {len(f)}"
        )
    if f[0] not in ("0", "1"):
        raise InputError(f"{short(path)}: line {lineno}: the label (field 1) is not 0 or 1")
    for i in range(N_DENSE):
        s = f[1 + i]
        if s == "":
            dense[i] = 0.0
            continue
        try:
            x = int(s)
        except ValueError:
            raise InputError(
                f"{short(path)}: line {lineno}: integer feature I{i + 1} (field {2 + i}) is not "
                "an integer"
            ) from None
        dense[i] = math.log1p(x) if x > 0 else 0.0
    for t in range(N_CAT):
        s = f[1 + N_DENSE + t]
        if s == "":
            cat[t] = 0
            continue
        try:
            h = int(s, 16)
        except ValueError:
            raise InputError(
                f"{short(path)}: line {lineno}: categorical C{t + 1} (field {2 + N_DENSE + t}) is "
                "not a hex string"
            ) from None
        n = tables[t]
        cat[t] = 1 + h % (n - 1) if n > 1 else 0
    return float(f[0])


def read_criteo_tsv(
    path: str | Path,
    *,
    scale: float = 1000.0,
    limit: int | None = None,
    tables: tuple[int, ...] | None = None,
) -> Dataset:
    """Read a Criteo Kaggle/Terabyte TSV (see the module docstring) into a :class:`Dataset`."""
    import io

    p = Path(path)
    raw = open_input_binary(p, "Criteo TSV file")  # a regular file within the data cap
    tabs = tables or scaled_tables(scale)
    dense_rows: list[np.ndarray] = []
    cat_rows: list[np.ndarray] = []
    labels: list[float] = []
    block = 65536
    d = np.zeros((block, N_DENSE), np.float32)
    c = np.zeros((block, N_CAT), np.int64)
    k = 0
    with io.TextIOWrapper(raw, encoding="ascii", errors="replace", newline="") as fh:
        for lineno, line in enumerate(fh, start=1):
            if limit is not None and len(labels) >= limit:
                break
            if not line.strip():
                raise InputError(f"{short(p)}: line {lineno}: empty line")
            labels.append(_criteo_line(line, tabs, p, lineno, d[k], c[k]))
            k += 1
            if k == block:
                dense_rows.append(d.copy())
                cat_rows.append(c.copy())
                k = 0
    dense_rows.append(d[:k].copy())
    cat_rows.append(c[:k].copy())
    if not labels:
        raise InputError(f"{short(p)}: no samples")
    return Dataset(
        np.concatenate(dense_rows), np.concatenate(cat_rows), np.asarray(labels, np.float32)
    )


def write_criteo_tsv(
    path: str | Path, ds_raw: list[tuple[int, list[int | None], list[str | None]]]
) -> None:
    """Write samples ``(label, 13 ints or None, 26 hex or None)`` in Criteo's TSV format."""
    lines = []
    for label, ints, cats in ds_raw:
        cols = (
            [str(label)]
            + ["" if x is None else str(x) for x in ints]
            + ["" if h is None else h for h in cats]
        )
        lines.append("\t".join(cols))
    from cprsim.io import atomic_write_text

    atomic_write_text(path, "\n".join(lines) + "\n")


def auc(label: np.ndarray, score: np.ndarray) -> float:
    """Area under the ROC curve (Mann-Whitney, ties get the average rank)."""
    from scipy.stats import rankdata

    y = np.asarray(label) > 0.5
    n1 = int(y.sum())
    n0 = len(y) - n1
    if n1 == 0 or n0 == 0:
        return float("nan")
    r = rankdata(score)
    return float((r[y].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def logloss(label: np.ndarray, prob: np.ndarray) -> float:
    """Mean binary cross-entropy (nats) of the probabilities ``prob`` against ``label``
    (probabilities clipped to [1e-7, 1 - 1e-7])."""
    p = np.clip(np.asarray(prob, float), 1e-7, 1 - 1e-7)
    y = np.asarray(label, float)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log1p(-p)))
