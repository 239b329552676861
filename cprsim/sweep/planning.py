"""A sweep's ``[plan]``: the scenario it plans, the check before any point runs, and the plan
itself (the planner's); :mod:`cprsim.sweep.files` writes it as plan.json."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cprsim import scenario as sc
from cprsim.sweep.spec import Sweep, SweepError

if TYPE_CHECKING:  # pragma: no cover - the planner is imported when a sweep plans
    from cprsim.planner.records import Plan


def _plan_base(sweep: Sweep) -> sc.Scenario:
    """The scenario a sweep's ``[plan]`` plans: its base, else its first point's."""
    try:
        return sc.validate(dict(sweep.base_raw), sweep.source)
    except sc.ScenarioError:
        return sc.validate(dict(sweep.points[0].raw), sweep.source)


def check_plan(sweep: Sweep) -> None:
    """A sweep's ``[plan]`` that the planner would refuse for its replications, refused before any
    point runs (a one-line :class:`SweepError` naming the key), not after all of them."""
    from cprsim.planner.search import min_replications

    p = sweep.plan
    if p is None or p.confidence == "mean":
        return
    n = p.replications or _plan_base(sweep).replications
    need = min_replications(float(p.confidence))
    if n < need:
        raise SweepError(
            f"{sweep.source}: plan.replications: proving P(PLS <= bound) >= {float(p.confidence):g} "
            f"takes at least {need} replications, the plan would have {n} (set plan.replications, "
            'or plan.confidence = "mean")'
        )


def sweep_plan(sweep: Sweep) -> Plan:
    """The plan a sweep's ``[plan]`` asks for (:func:`cprsim.planner.make_plan` on
    :func:`_plan_base`'s scenario with the table's settings)."""
    from cprsim.planner import make_plan

    base = _plan_base(sweep)
    p = sweep.plan
    assert p is not None
    return make_plan(
        base,
        p.max_accuracy_loss,
        p.metric,
        replications=p.replications,
        strategies=list(p.strategies),
        confidence=None if p.confidence == "mean" else p.confidence,
        objective=p.objective,
        max_checkpoint_age_h=p.max_checkpoint_age_h,
        precision=None if p.precision == "off" else float(p.precision),
        max_extra_memory=p.max_extra_memory,
    )
