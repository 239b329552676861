"""One bounded reader for every input (issue 27, items 2 and 7).

Every input slot of the CLI refuses, at once and in one line naming the file, a named pipe (which
would block forever), a device (/dev/zero: read forever), a 3 GiB sparse file (a size over the
cap of its kind, refused before reading) and, for configuration files, a TOML over the config cap
(a million keys would spend minutes in the parser). No error shows the content of the file: a
foreign file with a secret in it is refused by line and column, never by its text.
"""

from __future__ import annotations

import csv
import os
import time
from pathlib import Path

import pytest

from cprsim.errors import InputError
from cprsim.io import MAX_CONFIG_BYTES, MAX_DATA_BYTES, input_cap, read_input_text

SECRET = "SECRET-TOKEN-4242"
SCHEMA = 'label = "click"\ncategorical = ["user"]\ndense = ["price"]\nheld_out = 0.25\n'


def _schema(d: Path) -> Path:
    p = d / "schema.toml"
    p.write_text(SCHEMA)
    return p


def _data(d: Path) -> Path:
    p = d / "log.csv"
    with p.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["user", "price", "click"])
        w.writerows([[f"u{i % 7}", str(i % 5), str(i % 2)] for i in range(40)])
    return p


#: slot -> (arguments around the file P, whether the slot takes a configuration file)
SLOTS = {
    "simulate FILE": (lambda d, p: ["simulate", p, "-n", "2"], True),
    "show FILE": (lambda d, p: ["show", p], True),
    "sweep FILE": (lambda d, p: ["sweep", p, "--out", d / "o"], True),
    "simulate --model": (lambda d, p: ["simulate", "toy", "-n", "2", "--model", p], True),
    "plan --calibration": (
        lambda d, p: ["plan", "toy", "--max-accuracy-loss", "0.001", "--calibration", p],
        True,
    ),
    "calibrate --schema": (
        lambda d, p: [
            "calibrate",
            "--data",
            _data(d),
            "--schema",
            p,
            "--no-costs",
            "--out",
            d / "c",
        ],
        True,
    ),
    "plot calibration": (lambda d, p: ["plot", "calibration", p, "-o", d / "x.png"], True),
    "calibrate --refit": (lambda d, p: ["calibrate", "--refit", p], True),
    "calibrate --show": (lambda d, p: ["calibrate", "--show", p], True),
    "fit LOG": (lambda d, p: ["fit", p], False),
    "fit LOG (JSON)": (lambda d, p: ["fit", p, "--format", "infinitehbd"], False),
    "plot fit": (lambda d, p: ["plot", "fit", p, "-o", d / "x.png"], False),
    "plot overhead RESULTS": (lambda d, p: ["plot", "overhead", p, "-o", d / "x.png"], False),
    "plot overhead --plan": (
        lambda d, p: ["plot", "overhead", d, "--plan", p, "-o", d / "x.png"],
        False,
    ),
    "calibrate --validate": (lambda d, p: ["calibrate", "--validate", p, "--out", d / "v"], False),
    "calibrate --data": (
        lambda d, p: [
            "calibrate",
            "--data",
            p,
            "--schema",
            _schema(d),
            "--no-costs",
            "--out",
            d / "c",
        ],
        False,
    ),
    "failures.replay": (
        lambda d, p: ["simulate", "toy", "-n", "2", "--set", f"failures.replay={p}"],
        False,
    ),
    "access --counts": (lambda d, p: ["access", "--counts", p], False),
    "access --tables": (lambda d, p: ["access", "--tables", p], False),
}
CONFIG_SLOTS = [k for k, (_, config) in SLOTS.items() if config]


def _run(cli, one_line_error, slot: str, d: Path, p: Path | str) -> str:
    args, _ = SLOTS[slot]
    t = time.perf_counter()
    line = one_line_error(cli(*args(d, p)))
    assert time.perf_counter() - t < 5, f"{slot}: {time.perf_counter() - t:.1f} s"
    return line


