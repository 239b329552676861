"""Splice the tables an experiment's run wrote into its README, between marker comments.

A README marks each generated block with a pair of comments on lines of their own::

    <!-- begin generated: out/tables/headline.md (experiments/cpr_production/run.sh) -->
    ... replaced by the file's text ...
    <!-- end generated -->

The path (relative to the README's folder, under ``out/``) names the file whose text goes between
the markers; the parenthesis names the command that writes it, for the reader. Every full-mode
``run.sh`` calls this script at its end; ``--out-dir DIR`` reads the files from DIR instead of
``out/`` (the tests splice a quick run's files into a copy of a README), and ``--check`` only
checks that every marked file exists and is not empty. The README is rewritten atomically (a
temporary file in its folder, then a rename), and only when its text changes.

Usage: python experiments/update_readmes.py [--out-dir DIR] [--check] [README.md ...]
(default: every experiments/*/README.md; exit status 1, naming the marker, on a missing file or
an unbalanced marker)
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
BEGIN = re.compile(r"^<!-- begin generated: (?P<path>\S+)(?: \((?P<command>[^)]*)\))? -->$")
END = "<!-- end generated -->"


class SpliceError(Exception):
    """A README's markers are unbalanced or name a file that is missing or empty."""


def markers(text: str) -> list[tuple[int, int, str]]:
    """The (begin line, end line, path) of every generated block of ``text``, in order."""
    out: list[tuple[int, int, str]] = []
    begin: tuple[int, str] | None = None
    for i, line in enumerate(text.splitlines()):
        m = BEGIN.match(line.strip())
        if m:
            if begin is not None:
                raise SpliceError(
                    f"line {i + 1}: a begin marker inside the block of line {begin[0] + 1}"
                )
            begin = (i, m["path"])
        elif line.strip() == END:
            if begin is None:
                raise SpliceError(f"line {i + 1}: an end marker without a begin marker")
            out.append((begin[0], i, begin[1]))
            begin = None
        elif line.strip().startswith("<!-- begin generated"):
            raise SpliceError(f"line {i + 1}: malformed marker {line.strip()!r}")
    if begin is not None:
        raise SpliceError(f"line {begin[0] + 1}: begin marker without an end marker")
    return out


def source(readme: Path, path: str, out_dir: Path | None) -> Path:
    """The file a marker's ``path`` names: under the README's folder, or ``out/`` -> ``out_dir``."""
    parts = Path(path).parts
    if not parts or parts[0] != "out" or ".." in parts:
        raise SpliceError(f"marker path {path!r} is not under out/")
    base = out_dir if out_dir is not None else readme.parent / "out"
    return base.joinpath(*parts[1:])


def splice(readme: Path, out_dir: Path | None = None) -> str:
    """The README's text with every generated block replaced by its file's text."""
    text = readme.read_text()
    lines = text.splitlines()
    new: list[str] = []
    pos = 0
    for begin, end, path in markers(text):
        f = source(readme, path, out_dir)
        if not f.is_file() or not f.read_text().strip():
            raise SpliceError(
                f"line {begin + 1}: {path}: {f} is missing or empty (run the experiment)"
            )
        new += lines[pos : begin + 1]
        new += ["", f.read_text().strip(), "", lines[end]]
        pos = end + 1
    new += lines[pos:]
    return "\n".join(new) + ("\n" if text.endswith("\n") else "")


def write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text``: a temporary file in its folder, then a rename (mode kept)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, path.stat().st_mode & 0o777)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def main(argv: list[str] | None = None) -> int:
    """Splice (or ``--check``) each README; 1 on the first error, naming the README and marker."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("readmes", nargs="*", type=Path)
    ap.add_argument("--out-dir", type=Path, help="read the marked files from here instead of out/")
    ap.add_argument("--check", action="store_true", help="only check that every marked file exists")
    a = ap.parse_args(argv)
    readmes = a.readmes or sorted(HERE.glob("*/README.md"))
    for readme in readmes:
        try:
            text = splice(readme, a.out_dir)
        except (SpliceError, OSError) as e:
            print(f"update_readmes.py: {readme}: {e}", file=sys.stderr)
            return 1
        n = len(markers(text))
        if a.check:
            print(f"{readme}: {n} generated block(s), every file present")
        elif text != readme.read_text():
            write_atomic(readme, text)
            print(f"{readme}: {n} generated block(s) updated")
        else:
            print(f"{readme}: {n} generated block(s), unchanged")
    return 0


if __name__ == "__main__":
    sys.exit(main())
