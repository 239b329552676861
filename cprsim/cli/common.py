"""Options and parameter types shared by the subcommands (defined once)."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

if (
    TYPE_CHECKING
):  # pragma: no cover - imported where used: `cprsim --help` needs neither pydantic nor scipy
    from cprsim import scenario as sc

_DUR = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(s|m|min|h|d)?\s*$")
_TO_H = {"s": 1 / 3600, "m": 1 / 60, "min": 1 / 60, "h": 1.0, "d": 24.0, None: 1.0}


class Duration(click.ParamType):
    """A duration: ``90s``, ``30m``, ``1.5h``, ``2d``; a bare number is hours. Converts to hours."""

    name = "duration"

    def convert(self, value: Any, param, ctx) -> float:
        if isinstance(value, float):
            return value
        m = _DUR.match(str(value))
        if not m:
            self.fail(f"{value!r} is not a duration like 90s, 30m, 1.5h or 2d", param, ctx)
        hours = float(m.group(1)) * _TO_H[m.group(2)]
        if hours <= 0:
            self.fail(f"{value!r} must be > 0", param, ctx)
        return hours


DURATION = Duration()


def scenario_argument(f: Callable) -> Callable:
    return click.argument("scenario", metavar="NAME|FILE")(f)


def max_events_option(f: Callable) -> Callable:
    return click.option(
        "--max-events",
        type=click.FloatRange(min=1),
        default=1e7,
        show_default=True,
        help="Refuse, before simulating, a scenario whose replications would each simulate more "
        "events (checkpoints + failures + nodes, first order) than this.",
    )(f)


def set_option(f: Callable) -> Callable:
    return click.option(
        "--set",
        "overrides",  # the library's parameter (scenario.load, load_sweep): errors name it
        multiple=True,
        metavar="KEY=VALUE",
        help="Override a scenario key (dotted, TOML value), e.g. cluster.trainers=40.",
    )(f)


def model_option(f: Callable) -> Callable:
    return click.option(
        "--model",
        "model",
        type=click.Path(dir_okay=False),
        default=None,
        metavar="FILE",
        help="A failure model fitted by `cprsim fit --out`: its lifetimes replace the scenario's "
        "node failures; its repair times go to the scenario's [lifecycle] repair (unused without "
        "one: [reschedule] stays the scenario's). `cprsim show NAME --model FILE` lists what "
        "came from it under [sources].",
    )(f)


def load_scenario(
    name: str,
    overrides: tuple[str, ...],
    options: dict[str, tuple[str, Any]] | None = None,
    model: str | None = None,
) -> sc.Scenario:
    """The scenario ``name`` with its node failures replaced by the fitted ``--model`` file's,
    the ``--set`` ``overrides`` and the keys the command's own ``options`` set (``{"strategy":
    ("strategy.name", value)}``: the option's Python name -> the scenario key and its value, None
    for not given); an error about such a key names the option."""
    from cprsim import scenario as sc
    from cprsim.errors import ParameterError

    updates = sc.parse_set(overrides)
    given = {key: opt for opt, (key, value) in (options or {}).items() if value is not None}
    updates.update({key: value for key, value in (options or {}).values() if value is not None})
    try:
        s = sc.load(name, updates, model)
    except ParameterError as e:
        if e.param == "overrides" and e.key in given:
            raise e.replace(param=given[e.key], key=None) from None
        raise
    for key, text in s.sources.items():  # what a model file gave, and what it gave in vain
        if model is not None:
            click.echo(f"--model: {key}: {text}", err=True)
        elif key.startswith("unused."):
            click.echo(f"warning: failures.model: {text}", err=True)
    return s


#: the width of output that does not go to a terminal (the tables are laid out to fit it)
PIPED_WIDTH = 100


def console():
    """A rich console on stdout: a terminal's width; when output is not a terminal, the ``COLUMNS``
    environment variable's when it is set (``COLUMNS=80 cprsim plan ... | less``), else
    :data:`PIPED_WIDTH` columns."""
    from rich.console import Console

    if sys.stdout.isatty():
        return Console()
    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isdigit() and int(columns) > 0:
        return Console(width=int(columns))
    return Console(width=PIPED_WIDTH)


def flag(param: str) -> str:
    """The option of a library parameter: ``node_mtbf_h`` -> ``--node-mtbf-h``."""
    return "--" + param.replace("_", "-")
