"""Run the commands that the docs show, and regenerate (or check) the outputs pasted beside them.

    python docs/gen_outputs.py --check            # rerun; exit 1 naming each stale block (file:line)
    python docs/gen_outputs.py --write            # rerun; rewrite the stale blocks in place
    python docs/gen_outputs.py --check --long     # also the commands marked too slow for CI
    python docs/gen_outputs.py --list             # the steps and their markers; nothing is run
    python docs/gen_outputs.py --check docs/howto-plan-your-interval.md    # one document

The documents (``DOCS``: the README, the how-tos, concepts.md and calibration.md) mark what is
generated with an HTML comment on the line directly above a fenced block (same indentation;
GitHub does not render it). There are three markers:

``<!-- output [OPTIONS] -->`` above a ```` ```text ```` block (or ```` ```toml ````, ```` ```json ````, any
block that is not a command): the block is what a command prints.
The command is, in this order of precedence:

* ``cmd="..."`` in the marker (run with bash), for a command that the prose names;
* the lines of the block that start with ``$ `` (a transcript: each ``$`` line is a command, a
  trailing ``\\`` continues it on the next line, and the lines up to the next ``$`` are its
  output; the ``$`` lines are kept as written);
* otherwise the ```` ```sh ```` (bash) or ```` ```python ```` block directly before it (only blank
  lines between): that block *is* the command, run as one script (bash with ``-e``; python from
  stdin), so what the doc shows is exactly what runs.

``<!-- run [OPTIONS] -->`` above a ```` ```sh ```` or ```` ```python ```` block: how to run it. Every
```` ```sh ```` block of the documents runs, marked or not, one command at a time (a logical line:
``\\`` continuations and multi-line quotes joined; ``# comments`` dropped), each expected to exit
0; ``export NAME=VALUE`` sets ``NAME`` for the document's later commands. A ```` ```python ````
block runs only when followed by an output block or marked ``run``.

``<!-- file NAME -->`` above any block: its text is written to ``NAME`` in the scratch folder
before the later commands run (a sweep file, a scenario, a script the next command runs).

Options (``key=value``, values quoted as in a shell):

=================  ==================================================================================
``rtol=X``         numbers in the output compared with this relative tolerance (default ``1e-6``:
                   a machine whose floating point differs in the last bits still passes; the
                   rest of the text must match, whitespace runs and table rules of any length
                   count as equal); ``rtol=0.5`` for timings and other noise
``mask=REGEX``     every match is ignored in the comparison (a date, a digest that changes)
``keep=REGEX``     keep only the output lines that match; each run of dropped lines becomes ``…``
``paragraphs=1``   with ``keep``: a kept line keeps the lines that continue it (a paragraph the
                   terminal wrapped: the lines up to a blank one, a table line, or one that
                   starts a new ``word:`` paragraph such as ``note:``)
``head=N``         keep the first ``N`` lines, then ``…``
``columns=N``      the terminal width the command sees (``COLUMNS``; default 100)
``timeout=S``      seconds before the command is killed (default 120)
``exit=N``         the expected exit status (default 0, or 2 when the output shows an ``Error:``
                   line)
``needs=A,B``      ``shared`` (the public traces: ``$CPRSIM_SHARED/traces/public``, by default
                   ``../shared`` beside the checkout), ``torch``, ``dask``, ``movielens``: the step
                   is skipped, saying so, where one is missing
``long="REASON"``  too slow for CI: ``--check`` and the tests skip it (``--write`` and ``--check
                   --long`` run it)
``skip="REASON"``  never run (a remote cluster, a process killed mid-run): the output stays as
                   pasted, and the reason says why
=================  ==================================================================================

How the commands run: each document in a fresh scratch folder (a temporary directory) in which
every top-level entry of the repository (``traces/``, ``experiments/``, ``examples/``, ``.venv``
…; not ``out/``) is a symbolic link, so the relative paths the docs use resolve and ``--out
plan.json`` never writes into the repository; the document's steps run in order in that folder
(a later step may read what an earlier one wrote). The environment: ``PATH`` starts with this
interpreter's ``bin`` folder (so ``cprsim`` and ``python`` are the venv's), ``COLUMNS=100``,
``NO_COLOR=1``, ``LC_ALL=C.UTF-8``, ``TZ=UTC``, ``CPRSIM_PROGRESS=off`` (no progress lines: what a
terminal shows once its progress bar is gone), ``CPRSIM_SHARED`` set to the shared folder;
stdout and stderr are merged, as a terminal shows them. In the output, the scratch folder's and
the repository's absolute paths are written as ``/tmp/scratch`` (they differ from machine to
machine); trailing spaces and trailing blank lines are dropped.

``--write`` rewrites only the blocks that ``--check`` finds stale (so noise within a block's
tolerance causes no churn), and none after a step of the same document that failed (its output
may come from the failure), each document atomically (a temporary file, then ``os.replace``).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
#: the documents whose commands are run, in this order
DOCS = (
    "README.md",
    "docs/concepts.md",
    "docs/howto-fit-a-failure-log.md",
    "docs/howto-plan-your-interval.md",
    "docs/howto-model-your-cluster.md",
    "docs/howto-sweep-on-dask.md",
    "docs/howto-calibrate-your-model.md",
    "docs/calibration.md",
)
#: how the scratch folder and the repository are written in the outputs
SCRATCH_NAME = "/tmp/scratch"
DEFAULT_RTOL = 1e-6
DEFAULT_TIMEOUT = 120.0
DEFAULT_COLUMNS = 100
ELISION = "…"

_FENCE_OPEN = re.compile(r"^(\s*)```([\w+-]*)\s*$")
_FENCE_CLOSE = re.compile(r"^\s*```\s*$")
_MARKER = re.compile(r"^\s*<!--\s*(output|run|file)\b(.*?)-->\s*$")
_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")
_RULE = re.compile(r"([━─═┅-])\1+")
_TABLE = tuple("│┃┏┡└┗┌├╭╰")
_NEW_PARA = re.compile(r"^[A-Za-z][\w-]*:")
_EXPORT = re.compile(r"^export\s+([A-Za-z_]\w*)=(.*)$")

_OPTIONS = {
    "output": {
        "cmd",
        "rtol",
        "mask",
        "keep",
        "paragraphs",
        "head",
        "columns",
        "timeout",
        "exit",
        "needs",
    },
    "run": {"columns", "timeout", "exit", "needs"},
    "file": set(),
}
_REASONS = {"long", "skip"}
_NEEDS = {"shared", "torch", "dask", "movielens"}
_COMMAND_LANGS = {"sh": "sh", "bash": "sh", "console": "sh", "python": "python"}


class MarkerError(ValueError):
    """A malformed marker: the message names the file and the line."""


@dataclass
class Fence:
    """A fenced block: its lines (0-based indices of the fences), language and marker."""

    start: int
    end: int
    indent: str
    lang: str
    body: list[str]
    kind: str | None = None  #: the marker above it: output, run or file
    options: dict[str, str] = field(default_factory=dict)
    name: str | None = None  #: a ``file`` marker's file name


@dataclass
class Command:
    """One command of a step, the lines it shows (``$`` lines) and the output the doc expects."""

    code: str
    lang: str
    shown: list[str] = field(default_factory=list)
    expected: list[str] | None = None


@dataclass
class Step:
    """One thing to do in a document's scratch folder, in document order."""

    doc: Path
    line: int  #: 1-based line of the block it reports on
    kind: str  #: file, run (commands without output), output (a script or cmd), transcript
    commands: list[Command] = field(default_factory=list)
    options: dict[str, str] = field(default_factory=dict)
    output: Fence | None = None
    name: str | None = None
    text: str = ""

    @property
    def where(self) -> str:
        """``file:line`` of the block, relative to the repository."""
        return f"{_rel(self.doc)}:{self.line}"

    @property
    def label(self) -> str:
        """The step's command(s), shortened to one line."""
        if self.kind == "file":
            return f"file {self.name}"
        text = " ; ".join(" ".join(c.code.split()) for c in self.commands)
        return text if len(text) <= 90 else text[:87] + "..."

    @property
    def rtol(self) -> float:
        """The relative tolerance of the numbers in its output."""
        return float(self.options.get("rtol", DEFAULT_RTOL))


