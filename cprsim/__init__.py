"""cprsim: simulator and planner for fault-tolerant training of recommendation models.

The public API (docs/api.md), defined in :mod:`cprsim.api` and imported on first use, so that
``import cprsim`` and ``cprsim --help`` stay fast (no numpy, scipy, simpy or matplotlib)::

    from cprsim import load_scenario, simulate, plan, fit, Sweep

    s = load_scenario("toy", interval_h=1.0)
    runs = simulate(s, 20)
    print(runs.summary()["metrics"]["overhead"])

``cprsim.plan`` is the function :func:`cprsim.api.plan`, a plain attribute like the others; the
planner's package is :mod:`cprsim.planner` (``from cprsim.planner import make_plan``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cprsim.version import __version__

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
