"""Errors about one named parameter of a library function, for callers that report them in their
own terms (the command line names its option: ``--skew`` for ``skew``)."""

from __future__ import annotations

from cprsim.errors import InputError


class ParameterError(InputError):
    """A bad value of the parameter ``param`` (its Python name); ``detail``: what is wrong, without
    the name. ``str(error)`` is ``"<param>: <detail>"``."""

    def __init__(self, param: str, detail: str) -> None:
        self.param, self.detail = param, detail
        super().__init__(f"{param}: {detail}")
