"""Calibration data sources: a user's CSV/Parquet with its schema, MovieLens-100k, the CLI on them.

The readers are numpy only; the tests that train (marked ``dlrm``) skip without torch.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import json
import math
import os
import sys
import tomllib
import zlib

import numpy as np
import pytest

from cprsim.calibrate import data as D
from cprsim.calibrate import datasets as S
from cprsim.errors import InputError

# as `cprsim calibrate` does: OpenMP threads sleep rather than spin while waiting
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

try:
    S.movielens_root()
    NO_MOVIELENS = ""
except InputError as e:
    NO_MOVIELENS = f"MovieLens-100k is not installed (the movielens extra: {e})"


@pytest.fixture
def torch():
    return pytest.importorskip("torch", reason="training needs torch (the dlrm extra)")


# -- a small table ------------------------------------------------------------------------------------
HEADER = ["ts", "user", "item", "city", "price", "visits", "click", "rating"]


def _rows(n: int, seed: int = 0) -> list[list[str]]:
    """A learnable click log: users and items with hidden effects, in a shuffled time order."""
    rng = np.random.default_rng(seed)
    n_users, n_items = 200, 300
    ue, ie = rng.normal(0, 1.2, n_users), rng.normal(0, 1.2, n_items)
    u = rng.integers(0, n_users, n)
    it = np.minimum(rng.zipf(1.4, n) - 1, n_items - 1)
    visits = rng.poisson(3.0, n)
    logit = ue[u] + ie[it] + 0.2 * (visits - 3)
    click = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(int)
    ts = rng.permutation(n) + 1_000_000
    out = []
    for i in range(n):
        price = "" if i % 17 == 3 else f"{rng.normal(20, 5):.3f}"
        city = "" if i % 13 == 5 else f"c{rng.integers(0, 40)}"
        out.append(
            [
                str(ts[i]),
                f"u{u[i]}",
                str(it[i]),
                city,
                price,
                str(visits[i]),
                str(click[i]),
                str(1 + 4 * click[i] if i % 2 else 3 + click[i]),
            ]
        )
    return out


def _write_csv(path, rows, header=HEADER, delimiter=","):
    with open(path, "w", newline="") as f:
        w = csv.writer(f, delimiter=delimiter, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)
    return path


SCHEMA = """label = "click"
categorical = ["user", "item", {column = "city", buckets = 16}]
dense = [{column = "price", transform = "standardize"}, {column = "visits", transform = "log1p"}]
held_out = 0.25
"""


def _schema(tmp_path, text=SCHEMA, name="schema.toml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_csv_with_schema_reads_the_documented_features(tmp_path):
    rows = _rows(400)
    split = S.read_table(_write_csv(tmp_path / "log.csv", rows), _schema(tmp_path))
    assert len(split.train) == 300 and len(split.test) == 100  # the last quarter, file order
    assert split.cat_names == ("user", "item", "city") and split.dense_names == ("price", "visits")
    assert split.train.cat.shape == (300, 3) and split.train.dense.shape == (300, 2)
    # vocabulary of the training rows, sorted; unseen and missing values are row 0
    vocab = sorted({r[1] for r in rows[:300]})
    assert split.tables[0] == len(vocab) + 1
    for i, r in enumerate(rows):
        got = (split.train.cat if i < 300 else split.test.cat)[i % 300 if i < 300 else i - 300]
        assert got[0] == (vocab.index(r[1]) + 1 if r[1] in vocab else 0)
        assert got[2] == (0 if r[3] == "" else 1 + zlib.crc32(r[3].encode()) % 16)
    assert split.tables[2] == 17
    unseen = [r[2] for r in rows[300:] if r[2] not in {x[2] for x in rows[:300]}]
    assert (split.test.cat[:, 1] == 0).sum() == len(unseen)
    # dense: log1p counts; standardized with the training rows' mean and sd, missing = 0
    visits = np.array([float(r[5]) for r in rows])
    assert np.allclose(
        np.concatenate([split.train.dense[:, 1], split.test.dense[:, 1]]), np.log1p(visits)
    )
    price = np.array([float(r[4]) if r[4] else np.nan for r in rows])
    tr = price[:300][~np.isnan(price[:300])]
    z = (price - tr.mean()) / tr.std()
    got = np.concatenate([split.train.dense[:, 0], split.test.dense[:, 0]])
    assert np.allclose(got[~np.isnan(z)], z[~np.isnan(z)], atol=1e-5) and np.all(
        got[np.isnan(z)] == 0
    )
    assert np.array_equal(
        np.concatenate([split.train.label, split.test.label]),
        np.array([float(r[6]) for r in rows], np.float32),
    )
    assert "log.csv" in split.description and "300" in split.description


def test_order_by_threshold_and_delimiter(tmp_path):
    rows = _rows(200)
    data = _write_csv(tmp_path / "log.tsv", rows, delimiter="\t")
    sch = _schema(
        tmp_path,
        'label = "rating"\nlabel_threshold = 4\norder_by = "ts"\ndelimiter = "\\t"\n'
        'categorical = ["user"]\ndense = ["visits"]\n',
    )
    split = S.read_table(data, sch)
    order = np.argsort([int(r[0]) for r in rows], kind="stable")
    want = np.array([float(int(rows[i][7]) >= 4) for i in order], np.float32)
    assert np.array_equal(np.concatenate([split.train.label, split.test.label]), want)
    assert np.array_equal(
        np.concatenate([split.train.dense[:, 0], split.test.dense[:, 0]]),
        np.array([float(rows[i][5]) for i in order], np.float32),
    )
    assert len(split.test) == 40  # the default held_out 0.2
    # the vocabulary comes from the earliest 160 rows (by ts), not from the file's first 160
    assert split.tables[0] == len({rows[i][1] for i in order[:160]}) + 1


def test_parquet_reads_as_the_same_csv(tmp_path):
    pa = pytest.importorskip("pyarrow", reason="pyarrow is not installed (the parquet extra)")
    import pyarrow.parquet as pq

    rows = _rows(300)
    cols = {h: [r[j] for r in rows] for j, h in enumerate(HEADER)}
    table = pa.table(
        {
            "ts": pa.array([int(x) for x in cols["ts"]]),
            "user": pa.array(cols["user"]),
            "item": pa.array([int(x) for x in cols["item"]]),
            "city": pa.array([x or None for x in cols["city"]]),
            "price": pa.array([float(x) if x else None for x in cols["price"]]),
            "visits": pa.array([int(x) for x in cols["visits"]]),
            "click": pa.array([int(x) for x in cols["click"]]),
        }
    )
    pq.write_table(table, tmp_path / "log.parquet")
    a = S.read_table(tmp_path / "log.parquet", _schema(tmp_path))
    b = S.read_table(_write_csv(tmp_path / "log.csv", rows), _schema(tmp_path))
    assert a.tables == b.tables
    for x, y in ((a.train, b.train), (a.test, b.test)):
        assert np.array_equal(x.cat, y.cat) and np.array_equal(x.label, y.label)
        assert np.allclose(x.dense, y.dense, atol=1e-6)


def test_parquet_without_pyarrow_names_the_extra(tmp_path, monkeypatch):
    (tmp_path / "log.parquet").write_bytes(b"PAR1")
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(
        InputError,
        match=r"log.parquet: reading Parquet needs pyarrow: "
        r"pip install 'cprsim\[parquet\]'",
    ):
        S.read_table(tmp_path / "log.parquet", _schema(tmp_path))


# -- bad input: one line naming the file and the key, column or line ------------------------------------
@pytest.mark.parametrize(
    "text, msg",
    [
        ("label = \n", r"schema.toml: invalid TOML"),
        (SCHEMA + "weights = 1\n", r"schema.toml: unknown key 'weights'"),
        (
            SCHEMA.replace('label = "click"', "label = 3"),
            r"schema.toml: label: expected the label column's name",
        ),
        (SCHEMA.replace('label = "click"\n', ""), r"schema.toml: label: .* got nothing"),
        (
            SCHEMA.replace(
                'categorical = ["user", "item", {column = "city", buckets = 16}]',
                "categorical = []",
            ),
            r"schema.toml: categorical: expected a non-empty list",
        ),
        (
            SCHEMA.replace("buckets = 16", "buckets = 0"),
            r"schema.toml: categorical\[2\].buckets: expected an integer",
        ),
        (
            SCHEMA.replace("buckets = 16", "buckets = true"),
            r"schema.toml: categorical\[2\].buckets",
        ),
        (
            SCHEMA.replace("buckets = 16", "bins = 16"),
            r"schema.toml: categorical\[2\]: unknown key 'bins'",
        ),
        (
            SCHEMA.replace('"log1p"', '"sqrt"'),
            r"schema.toml: dense\[1\].transform: expected one of none, log1p",
        ),
        (
            SCHEMA.replace("dense = [", "dense = [3, "),
            r"schema.toml: dense\[0\]: expected a column name",
        ),
        (
            SCHEMA.replace('"item"', '"user"'),
            r"schema.toml: categorical\[1\]: column 'user' is already categorical\[0\]",
        ),
        (
            SCHEMA.replace('"visits"', '"click"'),
            r"schema.toml: dense\[1\]: column 'click' is already label",
        ),
        (
            SCHEMA.replace("held_out = 0.25", "held_out = 1.5"),
            r"schema.toml: held_out: expected a fraction",
        ),
        (SCHEMA + 'label_threshold = "high"\n', r"schema.toml: label_threshold: expected a number"),
        (SCHEMA + 'delimiter = ";;"\n', r"schema.toml: delimiter: expected one character"),
        (SCHEMA + "order_by = 7\n", r"schema.toml: order_by: expected a column name"),
    ],
)
def test_a_malformed_schema_is_one_line_naming_the_key(tmp_path, text, msg):
    with pytest.raises(InputError, match=msg) as e:
        S.read_schema(_schema(tmp_path, text))
    assert "\n" not in str(e.value)


def _bad_rows(tmp_path, edit):
    rows = _rows(40)
    header = list(HEADER)
    edit(rows, header)
    return _write_csv(tmp_path / "log.csv", rows, header)


@pytest.mark.parametrize(
    "edit, msg",
    [
        (
            lambda r, h: h.__setitem__(5, "n_visits"),
            r"log.csv: no column 'visits' \(named by .*schema.toml: dense\[1\]\) among the 8 columns of its header$",
        ),
        (
            lambda r, h: r[6].__setitem__(4, "cheap"),
            r"log.csv: line 8: column 'price' \(dense\): expected a finite number or nothing$",
        ),
        (lambda r, h: r[9].__setitem__(5, "inf"), r"log.csv: line 11: column 'visits' \(dense\)"),
        (
            lambda r, h: r[2].__setitem__(6, "2"),
            r"log.csv: line 4: label column 'click': expected 0 or 1 \(or set label_threshold in .*schema.toml\)$",
        ),
        (
            lambda r, h: r[3].__setitem__(6, "yes"),
            r"log.csv: line 5: column 'click' \(the label\): expected a finite number",
        ),
        (lambda r, h: r[4].__setitem__(6, ""), r"log.csv: line 6: label column 'click' is empty"),
        (
            lambda r, h: r[5].append("extra"),
            r"log.csv: line 7: expected 8 fields \(as the header\), got 9",
        ),
        (lambda r, h: r.__setitem__(7, []), r"log.csv: line 9: empty line"),
        (
            lambda r, h: h.__setitem__(7, "user"),
            r"log.csv: line 1: header fields 2 and 8 name the same column",
        ),
        (lambda r, h: r.clear(), r"log.csv: no data rows \(only a header\)"),
    ],
)
def test_bad_data_is_one_line_naming_the_column_and_line(tmp_path, edit, msg):
    with pytest.raises(InputError, match=msg) as e:
        S.read_table(_bad_rows(tmp_path, edit), _schema(tmp_path))
    assert "\n" not in str(e.value)


def test_more_bad_files(tmp_path):
    sch = _schema(tmp_path)
    (tmp_path / "empty.csv").write_text("")
    cases = [
        (tmp_path / "empty.csv", sch, r"empty.csv: empty file \(expected a header line"),
        (tmp_path / "missing.csv", sch, r"missing.csv: no such data file"),
        (
            _write_csv(tmp_path / "two.csv", _rows(2)),
            sch,
            r"two.csv: 2 rows are too few to hold out 0.25",
        ),
    ]
    (tmp_path / "latin1.csv").write_bytes(",".join(HEADER).encode() + b"\n1,\xe9,2,c,1,1,0,1\n")
    cases.append((tmp_path / "latin1.csv", sch, r"latin1.csv: not UTF-8 text"))
    for data, schema, msg in cases:
        with pytest.raises(InputError, match=msg) as e:
            S.read_table(data, schema)
        assert "\n" not in str(e.value)
    # a threshold makes any number a label, but still not a word
    thr = _schema(tmp_path, SCHEMA + "label_threshold = 0.5\n", "thr.toml")
    with pytest.raises(
        InputError, match=r"log.csv: line 3: column 'click' \(the label\): expected a finite number"
    ):
        S.read_table(_bad_rows(tmp_path, lambda r, h: r[1].__setitem__(6, "high")), thr)
    (tmp_path / "fake.parquet").write_text("not parquet")  # pyarrow installed or not: one line
    with pytest.raises(
        InputError, match=r"fake.parquet: (not a Parquet file|reading Parquet needs pyarrow)"
    ) as e:
        S.read_table(tmp_path / "fake.parquet", sch)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(
    "data, schema, msg",
    [
        ("log.csv", None, r"log.csv: data: a .csv file needs `schema`, a schema.toml"),
        ("log.parquet", None, r"log.parquet: data: a .parquet file needs `schema`"),
        ("log.json", None, r"log.json: data: unknown kind of data file"),
        (
            "nope.csv",
            "schema.toml",
            r"nope.csv: data: no such data file \(expected synthetic, movielens-100k",
        ),
        (
            "synthetic",
            "schema.toml",
            r"schema: describes the columns of a .csv or .parquet `data` file, not synthetic",
        ),
        ("log.csv", "nope.toml", r"nope.toml: no such schema file"),
    ],
)
def test_resolving_the_data_option(tmp_path, monkeypatch, data, schema, msg):
    monkeypatch.chdir(tmp_path)
    for name in ("log.csv", "log.parquet", "log.json"):
        (tmp_path / name).write_text("x\n")
    _schema(tmp_path)
    with pytest.raises(InputError, match=msg) as e:
        S.resolve(data, schema)
    assert "\n" not in str(e.value)


def test_resolve_fingerprints_the_bytes_and_load_checks_them(tmp_path):
    data = _write_csv(tmp_path / "log.csv", _rows(100))
    spec = S.resolve(str(data), _schema(tmp_path))
    assert spec.source == "table" and spec.sha256 == hashlib.sha256(data.read_bytes()).hexdigest()
    fp = spec.fingerprint()
    assert (
        fp["file"] == "log.csv"
        and fp["schema"] == "schema.toml"
        and str(tmp_path) not in json.dumps(fp)
    )
    assert S.resolve("synthetic") is None
    data.write_text(data.read_text() + "1,u1,2,c,3,4,1,5\n")
    with pytest.raises(InputError, match=r"log.csv: the file changed while the calibration ran"):
        S.load(spec)


def test_criteo_tsv_source_holds_out_its_last_lines(tmp_path):
    rows = [(i % 2, [i, None] + [1] * 11, [f"{i:08x}"] + [None] * 25) for i in range(50)]
    D.write_criteo_tsv(tmp_path / "day.tsv", rows)
    spec = S.resolve(str(tmp_path / "day.tsv"))
    assert spec.source == "criteo"
    s = S.load(spec, 1000.0)
    assert (len(s.train), len(s.test)) == (40, 10) and s.n_cat == 26 and s.n_dense == 13
    assert s.test.dense[0, 0] == pytest.approx(math.log1p(40))


# -- a preset on real data ----------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class _P:
    """The fields of a runner.Preset that ``sized`` reads (no torch needed)."""

    train_samples: int = 200_000
    test_samples: int = 50_000
    batch: int = 512
    scale: float = 1000.0
    data: object = None


def test_sized_uses_the_data_size_and_refuses_too_little(tmp_path):
    spec = S.resolve(str(_write_csv(tmp_path / "log.csv", _rows(2000))), _schema(tmp_path))
    p = S.sized(_P(batch=64), spec)
    assert (p.train_samples, p.test_samples, p.data) == (1500, 500, spec)  # one epoch, all of it
    p = S.sized(_P(batch=64), spec, (1300, 100))
    assert (p.train_samples, p.test_samples) == (1300, 100)
    with pytest.raises(
        InputError,
        match=r"log.csv: 1500 training samples make 2 batches of 512; a calibration "
        r"needs at least 20 \(10240 training samples\)",
    ):
        S.sized(_P(), spec)
    p = S.sized(_P(), None, (1000, 300))
    assert (p.train_samples, p.test_samples, p.data) == (1000, 300, None)
    one = [r[:6] + ["1"] + r[7:] for r in _rows(2000)]
    spec1 = S.resolve(str(_write_csv(tmp_path / "ones.csv", one)), _schema(tmp_path))
    with pytest.raises(InputError, match=r"ones.csv: the training samples all have label 1"):
        S.sized(_P(batch=64), spec1)


def test_seed_data_shuffles_one_epoch_per_seed(tmp_path):
    spec = S.resolve(str(_write_csv(tmp_path / "log.csv", _rows(1000))), _schema(tmp_path))
    a_tr, a_te, _tables = S.seed_data(spec, 0, 600, 200)
    b_tr, _b_te, _ = S.seed_data(spec, 0, 600, 200)
    c_tr, c_te, _ = S.seed_data(spec, 1, 600, 200)
    s = S.load(spec)
    assert np.array_equal(a_tr.cat, b_tr.cat) and not np.array_equal(a_tr.cat, c_tr.cat)
    key = lambda d: sorted(map(tuple, np.column_stack([d.cat, d.dense, d.label]).tolist()))
    assert key(a_tr) == key(c_tr) == key(s.train.slice(0, 600))  # the same samples, each once
    assert np.array_equal(a_te.cat, s.test.cat[:200]) and np.array_equal(a_te.cat, c_te.cat)
    with pytest.raises(InputError, match="asked, the data has 750 / 250"):
        S.seed_data(spec, 0, 751, 10)


# -- MovieLens-100k -------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.skipif(bool(NO_MOVIELENS), reason=NO_MOVIELENS)
def test_movielens_features_and_no_leakage():
    s = S.read_movielens_100k()
    assert s.cat_names == S.ML_CAT and s.dense_names == S.ML_DENSE
    assert s.tables == (944, 1683, 8, 3, 22, 12, 20, 20, 20, 17)
    assert (len(s.train), len(s.test)) == (80367, 19633)
    for d in (s.train, s.test):
        assert np.all(d.cat >= 0) and np.all(d.cat < np.array(s.tables))
        assert np.all(d.cat[:, :6] > 0)  # user, movie and user side features are always known
    # the split, recomputed independently from the ratings file: per user the latest fifth
    root = S.movielens_root()
    r = np.loadtxt(root / "ml-100k.inter", dtype=np.int64, skiprows=1)
    label = (r[:, 2] >= 4).astype(np.float32)
    assert np.concatenate([s.train.label, s.test.label]).mean() == pytest.approx(label.mean())
    held = set()
    for u in np.unique(r[:, 0]):
        x = r[r[:, 0] == u]
        x = x[np.lexsort((x[:, 1], x[:, 3]))]
        k = len(x) // 5
        held |= {(int(u), int(m)) for m in x[len(x) - k :, 1]}
        assert x[len(x) - k :, 3].min() >= x[: len(x) - k, 3].max()  # per user, held out = later
    assert {tuple(p) for p in s.test.cat[:, :2].tolist()} == held
    assert not held & {tuple(p) for p in s.train.cat[:, :2].tolist()}
    # the counts are the training split's: a held-out rating never counts
    u_train = np.bincount(s.train.cat[:, 0], minlength=944)
    m_train = np.bincount(s.train.cat[:, 1], minlength=1683)
    for d in (s.train, s.test):
        assert np.allclose(d.dense[:, 0], np.log1p(u_train[d.cat[:, 0]]))
        assert np.allclose(d.dense[:, 1], np.log1p(m_train[d.cat[:, 1]]))
    assert np.all((s.train.dense[:, 3:] >= 0) & (s.train.dense[:, 3:] <= 1))
    # the genre tables: Toy Story (1995) is Animation, Children's, Comedy
    toy = s.train.cat[s.train.cat[:, 1] == 1][0]
    genres = sorted(
        {
            "Action",
            "Adventure",
            "Animation",
            "Children's",
            "Comedy",
            "Crime",
            "Documentary",
            "Drama",
            "Fantasy",
            "Film-Noir",
            "Horror",
            "Musical",
            "Mystery",
            "Romance",
            "Sci-Fi",
            "Thriller",
            "War",
            "Western",
            "unknown",
        }
    )
    assert list(toy[6:9]) == [1 + genres.index(g) for g in ("Animation", "Children's", "Comedy")]
    assert toy[9] == 1 + (1995 - 1920) // 5
    assert "MovieLens-100k" in s.description and "80367" in s.description


def _ml_files(tmp_path, inter, users=None, items=None):
    users = users or ["1\t24\tM\ttechnician\t85711", "2\t53\tF\tother\tT8H1N"]
    items = items or ["1\tToy Story\t1995\tAnimation Children's Comedy", "2\tV\tunkonwn\tDrama"]
    (tmp_path / "ml-100k.user").write_text(
        "user_id:token\tage:token\tgender:token\toccupation:token\t"
        "zip_code:token\n" + "\n".join(users) + "\n"
    )
    (tmp_path / "ml-100k.item").write_text(
        "item_id:token\tmovie_title:token_seq\trelease_year:token\t"
        "class:token_seq\n" + "\n".join(items) + "\n"
    )
    (tmp_path / "ml-100k.inter").write_text(
        "user_id:token\titem_id:token\trating:float\ttimestamp:float\n" + "\n".join(inter) + "\n"
    )
    return tmp_path


def test_movielens_reader_on_small_files(tmp_path):
    inter = [
        f"{1 + i % 2}\t{1 + i % 3 // 2}\t{1 + i % 5}\t{880000000 + 3600 * i}" for i in range(20)
    ]
    s = S.read_movielens_100k(_ml_files(tmp_path, inter))
    assert (len(s.train), len(s.test)) == (16, 4)  # 10 ratings per user, 2 held out each
    u2 = s.train.cat[s.train.cat[:, 0] == 2][0]
    assert list(u2[2:6]) == [
        6,
        2,
        1,
        11,
    ]  # age 53: group 50-55; F; "other" < "technician"; not a US ZIP
    m2 = s.train.cat[s.train.cat[:, 1] == 2][0]
    assert list(m2[6:10]) == [
        4,
        0,
        0,
        0,
    ]  # Drama, 4th of the sorted genres; one genre; unknown year
    assert np.all(s.train.dense[s.train.cat[:, 1] == 2][:, 2] == 0)


@pytest.mark.parametrize(
    "inter, users, msg",
    [
        (["1\t1\t6\t880000000"], None, r"ml-100k.inter: line 2: rating: expected 1..5$"),
        (
            ["1\t1\tfive\t880000000"],
            None,
            r"ml-100k.inter: line 2: rating: expected an integer$",
        ),
        (["3\t1\t4\t880000000"], None, r"ml-100k.inter: line 2: user_id: not in ml-100k.user"),
        (["1\t9\t4\t880000000"], None, r"ml-100k.inter: line 2: item_id: not in ml-100k.item"),
        (["1\t1\t4"], None, r"ml-100k.inter: line 2: expected 4 tab-separated fields, got 3"),
        (
            ["1\t1\t4\t880000000"],
            ["1\t24\tX\ttechnician\t85711"],
            r"ml-100k.user: line 2: gender: expected M or F",
        ),
    ],
)
def test_movielens_reader_rejects_bad_files_naming_file_and_line(tmp_path, inter, users, msg):
    with pytest.raises(InputError, match=msg) as e:
        S.read_movielens_100k(_ml_files(tmp_path, inter, users))
    assert "\n" not in str(e.value)


def test_movielens_missing_package_says_how_to_install_it(monkeypatch):
    from importlib import metadata

    def missing(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "distribution", missing)
    monkeypatch.delenv(S.MOVIELENS_ENV, raising=False)
    with pytest.raises(
        InputError, match=r"pip install --no-deps recbole==1.2.1 .*\(recbole is not installed\)"
    ):
        S.resolve("movielens-100k")


# -- the synthetic path is unchanged -------------------------------------------------------------------
def _digest(*arrays):
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def test_synthetic_split_is_the_same_data_as_before():
    s = S.synthetic_split(3000, 1000, seed=1, scale=1000)
    # the arrays earlier versions drew (digests recorded before the data interface existed)
    assert (
        _digest(s.train.dense, s.train.cat, s.train.label)
        == "f8424c1783af7aa9cd8fee4e49e4621b1aee31a674f526807d2594a3a73e016e"
    )
    assert (
        _digest(s.test.dense, s.test.cat, s.test.label)
        == "f0086ee87319b9efbb0d59b04cb340d03c4dedaad02ddb5e926853f838434cfe"
    )
    assert s.tables == D.scaled_tables(1000) and s.n_dense == 13
    assert s.description.startswith("synthetic Criteo-like (cprsim.calibrate.data): 26 tables")


@pytest.mark.dlrm
def test_synthetic_calibration_inits_and_trains_as_before(torch):
    from cprsim.calibrate import runner as R
    from cprsim.calibrate.model import DLRM, ModelConfig

    p = dataclasses.replace(
        R.PRESETS["quick"], train_samples=6000, test_samples=1000, batch=256, model=ModelConfig()
    )
    prep = R.prepared(p, 0)
    assert prep.n_dense == 13 and len(prep.tables) == 26
    m = R.new_model(prep, p.model, 1)
    assert (
        _digest(*[v.numpy() for _, v in sorted(m.state_tensors().items())])
        == "bac635c0ac22254d101e37aafb1363e605a113b3ede95bf9b790647e704a9012"
    )  # recorded before
    # training: the model as earlier versions built it (no n_dense argument, 26 tables) and the
    # batches as they drew them give the same weights, bit for bit
    old = D.synthetic(6000, seed=1, scale=1000)
    off = np.concatenate([[0], np.cumsum(D.scaled_tables(1000))[:-1]])
    assert np.array_equal(prep.grows.numpy(), old.cat + off) and np.array_equal(
        prep.dense.numpy(), old.dense
    )
    torch.manual_seed(0)
    ref = DLRM(D.scaled_tables(1000), p.model, torch.Generator().manual_seed(0))
    old_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model, _ = R.train(prep, p.model, 0)
        for k in range(prep.n_iters):
            sl = slice(k * 256, (k + 1) * 256)
            ref.train_step(
                torch.from_numpy(old.dense[sl]),
                torch.from_numpy(old.cat[sl] + off),
                torch.from_numpy(old.label[sl]),
            )
    finally:
        torch.set_num_threads(old_threads)
    for k, v in ref.state_tensors().items():
        assert torch.equal(v, model.state_tensors()[k]), k


@pytest.mark.dlrm
def test_dlrm_takes_its_shapes_from_the_data(tmp_path, torch):
    from cprsim.calibrate import runner as R

    spec = S.resolve(str(_write_csv(tmp_path / "log.csv", _rows(3000))), _schema(tmp_path))
    p = S.sized(dataclasses.replace(R.PRESETS["quick"], batch=64), spec)
    prep = R.prepared(p, 0)
    m = R.new_model(prep, p.model, 0)
    assert (m.n_cat, m.n_dense) == (3, 2) and m.bottom[0].in_features == 2 and m.tri.shape[1] == 6
    model, _ = R.train(prep, p.model, 0)
    auc, ll = R.evaluate(model, prep)
    assert 0.5 < auc <= 1 and np.isfinite(ll)


@pytest.mark.dlrm
def test_emulated_pls_without_prepared_data_reads_the_presets_own(tmp_path, torch):
    """``emulated_pls(p, seed)`` without ``prep`` emulates on the preset's data (``p.data``), as
    the calibration runs do, never on the synthetic generator's."""
    from cprsim.calibrate import runner as R

    spec = S.resolve(str(_write_csv(tmp_path / "log.csv", _rows(3000))), _schema(tmp_path))
    p = S.sized(
        dataclasses.replace(R.PRESETS["quick"], batch=64, n_shards=2, failures_per_run=4), spec
    )
    own = R.emulated_pls(p, 0, R.prepared(p, 0))
    synthetic = R.emulated_pls(p, 0, R.synthetic_prepared(p, 0))
    assert own != synthetic  # the test can tell the two data apart
    assert R.emulated_pls(p, 0) == own


