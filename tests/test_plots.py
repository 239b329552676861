"""`cprsim plot`: every kind writes a valid image whose axes carry the expected labels."""

from __future__ import annotations

import csv
import xml.etree.ElementTree as ET
from pathlib import Path

import matplotlib.image as mpimg
import numpy as np
import pytest

from cprsim.plots.sweep import band_edges, plot_overhead, plot_pls
from cprsim.sweep import load_results

ROOT = Path(__file__).resolve().parents[1]

SWEEP = """
name = "p"
scenario = "toy"
replications = 5
strategies = ["full", "partial", { name = "mfu", top_fraction = 0.05, full_every = 4 }]
[grid]
"checkpoint.interval_h" = [0.25, 0.5, 1.0]
"""


@pytest.fixture(scope="module")
def files(tmp_path_factory, cli):
    d = tmp_path_factory.mktemp("plots")
    (d / "s.toml").write_text(SWEEP)
    assert cli("sweep", d / "s.toml", "--out", d / "sweep").exit_code == 0
    assert (
        cli("simulate", "toy", "-n", "3", "--strategy", "full", "--out", d / "sim").exit_code == 0
    )
    assert (
        cli(
            "plan", "toy", "--max-accuracy-loss", "0.001", "-n", "30", "--out", d / "plan.json"
        ).exit_code
        == 0
    )
    r = cli(
        "fit",
        ROOT / "traces" / "examples" / "weibull-64.csv",
        "--bootstrap",
        "0",
        "--report",
        d / "fit.json",
    )
    assert r.exit_code == 0, r.output
    return d


def svg_text(path: Path) -> str:
    root = ET.parse(path).getroot()  # a well-formed SVG document
    assert root.tag.endswith("svg")
    return " ".join(t for t in root.itertext())


CASES = [
    (
        "overhead",
        "sweep",
        ["--plan", "{d}/plan.json"],
        [
            "checkpoint interval",
            "total overhead (% of failure-free time W)",
            "full",
            "partial",
            "mfu",
            "plan: ",
            "band: 95% CI of the mean",
        ],
    ),
    (
        "overhead",
        "sweep",
        ["--band", "p90"],
        ["band: P50–P90 of single runs", "(mean, P50–P90 of single runs)"],
    ),
    ("overhead", "sweep", ["--metric", "ckpt_overhead"], ["checkpoint-related overhead (% of W)"]),
    (
        "breakdown",
        "sweep",
        [],
        [
            "overhead (% of failure-free time W)",
            "checkpoint saves",
            "re-executed work",
            "rescheduling",
            "strategy and setting",
        ],
    ),
    ("breakdown", "sim", [], ["checkpoint saves", "τ=0.5 h"]),
    (
        "pls",
        "sweep",
        ["--pls-bound", "0.01"],
        ["PLS (portion of lost samples)", "PLS bound 0.01", "partial", "mfu"],
    ),
    (
        "pls",
        "sweep",
        ["--band", "p90"],
        ["PLS (portion of lost samples)", "band: P50–P90 of single runs"],
    ),
    (
        "fit",
        "fit.json",
        [],
        [
            "survival S(t)",
            "time between failures (h)",
            "Kaplan-Meier",
            "weibull",
            "Weibull probability plot",
        ],
    ),
    (
        "calibration",
        str(ROOT / "cprsim" / "data" / "calibration.toml"),
        [],
        ["PLS (portion of lost samples)", "AUC loss", "partial"],
    ),
    ("timeline", "sim", [], ["wall-clock time (hours)", "job", "compute", "save"]),
]


@pytest.mark.parametrize(
    "kind, src, extra, labels", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)]
)
def test_each_kind_writes_png_and_svg_with_its_labels(files, kind, src, extra, labels, cli):
    source = src if Path(src).is_absolute() else files / src
    extra = [x.format(d=files) for x in extra]
    png = files / f"{kind}-{abs(hash(tuple(extra)))}.png"
    r = cli("plot", kind, source, "--out", png, *extra)
    assert r.exit_code == 0, r.output
    img = mpimg.imread(png)
    assert img.ndim == 3 and img.shape[0] > 200 and img.shape[1] > 300
    assert img[..., :3].std() > 0.01  # not a blank canvas
    svg = png.with_suffix(".svg")
    assert cli("plot", kind, source, "--out", svg, *extra).exit_code == 0
    text = svg_text(svg)
    for label in labels:
        assert label in text, (label, text[:400])


@pytest.mark.slow
def test_same_results_same_image_bytes(files, cli):
    a, b = files / "a.png", files / "b.png"
    for out in (a, b):
        assert cli("plot", "overhead", files / "sweep", "--out", out).exit_code == 0
    assert a.read_bytes() == b.read_bytes()
    assert cli("plot", "overhead", files / "sweep", "--out", files / "c.pdf").exit_code == 0
    assert (files / "c.pdf").read_bytes().startswith(b"%PDF")