@dataclass
class Result:
    """What running a step gave: ``status`` is ok, stale, failed or skipped, with a message."""

    step: Step
    status: str
    message: str = ""
    seconds: float = 0.0
    new_body: list[str] | None = None  #: the regenerated output block, for --write


def _rel(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(REPO))
    except ValueError:
        return str(path)


def _parse_marker(kind: str, rest: str, where: str) -> tuple[dict[str, str], str | None]:
    try:
        tokens = shlex.split(rest)
    except ValueError as exc:
        raise MarkerError(f"{where}: marker: {exc}") from None
    options: dict[str, str] = {}
    name = None
    for tok in tokens:
        key, sep, value = tok.partition("=")
        if not sep:
            if kind == "file" and name is None:
                name = tok
                continue
            raise MarkerError(f"{where}: marker: expected key=value, got {tok!r}")
        if key not in _OPTIONS[kind] | _REASONS:
            known = ", ".join(sorted(_OPTIONS[kind] | _REASONS))
            raise MarkerError(f"{where}: {kind} marker: unknown option {key!r} (known: {known})")
        if key in _REASONS and not value.strip():
            raise MarkerError(f"{where}: {key}= needs a reason")
        options[key] = value
    for need in filter(None, options.get("needs", "").split(",")):
        if need not in _NEEDS:
            raise MarkerError(f"{where}: needs={need}: not one of {', '.join(sorted(_NEEDS))}")
    try:
        for key in ("rtol", "timeout"):
            if key in options:
                float(options[key])
        for key in ("head", "columns", "exit"):
            if key in options:
                int(options[key])
        for key in ("keep", "mask"):
            if key in options:
                re.compile(options[key])
    except (ValueError, re.error) as exc:
        raise MarkerError(f"{where}: marker: {exc}") from None
    if kind == "file" and not name:
        raise MarkerError(f"{where}: file marker without a file name")
    return options, name


