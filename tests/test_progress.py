"""Progress everywhere (cprsim/cli/progress.py): off a terminal, a long command prints a line of
progress to stderr within 10 s (done/total, ETA) and then every few seconds; SIGTERM or SIGINT ends
every long command with one line and exit status 143 or 130, nothing half-written.

The commands run in subprocesses with stderr piped (as under nohup or CI), each stopped as soon as
its first progress line is read.
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import click
import pytest

from cprsim.cli import main, progress
from cprsim.cli.progress import Progress

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT / "traces" / "examples" / "exponential-16.csv"

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


def _start(args: list[str], cwd: Path) -> tuple[subprocess.Popen, queue.Queue]:
    env = {k: v for k, v in os.environ.items() if k != progress.ENV}  # the default: auto
    proc = subprocess.Popen(
        [sys.executable, "-m", "cprsim", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    lines: queue.Queue = queue.Queue()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    return proc, lines


def _first_line(lines: queue.Queue, deadline_s: float) -> tuple[str | None, float]:
    t0 = time.monotonic()
    try:
        line = lines.get(timeout=deadline_s)
    except queue.Empty:
        return None, time.monotonic() - t0
    return line, time.monotonic() - t0


def _rest(lines: queue.Queue) -> list[str]:
    out = []
    while (line := lines.get(timeout=30)) is not None:
        out.append(line)
    return out


LINE = re.compile(
    r"^(?P<label>.+): (?P<done>\d+)/~?(?P<total>\d+) (?P<unit>[a-z ()]+?)(?: \(\d+%\))?, (\d+:)?\d+:\d\d elapsed, ETA (-|~?(\d+:)?\d+:\d\d)$"
)

LONG = {
    "simulate": ["simulate", "cpr-production", "-n", "1000000", "--out", "run"],
    "plan": [
        "plan", "cpr-production", "--max-accuracy-loss", "0.001", "-n", "100000",
        "--search-replications", "100000", "--precision", "off", "--out", "plan.json",
    ],
    "sweep": ["sweep", "sweep.toml", "--out", "swept"],
    "fit": ["fit", str(TRACE), "--bootstrap", "1000000", "--out", "model.toml"],
}  # fmt: skip
SWEEP = 'name = "long"\nscenario = "toy"\nreplications = 1000000\n[grid]\n"checkpoint.interval_h" = [0.5, 1.0]\n'


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(LONG))
def test_off_a_terminal_progress_comes_within_10_s_and_sigterm_ends_with_one_line(
    command, tmp_path
):
    (tmp_path / "sweep.toml").write_text(SWEEP)
    proc, lines = _start(LONG[command], tmp_path)
    try:
        first = None
        t0 = time.monotonic()
        while time.monotonic() - t0 < 10.0:  # a sweep first says what it runs
            line, _ = _first_line(lines, 10.0 - (time.monotonic() - t0))
            if line is None or LINE.match(line):
                first = line
                break
            assert command == "sweep" and line.startswith("long: 2 points"), line
        assert first is not None, f"no progress line within 10 s (exit {proc.poll()})"
        m = LINE.match(first)
        assert m is not None and int(m["total"]) > 0, first
        proc.send_signal(signal.SIGTERM)
        rest = _rest(lines)
        rc = proc.wait(timeout=30)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
    assert rc == 143, rest
    assert "Traceback" not in "\n".join(rest) and "Aborted!" not in "\n".join(rest)
    errors = [ln for ln in rest if ln.startswith("Error:")]
    assert len(errors) == 1 and rest[-1] == errors[0], rest
    assert errors[0].startswith(f"Error: SIGTERM: {command} stopped"), errors[0]
    assert all(LINE.match(ln) for ln in rest[:-1]), rest  # nothing else but progress
    if command != "sweep":  # written only at the end: nothing, not even a temporary file
        assert errors[0].endswith("nothing written"), errors[0]
        assert sorted(p.name for p in tmp_path.iterdir()) == ["sweep.toml"]
    else:
        assert "--resume" in errors[0]


@pytest.mark.slow
def test_sigint_ends_a_long_command_with_one_line_and_130(tmp_path):
    proc, lines = _start(["simulate", "cpr-production", "-n", "1000000"], tmp_path)
    try:
        first, _ = _first_line(lines, 10.0)
        assert first is not None and LINE.match(first), first
        proc.send_signal(signal.SIGINT)
        rest = _rest(lines)
        rc = proc.wait(timeout=30)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
    assert rc == 130, rest
    assert rest[-1].startswith("Error: SIGINT: simulate stopped at ") and "Aborted" not in rest[-1]
    assert "replications; nothing written" in rest[-1]


# -- the mechanism, in-process ----------------------------------------------------------------------
def test_lines_say_done_total_share_elapsed_and_eta(monkeypatch):
    p = Progress(200, "simulating toy", "replications", mode="lines")
    assert LINE.match(p.line()) and p.line().endswith("ETA -")  # nothing done: no rate yet
    p.advance(50)
    assert p.line().startswith("simulating toy: 50/200 replications (25%), 0:00 elapsed, ETA ")
    assert LINE.match(p.line())
    # a resumed count is done but not part of the rate
    q = Progress(100, "sweep s", "points", mode="lines")
    q.resumed(90)
    assert q.eta_s() is None
    # an estimated total grows when passed, and says it is a guess
    e = Progress(4, "planning toy", "steps", estimated=True, mode="lines")
    e.advance(5)
    assert e.total is not None and e.total > 5 and "/~" in e.line() and "ETA ~" in e.line()
    # a total learnt on the way (fit's bootstrap)
    f = Progress(None, "fitting x", "bootstrap draws", mode="lines")
    assert f.line() == "fitting x: 0 bootstrap draws, 0:00 elapsed"
    f.update(10, 40)
    assert f.state() == "10/40 bootstrap draws"


def test_the_mode_follows_stderr_and_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv(progress.ENV, raising=False)
    with (tmp_path / "log").open("w") as f:
        assert progress.progress_mode(f) == "lines"  # a file or pipe: lines
    import io

    assert progress.progress_mode(io.StringIO()) == "off"  # an in-process capture: nothing
    monkeypatch.setenv(progress.ENV, "off")
    with (tmp_path / "log").open("w") as f:
        assert progress.progress_mode(f) == "off"
    monkeypatch.setenv(progress.ENV, "sometimes")
    with pytest.raises(click.UsageError, match="CPRSIM_PROGRESS"):
        progress.progress_mode()


def test_lines_come_on_time_and_end_with_a_last_one(monkeypatch, capfd):
    monkeypatch.setattr(progress, "FIRST_LINE_S", 0.05)
    monkeypatch.setattr(progress, "EVERY_S", 0.05)
    with Progress(10, "work", "units", mode="lines") as p:
        for _ in range(10):
            time.sleep(0.03)
            p(1)
    err = capfd.readouterr().err.splitlines()
    assert len(err) >= 3 and all(ln.startswith("work: ") for ln in err), err
    assert err[-1].startswith("work: 10/10 units, done in "), err


def test_a_signal_while_writing_waits_for_the_files():
    progress.reset()
    progress.outputs_at_end()
    wrote = []
    with pytest.raises(progress.Signalled) as info, progress.signals_raise(), progress.writing():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)
        wrote.append("complete")
    assert wrote == ["complete"] and info.value.signum == signal.SIGTERM
    assert progress.stop_message("x", signal.SIGTERM) == (
        "SIGTERM: x stopped; the files written before the stop are complete"
    )
    progress.reset()


def test_a_command_s_own_stop_line_keeps_the_signal_s_exit_status():
    """calibrate turns a KeyboardInterrupt into its own line (a ClickException): with SIGTERM, the
    group keeps that line and exits 143."""
    from click.testing import CliRunner

    @click.command("stops")
    def stops() -> None:
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1)
        except KeyboardInterrupt:
            raise click.ClickException("interrupted: 3 runs kept; finish with --resume") from None

    main.add_command(stops)
    try:
        r = CliRunner().invoke(main, ["stops"])
    finally:
        main.commands.pop("stops")
    assert r.exit_code == 143, r.output
    assert r.output.strip() == ("Error: SIGTERM: interrupted: 3 runs kept; finish with --resume"), (
        r.output
    )


def test_the_fit_s_bootstrap_reports_its_draws_and_gives_the_same_fit():
    import numpy as np

    import cprsim

    t = np.random.default_rng(1).weibull(1.5, 40) * 100.0
    counted: list[int] = []
    with_progress = cprsim.fit(t, bootstrap=3, progress=counted.append)
    assert sum(counted) == 3 * 5  # 3 draws for each of the 5 families
    assert cprsim.fit(t, bootstrap=3).as_dict() == with_progress.as_dict()
