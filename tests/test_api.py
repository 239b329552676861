"""The public API (``from cprsim import ...``): the quickstart flow, equivalence with the CLI,
typed figures, its reference page (docs/api.md) and a light ``import cprsim``."""

from __future__ import annotations

import importlib.util
import inspect
import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

import cprsim
from cprsim import (
    InputError,
    Plan,
    Runs,
    Scenario,
    Sweep,
    SweepResults,
    fit,
    load_results,
    load_scenario,
    plan,
    plot_breakdown,
    plot_overhead,
    plot_pls,
    plot_timeline,
    pls_bound,
    simulate,
)
from cprsim.io import dumps_json

from cli_helpers import run

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
TRACE = ROOT / "traces" / "examples" / "weibull-64.csv"
HEAVY = ("scipy", "simpy", "matplotlib", "numpy", "pydantic")

SWEEP_TOML = """\
name = "api"
scenario = "toy"
replications = 4
strategies = ["full", "partial", { name = "mfu", top_fraction = 0.05, full_every = 4 }]

[grid]
"checkpoint.interval_h" = [0.25, 0.5, 1.0]
"""


def python_sweep(**kw) -> Sweep:
    """The Python twin of SWEEP_TOML."""
    return Sweep(
        "toy",
        {"checkpoint.interval_h": [0.25, 0.5, 1.0]},
        strategies=["full", "partial", {"name": "mfu", "top_fraction": 0.05, "full_every": 4}],
        replications=4,
        name="api",
        **kw,
    )


