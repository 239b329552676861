"""Calibration data (numpy only) and the torch-free calibration loader."""

from __future__ import annotations

import math

import numpy as np
import pytest
from click.testing import CliRunner

from cprsim.calibrate import data as D
from cprsim.calibrate.calibration import Calibration, load_calibration, placeholder, to_toml
from cprsim.errors import InputError


def test_synthetic_is_deterministic_and_chunk_independent():
    a = D.synthetic(3000, seed=3, scale=1000, chunk=1000)
    b = D.synthetic(3000, seed=3, scale=1000, chunk=1000)
    assert np.array_equal(a.cat, b.cat) and np.array_equal(a.label, b.label)
    # the second chunk on its own equals the second chunk of the whole
    c = D.synthetic(1000, seed=3, scale=1000, chunk=1000, start_chunk=1)
    assert np.array_equal(c.cat, a.cat[1000:2000]) and np.array_equal(c.dense, a.dense[1000:2000])
    tables = D.scaled_tables(1000)
    assert a.cat.shape == (3000, 26) and np.all(a.cat < np.array(tables)) and np.all(a.cat >= 0)
    assert 0.05 < a.label.mean() < 0.5


def test_synthetic_ids_are_skewed():
    ds = D.synthetic(20000, seed=1, scale=1000)
    t = int(np.argmax(D.scaled_tables(1000)))
    counts = np.sort(np.bincount(ds.cat[:, t]))[::-1]
    assert counts[: max(1, len(counts) // 100)].sum() > 0.3 * counts.sum()


def _tsv(tmp_path, lines):
    p = tmp_path / "day.tsv"
    p.write_text("\n".join(lines) + "\n")
    return p


def _line(label="1", ints=None, cats=None):
    ints = (
        ints if ints is not None else ["3", "", "-1", "0", "7", "", "1", "2", "", "5", "6", "", "9"]
    )
    cats = cats if cats is not None else ["68fd1e64", "", "80e26c9b"] + ["0b153874"] * 23
    return "\t".join([label] + ints + cats)


def test_criteo_reader_handles_missing_values(tmp_path):
    rows = [
        (
            1,
            [3, None, -1, 0, 7, None, 1, 2, None, 5, 6, None, 9],
            ["68fd1e64", None, "80e26c9b"] + ["0b153874"] * 23,
        ),
        (0, [None] * 13, [None] * 26),
    ]
    p = tmp_path / "gen.tsv"
    D.write_criteo_tsv(p, rows)
    ds = D.read_criteo_tsv(p, scale=1000)
    assert ds.label.tolist() == [1.0, 0.0]
    assert ds.dense[0, 0] == pytest.approx(math.log1p(3))
    assert ds.dense[0, 1] == 0 and ds.dense[0, 2] == 0  # missing, negative
    assert np.all(ds.dense[1] == 0) and np.all(ds.cat[1] == 0)
    tables = D.scaled_tables(1000)
    assert ds.cat[0, 0] == 1 + int("68fd1e64", 16) % (tables[0] - 1)
    assert ds.cat[0, 1] == 0
    assert np.all(ds.cat[0] < np.array(tables))


@pytest.mark.parametrize(
    "bad, msg",
    [
        (_line(label="2"), "label"),
        (_line(ints=["x"] + [""] * 12), "I1"),
        (_line(cats=["zz"] + [""] * 25), "C1"),
        ("1\t2\t3", "expected 40"),
    ],
)
def test_criteo_reader_rejects_malformed_line_with_its_number(tmp_path, bad, msg):
    p = _tsv(tmp_path, [_line(), _line(label="0"), bad])
    with pytest.raises(InputError, match=rf"day.tsv: line 3: .*{msg}") as e:
        D.read_criteo_tsv(p)
    assert "\n" not in str(e.value)


def test_auc_and_logloss():
    y = np.array([0, 0, 1, 1])
    assert D.auc(y, np.array([0.1, 0.2, 0.3, 0.4])) == 1.0
    assert D.auc(y, np.array([0.4, 0.3, 0.2, 0.1])) == 0.0
    assert D.auc(y, np.array([0.5, 0.5, 0.5, 0.5])) == 0.5
    assert D.logloss(y, np.full(4, 0.5)) == pytest.approx(math.log(2))


# -- loader -----------------------------------------------------------------------------------------
def _doc(auc=0.02, ll=0.05):
    fit = {
        "auc_slope": auc,
        "auc_slope_lo": auc / 2,
        "auc_slope_hi": auc * 2,
        "auc_r2": 0.9,
        "logloss_slope": ll,
        "logloss_slope_lo": ll / 2,
        "logloss_slope_hi": ll * 2,
        "logloss_r2": 0.8,
        "n_points": 4,
    }
    return {
        "provenance": {"calibrated": True, "preset": "test", "seeds": [0, 1]},
        "fit": {"partial": fit, "mfu": dict(fit, auc_slope=auc / 2)},
    }


def test_loader_roundtrip_and_inverse(tmp_path):
    p = tmp_path / "calibration.toml"
    p.write_text(to_toml(_doc(), "test file"))
    c = load_calibration(p)
    assert c.calibrated and c.provenance["preset"] == "test"
    assert c.accuracy_loss(0.1) == pytest.approx(0.002)
    assert c.accuracy_loss(0.1, "logloss") == pytest.approx(0.005)
    assert c.accuracy_loss(0.1, strategy="mfu") == pytest.approx(0.001)
    assert c.accuracy_loss(0.1, strategy="ecrm") == pytest.approx(0.002)  # falls back to partial
    assert c.accuracy_loss(0.1, conservative=True) == pytest.approx(0.004)
    for st in ("partial", "mfu"):
        for m in ("auc", "logloss"):
            assert c.accuracy_loss(c.max_pls(0.001, m, st), m, st) == pytest.approx(0.001)


def test_loader_errors_name_file_and_key(tmp_path):
    d = _doc()
    del d["fit"]["mfu"]["auc_slope"]
    p = tmp_path / "c.toml"
    p.write_text(to_toml(d))
    with pytest.raises(InputError, match=r"c.toml: fit.mfu.auc_slope"):
        load_calibration(p)
    with pytest.raises(InputError, match=r"nope.toml: no such calibration file"):
        load_calibration(tmp_path / "nope.toml")
    with pytest.raises(InputError, match="metric"):
        placeholder().accuracy_loss(0.1, "acc")


def test_default_calibration_loads_and_placeholder_is_labelled():
    c = load_calibration()
    assert isinstance(c, Calibration)
    assert c.accuracy_loss(0.0) == 0.0 and c.max_pls(0.001) > 0
    ph = placeholder()
    assert ph.calibrated is False and "placeholder" in ph.provenance["source"]
    assert math.isinf(Calibration({"partial": {"auc": 0.0, "logloss": 0.0}}, True).max_pls(0.01))


def test_package_imports_without_torch():
    import subprocess
    import sys

    code = (
        "import sys\n"
        "import cprsim.calibrate, cprsim.calibrate.data, cprsim.calibrate.datasets, cprsim.cli\n"
        "from cprsim.calibrate import load_calibration; load_calibration()\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_cli_reports_bad_scenario_with_exit_2(tmp_path):
    pytest.importorskip("torch")
    from cprsim.cli import main

    r = CliRunner().invoke(
        main,
        ["calibrate", "--from-sim", str(tmp_path / "missing.toml"), "--out", str(tmp_path / "o")],
    )
    assert r.exit_code == 2, r.output