def fences(path: Path, lines: list[str] | None = None) -> list[Fence]:
    """Every fenced block of a markdown file, with the marker on the line above it."""
    if lines is None:
        lines = path.read_text(encoding="utf-8").splitlines()
    out: list[Fence] = []
    i = 0
    while i < len(lines):
        m = _FENCE_OPEN.match(lines[i])
        if not m:
            i += 1
            continue
        indent, lang = m.group(1), m.group(2)
        j = i + 1
        while j < len(lines) and not _FENCE_CLOSE.match(lines[j]):
            j += 1
        if j == len(lines):
            raise MarkerError(f"{_rel(path)}:{i + 1}: unclosed code fence")
        body = [
            ln[len(indent) :] if ln.startswith(indent) else ln.lstrip() for ln in lines[i + 1 : j]
        ]
        fence = Fence(i, j, indent, lang, body)
        if i > 0 and (mk := _MARKER.match(lines[i - 1])):
            fence.kind = mk.group(1)
            fence.options, fence.name = _parse_marker(fence.kind, mk.group(2), f"{_rel(path)}:{i}")
        out.append(fence)
        i = j + 1
    return out


def split_commands(body: list[str]) -> list[str]:
    """The logical commands of a shell block: ``\\`` continuations and open quotes joined."""
    commands: list[str] = []
    current: list[str] = []
    for line in body:
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        current.append(line)
        text = "\n".join(current)
        if text.rstrip().endswith("\\"):
            continue
        try:
            shlex.split(text, comments=True)
        except ValueError:  # an open quote: the command goes on
            continue
        commands.append(text)
        current = []
    if current:
        commands.append("\n".join(current))
    return commands


