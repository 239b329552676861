"""Progress and stopping, the same for every long command (simulate, plan, sweep, fit, calibrate).

**Progress** (:class:`Progress`) goes to stderr, where stdout stays the command's result:

* on a terminal, a rich bar: done/total, elapsed time, ETA (removed when the work ends);
* off a terminal (nohup, CI, a pipe, a notebook's subprocess), one line at a time::

      simulating toy: 120/1000 replications (12%), 0:06 elapsed, ETA 0:44

  the first :data:`FIRST_LINE_S` seconds after the work starts, then every :data:`EVERY_S` seconds,
  less often as the work goes on (a twelfth of the time elapsed, at most every
  :data:`MAX_EVERY_S` seconds: about 60 lines for an hour), and a last line when the work ends
  if any was printed;
* nothing where stderr is not a file at all (an in-process capture such as click's CliRunner).

``CPRSIM_PROGRESS`` overrides the choice: ``bar``, ``lines``, ``off`` (default ``auto``).

**Stopping.** :func:`signals_raise` turns SIGINT and SIGTERM into :class:`Signalled` (a
``KeyboardInterrupt``: what already ends cleanly on Ctrl-C ends cleanly on SIGTERM), raised in the
main thread; a second signal exits at once (like ``kill -9``). ``cprsim``'s group installs it
around every command and turns it into one line on stderr and exit status 128 + the signal's
number (130 for SIGINT, 143 for SIGTERM): :func:`stop_message` says what the command had done
(its :class:`Progress`) and whether it had written anything. Outputs are written inside
:func:`writing`, where a signal waits until the files are complete (each is written to a temporary
file and renamed: a reader never sees half of one).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from types import TracebackType
from typing import Any, TextIO

import click

#: the environment variable that chooses how progress is shown: auto, bar, lines, off
ENV = "CPRSIM_PROGRESS"
MODES = ("auto", "bar", "lines", "off")
#: off a terminal: the first line this many seconds after the work starts
FIRST_LINE_S = 3.0
#: then one every this many seconds at the most often ...
EVERY_S = 5.0
#: ... and at the least often
MAX_EVERY_S = 60.0


def _fmt(s: float) -> str:
    """Seconds as ``m:ss`` or ``h:mm:ss``."""
    s = int(round(s))
    return (
        f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"
    )


def progress_mode(stream: TextIO | None = None) -> str:
    """How progress is shown on ``stream`` (default stderr): ``bar`` on a terminal, ``lines`` on a
    file or pipe, ``off`` on a stream that is no file (an in-process capture); ``CPRSIM_PROGRESS``
    (bar, lines, off) overrides it."""
    wanted = os.environ.get(ENV, "auto").strip().lower() or "auto"
    if wanted not in MODES:
        raise click.UsageError(f"{ENV}={os.environ.get(ENV)!r}: must be one of {', '.join(MODES)}")
    if wanted != "auto":
        return wanted
    f = sys.stderr if stream is None else stream
    try:
        if f.isatty():
            return "bar"
        f.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is an OSError
        return "off"
    return "lines"


class Progress:
    """Progress of one piece of long work on stderr (see the module's docstring), as a context
    manager. ``total``: the units of work (None: not known yet, :meth:`update` may give it);
    ``unit``: what they are (``"replications"``); ``estimated``: the total is a guess (shown
    ``~40``; grows when passed).

    Call it as ``progress(n)`` (or :meth:`advance`) when ``n`` units are done,
    ``progress(n, resumed=True)`` (or :meth:`resumed`) for units found already done (kept out of
    the rate behind the ETA), :meth:`update` with the count done (and the total) so far. ``what``:
    the last unit's name, shown beside the bar.
    """

    def __init__(
        self,
        total: int | None,
        label: str,
        unit: str = "",
        *,
        estimated: bool = False,
        mode: str | None = None,
    ) -> None:
        self.total = total
        self.label = label
        self.unit = unit
        self.estimated = estimated
        self.done = 0
        self._skipped = 0  # resumed: done before this run, not part of its rate
        self.mode = mode if mode is not None else progress_mode()
        self._stream: TextIO = sys.stderr
        self._t0 = time.monotonic()
        self._lines = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._bar: Any = None
        self._task: Any = None
        self.finished = False

    # -- the state, as a line ------------------------------------------------------------------
    def _total_text(self) -> str:
        if self.total is None:
            return ""
        return f"/{'~' if self.estimated else ''}{self.total}"

    def state(self) -> str:
        """What is done, e.g. ``120/1000 replications``."""
        return f"{self.done}{self._total_text()}" + (f" {self.unit}" if self.unit else "")

    def eta_s(self) -> float | None:
        """Seconds left at the rate so far (None: not known yet)."""
        ran = self.done - self._skipped
        if self.total is None or ran <= 0:
            return None
        el = time.monotonic() - self._t0
        return max(0.0, el / ran * (self.total - self.done))

    def line(self) -> str:
        """One line of progress: done/total (share), elapsed, ETA."""
        el = time.monotonic() - self._t0
        share = (
            f" ({100 * self.done / self.total:.0f}%)" if self.total and not self.estimated else ""
        )
        text = f"{self.label}: {self.state()}{share}, {_fmt(el)} elapsed"
        if self.total is None:
            return text
        eta = self.eta_s()
        if eta is None:
            return text + ", ETA -"
        return text + f", ETA {'~' if self.estimated else ''}{_fmt(eta)}"

    # -- updates ---------------------------------------------------------------------------------
    def __call__(self, n: int = 1, what: str = "", resumed: bool = False) -> None:
        if resumed:
            self.resumed(n, what)
        else:
            self.advance(n, what)

    def advance(self, n: int = 1, what: str = "") -> None:
        """``n`` more units done (``what``: the last one's name, shown beside the bar)."""
        with self._lock:
            self.done += n
            self._grow()
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done, total=self.total, last=what)

    def resumed(self, n: int, what: str = "") -> None:
        """``n`` units found already done (a resumed run): counted, but not in the ETA's rate."""
        with self._lock:
            self.done += n
            self._skipped += n
            self._t0 = time.monotonic()
            self._grow()
        if self._bar is not None:  # a reset: the bar's rate starts again from here
            self._bar.reset(self._task, completed=self.done, total=self.total, last=what)

    def update(self, done: int, total: int | None = None) -> None:
        """``done`` units done so far, of ``total`` (when it becomes known)."""
        with self._lock:
            self.done = done
            if total is not None:
                self.total = total
            self._grow()
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done, total=self.total)

    def _grow(self) -> None:
        if self.estimated and self.total is not None and self.done >= self.total:
            self.total = self.done + max(1, self.total // 10)

    # -- showing it ------------------------------------------------------------------------------
    def __enter__(self) -> Progress:
        _ACTIVE.progress = self
        self._stream = sys.stderr
        self._t0 = time.monotonic()
        if self.mode == "bar":
            import rich.progress as rp
            from rich.console import Console

            self._bar = rp.Progress(
                rp.TextColumn("{task.description}"),
                rp.BarColumn(),
                rp.MofNCompleteColumn(),
                rp.TextColumn(self.unit),
                rp.TimeElapsedColumn(),
                rp.TextColumn("ETA" + ("~" if self.estimated else "")),
                rp.TimeRemainingColumn(),
                rp.TextColumn("{task.fields[last]}"),
                console=Console(file=self._stream),
                transient=True,
            )
            self._bar.__enter__()
            self._task = self._bar.add_task(self.label, total=self.total, last="")
            if self.done:
                self._bar.update(self._task, completed=self.done)
        elif self.mode == "lines":
            self._thread = threading.Thread(target=self._tick, name="cprsim-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        err: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.finished = kind is None
        if self._bar is not None:
            self._bar.__exit__(kind, err, tb)
            self._bar = None
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=5)
            self._thread = None
            if self._lines and kind is None:
                el = time.monotonic() - self._t0
                done = f"{self.done} {self.unit}".rstrip() if self.estimated else self.state()
                self._write(f"{self.label}: {done}, done in {_fmt(el)}")

    def _tick(self) -> None:
        wait = FIRST_LINE_S
        while not self._stop.wait(wait):
            with self._lock:
                text = self.line()
            self._write(text)
            self._lines += 1
            el = time.monotonic() - self._t0
            wait = min(MAX_EVERY_S, max(EVERY_S, el / 12.0))

    def _write(self, text: str) -> None:
        with contextlib.suppress(OSError, ValueError):  # a closed or broken stderr: no progress
            self._stream.write(text + "\n")
            self._stream.flush()


# -- stopping on a signal ---------------------------------------------------------------------------
class Signalled(KeyboardInterrupt):
    """SIGINT or SIGTERM, raised in the main thread by :func:`signals_raise` (a
    ``KeyboardInterrupt``: nothing on the way swallows it, and what ends cleanly on Ctrl-C ends
    cleanly on SIGTERM)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class Interrupted(click.ClickException):
    """The one line a command stopped by SIGINT ends with; exit code 130 (128 + SIGINT; SIGTERM:
    :class:`Terminated`, 143). Make one with :func:`stopped`."""

    exit_code = 128 + signal.SIGINT


class Terminated(Interrupted):
    """The one line a command stopped by SIGTERM ends with; exit code 143 (128 + 15)."""

    exit_code = 128 + signal.SIGTERM


def stopped(message: str, signum: int) -> Interrupted:
    """The exception for a command stopped by ``signum`` (SIGTERM or SIGINT, the signals handled)."""
    return (Terminated if signum == signal.SIGTERM else Interrupted)(message)


class _Active:
    """What the command being run has done: its last :class:`Progress`, whether it writes its
    files only at the end and has started writing them, a signal waiting for a write to end."""

    def __init__(self) -> None:
        self.progress: Progress | None = None
        self.note = ""  #: said after the progress (``nothing written``)
        self.depth = 0  #: inside :func:`writing`
        self.pending = 0  #: a signal that came while writing


_ACTIVE = _Active()


def reset() -> None:
    """Forget the last command's progress and notes (``cprsim``'s group, before each command)."""
    _ACTIVE.progress = None
    _ACTIVE.note = ""
    _ACTIVE.depth = 0
    _ACTIVE.pending = 0


def outputs_at_end() -> None:
    """The command writes its files only when its work is done (inside :func:`writing`): a stop
    before says "nothing written"."""
    _ACTIVE.note = "nothing written"


@contextlib.contextmanager
def writing() -> Iterator[None]:
    """Write outputs in here: a signal that comes meanwhile is held until the block ends (each file
    is complete or absent), then stops the command."""
    _ACTIVE.depth += 1
    if _ACTIVE.note == "nothing written":
        _ACTIVE.note = "the files written before the stop are complete"
    try:
        yield
    finally:
        _ACTIVE.depth -= 1
    if _ACTIVE.depth == 0 and _ACTIVE.pending:
        signum, _ACTIVE.pending = _ACTIVE.pending, 0
        raise Signalled(signum)


def stop_message(command: str, signum: int) -> str:
    """The line for ``command`` stopped by ``signum``: what its progress had reached and whether it
    wrote anything (``SIGTERM: simulate stopped at 120/1000 replications; nothing written``)."""
    name = signal.Signals(signum).name
    p = _ACTIVE.progress
    where = "" if p is None else f" {'after' if p.finished else 'at'} {p.state()}"
    note = f"; {_ACTIVE.note}" if _ACTIVE.note else ""
    return f"{name}: {command or 'cprsim'} stopped{where}{note}"


@contextlib.contextmanager
def signals_raise() -> Iterator[None]:
    """SIGTERM and SIGINT raise :class:`Signalled` in the main thread (held while :func:`writing`;
    a second signal exits at once, like ``kill -9``); the previous handlers come back on leaving.
    A process forked meanwhile that has not set its own handlers dies of the signal as usual."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    sigs = (signal.SIGTERM, signal.SIGINT)
    old = {s: signal.getsignal(s) for s in sigs}
    pid = os.getpid()
    state = {"raised": False}

    def handler(signum: int, frame: Any) -> None:
        if os.getpid() != pid:  # a forked child that inherited the handler: the default action
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        if state["raised"]:  # impatient: stop now (workers die with this process)
            os._exit(128 + signum)
        state["raised"] = True
        if _ACTIVE.depth > 0:  # writing: stop once the files are complete
            _ACTIVE.pending = signum
            return
        raise Signalled(signum)

    for s in sigs:
        signal.signal(s, handler)
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
