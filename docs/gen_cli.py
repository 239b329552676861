"""Generate docs/cli.md, the command-line reference, from the click command tree.

    python docs/gen_cli.py           # (re)write docs/cli.md (temp file + os.replace)
    python docs/gen_cli.py --check   # exit 1 if docs/cli.md differs from what would be written

Everything comes from click's own objects (``click.Context``, ``Command.get_usage``,
``Command.get_params``, ``Parameter.make_metavar``, ``Option.get_help_record``, ...), walked in a
fixed order: the group, then its subcommands as ``Group.list_commands`` returns them (sorted by
name), each command's parameters in declaration order. The contexts get a fixed terminal width,
so the output does not depend on the terminal, and it contains no version, date or path: the
same command tree always gives the same bytes.
"""

from __future__ import annotations

import argparse
import inspect
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

#: fixed width for click's formatter (usage lines wrap at this width, whatever the terminal)
WIDTH = 100
DOCS = Path(__file__).resolve().parent
TARGET = DOCS / "cli.md"
PROG = "cprsim"


def _context(cmd: click.Command, name: str, parent: click.Context | None) -> click.Context:
    settings = dict(cmd.context_settings)
    settings.update(terminal_width=WIDTH, max_content_width=WIDTH)
    return click.Context(cmd, info_name=name, parent=parent, **settings)


def _walk(
    cmd: click.Command, name: str, parent: click.Context | None
) -> Iterator[tuple[click.Command, click.Context]]:
    ctx = _context(cmd, name, parent)
    yield cmd, ctx
    if isinstance(cmd, click.Group):
        for sub in cmd.list_commands(ctx):
            child = cmd.get_command(ctx, sub)
            if child is not None and not child.hidden:
                yield from _walk(child, sub, ctx)


def _path(ctx: click.Context) -> str:
    return ctx.command_path


def _anchor(title: str) -> str:
    """The GitHub-style anchor of a heading ``cprsim foo``: ``cprsim-foo``."""
    return "".join(c for c in title.lower().replace(" ", "-") if c.isalnum() or c in "-_")


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell: one line, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def _text(text: str) -> str:
    """Prose safe in Markdown: a table cell's rules, and ``<``/``>`` that no renderer takes for HTML."""
    return _cell(text).replace("<", "&lt;").replace(">", "&gt;")


def _help_blocks(text: str | None) -> list[str]:
    """A command's help as Markdown blocks: paragraphs, and click's ``\\b`` blocks kept verbatim."""
    if not text:
        return []
    text = inspect.cleandoc(text.split("\f", 1)[0])
    blocks: list[str] = []
    for para in text.split("\n\n"):
        lines = para.split("\n")
        if lines and lines[0].strip() == "\b":
            body = "\n".join(line.rstrip() for line in lines[1:])
            blocks.append("```text\n" + body + "\n```")
        elif para.strip():
            blocks.append(
                _text(" ".join(line.strip() for line in lines if line.strip())).replace("\\|", "|")
            )
    return blocks


def _unset(value: Any) -> bool:
    sentinel = getattr(click.core, "UNSET", None)
    return (
        value is None
        or (sentinel is not None and value is sentinel)
        or type(value).__name__ == "Sentinel"
    )


def _default(param: click.Parameter, ctx: click.Context) -> str:
    value = param.get_default(ctx, call=False)
    if callable(value):
        return "(computed)"
    if _unset(value) or (isinstance(value, (list, tuple)) and not value):
        return ""
    if isinstance(param, click.Option) and param.count and value == 0:
        return "0"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    return str(value)


def _extra(param: click.Parameter, ctx: click.Context) -> dict[str, str]:
    """click's bracketed extras (range, required), where this click version exposes them."""
    get = getattr(param, "get_help_extra", None)
    if get is None:
        return {}
    try:
        return {k: str(v) for k, v in get(ctx).items()}
    except TypeError:
        return {}


def _metavar(param: click.Parameter, ctx: click.Context) -> str:
    try:
        return param.make_metavar(ctx)  # click >= 8.2
    except TypeError:
        return param.make_metavar()  # type: ignore[call-arg]  # click 8.1


