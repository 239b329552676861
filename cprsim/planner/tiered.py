"""Planning tiered checkpoints: the snapshot interval and the persist period, searched together.

A tiered scenario (``checkpoint.mode = "tiered"``) is planned twice: as it is (full recovery from the
fastest tier that survived, :mod:`cprsim.sim.tiers`) and as the single-tier baseline (the same
scenario with blocking saves to storage, the planner's usual full-recovery options). The tiered
option is found by a local search on a two-dimensional lattice, snapshot interval x persist
period: from Young's interval for the snapshot's stall and the scenario's persist period, move to
a neighbour (one step of x 8^(1/8) in the interval, or the next persist period of
:data:`PERSIST_GRID`) while its mean overhead is significantly lower (paired comparisons on
common random numbers, as for every other option), then confirm the choice on fresh
replications.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from cprsim import analytic
from cprsim.names import FULL
from cprsim.planner.records import Option
from cprsim.scenario import Scenario, validate
from cprsim.sim import strategies as registry

#: the persist periods (snapshots per persist) the search moves over
PERSIST_GRID = (1, 2, 4, 8, 16, 32, 64)


#: the checkpoint modes a plan can compare (``cprsim plan --checkpoint-modes``)
MODES = ("blocking", "two-phase", "tiered")


def single_tier(s: Scenario) -> Scenario:
    """``s`` with blocking saves to storage instead of tiers (the baseline a tiered plan must beat)."""
    return with_mode(s, "blocking")


def with_mode(s: Scenario, mode: str) -> Scenario:
    """``s`` checkpointing in ``mode`` (one of :data:`MODES`): blocking or two-phase saves to
    storage (no tiers), or tiered (the scenario's ``[checkpoint.tiers]``, else the defaults; a
    strategy that cannot run on tiers is replaced by full recovery: the planner sets the strategy
    of each run itself)."""
    if mode == s.checkpoint.mode:
        return s
    raw = s.model_dump(mode="python", exclude_none=True)
    raw["checkpoint"] = {k: v for k, v in raw["checkpoint"].items() if k != "tiers"} | {
        "mode": mode
    }
    if mode == "tiered" and not registry.get(s.strategy.name).supports_tiers:
        raw["strategy"] = {"name": FULL}
    what = "single tier" if mode == "blocking" and s.checkpoint.mode == "tiered" else mode
    return validate(raw, f"{s.name} ({what})")


def with_persist(s: Scenario, k: int) -> Scenario:
    """``s`` persisting every ``k``-th snapshot to storage (``checkpoint.tiers.persist_every``)."""
    return s.with_updates(
        {"checkpoint.tiers.persist_every": k}, source=f"{s.name} (persist every {k})"
    )


def tiered_option(
    ctx: Any, age: float, paired_lower: Any, confirm: Any, precision: float
) -> Option:
    """The tiered option of ``ctx`` (a planner context on the tiered scenario)."""
    from cprsim.sim.engine import tier_spec

    s = ctx.s
    spec = tier_spec(s, ctx.c)
    lam = ctx.rates.total
    cap = min(s.duration_s, age)
    lo_limit = max(1.0, spec.snapshot_s / 20.0)
    t0 = analytic.young(spec.snapshot_s, 1.0 / lam)

    def lattice(j: int) -> float:
        return float(min(cap, max(lo_limit, t0 * 8.0 ** (j / 8.0))))

    k_now = s.checkpoint.tier_spec.persist_every
    ks = sorted(set(PERSIST_GRID) | {k_now})
    ctxs = {
        k: dataclasses.replace(
            ctx, s=with_persist(s, k), runs={}, precision=ctx.precision or precision
        )
        for k in ks
    }
    ng = max(20, ctx.ns // 4)

    def runs(j: int, i: int):
        return ctxs[ks[i]].runs_of(lattice(j), FULL, {}, "search")

    pos, seen = (0, ks.index(k_now)), set()
    seen.add((lattice(0), ks[pos[1]]))
    for _ in range(40):
        for dj, di in ((-1, 0), (1, 0), (0, -1), (0, 1)):
            q = (pos[0] + dj, pos[1] + di)
            if not 0 <= q[1] < len(ks) or (dj and lattice(q[0]) == lattice(pos[0])):
                continue
            seen.add((lattice(q[0]), ks[q[1]]))
            if paired_lower(ctxs[ks[pos[1]]], runs(*pos), runs(*q), ng):
                pos = q
                break
        else:
            break
    tau, k = lattice(pos[0]), ks[pos[1]]
    R = s.reschedule.dist.mean() + spec.memory_restore_s([int(spec.bytes_per_node.argmax())])
    a_over = analytic.full_overhead(
        analytic.Job(work_s=s.duration_s, save_s=spec.snapshot_s),
        tau,
        analytic.Failures(rate=lam, recovery_s=R),
    )
    note = (
        f"local search over snapshot interval x persist period ({len(seen)} points, from Young's interval for "
        f"the {spec.snapshot_s:.3g} s snapshot stall and persist every {k_now}): no neighbour significantly "
        f"cheaper; persists every {k} snapshots ({_dur(k * tau)} of progress); analytic: the memory tier always "
        "survives"
    )
    o = confirm(ctxs[k], "full, tiered", registry.get(FULL), tau, {}, a_over, 0.0, math.inf, note)
    return dataclasses.replace(
        o, params={"persist_every": k}, full_interval_s=min(k * tau, s.duration_s)
    )


def _dur(t: float) -> str:
    return f"{t / 3600:.3g} h" if t >= 3600 else f"{t / 60:.3g} min"


#: the persist periods tried for a strategy that loses updates (each a whole PLS search)
PLS_PERSIST_GRID = (1, 4, 16)


def tiered_pls_option(
    ctx: Any, cls: type[registry.Strategy], T_F: float, best_full: Option, pls_option: Any
) -> Option | None:
    """Partial recovery on the tiers (a failed shard from a peer's memory, else storage): the PLS
    search of the planner at each persist period of :data:`PLS_PERSIST_GRID` (and the scenario's);
    the cheapest option that meets the bound, else the cheapest."""
    s = ctx.s
    k_now = s.checkpoint.tier_spec.persist_every
    best: Option | None = None
    for k in sorted(set(PLS_PERSIST_GRID) | {k_now}):
        sub = dataclasses.replace(ctx, s=with_persist(s, k), runs={}, notes=[])
        o = pls_option(sub, cls, T_F, best_full)
        if o is None:
            continue
        o = dataclasses.replace(
            o,
            label=f"{o.label}, tiered",
            params={**o.params, "persist_every": k},
            full_interval_s=min(k * o.interval_s, s.duration_s),
            note=f"{o.note}; persist every {k} snapshots (searched over {sorted(set(PLS_PERSIST_GRID) | {k_now})})",
        )
        if best is None or (o.meets_bound, -o.overhead.mean) > (
            best.meets_bound,
            -best.overhead.mean,
        ):
            best = o
    if best is None:
        ctx.notes.append(
            f"{cls.plan_label or cls.name}, tiered: no interval meets the bound at any persist period"
        )
    return best
