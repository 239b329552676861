"""`cprsim sweep` leaves no orphans: kill -9, SIGTERM and Ctrl-C of the sweep end its workers (and a
forkserver); a signalled sweep ends with one line and resumes to the bytes of an uninterrupted run;
an unreachable scheduler leaves no output folder."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli_helpers import one_line_error, run

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="reads the process tree in /proc"
)

SWEEP = """
name = "sig"
scenario = "toy"
replications = {reps}
strategies = ["full", {{ name = "partial", label = "cpr" }}]
[set]
"storage.write_gbps" = 0.4
[grid]
"checkpoint.interval_h" = [0.2, 0.3, 0.5, 0.7, 1.0, 1.5, 2.0]
"""


def write_sweep(tmp_path: Path, reps: int) -> Path:
    """14 points; reps=1500 runs for well over 20 s on two workers, reps=150 for a few seconds."""
    p = tmp_path / f"sweep{reps}.toml"
    p.write_text(SWEEP.format(reps=reps))
    return p


# -- the process tree, from /proc ------------------------------------------------------------------
def _stat(pid: int) -> tuple[int, str, int] | None:
    """(parent pid, state, session id) of a live process, None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    fields = text[text.rindex(")") + 2 :].split()  # after "pid (comm) "
    return int(fields[1]), fields[0], int(fields[3])


def _all() -> dict[int, tuple[int, str, int]]:
    out = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            s = _stat(int(d))
            if s is not None:
                out[int(d)] = s
    return out


def descendants(root: int) -> set[int]:
    """Children of ``root``, their children, and so on (zombies left out)."""
    procs = _all()
    found: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {
            p for p, (ppid, state, _) in procs.items() if ppid in frontier and state != "Z"
        } - found
        found |= frontier
    return found


def session(sid: int) -> set[int]:
    """Every live process of session ``sid`` (the sweep's, started with start_new_session): orphans
    reparented to init keep it."""
    return {p for p, (_, state, s) in _all().items() if s == sid and state != "Z"}


