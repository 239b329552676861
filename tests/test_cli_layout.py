"""The command line is a thin layer over the library (issue 17), and the plan table fits the terminal.

1. The use cases are library functions: called from Python they write the same bytes as the
   commands (a run folder and its timeline, a plan, a fitted failure model and its report, a
   bad-node model, the access figure), and their errors name parameters, not options: a
   :class:`~cprsim.errors.ParameterError` names the Python parameter, which the command line
   shows as its option (``Error: --filter bogus: ...``), in one place (``cprsim.cli._Group``).
2. The layout, by walking the AST: no module of ``cprsim/cli`` writes a file itself (no ``open``,
   ``write_text``, ``json.dump``, ``tomli_w``, ``atomic_write_*``, ...) nor computes with numpy,
   scipy, matplotlib, hashlib or datetime; the library modules the use cases moved to import
   neither click nor rich and document and annotate every public function; and no library module
   (anything outside ``cprsim/cli``) names a command-line option in an error or a warning. Each
   check is shown to fail on a module that breaks it.
3. ``cprsim plan``'s table fits COLUMNS=100 and COLUMNS=80, says which columns it left out, and
   drops the lost-update columns when no option loses updates.
"""

from __future__ import annotations

import ast
import builtins
import datetime as dt
import json
import pickle
import re
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import cprsim
from cprsim.cli import main

ROOT = Path(cprsim.__file__).parent
TRACE = ROOT.parent / "traces" / "examples" / "weibull-64.csv"
#: the library modules the use cases of the command line live in
LIBRARY = (
    "usecases.py",
    "runfiles.py",
    "errors.py",
    "access_report.py",
    "planner/quick.py",
    "plots/access.py",
    "failures/modelfile.py",
)
#: the quick form of `cprsim plan`, small (as tests/test_plan_cli.py's QUICK)
QUICK = {
    "embedding_servers": 16,
    "trainers": 8,
    "node_mtbf_h": 2000.0,
    "save_s": 120.0,
    "load_s": 60.0,
    "samples_per_s": 1e5,
    "duration_h": 20.0,
}
N = 30  # replications: the fewest that can prove a 90% per-run promise (29)


def quick_args(**extra: object) -> list[str]:
    args = ["plan"]
    for k, v in {**QUICK, **extra}.items():
        args += [f"--{k.replace('_', '-')}", str(v)]
    return args + ["-n", str(N), "--search-replications", str(N), "--max-accuracy-loss", "0.001"]


def run(*args: object, env: dict[str, str] | None = None):
    r = CliRunner().invoke(main, [str(a) for a in args], env=env)
    assert r.exit_code == 0, r.output
    return r


def same_files(a: Path, b: Path) -> None:
    assert a.read_bytes() == b.read_bytes(), f"{a} and {b} differ"


# -- 1. the library writes what the commands write ---------------------------------------------------
def test_write_run_and_write_timeline_write_the_bytes_of_simulate_out(tmp_path):
    from cprsim import scenario as sc
    from cprsim.runfiles import RUN_FILES, run_summary, write_run, write_timeline
    from cprsim.sim.replicate import run_replications

    run("simulate", "toy", "-n", 3, "--out", tmp_path / "cli", "--timeline", tmp_path / "cli.json")
    s = sc.load("toy", {"replications": 3})
    results, events = run_replications(s, record_first=True)
    written = write_run(tmp_path / "lib", s, results, events, run_summary(s, results))
    assert written == [tmp_path / "lib" / name for name in RUN_FILES]
    for name in RUN_FILES:
        same_files(tmp_path / "cli" / name, tmp_path / "lib" / name)
    assert write_timeline(tmp_path / "lib.json", s, events) == tmp_path / "lib.json"
    same_files(tmp_path / "cli.json", tmp_path / "lib.json")
    # the public API's Runs.save goes through the same function (summary by default)
    cprsim.simulate("toy", 3, record=True).save(tmp_path / "api")
    for name in RUN_FILES:
        same_files(tmp_path / "cli" / name, tmp_path / "api" / name)
    write_run(tmp_path / "default", s, results, events)  # summary=None: run_summary's
    same_files(tmp_path / "cli" / "summary.json", tmp_path / "default" / "summary.json")


def test_preflight_reports_through_warn_and_refuses_a_hopeless_regime():
    from cprsim import scenario as sc
    from cprsim.errors import InputError
    from cprsim.runfiles import preflight

    said: list[str] = []
    preflight(sc.load("toy", {"failures": {}}), warn=said.append)
    assert said == ["toy: no failure source ([failures] is empty or missing): nothing will fail"]
    hopeless = sc.load("toy", {"failures.trainer.mtbf_h": 0.01})
    with pytest.raises(InputError, match="hopeless"):
        preflight(hopeless)
    preflight(hopeless, force=True)  # forced: no check of the regime


