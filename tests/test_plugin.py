"""Strategy plugins (entry-point group ``cprsim.strategies``): found by `cprsim simulate`, `cprsim plan`
and a sweep's workers; a broken one is a one-line error; `cprsim --help` never imports one.

The example plugin (examples/plugin_strategy) is made discoverable without pip: a folder with a
copy of its module and a ``*.dist-info/`` (``METADATA``, ``entry_points.txt``), put on
``PYTHONPATH`` (subprocesses) or ``sys.path`` (in-process: the registry's state is restored after).
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cprsim.sim import strategies

from cli_helpers import one_line_error, run

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "plugin_strategy"
MODULE = (EXAMPLE / "cprsim_compressed.py").read_text()
ERROR_START = 'Error: plugin cprsim-bad 0.2, entry point "'


def make_dist(
    root: Path,
    entry_points: dict[str, str],
    modules: dict[str, str] | None = None,
    name: str = "cprsim-compressed",
    version: str = "0.1.0",
) -> Path:
    """An installed distribution as importlib.metadata sees one on sys.path: its dist-info folder
    (METADATA, entry_points.txt) and its modules, in ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    info = root / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(
        "[cprsim.strategies]\n" + "".join(f"{k} = {v}\n" for k, v in entry_points.items())
    )
    for mod, text in (modules or {}).items():
        (root / f"{mod}.py").write_text(text)
    return root


def example_site(root: Path) -> Path:
    return make_dist(root, {"compressed": "cprsim_compressed"}, {"cprsim_compressed": MODULE})


def bad_site(root: Path, entry_points: dict[str, str], modules: dict[str, str]) -> Path:
    """The example plugin, plus a second distribution cprsim-bad 0.2 with ``entry_points``."""
    example_site(root)
    return make_dist(root, entry_points, modules, name="cprsim-bad", version="0.2")


BROKEN = {  # case -> (entry points, modules, what its error says)
    "import-error": (
        {"bad": "cprsim_bad"},
        {"cprsim_bad": "import cprsim_no_such_module\n"},
        "failed to load: ModuleNotFoundError: No module named 'cprsim_no_such_module'",
    ),
    "raises": (
        {"bad": "cprsim_bad"},
        {"cprsim_bad": "raise RuntimeError('boom\\nsecond line')\n"},
        "failed to load: RuntimeError: boom second line",
    ),
    "takes-a-built-in-name": (
        {"bad": "cprsim_bad"},
        {
            "cprsim_bad": "from cprsim.sim.strategies import Strategy, register\n\n\n"
            "@register\nclass Mine(Strategy):\n    name = 'full'\n"
        },
        "strategy 'full' is registered already (by cprsim.sim.strategies.Full)",
    ),
    "takes-another-plugin's-name": (
        {
            "zbad": "cprsim_bad:Other"
        },  # loaded after the example's "compressed" (entry points go by name)
        {
            "cprsim_bad": "from cprsim.sim.strategies import Strategy\n\n\n"
            "class Other(Strategy):\n    name = 'compressed'\n"
        },
        "strategy 'compressed' is registered already (by cprsim_compressed.Compressed)",
    ),
    "registers-nothing": (
        {"bad": "cprsim_bad"},
        {"cprsim_bad": "X = 1\n"},
        "its module cprsim_bad registers no strategy",
    ),
    "names-a-function": (
        {"bad": "json:dumps"},
        {},
        "names a function, neither a module nor a subclass",
    ),
}


