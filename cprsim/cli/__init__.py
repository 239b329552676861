"""The ``cprsim`` command line: one click group; each subcommand lives in its own module.

The subcommand modules are imported when their command is used (or listed by a tool that asks
for the command itself, e.g. docs/gen_cli.py), not at start-up: they import pydantic, numpy and
scipy, and ``cprsim --help`` needs none of them. It lists the commands with the summaries of
:data:`_COMMANDS` (``benchmarks/startup.py`` checks them against the commands' own help).
"""

from __future__ import annotations

import importlib
import logging
import os
import signal
from typing import Any

import click

from cprsim.cli import progress
from cprsim.errors import InputError, ParameterError
from cprsim.version import __version__

#: subcommand -> (its module in cprsim.cli, the first paragraph of its help); a module defines
#: ``command`` (a click command) or ``commands`` (a list)
_COMMANDS = {
    "access": (
        "access",
        "Coverage c(r) of the top rows, rows touched after n samples, and MFU/SSU ranking noise.",
    ),
    "calibrate": (
        "calibrate",
        "Train a DLRM with injected partial-recovery failures; fit accuracy loss against PLS.",
    ),
    "fit": (
        "fit",
        "Fit exponential, Weibull, gamma, lognormal and log-logistic to a failure log, with censoring.",
    ),
    "plan": ("plan", "Pick the checkpoint intervals and recovery strategy for an accuracy bound."),
    "plot": ("plot", "Draw a figure of KIND from RESULTS."),
    "scenarios": (
        "scenarios",
        "List the built-in scenarios (`cprsim show NAME` prints one in full).",
    ),
    "show": (
        "scenarios",
        "Print the effective config of a scenario (defaults included) and its derived costs.",
    ),
    "simulate": (
        "simulate",
        "Simulate a scenario (built-in NAME or TOML FILE) and report the overhead breakdown.",
    ),
    "sweep": (
        "sweep",
        "Run every combination of a sweep file's grid values x strategies x replications.",
    ),
}


class _Group(click.Group):
    """Loads a subcommand's module when the command is needed; turns bad input anywhere below into
    one line on stderr and exit code 2.

    The one place a library's :class:`~cprsim.errors.ParameterError` meets the command line: a
    parameter that is an option of the command being run (the click option's Python name) is
    shown as the option (``fmt`` -> ``--format``), any other keeps its name."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(self.commands) | set(_COMMANDS))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.commands and name in _COMMANDS:
            self._load(_COMMANDS[name][0])
        return self.commands.get(name)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """click's, with the closest command names suggested for a mistyped one
        (``cprsim simulat`` -> "Did you mean 'simulate'?")."""
        name = args[0] if args else ""
        if (
            name
            and not name.startswith("-")
            and self.get_command(ctx, name) is None
            and not ctx.resilient_parsing
        ):
            import difflib

            close = difflib.get_close_matches(name, self.list_commands(ctx), n=3, cutoff=0.6)
            if close:
                ctx.fail(
                    f"No such command {name!r}. Did you mean "
                    + " or ".join(repr(c) for c in close)
                    + "?"
                )
        return super().resolve_command(ctx, args)

    def _load(self, module: str) -> None:
        try:
            mod = importlib.import_module(f"cprsim.cli.{module}")
        except ModuleNotFoundError as e:
            if e.name != f"cprsim.cli.{module}":
                raise
            return  # a module not written yet: its commands do not exist
        for cmd in getattr(mod, "commands", [getattr(mod, "command", None)]):
            if cmd is not None and cmd.name not in self.commands:
                self.add_command(cmd)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list of ``--help`` without importing the modules: a command not loaded yet is
        listed with its summary from :data:`_COMMANDS` (shortened by click, as its own help would be)."""
        listed = click.Group(self.name, commands=self.commands)
        for name, (_, summary) in _COMMANDS.items():
            if name not in listed.commands:
                listed.add_command(click.Command(name, help=summary))
        listed.format_commands(ctx, formatter)

    def invoke(self, ctx: click.Context):
        from cprsim.io import short

        progress.reset()
        try:
            with progress.signals_raise():
                return super().invoke(ctx)
        except progress.Signalled as e:  # SIGINT or SIGTERM: one line, exit 128 + the signal
            raise progress.stopped(
                progress.stop_message(ctx.invoked_subcommand or "", e.signum), e.signum
            ) from None
        except click.ClickException as e:
            sig = e.__context__
            if isinstance(sig, progress.Signalled) and not isinstance(e, progress.Interrupted):
                # a command's own line for a stop (calibrate's): the signal's exit status
                name = signal.Signals(sig.signum).name
                raise progress.stopped(f"{name}: {e.format_message()}", sig.signum) from None
            raise
        except ParameterError as e:  # a library function's parameter: the command's option
            raise UserError(_one_line(e.message(self._options(ctx)))) from None
        except InputError as e:
            raise UserError(_one_line(str(e))) from None
        except FileNotFoundError as e:
            raise UserError(f"{short(e.filename)}: no such file") from None
        except BrokenPipeError:  # the reader went away (`cprsim scenarios | head -1`): stop quietly
            from cprsim.io import silence_stdout

            silence_stdout()
            raise SystemExit(141) from None  # 128 + SIGPIPE, as a shell pipeline reports it
        except OSError as e:  # read-only or full disk, name too long, a device, permissions
            where = short(e.filename) if e.filename else "output"
            raise UserError(f"{where}: {e.strerror or e}") from None
        except (click.exceptions.Exit, click.exceptions.Abort):
            raise
        except RecursionError:
            raise UserError("an input is nested too deeply") from None
        except MemoryError:
            raise UserError(
                "out of memory: an input asks for more than this machine holds"
            ) from None
        except Exception as e:  # a bug: one line, not a traceback (-vv shows it)
            if logging.getLogger().isEnabledFor(logging.DEBUG):
                raise
            raise InternalError(
                f"internal error ({type(e).__name__}: {short(e, 120)}); please report it with "
                "the command (`cprsim -vv ...` shows the traceback)"
            ) from None

    def _options(self, ctx: click.Context) -> dict[str, str]:
        """The options of the subcommand being run, by their Python names: ``{"fmt": "--format"}``
        (the long form of each)."""
        cmd = self.commands.get(ctx.invoked_subcommand or "")
        if cmd is None:
            return {}
        return {
            p.name: next((o for o in p.opts if o.startswith("--")), p.opts[0])
            for p in cmd.params
            if isinstance(p, click.Option) and p.name
        }


