"""The calibration's files, below the use cases that write them: a configuration's fingerprint
(what ``--resume`` compares), whole-line appends to a journal, and the UTC time stamp."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
from pathlib import Path
from typing import Any


def fingerprint(config: dict[str, Any]) -> str:
    """SHA-256 (hex) of a calibration's configuration as canonical JSON (sorted keys): what
    ``--resume`` compares."""
    text = json.dumps(config, sort_keys=True, separators=(",", ":"), allow_nan=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def append_line(path: Path, text: str) -> None:
    """Append whole line(s) with one ``write`` and ``fsync`` (a kill leaves at most a torn tail)."""
    data = text.encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def utc_now() -> str:
    """Now, in UTC, to the second (``2026-11-27T17:40:09Z``)."""
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