def cprsim(*args, site: Path, cwd: Path, code: str | None = None) -> subprocess.CompletedProcess:
    """``python -m cprsim ARGS`` (or ``python -c CODE ARGS``) with ``site`` on PYTHONPATH."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])),
    }
    cmd = [sys.executable, "-c", code] if code else [sys.executable, "-m", "cprsim"]
    return subprocess.run(
        [*cmd, *map(str, args)], capture_output=True, text=True, env=env, cwd=cwd, timeout=600
    )


def ok(p: subprocess.CompletedProcess) -> str:
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr, p.stderr
    return p.stdout


def one_error_line(p: subprocess.CompletedProcess) -> str:
    assert p.returncode == 2, (p.stdout, p.stderr)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), p.stderr
    return lines[0]


# -- end to end, in subprocesses ---------------------------------------------------------------------
@pytest.mark.slow
def test_simulate_runs_the_plugin_strategy(tmp_path):
    site = example_site(tmp_path / "site")

    def summary(*args):
        return json.loads(
            ok(cprsim("simulate", "toy", "-n", "6", "--json", *args, site=site, cwd=tmp_path))
        )

    full = summary("--strategy", "full")
    same = summary(
        "--strategy", "compressed", "--set", "strategy.ratio=1.0", "--set", "strategy.codec_s=0.0"
    )
    small = summary("--strategy", "compressed", "--set", "strategy.ratio=0.3")
    assert same["strategy"] == small["strategy"] == "compressed"
    # no compression, no codec: full recovery itself, replication by replication (common random numbers)
    assert same["metrics"] == full["metrics"]
    assert small["metrics"]["save_s"]["mean"] < full["metrics"]["save_s"]["mean"]
    # an unknown name lists the plugin's among the known ones
    line = one_error_line(
        cprsim("simulate", "toy", "--strategy", "nosuch", site=site, cwd=tmp_path)
    )
    assert "unknown strategy 'nosuch'" in line and "compressed" in line


@pytest.mark.slow
def test_plan_ranks_the_plugin_strategy_and_all_includes_it(tmp_path):
    site = example_site(tmp_path / "site")
    fast = [
        "--max-accuracy-loss",
        "0.001",
        "--replications",
        "30",
        "--search-replications",
        "30",
        "--confidence",
        "mean",
        "--json",
    ]
    d = json.loads(
        ok(cprsim("plan", "toy", "--strategies", "compressed", *fast, site=site, cwd=tmp_path))
    )
    mine = [o for o in d["options"] if o["strategy"] == "compressed"]
    assert [o["label"] for o in mine] == ["Compressed full (ratio=0.5, codec_s=20)"]
    assert mine[0]["pls"]["mean"] == 0  # it rolls back: no update lost
    d = json.loads(ok(cprsim("plan", "toy", "--strategies", "all", *fast, site=site, cwd=tmp_path)))
    assert {"partial", "mfu", "ssu", "ecrm", "checknrun", "compressed"} <= {
        o["strategy"] for o in d["options"]
    }
    line = one_error_line(
        cprsim("plan", "toy", "--strategies", "nosuch", *fast, site=site, cwd=tmp_path)
    )
    assert "unknown nosuch" in line and "compressed" in line


SWEEP = """
name = "plugin"
scenario = "toy"
replications = 4
strategies = ["full", "compressed", { name = "compressed", label = "c3", ratio = 0.3 }]
[grid]
"checkpoint.interval_h" = [0.25, 0.5]
"""

#: `cprsim sweep` with a second thread running: its workers come from a forkserver, a fresh process
#: that imports cprsim.sweep.runner and inherits no registry (fork: they inherit the parent's)
FORKSERVER = """
import sys, threading, time
threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()
import cprsim.sweep.runner as runner
init = runner.LocalWorkers.__init__
def traced(self, jobs):
    init(self, jobs)
    print("workers:", self.method, file=sys.stderr)
