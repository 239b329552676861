"""Regression cases of the bad-input campaign (issue 14): each a one-line error naming its source,
exit code 2, no traceback, and at once (the campaign found tracebacks, hangs or silent acceptance)."""

from __future__ import annotations

import json
import time

import pytest


def _scenario(tmp_path, body: bytes | str, name: str = "s.toml"):
    f = tmp_path / name
    f.write_bytes(body if isinstance(body, bytes) else body.encode())
    return f


def test_a_binary_scenario_file_is_not_utf8_text(tmp_path, one_line_error, cli):
    f = _scenario(tmp_path, b'name = "x"\n\xff\xfe\x00\x81 garbage')
    line = one_line_error(cli("simulate", f))
    assert str(f) in line and "not UTF-8 text (byte 11)" in line


@pytest.mark.parametrize(
    "nest",
    [
        b"[" * 100_000 + b"]" * 100_000,
        b"{a = " * 100_000 + b"1" + b"}" * 100_000,
        b"[" * 40 + b"]" * 40,
    ],
)
def test_deep_nesting_is_refused(tmp_path, nest, one_line_error, cli):
    f = _scenario(tmp_path, b"x = " + nest + b"\n")
    line = one_line_error(cli("simulate", f))
    assert str(f) in line and ("nested too deeply" in line or "invalid TOML" in line)


@pytest.mark.parametrize(
    "sets,needles",
    [
        (
            ["failures.injected=[{count = 1000000000000, nodes = 1}]"],
            ["failures.injected", "count"],
        ),
        (
            ['failures.embedding={family = "weibull", shape = 1e-3, mtbf_h = 20.0}'],
            ["failures.embedding", "shape"],
        ),
        (
            ['failures.embedding={family = "lognormal", sigma = 50.0, mtbf_h = 20.0}'],
            ["failures.embedding", "sigma"],
        ),
        (["cluster.embedding_gb=inf"], ["cluster.embedding_gb", "finite"]),
        (["job.duration_h=true"], ["job.duration_h"]),
        (['job.duration_h="1.5"'], ["job.duration_h"]),
        (["checkpoint.interval_h=1e-9"], ["checkpoint.interval_h", "events"]),
        (["job.duration_h=1e300"], ["events"]),
    ],
)
def test_hostile_set_values_are_refused_at_once(sets, needles, one_line_error, cli):
    t = time.perf_counter()
    line = one_line_error(cli("simulate", "toy", "-n", "2", *sum((["--set", x] for x in sets), [])))
    assert all(n in line for n in needles), line
    assert time.perf_counter() - t < 30


def test_an_empty_or_comment_only_scenario_is_an_error(tmp_path, one_line_error, cli):
    for body in ("", "# only a comment\n"):
        f = _scenario(tmp_path, body)
        assert "no settings" in one_line_error(cli("simulate", f))


def test_a_2500_character_path_gets_a_short_line(tmp_path, one_line_error, cli):
    p = "/tmp/" + "d" * 2500 + "/x.toml"
    line = one_line_error(cli("simulate", p))
    assert len(line) < 400 and "…" in line


@pytest.mark.parametrize("path", ["/dev/zero", "/dev/null", "/tmp"])
def test_special_files_are_refused_as_scenarios(path, one_line_error, cli):
    line = one_line_error(cli("simulate", path))
    assert path in line


def test_replay_of_a_device_is_refused_at_once(one_line_error, cli):
    t = time.perf_counter()
    line = one_line_error(cli("simulate", "toy", "-n", "2", "--set", "failures.replay=/dev/zero"))
    assert "/dev/zero" in line and "not a regular file" in line
    assert time.perf_counter() - t < 10


def test_replay_of_a_foreign_file_does_not_echo_its_contents(tmp_path, one_line_error, cli):
    secret = tmp_path / "secret.txt"
    secret.write_text(
        "root:x:0:0:SECRET-TOKEN:/root:/bin/bash\nuser:x:1000:1000::/home/user:/bin/sh\n"
    )
    line = one_line_error(cli("simulate", "toy", "-n", "2", "--set", f"failures.replay={secret}"))
    assert "secret.txt" in line and "SECRET-TOKEN" not in line and "/bin/bash" not in line


@pytest.mark.parametrize("name", ["../x", "/abs/path", "..", "a/b", ""])
def test_a_sweep_name_stays_inside_out(tmp_path, name, one_line_error, cli):
    f = tmp_path / "sw.toml"
    f.write_text(
        f'name = {json.dumps(name)}\nscenario = "toy"\nreplications = 2\n[grid]\n"checkpoint.interval_h" = [1.0]\n'
    )
    line = one_line_error(cli("sweep", f))
    assert str(f) in line and "name" in line
    assert not (tmp_path.parent / "x").exists()


