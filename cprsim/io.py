"""Atomic file output (write to a temporary file beside the target, then rename) and bounded
input (every reader of a user's file goes through :func:`check_input_file`,
:func:`read_input_bytes`, :func:`read_input_text`, :func:`read_input_json`,
:func:`open_input_text` or :func:`read_toml`).

A reader never sees a half-written file, and an interrupted run leaves the previous version.

Input files must be regular files (a named pipe, a device or a folder is refused with one line
naming it, never opened to wait or read forever) within a size cap of their kind, checked before
reading: ``"config"`` files (scenario, sweep, calibration, schema, fitted model) at most
:data:`MAX_CONFIG_BYTES` (1 MiB), ``"data"`` files (logs, traces, tables, results, reports) at
most :data:`MAX_DATA_BYTES` (256 MiB); the environment variables ``CPRSIM_MAX_CONFIG_MB`` and
``CPRSIM_MAX_INPUT_MB`` override them. Errors name the file (and line, column or key), never its
content.
"""

from __future__ import annotations

import contextlib
import csv
import glob
import io
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

#: when this process started (about: when cprsim was imported), for :func:`remove_stale_temporaries`
_STARTED = time.time()


def _host_id() -> str:
    """This machine, as 8 hex digits of its host name (a pid means something on its host only)."""
    import hashlib
    import socket

    return hashlib.sha256(socket.gethostname().encode("utf-8", "replace")).hexdigest()[:8]


_HOST = _host_id()


def _temporary_prefix(name: str) -> str:
    """A temporary file of ``name`` is ``.NAME.HOST-PID-XXXXXXXX.tmp``: the writer's host and pid
    in its name say whether it is still being written (:func:`remove_stale_temporaries`)."""
    return f".{name}.{_HOST}-{os.getpid()}-"


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)  # (POSIX only: on Windows this would end the process)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError, OverflowError):
        return True
    return True


#: the middle of a temporary's name, ``HOST-PID-XXXXXXXX`` (this cprsim) or ``XXXXXXXX`` (earlier)
_OURS = re.compile(r"(?P<host>[0-9a-f]{8})-(?P<pid>[0-9]{1,10})-[a-z0-9_]{8}")
_OLD = re.compile(r"[a-z0-9_]{8}")


def remove_stale_temporaries(folder: str | os.PathLike, names: Iterable[str]) -> list[str]:
    """Remove the temporary files that an atomic write of one of ``names`` into ``folder`` left
    when its process was killed (``kill -9``, a power cut), and return their names.

    The rule (safe with concurrent writers): a temporary ``.NAME.HOST-PID-XXXXXXXX.tmp`` (exactly
    that shape: ``XXXXXXXX`` is ``mkstemp``'s 8 characters) is removed when it was written on this
    host (``HOST``: a hash of the host name, so a writer on another machine of a shared folder is
    never judged by this machine's processes) and no process with that pid exists (a live writer's
    is kept; a pid reused since keeps a stale one, never the reverse); one of an earlier cprsim's
    shape, ``.NAME.XXXXXXXX.tmp``, when it is older than this process. Nothing else is touched.
    Only on POSIX systems (elsewhere nothing is removed)."""
    d = Path(folder)
    if os.name != "posix" or not d.is_dir():
        return []
    gone: list[str] = []
    for name in names:
        head = f".{name}."
        try:
            found = list(d.glob(glob.escape(head) + "*.tmp"))
        except OSError:  # pragma: no cover - an unreadable folder: the write itself will say
            return gone
        for tmp in found:
            middle = tmp.name[len(head) : -len(".tmp")]
            ours = _OURS.fullmatch(middle)
            try:
                if ours is not None:
                    stale = ours["host"] == _HOST and not _alive(int(ours["pid"]))
                elif _OLD.fullmatch(middle):
                    stale = tmp.lstat().st_mtime < _STARTED
                else:
                    continue  # not a temporary of ours
                if stale and tmp.is_file() and not tmp.is_symlink():
                    tmp.unlink()
                    gone.append(tmp.name)
            except OSError:  # gone meanwhile, or not ours to remove
                continue
    return gone