def wait_for(cond, timeout: float, step: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(step)
    return bool(cond())


def start(args: list, **kw) -> subprocess.Popen:
    return subprocess.Popen(
        [str(a) for a in args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        text=True,
        **kw,
    )


def stop_lines(err: str) -> list[str]:
    """The lines of a signalled sweep's stderr but its progress (off a terminal: the sweep's
    description, then a line every few seconds, all before the last line)."""
    lines = [ln for ln in err.splitlines() if ln.strip()]
    progress = [ln for ln in lines if ln.startswith(("sig: ", "sweep sig: "))]
    assert lines[: len(progress)] == progress, err  # the stop's line comes last
    return lines[len(progress) :]


def cleanup(proc: subprocess.Popen) -> None:
    """Whatever happened: nothing of the sweep's session survives the test."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    for p in session(proc.pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(p, signal.SIGKILL)
    try:
        proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:  # pragma: no cover
        pass


def wait_for_workers(proc: subprocess.Popen, out: Path, n: int) -> set[int]:
    """Wait until the sweep runs (its journal exists) and has at least ``n`` descendants."""
    ok = wait_for(
        lambda: (
            proc.poll() is not None
            or ((out / "results.csv").exists() and len(descendants(proc.pid)) >= n)
        ),
        timeout=90,
    )
    assert ok and proc.poll() is None, (
        f"the sweep ended before its workers were seen: {proc.returncode}"
    )
    tree = descendants(proc.pid)
    assert len(tree) >= n, tree
    return tree


def assert_all_gone(proc: subprocess.Popen, tree: set[int], timeout: float = 5.0) -> None:
    gone = wait_for(
        lambda: not session(proc.pid) and not any(_stat(p) and _stat(p)[1] != "Z" for p in tree),
        timeout=timeout,
    )
    left = {p: Path(f"/proc/{p}/cmdline").read_bytes()[:120] for p in session(proc.pid) if _stat(p)}
    assert gone, f"processes left {timeout} s after the sweep died: {left}"


def points_in(journal: Path) -> int:
    lines = journal.read_text().splitlines()[1:] if journal.exists() else []
    return len({ln.split(",", 1)[0] for ln in lines if ln})


# -- kill -9 -----------------------------------------------------------------------------------------
def test_kill_9_of_the_sweep_ends_its_workers(tmp_path):
    """`cprsim sweep --jobs 2` (workers forked from the sweep) killed with kill -9: its workers
    exit by themselves within 5 s (PR_SET_PDEATHSIG, and the watcher thread)."""
    out = tmp_path / "o"
    proc = start(
        [
            sys.executable,
            "-m",
            "cprsim",
            "sweep",
            write_sweep(tmp_path, 1500),
            "--out",
            out,
            "--jobs",
            "2",
        ]
    )
    try:
        tree = wait_for_workers(proc, out, 2)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        assert proc.returncode == -signal.SIGKILL
        assert_all_gone(proc, tree)
    finally:
        cleanup(proc)


FORKSERVER_SCRIPT = """
import sys, threading, time
from pathlib import Path


def main():
    # a running thread: LocalWorkers then starts its workers from a forkserver, not by fork
    threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()
    from cprsim.sweep import load_sweep, run_sweep
    from cprsim.sweep.runner import LocalWorkers

    with LocalWorkers(2) as workers:
        print(workers.method, flush=True)
        run_sweep(load_sweep(Path(sys.argv[1])), Path(sys.argv[2]), workers=workers)


if __name__ == "__main__":
    main()
"""


@pytest.mark.slow
def test_kill_9_of_the_sweep_ends_its_forkserver_and_its_workers(tmp_path):
    """The workers started from a forkserver (the sweep runs a thread): kill -9 of the sweep ends
    the workers, the forkserver and the resource tracker (before the fix all three stayed: the
    workers hold the forkserver's pipe, and waited forever on their queue)."""
    script = tmp_path / "forkserver_sweep.py"
    script.write_text(FORKSERVER_SCRIPT)
    out = tmp_path / "o"
    proc = start([sys.executable, script, write_sweep(tmp_path, 1500), out], cwd=tmp_path)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "forkserver"
        tree = wait_for_workers(proc, out, 4)  # resource tracker, forkserver, two workers
        assert any(_stat(p) and _stat(p)[0] != proc.pid for p in tree), (
            "no worker below the forkserver"
        )
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        assert_all_gone(proc, tree)
    finally:
        cleanup(proc)


# -- SIGTERM, SIGINT ---------------------------------------------------------------------------------
@pytest.mark.slow
def test_sigterm_stops_the_workers_with_one_line_and_resume_gives_the_same_bytes(tmp_path):
    sweep = write_sweep(tmp_path, 150)
    ref = tmp_path / "ref"
    r = run("sweep", sweep, "--out", ref, "--jobs", "2")
    assert r.exit_code == 0, r.output
    out = tmp_path / "o"
    proc = start([sys.executable, "-m", "cprsim", "sweep", sweep, "--out", out, "--jobs", "2"])
    try:
        tree = wait_for_workers(proc, out, 2)
        wait_for(
            lambda: proc.poll() is not None or points_in(out / "results.csv") >= 2,
            timeout=60,
            step=0.01,
        )
        assert proc.poll() is None, "the sweep finished before it could be signalled"
        os.kill(proc.pid, signal.SIGTERM)
        _, err = proc.communicate(timeout=15)
        assert proc.returncode == 128 + signal.SIGTERM, err
        lines = stop_lines(err)
        assert len(lines) == 1 and lines[0].startswith("Error: SIGTERM"), err
        assert "--resume" in lines[0] and "Traceback" not in err
        assert_all_gone(proc, tree)
    finally:
        cleanup(proc)
    assert not (out / "summary.csv").exists()  # the sweep did not finish
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]  # nothing half-written
    r = run("sweep", sweep, "--out", out, "--resume", "--jobs", "2")
    assert r.exit_code == 0, r.output
    names = sorted(p.name for p in ref.iterdir())
    assert sorted(p.name for p in out.iterdir()) == names
    for name in names:
        assert (out / name).read_bytes() == (ref / name).read_bytes(), name


def test_ctrl_c_to_the_process_group_stops_the_sweep_quietly(tmp_path):
    """A terminal's Ctrl-C reaches every process of the group: the workers ignore it, the sweep
    stops them and ends with one line and exit code 130 (no worker traceback)."""
    out = tmp_path / "o"
    proc = start(
        [
            sys.executable,
            "-m",
            "cprsim",
            "sweep",
            write_sweep(tmp_path, 1500),
            "--out",
            out,
            "--jobs",
            "2",
        ]
    )
    try:
        tree = wait_for_workers(proc, out, 2)
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=15)
        assert proc.returncode == 128 + signal.SIGINT, err
        lines = stop_lines(err)
        assert len(lines) == 1 and lines[0].startswith("Error: SIGINT"), err
        assert "Traceback" not in err and "KeyboardInterrupt" not in err
        assert_all_gone(proc, tree)
    finally:
        cleanup(proc)
    r = run("sweep", write_sweep(tmp_path, 1500), "--out", out)
    assert "--resume" in one_line_error(r)  # what the sweep left is resumable, not overwritten


# -- an unreachable scheduler --------------------------------------------------------------------------
@pytest.mark.slow
def test_unreachable_scheduler_leaves_no_output_folder(tmp_path):
    pytest.importorskip("distributed")
    out = tmp_path / "o"
    t0 = time.monotonic()
    line = one_line_error(
        run(
            "sweep",
            write_sweep(tmp_path, 4),
            "--out",
            out,
            "--scheduler",
            "tcp://127.0.0.1:1",
            "--connect-timeout",
            "2",
        )
    )
    assert time.monotonic() - t0 < 15
    assert "tcp://127.0.0.1:1" in line and "cannot connect" in line, line
    assert not out.exists()