def _transcript(body: list[str]) -> list[Command]:
    commands: list[Command] = []
    i = 0
    while i < len(body):
        if not body[i].startswith("$ "):
            raise MarkerError(f"a transcript starts with a '$ ' line, not {body[i]!r}")
        shown = [body[i]]
        while shown[-1].rstrip().endswith("\\") and i + 1 < len(body):
            i += 1
            shown.append(body[i])
        i += 1
        expected = []
        while i < len(body) and not body[i].startswith("$ "):
            expected.append(body[i])
            i += 1
        code = "\n".join([shown[0][2:], *shown[1:]])
        commands.append(Command(code, "sh", shown, expected))
    return commands


def parse(path: Path) -> list[Step]:
    """The steps of one document, in order (markers checked; nothing is run)."""
    path = Path(path)
    blocks = fences(path)
    steps: list[Step] = []
    consumed: set[int] = set()
    for k, fence in enumerate(blocks):
        if k in consumed:
            continue
        line = fence.start + 1
        where = f"{_rel(path)}:{line}"
        if fence.kind == "file":
            assert fence.name is not None
            text = "\n".join(fence.body) + "\n"
            steps.append(Step(path, line, "file", name=fence.name, text=text))
            continue
        lang = _COMMAND_LANGS.get(fence.lang)
        if fence.kind == "run" and lang is None:
            raise MarkerError(f"{where}: a run marker needs a ```sh or ```python block")
        if fence.kind == "output":
            if lang is not None:
                raise MarkerError(
                    f"{where}: an output marker needs a ```text (or toml, json) block"
                )
            opts = dict(fence.options)
            if "cmd" in opts:
                cmd = opts.pop("cmd")
                steps.append(Step(path, line, "output", [Command(cmd, "sh")], opts, fence))
            elif fence.body and fence.body[0].startswith("$ "):
                try:
                    commands = _transcript(fence.body)
                except MarkerError as exc:
                    raise MarkerError(f"{where}: {exc}") from None
                steps.append(Step(path, line, "transcript", commands, opts, fence))
            else:
                raise MarkerError(
                    f"{where}: an output block needs a command: cmd=..., '$ ' lines, or a "
                    "```sh/```python block directly before it"
                )
            continue
        if lang is None or (lang == "python" and fence.kind != "run" and not _feeds(blocks, k)):
            continue
        code = "\n".join(fence.body)
        if _feeds(blocks, k):
            out = blocks[k + 1]
            consumed.add(k + 1)
            opts = {**fence.options, **out.options}
            steps.append(Step(path, out.start + 1, "output", [Command(code, lang)], opts, out))
        elif lang == "python":
            steps.append(Step(path, line, "run", [Command(code, lang)], dict(fence.options)))
        else:
            commands = [Command(c, "sh") for c in split_commands(fence.body)]
            steps.append(Step(path, line, "run", commands, dict(fence.options)))
    return steps


def _feeds(blocks: list[Fence], k: int) -> bool:
    """Whether block k is the command of the output block right after it."""
    if k + 1 >= len(blocks):
        return False
    nxt = blocks[k + 1]
    return (
        nxt.kind == "output"
        and "cmd" not in nxt.options
        and not (nxt.body and nxt.body[0].startswith("$ "))
        and nxt.start - blocks[k].end == 3  # closing fence, a blank line, the marker
    )


def shared_dir() -> Path:
    """The shared folder: ``$CPRSIM_SHARED``, else ``../shared`` beside the checkout."""
    return Path(os.environ.get("CPRSIM_SHARED", REPO.parent / "shared")).resolve()


def missing_needs(options: dict[str, str]) -> list[str]:
    """What a step needs and this machine lacks, each with why."""
    missing = []
    modules = {"torch": "torch", "dask": "distributed", "movielens": "recbole"}
    for need in filter(None, options.get("needs", "").split(",")):
        if need == "shared":
            public = shared_dir() / "traces" / "public"
            if not public.is_dir():
                missing.append(
                    f"the public traces are not at {public} (set CPRSIM_SHARED to the shared folder)"
                )
        elif importlib.util.find_spec(modules[need]) is None:
            missing.append(f"{modules[need]} is not installed (needs={need})")
    return missing