@pytest.mark.slow
def test_quick_scenario_and_write_plan_give_the_bytes_of_plan_out(tmp_path):
    from cprsim.planner import make_plan
    from cprsim.planner.quick import plan_strategies, quick_scenario
    from cprsim.runfiles import write_plan

    run(*quick_args(), "--out", tmp_path / "cli.json")
    s = quick_scenario(**QUICK, replications=N)
    plan = make_plan(
        s,
        0.001,
        "auc",
        replications=N,
        search_replications=N,
        strategies=plan_strategies("partial,mfu,ssu"),
    )
    assert write_plan(tmp_path / "lib.json", plan) == tmp_path / "lib.json"
    same_files(tmp_path / "cli.json", tmp_path / "lib.json")


@pytest.mark.parametrize(
    "as_type,filters,cluster_size",
    [("both", {}, 10), ("job", {}, 100), ("embedding", {"cause": "synth"}, None)],
)
def test_fit_failure_log_writes_the_model_and_report_of_fit_out(
    tmp_path, as_type, filters, cluster_size
):
    from cprsim.failures.modelfile import (
        fit_failure_log,
        report_dict,
        write_fitted_model,
        write_report,
    )
    from cprsim.io import dumps_json

    args = ["fit", TRACE, "--bootstrap", "0", "--as", as_type]
    args += [a for k, v in filters.items() for a in ("--filter", f"{k}={v}")]
    args += ["--cluster-size", cluster_size] if cluster_size else []
    r = run(*args, "--out", tmp_path / "model.toml", "--report", tmp_path / "cli.json", "--json")
    fit = fit_failure_log(TRACE, "csv", filters, cluster_size=cluster_size, bootstrap=0)
    assert r.output == dumps_json(report_dict(fit))
    # the header names the file: the same name, in another folder
    out = write_fitted_model(tmp_path / "lib" / "model.toml", fit, as_type)
    same_files(tmp_path / "model.toml", out)
    assert write_report(tmp_path / "lib.json", fit) == tmp_path / "lib.json"
    same_files(tmp_path / "cli.json", tmp_path / "lib.json")


def test_fit_bad_nodes_writes_the_model_and_report_of_fit_bad_nodes(tmp_path):
    from cprsim.failures.modelfile import fit_bad_nodes, write_bad_nodes_model, write_report

    run(
        "fit",
        TRACE,
        "--bad-nodes",
        "--bootstrap",
        20,
        "--out",
        tmp_path / "cli.toml",
        "--report",
        tmp_path / "cli.json",
    )
    fit = fit_bad_nodes(TRACE, bootstrap=20)
    write_bad_nodes_model(tmp_path / "lib.toml", fit)
    write_report(tmp_path / "lib.json", fit)
    same_files(tmp_path / "cli.toml", tmp_path / "lib.toml")
    same_files(tmp_path / "cli.json", tmp_path / "lib.json")


def test_a_job_model_without_a_cluster_size_is_refused_by_the_library_too():
    """The division by the node count that the CLI only guarded 100 lines earlier (issue 17)."""
    from cprsim.errors import InputError
    from cprsim.failures.modelfile import fit_failure_log, fitted_model_toml

    fit = fit_failure_log(TRACE, bootstrap=0)
    with pytest.raises(InputError, match="cluster_size") as e:
        fitted_model_toml(fit, "m.toml", "job")
    assert "--" not in str(e.value)
    text = fitted_model_toml(fit, "m.toml", "job", cluster_size=4, fitted_on=dt.date(2024, 1, 2))
    assert "[failures.job]" in text and 'fitted = "2024-01-02"' in text


@pytest.mark.slow
def test_the_access_tables_and_figure_are_the_commands(tmp_path):
    from cprsim.access_report import access_model, coverage_table, parse_samples, touched_table
    from cprsim.plots import save_figure
    from cprsim.plots.access import plot_access

    r = run("access", "--skew", "0.05:0.9", "--samples", "1e3,1e5", "--plot", tmp_path / "cli.png")
    m = access_model(skew="0.05:0.9")
    assert m.alpha == access_model(skew=(0.05, 0.9)).alpha
    ns = parse_samples("1e3,1e5")
    rows = coverage_table(m, ns)
    assert [row.r for row in rows] == [0.001, 0.01, 0.05, 0.1, 0.2, 0.5]
    for row in rows:
        assert f"{row.exact:.4f}" in r.output and all(f"{c:.4f}" in r.output for c in row.sampled)
    for n, f in touched_table(m, ns):
        assert re.search(re.escape(f"{n:.0e}") + " .* " + re.escape(f"{f:.5f}"), r.output)
    save_figure(plot_access(m, ns), tmp_path / "lib.png")
    same_files(tmp_path / "cli.png", tmp_path / "lib.png")


