"""The held-out residuals kept on disk (cprsim.calibrate.accuracy: a fit per seed, every plan):
the same floats as computed, read back without refitting, ignored when malformed, keyed by the
runs, and off with an empty CPRSIM_CACHE_DIR."""

from __future__ import annotations

import json

import numpy as np
import pytest

from cprsim.calibrate import accuracy as A
from cprsim.calibrate.accuracy import Data, HeldOutResiduals


def _data(shift: float = 0.0) -> Data:
    n = 240
    i = np.arange(n)
    pls = 0.002 + 0.1 * ((i * 37) % 97) / 97
    rng = np.random.default_rng(3)
    y = 0.004 * pls + np.sqrt(pls) * 0.003 * rng.standard_normal(n) + shift
    return Data(np.full(n, "partial"), i % 6, pls, np.full(n, 0.5), np.zeros(n), y)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CPRSIM_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(A, "_RESIDUALS_MEMO", {})
    return tmp_path / "held-out"


def _same(a: HeldOutResiduals | None, b: HeldOutResiduals | None) -> bool:
    assert a is not None and b is not None
    return a.centers == b.centers and all(np.array_equal(x, y) for x, y in zip(a.z, b.z))


def test_read_back_bit_for_bit_without_refitting(cache, monkeypatch):
    d = _data()
    first = HeldOutResiduals.from_data(d, "slope")
    files = list(cache.glob("*.json"))
    assert len(files) == 1
    monkeypatch.setattr(A, "_RESIDUALS_MEMO", {})  # a new process: only the disk remembers

    def refit(*_a, **_k):
        raise AssertionError("refitted although the residuals were on disk")

    monkeypatch.setattr(A, "_held_out_predictive", refit)
    again = HeldOutResiduals.from_data(d, "slope")
    assert _same(first, again)
    assert not again.z[0].flags.writeable  # shared: nobody may sort it in place


def test_a_malformed_file_is_computed_again_and_rewritten(cache, monkeypatch):
    d = _data()
    fresh = HeldOutResiduals._computed(d, "slope", A.RESIDUAL_BINS, A.RESIDUALS_PER_BIN)
    HeldOutResiduals.from_data(d, "slope")
    (f,) = cache.glob("*.json")
    for bad in ("{not json", json.dumps({"centers": [0.1, 0.05], "z": [[1.0], [2.0]]}), "[]"):
        f.write_text(bad)
        monkeypatch.setattr(A, "_RESIDUALS_MEMO", {})
        assert _same(HeldOutResiduals.from_data(d, "slope"), fresh)
        assert json.loads(f.read_text())["centers"] == list(fresh.centers)


def test_other_runs_or_another_candidate_are_other_files(cache):
    d = _data()
    HeldOutResiduals.from_data(d, "slope")
    HeldOutResiduals.from_data(_data(shift=1e-6), "slope")
    HeldOutResiduals.from_data(d, "position")
    assert len(list(cache.glob("*.json"))) == 3


def test_an_empty_cache_dir_turns_it_off(tmp_path, monkeypatch):
    monkeypatch.setenv("CPRSIM_CACHE_DIR", "")
    monkeypatch.setattr(A, "_RESIDUALS_MEMO", {})
    monkeypatch.chdir(tmp_path)
    d = _data()
    got = HeldOutResiduals.from_data(d, "slope")
    assert _same(got, HeldOutResiduals._computed(d, "slope", A.RESIDUAL_BINS, A.RESIDUALS_PER_BIN))
    assert not any(tmp_path.rglob("*.json"))


def test_too_few_seeds_is_remembered_as_none(cache, monkeypatch):
    d = _data()
    d2 = Data(d.strategy, d.seed % 2, d.pls, d.position, d.age, d.y)
    assert HeldOutResiduals.from_data(d2, "slope") is None
    monkeypatch.setattr(A, "_RESIDUALS_MEMO", {})
    assert HeldOutResiduals.from_data(d2, "slope") is None
    assert json.loads(next(cache.glob("*.json")).read_text()) == {"none": True}


def test_the_least_recently_used_files_go_past_the_limit(cache, monkeypatch):
    """Past the limit the files least recently written or read go; the one just written stays."""
    import os

    monkeypatch.setattr(A, "_RESIDUALS_KEEP", 2)
    HeldOutResiduals.from_data(_data(shift=0.0), "slope")
    (a,) = cache.glob("*.json")
    HeldOutResiduals.from_data(_data(shift=1e-6), "slope")
    (b,) = set(cache.glob("*.json")) - {a}
    os.utime(a, ns=(10**18, 10**18))  # a written long ago...
    os.utime(b, ns=(15 * 10**17, 15 * 10**17))  # both before now
    monkeypatch.setattr(A, "_RESIDUALS_MEMO", {})
    HeldOutResiduals.from_data(_data(shift=0.0), "slope")  # ...but read now: used last
    assert a.stat().st_mtime_ns > b.stat().st_mtime_ns
    HeldOutResiduals.from_data(_data(shift=2e-6), "slope")
    left = set(cache.glob("*.json"))
    assert len(left) == 2 and a in left and b not in left


def test_the_held_out_checks_folds_stay_in_memory(cache):
    """held_out_coverage's per-fold residuals (one per seed, used once) are not written."""
    HeldOutResiduals.from_data(_data(), "slope", persist=False)
    assert not list(cache.glob("*.json"))


def test_no_home_folder_means_no_cache(monkeypatch):
    from pathlib import Path

    from cprsim.io import cache_dir

    monkeypatch.delenv("CPRSIM_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)

    def no_home():
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.setattr(Path, "home", staticmethod(no_home))
    assert cache_dir() is None