def test_default_output_is_beside_the_results(files, cli):
    r = cli("plot", "pls", files / "sweep")
    assert r.exit_code == 0 and (files / "sweep" / "pls.png").is_file()


def test_where_selects_points(files, cli):
    r = cli(
        "plot",
        "breakdown",
        files / "sweep",
        "--where",
        "checkpoint.interval_h=0.5",
        "-o",
        files / "w.svg",
    )
    assert r.exit_code == 0, r.output
    text = svg_text(files / "w.svg")
    assert "τ=0.5 h" in text and "τ=0.25 h" not in text


def point_rows(folder: Path) -> dict[int, list[dict[str, str]]]:
    with (folder / "results.csv").open(newline="") as f:
        recs = list(csv.DictReader(f))
    return {
        i: [r for r in recs if int(r["point"]) == i]
        for i in sorted({int(r["point"]) for r in recs})
    }


@pytest.mark.parametrize("metric", ["overhead", "pls"])
def test_p90_band_is_p50_to_p90_of_the_runs_not_the_ci(files, metric):
    res = load_results(files / "sweep")
    by_point = point_rows(files / "sweep")
    pts = list(res.points)
    lo, hi = band_edges(pts, metric, "p90")
    for p, a, b in zip(pts, lo, hi):
        x = np.array([float(r[metric]) for r in by_point[p.point]])
        assert len(x) == 5
        assert a == pytest.approx(np.percentile(x, 50), rel=1e-12, abs=0)
        assert b == pytest.approx(np.percentile(x, 90), rel=1e-12, abs=0)
    ci_lo, ci_hi = band_edges(pts, metric, "ci")
    assert not (np.allclose(lo, ci_lo) and np.allclose(hi, ci_hi))
    assert np.all(lo <= hi)


def band_polygons_y(fig) -> set[float]:
    ax = fig.axes[0]
    return {
        round(float(y), 9)
        for c in ax.collections
        for path in c.get_paths()
        for y in path.vertices[:, 1]
    }


def test_the_figure_draws_the_band_asked_for(files):
    import matplotlib.pyplot as plt

    res = load_results(files / "sweep")
    partial = [p for p in res.points if p.strategy == "partial"]
    for band in ("ci", "p90"):
        fig = plot_overhead(res, band=band)
        ys = band_polygons_y(fig)
        lo, hi = band_edges(partial, "overhead", band)
        assert {round(100 * float(v), 9) for v in (*lo, *hi)} <= ys, band
        plt.close(fig)
        fig = plot_pls(res, band=band)
        lo, hi = band_edges(partial, "pls", band)
        assert {round(float(v), 9) for v in (*lo, *hi)} <= band_polygons_y(fig), band
        plt.close(fig)
    fig = plot_overhead(res, band="p90")
    ci_lo, ci_hi = band_edges(partial, "overhead", "ci")
    assert not {round(100 * float(v), 9) for v in (*ci_lo, *ci_hi)} <= band_polygons_y(fig)
    plt.close(fig)


@pytest.mark.parametrize(
    "args, expected",
    [
        (["overhead", "{d}/none"], "no such file or folder"),
        (["overhead", "{d}/sweep", "--out", "{d}/x.gif"], "unknown image format"),
        (["overhead", "{d}/sweep", "--where", "cluster.trainers=3"], "not a grid key"),
        (["overhead", "{d}/sweep", "--where", "checkpoint.interval_h=9"], "no point has"),
        (["fit", "{d}/plan.json"], "not a fit report"),
        (["calibration", "{d}/sweep"], "no such calibration file"),
        (["timeline", "{d}/fit.json"], "expected a `cprsim simulate --out` folder"),
        (["pls", "{d}/sim/events.csv"], "not a cprsim results table"),
    ],
)
def test_bad_input_is_a_one_line_error(files, args, expected, one_line_error, cli):
    assert expected in one_line_error(cli("plot", *[a.format(d=files) for a in args]))


@pytest.mark.parametrize(
    "args, expected",
    [
        (["breakdown", "{d}/sweep", "--band", "p90"], "'p90' does not apply to breakdown"),
        (
            ["overhead", "{d}/sweep", "--band", "p95"],
            "Invalid value for '--band': 'p95' is not one of",
        ),
    ],
)
def test_a_bad_option_is_a_usage_error(files, args, expected, cli):
    r = cli("plot", *[a.format(d=files) for a in args])
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output
    errors = [ln for ln in r.output.splitlines() if ln.startswith("Error:")]
    assert len(errors) == 1 and expected in errors[0], r.output