def test_library_errors_name_parameters_and_the_cli_names_options(one_line_error):
    from cprsim.access_report import parse_samples, parse_skew
    from cprsim.errors import ParameterError
    from cprsim.planner.quick import (
        MissingParameters,
        UnknownStrategies,
        plan_strategies,
        quick_scenario,
    )

    with pytest.raises(MissingParameters) as missing:
        quick_scenario(embedding_servers=4, node_mtbf_h=None, save_s=None, load_s=1.0)  # type: ignore[arg-type]
    assert missing.value.names == ("node_mtbf_h", "save_s")
    assert str(missing.value) == "missing node_mtbf_h, save_s"
    with pytest.raises(UnknownStrategies) as unknown:
        plan_strategies("partial,bogus")
    assert unknown.value.param == "strategies" and str(unknown.value).startswith(
        "strategies: unknown bogus"
    )
    for call, param in (
        (lambda: parse_skew("abc"), "skew"),
        (lambda: parse_samples("1,x"), "samples"),
    ):
        with pytest.raises(ParameterError) as e:
            call()
        assert e.value.param == param and "--" not in str(e.value)
    assert plan_strategies(["partial", " mfu "]) == ["partial", "mfu"]
    # the command line adds the option
    line = one_line_error(
        CliRunner().invoke(
            main, ["plan", "--max-accuracy-loss", "0.001", "--embedding-servers", "3"]
        )
    )
    assert "missing: --node-mtbf-h, --save-s, --load-s" in line
    bogus = quick_args(strategies="partial,bogus")
    assert one_line_error(CliRunner().invoke(main, bogus)).startswith(
        "Error: --strategies: unknown bogus (choose from "
    )
    assert one_line_error(CliRunner().invoke(main, ["access", "--skew", "abc"])) == (
        "Error: --skew: 'abc' is not FRACTION:SHARE like 0.01:0.92"
    )


def test_a_parameter_error_pickles_and_shows_its_parameters_as_asked():
    """Sweeps raise errors in worker processes: the fields cross the process boundary (a
    subclass's own too); ``message(shown)`` names the parameters as a caller shows them."""
    from cprsim.errors import InputError, ParameterError
    from cprsim.planner.quick import UnknownStrategies
    from cprsim.scenario import OverrideError, ScenarioError

    e = ParameterError(
        "filters",
        "not a column of `format` titan",
        "log.csv",
        key="system",
        also=("format",),
    )
    assert isinstance(e, InputError) and isinstance(e, ValueError)
    assert str(e) == "log.csv: filters system: not a column of `format` titan"
    assert e.message({"filters": "--filter", "format": "--format"}) == (
        "log.csv: --filter system: not a column of --format titan"
    )
    assert e.message({"filters": "--filter"}) == (
        "log.csv: --filter system: not a column of `format` titan"
    )
    assert str(ParameterError("band", "must be one of ci, p90")) == "band: must be one of ci, p90"
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is ParameterError and str(back) == str(e) and back.args == e.args
    assert (back.param, back.detail, back.where, back.key, back.also) == (
        "filters",
        "not a column of `format` titan",
        "log.csv",
        "system",
        ("format",),
    )
    u = pickle.loads(pickle.dumps(UnknownStrategies(["bogus"], ["full", "partial"])))
    assert type(u) is UnknownStrategies and (u.param, u.unknown, u.known) == (
        "strategies",
        ("bogus",),
        ("full", "partial"),
    )
    assert u.detail == "unknown bogus (choose from full, partial, or all)"
    o = pickle.loads(pickle.dumps(OverrideError("overrides", "unknown key", "toy", key="a.b")))
    assert isinstance(o, ScenarioError) and isinstance(o, ParameterError)
    assert str(o) == "toy: overrides a.b: unknown key" and o.key == "a.b"
    moved = e.replace(where="sweep.toml: point 3")
    assert str(moved) == "sweep.toml: point 3: filters system: not a column of `format` titan"
    assert str(e).startswith("log.csv: ") and moved.args == (str(moved),)
    with pytest.raises(TypeError):
        e.replace(bogus=1)