# -- the CLI end to end ---------------------------------------------------------------------------------
def _cli(*args):
    from click.testing import CliRunner

    from cprsim.cli import main

    return CliRunner().invoke(main, ["calibrate", *map(str, args)])


@pytest.mark.slow
@pytest.mark.dlrm
def test_cli_on_a_csv_with_schema(tmp_path, torch):
    data = _write_csv(tmp_path / "log.csv", _rows(16_000, seed=3))
    sch = _schema(tmp_path, SCHEMA.replace("held_out = 0.25", "held_out = 0.2"))
    out = tmp_path / "cal"
    r = _cli("--data", data, "--schema", sch, "--no-costs", "--jobs", 1, "--out", out)
    assert r.exit_code == 0, r.output
    from cprsim.calibrate import runner as R

    n = R.n_steps(R.PRESETS["quick"])
    assert f"calibrate quick on log.csv: {n}/{n}" in r.stderr
    doc = tomllib.loads((out / "calibration.toml").read_text())
    prov = doc["provenance"]
    assert prov["data"].startswith("log.csv with schema schema.toml")
    assert "all 12800 train / 3200 held-out samples used, one epoch" in prov["data"]
    assert prov["iterations"] == 12800 // 512 and min(prov["baseline_auc"]) > 0.6
    cfg = json.loads((out / "manifest.json").read_text())["config"]
    assert cfg["data"]["file"] == "log.csv" and cfg["preset"]["train_samples"] == 12800
    for f in doc["fit"].values():
        assert (
            np.isfinite(f["auc_slope"]) and f["auc_slope_lo"] <= f["auc_slope"] <= f["auc_slope_hi"]
        )
    # --resume refuses other data (and says that the data differ)
    data.write_text(data.read_text().replace("\n1000", "\n9000", 1))
    r = _cli("--data", data, "--schema", sch, "--no-costs", "--jobs", 1, "--out", out, "--resume")
    assert r.exit_code == 2 and "another configuration (differs in data" in r.stderr
    # and bad data is one line, exit 2, before anything is written
    r = _cli("--data", data, "--no-costs", "--out", tmp_path / "o2")
    assert r.exit_code == 2 and r.stderr.count("\n") == 1 and "needs --schema" in r.stderr
    assert not (tmp_path / "o2").exists()


