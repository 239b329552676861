"""The command line is a thin layer over the library (issue 17), and the plan table fits the terminal.

1. The use cases are library functions: called from Python they write the same bytes as the
   commands (a run folder and its timeline, a plan, a fitted failure model and its report, a
   bad-node model, the access figure), and their errors name parameters, not options.
2. The layout, by walking the AST: no module of ``cprsim/cli`` writes a file itself (no ``open``,
   ``write_text``, ``json.dump``, ``tomli_w``, ``atomic_write_*``, ...) nor computes with numpy,
   scipy, matplotlib, hashlib or datetime; the library modules the use cases moved to import
   neither click nor rich, document and annotate every public function and never name an option
   in an error message. Each check is shown to fail on a module that breaks it.
3. ``cprsim plan``'s table fits COLUMNS=100 and COLUMNS=80, says which columns it left out, and
   drops the lost-update columns when no option loses updates.
"""

from __future__ import annotations

import ast
import datetime as dt
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

import cprsim
from cprsim.cli import main

ROOT = Path(cprsim.__file__).parent
TRACE = ROOT.parent / "traces" / "examples" / "weibull-64.csv"
#: the library modules the use cases of the command line live in
LIBRARY = (
    "runfiles.py",
    "params.py",
    "access_report.py",
    "plan/quick.py",
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


def test_quick_scenario_and_write_plan_give_the_bytes_of_plan_out(tmp_path):
    from cprsim.plan import make_plan
    from cprsim.plan.quick import plan_strategies, quick_scenario
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
    from cprsim.params import ParameterError
    from cprsim.plan.quick import (
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
    assert "Invalid value for --strategies: unknown bogus" in one_line_error(
        CliRunner().invoke(main, bogus)
    )
    assert "Invalid value for --skew: 'abc'" in one_line_error(
        CliRunner().invoke(main, ["access", "--skew", "abc"])
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


def _raise_texts(node: ast.Raise) -> list[str]:
    return [
        c.value for c in ast.walk(node) if isinstance(c, ast.Constant) and isinstance(c.value, str)
    ]


def library_violations(source: str, name: str) -> list[str]:
    """What a use-case library module must not do: import click or rich (anywhere), leave a public
    function without a docstring or annotations, name a command-line option in an error."""
    tree = ast.parse(source, name)
    out = [
        f"{name}:{line}: imports {mod}"
        for mod, _, line in _imports(tree)
        if mod.split(".")[0] in ("click", "rich")
    ]
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and any(
            re.search(r"--[a-z]", t) for t in _raise_texts(node)
        ):
            out.append(f"{name}:{node.lineno}: an error names an option")
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
    out = run(*quick_args()).output  # not a terminal, no COLUMNS: 160 characters
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
