"""Generate docs/api.md, the Python API reference, from the docstrings of ``cprsim.__all__``.

    python docs/gen_api.py           # (re)write docs/api.md (temp file + os.replace)
    python docs/gen_api.py --check   # exit 1 if docs/api.md differs from what would be written

Everything comes from the objects themselves: ``inspect.signature`` (annotations as written in
the source), ``inspect.getdoc``, the fields of dataclasses, named tuples and pydantic models
(with the ``#:`` comment beside a dataclass field in its source, where there is one), walked in
the fixed order of :data:`SECTIONS`. No version, date, path or memory address: the same API
always gives the same bytes. Every public name must appear in a section (else an error).
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parent
TARGET = DOCS / "api.md"
WIDTH = 100  #: signatures longer than this get one parameter per line

#: (title, introduction, names): the reference's sections, in order
SECTIONS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (
        "Scenarios",
        "Load a scenario (built-in or TOML), change it, and read its derived costs.",
        ("load_scenario", "scenario_names", "checkpoint_costs", "Scenario", "Costs"),
    ),
    (
        "Simulation",
        "Replications of one scenario, their summary and their tables.",
        ("simulate", "Runs", "ReplicationResult", "Event", "Estimate"),
    ),
    (
        "Planning",
        "The planner's choice of strategy and checkpoint intervals under an accuracy bound, and "
        "the calibration behind it.",
        (
            "plan",
            "Plan",
            "Option",
            "pls_bound",
            "load_calibration",
            "Calibration",
            "run_calibration",
        ),
    ),
    (
        "Sweeps",
        "What-if grids built in Python, run like `cprsim sweep`, and their results.",
        ("Sweep", "SweepResults", "PointSummary", "load_results"),
    ),
    (
        "Failure logs",
        "Read a failure log and fit lifetime distributions with censoring.",
        ("fit", "read_trace", "FitReport", "Fit", "Trace"),
    ),
    (
        "Figures",
        "Each returns a `matplotlib.figure.Figure` made without pyplot (constrained layout), takes "
        "`ax=` to draw into given axes and `**kwargs` for its main artist.",
        (
            "plot_overhead",
            "plot_pls",
            "plot_breakdown",
            "plot_timeline",
            "plot_fit",
            "plot_calibration",
            "save_figure",
        ),
    ),
    ("Errors", "", ("InputError", "ParameterError")),
)

_ROLE = re.compile(r":(?:func|class|meth|mod|data|attr|exc):`~?([^`]+)`")


def _md(text: str) -> str:
    """A docstring as Markdown: Sphinx roles as code, ``::`` blocks fenced as Python."""
    text = _ROLE.sub(
        lambda m: f"`{m.group(1).split('.')[-1] if m.group(0).count('~') else m.group(1)}`", text
    )
    out: list[str] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.rstrip().endswith("::") and not line.strip().startswith(".."):
            head = line.rstrip()[:-2].rstrip()
            if head:
                out.append(head + ":")
            i += 1
            while i < len(lines) and not lines[i].strip():
                i += 1
            block = []
            while i < len(lines) and (not lines[i].strip() or lines[i].startswith("    ")):
                block.append(lines[i][4:])
                i += 1
            while block and not block[-1].strip():
                block.pop()
            out += ["", "```python", *block, "```", ""]
            continue
        out.append(line)
        i += 1
    return "\n".join(out).strip()


def _annotation(a: Any) -> str:
    if a is inspect.Parameter.empty:
        return ""
    if isinstance(a, str):  # as written in the source (postponed annotations), quotes dropped
        return a.replace('"', "").replace("'", "")
    if isinstance(a, type):
        return a.__name__
    if hasattr(a, "__forward_arg__"):  # a NamedTuple's postponed annotation
        return str(a.__forward_arg__)
    return re.sub(r"\b(?:[a-z_]+\.)+([A-Z]\w*)", r"\1", str(a)).replace("typing.", "")


def _signature(name: str, obj: Any, prefix: str = "") -> str:
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return f"{prefix}{name}(...)"
    parts = []
    star_done = False
    params = list(sig.parameters.values())
    if params and params[0].name in ("self", "cls"):
        params = params[1:]
    for p in params:
        if p.kind is p.KEYWORD_ONLY and not star_done:
            parts.append("*")
            star_done = True
        if p.kind is p.VAR_POSITIONAL:
            star_done = True
        text = {p.VAR_POSITIONAL: "*", p.VAR_KEYWORD: "**"}.get(p.kind, "") + p.name
        ann = _annotation(p.annotation)
        if ann:
            text += f": {ann}"
        if p.default is not p.empty:
            text += (" = " if ann else "=") + _default(p.default)
        parts.append(text)
    ret = _annotation(sig.return_annotation)
    tail = f" -> {ret}" if ret else ""
    one = f"{prefix}{name}({', '.join(parts)}){tail}"
    if len(one) <= WIDTH:
        return one
    return f"{prefix}{name}(\n" + "".join(f"    {x},\n" for x in parts) + f"){tail}"


def _default(v: Any) -> str:
    if isinstance(v, float) and v.is_integer() and abs(v) >= 1e6:
        return f"{v:g}".replace("e+0", "e").replace("e+", "e")
    text = repr(v)
    return re.sub(r" at 0x[0-9a-f]+", "", text)


def _source_comments(cls: type) -> dict[str, str]:
    """``name: type  #: comment`` (or ``#:`` lines just above) in the sources of the class and its bases."""
    out: dict[str, str] = {}
    for c in cls.__mro__:
        if c is not object and c.__module__.startswith("cprsim"):
            for k, v in _own_comments(c).items():
                out.setdefault(k, v)
    return out