def _option_row(opt: click.Option, ctx: click.Context) -> str:
    record = opt.get_help_record(ctx)
    names = ", ".join(sorted(opt.opts, key=lambda o: (o.startswith("--"), o)))
    if opt.secondary_opts:
        names += " / " + ", ".join(opt.secondary_opts)
    if record is None:  # hidden options never reach the reference
        return ""
    if opt.count:
        kind = "counter, repeatable"
    elif opt.is_flag:
        kind = "flag"
    else:
        kind = f"`{_cell(_metavar(opt, ctx))}`"
        rng = _extra(opt, ctx).get("range")
        if rng:
            kind += f" ({_cell(rng)})"
        if opt.multiple:
            kind += ", repeatable"
    if opt.required:
        default = "required"
    else:
        value = _default(opt, ctx)
        default = f"`{_cell(value)}`" if value else ""
    text = inspect.cleandoc(opt.help or "")
    return f"| `{_cell(names)}` | {kind} | {default} | {_text(text)} |"


def _command_section(cmd: click.Command, ctx: click.Context) -> list[str]:
    title = _path(ctx)
    out = [f"## `{title}`", ""]
    out += ["```text", cmd.get_usage(ctx).rstrip(), "```", ""]
    for block in _help_blocks(cmd.help):
        out += [block, ""]
    params = cmd.get_params(ctx)
    args = [p for p in params if isinstance(p, click.Argument)]
    opts = [p for p in params if isinstance(p, click.Option) and not p.hidden]
    if args:
        out += ["**Arguments**", "", "| Argument | Type | Required |", "|---|---|---|"]
        for a in args:
            typ = a.type.name.upper() if not isinstance(a.type, click.Choice) else "choice"
            req = "yes" if a.required else "no"
            mult = ", repeatable" if a.nargs == -1 else ""
            out.append(f"| `{_cell(_metavar(a, ctx))}` | `{_cell(typ)}`{mult} | {req} |")
        out.append("")
    if opts:
        out += ["**Options**", "", "| Option | Type | Default | Description |", "|---|---|---|---|"]
        out += [row for row in (_option_row(o, ctx) for o in opts) if row]
        out.append("")
    if isinstance(cmd, click.Group):
        subs = [(n, cmd.get_command(ctx, n)) for n in cmd.list_commands(ctx)]
        subs = [(n, c) for n, c in subs if c is not None and not c.hidden]
        if subs:
            out += ["**Commands**", "", "| Command | Summary |", "|---|---|"]
            for n, c in subs:
                sub_title = f"{title} {n}"
                out.append(
                    f"| [`{n}`](#{_anchor(sub_title)}) | {_text(c.get_short_help_str(limit=1000))} |"
                )
            out.append("")
    return out


def render(main: click.Command | None = None) -> str:
    """The whole reference as Markdown text (deterministic)."""
    if main is None:
        from cprsim.cli import main as cli_main

        main = cli_main
    lines = [
        "# Command-line reference",
        "",
        "<!-- Generated by docs/gen_cli.py from the click command tree; do not edit by hand. -->",
        "<!-- Regenerate with `python docs/gen_cli.py`; tests/test_docs.py fails when this file is stale. -->",
        "",
        "Every command accepts `-h`/`--help`. Bad input (an unknown scenario key, a missing file, a "
        "malformed trace) is reported as one line on stderr with exit status 2. Durations given to "
        "`--interval` accept `90s`, `30m`, `1.5h`, `2d`; a bare number is hours.",
        "",
    ]
    for cmd, ctx in _walk(main, PROG, None):
        lines += _command_section(cmd, ctx)
    return "\n".join(lines).rstrip("\n") + "\n"


def _mode(path: Path) -> int:
    """The file's current permissions, or what a plain ``open(path, "w")`` would give (mkstemp: 0600)."""
    try:
        return path.stat().st_mode & 0o777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file beside it and ``os.replace``."""
    mode = _mode(path)
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
        description="Generate docs/cli.md from the cprsim click command tree."
    )
    ap.add_argument(
        "--check", action="store_true", help="exit 1 if docs/cli.md is out of date; write nothing"
    )
    ap.add_argument("--out", type=Path, default=TARGET, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    text = render()
    if args.check:
        current = args.out.read_bytes() if args.out.is_file() else b""
        if current != text.encode("utf-8"):
            print(
                f"{args.out}: out of date with the CLI; run `python docs/gen_cli.py`",
                file=sys.stderr,
            )
            return 1
        return 0
    write_atomic(args.out, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
