"""docs/cli.md is generated from the click command tree: it must match the CLI it documents."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import click

from cprsim.cli import main

DOCS = Path(__file__).resolve().parent.parent / "docs"


def _generator():
    spec = importlib.util.spec_from_file_location("_cprsim_gen_cli", DOCS / "gen_cli.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_cli_reference_is_up_to_date() -> None:
    committed = (DOCS / "cli.md").read_text(encoding="utf-8")
    generated = _generator().render(main)
    assert committed == generated, (
        "docs/cli.md is stale: run `python docs/gen_cli.py` and commit the result"
    )


def test_cli_reference_is_deterministic() -> None:
    gen = _generator()
    assert gen.render(main) == gen.render(main)


def test_every_subcommand_is_documented() -> None:
    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    ctx = click.Context(main, info_name="cprsim")
    names = main.list_commands(ctx)
    assert names, "the cprsim group has no subcommands"
    for name in names:
        assert f"## `cprsim {name}`" in text, f"`cprsim {name}` is missing from docs/cli.md"
