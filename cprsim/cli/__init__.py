"""The ``cprsim`` command line: one click group; each subcommand lives in its own module."""

from __future__ import annotations

import importlib
import logging
import os

import click

from cprsim import __version__
from cprsim.errors import InputError

#: subcommand modules, each defining ``command`` (a click command) or ``commands`` (a list)
_MODULES = ("scenarios", "simulate", "fit", "access", "plan", "calibrate", "sweep", "plot")


class _Group(click.Group):
    """Turns bad input anywhere below into one line on stderr and exit code 2."""

    def invoke(self, ctx: click.Context):  # noqa: ANN201
        from cprsim.io import short

        try:
            return super().invoke(ctx)
        except InputError as e:
            raise UserError(_one_line(str(e))) from None
        except FileNotFoundError as e:
            raise UserError(f"{short(e.filename)}: no such file") from None
        except OSError as e:  # read-only or full disk, name too long, a device, permissions
            where = short(e.filename) if e.filename else "output"
            raise UserError(f"{where}: {e.strerror or e}") from None
        except (click.exceptions.Exit, click.ClickException, click.exceptions.Abort):
            raise
        except RecursionError:
            raise UserError("an input is nested too deeply") from None
        except MemoryError:
            raise UserError("out of memory: an input asks for more than this machine holds") from None
        except Exception as e:  # a bug: one line, not a traceback (-vv shows it)
            if logging.getLogger().isEnabledFor(logging.DEBUG):
                raise
            raise InternalError(f"internal error ({type(e).__name__}: {short(e, 120)}); please report it with "
                                "the command (`cprsim -vv ...` shows the traceback)") from None


def _one_line(text: str) -> str:
    return " ".join(text.split("\n")) if "\n" in text else text


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
    """
    # figures are files here: no GUI backend (a library caller, e.g. a notebook, keeps its own)
    os.environ.setdefault("MPLBACKEND", "Agg")
    level = logging.ERROR if quiet else (logging.WARNING, logging.INFO, logging.DEBUG)[min(verbose, 2)]
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")


for _name in _MODULES:
    try:
        _mod = importlib.import_module(f"cprsim.cli.{_name}")
    except ModuleNotFoundError as _e:
        if _e.name != f"cprsim.cli.{_name}":
            raise
        continue
    for _cmd in getattr(_mod, "commands", [getattr(_mod, "command", None)]):
        if _cmd is not None:
            main.add_command(_cmd)
