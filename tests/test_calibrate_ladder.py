"""The calibration's scale ladder (``--preset shipped``): each rung a calibration of its own in
OUT/rungs/NAME, and ``[scale]`` with each rung's loss per unit PLS and its ratio to the reference."""

from __future__ import annotations

import dataclasses
import math
import os

import pytest

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
torch = pytest.importorskip("torch")

from cprsim.calibrate import data as D  # noqa: E402
from cprsim.calibrate import pipeline as P  # noqa: E402
from cprsim.calibrate import runner as R  # noqa: E402
from cprsim.calibrate.calibration import load_calibration  # noqa: E402
from cprsim.names import PARTIAL  # noqa: E402
from cprsim.planner.accuracy import ladder_scale  # noqa: E402

pytestmark = pytest.mark.dlrm

TINY = dataclasses.replace(
    R.PRESETS["quick"],
    name="tiny",
    train_samples=12_000,
    test_samples=4_000,
    batch=256,
    seeds=(0, 1),
    budgets=(0.5, 0.25),
    strategies=(PARTIAL,),
)
RUNG = dataclasses.replace(TINY, name="tiny-rows-x10", scale=TINY.scale / 10)


def test_the_shipped_preset_is_eight_seeds_and_a_ladder_of_sizes_lengths_and_real_data():
    p = R.PRESETS["shipped"]
    assert len(p.seeds) >= 8 and set(p.strategies) >= {PARTIAL, "mfu", "ssu"}
    synthetic = [R.RUNGS[n][0] for n in p.rungs if R.RUNGS[n][1] is None]
    rows = {sum(D.scaled_tables(q.scale)) for q in (p, *synthetic)}
    assert len(rows) >= 3  # at least three table sizes
    assert any(R.RUNGS[n][1] is not None for n in p.rungs)  # real data
    assert len({q.train_samples for q in (p, *synthetic)}) >= 2  # two training lengths
    assert R.n_steps(p) == len(p.seeds) * (1 + len(p.budgets) * len(p.strategies)) + sum(
        R.n_steps(R.RUNGS[n][0]) for n in p.rungs
    )


@pytest.mark.slow
def test_a_ladder_calibrates_each_rung_and_writes_the_ratios(tmp_path, monkeypatch):
    monkeypatch.setitem(R.RUNGS, RUNG.name, (RUNG, None))
    p = dataclasses.replace(TINY, rungs=(RUNG.name,))
    seen = []
    doc = P.calibrate(
        p, tmp_path, lambda n=1, what="", resumed=False: seen.append(n), measure_costs=False
    )
    assert sum(seen) == R.n_steps(p)
    rung = load_calibration(tmp_path / "rungs" / RUNG.name / "calibration.toml")
    ref, sc = doc["fit"][PARTIAL], doc["scale"]
    assert sc["reference"]["embedding_rows"] == sum(D.scaled_tables(TINY.scale))
    row = sc[RUNG.name]
    assert (
        row["embedding_rows"]
        == sum(D.scaled_tables(RUNG.scale))
        > sc["reference"]["embedding_rows"]
    )
    theirs = rung.raw["fit"][PARTIAL]
    assert row["auc_slope"] == theirs["auc_slope"]
    assert math.isclose(row["auc_ratio"], theirs["auc_slope"] / ref["auc_slope"])
    assert row["auc_ratio_lo"] <= row["auc_ratio"] <= row["auc_ratio_hi"]
    # the file the planner reads carries the ladder
    cal = load_calibration(tmp_path / "calibration.toml")
    big = ladder_scale(cal.raw, "auc", 10**9)
    assert big["outside"] == "above" and big["factor"] == max(1.0, row["auc_ratio"])
    # the rungs are not part of the reference's fingerprint, and a finished ladder resumes to nothing
    seen.clear()
    again = P.calibrate(
        p,
        tmp_path,
        lambda n=1, what="", resumed=False: seen.append((n, resumed)),
        measure_costs=False,
        resume=True,
    )
    assert again["scale"] == doc["scale"]
    assert all(resumed for _, resumed in seen)


def test_a_ladder_takes_no_other_data_or_failure_schedule(cli, tmp_path):
    for extra in (
        ("--data", "movielens-100k"),
        ("--limit-samples", "1000", "1000"),
        ("--from-sim", "toy"),
    ):
        r = cli("calibrate", "--preset", "shipped", "--out", tmp_path / "x", *extra)
        assert r.exit_code == 2 and "scale ladder" in r.output, r.output
    assert not (tmp_path / "x").exists()
    from cprsim.api import load_scenario
    from cprsim.errors import InputError

    p = dataclasses.replace(TINY, rungs=(RUNG.name,))
    with pytest.raises(InputError, match="scale ladder"):
        P.calibrate(p, tmp_path / "y", scenario=load_scenario("toy"), measure_costs=False)