def _one_line(text: str) -> str:
    return " ".join(text.split("\n")) if "\n" in text else text


def _show_usage_error(self: click.UsageError, file: Any = None) -> None:
    """A usage error (a bad option or argument) as the one line every other bad input gets:
    ``Error: <what is wrong> (`cprsim plan --help` lists the options)``, not click's three lines
    of usage, hint and error."""
    where = ""
    if self.ctx is not None and self.ctx.command.get_help_option(self.ctx) is not None:
        what = "commands" if isinstance(self.ctx.command, click.Group) else "options"
        where = f" (`{self.ctx.command_path} --help` lists the {what})"
    click.echo(
        f"Error: {_one_line(self.format_message())}{where}",
        file=file,
        err=file is None,
        color=self.ctx.color if self.ctx is not None else None,
    )


click.UsageError.show = _show_usage_error  # type: ignore[method-assign]


class UserError(click.ClickException):
    exit_code = 2


class InternalError(click.ClickException):
    exit_code = 70  # EX_SOFTWARE


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="cprsim")
@click.option("-v", "--verbose", count=True, help="More log output (repeat for debug).")
@click.option("-q", "--quiet", is_flag=True, help="Only errors.")
def main(verbose: int, quiet: bool) -> None:
    """Simulate and plan fault-tolerant training of large recommendation models.

    Failures, checkpoints, full vs partial recovery (CPR), MFU/SSU, erasure coding and more,
    on a SimPy model of trainers and embedding servers.

    Long commands show progress on stderr: a bar on a terminal, else a line every few seconds
    (CPRSIM_PROGRESS=off|lines|bar overrides). SIGINT or SIGTERM stops a command with one line and
    exit status 130 or 143.
    """
    # figures are files here: no GUI backend (a library caller, e.g. a notebook, keeps its own)
    os.environ.setdefault("MPLBACKEND", "Agg")
    level = (
        logging.ERROR if quiet else (logging.WARNING, logging.INFO, logging.DEBUG)[min(verbose, 2)]
    )
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