def test_a_sweep_too_large_or_too_long_is_refused_before_running(tmp_path, one_line_error, cli):
    f = tmp_path / "sw.toml"
    f.write_text(
        'scenario = "toy"\nreplications = 2\n[grid]\n"checkpoint.interval_h" = [1.0, 1e-9]\n'
    )
    line = one_line_error(cli("sweep", f, "--out", tmp_path / "o"))
    assert "point 1" in line and "events" in line
    assert not (tmp_path / "o").exists()
    f.write_text(
        'scenario = "toy"\nreplications = 2\n[grid]\n"checkpoint.interval_h" = '
        + json.dumps([1.0 + i / 1000 for i in range(400)])
        + '\n"job.duration_h" = '
        + json.dumps([5.0 + i for i in range(400)])
        + "\n"
    )
    line = one_line_error(cli("sweep", f, "--out", tmp_path / "o"))
    assert "160,000 points, more than a sweep may have (100,000)" in line


def test_fit_on_equal_or_single_lifetimes_is_a_clear_error(tmp_path, one_line_error, cli):
    f = tmp_path / "t.csv"
    f.write_text(
        "node,node_type,event,time_h,cause\n"
        + "".join(f"n{i},node,fail,10,disk\n" for i in range(5))
    )
    line = one_line_error(cli("fit", f))
    assert str(f) in line and "all of one length" in line and "at least 2 failures" in line
    f.write_text("node,node_type,event,time_h,cause\nn1,node,fail,10,disk\n")
    line = one_line_error(cli("fit", f, "--json"))
    assert "1 failure among 1 lifetime" in line


def test_philly_filter_on_a_missing_column_lists_the_columns(tmp_path, one_line_error, cli):
    f = tmp_path / "jobs.json"
    att = {"start_time": "2017-10-01 00:00:00", "end_time": "2017-10-01 01:00:00"}
    f.write_text(json.dumps([{"id": "j1", "num_gpus": 8, "attempts": [att]}]))
    line = one_line_error(cli("fit", f, "--format", "philly", "--filter", "bogus=1"))
    assert "bogus" in line and "num_gpus" in line


def test_a_binary_failure_log_is_not_utf8_text(tmp_path, one_line_error, cli):
    f = tmp_path / "t.csv"
    f.write_bytes(b"node,node_type,event,time_h,cause\n\xff\xfe\x00garbage\n")
    line = one_line_error(cli("fit", f))
    assert str(f) in line and "not UTF-8" in line


# -- outputs stay whole ----------------------------------------------------------------------------------
@pytest.mark.parametrize("err", ["EROFS", "ENOSPC"])
def test_a_failed_write_leaves_the_earlier_run_whole_and_no_temporaries(
    tmp_path, monkeypatch, err, one_line_error, cli
):
    """A read-only or full disk while `simulate --out` writes its set of files: one line, exit 2,
    the earlier run's four files unchanged, no temporary file left behind. (The disk failure is
    injected into the writer; root bypasses a read-only chmod, so a real one is not portable.)"""
    import errno
    import os

    import cprsim.io as cio

    out = tmp_path / "run"
    assert cli("simulate", "toy", "-n", "3", "--out", out).exit_code == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    real, calls = os.fdopen, []

    def failing(fd, *a, **k):  # the third file of the set fails
        calls.append(fd)
        if len(calls) == 3:
            os.close(fd)
            raise OSError(
                getattr(errno, err), os.strerror(getattr(errno, err)), str(out / "replications.csv")
            )
        return real(fd, *a, **k)

    monkeypatch.setattr(cio.os, "fdopen", failing)
    line = one_line_error(cli("simulate", "toy", "-n", "5", "--seed", "9", "--out", out))
    assert "replications.csv" in line and os.strerror(getattr(errno, err)) in line
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_impossible_trace_records_are_refused_naming_the_record(tmp_path, one_line_error, cli):
    f = tmp_path / "jobs.json"
    att = lambda a, b: {
        "start_time": f"2017-10-01 0{a}:00:00",
        "end_time": f"2017-10-01 0{b}:00:00",
    }
    f.write_text(json.dumps([{"id": "j1", "num_gpus": 8, "attempts": [att(3, 1)]}]))
    assert "job 0: attempt 0 ends before it starts" in one_line_error(
        cli("fit", f, "--format", "philly")
    )
    f.write_text(json.dumps([{"id": "j1", "num_gpus": -3, "attempts": [att(0, 1)]}]))
    assert "num_gpus must be >= 0" in one_line_error(cli("fit", f, "--format", "philly"))
    g = tmp_path / "fault.json"
    ev = lambda n, t, k: {
        "node_id": n,
        "event_time": t,
        "event_type": k,
        "fault_type": {"Level": "Hardware Failure", "Class": "GPU", "Desc": "x"},
    }
    g.write_text(json.dumps([ev(None, 1, "fault_start"), ev("n1", 2, "fault_end")]))
    assert "event 0: node_id" in one_line_error(cli("fit", g, "--format", "infinitehbd"))


