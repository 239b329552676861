"""The one exception family for bad user input, and the one way a validation error becomes a line.

A message names the file, key or line and what was expected, on one line; the CLI prints it
as ``Error: <message>`` and exits with 2.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover - pydantic is imported by whoever validates
    from pydantic import ValidationError


class InputError(ValueError):
    """Bad input (file, key, value). The CLI prints ``Error: <message>`` and exits with 2."""


def validation_line(err: ValidationError, source: str | None = None) -> str:
    """A pydantic error as one line: ``source: key.path: message (got value) [+n more]``.

    The first error only (the others are counted); "unknown key" for a key the model forbids;
    pydantic's "Value error, " prefix dropped; the offending value shown unless it is a table or
    missing. Used for scenarios, sweep files and strategy parameters alike."""
    errors = err.errors()
    first = errors[0]
    loc = ".".join(str(p) for p in first["loc"])
    msg = first["msg"]
    if first["type"] == "extra_forbidden":
        msg = "unknown key"
    else:
        msg = msg.removeprefix("Value error, ")
    got = first.get("input")
    shown = (
        bool(loc)
        and first["type"] not in ("extra_forbidden", "missing")
        and not isinstance(got, dict)
    )
    tail = f" (got {got!r})" if shown else ""
    more = f" [+{len(errors) - 1} more]" if len(errors) > 1 else ""
    where = ": ".join(x for x in (source, loc) if x)
    return f"{where}: {msg}{tail}{more}" if where else f"{msg}{tail}{more}"
