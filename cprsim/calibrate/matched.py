"""A calibration on a scenario's own schedules (``cprsim calibrate --scenario NAME``).

The loss per unit PLS is not a constant of the model alone: it moves with how the updates are lost.
The generic calibration (``--preset shipped``) fails 8 single shards of 4, with MFU saving the top
10% of rows and a full save every 4th; ``cpr-production`` fails 4 of 18 servers at once, and the
planner's MFU options keep a full save only every 25 h (35 to 100 partial saves) and save 1% to 20%
of the rows. Checked on 40 fresh runs, the generic calibration's MFU loss per unit PLS (0.0039)
was a quarter of what the scenario's schedules lost (0.0186 on the DLRM, same PLS): a plan can
only promise what was measured under its own kind of schedule.

So this calibration trains the calibration seeds under the scenario's own failure process and
the schedules the planner would run, at a geometric grid of intervals:

* **Intervals** ``FACTORS x`` Young's interval of the scenario's full checkpoint
  (``sqrt(2 x save_s x MTBF)``, MTBF of the failure events); the budget of a point is its
  interval as a fraction of the job.
* **Strategies and parameters as the planner runs them**: vanilla CPR; MFU and SSU at the planner's
  variant with the preset's ``top_fraction`` (SSU: the planner's sample rate), each with a full
  save every ``T_F`` (the planner's full-checkpoint interval, :func:`cprsim.planner._full_interval`)
  by its planning part's ``with_full_interval``. The plan then uses only these variants (a strategy parameter
  is a covariate: the planner does not extrapolate to a ``top_fraction`` nobody measured).
* **Failures from the simulator**: seed ``s``'s interval ``i`` replays replication
  ``REPLICATION_BLOCKS["calibrate"] + s x len(FACTORS) + i`` of the scenario with that strategy
  and interval (a block no plan's search, confirmation or validation reaches), mapped onto the
  DLRM run exactly as ``cprsim calibrate --validate`` maps it
  (:func:`cprsim.calibrate.validate.map_events`): the restored shard is the failed server, saves
  are full or partial as the strategy's counter makes them, rollbacks re-execute.

The file records the scenario and a digest of everything in it that shapes the schedules
(:func:`scenario_digest`): ``cprsim plan`` uses a packaged matched calibration
(``cprsim/data/calibrations/NAME.toml``) for a scenario whose digest equals it, and says so.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

from cprsim.calibrate import runner as R
from cprsim.calibrate.calibration import describe, scenario_digest  # noqa: F401 (re-exported)
from cprsim.calibrate.emulation import Setting, emulation_of
from cprsim.errors import InputError
from cprsim.scenario import HOUR, Scenario

#: the intervals calibrated, as multiples of Young's interval for the scenario's full checkpoint
FACTORS: tuple[float, ...] = (0.125, 0.25, 0.5, 1.0, 2.0, 4.0)
#: the keys of a scenario that do not shape a calibration's schedules (left out of the digest)


def strategy_params(s: Scenario, strategy: str, top_fraction: float) -> dict[str, Any]:
    """The planner's variant of ``strategy`` on ``s`` whose ``top_fraction`` is ``top_fraction``
    (a strategy whose saves copy every row, e.g. vanilla CPR: its default parameters, it has no
    saved fraction); a one-line error if the planner has no such variant."""
    from cprsim import registry

    if not emulation_of(strategy).partial_saves:
        return {}
    cls = registry.get(strategy)
    for v in cls.planning.variants(s):
        if math.isclose(float(v.get("top_fraction", -1.0)), top_fraction):
            return dict(v)
    raise InputError(
        f"{strategy}: the planner has no variant with top_fraction {top_fraction:g} "
        f"(its variants: {cls.planning.variants(s)})"
    )


def young_interval(s: Scenario) -> tuple[float, float]:
    """(Young's interval for the scenario's full checkpoint (s), the full-checkpoint interval
    ``T_F`` every partial option of a plan keeps (s))."""
    from cprsim import analytic
    from cprsim.costs import costs_of
    from cprsim.planner import _full_interval
    from cprsim.planner.rates import failure_rates

    c, rates = costs_of(s), failure_rates(s)
    if rates.total <= 0:
        raise InputError(f"{s.name}: the scenario has no failures: nothing to calibrate on")
    young = analytic.young(c.save_s, 1.0 / rates.total)
    T_F = _full_interval(s, rates, c, math.inf, False, [])
    return float(young), float(T_F)


def matched_settings(
    p: R.Preset, scenario: Scenario
) -> tuple[R.Preset, Callable[[int, int], list[tuple[float, Setting]]], dict[str, Any]]:
    """The preset on the scenario's shards, the settings function of :func:`R.plan_runs` (every
    seed: each interval of :data:`FACTORS` x each strategy of the preset) and the provenance."""
    from cprsim import registry
    from cprsim.calibrate.validate import map_events
    from cprsim.planner.search import Runs
    from cprsim.sim.engine import simulate_one
    from cprsim.streams import REPLICATION_BLOCKS

    s = scenario
    if s.cluster.embedding_servers < 1:
        raise InputError(f"{s.name}: no embedding servers: partial recovery has nothing to restore")
    if s.checkpoint.mode != "blocking":
        raise InputError(
            f"{s.name}: checkpoint.mode {s.checkpoint.mode!r}: only blocking checkpoints map to "
            "the DLRM run's saves"
        )
    young, T_F = young_interval(s)
    W = s.duration_s
    taus = [min(W, f * young) for f in FACTORS]
    params: dict[str, dict[str, Any]] = {
        st: strategy_params(s, st, p.top_fraction) for st in p.strategies
    }
    p = dataclasses.replace(p, n_shards=s.cluster.embedding_servers)
    first = REPLICATION_BLOCKS["calibrate"]

    def fn(n_iters: int, seed: int) -> list[tuple[float, Setting]]:
        out: list[tuple[float, Setting]] = []
        for i, tau in enumerate(taus):
            rep = first + seed * len(taus) + i
            for st in p.strategies:
                cls = registry.get(st)
                prm = cls.planning.with_full_interval(params[st], tau, T_F)
                sc = Runs(s, tau, st, prm, "calibrate").s
                full_every = int(prm.get("full_every", 1))
                _, events = simulate_one(sc, rep, record=True)
                sch = map_events(events, W, n_iters, s.cluster.trainers, full_every)
                out.append(
                    (
                        tau / W,
                        Setting(
                            st,
                            f"{st}@{tau / HOUR:.3g}h",
                            sch.actions,
                            top_fraction=float(prm.get("top_fraction", 1.0)),
                            sample_rate=float(prm.get("sample_rate", 1.0)),
                            interval=max(1, int(round(tau / W * n_iters))),
                        ),
                    )
                )
        return out

    info = {
        "scenario": s.name,
        "scenario_digest": scenario_digest(s),
        "embedding_servers": s.cluster.embedding_servers,
        "young_interval_h": young / HOUR,
        "intervals_h": [t / HOUR for t in taus],
        "full_interval_h": T_F / HOUR,
        "strategy_params": {st: v for st, v in params.items() if v},
        "replications": f"REPLICATION_BLOCKS['calibrate'] + seed x {len(taus)} + interval index",
    }
    return p, fn, info