def test_lanl_decommission_before_production_is_refused(tmp_path, one_line_error, cli):
    from test_traces_lanl import lanl_row, write_lanl

    f = write_lanl(
        tmp_path / "lanl.csv",
        [
            lanl_row(
                "20", 4, 1, "03/10/2003 10:00", "03/10/2003 12:00", prod="Jun-03", decom="Jan-03"
            )
        ],
    )
    assert "line 2: node decom is before node prod" in one_line_error(
        cli("fit", f, "--format", "lanl")
    )


@pytest.mark.slow
def test_fit_out_escapes_hostile_names_into_valid_toml(tmp_path, cli, example_trace):
    import tomllib

    src = example_trace
    hostile = tmp_path / 'we"ird\nname\\x].csv'
    hostile.write_bytes(src.read_bytes())
    out = tmp_path / 'model "a"\n[x].toml'
    r = cli("fit", hostile, "--out", out)
    assert r.exit_code == 0, r.output
    doc = tomllib.loads(out.read_text())
    assert set(doc) <= {"provenance", "failures", "lifecycle"} and set(doc["failures"]) == {
        "trainer",
        "embedding",
    }
    assert any(str(hostile) == v or hostile.name in str(v) for v in doc["provenance"].values())


def test_a_scenario_cut_before_its_failures_is_not_silent(tmp_path, cli):
    from cprsim import scenario as sc

    text = sc._builtin_text("cpr-production")
    f = _scenario(tmp_path, text[: text.index("[[failures.domains]]")])
    r = cli("simulate", f, "-n", "2")
    assert r.exit_code == 0 and "no failure source" in r.stderr


@pytest.mark.parametrize(
    "command", [pytest.param("fit", marks=pytest.mark.slow), "plan", "timeline", "sweep"]
)
def test_every_writing_command_survives_a_read_only_disk(tmp_path, monkeypatch, command, cli):
    """EROFS injected into every file write: exit 2, one line naming the path, and an earlier
    output at that path unchanged (root ignores a read-only chmod, so the failure is injected)."""
    import errno
    import os

    import cprsim.io as cio

    from traces_examples import example

    target = (
        tmp_path
        / {"fit": "model.toml", "plan": "plan.json", "timeline": "trace.json", "sweep": "sw"}[
            command
        ]
    )
    args = {
        "fit": ["fit", example(tmp_path), "--out", target],
        "plan": [
            "plan",
            "--embedding-servers",
            "4",
            "--trainers",
            "2",
            "--node-mtbf-h",
            "200",
            "--save-s",
            "60",
            "--load-s",
            "30",
            "--max-accuracy-loss",
            "0.001",
            "-n",
            "30",
            "--search-replications",
            "30",
            "--strategies",
            "partial",
            "--out",
            target,
        ],
        "timeline": ["simulate", "toy", "-n", "2", "--timeline", target],
        "sweep": ["sweep", _sweep_file(tmp_path), "--out", target],
    }[command]
    if command != "sweep":
        target.write_text("earlier output\n")
    real = os.fdopen

    def read_only(fd, *a, **k):
        os.close(fd)
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(target))

    monkeypatch.setattr(cio.os, "fdopen", read_only)
    r = cli(*args)
    errors = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.exit_code == 2 and len(errors) == 1 and "Traceback" not in r.output, r.output
    line = errors[0]  # (a command may print its results before it writes them)
    assert line.startswith("Error: ") and target.name in line and "Read-only file system" in line
    monkeypatch.setattr(cio.os, "fdopen", real)
    if command != "sweep":
        assert target.read_text() == "earlier output\n"
    assert not [p for p in tmp_path.rglob("*.tmp")]


def _sweep_file(tmp_path):
    f = tmp_path / "sw.toml"
    f.write_text(
        'scenario = "toy"\nreplications = 2\n[set]\n"job.duration_h" = 5.0\n[grid]\n'
        '"checkpoint.interval_h" = [1.0]\n'
    )
    return f


def test_philly_infinite_gpu_count_is_an_error(tmp_path, one_line_error, cli):
    """Found by the long fuzz: num_gpus = -Infinity (JSON extension) was an internal error."""
    f = tmp_path / "jobs.json"
    f.write_text(
        '[{"id": "j1", "num_gpus": -Infinity, "attempts": [{"start_time": "2017-10-01 00:00:00", '
        '"end_time": "2017-10-01 01:00:00"}]}]'
    )
    assert "job 0" in one_line_error(cli("fit", f, "--format", "philly"))