def make_dirs(folder: str | os.PathLike) -> list[Path]:
    """``mkdir -p folder``; returns the folders it created, outermost first (for
    :func:`remove_made_dirs` when what was to be written there fails)."""
    d = Path(folder)
    missing = []
    p = d
    while not os.path.lexists(p) and p != p.parent:
        missing.append(p)
        p = p.parent
    d.mkdir(parents=True, exist_ok=True)
    return list(reversed(missing))


def remove_made_dirs(made: Sequence[Path]) -> None:
    """Remove the folders :func:`make_dirs` created, innermost first, each only if empty: a
    failed write leaves no folder it created (and never one that existed before)."""
    for p in reversed(made):
        with contextlib.suppress(OSError):
            p.rmdir()


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (a temporary file beside it, fsync'd, then renamed;
    missing folders made), with the permissions ``open`` would give; returns the path. A failure
    removes the temporary and the folders it made; stale temporaries of ``path`` (their writer
    killed) are removed first (:func:`remove_stale_temporaries`)."""
    p = Path(path)
    made = make_dirs(p.parent)
    if not made:
        remove_stale_temporaries(p.parent, [p.name])
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=_temporary_prefix(p.name), suffix=".tmp", dir=p.parent)
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; give the permissions open() would
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, p)
    except BaseException:
        if tmp is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        remove_made_dirs(made)
        raise
    return p


def atomic_write_set(folder: str | os.PathLike, files: dict[str, str | bytes]) -> Path:
    """Write several files into ``folder`` as a set: every file is first written to a temporary
    file beside its target; only when all are written are they renamed into place. A failure
    while writing (full disk, read-only folder) removes the temporaries and leaves the folder as
    it was (a folder it created removed): never a mix of old and new files. Stale temporaries of
    these files (their writer killed) are removed first (:func:`remove_stale_temporaries`)."""
    d = Path(folder)
    made = make_dirs(d)
    if not made:
        remove_stale_temporaries(d, files)
    staged: list[tuple[str, Path]] = []
    try:
        for name, data in files.items():
            fd, tmp = tempfile.mkstemp(prefix=_temporary_prefix(name), suffix=".tmp", dir=d)
            staged.append((tmp, d / name))
            os.fchmod(fd, 0o666 & ~_umask())
            with os.fdopen(fd, "wb") as f:
                f.write(data.encode("utf-8") if isinstance(data, str) else data)
                f.flush()
                os.fsync(f.fileno())
    except BaseException:
        for tmp, _ in staged:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        remove_made_dirs(made)
        raise
    for tmp, target in staged:
        os.replace(tmp, target)
    return d


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def cache_dir() -> Path | None:
    """The folder of cprsim's caches on disk: ``$CPRSIM_CACHE_DIR`` (an empty one: no cache on
    disk, None), else ``$XDG_CACHE_HOME/cprsim``, else ``~/.cache/cprsim`` (None where there is
    no home folder)."""
    d = os.environ.get("CPRSIM_CACHE_DIR")
    if d is not None:
        return Path(d) if d.strip() else None
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    if xdg:
        return Path(xdg) / "cprsim"
    try:
        return Path.home() / ".cache" / "cprsim"
    except RuntimeError:  # no HOME and no passwd entry (a container's anonymous user): no cache
        return None


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically (:func:`atomic_write_bytes`)."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def dumps_json(obj: Any) -> str:
    """Strict JSON: a NaN or an infinity (a CI that does not exist, an infinite mean) is ``null``."""
    return json.dumps(_finite(obj), indent=2, sort_keys=False, allow_nan=False) + "\n"


def _finite(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if obj == obj and obj not in (float("inf"), float("-inf")) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def atomic_write_json(path: str | os.PathLike, obj: Any) -> Path:
    """Write ``obj`` as strict JSON (:func:`dumps_json`) to ``path`` atomically."""
    return atomic_write_text(path, dumps_json(obj))


def csv_text(header: Sequence[str] | None, rows: Iterable[Sequence[Any]]) -> str:
    """CSV text (floats as their shortest exact repr); ``header=None`` for rows alone."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    if header is not None:
        w.writerow(header)
    for r in rows:
        # float(x): numpy's float64 is a float whose repr is "np.float64(...)"
        w.writerow([repr(float(x)) if isinstance(x, float) else x for x in r])
    return buf.getvalue()


