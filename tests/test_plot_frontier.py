"""`cprsim plot frontier`: the best mean overhead over the swept intervals against a swept key.

The frontier's numbers are checked against the sweep's own summary.csv (written by the sweep
runner, read here with the csv module): at each (strategy, other key, swept value) the minimum over
the intervals of the stored mean, its interval and its 95% CI.
"""

from __future__ import annotations

import csv
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

import matplotlib.image as mpimg
import pytest

from cprsim import Sweep
from cprsim.plots.frontier import frontier, plot_frontier
from cprsim.sweep import load_results

X = "storage.write_gbps"
OTHER = "failures.embedding.mtbf_h"
INTERVALS = [0.1, 0.5, 2.0]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("frontier") / "sweep"
    Sweep(
        "toy",
        {X: [0.25, 1.0, 4.0], OTHER: [10.0, 40.0], "checkpoint.interval_h": INTERVALS},
        strategies=["full", "partial"],
        replications=3,
        name="fr",
    ).run(out)
    return out


def stored_minima(folder: Path, metric: str) -> dict[tuple[str, float, float], dict[str, float]]:
    """(strategy, mtbf, write_gbps) -> the row of summary.csv with the lowest mean ``metric``."""
    with (folder / "summary.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    by: dict[tuple[str, float, float], list[dict[str, str]]] = defaultdict(list)
    for r in rows:
        by[(r["strategy"], float(r[OTHER]), float(r[X]))].append(r)
    out = {}
    for k, g in by.items():
        assert sorted(float(r["interval_h"]) for r in g) == INTERVALS
        b = min(g, key=lambda r: float(r[f"{metric}_mean"]))
        out[k] = {
            "mean": float(b[f"{metric}_mean"]),
            "lo": float(b[f"{metric}_lo"]),
            "hi": float(b[f"{metric}_hi"]),
            "interval_h": float(b["interval_h"]),
            "p50": float(b[f"{metric}_p50"]),
            "p90": float(b[f"{metric}_p90"]),
        }
    return out


def bars(ax, gid: str) -> list[tuple[float, float, float]]:
    """(x, low end, high end) of each error bar of the collection ``gid``."""
    (c,) = [c for c in ax.collections if c.get_gid() == gid]
    return [(s[0][0], min(s[:, 1]), max(s[:, 1])) for s in c.get_segments()]


@pytest.mark.parametrize("metric", ["overhead", "ckpt_overhead"])
def test_frontier_is_the_minimum_over_intervals_of_the_stored_means(sweep, metric):
    want = stored_minima(sweep, metric)
    lines = frontier(load_results(sweep), X, metric)
    got = {}
    for ln in lines:
        mtbf = float(ln.extra.removeprefix("mtbf_h="))
        assert list(ln.values) == [0.25, 1.0, 4.0]  # ascending along the axis
        for v, p, edge in zip(ln.values, ln.best, ln.edge):
            got[(ln.strategy, mtbf, float(v))] = {
                "mean": p[metric].mean,
                "lo": p[metric].lo,
                "hi": p[metric].hi,
                "interval_h": p.interval_h,
            }
            assert edge == (p.interval_h in (INTERVALS[0], INTERVALS[-1]))
    assert got.keys() == want.keys()
    for k in want:
        for field in ("mean", "lo", "hi", "interval_h"):
            assert got[k][field] == pytest.approx(want[k][field], rel=1e-12, abs=0), (k, field)
    # the minimum is not always at the same interval: the test would see a wrong argmin
    assert len({w["interval_h"] for w in want.values()}) > 1


def test_the_figure_draws_the_frontier_and_its_intervals(sweep):
    res = load_results(sweep).where({OTHER: 10.0})
    want = stored_minima(sweep, "overhead")
    fig = plot_frontier(res, X, where={OTHER: 10.0})
    top, bottom = fig.axes[:2]
    drawn = {ln.get_label(): ln for ln in top.lines if not ln.get_label().startswith("_")}
    assert set(drawn) == {"full", "partial"}  # the slice fixes the other key: one line each
    taus = {ln.get_gid(): ln for ln in bottom.lines if ln.get_gid()}
    for st in ("full", "partial"):
        w = [want[(st, 10.0, v)] for v in (0.25, 1.0, 4.0)]
        assert list(drawn[st].get_xdata()) == [0.25, 1.0, 4.0]
        assert list(drawn[st].get_ydata()) == pytest.approx([100 * x["mean"] for x in w], rel=1e-12)
        assert list(taus[f"tau*: {st}"].get_ydata()) == [x["interval_h"] for x in w]
        got = bars(top, f"bars: {st}")  # the 95% CI of the best point's mean
        assert [b[0] for b in got] == [0.25, 1.0, 4.0]
        assert [b[1] for b in got] == pytest.approx([100 * x["lo"] for x in w], rel=1e-9)
        assert [b[2] for b in got] == pytest.approx([100 * x["hi"] for x in w], rel=1e-9)
    assert "where failures.embedding.mtbf_h=10" in top.get_title()
    assert "storage.write_gbps" in bottom.get_xlabel()


def test_the_p90_bars_are_p50_to_p90_of_the_best_points_runs(sweep):
    want = stored_minima(sweep, "overhead")
    fig = plot_frontier(load_results(sweep).where({OTHER: 40.0}), band="p90")
    for st in ("full", "partial"):
        w = [want[(st, 40.0, v)] for v in (0.25, 1.0, 4.0)]
        got = bars(fig.axes[0], f"bars: {st}")
        assert [b[1] for b in got] == pytest.approx([100 * x["p50"] for x in w], rel=1e-9)
        assert [b[2] for b in got] == pytest.approx([100 * x["p90"] for x in w], rel=1e-9)


def svg_text(path: Path) -> str:
    root = ET.parse(path).getroot()
    return " ".join(root.itertext())


@pytest.mark.slow
def test_cli_writes_the_figure(sweep, cli, tmp_path):
    png = tmp_path / "f.png"
    r = cli("plot", "frontier", sweep, "--x", X, "--out", png)
    assert r.exit_code == 0, r.output
    assert r.output.strip() == f"wrote {png}"
    img = mpimg.imread(png)
    assert img.ndim == 3 and img.shape[0] > 300 and img.shape[1] > 300
    assert img[..., :3].std() > 0.01
    again = tmp_path / "g.png"
    assert cli("plot", "frontier", sweep, "--x", X, "--out", again).exit_code == 0
    assert png.read_bytes() == again.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.png", "g.png"]  # no temporaries

    svg = tmp_path / "f.svg"
    r = cli("plot", "frontier", sweep, "--x", X, "--metric", "ckpt_overhead", "-o", svg)
    assert r.exit_code == 0, r.output
    text = svg_text(svg)
    for label in (
        "best checkpoint-related overhead",
        "best interval τ* (h)",
        "storage.write_gbps: aggregate checkpoint write bandwidth (GB/s)",
        "full (mtbf_h=10)",
        "partial (mtbf_h=40)",
        "bars: 95% CI of the mean",
    ):
        assert label in text, label
    assert "where" not in text


@pytest.mark.slow
def test_cli_default_key_and_output_and_the_slice_in_the_title(sweep, cli):
    # the slice fixes the other key: the one left varying besides the interval is the x axis
    r = cli("plot", "frontier", sweep, "--where", f"{OTHER}=40", "--band", "p90")
    assert r.exit_code == 0, r.output
    assert (sweep / "frontier.png").is_file()
    r = cli("plot", "frontier", sweep, "--where", f"{OTHER}=40", "-o", sweep / "fw.svg")
    assert r.exit_code == 0, r.output
    text = svg_text(sweep / "fw.svg")
    assert "where failures.embedding.mtbf_h=40" in text and "mtbf_h=10" not in text


@pytest.mark.slow
def test_overhead_against_a_swept_key(sweep, cli):
    out = sweep / "ox.svg"
    r = cli("plot", "overhead", sweep, "--x", X, "--where", f"{OTHER}=10", "-o", out)
    assert r.exit_code == 0, r.output
    text = svg_text(out)
    assert "total overhead vs storage.write_gbps" in text
    assert "where failures.embedding.mtbf_h=10" in text
    assert "full (τ=0.5 h)" in text and "partial (τ=2 h)" in text
    out = sweep / "where.svg"
    r = cli("plot", "pls", sweep, "--where", "checkpoint.interval_h=0.5", "-o", out)
    assert r.exit_code == 0, r.output
    assert "where checkpoint.interval_h=0.5" in svg_text(out)


@pytest.mark.parametrize(
    "args, expected",
    [
        (
            ["--x", "cluster.nonsense"],
            "--x cluster.nonsense: not a grid key of {d}/results.csv (expected one of: "
            "storage.write_gbps, failures.embedding.mtbf_h, checkpoint.interval_h)",
        ),
        (["--x", "cluster.trainers"], "--x cluster.trainers: not a grid key of"),
        (["--x", "write_gbps"], "did you mean storage.write_gbps?"),
        (
            ["--x", "checkpoint.interval_h"],
            "--x checkpoint.interval_h: the frontier is the best over the checkpoint interval; "
            "expected another grid key",
        ),
        (
            [],
            "--x: expected one of the keys {d}/results.csv varies: storage.write_gbps, "
            "failures.embedding.mtbf_h",
        ),
        (["--x", X, "--where", f"{X}=3"], "no point has storage.write_gbps=3"),
        (
            ["--x", X, "--where", f"{X}=1.0"],
            "--x storage.write_gbps: fixed to one value by --where storage.write_gbps=1",
        ),
        (["--x", X, "--where", "cluster.trainers=2"], "--where cluster.trainers: not a grid key"),
    ],
)
def test_bad_input_is_a_one_line_error(sweep, args, expected, cli, one_line_error):
    line = one_line_error(cli("plot", "frontier", sweep, *args))
    assert expected.format(d=sweep) in line


def test_a_simulation_folder_has_no_key_to_sweep(cli, one_line_error, tmp_path):
    assert cli("simulate", "toy", "-n", "2", "--out", tmp_path / "run").exit_code == 0
    line = one_line_error(cli("plot", "frontier", tmp_path / "run", "--x", X))
    assert "--x storage.write_gbps: not a grid key" in line and "(expected one of: none)" in line


@pytest.mark.parametrize(
    "args, expected",
    [
        (["breakdown", "--x", X], "'storage.write_gbps' does not apply to breakdown"),
        (["frontier", "--metric", "auc"], "'auc' does not apply to frontier"),
    ],
)
def test_an_option_that_does_not_apply_is_a_usage_error(sweep, args, expected, cli):
    r = cli("plot", args[0], sweep, *args[1:])
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output
    errors = [ln for ln in r.output.splitlines() if ln.startswith("Error:")]
    assert len(errors) == 1 and expected in errors[0], r.output