@pytest.mark.slow
@pytest.mark.dlrm
@pytest.mark.skipif(bool(NO_MOVIELENS), reason=NO_MOVIELENS)
def test_cli_on_a_movielens_slice_reports_a_slope_with_its_ci(tmp_path, torch):
    out = tmp_path / "ml"
    r = _cli(
        "--data",
        "movielens-100k",
        "--limit-samples",
        12_000,
        3_000,
        "--no-costs",
        "--jobs",
        1,
        "--out",
        out,
    )
    assert r.exit_code == 0, r.output
    doc = tomllib.loads((out / "calibration.toml").read_text())
    prov = doc["provenance"]
    assert prov["data"].startswith("MovieLens-100k (GroupLens)")
    assert "the first 12000 train / 3000 held-out samples used" in prov["data"]
    assert "recbole" in prov["data"] and prov["iterations"] == 12_000 // 512
    assert min(prov["baseline_auc"]) > 0.65
    cfg = json.loads((out / "manifest.json").read_text())["config"]
    assert cfg["data"]["source"] == "movielens-100k" and len(cfg["data"]["sha256"]) == 64
    fit = doc["fit"]["partial"]
    assert np.isfinite(fit["auc_slope_lo"]) and np.isfinite(fit["auc_slope_hi"])
    assert fit["auc_slope_lo"] < fit["auc_slope"] < fit["auc_slope_hi"]
    assert "partial    AUC loss = " in r.stdout
    # the synthetic default has no data key in its configuration (its fingerprints are unchanged)
    r = _cli("--limit-samples", 12_000, 3_000, "--no-costs", "--jobs", 1, "--out", out, "--resume")
    assert r.exit_code == 2 and "differs in data" in r.stderr