def _own_comments(cls: type) -> dict[str, str]:
    try:
        src = inspect.getsource(cls)
    except (OSError, TypeError):
        return {}
    out: dict[str, str] = {}
    pending: list[str] = []
    for line in src.split("\n"):
        s = line.strip()
        if s.startswith("#:"):
            pending.append(s[2:].strip())
            continue
        m = re.match(r"^([A-Za-z_]\w*)\s*:[^=]*?(?:=.*?)?(?:#:\s*(.*))?$", s)
        if m and not s.startswith(("def ", "class ", "return", "@")):
            note = " ".join(pending + ([m.group(2).strip()] if m.group(2) else []))
            if note:
                out.setdefault(m.group(1), note)
        pending = []
    return out


def _cell(text: str) -> str:
    return " ".join(_md(str(text)).split()).replace("|", "\\|")


def _fields(obj: type) -> list[str]:
    rows: list[tuple[str, str, str]] = []
    if dataclasses.is_dataclass(obj):
        notes = _source_comments(obj)
        for f in dataclasses.fields(obj):
            rows.append((f.name, _annotation(f.type), notes.get(f.name, "")))
    elif isinstance(obj, type) and issubclass(obj, tuple) and hasattr(obj, "_fields"):
        hints = getattr(obj, "__annotations__", {})
        rows = [(n, _annotation(hints.get(n, "")), "") for n in obj._fields]
    elif hasattr(obj, "model_fields"):
        for n, f in obj.model_fields.items():
            rows.append((n, _annotation(f.annotation), f.description or ""))
    if not rows:
        return []
    out = ["| Field | Type | Description |", "|---|---|---|"]
    out += [
        f"| `{n}` | `{_cell(t)}` | {_cell(d)} |" if t else f"| `{n}` | | {_cell(d)} |"
        for n, t, d in rows
    ]
    return out + [""]


def _members(cls: type, qual: str) -> list[str]:
    out: list[str] = []
    for name, raw in cls.__dict__.items():
        if name.startswith("_") and name not in ("__len__", "__iter__", "__getitem__"):
            continue
        if name.startswith("model_"):
            continue
        if isinstance(raw, property):
            doc = inspect.getdoc(raw.fget) or ""
            out += [f"#### `{qual}.{name}` (property)", ""] + ([_md(doc), ""] if doc else [])
        elif isinstance(raw, (classmethod, staticmethod)) or inspect.isfunction(raw):
            fn = raw.__func__ if isinstance(raw, (classmethod, staticmethod)) else raw
            kind = "classmethod " if isinstance(raw, classmethod) else ""
            sig = _signature(f"{qual}.{name}", fn)
            doc = inspect.getdoc(fn) or ""
            if name.startswith("__") and not doc:
                continue
            out += [f"#### `{qual}.{name}`", "", "```python", kind + sig, "```", ""]
            out += [_md(doc), ""] if doc else []
    return out


def _entry(name: str, obj: Any) -> list[str]:
    doc = inspect.getdoc(obj) or ""
    if isinstance(obj, type):
        kind = "exception" if issubclass(obj, BaseException) else "class"
        out = [f"### `{name}` ({kind})", ""]
        if not (
            dataclasses.is_dataclass(obj)
            or hasattr(obj, "model_fields")
            or issubclass(obj, BaseException)
            or issubclass(obj, tuple)
        ):
            out += ["```python", _signature(name, obj, "class "), "```", ""]
        out += [_md(doc), ""] if doc else []
        out += _fields(obj)
        out += _members(obj, name)
        return out
    return [
        f"### `{name}`",
        "",
        "```python",
        _signature(name, obj, "def "),
        "```",
        "",
        _md(doc),
        "",
    ]


def render() -> str:
    """The whole reference as Markdown text (deterministic)."""
    import cprsim
    import cprsim.api

    public = [n for n in cprsim.__all__ if n != "__version__"]
    listed = [n for _, _, names in SECTIONS for n in names]
    missing = [n for n in public if n not in listed]
    extra = [n for n in listed if n not in public]
    if missing or extra:
        raise SystemExit(
            f"docs/gen_api.py: SECTIONS out of step with cprsim.__all__ "
            f"(missing {missing}, not public {extra})"
        )
    lines = [
        "# Python API reference",
        "",
        "<!-- Generated by docs/gen_api.py from the docstrings; do not edit by hand. -->",
        "<!-- Regenerate with `python docs/gen_api.py`; tests/test_api.py fails when this file is stale. -->",
        "",
        _md(inspect.getdoc(cprsim.api) or ""),
        "",
        "Every name below is imported from `cprsim` itself (`from cprsim import simulate`); "
        "`cprsim.api` defines them.",
        "",
    ]
    lines += ["## Contents", ""]
    for title, _, names in SECTIONS:
        lines.append(f"* **{title}**: " + ", ".join(f"`{n}`" for n in names))
    lines.append("")
    for title, intro, names in SECTIONS:
        lines += [f"## {title}", ""]
        if intro:
            lines += [intro, ""]
        for n in names:
            lines += _entry(n, getattr(cprsim, n))
    text = "\n".join(lines)
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.rstrip("\n") + "\n"


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file beside it and ``os.replace``."""
    try:
        mode = path.stat().st_mode & 0o777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(text.encode("utf-8"))
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description="Generate docs/api.md from the docstrings of cprsim's public API."
    )
    ap.add_argument(
        "--check", action="store_true", help="exit 1 if docs/api.md is out of date; write nothing"
    )
    ap.add_argument("--out", type=Path, default=TARGET, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    text = render()
    if args.check:
        current = args.out.read_bytes() if args.out.is_file() else b""
        if current != text.encode("utf-8"):
            print(
                f"{args.out}: out of date with the API; run `python docs/gen_api.py`",
                file=sys.stderr,
            )
            return 1
        return 0
    write_atomic(args.out, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