def _gen_api():
    spec = importlib.util.spec_from_file_location("_cprsim_gen_api", DOCS / "gen_api.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


# -- the surface ----------------------------------------------------------------------------------
def test_import_cprsim_is_light() -> None:
    code = (
        "import sys, cprsim; names = cprsim.__all__; heavy = [m for m in %r if m in sys.modules]; "
        "print(','.join(heavy))" % (HEAVY,)
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "", f"`import cprsim` imported {out}"
    err = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import cprsim"],
        capture_output=True,
        text=True,
        check=True,
    ).stderr
    imported = {line.rsplit("|", 1)[-1].strip() for line in err.splitlines() if "|" in line}
    assert not {"scipy", "simpy", "matplotlib"} & imported


def test_the_public_names_are_cprsim_api_all_and_each_has_a_docstring() -> None:
    import cprsim.api

    public = [n for n in cprsim.__all__ if n != "__version__"]
    assert public == cprsim.api.__all__
    assert len(set(public)) == len(public)
    for name in public:
        obj = getattr(cprsim, name)
        doc = inspect.getdoc(obj) or ""
        assert doc.strip(), f"cprsim.{name} has no docstring"
        assert not doc.startswith(f"{name}("), (
            f"cprsim.{name}'s docstring is only its dataclass signature"
        )
        if (
            inspect.isfunction(inspect.unwrap(obj))
            and inspect.unwrap(obj).__module__ == "cprsim.api"
        ):
            for p in inspect.signature(obj).parameters.values():
                if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or p.name in ("self", "cls"):
                    continue
                assert f"``{p.name}``" in doc or p.name in doc, (
                    f"cprsim.{name}: parameter {p.name} undocumented"
                )
    assert set(public) <= set(dir(cprsim))


def test_api_reference_is_up_to_date() -> None:
    committed = (DOCS / "api.md").read_text(encoding="utf-8")
    gen = _gen_api()
    generated = gen.render()
    assert committed == generated, (
        "docs/api.md is stale: run `python docs/gen_api.py` and commit the result"
    )
    assert gen.render() == generated
    for name in cprsim.__all__[1:]:
        assert f"### `{name}`" in committed, f"{name} is missing from docs/api.md"


def test_py_typed_marker_ships() -> None:
    assert (ROOT / "cprsim" / "py.typed").is_file()


def test_plan_is_a_plain_function_and_the_planner_its_own_package() -> None:
    import cprsim.planner.search  # importing the planner's package leaves cprsim.plan the function
    from cprsim import api
    from cprsim import plan as p

    assert p is api.plan and cprsim.plan is api.plan
    assert inspect.isfunction(p) and "max_accuracy_loss" in inspect.signature(p).parameters
    assert "accuracy bound" in (p.__doc__ or "")
    assert type(cprsim) is types.ModuleType  # no module-class swap
    assert "cprsim.plan" not in sys.modules


# -- the quickstart flow --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def runs() -> Runs:
    return simulate(load_scenario("toy", strategy="partial", interval_h=1.0), 3)


def test_load_scenario_overrides() -> None:
    s = load_scenario(
        "toy", set={"cluster.trainers": 4}, storage__write_gbps=2.0, interval_h=2, seed=9
    )
    assert isinstance(s, Scenario)
    assert (s.cluster.trainers, s.storage.write_gbps, s.checkpoint.interval_h, s.seed) == (
        4,
        2.0,
        2.0,
        9,
    )
    assert load_scenario("toy", set=["cluster.trainers=4"]).cluster.trainers == 4
    assert load_scenario(s, replications=3).replications == 3 and s.replications == 50
    mfu = load_scenario("toy", strategy={"name": "mfu", "top_fraction": 0.05})
    assert mfu.strategy.name == "mfu" and mfu.strategy.params["top_fraction"] == 0.05
    with pytest.raises(InputError, match=r"cluster\.bogus"):
        load_scenario("toy", set={"cluster.bogus": 1})
    with pytest.raises(InputError, match="no such file or built-in scenario"):
        load_scenario("no-such-scenario")


def test_simulate_summary_is_cprsim_simulate_json(runs: Runs) -> None:
    assert (
        len(runs) == 3 and [r.replication for r in runs] == [0, 1, 2] and runs[0] is runs.results[0]
    )
    r = run("simulate", "toy", "--strategy", "partial", "--interval", "1", "-n", "3", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(dumps_json(runs.summary())) == json.loads(r.output)
    seeded = simulate("toy", 2, seed=5)
    r = run("simulate", "toy", "-n", "2", "--seed", "5", "--json")
    assert json.loads(dumps_json(seeded.summary())) == json.loads(r.output)
    assert runs.estimates()["overhead"].mean == runs.summary()["metrics"]["overhead"]["mean"]


def test_simulate_adaptive_and_first(runs: Runs) -> None:
    later = simulate(runs.scenario, 2, first=1)
    assert [r.replication for r in later] == [1, 2] and later.results == runs.results[1:]
    ad = simulate(runs.scenario, 30, precision=0.5, min_replications=5)
    assert ad.summary()["adaptive"]["replications"] == len(ad) and len(ad) <= 30


def test_runs_to_frame(runs: Runs) -> None:
    pytest.importorskip("pandas")
    df = runs.to_frame()
    assert list(df.columns) == cprsim.ReplicationResult.columns() and len(df) == 3
    assert df["overhead"].tolist() == [r.overhead for r in runs]


def test_to_frame_without_pandas_names_pip_install(
    runs: Runs, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)
    for call in (runs.to_frame, runs.to_results().to_frame):
        with pytest.raises(ImportError, match="pip install pandas") as e:
            call()
        assert "\n" not in str(e.value)


def test_runs_save_is_simulate_out(runs: Runs, tmp_path: Path) -> None:
    folder = runs.save(tmp_path / "sim")
    r = run(
        "simulate",
        "toy",
        "--strategy",
        "partial",
        "--interval",
        "1",
        "-n",
        "3",
        "--out",
        tmp_path / "cli",
    )
    assert r.exit_code == 0, r.output
    for name in ("config.toml", "replications.csv", "events.csv", "summary.json"):
        assert (folder / name).read_bytes() == (tmp_path / "cli" / name).read_bytes(), name
    a, b = load_results(folder).points[0], runs.to_results().points[0]
    assert a.metrics == b.metrics and (a.strategy, a.interval_h, a.n) == (
        b.strategy,
        b.interval_h,
        b.n,
    )


def test_plan_through_the_api() -> None:
    s = load_scenario("toy")
    p = plan(s, 0.001, replications=30, search_replications=30, strategies=("partial",))
    from cprsim.planner.records import Plan as PlanRecord

    assert isinstance(p, Plan) and isinstance(p, PlanRecord)
    rec = p.recommended_option
    assert rec.label == p.recommended
    chosen = p.scenario_for()
    assert chosen.strategy.name == rec.strategy
    assert chosen.checkpoint.interval_h == pytest.approx(min(rec.interval_s, s.duration_s) / 3600)
    assert p.pls_bound == pytest.approx(pls_bound(0.001, "partial", loss_scale=p.scale["factor"]))
    assert json.loads(dumps_json(p.as_dict()))["recommended"] == p.recommended
    with pytest.raises(InputError, match="unknown 'bogus'"):
        plan(s, 0.001, strategies=("bogus",))
    pytest.importorskip("pandas")
    df = p.to_frame()
    assert df["label"].tolist() == [o.label for o in p.options]
    assert df["overhead_mean"].tolist() == [o.overhead.mean for o in p.options]
    assert df["recommended"].sum() == 1


# -- sweeps ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def sweeps(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("api-sweep")
    (d / "hand.toml").write_text(SWEEP_TOML)
    assert run("sweep", d / "hand.toml", "--out", d / "cli").exit_code == 0
    sw = python_sweep()
    (d / "twin.toml").write_text(sw.to_toml())
    assert run("sweep", d / "twin.toml", "--out", d / "cli-twin").exit_code == 0
    res = sw.run(d / "py", jobs=1)
    assert isinstance(res, SweepResults)
    return d


def test_a_python_sweep_writes_the_bytes_of_the_cli_sweep(sweeps: Path) -> None:
    for name in ("results.csv", "summary.csv", "config.toml"):
        data = (sweeps / "py" / name).read_bytes()
        assert data == (sweeps / "cli" / name).read_bytes(), name
        assert data == (sweeps / "cli-twin" / name).read_bytes(), name
    assert (sweeps / "py" / "sweep.toml").read_bytes() == (
        sweeps / "cli-twin" / "sweep.toml"
    ).read_bytes()
    a, b = (json.loads((sweeps / f / "manifest.json").read_text()) for f in ("py", "cli"))
    # where the sweep file came from, and its text (sweep.toml's checksum): all else is the same
    assert {k for k in a if a[k] != b.get(k)} == {"source", "sweep_sha256"}
    assert python_sweep().fingerprint == a["fingerprint"]


def test_sweep_results_values_and_frame(sweeps: Path) -> None:
    res, cli = load_results(sweeps / "py"), load_results(sweeps / "cli")
    assert res.points == cli.points and res.keys == ("checkpoint.interval_h",)
    in_memory = python_sweep().run()  # a temporary folder, read back
    assert in_memory.points == cli.points
    pytest.importorskip("pandas")
    df = res.to_frame()
    assert len(df) == len(res.points) == 9
    assert df["overhead_mean"].tolist() == [p["overhead"].mean for p in res.points]
    import pandas as pd

    summary = pd.read_csv(
        sweeps / "py" / "summary.csv"
    )  # the same columns, and W (useful_s) besides
    assert list(summary.columns) == [c for c in df.columns if not c.startswith("useful_s_")]
    pd.testing.assert_frame_equal(df[list(summary.columns)], summary, check_exact=False, rtol=1e-12)


def test_a_sweep_on_a_scenario_object_is_the_same_sweep() -> None:
    s = load_scenario("toy")
    assert (
        python_sweep().fingerprint
        == Sweep(
            s,
            {"checkpoint.interval_h": [0.25, 0.5, 1.0]},
            strategies=["full", "partial", {"name": "mfu", "top_fraction": 0.05, "full_every": 4}],
            replications=4,
            name="api",
        ).fingerprint
    )


def test_a_bad_sweep_names_the_point_and_key() -> None:
    with pytest.raises(InputError, match=r"point 0 .*checkpoint.interval_h"):
        Sweep("toy", {"checkpoint.interval_h": [-1.0]})
    with pytest.raises(InputError, match=r"grid\.cluster\.trainers: expected a non-empty list"):
        Sweep("toy", {"cluster.trainers": []})


# -- failure logs ---------------------------------------------------------------------------------
def test_fit_is_cprsim_fit(tmp_path: Path) -> None:
    rep = fit(TRACE, bootstrap=0)
    r = run("fit", TRACE, "--bootstrap", "0", "--report", tmp_path / "fit.json")
    assert r.exit_code == 0, r.output
    doc = json.loads((tmp_path / "fit.json").read_text())
    assert json.loads(dumps_json(rep.as_dict()))["fits"] == doc["fits"]
    s = load_scenario("toy", set={"failures.embedding": rep})
    assert s.failures.embedding.family == rep.best.family
    assert s.failures.embedding.scale_h == pytest.approx(rep.best.scale_)
    times = fit(
        [10.0, 20.0, 35.0, 50.0, 80.0],
        [True, True, False, True, True],
        families=("exponential",),
        bootstrap=0,
    )
    assert times.best.family == "exponential" and times.n == 5 and times.censored == 1


# -- figures --------------------------------------------------------------------------------------
def _inside(fig) -> None:
    """Every title and axis label lies within the figure (none clipped)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    r = canvas.get_renderer()
    box = fig.bbox
    texts = (
        [ax.title for ax in fig.axes]
        + [ax.xaxis.label for ax in fig.axes]
        + [ax.yaxis.label for ax in fig.axes]
    )
    if fig._suptitle is not None:
        texts.append(fig._suptitle)
    for t in texts:
        if not t.get_text():
            continue
        bb = t.get_window_extent(r)
        assert (
            bb.x0 >= box.x0 - 1
            and bb.x1 <= box.x1 + 1
            and bb.y0 >= box.y0 - 1
            and bb.y1 <= box.y1 + 1
        ), (t.get_text(), bb, box)


def test_plots_take_typed_results_axes_and_artist_kwargs(sweeps: Path, runs: Runs) -> None:
    from matplotlib.figure import Figure

    res = load_results(sweeps / "py")
    fig = Figure(layout="constrained")
    ax = fig.add_subplot()
    assert plot_overhead(res, ax=ax, linewidth=3.5, plan=None) is fig
    assert all(
        line.get_linewidth() == 3.5
        for line in ax.lines
        if line.get_label().startswith(("full", "partial"))
    )
    assert plot_pls(res, bound=0.05, ms=9).axes[0].lines[0].get_markersize() == 9
    fig = plot_breakdown(res.where({"checkpoint.interval_h": 0.5}), alpha=0.5)
    assert {p.get_alpha() for p in fig.axes[0].patches} == {0.5}
    for f in (plot_breakdown(runs), plot_overhead(runs), plot_timeline(runs, replication=1)):
        assert f.axes and f.axes[0].get_title()
    p = plan(
        load_scenario("toy"),
        0.001,
        replications=30,
        search_replications=30,
        strategies=("partial",),
    )
    fig = plot_overhead(res, plan=p)  # a typed Plan, as the dict of plan.json before
    assert any(t.get_text().startswith("plan: ") for t in fig.axes[0].get_legend().get_texts())


@pytest.mark.slow
def test_titles_are_never_clipped(sweeps: Path, runs: Runs) -> None:
    from cprsim import load_calibration, plot_calibration, plot_fit

    res = load_results(sweeps / "py")
    long = SweepResults(
        res.source, res.keys, res.points, "a-sweep-with-a-rather-long-name-for-its-figures"
    )
    figs = [
        plot_overhead(long, band="p90"),
        plot_pls(long),
        plot_breakdown(long.where({"checkpoint.interval_h": 1.0})),
        plot_timeline(runs),
        plot_calibration(load_calibration()),
        plot_fit(fit(TRACE, bootstrap=0), title="weibull-64.csv " * 12),
    ]
    for fig in figs:
        _inside(fig)


@pytest.mark.slow
def test_figures_never_touch_pyplot() -> None:
    code = (
        "import sys\n"
        "from cprsim import simulate, plot_overhead, plot_breakdown, plot_timeline, save_figure\n"
        "r = simulate('toy', 2)\n"
        "for f in (plot_overhead(r), plot_breakdown(r), plot_timeline(r)):\n"
        "    save_figure(f, sys.argv[1])\n"
        "assert 'matplotlib.pyplot' not in sys.modules, 'pyplot was imported'\n"
    )
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "t.png"
        r = subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert out.read_bytes().startswith(b"\x89PNG")