# -- MovieLens-100k on any Python: recbole's files without recbole, or CPRSIM_MOVIELENS_DIR -----------
@pytest.mark.skipif(bool(NO_MOVIELENS), reason=NO_MOVIELENS)
def test_movielens_from_a_folder_named_by_the_environment(tmp_path, monkeypatch):
    """A copy of the three files named by CPRSIM_MOVIELENS_DIR is the data (same fingerprint)."""
    import shutil

    src = S.movielens_root()
    for f in S.MOVIELENS_FILES:
        shutil.copy(src / f, tmp_path / f)
    before = S._movielens_digest(src)
    monkeypatch.setenv(S.MOVIELENS_ENV, str(tmp_path))
    assert S.movielens_root() == tmp_path
    assert S._movielens_digest(S.movielens_root()) == before


@pytest.mark.skipif(bool(NO_MOVIELENS), reason=NO_MOVIELENS)
def test_movielens_files_that_are_not_recbole_1_2_1s_are_refused(tmp_path, monkeypatch):
    import shutil

    src = S.movielens_root()
    for f in S.MOVIELENS_FILES:
        shutil.copy(src / f, tmp_path / f)
    with open(tmp_path / "ml-100k.user", "a") as fh:
        fh.write("944\t30\tM\tother\t00000\n")
    monkeypatch.setenv(S.MOVIELENS_ENV, str(tmp_path))
    with pytest.raises(InputError) as e:
        S.movielens_root()
    msg = str(e.value)
    assert "ml-100k.user" in msg and "SHA-256" in msg and "\n" not in msg


def test_movielens_missing_says_how_to_get_it_on_any_python(tmp_path, monkeypatch):
    monkeypatch.setenv(S.MOVIELENS_ENV, str(tmp_path))
    with pytest.raises(InputError) as e:
        S.movielens_root()
    msg = str(e.value)
    assert "pip install --no-deps recbole==1.2.1" in msg and "ml-100k.inter" in msg
    assert S.MOVIELENS_ENV in msg and "\n" not in msg
