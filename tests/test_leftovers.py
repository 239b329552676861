"""Nothing left behind (issue 27 item 6): the temporaries of a killed writer are removed by the next
write into the folder (only those whose writer is gone); a failed `simulate --out` or `sweep --out`
leaves no folder it created (and never removes one that was there); `kill -9` of `cprsim
calibrate` leaves no worker, forkserver or resource tracker behind."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cprsim import io as cio

LINUX = sys.platform.startswith("linux")


def _dead_pid() -> int:
    """A pid no process has (a child that has exited and been reaped)."""
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


# -- stale temporaries -------------------------------------------------------------------------------
@pytest.mark.skipif(os.name != "posix", reason="the writer's pid is checked on POSIX only")
def test_a_rerun_removes_the_temporaries_of_a_killed_writer_only(tmp_path, cli):
    out = tmp_path / "run"
    assert cli("simulate", "toy", "-n", "2", "--out", out).exit_code == 0
    dead, host = _dead_pid(), cio._HOST
    stale = [
        out / f".config.toml.{host}-{dead}-abcd1234.tmp",
        out / f".summary.json.{host}-{dead}-x_9z8y7w.tmp",
    ]
    live = out / f".summary.json.{host}-{os.getppid()}-livewrit.tmp"  # a writer still running
    other = out / f".notes.txt.{host}-{dead}-abcd1234.tmp"  # not a file of the run
    elsewhere = out / f".config.toml.0badcafe-{dead}-abcd1234.tmp"  # another host's writer
    strange = out / f".config.toml.bak.{host}-{dead}-abcd1234.tmp"  # not a name we make
    for f in (*stale, live, other, elsewhere, strange):
        f.write_text("half")
    assert cli("simulate", "toy", "-n", "2", "--out", out).exit_code == 0
    assert not any(f.exists() for f in stale)
    assert live.exists() and other.exists() and elsewhere.exists() and strange.exists()


@pytest.mark.skipif(os.name != "posix", reason="the writer's pid is checked on POSIX only")
def test_temporaries_name_their_writer_and_an_older_unnamed_one_is_stale(tmp_path):
    seen = []
    real = cio.tempfile.mkstemp

    def spy(*a, **k):
        fd, name = real(*a, **k)
        seen.append(Path(name).name)
        return fd, name

    cio.tempfile.mkstemp, saved = spy, cio.tempfile.mkstemp
    try:
        cio.atomic_write_text(tmp_path / "a.txt", "x")
    finally:
        cio.tempfile.mkstemp = saved
    assert seen and seen[0].startswith(f".a.txt.{cio._HOST}-{os.getpid()}-"), seen
    assert seen[0].endswith(".tmp")
    old = tmp_path / ".a.txt.abcd1234.tmp"  # an earlier cprsim's name: no pid
    old.write_text("half")
    os.utime(old, (cio._STARTED - 60, cio._STARTED - 60))
    new = tmp_path / ".a.txt.efgh5678.tmp"  # written since this process started: maybe live
    other = tmp_path / ".a.txt.bak.tmp"  # not a temporary's shape: never touched
    other.write_text("mine")
    os.utime(other, (cio._STARTED - 60, cio._STARTED - 60))
    new.write_text("half")
    assert cio.remove_stale_temporaries(tmp_path, ["a.txt"]) == [old.name]
    assert new.exists() and other.exists()


# -- a failed --out leaves no folder it created --------------------------------------------------------
def _no_space(monkeypatch) -> None:
    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(cio.os, "fsync", full)


def test_a_failed_simulate_out_leaves_no_folder_it_created(tmp_path, monkeypatch, cli):
    _no_space(monkeypatch)
    out = tmp_path / "new" / "run"
    r = cli("simulate", "toy", "-n", "2", "--out", out)
    assert r.exit_code == 2 and "No space left" in r.output, r.output
    assert not (tmp_path / "new").exists()
    kept = tmp_path / "kept"  # a folder that was there: kept, and as it was
    kept.mkdir()
    (kept / "mine.txt").write_text("mine")
    assert cli("simulate", "toy", "-n", "2", "--out", kept).exit_code == 2
    assert sorted(p.name for p in kept.iterdir()) == ["mine.txt"]


SWEEP = """
scenario = "toy"
replications = 2
[set]
"failures.embedding.family" = "exponential"
"failures.embedding.mtbf_h" = 5.0
"lifecycle.retirement.window_h" = 1000.0
[grid]
"lifecycle.retirement.failures" = [1000, 1]
"""


def test_a_failed_sweep_keeps_the_points_it_finished(tmp_path, cli, one_line_error):
    """Point 1 cannot run (its fleet runs out of machines) after point 0 ran: nothing computed is
    thrown away (point 0's rows stay in the folder, and the folder a user had keeps what it held)."""
    f = tmp_path / "s.toml"
    f.write_text(SWEEP)
    out = tmp_path / "new" / "o"
    line = one_line_error(cli("sweep", f, "--out", out))
    assert "point 1" in line, line
    rows = (out / "results.csv").read_text().splitlines()
    assert len(rows) == 1 + 2 and all(r.startswith("0,") for r in rows[1:]), rows
    there = tmp_path / "there"
    there.mkdir()
    (there / "sweep.toml").write_text(SWEEP)
    one_line_error(cli("sweep", there / "sweep.toml", "--out", there))
    assert (there / "sweep.toml").read_text() == SWEEP


def test_a_sweep_that_fails_before_any_point_leaves_no_folder_it_created(
    tmp_path, monkeypatch, cli, one_line_error
):
    """A failure while no row is journaled removes the folder the sweep made (the failure is forced
    at the end, with the journal taken as empty: the path a fresh sweep takes when its first point
    fails)."""
    from cprsim.sweep import runner

    def boom(*a, **k):
        raise runner.SweepError("no point can run")

    monkeypatch.setattr(runner, "write_summary", boom)
    monkeypatch.setattr(runner, "has_rows", lambda out: False)
    f = tmp_path / "s.toml"
    f.write_text('scenario = "toy"\nreplications = 2\n[grid]\n"checkpoint.interval_h" = [0.5, 1]\n')
    one_line_error(cli("sweep", f, "--out", tmp_path / "new" / "o"))
    assert not (tmp_path / "new").exists()


def test_a_sweep_without_space_leaves_no_folder_it_created(tmp_path, monkeypatch, cli):
    f = tmp_path / "s.toml"
    f.write_text('scenario = "toy"\nreplications = 2\n[grid]\n"checkpoint.interval_h" = [0.5, 1]\n')
    _no_space(monkeypatch)
    r = cli("sweep", f, "--out", tmp_path / "o")
    assert r.exit_code == 2 and "No space left" in r.output, r.output
    assert not (tmp_path / "o").exists()


# -- kill -9 of cprsim calibrate ------------------------------------------------------------------------
def _session(sid: int) -> list[int]:
    """The live (not zombie) processes of session ``sid``."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            text = Path(f"/proc/{d}/stat").read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split()
        if int(fields[3]) == sid and fields[0] not in ("Z", "X"):
            out.append(int(d))
    return out


@pytest.mark.slow
@pytest.mark.dlrm
@pytest.mark.skipif(not LINUX, reason="reads the process tree in /proc")
def test_kill_9_of_calibrate_leaves_no_process_behind(tmp_path):
    pytest.importorskip("torch")
    proc = subprocess.Popen(
        [sys.executable, "-m", "cprsim", "calibrate", "--preset", "quick", "--jobs", "2"]
        + ["--threads-per-job", "1", "--no-costs", "--out", str(tmp_path / "c")],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "CPRSIM_PROGRESS": "off"},
    )
    sid = proc.pid
    try:
        deadline = time.monotonic() + 120
        # the parent, a forkserver, a resource tracker and 2 workers
        while time.monotonic() < deadline and len(_session(sid)) < 5:
            assert proc.poll() is None, "calibrate ended before its workers started"
            time.sleep(0.1)
        assert len(_session(sid)) >= 5, _session(sid)
        os.kill(proc.pid, signal.SIGKILL)  # the parent only: its workers must follow
        proc.wait(10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and _session(sid):
            time.sleep(0.1)
        left = _session(sid)
        assert not left, f"{len(left)} processes outlived calibrate"
    finally:
        with_left = _session(sid)
        for pid in with_left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_sweep_stopped_before_its_manifest_leaves_no_folder(tmp_path, monkeypatch):
    """A signal (a KeyboardInterrupt) before the manifest: nothing to resume, nothing left; after
    it: the folder stays for a resume."""
    import cprsim.sweep.files as files
    import cprsim.sweep.runner as runner
    from cprsim.sweep import load_sweep

    f = tmp_path / "s.toml"
    f.write_text('scenario = "toy"\nreplications = 2\n[grid]\n"checkpoint.interval_h" = [0.5, 1]\n')

    def stop(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(files, "atomic_write_json", stop)
    with pytest.raises(KeyboardInterrupt):
        runner.run_sweep(load_sweep(f), tmp_path / "o", sweep_text=f.read_bytes())
    assert not (tmp_path / "o").exists()
    monkeypatch.undo()
    monkeypatch.setattr(runner.Journal, "append", stop)
    with pytest.raises(KeyboardInterrupt):
        runner.run_sweep(load_sweep(f), tmp_path / "o", sweep_text=f.read_bytes())
    assert (tmp_path / "o" / "manifest.json").exists()
