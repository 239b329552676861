"""`cprsim sweep --resume` verifies what it resumes (issue 27): an output folder edited after the
sweep wrote it (a results row, the manifest, sweep.toml, config.toml, the checksums) is refused with
one line naming the file (and line) and saying to start afresh, never carried into the results; a
results.csv that is not a regular file is refused without blocking. A grid or [set] key given twice
is refused, and every point's checks (a hopeless regime included) run before the first replication.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

import pytest

SWEEP = """
name = "t"
scenario = "toy"
replications = 2
strategies = ["full"]
[grid]
"checkpoint.interval_h" = [0.5, 1.0]
"""


@pytest.fixture(scope="module")
def done(tmp_path_factory) -> tuple[Path, Path]:
    """A tiny sweep (2 points x 2 replications) run to completion once: (sweep file, its folder)."""
    from cli_helpers import run

    d = tmp_path_factory.mktemp("sweep")
    f = d / "s.toml"
    f.write_text(SWEEP)
    r = run("sweep", f, "--out", d / "o")
    assert r.exit_code == 0, r.output
    return f, d / "o"


def _copy(done: tuple[Path, Path], tmp_path: Path) -> Path:
    out = tmp_path / "o"
    shutil.copytree(done[1], out)
    return out


def _edit_line(path: Path, line: int, change) -> None:
    lines = path.read_bytes().split(b"\n")
    lines[line - 1] = change(lines[line - 1])
    path.write_bytes(b"\n".join(lines))


def _manifest(out: Path, change) -> None:
    doc = json.loads((out / "manifest.json").read_text())
    change(doc)
    (out / "manifest.json").write_text(json.dumps(doc))


def _metric(line: bytes) -> bytes:  # a metric cell's value changed (the last cell of the row)
    cells = line.split(b",")
    cells[-1] = b"12345.0" if cells[-1] != b"12345.0" else b"1.0"
    return b",".join(cells)


TAMPERING = {
    "metric value": ("results.csv:3", lambda o: _edit_line(o / "results.csv", 3, _metric)),
    "metric of the last row": (
        "results.csv:5",
        lambda o: _edit_line(o / "results.csv", 5, _metric),
    ),
    "0xff byte": (
        "results.csv:2",
        lambda o: _edit_line(o / "results.csv", 2, lambda s: s[:20] + b"\xff" + s[21:]),
    ),
    "nan161 cell": (
        "results.csv:4",
        lambda o: _edit_line(
            o / "results.csv", 4, lambda s: b",".join([*s.split(b",")[:-1], b"nan161"])
        ),
    ),
    "header": ("results.csv:1", lambda o: _edit_line(o / "results.csv", 1, lambda s: s + b",x")),
    "manifest []": ("manifest.json", lambda o: (o / "manifest.json").write_text("[]")),
    "manifest invalid": ("manifest.json", lambda o: (o / "manifest.json").write_bytes(b"\xff{")),
    "points = []": ("manifest.json", lambda o: _manifest(o, lambda d: d.update(points=[]))),
    "replications": ("manifest.json", lambda o: _manifest(o, lambda d: d.update(replications=3))),
    "sweep.toml": ("sweep.toml", lambda o: (o / "sweep.toml").write_text(SWEEP + "# edited\n")),
    "config.toml": (
        "config.toml",
        lambda o: (o / "config.toml").write_text((o / "config.toml").read_text() + "# x\n"),
    ),
    "checksum line": (
        "journal.sha256:2",
        lambda o: _edit_line(o / "journal.sha256", 2, lambda s: b"zz" + s[2:]),
    ),
    "checksums removed": ("results.csv:2", lambda o: (o / "journal.sha256").unlink()),
}


@pytest.mark.parametrize("case", list(TAMPERING))
def test_a_tampered_folder_is_refused_with_one_line(done, tmp_path, case, cli, one_line_error):
    where, tamper = TAMPERING[case]
    out = _copy(done, tmp_path)
    tamper(out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    line = one_line_error(cli("sweep", done[0], "--out", out, "--resume"))
    assert f"{out}/{where}" in line, line
    assert "start afresh" in line and "--resume" in line and "--out" in line, line
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # nothing rewritten


def test_an_intact_folder_and_a_torn_last_line_resume(done, tmp_path, cli):
    out = _copy(done, tmp_path)
    r = cli("sweep", done[0], "--out", out, "--resume")
    assert r.exit_code == 0 and "0 run now, 2 already done" in r.output, r.output
    # a kill during the last append: half of the last row written (its checksum was written first)
    data = (out / "results.csv").read_bytes()
    (out / "results.csv").write_bytes(data[: len(data) - 30])
    r = cli("sweep", done[0], "--out", out, "--resume")
    assert r.exit_code == 0 and "1 run now, 1 already done" in r.output, r.output
    for name in ("results.csv", "summary.csv", "journal.sha256"):
        assert (out / name).read_bytes() == (done[1] / name).read_bytes(), name


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
@pytest.mark.parametrize("name", ["results.csv", "manifest.json", "journal.sha256"])
def test_a_fifo_in_place_of_a_file_is_refused_without_blocking(done, tmp_path, name):
    import subprocess

    out = _copy(done, tmp_path)
    (out / name).unlink()
    os.mkfifo(out / name)
    t0 = time.monotonic()
    p = subprocess.run(
        [sys.executable, "-m", "cprsim", "sweep", str(done[0]), "--out", str(out), "--resume"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "CPRSIM_PROGRESS": "off"},
    )
    assert time.monotonic() - t0 < 30
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{out}/{name}: " in lines[0] and "not a regular file" in lines[0], (
        p.stderr
    )


@pytest.mark.parametrize(
    "text, key",
    [
        (
            '[grid]\n"checkpoint.interval_h" = [0.5, 1]\n[grid.checkpoint]\ninterval_h = [2.0]\n',
            "grid.checkpoint.interval_h: given twice",
        ),
        (
            "[grid]\ncheckpoint.interval_h = [0.5]\n[grid.checkpoint]\nsave_s = [1.0]\n"
            '[grid."checkpoint"]\n',
            None,  # TOML itself refuses a table defined twice: still one line
        ),
        (
            '[set]\n"storage.write_gbps" = 0.4\nstorage.write_gbps = 0.5\n',
            "set.storage.write_gbps: given twice",
        ),
    ],
)
def test_a_key_given_twice_is_refused(tmp_path, text, key, cli, one_line_error):
    f = tmp_path / "twice.toml"
    f.write_text('scenario = "toy"\nreplications = 2\n' + text)
    line = one_line_error(cli("sweep", f, "--out", tmp_path / "o"))
    assert str(f) in line and (key is None or key in line), line
    assert not (tmp_path / "o").exists()


def test_a_hopeless_point_is_refused_before_any_point_runs(tmp_path, cli, one_line_error):
    """Point 1 would never finish: refused (naming it) before point 0 runs, in seconds, with no
    output folder, as `cprsim simulate` refuses the same scenario."""
    f = tmp_path / "h.toml"
    f.write_text(
        'scenario = "toy"\nreplications = 2\n[grid]\n"failures.trainer.mtbf_h" = [20.0, 0.01]\n'
    )
    t0 = time.monotonic()
    line = one_line_error(cli("sweep", f, "--out", tmp_path / "o"))
    assert time.monotonic() - t0 < 10
    assert "point 1 (failures.trainer.mtbf_h=0.01" in line and "hopeless" in line, line
    assert not (tmp_path / "o").exists()


def test_a_folder_with_the_users_own_sweep_toml_resumes(tmp_path, cli):
    """The sweep keeps a sweep.toml the folder already had (not its copy): a resume does not take
    it for tampering."""
    f = tmp_path / "s.toml"
    f.write_text(SWEEP)
    out = tmp_path / "o"
    out.mkdir()
    (out / "sweep.toml").write_text("# my notes\n")
    assert cli("sweep", f, "--out", out).exit_code == 0
    first = (out / "results.csv").read_bytes()
    r = cli("sweep", f, "--out", out, "--resume")
    assert r.exit_code == 0, r.output
    assert (out / "results.csv").read_bytes() == first
    assert (out / "sweep.toml").read_text() == "# my notes\n"


def test_a_folder_without_checksums_says_why(done, tmp_path, cli, one_line_error):
    out = _copy(done, tmp_path)
    (out / "journal.sha256").unlink()
    line = one_line_error(cli("sweep", done[0], "--out", out, "--resume"))
    assert "results.csv:2" in line and "without journal.sha256" in line, line


def test_a_grid_value_with_a_line_break_is_refused(tmp_path, cli, one_line_error):
    f = tmp_path / "nl.toml"
    f.write_text('scenario = "toy"\nreplications = 2\n[grid]\n"failures.replay" = ["a\\nb"]\n')
    line = one_line_error(cli("sweep", f, "--out", tmp_path / "o"))
    assert "grid.failures.replay" in line and "line break" in line, line
