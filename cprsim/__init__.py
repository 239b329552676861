"""cprsim: simulator and planner for fault-tolerant training of recommendation models.

The public API (docs/api.md), defined in :mod:`cprsim.api` and imported on first use, so that
``import cprsim`` and ``cprsim --help`` stay fast (no numpy, scipy, simpy or matplotlib)::

    from cprsim import load_scenario, simulate, plan, fit, Sweep

    s = load_scenario("toy", interval_h=1.0)
    runs = simulate(s, 20)
    print(runs.summary()["metrics"]["overhead"])

``cprsim.plan`` is the function :func:`cprsim.api.plan`; it also gives the attributes of the
subpackage of the same name (``import cprsim.plan.search``, ``from cprsim.plan import make_plan``
work as before).
"""

from __future__ import annotations

import sys
import types
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

try:
    __version__ = version("cprsim")
except PackageNotFoundError:  # running from a source tree without install
    __version__ = "0.0.0+unknown"

#: the public names, defined in cprsim.api (the same list as ``cprsim.api.__all__``)
_API = (
    "load_scenario",
    "scenario_names",
    "checkpoint_costs",
    "Scenario",
    "Costs",
    "simulate",
    "Runs",
    "ReplicationResult",
    "Event",
    "Estimate",
    "plan",
    "Plan",
    "Option",
    "pls_bound",
    "load_calibration",
    "Calibration",
    "run_calibration",
    "Sweep",
    "SweepResults",
    "PointSummary",
    "load_results",
    "fit",
    "read_trace",
    "FitReport",
    "Fit",
    "Trace",
    "plot_overhead",
    "plot_pls",
    "plot_breakdown",
    "plot_timeline",
    "plot_fit",
    "plot_calibration",
    "save_figure",
    "InputError",
    "ParameterError",
)

__all__ = ["__version__", *_API]


def __getattr__(name: str) -> Any:
    if name in _API:
        from cprsim import api

        value = getattr(api, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'cprsim' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_API))


class _PlanFunction:
    """``cprsim.plan``: the function :func:`cprsim.api.plan`, which also gives (and sets) the
    attributes of the subpackage ``cprsim.plan`` (the package name and the function's coincide)."""

    __slots__ = ()
    __name__ = "plan"
    __qualname__ = "plan"
    __module__ = "cprsim"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from cprsim.api import plan

        return plan(*args, **kwargs)

    @property
    def __doc__(self) -> str | None:  # type: ignore[override]
        from cprsim.api import plan

        return plan.__doc__

    @property
    def __wrapped__(self) -> Any:
        from cprsim.api import plan

        return plan

    @staticmethod
    def _package() -> types.ModuleType:
        import importlib

        return importlib.import_module("cprsim.plan")

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return getattr(self._package(), name)

    def __setattr__(
        self, name: str, value: Any
    ) -> None:  # e.g. monkeypatch.setattr("cprsim.plan.x", ...)
        setattr(self._package(), name, value)

    def __delattr__(self, name: str) -> None:
        delattr(self._package(), name)

    def __repr__(self) -> str:
        return "<function cprsim.plan>"


class _Package(types.ModuleType):
    """The ``cprsim`` module: importing the subpackage ``cprsim.plan`` leaves the attribute ``plan``
    the function (the import system would bind the subpackage there)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "plan" and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs; at run time, __getattr__ above
    from cprsim.api import (
        Calibration,
        Costs,
        Estimate,
        Event,
        Fit,
        FitReport,
        InputError,
        Option,
        ParameterError,
        Plan,
        PointSummary,
        ReplicationResult,
        Runs,
        Scenario,
        Sweep,
        SweepResults,
        Trace,
        checkpoint_costs,
        fit,
        load_calibration,
        load_results,
        load_scenario,
        plan,
        plot_breakdown,
        plot_calibration,
        plot_fit,
        plot_overhead,
        plot_pls,
        plot_timeline,
        pls_bound,
        read_trace,
        run_calibration,
        save_figure,
        scenario_names,
        simulate,
    )
else:
    plan = _PlanFunction()  # the function; the subpackage stays in sys.modules["cprsim.plan"]

sys.modules[__name__].__class__ = _Package