def atomic_write_csv(
    path: str | os.PathLike, header: Sequence[str], rows: Iterable[Sequence[Any]]
) -> Path:
    """Write a CSV table (:func:`csv_text`) to ``path`` atomically."""
    return atomic_write_text(path, csv_text(header, rows))


def _plain(v: Any, where: str) -> Any:
    """``v`` with numpy scalars and arrays as Python values, tuples as lists, None dropped from tables."""
    import numbers

    if isinstance(v, dict):
        return {
            str(k): _plain(x, f"{where}.{k}" if where else str(k))
            for k, x in v.items()
            if x is not None
        }
    if isinstance(v, (list, tuple)) or type(v).__name__ == "ndarray":
        return [_plain(x, where) for x in v]
    if isinstance(v, bool) or type(v).__name__ == "bool_":
        return bool(v)
    if isinstance(v, numbers.Integral):
        return int(v)
    if isinstance(v, numbers.Real):
        return float(v)
    if isinstance(v, str):
        return v
    raise TypeError(f"{where or 'TOML'}: cannot write {type(v).__name__} to TOML")


def dumps_toml(doc: dict[str, Any], header: str = "", multiline: bool = False) -> str:
    """The one TOML writer (tomli-w): tables, arrays of tables, any key (quoted when not bare), any
    string (escaped), numpy scalars as Python numbers, ``None`` left out; ``header`` as ``#`` lines;
    ``multiline``: a string holding newlines as a multi-line string (for people to read: ``cprsim
    show``), else on one line with ``\n`` escapes."""
    import tomli_w

    text = tomli_w.dumps(_plain(doc, ""), multiline_strings=multiline)
    if header:  # a comment may not hold control characters: they are written escaped
        lines = header.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        clean = [  # each line's other control characters escaped; the newlines make new lines
            "".join(
                c if c == "\t" or not (ord(c) < 32 or ord(c) == 127) else f"\\x{ord(c):02x}"
                for c in line
            )
            for line in lines
        ]
        text = "".join(f"# {h}\n" if h else "#\n" for h in clean) + "\n" + text
    return text


#: A configuration file (scenario, sweep, fitted model, calibration, data schema) is at most this
#: large: 1 MiB, twenty times cprsim's largest (a calibration's 52 kB), and parsed in well under a
#: second; a larger one (a million keys) is refused before parsing. ``CPRSIM_MAX_CONFIG_MB``
#: (a positive number of MiB) overrides it.
MAX_CONFIG_BYTES = 2**20
#: A data file (failure log, trace, calibration data, table sizes, access counts, results tables,
#: events) is at most this large: 256 MiB, some 40 times the largest public trace cprsim reads;
#: refused at once, before it is read. ``CPRSIM_MAX_INPUT_MB`` (a positive number of MiB)
#: overrides it.
MAX_DATA_BYTES = 256 * 2**20
#: configuration files nest tables and arrays at most this deep (cprsim's own use 4)
MAX_DEPTH = 32
#: the environment variable that overrides each kind of cap
CAP_VARIABLES = {"config": "CPRSIM_MAX_CONFIG_MB", "data": "CPRSIM_MAX_INPUT_MB"}

Cap = int | Literal["config", "data"] | None


def input_cap(kind: Literal["config", "data"]) -> int:
    """The size cap (bytes) of a ``"config"`` or ``"data"`` input file: :data:`MAX_CONFIG_BYTES`
    or :data:`MAX_DATA_BYTES`, or the environment's ``CPRSIM_MAX_CONFIG_MB`` /
    ``CPRSIM_MAX_INPUT_MB`` (MiB, a positive number) where set; a malformed value is an
    ``InputError`` naming the variable."""
    from cprsim.errors import InputError

    var = CAP_VARIABLES[kind]
    text = os.environ.get(var, "").strip()
    if not text:
        return MAX_CONFIG_BYTES if kind == "config" else MAX_DATA_BYTES
    try:
        mb = float(text)
    except ValueError:
        mb = float("nan")
    if not (0 < mb < 2**40):
        raise InputError(f"{var}: expected a positive number of MiB, got {short(text, 40)}")
    return max(1, int(mb * 2**20))


def _cap(max_bytes: Cap, default: Literal["config", "data"]) -> tuple[int, str]:
    """(the cap in bytes, how to raise it) of a ``max_bytes`` argument."""
    if max_bytes is None:
        max_bytes = default
    if isinstance(max_bytes, str):
        return input_cap(max_bytes), f"; {CAP_VARIABLES[max_bytes]} raises it"
    return int(max_bytes), ""