def test_the_cli_shows_a_parameter_of_the_command_as_its_option_in_one_place(one_line_error):
    """``cprsim.cli._Group``: the click option whose Python name is the parameter gives the flag
    (its long form); a parameter that is no option of the command keeps its name."""
    import click

    from cprsim.cli import _Group
    from cprsim.errors import ParameterError

    group = _Group("t")

    @group.command("fit")
    @click.option("--format", "-f", "fmt")
    @click.option("--resume", is_flag=True)
    @click.argument("trace", required=False)
    def fit(fmt: str | None, resume: bool, trace: str | None) -> None:
        raise {
            "a": ParameterError("fmt", "must be one of csv, lanl, got 'x'"),
            "b": ParameterError("jobs", "must be >= 1", "sweep.toml"),
            "c": ParameterError("trace", "no nodes", "log.csv", key="k=v", also=("resume",)),
            "d": ParameterError("fmt", "pass `resume`, not `jobs`", "o", key="x", also=("resume",)),
        }[fmt]

    def line(fmt: str) -> str:
        return one_line_error(CliRunner().invoke(group, ["fit", "-f", fmt]))

    assert line("a") == "Error: --format: must be one of csv, lanl, got 'x'"
    assert line("b") == "Error: sweep.toml: jobs: must be >= 1"
    assert line("c") == "Error: log.csv: trace k=v: no nodes"  # an argument is not an option
    assert line("d") == "Error: o: --format x: pass --resume, not `jobs`"


def _fit_bad_nodes(*args: Any, **kwargs: Any) -> Any:
    from cprsim.failures.modelfile import fit_bad_nodes

    return fit_bad_nodes(*args, **kwargs)


def _run_sweep(path: Path, out: Path, **kwargs: Any) -> Any:
    from cprsim.sweep import load_sweep, run_sweep

    return run_sweep(load_sweep(path), out, **kwargs)


#: (command line, its one-line error; the same from Python, its parameter, its message's start);
#: ``{d}``: the test's folder, ``{t}``: the example trace
SHOWN = [
    (
        ["simulate", "toy", "-n", "2", "--set", "cluster.bogus=1"],
        "toy: --set cluster.bogus: unknown key",
        lambda d: cprsim.load_scenario("toy", set={"cluster.bogus": 1}),
        "overrides",
        "toy: overrides cluster.bogus: unknown key",
    ),
    (
        ["simulate", "toy", "-n", "2", "--set", "cluster"],
        "--set 'cluster': expected key=value",
        lambda d: cprsim.load_scenario("toy", set=["cluster"]),
        "set",
        "set 'cluster': expected key=value",
    ),
    (
        ["simulate", "toy", "-n", "2", "--strategy", "bogus"],
        "toy: --strategy: unknown strategy 'bogus' (known: ",
        lambda d: cprsim.load_scenario("toy", strategy="bogus"),
        "strategy",
        "toy: strategy: unknown strategy 'bogus' (known: ",
    ),
    (
        ["simulate", "toy", "-n", "2", "--max-events", "10"],
        "toy: --max-events: about 29 events a replication, more than the budget of 10: mostly ",
        lambda d: cprsim.simulate("toy", 2, max_events=10),
        "max_events",
        "toy: max_events: about 29 events a replication, more than the budget of 10: mostly ",
    ),
    (
        ["fit", "{t}", "--filter", "bogus=1"],
        "--filter bogus: not a column of --format csv (columns: cause, node, node_type)",
        lambda d: cprsim.fit(TRACE, filters={"bogus": "1"}),
        "filters",
        "filters bogus: not a column of `format` csv (columns: cause, node, node_type)",
    ),
    (
        ["fit", "{t}", "--node-count", "3"],
        "--node-count: applies to --format infinitehbd only",
        lambda d: cprsim.read_trace(TRACE, node_count=3),
        "node_count",
        "node_count: applies to `format` infinitehbd only",
    ),
    (
        ["fit", "{t}", "--bad-nodes", "--nodes", "2", "--bootstrap", "0"],
        "{t}: --nodes: 2 is less than the 64 different nodes in the log",
        lambda d: _fit_bad_nodes(TRACE, nodes=2, bootstrap=0),
        "nodes",
        "{t}: nodes: 2 is less than the 64 different nodes in the log",
    ),
    (
        ["sweep", "{d}/sweep.toml", "--out", "{d}/taken"],
        "{d}/taken: --out: already holds a sweep's results; pass --resume to finish it, or "
        "choose another folder",
        lambda d: _run_sweep(d / "sweep.toml", d / "taken"),
        "out",
        "{d}/taken: out: already holds a sweep's results; pass `resume` to finish it, or choose "
        "another folder",
    ),
    (
        ["plot", "overhead", "{d}/run", "--where", "cluster.trainers=3"],
        "--where cluster.trainers: not a grid key of {d}/run/replications.csv (keys: none)",
        lambda d: cprsim.load_results(d / "run").where({"cluster.trainers": 3}),
        "conditions",
        "conditions cluster.trainers: not a grid key of {d}/run/replications.csv (keys: none)",
    ),
]


