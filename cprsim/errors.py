"""The one exception family for bad user input, and the one way a validation error becomes a line.

A message names the file, key or line and what was expected, on one line; the CLI prints it
as ``Error: <message>`` and exits with 2. An error about a parameter of a library function is a
:class:`ParameterError` naming the parameter (its Python name, never a command-line option): the
CLI shows it with the option instead (``Error: --format: must be one of ...``).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover - pydantic is imported by whoever validates
    from pydantic import ValidationError


class InputError(ValueError):
    """Bad input (file, key, value). The CLI prints ``Error: <message>`` and exits with 2."""


class ParameterError(InputError):
    """A bad value of the parameter ``param`` (its Python name) of a library function.

    ``detail``: what is wrong, without the name; ``where``: what it is about when that is not the
    parameter itself (a file, a sweep point), shown first; ``key``: the item of the parameter at
    fault (a column of ``filters``, a key of ``overrides``), shown after its name; ``also``: other
    parameters the detail names, each in backquotes there. ``str(error)`` is
    ``"[where: ]param[ key]: detail"``; :meth:`message` shows the parameters another way (the
    command line shows its options: ``--filter k: no such column``).
    """

    def __init__(
        self,
        param: str,
        detail: str,
        where: str | None = None,
        *,
        key: str | None = None,
        also: Sequence[str] = (),
    ) -> None:
        self.param, self.detail, self.where, self.key = param, detail, where, key
        self.also = tuple(also)
        super().__init__(self.message())

    def message(self, shown: Mapping[str, str] | None = None) -> str:
        """The message with each parameter named as ``shown`` maps it (default: its name; a
        parameter not in ``shown`` keeps its name)."""
        names = shown or {}
        head = names.get(self.param, self.param) + ("" if self.key is None else f" {self.key}")
        detail = self.detail
        for p in self.also:
            if p in names:
                detail = detail.replace(f"`{p}`", names[p])
        return ": ".join(x for x in (self.where, head, detail) if x)

    def __str__(self) -> str:
        return self.message()

    def replace(self, **changes: Any) -> ParameterError:
        """A copy (of the same class) with fields changed: ``where`` to locate it in a larger input,
        ``param`` where a caller's parameter feeds the one named."""
        new = copy.copy(self)
        for name, value in changes.items():
            if name not in ("param", "detail", "where", "key", "also"):
                raise TypeError(f"ParameterError has no field {name!r}")
            setattr(new, name, tuple(value) if name == "also" else value)
        new.args = (new.message(),)
        return new

    def __reduce__(self) -> tuple[Any, ...]:
        # the default rebuilds an exception from ``args`` (the message); sweeps raise these in
        # worker processes, so the fields must survive pickling (a subclass's own too)
        return (_rebuild, (type(self), self.args), self.__dict__)


def _rebuild(cls: type[ParameterError], args: tuple[Any, ...]) -> ParameterError:
    e = cls.__new__(cls)
    e.args = args
    return e


def validation_line(err: ValidationError, source: str | None = None) -> str:
    """A pydantic error as one line: ``source: key.path: message (got value) [+n more]``.

    The first error only (the others are counted); "unknown key" for a key the model forbids;
    pydantic's "Value error, " prefix dropped; the offending value shown unless it is a table or
    missing. Used for scenarios, sweep files and strategy parameters alike."""
    loc, what = validation_parts(err)
    where = ": ".join(x for x in (source, loc) if x)
    return f"{where}: {what}" if where else what


def validation_parts(err: ValidationError) -> tuple[str, str]:
    """The dotted key of :func:`validation_line` (``""`` for the whole model) and what is wrong
    with it (``message (got value) [+n more]``)."""
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
    return loc, f"{msg}{tail}{more}"
