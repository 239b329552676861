"""Tails point the user's way (docs/concepts.md): every tail reported beside a mean is the bad one of
its metric: the P90/P99 of a cost, the P10/P1 of ETTR (higher is better), in the `simulate` table,
its `--json` and summary.json, the API's estimates, a sweep's summary.csv and a plan's JSON.

With at most 10 replications the P10 of a sample (numpy's linear interpolation) is never above its
mean and the P90 never below it, so "ETTR's tail <= its mean, a cost's tail >= its mean" is exact
here, not a statistical statement: a tail on the wrong side fails it whenever the runs differ.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest

import cprsim
from cprsim import metrics
from cprsim.sim.replicate import Estimate, estimate, estimate_metric

BUILTINS = sorted(p.stem for p in (Path(cprsim.__file__).parent / "scenarios").glob("*.toml"))
N = 4  #: replications per scenario (<= 10: see the module's docstring)


def _check_tails(name: str, where: str, d: dict, runs: dict[str, np.ndarray] | None = None) -> None:
    """``d``: metric -> its summary (``Estimate.as_dict()``); ``runs``: metric -> the replications."""
    assert set(d) == set(metrics.NAMES), where
    for m, e in d.items():
        up = m in metrics.HIGHER_IS_BETTER
        tails = ("p10", "p1") if up else ("p90", "p99")
        other = ("p90", "p99") if up else ("p10", "p1")
        assert set(tails) <= set(e) and not set(other) & set(e), (where, m, sorted(e))
        worst10, worst1 = (e[t] for t in tails)
        if up:
            assert worst1 <= worst10 <= e["p50"], (where, m, e)
            assert worst10 <= e["mean"] + 1e-12, (where, m, e)
        else:
            assert worst1 >= worst10 >= e["p50"], (where, m, e)
            assert worst10 >= e["mean"] - 1e-12 * max(1.0, abs(e["mean"])), (where, m, e)
        if runs is not None:  # and it is exactly the percentile of the replications
            q = (10, 1) if up else (90, 99)
            assert worst10 == pytest.approx(np.percentile(runs[m], q[0]), rel=1e-12, abs=1e-12)
            assert worst1 == pytest.approx(np.percentile(runs[m], q[1]), rel=1e-12, abs=1e-12)


def test_ettr_is_the_only_metric_where_higher_is_better():
    assert {"ettr"} == metrics.HIGHER_IS_BETTER


@pytest.mark.parametrize("name", BUILTINS)
def test_every_builtin_reports_the_bad_tail_through_the_cli(name, cli, tmp_path):
    r = cli("simulate", name, "-n", N, "--json", "--out", tmp_path / "run")
    assert r.exit_code == 0, r.output
    printed = json.loads(r.output)
    written = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert printed["metrics"] == written["metrics"]
    with (tmp_path / "run" / "replications.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == N
    runs = {m: np.array([float(r[m]) for r in rows]) for m in metrics.NAMES}
    _check_tails(name, "summary.json", written["metrics"], runs)
    assert written["metrics"]["ettr"]["p10"] < written["metrics"]["ettr"]["mean"] or np.ptp(
        runs["ettr"]
    ) == pytest.approx(0.0, abs=1e-12)
    assert "p10/p1" in written["definitions"]


@pytest.mark.slow
@pytest.mark.parametrize("name", BUILTINS)
def test_every_builtin_reports_the_bad_tail_through_the_api(name):
    runs = cprsim.simulate(name, replications=N)
    est = runs.estimates()
    values = {m: np.array([getattr(r, m) for r in runs]) for m in metrics.NAMES}
    _check_tails(name, "Runs.estimates()", {m: e.as_dict() for m, e in est.items()}, values)
    _check_tails(name, "Runs.summary()", runs.summary()["metrics"], values)
    for m, e in est.items():
        up = m in metrics.HIGHER_IS_BETTER
        assert e.higher_is_better == up and e.tails == (("p10", "p1") if up else ("p90", "p99"))
        # worst10/worst1 are the bad tail; p10/p90/p1/p99 the plain percentiles either way
        assert e.p10 == pytest.approx(np.percentile(values[m], 10), rel=1e-12, abs=1e-12)
        assert e.p90 == pytest.approx(np.percentile(values[m], 90), rel=1e-12, abs=1e-12)
        assert (e.worst10, e.worst1) == ((e.p10, e.p1) if up else (e.p90, e.p99))
        assert e.percentile(10) == e.p10 and e.percentile(99) == e.p99
    # the sweep figures' view of the same runs (SweepResults.from_runs) agrees
    point = runs.to_results().points[0]
    assert point["ettr"].worst10 == est["ettr"].worst10 and point["ettr"].higher_is_better


def test_the_simulate_table_heads_the_tails_by_direction(cli):
    r = cli("simulate", "toy", "-n", 8)
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    head = next(ln for ln in lines if ln.lstrip().startswith("metric"))
    assert "worst 10%" in head and "worst 1%" in head and "P90" not in head
    row = next(ln for ln in lines if ln.startswith("ETTR"))
    cells = row.split(")", 1)[1].split()  # mean, [lo, hi], P50, worst 10%, worst 1%
    mean, p50, w10, w1 = (float(cells[i]) for i in (0, -3, -2, -1))
    assert w1 <= w10 <= p50 and w10 <= mean
    assert any("ETTR: P10, P1" in ln for ln in lines)  # the caption says which percentile


def test_an_estimate_turns_its_tail_and_keeps_both():
    x = [0.5, 0.9, 0.95, 0.97, 0.99]
    cost = estimate(x)
    up = estimate(x, higher_is_better=True)
    assert cost.oriented(True) == up and up.oriented(False) == cost
    assert (up.worst10, up.worst1) == (cost.p10, cost.p1)
    assert (cost.worst10, cost.worst1) == (up.p90, up.p99)
    assert up.as_dict().keys() == {"mean", "ci95", "sd", "n", "p50", "p10", "p1"}
    assert cost.as_dict().keys() == {"mean", "ci95", "sd", "n", "p50", "p90", "p99"}
    # ETTR's summary: its tail on its side, its CI within [.., 1]
    e = estimate_metric("ettr", [1.0, 0.2, 1.0])
    assert e.higher_is_better and e.hi == 1.0 and e.worst10 < e.mean
    # a positional Estimate as written before (mean, lo, hi, sd, n, p50, p90, p99) still reads
    old = Estimate(1.0, 0.5, 1.5, 0.1, 3, 1.0, 1.4, 1.49)
    assert (old.p90, old.p99, old.worst10) == (1.4, 1.49, 1.4) and math.isnan(old.p10)


def test_a_sweep_summary_names_ettr_s_tail_p10_p1(tmp_path, cli):
    sweep = tmp_path / "s.toml"
    sweep.write_text(
        'name = "t"\nscenario = "toy"\nreplications = 6\n'
        '[grid]\n"checkpoint.interval_h" = [0.5, 1.0]\n'
    )
    out = tmp_path / "o"
    r = cli("sweep", sweep, "--out", out)
    assert r.exit_code == 0, r.output
    with (out / "summary.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert {"ettr_p10", "ettr_p1", "overhead_p90"} <= set(rows[0])
    assert not {"ettr_p90", "ettr_p99", "overhead_p10"} & set(rows[0])
    for row in rows:
        assert float(row["ettr_p1"]) <= float(row["ettr_p10"]) <= float(row["ettr_mean"])
        assert (
            float(row["overhead_p99"]) >= float(row["overhead_p90"]) >= float(row["overhead_mean"])
        )
    frame_cols = cprsim.load_results(out).points[0]["ettr"].tails
    assert frame_cols == ("p10", "p1")


def test_a_plan_reports_ettr_s_bad_tail(cli):
    r = cli(
        "plan", "toy", "--max-accuracy-loss", "0.001", "-n", "10", "--search-replications", "10",
        "--strategies", "partial", "--precision", "off", "--confidence", "mean", "--json",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    for o in d["options"]:
        e, ov = o["ettr"], o["overhead"]
        assert {"p10", "p1"} <= set(e) and not {"p90", "p99"} & set(e), e
        assert e["p1"] <= e["p10"] <= e["mean"] + 1e-12, (o["label"], e)
        assert ov["p99"] >= ov["p90"] >= ov["mean"] - 1e-12, (o["label"], ov)