class Scratch:
    """A scratch folder with links to the repository's top-level entries, and the environment."""

    def __init__(self) -> None:
        self.path = Path(tempfile.mkdtemp(prefix="cprsim-docs-"))
        for entry in sorted(REPO.iterdir()):
            if entry.name in {".git", "out", ".venv"}:
                continue
            (self.path / entry.name).symlink_to(entry)
        # `.venv` in the docs is the venv that runs this (make test's, whatever its folder:
        # PYTHON=python3.13 make test builds .venv-python3.13)
        (self.path / ".venv").symlink_to(Path(sys.prefix))
        env = {k: v for k, v in os.environ.items() if k not in {"FORCE_COLOR", "CLICOLOR_FORCE"}}
        bindir = str(Path(sys.executable).parent)  # not resolved: the venv's bin, not /usr/bin
        env.update(
            PATH=bindir + os.pathsep + env.get("PATH", ""),
            COLUMNS=str(DEFAULT_COLUMNS),
            NO_COLOR="1",
            LC_ALL="C.UTF-8",
            TZ="UTC",
            CPRSIM_SHARED=str(shared_dir()),
            PYTHONUNBUFFERED="1",
            # what a terminal keeps once a command ends: its progress bar is gone (off a
            # terminal, progress lines every few seconds would make a slow step's output vary)
            CPRSIM_PROGRESS="off",
        )
        env.pop("VIRTUAL_ENV", None)
        self.env = env

    def close(self) -> None:
        """Remove the folder (the links only: never what they point to)."""
        shutil.rmtree(self.path, ignore_errors=True)

    def write(self, name: str, text: str) -> None:
        """Write a ``file`` block's text into the folder."""
        target = self.path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")

    def export(self, name: str, value: str) -> None:
        """``export NAME=VALUE``: the value as bash expands it, for the later commands."""
        rc, out, _ = self.run(f"printf '%s' {value}", "sh")
        if rc != 0:
            raise RuntimeError(f"export {name}={value}: {out.strip()}")
        self.env[name] = out

    def run(
        self,
        code: str,
        lang: str,
        timeout: float = DEFAULT_TIMEOUT,
        columns: int = DEFAULT_COLUMNS,
        script: bool = False,
    ) -> tuple[int, str, float]:
        """Run a command (bash, ``-e`` for a whole script) or a python snippet; (status, output, s)."""
        env = dict(self.env, COLUMNS=str(columns))
        if lang == "python":
            argv, stdin = [sys.executable, "-"], code
        else:
            argv, stdin = ["bash", "-e", "-c", code] if script else ["bash", "-c", code], None
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            argv,
            cwd=self.path,
            env=env,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: a timeout kills every child
        )
        try:
            raw, _ = proc.communicate(stdin.encode() if stdin is not None else None, timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            raw, _ = proc.communicate()
            text = self.normalize(raw.decode("utf-8", "replace"))
            return -1, text + f"\n(killed after {timeout:g} s)", time.perf_counter() - t0
        return (
            proc.returncode,
            self.normalize(raw.decode("utf-8", "replace")),
            time.perf_counter() - t0,
        )

    def normalize(self, text: str) -> str:
        """Paths that differ between machines written as ``/tmp/scratch``; no trailing spaces."""
        for path in sorted(
            {str(self.path.resolve()), str(self.path), str(REPO)}, key=len, reverse=True
        ):
            text = text.replace(path, SCRATCH_NAME)
        lines = [ln.rstrip() for ln in text.replace("\r\n", "\n").split("\n")]
        while lines and not lines[-1]:
            lines.pop()
        return "\n".join(lines)


@contextlib.contextmanager
def scratch() -> Iterator[Scratch]:
    """A :class:`Scratch` removed on exit."""
    s = Scratch()
    try:
        yield s
    finally:
        s.close()


def shape(lines: list[str], options: dict[str, str]) -> list[str]:
    """Apply ``keep=`` and ``head=`` to a command's output lines."""
    if "keep" in options:
        pattern = re.compile(options["keep"])
        paragraphs = options.get("paragraphs", "0") not in {"0", ""}
        kept: list[str] = []
        within = False  # inside a kept paragraph
        for ln in lines:
            if pattern.search(ln):
                kept.append(ln)
                within = paragraphs and not ln.startswith(_TABLE)
            elif within and ln.strip() and not ln.startswith(_TABLE) and not _NEW_PARA.match(ln):
                kept.append(ln)
            else:
                within = False
                if not kept or kept[-1] != ELISION:
                    kept.append(ELISION)
        lines = kept
    if "head" in options:
        n = int(options["head"])
        if len(lines) > n:
            lines = lines[:n] + [ELISION]
    return lines


def _norm_text(s: str) -> str:
    return re.sub(r"\s+", " ", _RULE.sub(r"\1", s))


def same_line(expected: str, actual: str, rtol: float, mask: re.Pattern[str] | None = None) -> bool:
    """Whether two output lines agree: the text (whitespace runs and rules of any length equal)
    and every number within ``rtol`` of the other (relative)."""
    if mask is not None:
        expected, actual = mask.sub("<masked>", expected), mask.sub("<masked>", actual)
    if expected == actual:
        return True
    te, ta = _NUMBER.split(expected), _NUMBER.split(actual)
    ne, na = _NUMBER.findall(expected), _NUMBER.findall(actual)
    if len(ne) != len(na) or [_norm_text(t) for t in te] != [_norm_text(t) for t in ta]:
        return False
    for a, b in zip(ne, na):
        x, y = float(a), float(b)
        if abs(x - y) > rtol * max(abs(x), abs(y)):
            return False
    return True


def first_difference(
    expected: list[str], actual: list[str], rtol: float, mask: str | None = None
) -> int | None:
    """The index of the first line that differs (beyond ``rtol``), or None when they agree."""
    pattern = re.compile(mask) if mask else None
    for i, (e, a) in enumerate(zip(expected, actual)):
        if not same_line(e, a, rtol, pattern):
            return i
    if len(expected) != len(actual):
        return min(len(expected), len(actual))
    return None


def _expected_exit(expected: list[str] | None, options: dict[str, str]) -> int:
    if "exit" in options:
        return int(options["exit"])
    if expected and any(ln.startswith("Error:") for ln in expected):
        return 2
    return 0


def run_step(step: Step, box: Scratch, include_long: bool = False) -> Result:
    """Run one step in the scratch folder and judge it against the document."""
    opts = step.options
    if step.kind == "file":
        assert step.name is not None
        box.write(step.name, step.text)
        return Result(step, "ok")
    if "skip" in opts:
        return Result(step, "skipped", f"not run: {opts['skip']}")
    if "long" in opts and not include_long:
        return Result(step, "skipped", f"long: {opts['long']} (--long runs it)")
    if missing := missing_needs(opts):
        return Result(step, "skipped", "; ".join(missing))
    timeout = float(opts.get("timeout", DEFAULT_TIMEOUT))
    columns = int(opts.get("columns", DEFAULT_COLUMNS))
    total = 0.0
    if step.kind == "run":
        for command in step.commands:
            if command.lang == "sh" and (m := _EXPORT.match(command.code.strip())):
                box.export(m.group(1), m.group(2))
                continue
            rc, out, seconds = box.run(command.code, command.lang, timeout, columns)
            total += seconds
            want = _expected_exit(None, opts)
            if rc != want:
                tail = "\n".join(out.splitlines()[-15:])
                msg = f"`{' '.join(command.code.split())}` exited {rc}, expected {want}:\n{tail}"
                return Result(step, "failed", msg, total)
        return Result(step, "ok", "", total)
    assert step.output is not None
    new_body: list[str] = []
    stale: str | None = None
    doc_offset = 0  # where the command's lines start in the block as the doc has it
    for command in step.commands:
        script = step.kind == "output"
        expected = command.expected if step.kind == "transcript" else step.output.body
        assert expected is not None
        rc, out, seconds = box.run(command.code, command.lang, timeout, columns, script=script)
        total += seconds
        want = _expected_exit(expected, opts)
        if rc != want:
            tail = "\n".join(out.splitlines()[-15:])
            msg = f"`{' '.join(command.code.split())}` exited {rc}, expected {want}:\n{tail}"
            return Result(step, "failed", msg, total)
        actual = shape(out.split("\n") if out else [], opts)
        i = first_difference(expected, actual, step.rtol, opts.get("mask"))
        if i is not None and stale is None:
            e = expected[i] if i < len(expected) else "(end of block)"
            a = actual[i] if i < len(actual) else "(end of output)"
            offset = doc_offset + len(command.shown) + i
            stale = (
                f"line {step.output.start + 2 + offset}: the doc shows\n    {e}\n"
                f"  the command now prints\n    {a}"
            )
        new_body += command.shown + actual
        doc_offset += len(command.shown) + len(expected)
    if stale is not None:
        return Result(step, "stale", stale, total, new_body)
    return Result(step, "ok", "", total)


def run_doc(
    path: Path, include_long: bool = False, report=None, steps: list[Step] | None = None
) -> list[Result]:
    """Run every step of one document, in order, in a fresh scratch folder."""
    results = []
    with scratch() as box:
        for step in parse(path) if steps is None else steps:
            result = run_step(step, box, include_long)
            results.append(result)
            if report is not None:
                report(result)
    return results


def rewrite(path: Path, results: list[Result]) -> int:
    """Replace the stale output blocks of one document (atomically); the number replaced."""
    failed = [i for i, r in enumerate(results) if r.status == "failed"]
    if failed:  # what follows a failed step may have read its missing files: left as it is
        results = results[: failed[0]]
    stale = [r for r in results if r.status == "stale" and r.new_body is not None]
    if not stale:
        return 0
    lines = path.read_text(encoding="utf-8").splitlines()
    for r in sorted(stale, key=lambda r: r.step.output.start, reverse=True):  # type: ignore[union-attr]
        fence = r.step.output
        assert fence is not None and r.new_body is not None
        body = [fence.indent + ln if ln else "" for ln in r.new_body]
        lines[fence.start + 1 : fence.end] = body
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write("\n".join(lines) + "\n")
        os.chmod(tmp, path.stat().st_mode & 0o777)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return len(stale)


def _print_result(result: Result) -> None:
    step = result.step
    if step.kind == "file":
        return
    head = f"{step.where:44s} {result.status:7s} {result.seconds:6.1f} s  {step.label}"
    print(head, flush=True)
    if result.message and result.status != "ok":
        for ln in result.message.splitlines():
            print("      " + ln, flush=True)


def main(argv: list[str] | None = None) -> int:
    """The command line (module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true", help="rerun, exit 1 if a block is stale")
    mode.add_argument("--write", action="store_true", help="rerun, rewrite the stale blocks")
    mode.add_argument("--list", action="store_true", help="list the steps, run nothing")
    ap.add_argument("--long", action="store_true", help="--check: also the steps marked long=")
    ap.add_argument("docs", nargs="*", type=Path, help=f"documents (default: {', '.join(DOCS)})")
    args = ap.parse_args(argv)
    docs = [p.resolve() for p in args.docs] or [REPO / d for d in DOCS]
    try:
        parsed = {doc: parse(doc) for doc in docs}
    except MarkerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.list:
        for steps in parsed.values():
            for step in steps:
                flags = " ".join(f"{k}={v!r}" for k, v in step.options.items())
                print(f"{step.where:44s} {step.kind:10s} {step.label}  {flags}".rstrip())
        return 0
    include_long = args.write or args.long
    counts: dict[str, int] = {}
    for doc, steps in parsed.items():
        results = run_doc(doc, include_long, _print_result, steps)
        for r in results:
            if r.step.kind != "file":
                counts[r.status] = counts.get(r.status, 0) + 1
        if args.write:
            n = rewrite(doc, results)
            if n:
                print(f"{_rel(doc)}: rewrote {n} block(s)", flush=True)
    summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    print(f"gen_outputs: {summary}", flush=True)
    bad = counts.get("failed", 0) + (0 if args.write else counts.get("stale", 0))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
