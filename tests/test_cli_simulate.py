"""`cprsim scenarios`, `show` and `simulate` through the command line."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from cprsim import scenario as sc


def test_scenarios_lists_the_builtins(cli):
    r = cli("scenarios")
    assert r.exit_code == 0
    for name in sc.builtin_names():
        assert name in r.output
    assert {"cpr-production", "toy"} <= set(sc.builtin_names())


def test_show_prints_the_effective_config_which_loads_back(tmp_path, cli):
    r = cli("show", "toy", "--set", "cluster.trainers=3")
    assert r.exit_code == 0, r.output
    text = r.output.split("\n# derived:")[0]
    f = tmp_path / "eff.toml"
    f.write_text(text)
    assert sc.load(str(f)) == sc.load("toy", {"cluster.trainers": 3})
    assert "[storage]" in text and "latency_s" in text  # defaults included


@pytest.mark.parametrize("name", sc.builtin_names())
def test_show_works_on_every_builtin_and_its_config_loads_back(tmp_path, cli, name):
    """Every built-in shows (a dense model with no embedding tables included) and reads back."""
    r = cli("show", name)
    assert r.exit_code == 0, r.output
    assert "# derived:" in r.output and "embedding rows:" in r.output
    f = tmp_path / "eff.toml"
    f.write_text(r.output.split("\n# derived:")[0])
    assert sc.load(str(f)) == sc.load(name)


def test_simulate_writes_its_files_and_same_seed_gives_same_bytes(tmp_path, cli):
    outs = []
    for k in range(2):
        out = tmp_path / f"run{k}"
        r = cli(
            "simulate",
            "toy",
            "-n",
            "8",
            "--strategy",
            "partial",
            "--out",
            str(out),
            "--timeline",
            str(out / "timeline.json"),
            "--json",
        )
        assert r.exit_code == 0, r.output
        outs.append(out)
        summary = json.loads(r.output)
        assert summary["replications"] == 8 and summary["strategy"] == "partial"
    names = ["config.toml", "summary.json", "replications.csv", "events.csv", "timeline.json"]
    for n in names:
        assert (outs[0] / n).read_bytes() == (outs[1] / n).read_bytes(), n
    rows = (outs[0] / "replications.csv").read_text().splitlines()
    assert len(rows) == 9
    trace = json.loads((outs[0] / "timeline.json").read_text())
    assert any(e.get("name") == "compute" for e in trace["traceEvents"])
    assert sc.load(str(outs[0] / "config.toml")).strategy.name == "partial"
    # another seed, other numbers
    r = cli("simulate", "toy", "-n", "8", "--seed", "99", "--out", str(tmp_path / "other"))
    assert (tmp_path / "other" / "replications.csv").read_bytes() != (
        outs[0] / "replications.csv"
    ).read_bytes()


def test_summary_records_the_python_and_package_versions(tmp_path, cli):
    import platform
    from importlib.metadata import version

    import cprsim

    r = cli("simulate", "toy", "-n", "2", "--out", tmp_path / "o", "--json")
    assert r.exit_code == 0, r.output
    for summary in (
        json.loads(r.output),
        json.loads((tmp_path / "o" / "summary.json").read_text()),
    ):
        v = summary["versions"]
        assert set(v) == {"python", "cprsim", "numpy", "scipy", "simpy"}
        assert v["python"] == platform.python_version() and v["cprsim"] == cprsim.__version__
        assert v["cprsim"] == summary["cprsim_version"]
        for name in ("numpy", "scipy", "simpy"):
            assert v[name] == version(name), name
        assert all(isinstance(x, str) and x and x != "unknown" for x in v.values()), v


def test_simulate_prints_a_table(cli):
    r = cli("simulate", "toy", "-n", "4", "--interval", "45m")
    assert r.exit_code == 0, r.output
    assert "checkpoint-related overhead" in r.output and "0.75 h" in r.output


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--set", "cluster.foo=1"], "cluster.foo: unknown key"),
        (["--set", "cluster.embedding_gb=-5"], "cluster.embedding_gb"),
        (["--set", "storage.write_gbps=0"], "storage.write_gbps"),
        (["--interval", "30h"], "longer than the job"),
        (["--set", "storage.read_gbps=nan"], "storage.read_gbps"),
        (["--strategy", "nope"], "unknown strategy 'nope'"),
        (
            [
                "--set",
                'failures.embedding.family="weibull"',
                "--set",
                "failures.embedding.mtbf_h=10",
            ],
            "weibull needs `shape`",
        ),
        (["--interval", "soon"], "not a duration"),
    ],
)
def test_bad_configs_are_one_line_errors(args, needle, one_line_error, cli):
    assert needle in one_line_error(cli("simulate", "toy", "-n", "2", *args))


def test_missing_and_malformed_files(tmp_path, one_line_error, cli):
    assert "no such file" in one_line_error(cli("simulate", str(tmp_path / "none.toml")))
    bad = tmp_path / "bad.toml"
    bad.write_text("[cluster\ntrainers = 2\n")
    assert "invalid TOML" in one_line_error(cli("simulate", str(bad)))


def test_python_dash_m_and_version():
    r = subprocess.run(
        [sys.executable, "-m", "cprsim", "--version"], capture_output=True, text=True, check=True
    )
    assert r.stdout.startswith("cprsim, version")


def test_output_files_get_the_usual_permissions(tmp_path):
    """Atomic writes go through mkstemp (0600); the file then gets what open() would give it."""
    import os
    import stat

    from cprsim.io import atomic_write_text

    old = os.umask(0o022)
    try:
        p = atomic_write_text(tmp_path / "x.txt", "x")
    finally:
        os.umask(old)
    assert stat.S_IMODE(p.stat().st_mode) == 0o644


def test_with_updates_reaches_list_items():
    s = sc.load("cpr-production")
    t = s.with_updates({"failures.domains.0.failure.mtbf_h": 5.0})
    assert (
        t.failures.domains[0].failure.mtbf_h == 5.0 and s.failures.domains[0].failure.mtbf_h == 10.0
    )


@pytest.mark.parametrize(
    "args",
    [
        ["scenarios"],
        ["simulate", "toy", "-n", "3"],
        ["simulate", "dlrm-spares", "-n", "2", "--strategy", "partial"],  # lifecycle rows, accuracy
        ["simulate", "llm-16k-gpus", "-n", "1", "--interval", "0.04h"],  # tiers' rows, big numbers
    ],
)
def test_the_tables_fit_100_columns(args):
    """What `cprsim scenarios` and `cprsim simulate` print fits 100 columns (piped output)."""
    r = subprocess.run(
        [sys.executable, "-m", "cprsim", *args], capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) > 3
    wide = [line for line in lines if len(line) > 100]
    assert wide == [], wide


def test_a_reader_that_goes_away_stops_the_command_quietly():
    """`cprsim scenarios | head -1`: no error line, no traceback; the status a pipeline expects."""
    p = subprocess.Popen(
        [sys.executable, "-m", "cprsim", "scenarios"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert p.stdout is not None and p.stderr is not None
    p.stdout.close()  # before the command writes anything: its first write fails
    err = p.stderr.read().decode()
    assert p.wait(timeout=60) == 141, err
    assert err == ""
