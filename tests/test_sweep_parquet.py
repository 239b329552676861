"""`cprsim sweep --format parquet`: the CSV tables again as typed Parquet, identical whatever --jobs;
a one-line error without pyarrow; manifest.json records the versions the sweep ran with."""

from __future__ import annotations

import csv
import json
import platform
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from cprsim.sweep import load_results

from cli_helpers import one_line_error, run

SWEEP = """
name = "pq"
scenario = "toy"
replications = 5
strategies = ["full", {{ name = "partial", label = "cpr" }}]
[set]
"storage.write_gbps" = 0.4
[grid]
"checkpoint.interval_h" = [0.25, 1.0]
"cluster.trainers" = {trainers}
"""


def write_sweep(tmp_path: Path, trainers: str = "[4, 8]") -> Path:
    p = tmp_path / "s.toml"
    p.write_text(SWEEP.format(trainers=trainers))
    return p


def csv_rows(path: Path) -> list[list[str]]:
    with path.open(newline="") as f:
        return list(csv.reader(f))


def as_cell(text: str, kind: str):
    return {"int64": int, "double": float, "string": str}[kind](text)


def test_parquet_tables_equal_the_csv_ones_and_do_not_depend_on_jobs(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    sweep = write_sweep(tmp_path)
    outs = {}
    for jobs in ("1", "2"):
        out = outs[jobs] = tmp_path / f"j{jobs}"
        r = run("sweep", sweep, "--out", out, "--jobs", jobs, "--format", "parquet")
        assert r.exit_code == 0, r.output
    plain = tmp_path / "csv"
    assert run("sweep", sweep, "--out", plain).exit_code == 0
    for name in ("results", "summary"):
        ref = (outs["1"] / f"{name}.parquet").read_bytes()
        assert (outs["2"] / f"{name}.parquet").read_bytes() == ref, name
        # the CSV is written as always, the same bytes as without --format
        assert (outs["1"] / f"{name}.csv").read_bytes() == (plain / f"{name}.csv").read_bytes(), (
            name
        )
        assert not (plain / f"{name}.parquet").exists()
        table = pq.read_table(outs["1"] / f"{name}.parquet")
        rows = csv_rows(outs["1"] / f"{name}.csv")
        assert table.column_names == rows[0]
        assert table.num_rows == len(rows) - 1 > 0
        kinds = {f.name: str(f.type) for f in table.schema}
        assert set(kinds.values()) <= {"int64", "double", "string"}, kinds
        assert (
            kinds["point"] == "int64"
            and kinds["strategy"] == "string"
            and kinds["interval_h"] == "double"
        )
        assert kinds["cluster.trainers"] == "int64"
        if name == "results":
            assert kinds["replication"] == "int64" and kinds["overhead"] == "double"
        else:
            assert kinds["n"] == "int64" and kinds["overhead_mean"] == "double"
        data = table.to_pydict()
        for j, col in enumerate(rows[0]):
            got = data[col]
            want = [as_cell(r[j], kinds[col]) for r in rows[1:]]
            assert all(type(g) is type(w) for g, w in zip(got, want)), col
            assert got == want or all(g == w or (g != g and w != w) for g, w in zip(got, want)), col
    assert len(load_results(outs["1"]).points) == 8  # `cprsim plot` reads the folder as before


def test_parquet_columns_fall_back_to_float_and_string(tmp_path):
    """A column is int64 only if every cell is an int, float64 if every cell is a number, else text."""
    pytest.importorskip("pyarrow")
    from cprsim.sweep.runner import parquet_column

    assert str(parquet_column(["1", "-2", "30"]).type) == "int64"
    assert str(parquet_column(["1", "2.5", "nan", "inf"]).type) == "double"
    assert str(parquet_column(["1", "x"]).type) == "string"
    assert (
        str(parquet_column(["1_000", "2"]).type) == "string"
    )  # Python's int() reads "1_000": not CSV
    assert parquet_column(["0.1", "1e-300"]).to_pylist() == [0.1, 1e-300]
    assert str(parquet_column(["99999999999999999999"]).type) == "double"  # beyond int64


def test_resume_writes_the_parquet_of_the_complete_sweep(tmp_path):
    pytest.importorskip("pyarrow")
    sweep = write_sweep(tmp_path)
    ref, out = tmp_path / "ref", tmp_path / "o"
    assert run("sweep", sweep, "--out", ref, "--format", "parquet").exit_code == 0
    assert run("sweep", sweep, "--out", out).exit_code == 0
    (out / ".results.parquet.dead.tmp").write_bytes(b"PAR1 half")  # an interrupted write
    r = run("sweep", sweep, "--out", out, "--resume", "--format", "parquet")
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in ref.iterdir())
    for name in ("results.parquet", "summary.parquet"):
        assert (out / name).read_bytes() == (ref / name).read_bytes(), name


def test_parquet_without_pyarrow_is_a_one_line_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow -> ImportError
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    out = tmp_path / "o"
    line = one_line_error(run("sweep", write_sweep(tmp_path), "--out", out, "--format", "parquet"))
    assert "pip install 'cprsim[parquet]'" in line, line
    assert not out.exists()


def test_manifest_records_the_versions(tmp_path):
    out = tmp_path / "o"
    assert run("sweep", write_sweep(tmp_path, "[4]"), "--out", out).exit_code == 0
    manifest = json.loads((out / "manifest.json").read_text())
    v = manifest["versions"]
    assert v["python"] == platform.python_version()
    for name in ("numpy", "scipy", "simpy", "cprsim"):
        assert v[name] == version(name), name
    assert manifest["cprsim_version"] == v["cprsim"]