@pytest.fixture(scope="module", autouse=True)
def warm(tmp_path_factory):
    """Each slot run once on a missing file: its modules imported, so the timings below are the
    readers' own (an import is paid once per process, not per input)."""
    from cli_helpers import run

    d = tmp_path_factory.mktemp("warm")
    for args, _ in SLOTS.values():
        run(*args(d, d / "missing"))


@pytest.fixture
def box(tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    return d


@pytest.mark.parametrize("slot", list(SLOTS))
def test_a_named_pipe_is_refused_not_waited_on(box, slot, cli, one_line_error):
    p = box / "input.csv"
    os.mkfifo(p)
    line = _run(cli, one_line_error, slot, box, p)
    assert "input.csv" in line and "named pipe" in line and "not a regular file" in line, line
    assert not (box / "o").exists() and not (box / "c").exists()


@pytest.mark.parametrize("slot", list(SLOTS))
def test_a_device_is_refused_not_read(box, slot, cli, one_line_error):
    line = _run(cli, one_line_error, slot, box, "/dev/zero")
    assert "/dev/zero" in line and "a device, not a regular file" in line, line


@pytest.mark.parametrize("slot", list(SLOTS))
def test_a_3_gib_sparse_file_is_refused_before_reading(box, slot, cli, one_line_error):
    p = box / "big.csv"
    with p.open("wb"):
        pass
    os.truncate(p, 3 * 2**30)
    line = _run(cli, one_line_error, slot, box, p)
    cap = MAX_CONFIG_BYTES if SLOTS[slot][1] else MAX_DATA_BYTES
    assert "big.csv" in line and "3,221,225,472 bytes, more than a" in line, line
    assert f"({cap:,} bytes;" in line and "CPRSIM_MAX_" in line, line


@pytest.mark.parametrize("slot", CONFIG_SLOTS)
def test_an_oversized_configuration_is_refused_before_parsing(box, slot, cli, one_line_error):
    """2 MiB of unknown keys (a 12 MB file of 10^6 keys spent minutes in the parser): refused by
    its size alone, before the TOML parser sees it."""
    p = box / "huge.toml"
    body = "".join(f"k{i} = {i}\n" for i in range(200_000))
    assert len(body) > MAX_CONFIG_BYTES
    p.write_text(body)
    line = _run(cli, one_line_error, slot, box, p)
    assert "huge.toml" in line and "more than a" in line and "CPRSIM_MAX_CONFIG_MB" in line, line


FOREIGN = {
    "passwd": f"root:x:0:0:{SECRET}:/root:/bin/bash\nbob:x:1000:1000::/home/bob:/bin/sh\n",
    "toml": f'api_key = "{SECRET}"\nuser = "{SECRET}-2"\n',
    "json": f'{{"password": "{SECRET}"}}\n',
}


@pytest.mark.parametrize("kind", list(FOREIGN))
@pytest.mark.parametrize("slot", list(SLOTS))
def test_a_foreign_file_is_refused_without_showing_its_content(
    box, slot, kind, cli, one_line_error
):
    p = box / f"secret.{kind}"
    p.write_text(FOREIGN[kind])
    line = _run(cli, one_line_error, slot, box, p)
    if slot == "plot overhead --plan" and kind == "json":
        pass  # a JSON object is a plan to the reader: the error is then the empty results folder
    elif slot == "plot overhead RESULTS":  # cprsim/sweep/results.py names the folder
        assert "results.csv" in line or "replications.csv" in line, line
    else:
        assert f"secret.{kind}" in line, line
    for leak in (SECRET, "/bin/bash", "root:x", "bob"):
        assert leak not in line, line


def test_calibrate_data_names_the_schemas_column_never_the_files_header(box, cli, one_line_error):
    """The issue's case: ``--data /etc/passwd --schema S`` showed the file's first line."""
    p = box / "passwd"
    p.write_text(FOREIGN["passwd"])
    line = _run(cli, one_line_error, "calibrate --data", box, p)
    assert "no column 'click'" in line and "label" in line and "1 column of its header" in line
    assert SECRET not in line


def test_a_bad_cell_is_named_by_line_and_column_not_shown(box, cli, one_line_error):
    """Data files: a bad cell names its line and the schema's column, never its value."""
    p = box / "log.csv"
    p.write_text(f"user,price,click\nu1,1,0\nu2,{SECRET},1\n" + "u3,2,0\n" * 8)
    line = _run(cli, one_line_error, "calibrate --data", box, p)
    assert "line 3" in line and "'price'" in line and SECRET not in line
    p.write_text(f"node,node_type,event,time_h,cause\na,node,{SECRET},1,\n")
    line = _run(cli, one_line_error, "fit LOG", box, p)
    assert "line 2: column event" in line and SECRET not in line
    p.write_text(f"node,node_type,event,time_h,cause\na,node,fail,{SECRET},\n")
    line = _run(cli, one_line_error, "fit LOG", box, p)
    assert "line 2: column time_h" in line and SECRET not in line
    p.write_text(f"table,count,rows\nt,5,10\nt,{SECRET},3\n")
    line = _run(cli, one_line_error, "access --counts", box, p)
    assert "line 3: column count" in line and SECRET not in line


def test_plan_applies_to_overhead_only(box, cli, one_line_error):
    """``plot frontier R --plan FILE`` ignored FILE (a pipe or /dev/zero ran on unnoticed)."""
    p = box / "plan.json"
    os.mkfifo(p)
    for kind in ("frontier", "pls", "breakdown", "fit", "calibration", "timeline"):
        line = _run_args(cli, one_line_error, "plot", kind, box, "--plan", p, "-o", box / "x.png")
        assert "--plan" in line and "only to overhead" in line, line


def _run_args(cli, one_line_error, *args) -> str:
    t = time.perf_counter()
    line = one_line_error(cli(*args))
    assert time.perf_counter() - t < 5
    return line


def test_the_timeline_reads_its_folder_through_the_bounded_reader(box, cli, one_line_error):
    from cprsim.plots.gantt import read_events

    os.mkfifo(box / "events.csv")
    with pytest.raises(InputError, match=r"events\.csv: a named pipe"):
        read_events(box / "events.csv")
    os.mkfifo(box / "config.toml")
    line = _run_args(cli, one_line_error, "plot", "timeline", box, "-o", box / "x.png")
    assert "config.toml: a named pipe" in line


def test_the_caps_are_overridable_and_checked(box, monkeypatch):
    p = box / "s.toml"
    p.write_text("x = 1\n" * 1000)  # 6,000 bytes
    monkeypatch.setenv("CPRSIM_MAX_CONFIG_MB", "0.001")  # 1,048 bytes
    assert input_cap("config") == 1048
    with pytest.raises(InputError, match=r"s.toml: 6,000 bytes, more than a scenario .*1,048 b"):
        read_input_text(p, "scenario")
    monkeypatch.setenv("CPRSIM_MAX_CONFIG_MB", "1")
    assert read_input_text(p, "scenario").count("x = 1") == 1000
    monkeypatch.setenv("CPRSIM_MAX_INPUT_MB", "lots")
    with pytest.raises(InputError, match="CPRSIM_MAX_INPUT_MB: expected a positive number of MiB"):
        input_cap("data")
    monkeypatch.delenv("CPRSIM_MAX_INPUT_MB")
    assert input_cap("data") == MAX_DATA_BYTES == 256 * 2**20


def test_a_file_that_grows_past_its_cap_while_read_is_refused(box, monkeypatch):
    """The cap holds on the bytes read, not only on the size the file had when checked (a kernel
    file says 0 bytes; a log may grow while read)."""
    from cprsim.io import open_input_binary

    p = box / "grows.csv"
    p.write_text("a" * 100)
    f = open_input_binary(p, "data file", 150)
    with p.open("a") as g:
        g.write("b" * 100)
    with f, pytest.raises(InputError, match=r"grows.csv: more than a data file may have \(150 b"):
        f.read()