runner.LocalWorkers.__init__ = traced
from cprsim.cli import main
main(sys.argv[1:], prog_name="cprsim")
"""


@pytest.mark.slow
def test_a_sweep_runs_the_plugin_in_its_workers(tmp_path):
    site = example_site(tmp_path / "site")
    sweep = tmp_path / "s.toml"
    sweep.write_text(SWEEP)
    outs = {}
    for label, jobs, code in (
        ("j1", "1", None),
        ("fork", "2", None),
        ("forkserver", "2", FORKSERVER),
    ):
        outs[label] = tmp_path / label
        p = cprsim(
            "sweep", sweep, "--jobs", jobs, "--out", outs[label], site=site, cwd=tmp_path, code=code
        )
        ok(p)
        if code is not None:
            assert "workers: forkserver" in p.stderr, p.stderr
    table = (outs["j1"] / "summary.csv").read_text().splitlines()
    assert [row.split(",")[1] for row in table[1:]] == ["full", "compressed", "c3"] * 2
    for name in ("results.csv", "summary.csv"):
        ref = (outs["j1"] / name).read_bytes()
        assert (outs["fork"] / name).read_bytes() == ref
        assert (outs["forkserver"] / name).read_bytes() == ref


@pytest.mark.slow
@pytest.mark.parametrize("case", list(BROKEN))
def test_a_broken_plugin_is_one_line_naming_it(tmp_path, case):
    eps, modules, says = BROKEN[case]
    site = bad_site(tmp_path / "site", eps, modules)
    ep = next(iter(eps.items()))
    commands = [
        ("simulate", "toy", "-n", "2")
    ]  # a built-in strategy: the broken plugin still stops it
    if case == "import-error":
        commands += [
            ("simulate", "toy", "--strategy", "compressed", "-n", "2"),
            ("plan", "toy", "--max-accuracy-loss", "0.001", "--strategies", "compressed"),
        ]
    for args in commands:
        line = one_error_line(cprsim(*args, site=site, cwd=tmp_path))
        assert line.startswith(f'{ERROR_START}{ep[0]} = {ep[1]}" (group cprsim.strategies)'), line
        assert says in line, line


@pytest.mark.slow
def test_a_broken_plugin_stops_a_sweep_in_one_line(tmp_path):
    eps, modules, says = BROKEN["import-error"]
    site = bad_site(tmp_path / "site", eps, modules)
    sweep = tmp_path / "s.toml"
    sweep.write_text(SWEEP)
    line = one_error_line(
        cprsim("sweep", sweep, "--jobs", "2", "--out", tmp_path / "o", site=site, cwd=tmp_path)
    )
    assert ERROR_START.removeprefix("Error: ") in line and says in line


@pytest.mark.slow
def test_help_and_start_up_import_no_plugin(tmp_path):
    """Even a broken plugin: `cprsim --help`, `cprsim simulate --help` and importing the CLI, the
    scenario model and the planner never import it (nor does the help list plugins: docs/cli.md
    is the same whatever is installed)."""
    eps, modules, _ = BROKEN["raises"]
    site = bad_site(tmp_path / "site", eps, modules)
    assert "simulate" in ok(cprsim("--help", site=site, cwd=tmp_path))
    help_text = ok(cprsim("simulate", "--help", site=site, cwd=tmp_path))
    assert "compressed" not in help_text and "cprsim.strategies" in " ".join(help_text.split())
    code = (
        "import sys, cprsim.cli, cprsim.scenario, cprsim.planner, cprsim.cli.simulate, cprsim.cli.plan, "
        "cprsim.cli.sweep, cprsim.sweep.runner; "
        "print(sorted(m for m in sys.modules if m.startswith(('cprsim_bad', 'cprsim_compressed'))))"
    )
    assert ok(cprsim(site=site, cwd=tmp_path, code=code)).strip() == "[]"
    p = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import cprsim.cli"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(site)},
        cwd=tmp_path,
        check=True,
    )
    imported = {ln.rsplit("|", 1)[-1].strip() for ln in p.stderr.splitlines() if "|" in ln}
    assert "cprsim.cli" in imported
    assert not [
        m for m in imported if m.startswith(("cprsim_bad", "cprsim_compressed", "cprsim.sim"))
    ]


# -- in-process: the registry, the planner's lists, CliRunner --------------------------------------------
@pytest.fixture
def fresh_registry(monkeypatch):
    """The registry as if no plugin had been loaded yet; everything restored afterwards."""
    strategies.ensure_loaded()
    saved = dict(strategies.REGISTRY)
    before = set(sys.modules)
    from cprsim import registry

    monkeypatch.setattr(registry, "_load_plugins_done", False)
    monkeypatch.setattr(registry, "_load_error", None)
    yield monkeypatch
    strategies.REGISTRY.clear()
    strategies.REGISTRY.update(saved)
    for m in set(sys.modules) - before:
        if m.startswith(("cprsim_compressed", "cprsim_bad")):
            del sys.modules[m]
    importlib.invalidate_caches()


@pytest.fixture
def in_process_plugin(tmp_path, fresh_registry):
    fresh_registry.syspath_prepend(
        str(example_site(tmp_path / "site"))
    )  # also invalidates import caches
    return tmp_path


def test_in_process_the_registry_planner_and_cli_see_the_plugin(in_process_plugin):
    import cprsim.planner as plan
    from cprsim.scenario import load

    assert "compressed" in strategies.names()
    cls = strategies.get("compressed")
    assert (cls.label, cls.plan_label, cls.colour) == (
        "Compressed full",
        "Compressed full",
        "#bcbd22",
    )
    assert (
        plan.ALL_STRATEGIES[-1] == "compressed" and plan.LABELS["compressed"] == "Compressed full"
    )
    s = load("toy").with_updates({"strategy": {"name": "compressed", "ratio": 0.3}})
    p = plan.make_plan(
        s,
        0.001,
        strategies=["compressed"],
        replications=30,
        search_replications=30,
        confidence=None,
    )
    assert any(o.strategy == "compressed" for o in p.options)
    r = run("simulate", "toy", "--strategy", "compressed", "-n", "3", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["strategy"] == "compressed"
    # its parameters are validated like a built-in's
    line = one_line_error(
        run("simulate", "toy", "--strategy", "compressed", "--set", "strategy.ratio=2")
    )
    assert "ratio" in line and "compressed" in line


def test_in_process_a_broken_plugin_is_one_line_every_time(tmp_path, fresh_registry):
    eps, modules, says = BROKEN["takes-a-built-in-name"]
    fresh_registry.syspath_prepend(str(bad_site(tmp_path / "site", eps, modules)))
    full = strategies.REGISTRY["full"]
    for _ in range(2):  # cached: the second run says the same, it does not go on without the plugin
        line = one_line_error(run("simulate", "toy", "-n", "2"))
        assert line.startswith(ERROR_START) and says in line
    assert strategies.REGISTRY["full"] is full  # the failed plugin left nothing behind
    with pytest.raises(ValueError, match="registered already"):
        strategies.get("compressed")


# -- the registry's rules ---------------------------------------------------------------------------
def test_register_refuses_a_taken_or_malformed_name(fresh_registry):
    class Taken(strategies.Strategy):
        name = "partial"

    with pytest.raises(strategies.DuplicateStrategy, match="registered already"):
        strategies.register(Taken)
    for bad in ("", "a,b", "two words", "all", "x" * 65):
        with pytest.raises(ValueError, match="is not a name"):
            strategies.register(type("Bad", (strategies.Strategy,), {"name": bad}))
    with pytest.raises(TypeError):
        strategies.register(int)  # type: ignore[arg-type]
    # the same class again, or one redefined in the same place (a notebook cell run twice): replaced
    first = strategies.register(
        type("Again", (strategies.Full,), {"name": "again", "__module__": "nb"})
    )
    assert strategies.register(first) is first
    second = strategies.register(
        type("Again", (strategies.Full,), {"name": "again", "__module__": "nb"})
    )
    assert strategies.REGISTRY["again"] is second


def test_labels_and_colours_default_from_the_name():
    builtin = {
        n: (strategies.get(n).label, strategies.get(n).colour) for n in strategies.builtin_names()
    }
    assert builtin == {
        "full": ("full", "#1f77b4"),
        "partial": ("CPR-vanilla", "#d62728"),
        "mfu": ("CPR-MFU", "#2ca02c"),
        "ssu": ("CPR-SSU", "#9467bd"),
        "lookahead": ("Lookahead", "#8c564b"),
        "ecrm": ("ECRM", "#ff7f0e"),
        "checknrun": ("Check-N-Run", "#17becf"),
    }
    assert all(strategies.get(n).plan_label == label for n, (label, _) in builtin.items())

    class Mine(
        strategies.Partial
    ):  # a subclass of a built-in does not pass for it in tables or figures
        name = "mine"

    assert (Mine.label, Mine.plan_label) == ("mine", "mine")
    assert Mine.colour in strategies.SPARE_COLOURS and Mine.colour == strategies.default_colour(
        "mine"
    )

    class Labelled(strategies.Strategy):
        name = "labelled"
        plan_label = "Labelled!"

    assert Labelled.label == "Labelled!"

    class Unnamed(Mine):  # no name of its own: everything inherited
        pass

    assert (Unnamed.label, Unnamed.colour) == (Mine.label, Mine.colour)
