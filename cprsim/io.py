"""Atomic file output: write to a temporary file beside the target, then rename.

A reader never sees a half-written file, and an interrupted run leaves the previous version.
"""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable, Sequence


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; give the permissions open() would
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, p)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return p


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def dumps_json(obj: Any) -> str:
    return json.dumps(obj, indent=2, sort_keys=False, allow_nan=False) + "\n"


def atomic_write_json(path: str | os.PathLike, obj: Any) -> Path:
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


def atomic_write_csv(path: str | os.PathLike, header: Sequence[str], rows: Iterable[Sequence[Any]]) -> Path:
    return atomic_write_text(path, csv_text(header, rows))


def read_toml(path: str | os.PathLike, what: str = "file") -> dict[str, Any]:
    """A TOML file as a dict; a missing, undecodable or invalid file is a one-line ``InputError``."""
    import tomllib

    from cprsim.errors import InputError

    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: no such {what}")
    try:
        return tomllib.loads(p.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"{p}: invalid TOML: {e}") from None
    except UnicodeDecodeError:
        raise InputError(f"{p}: not a UTF-8 text file") from None