def short(value: Any, limit: int = 200) -> str:
    """A short, printable excerpt of a user-given value for an error message (never its file's
    contents; control characters escaped, the middle of a long value elided)."""
    text = str(value)
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    if len(text) > limit:
        text = text[: limit // 2 - 1] + "…" + text[-(limit // 2 - 1) :]
    return text


def _not_regular(mode: int) -> str:
    import stat as st_

    if st_.S_ISDIR(mode):
        return "a folder"
    if st_.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if st_.S_ISCHR(mode) or st_.S_ISBLK(mode):
        return "a device"
    if st_.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _check_stat(p: Path, info: os.stat_result, what: str, cap: int, hint: str) -> None:
    import stat as st_

    from cprsim.errors import InputError

    if not st_.S_ISREG(info.st_mode):
        kind = _not_regular(info.st_mode)
        raise InputError(
            f"{short(p)}: {kind}, not a regular file (a {what} must be one)"
            if kind != "not a regular file"
            else f"{short(p)}: not a regular file (a {what} must be one)"
        )
    if info.st_size > cap:
        raise InputError(
            f"{short(p)}: {info.st_size:,} bytes, more than a {what} may have ({cap:,} bytes{hint})"
        )


def check_input_file(path: str | os.PathLike, what: str = "file", max_bytes: Cap = None) -> Path:
    """``path`` as a ``Path`` if it is a regular file within its size cap; otherwise a one-line
    ``InputError`` naming it (missing, a named pipe, a device or folder, unreadable, too large,
    name too long). ``max_bytes``: a number of bytes, or ``"config"`` / ``"data"`` (the default)
    for :func:`input_cap` of that kind. Nothing is opened: a named pipe or device is refused by
    its kind, never read."""
    from cprsim.errors import InputError

    cap, hint = _cap(max_bytes, "data")
    p = Path(path)
    try:
        info = p.stat()
    except FileNotFoundError:
        raise InputError(f"{short(p)}: no such {what}") from None
    except (OSError, ValueError) as e:
        raise InputError(
            f"{short(p)}: cannot read this {what} ({getattr(e, 'strerror', None) or e})"
        ) from None
    _check_stat(p, info, what, cap, hint)
    return p


def open_input_binary(path: str | os.PathLike, what: str = "file", max_bytes: Cap = None):
    """A user's input file opened for reading bytes, checked as :func:`check_input_file` checks it
    and then once more on the open file itself (opened without blocking, so a file swapped for a
    named pipe between the two is refused, not waited on)."""
    import fcntl

    from cprsim.errors import InputError

    cap, hint = _cap(max_bytes, "data")
    p = check_input_file(path, what, "data" if max_bytes is None else max_bytes)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(p, flags | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError) as e:
        raise InputError(
            f"{short(p)}: cannot read this {what} ({getattr(e, 'strerror', None) or e})"
        ) from None
    try:
        _check_stat(p, os.fstat(fd), what, cap, hint)
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        raw = io.FileIO(fd, "rb", closefd=True)
    except BaseException:
        os.close(fd)
        raise
    return io.BufferedReader(
        _Capped(raw, cap, f"{short(p)}: more than a {what} may have ({cap:,} bytes{hint})")
    )


class _Capped(io.RawIOBase):
    """A raw file that raises a one-line ``InputError`` once more than ``cap`` bytes are read
    (a file that grows while read, or a kernel file whose size says 0)."""

    def __init__(self, raw: Any, cap: int, message: str) -> None:
        self.raw, self.cap, self.message, self.count = raw, cap, message, 0

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        from cprsim.errors import InputError

        n = self.raw.readinto(b)
        self.count += n or 0
        if self.count > self.cap:
            raise InputError(self.message)
        return n

    def close(self) -> None:
        self.raw.close()
        super().close()


def decode_text(data: bytes, label: str) -> str:
    """UTF-8 (a BOM allowed) or a one-line ``InputError`` with the offset of the first bad byte."""
    from cprsim.errors import InputError

    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise InputError(f"{label}: not UTF-8 text (byte {e.start})") from None


def read_input_bytes(path: str | os.PathLike, what: str = "file", max_bytes: Cap = None) -> bytes:
    """The bytes of a user's input file: a regular file within its cap (``max_bytes``, default
    the ``"data"`` cap: :func:`input_cap`); one that grows past the cap while read is refused."""
    from cprsim.errors import InputError

    with open_input_binary(path, what, max_bytes) as f:
        try:
            return f.read()
        except OSError as e:
            raise InputError(f"{short(path)}: cannot read this {what} ({e.strerror})") from None


def read_input_text(path: str | os.PathLike, what: str = "file", max_bytes: Cap = "config") -> str:
    """The text of a user's input file: a regular UTF-8 file within ``max_bytes`` (default the
    ``"config"`` cap: :func:`input_cap`; pass ``"data"`` for a data file)."""
    return decode_text(read_input_bytes(path, what, max_bytes), short(path))


def read_input_json(path: str | os.PathLike, what: str = "file", max_bytes: Cap = "data") -> Any:
    """A user's JSON input file (default cap: ``"data"``): invalid JSON is a one-line
    ``InputError`` naming the file, line and column, never its content."""
    from cprsim.errors import InputError

    text = read_input_text(path, what, max_bytes)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(
            f"{short(path)}: line {e.lineno}, column {e.colno}: invalid JSON (a {what}: {e.msg})"
        ) from None
    except RecursionError:
        raise InputError(f"{short(path)}: nested too deeply (a {what})") from None


def open_input_text(path: str | os.PathLike, what: str = "file", max_bytes: Cap = "data"):
    """A regular UTF-8 data file (default cap: ``"data"``) opened for streaming (CSV readers);
    decode errors while reading surface as ``UnicodeDecodeError``: wrap the loop in
    ``decode_errors``."""
    return io.TextIOWrapper(
        open_input_binary(path, what, max_bytes), encoding="utf-8-sig", newline=""
    )


class decode_errors:
    """Turn a ``UnicodeDecodeError`` (or a CSV field too large) while streaming ``path`` into a
    one-line ``InputError``."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.label = short(path)

    def __enter__(self) -> decode_errors:
        return self

    def __exit__(self, kind, err, tb) -> Literal[False]:
        from cprsim.errors import InputError

        if kind is not None and issubclass(kind, UnicodeDecodeError):
            raise InputError(
                f"{self.label}: not UTF-8 text (byte {err.start} of a block)"
            ) from None
        if kind is not None and issubclass(kind, csv.Error):
            raise InputError(f"{self.label}: not a CSV file ({short(err)})") from None
        return False


def parse_toml(text: str, source: str) -> dict[str, Any]:
    """TOML text as a dict: invalid, or nested deeper than ``MAX_DEPTH``, is a one-line error."""
    import tomllib

    from cprsim.errors import InputError

    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"{source}: invalid TOML: {e}") from None
    except ValueError:  # an integer literal of more than sys.get_int_max_str_digits() digits
        raise InputError(
            f"{source}: invalid TOML: an integer of more than {sys.get_int_max_str_digits()} digits"
        ) from None
    except RecursionError:
        raise InputError(
            f"{source}: nested too deeply (a configuration nests at most {MAX_DEPTH} levels)"
        ) from None
    stack: list[tuple[Any, int]] = [(raw, 1)]
    while stack:
        v, d = stack.pop()
        if d > MAX_DEPTH:
            raise InputError(
                f"{source}: nested too deeply (a configuration nests at most {MAX_DEPTH} levels)"
            )
        if isinstance(v, dict):
            stack.extend((x, d + 1) for x in v.values())
        elif isinstance(v, list):
            stack.extend((x, d + 1) for x in v)
    return raw


def read_toml(path: str | os.PathLike, what: str = "file") -> dict[str, Any]:
    """A TOML configuration file as a dict; a missing, undecodable, invalid file, or one larger
    than the ``"config"`` cap (:func:`input_cap`, checked before parsing), is a one-line
    ``InputError``."""
    return parse_toml(read_input_text(path, what, "config"), short(path))


def silence_stdout() -> None:
    """Point standard output at the null device, so that writing or flushing it again (at exit)
    raises no second ``BrokenPipeError`` once its reader has gone away."""
    import sys

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # pragma: no cover - stdout without a descriptor
        pass