@pytest.fixture(scope="module")
def shown_files(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("shown")
    (d / "sweep.toml").write_text(
        'scenario = "toy"\nreplications = 2\n[grid]\n"checkpoint.interval_h" = [0.5, 1.0]\n'
    )
    (d / "taken").mkdir()
    (d / "taken" / "results.csv").write_text("")
    run("simulate", "toy", "-n", 2, "--out", d / "run")
    return d


@pytest.mark.parametrize(
    "args, cli_line, call, param, python_message", SHOWN, ids=[" ".join(c[0][:2]) for c in SHOWN]
)
def test_commands_show_library_parameter_errors_with_their_options(
    shown_files, one_line_error, args, cli_line, call, param, python_message
):
    """The same bad value through a command and through the library: the command names its
    option, the library its parameter (and no option)."""
    from cprsim.errors import ParameterError

    d = shown_files
    line = one_line_error(CliRunner().invoke(main, [a.format(d=d, t=TRACE) for a in args]))
    assert line.startswith("Error: " + cli_line.format(d=d, t=TRACE)), line
    with pytest.raises(ParameterError) as e:
        call(d)
    assert e.value.param == param and "--" not in str(e.value)
    assert str(e.value).startswith(python_message.format(d=d, t=TRACE)), str(e.value)


def test_an_unreachable_scheduler_is_the_scheduler_option(tmp_path, one_line_error):
    pytest.importorskip("distributed")
    from cprsim.errors import ParameterError

    sweep = tmp_path / "sweep.toml"
    sweep.write_text('scenario = "toy"\nreplications = 2\n')
    address = "tcp://127.0.0.1:9"
    line = one_line_error(
        CliRunner().invoke(
            main,
            ["sweep", str(sweep), "--out", str(tmp_path / "o"), "--scheduler", address]
            + ["--connect-timeout", "0.5"],
        )
    )
    assert line.startswith(f"Error: --scheduler {address}: cannot connect ("), line
    with pytest.raises(ParameterError) as e:
        _run_sweep(sweep, tmp_path / "o2", scheduler=address, connect_timeout=0.5)
    assert e.value.param == "scheduler" and str(e.value).startswith(
        f"scheduler {address}: cannot connect ("
    )


# -- 2. the layout ------------------------------------------------------------------------------------
#: methods and functions that write, delete or create files
WRITE_CALLS = {
    "open",
    "write_text",
    "write_bytes",
    "savefig",
    "mkdir",
    "touch",
    "unlink",
    "rmtree",
    "dump",
    "dumps",
}
#: modules whose dump/dumps write or serialize a file format
SERIALIZERS = {"json", "tomli_w", "pickle", "marshal", "yaml"}
#: cprsim.io's writers and serializers: a command hands its data to a library function instead
IO_WRITERS = {
    "atomic_write_bytes",
    "atomic_write_text",
    "atomic_write_json",
    "atomic_write_csv",
    "atomic_write_set",
    "dumps_toml",
    "csv_text",
}
#: computation, serialization and provenance belong to the library
CLI_FORBIDDEN_IMPORTS = (
    "numpy",
    "scipy",
    "matplotlib",
    "hashlib",
    "datetime",
    "tomli_w",
    "csv",
    "pickle",
)


def _imports(tree: ast.AST) -> list[tuple[str, list[str], int]]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, [], node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.append((node.module, [a.name for a in node.names], node.lineno))
    return out


def cli_violations(source: str, name: str) -> list[str]:
    """What a CLI module does that the library should: writing files, serializing to files,
    computing with numpy/scipy/matplotlib, provenance hashes and dates."""
    tree = ast.parse(source, name)
    out = []
    for mod, names, line in _imports(tree):
        if mod.split(".")[0] in CLI_FORBIDDEN_IMPORTS:
            out.append(f"{name}:{line}: imports {mod}")
        out += [f"{name}:{line}: imports {n} from {mod}" for n in names if n in IO_WRITERS]
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        called = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
        if (
            called in ("dump", "dumps")
            and getattr(getattr(f, "value", None), "id", "") not in SERIALIZERS
        ):
            continue  # some object's own dump(s), not a file format's
        if called in WRITE_CALLS or called in IO_WRITERS:
            out.append(f"{name}:{node.lineno}: calls {called}()")
    return sorted(out, key=lambda v: int(v.split(":")[1]))


#: the built-in exception classes (a call of one, or of a subclass, makes an error message)
_BUILTIN_EXCEPTIONS = frozenset(
    n for n, v in vars(builtins).items() if isinstance(v, type) and issubclass(v, BaseException)
)


def _name(node: ast.AST) -> str:
    return (
        node.id
        if isinstance(node, ast.Name)
        else node.attr
        if isinstance(node, ast.Attribute)
        else ""
    )


def exception_classes(trees: Iterable[ast.AST]) -> set[str]:
    """The names of the exception classes: the built-in ones and the classes that derive from one
    (in ``trees``, to a fixed point: a module may subclass another module's error)."""
    classes = [
        (n.name, {_name(b) for b in n.bases})
        for t in trees
        for n in ast.walk(t)
        if isinstance(n, ast.ClassDef)
    ]
    names = set(_BUILTIN_EXCEPTIONS)
    grown = True
    while grown:
        grown = False
        for cls, bases in classes:
            if cls not in names and bases & names:
                names.add(cls)
                grown = True
    return names


def _strings(node: ast.AST) -> list[str]:
    return [
        c.value for c in ast.walk(node) if isinstance(c, ast.Constant) and isinstance(c.value, str)
    ]


def option_violations(
    source: str, name: str, exceptions: Iterable[str] = _BUILTIN_EXCEPTIONS
) -> list[str]:
    """Errors and warnings that name a command-line option (``--x...``) in their text: any string
    in a ``raise``, in a call of an exception class (``exceptions``, plus those the module derives
    itself: an error made and returned counts) or of ``warn`` (``warnings.warn``, a ``warn``
    callback), or in a value assigned to a name the message uses (``need = "..."`` beforehand)."""
    tree = ast.parse(source, name)
    exc = set(exceptions) | exception_classes([tree])
    assigned: dict[str, list[ast.AST]] = defaultdict(list)
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    assigned[target.id].append(node.value)
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            assigned[_name(node.target)].append(node.value)
    found: dict[int, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) or (isinstance(node, ast.Call) and _name(node.func) in exc):
            what = "an error"
        elif isinstance(node, ast.Call) and _name(node.func) == "warn":
            what = "a warning"
        else:
            continue
        texts = _strings(node)
        for used in ast.walk(node):
            if isinstance(used, ast.Name) and isinstance(used.ctx, ast.Load):
                texts += [t for value in assigned.get(used.id, []) for t in _strings(value)]
        if any(re.search(r"--[a-z]", t) for t in texts):
            found.setdefault(node.lineno, f"{name}:{node.lineno}: {what} names an option")
    return [found[line] for line in sorted(found)]


def library_violations(source: str, name: str) -> list[str]:
    """What a use-case library module must not do: import click or rich (anywhere), leave a public
    function without a docstring or annotations, name a command-line option in an error."""
    tree = ast.parse(source, name)
    out = [
        f"{name}:{line}: imports {mod}"
        for mod, _, line in _imports(tree)
        if mod.split(".")[0] in ("click", "rich")
    ]
    out += option_violations(source, name)
    for node in tree.body:
        items = [node] + (list(node.body) if isinstance(node, ast.ClassDef) else [])
        for fn in items:
            if not isinstance(fn, ast.FunctionDef) or fn.name.startswith("_"):
                continue
            if ast.get_docstring(fn) is None:
                out.append(f"{name}:{fn.lineno}: {fn.name} has no docstring")
            args = [a for a in fn.args.args + fn.args.kwonlyargs if a.arg not in ("self", "cls")]
            if fn.returns is None or any(a.annotation is None for a in args):
                out.append(f"{name}:{fn.lineno}: {fn.name} is not fully annotated")
    return out


def test_cli_modules_write_nothing_and_compute_nothing_themselves():
    found = []
    for p in sorted((ROOT / "cli").glob("*.py")):
        found += cli_violations(p.read_text(), p.name)
    assert found == []


def test_the_use_case_modules_are_plain_documented_typed_library_code():
    found = []
    for rel in LIBRARY:
        found += library_violations((ROOT / rel).read_text(), rel)
    assert found == []


def test_no_library_module_names_an_option_in_an_error_or_a_warning():
    """Every module outside cprsim/cli: its errors and warnings name parameters, never ``--flags``
    (a Python caller passes keyword arguments; the command line shows its options itself)."""
    modules = {
        str(p.relative_to(ROOT)): p.read_text()
        for p in sorted(ROOT.rglob("*.py"))
        if p.relative_to(ROOT).parts[0] != "cli"
    }
    assert len(modules) > 50 and "errors.py" in modules and "sweep/runner.py" in modules
    exceptions = exception_classes(ast.parse(src) for src in modules.values())
    assert {"InputError", "ParameterError", "SweepError", "PointFailed"} <= exceptions
    found = []
    for rel, src in modules.items():
        found += option_violations(src, rel, exceptions)
    assert found == []


#: the steps of the simulate and plan use cases (cprsim/usecases.py): a front end that names one
#: runs the sequence itself instead of calling the use case
USE_CASE_STEPS = frozenset(
    {
        "preflight",
        "run_replications",
        "run_adaptive",
        "Precision",
        "run_summary",
        "make_plan",
        "feasibility",
        "check_numbers",
        "load_calibration",
    }
)


def use_case_violations(source: str, name: str, functions: Iterable[str]) -> list[str]:
    """The steps of a use case that the front-end ``functions`` of a module import or call
    themselves (they must call :mod:`cprsim.usecases`, where each sequence is written once)."""
    wanted = set(functions)
    out = []
    for node in ast.walk(ast.parse(source, name)):
        if not isinstance(node, ast.FunctionDef) or node.name not in wanted:
            continue
        for mod, names, line in _imports(node):
            out += [
                f"{name}:{line}: {node.name} imports {x}"
                for x in [mod.rsplit(".", 1)[-1], *names]
                if x in USE_CASE_STEPS
            ]
        for call in ast.walk(node):
            if isinstance(call, ast.Call) and _name(call.func) in USE_CASE_STEPS:
                out.append(f"{name}:{call.lineno}: {node.name} calls {_name(call.func)}()")
    return out


def test_the_front_ends_call_the_use_cases_instead_of_running_their_steps():
    """`cprsim simulate` / `cprsim plan` and the API's simulate() / plan() run one sequence each
    (checks, precision rule, replications or planner, summary), in cprsim/usecases.py."""
    found = []
    for rel, functions in (
        ("cli/simulate.py", ["command"]),
        ("cli/plan.py", ["command"]),
        ("api.py", ["simulate", "plan"]),
    ):
        found += use_case_violations((ROOT / rel).read_text(), rel, functions)
    assert found == []
    bad = "def simulate(s):\n    from cprsim.runfiles import preflight\n    preflight(s)\n"
    assert use_case_violations(bad, "bad.py", ["simulate"]) == [
        "bad.py:2: simulate imports preflight",
        "bad.py:3: simulate calls preflight()",
    ]


#: the sweep's modules that know no files: running points, their backends, the sweep's plan
SWEEP_PURE = ("sweep/points.py", "sweep/backends.py", "sweep/planning.py")


def file_violations(source: str, name: str) -> list[str]:
    """What a module that knows no files does: import cprsim.sweep's file or runner module, import
    or call a writer of cprsim.io, or call a file-writing function (csv_text and dumps, which make
    strings, are fine)."""
    out = []
    for mod, names, line in _imports(ast.parse(source, name)):
        if mod in ("cprsim.sweep.files", "cprsim.sweep.runner"):
            out.append(f"{name}:{line}: imports {mod}")
        out += [
            f"{name}:{line}: imports {n} from {mod}"
            for n in names
            if n in IO_WRITERS - {"csv_text"}
        ]
    for node in ast.walk(ast.parse(source, name)):
        if isinstance(node, ast.Call):
            called = _name(node.func)
            if called in WRITE_CALLS - {"dumps"} or called in IO_WRITERS - {"csv_text"}:
                out.append(f"{name}:{node.lineno}: calls {called}()")
    return out


def test_the_sweep_runner_calls_the_writer_and_the_point_runner_knows_no_files():
    """cprsim/sweep: runner.py sequences a sweep; points.py (and its backends) run points and
    planning.py plans, none of them touching a file; files.py writes the folder and calls back
    into none of the others but the points' row layout."""
    found = []
    for rel in SWEEP_PURE:
        found += file_violations((ROOT / rel).read_text(), rel)
    assert found == []
    files = ast.parse((ROOT / "sweep" / "files.py").read_text())
    assert {m for m, _, _ in _imports(files) if m.startswith("cprsim.sweep.")} <= {
        "cprsim.sweep.points",
        "cprsim.sweep.results",
        "cprsim.sweep.spec",
    }
    runner = (ROOT / "sweep" / "runner.py").read_text()
    assert [v for v in file_violations(runner, "runner.py") if "imports cprsim" not in v] == []
    assert file_violations("from cprsim.io import atomic_write_json\nopen('x', 'w')\n", "b.py") == [
        "b.py:1: imports atomic_write_json from cprsim.io",
        "b.py:2: calls open()",
    ]


def test_the_layout_checks_fail_on_a_module_that_breaks_them():
    cli = (
        "import numpy as np\n"
        "from cprsim.io import atomic_write_json\n"
        "def command(out):\n"
        "    import hashlib\n"
        "    out.write_text('x')\n"
        "    with open(out, 'w') as f:\n"
        "        json.dump({}, f)\n"
        "    text = json.dumps({})\n"
        "    atomic_write_json(out, {})\n"
        "    tomli_w.dumps({})\n"
    )
    assert cli_violations(cli, "bad.py") == [
        "bad.py:1: imports numpy",
        "bad.py:2: imports atomic_write_json from cprsim.io",
        "bad.py:4: imports hashlib",
        "bad.py:5: calls write_text()",
        "bad.py:6: calls open()",
        "bad.py:7: calls dump()",
        "bad.py:8: calls dumps()",
        "bad.py:9: calls atomic_write_json()",
        "bad.py:10: calls dumps()",
    ]
    lib = (
        "def run(x):\n"
        "    import rich\n"
        "    raise ValueError(f'give --cluster-size, not {x}')\n"
        "def documented(x: int) -> int:\n"
        '    """Fine."""\n'
        "    return x\n"
        "class C:\n"
        "    def method(self, y: int) -> int:\n"
        "        return y\n"
    )
    assert sorted(library_violations(lib, "lib.py")) == [
        "lib.py:1: run has no docstring",
        "lib.py:1: run is not fully annotated",
        "lib.py:2: imports rich",
        "lib.py:3: an error names an option",
        "lib.py:8: method has no docstring",
    ]
    # an error made and returned, a warning, a message built beforehand, a subclass's error
    messages = (
        "import warnings\n"
        "class Bad(ValueError): pass\n"
        "class Worse(Bad): pass\n"
        "HINT = 'pass --resume'\n"
        "def broken(): return Bad('run again with --resume')\n"
        "def f(w):\n"
        "    warnings.warn('--jobs is ignored')\n"
        "    w.warn('try --force')\n"
        "    need = '--data needs it'\n"
        "    raise Worse(f'{need} ({HINT})')\n"
        "def fine(x):\n"
        "    '''A docstring may name ``--out``.'''\n"
        "    notes = ['--x is not an error']\n"
        "    raise ValueError(f'x: {x!r} must be > 0 (P50--P90, not --)')\n"
    )
    assert option_violations(messages, "m.py") == [
        "m.py:5: an error names an option",
        "m.py:7: a warning names an option",
        "m.py:8: a warning names an option",
        "m.py:10: an error names an option",
    ]


# -- 3. the plan table fits the terminal --------------------------------------------------------------
HEADERS = ("option", "saves", "overhead", "P90", "meets")  #: never left out


def _table(lines: list[str]) -> list[str]:
    top = next(i for i, ln in enumerate(lines) if ln.startswith("┏"))
    bottom = next(i for i, ln in enumerate(lines) if ln.startswith("└"))
    return lines[top : bottom + 1]


@pytest.mark.parametrize("columns", [100, 80])
def test_the_plan_fits_the_terminal_and_says_what_it_left_out(columns):
    out = run(*quick_args(), env={"COLUMNS": str(columns)}).output
    lines = out.splitlines()
    assert max(len(ln) for ln in lines) <= columns, "\n".join(
        ln for ln in lines if len(ln) > columns
    )
    table = _table(lines)
    assert len(table[0]) <= columns
    head = " ".join(ln for ln in table if ln.startswith("┃"))
    assert all(h in head for h in HEADERS)
    # every option's row is one line: labels and numbers are not wrapped at these widths
    rows = [ln for ln in table if ln.startswith("│")]
    assert len(rows) == 6 and all("%" in ln for ln in rows)
    left = [ln for ln in lines if ln.startswith("left out to fit")]
    assert len(left) == 1 and "ckpt-rel." in left[0]
    said = " ".join(out.split("left out to fit", 1)[1].split("Recommendation")[0].split())
    assert said.endswith("(--json has them all)")
    assert "PLS bound" not in head  # dropped before the columns that show the verdict's evidence


def test_a_wide_terminal_shows_every_column_and_leaves_nothing_out():
    # a wide terminal (the accuracy column shows the mean and a single run's P90: 166 wide)
    out = run(*quick_args(), env={"COLUMNS": "180"}).output
    head = " ".join(ln for ln in _table(out.splitlines()) if ln.startswith("┃"))
    for h in (
        "full saves",
        "ckpt-rel.",
        "ETTR",
        "PLS mean / P90",
        "PLS bound",
        "runs within (lo)",
        "auc loss",
    ):
        assert h in head
    assert "left out" not in out


def test_without_lost_updates_the_pls_columns_are_not_shown():
    out = run(*quick_args(strategies="ecrm"), env={"COLUMNS": "100"}).output
    lines = out.splitlines()
    assert max(len(ln) for ln in lines) <= 100
    head = " ".join(ln for ln in _table(lines) if ln.startswith("┃"))
    assert "PLS" not in head and "loss" not in head and "ETTR" in head
    assert "no option loses updates" in " ".join(out.split()) and "left out" not in out
    d = json.loads(run(*quick_args(strategies="ecrm"), "--json").output)
    assert all(o["pls_bound"] is None for o in d["options"])  # inf: loses no update


@pytest.mark.parametrize(
    "args,needle",
    [
        (["plan", "toy", "--max-accuracy-loss", "abc"], "'abc' is not a valid float"),
        (["simulate", "toy", "--nope"], "No such option '--nope'"),
        (["simulat", "toy"], "Did you mean 'simulate'?"),
        (["simulate"], "Missing argument"),
    ],
)
def test_a_usage_error_is_one_line_that_says_where_help_is(args, needle):
    """click's usage errors (a bad option value, an unknown option or command, a missing
    argument) are one line like every other bad input (issue 27), naming the help to read."""
    from cli_helpers import one_line_error, run

    line = one_line_error(run(*args))
    assert needle in line and "--help` lists the" in line, line
