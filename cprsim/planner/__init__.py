"""The CPR planner: is partial recovery worth it, at which intervals, with which guarantee?

Given a scenario and an accuracy bound (the AUC or log-loss loss a user accepts):

1. **Accuracy** (``accuracy.py``): the bound becomes a PLS bound through the calibration (one
   slope pooled over strategies unless an F-test says they differ), at the upper end of the
   slope's 95% CI; the PLS range the calibration measured limits how far the plan trusts it.
2. **Full checkpoints stay mandatory.** Job-level interruptions (``[failures.job]``) roll every
   strategy back to its last full checkpoint, so every partial-recovery option keeps a full
   checkpoint at least every ``T_F``: Daly's interval against those interruptions, capped by the
   user's maximum checkpoint age, and by ``W/2`` when nothing else sets it (at least one
   consistent checkpoint before the job's middle) unless the user allows none.
3. **Full recovery**: Young's and Daly's intervals and the simulated optimum over a grid around
   Daly's (common random numbers), extended downwards when the optimum is at its edge.
4. **Partial recovery** (every strategy whose planning part is a ``PartialPlanning``
   (:mod:`cprsim.sim.planning_parts`): CPR-vanilla, MFU, SSU,
   lookahead): the parameter variant with the least analytic overhead, then the
   largest grid interval whose PLS meets the bound *per run* at the plan's confidence
   (``search.py``), proven on fresh replications.
5. **Strategies that lose no update** (a ``RollbackPlanning`` part: ECRM, Check-N-Run): the simulated optimum
   over intervals and variants.
6. **Recommendation** (``report.py``): the cheapest option (mean or P90 overhead) that meets its
   bound; options whose CIs overlap the cheapest are tied and the simplest wins; oracles and
   options beyond the calibrated range are never recommended by default.

**Memory.** Each option records the extra memory its strategy needs, a fraction of the embedding
tables (``Option.extra_memory``: ECRM's parity ``m/k``; full recovery and the other strategies,
whose checkpoints live in storage, 0); ``max_extra_memory`` leaves out the variants that need
more, with a note, so that the options compared fit the same hardware.

**Adaptive replication** (``precision``, the default; ``precision=None`` runs every evaluation on
all its replications, the exhaustive planner). Every interval's replications are one sequence
run on demand (``search.Runs``), so nothing is simulated twice and common random numbers hold:

* the interval grids of full recovery and of the rollback strategies become a local search from
  the analytic optimum (Daly's interval) on the same lattice, each step a paired comparison of
  neighbouring intervals on common random numbers, extended in batches until the difference is
  significant or its 95% CI is within ``precision`` of the mean overhead (at most the grid's
  replications);
* the options that lose no update are confirmed until the 95% CI of their mean overhead is
  within ``precision`` of it (``Precision``: a fixed-relative-width sequential CI, at least 30
  replications, at most ``n``);
* the per-run promise is confirmed with *curtailment* (``search.curtailed``): the ``n``-run
  Clopper-Pearson verdict, stopped as soon as the remaining runs cannot change it: exactly the
  same verdict and guarantee as all ``n``. A failure stops there (and the interval steps down);
  a pass, which needs at least ``need(n)`` of the ``n`` runs anyway, completes them, so its row
  shows the figures of all ``n``;
* the interval search jumps from a pilot at the analytic interval and judges each interval with
  curtailment.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from cprsim import analytic
from cprsim.costs import Costs, costs_of
from cprsim.errors import InputError, ParameterError
from cprsim.names import FULL, PLAN_DEFAULT, PLAN_ORDER, VANILLA
from cprsim.planner import feasibility
from cprsim.planner.accuracy import AccuracyModel, PlanAccuracy, plan_accuracy
from cprsim.planner.feasibility import dur_text
from cprsim.planner.rates import Rates, failure_rates
from cprsim.planner.records import Option, Plan, finite
from cprsim.planner.report import quantile_ci, recommend
from cprsim.planner.search import (
    PlsSearch,
    Runs,
    curtailed,
    grid_below,
    judge,
    min_replications,
    min_successes,
    search_share,
    simulate,
)
from cprsim.registry import extra_memory
from cprsim.scenario import HOUR, Scenario
from cprsim.sim import strategies as registry
from cprsim.sim.planning_parts import RollbackPlanning
from cprsim.sim.replicate import Precision, _t_quantile, estimate

__all__ = [
    "make_plan",
    "Plan",
    "Option",
    "Rates",
    "failure_rates",
    "ALL_STRATEGIES",
    "LABELS",
    "finite",
    "AccuracyModel",
    "runs_within",
    "estimated_replications",
]


#: the built-ins the planner can rank besides full recovery, in the order it lists them
_BUILTIN_ORDER = PLAN_ORDER


def _pls_and_rollback() -> tuple[str, ...]:
    """Every registered strategy but full recovery, plugins included: the built-ins in their order,
    then the others by name (loads the plugins: ``registry.ensure_loaded``)."""
    registry.ensure_loaded()
    return tuple(n for n in _BUILTIN_ORDER if n in registry.REGISTRY) + tuple(
        sorted(n for n in registry.REGISTRY if n != FULL and n not in _BUILTIN_ORDER)
    )


def _labels() -> dict[str, str]:
    return {n: (registry.get(n).plan_label or n) for n in (FULL, *_pls_and_rollback())}


if TYPE_CHECKING:  # pragma: no cover - computed by __getattr__ at run time
    ALL_STRATEGIES: tuple[str, ...]
    LABELS: dict[str, str]


def __getattr__(name: str) -> Any:
    """``ALL_STRATEGIES`` (every strategy the planner can rank besides full recovery) and ``LABELS``
    (registry name -> plan label) are read from the registry when asked for, plugins included:
    importing this package loads no plugin."""
    if name == "ALL_STRATEGIES":
        return _pls_and_rollback()
    if name == "LABELS":
        return _labels()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: the planner's default precision: grids and confirmations of options that lose no update stop
#: once the 95% CI of the mean overhead is within 10% of it (None: the exhaustive planner)
DEFAULT_PRECISION = 0.1
#: replications before the first look at a confirmation's precision
CONFIRM_MIN = 30


@dataclass
class _Context:
    s: Scenario
    bound: float
    metric: str
    acc: PlanAccuracy
    q: float | None
    n: int
    ns: int
    c: Costs
    rates: Rates
    #: the plan's progress: called with the replications run (``tick(1)`` as each completes)
    tick: Callable[[int], None]
    allow_extrapolation: bool
    notes: list[str]
    #: adaptive replication (None: every evaluation on all its replications)
    precision: float | None = None
    runs: dict[tuple, Runs] = field(default_factory=dict)
    #: the most extra memory (a fraction of the embedding tables) an option may take; None: any
    max_extra_memory: float | None = None

    def runs_of(
        self, tau: float, strategy: str, params: dict[str, Any], block: str = "search"
    ) -> Runs:
        """The replications of one interval, strategy and block: a prefix shared by every use."""
        key = (float(tau), strategy, tuple(sorted((k, repr(v)) for k, v in params.items())), block)
        if key not in self.runs:
            self.runs[key] = Runs(self.s, tau, strategy, params, block, self.tick)
        return self.runs[key]


def estimated_replications(
    s: Scenario,
    strategies: Sequence[str] = PLAN_DEFAULT,
    replications: int | None = None,
    search_replications: int | None = None,
    checkpoint_modes: Sequence[str] | None = None,
    precision: float | None = DEFAULT_PRECISION,
) -> int:
    """About how many replications :func:`make_plan` runs with these arguments: a guide for a
    progress display (curtailment and the precision rule settle most verdicts early, so the true
    count is often lower; sensitivity and stability plans come on top). Per checkpoint mode, full
    recovery's search (three intervals) and two confirmations; the tiered local search (five
    points); per strategy, a search (two intervals' worth) and a confirmation."""
    n = replications or s.replications
    ns = search_replications or max(200, n // 2)
    # a point of a grid (all ng replications), or of a local search (paired comparisons settle
    # after about 30)
    ng = max(20, ns // 4) if precision is None else min(max(20, ns // 4), 30)
    modes = _modes(s, checkpoint_modes)
    confirm = n if precision is None else min(n, 2 * CONFIRM_MIN)
    grid = 9 if precision is None else 3
    total = sum(grid * ng + 2 * confirm for m in modes if m != "tiered")
    if "tiered" in modes:
        total += 5 * ng + confirm
    dense = s.cluster.embedding_servers == 0
    for name in strategies:
        cls = registry.get(name)
        if (cls.needs_embedding_servers and dense) or (
            cls.needs_throughput and s.job.samples_per_s is None
        ):
            continue
        if cls.planning.bounds_pls:
            total += (2 if precision is not None else 5) * ns + n
        else:
            total += grid * ng + confirm
    return total


#: the factors of the sensitivity table: the true loss per unit PLS k times the calibrated one
SENSITIVITY = (2.0, 4.0, 10.0)


def make_plan(
    s: Scenario,
    accuracy_bound: float | None,
    metric: str = "auc",
    *,
    calibration: AccuracyModel | None = None,
    replications: int | None = None,
    search_replications: int | None = None,
    strategies: Sequence[str] = PLAN_DEFAULT,
    confidence: float | None = 0.9,
    objective: str = "mean",
    max_checkpoint_age_h: float | None = None,
    allow_extrapolation: bool = False,
    allow_no_full_checkpoint: bool = False,
    progress: Callable[[int], None] | None = None,
    precision: float | None = DEFAULT_PRECISION,
    sensitivity: Sequence[float] = (),
    model_rows: int | None = None,
    loss_scale: float | None = None,
    checkpoint_modes: Sequence[str] | None = None,
    check_stability: bool = False,
    max_extra_memory: float | None = None,
) -> Plan:
    """Plan the checkpoint intervals and recovery strategy for an accuracy bound (see the module
    doc). ``accuracy_bound``: None only for a dense model (no embedding shards: no option loses
    updates, so no accuracy figure applies; the plan's ``accuracy_bound`` is then NaN).
    ``sensitivity``: factors ``k`` (e.g.
    :data:`SENSITIVITY`): the plan again as if the user's model lost ``k`` times the calibrated
    accuracy per unit PLS (mean and scatter alike, so: the bound divided by ``k``), one row per
    factor in :attr:`Plan.sensitivity` (the recommendation, and each partial-recovery option's
    intervals and whether it still meets the bound), relative to the loss per unit PLS the plan
    assumes. ``model_rows``: the user's embedding rows (default: the scenario's, from ``access``
    and ``cluster.embedding_gb``) and ``loss_scale``: the loss per unit PLS as a multiple of the
    calibration's (default: the calibration's scale ladder's choice for those rows,
    :func:`cprsim.planner.accuracy.ladder_scale`; :attr:`Plan.scale` records it).
    ``checkpoint_modes``: compare full recovery under each of these modes (``"blocking"``,
    ``"two-phase"``, ``"tiered"``; at least one of the first two) whatever the scenario's own
    (default: its own; a tiered scenario's is blocking and tiered); options of a mode other than
    the baseline's are labelled with it (``"full (Daly), two-phase"``, ``"full, tiered"``), and the
    partial-recovery options are planned with the baseline's saves (the scenario's mode when it is
    listed, else the first listed) and, with ``"tiered"``, on the tiers besides.
    ``check_stability``: make the plan again with the calibration's accuracy model refitted
    without each of its seeds (one plan per seed) and record how the recommendation and its
    interval move in :attr:`Plan.stability` (:func:`cprsim.planner.stability.plan_stability`).
    ``max_extra_memory``: the most memory an option may add to the embedding tables, a fraction of
    them (ECRM's parity takes ``m/k``: 0.25 for 4 + 1); the variants that need more are not
    planned (a note says which), so that the options compared run on the same hardware; None:
    no limit. Every option records its own (:attr:`Option.extra_memory`). ``progress(1)`` is
    called as each replication the plan runs completes (searches and confirmations alike)."""
    kw: dict[str, Any] = {
        "calibration": calibration,
        "replications": replications,
        "search_replications": search_replications,
        "strategies": strategies,
        "confidence": confidence,
        "objective": objective,
        "max_checkpoint_age_h": max_checkpoint_age_h,
        "allow_extrapolation": allow_extrapolation,
        "allow_no_full_checkpoint": allow_no_full_checkpoint,
        "progress": progress,
        "precision": precision,
        "model_rows": model_rows,
        "loss_scale": loss_scale,
        "checkpoint_modes": checkpoint_modes,
        "max_extra_memory": max_extra_memory,
    }
    plan = _make_plan(s, accuracy_bound, metric, **kw)
    if check_stability and accuracy_bound is not None:
        plan = _with_stability(plan, s, accuracy_bound, metric, kw)
    if not sensitivity or accuracy_bound is None:  # a dense model: nothing scales with the bound
        return plan
    rows = _sensitivity_rows(s, accuracy_bound, metric, kw, sensitivity)
    return dataclasses.replace(plan, sensitivity=rows)


def _with_stability(
    plan: Plan, s: Scenario, accuracy_bound: float, metric: str, kw: dict[str, Any]
) -> Plan:
    """``plan`` with its :attr:`Plan.stability`: the plan made again without each of the
    calibration's seeds (``kw``: :func:`_make_plan`'s keywords)."""
    from cprsim.calibrate.calibration import calibration_for
    from cprsim.planner.stability import plan_stability

    cal = kw["calibration"] if kw["calibration"] is not None else calibration_for(s)
    st = plan_stability(
        lambda c: _make_plan(s, accuracy_bound, metric, **{**kw, "calibration": c}),
        plan,
        cal,
        _promise_judge(plan, s),
        plan.confidence,
    )
    n = len(st["refits"])
    moves = (
        f"up to {st['max_steps']} grid step(s)"
        if st["max_steps"] is not None
        else "out of reach in some (not plannable)"
    )
    verdict = (
        f"this plan's own check finds it {'stable' if st['stable'] else 'NOT stable'} "
        f"({st['kept']} of {n} seed refits keep {st['recommended']} ({st['same']} recommend it, "
        f"the others have it tied), its interval moves {moves})"
    )
    notes = tuple(
        f"{x}; {verdict}" if x.startswith(_UNSTABLE.format(metric=metric)) else x
        for x in plan.notes
    )
    return dataclasses.replace(plan, stability=st, notes=notes)


def _promise_judge(plan: Plan, s: Scenario) -> Callable[[Any], tuple[int, int]] | None:
    """For :func:`plan_stability`: the recommended option's confirmation runs, judged with a given
    calibration by :func:`runs_within`; None where the plan promises nothing per run of that
    option. The runs are the ones the planner confirmed it on: its checkpoint mode's scenario (a
    tiered option's persist period too), its interval and parameters, the first
    ``plan.replications`` of the confirmation block; simulated at the first call."""
    from cprsim.planner.search import Runs
    from cprsim.planner.tiered import with_mode, with_persist

    rec = plan.option(plan.recommended)
    if plan.confidence is None or not math.isfinite(rec.pls_bound):
        return None
    base = with_mode(s, rec.checkpoint_mode or s.checkpoint.mode)
    params = dict(rec.params)
    persist_every = params.pop("persist_every", None)
    if persist_every is not None:
        base = with_persist(base, int(persist_every))
    runs = Runs(base, rec.interval_s, rec.strategy, params, "confirm")

    def judge(cal: Any) -> tuple[int, int]:
        res = runs.upto(plan.replications)
        return int(np.sum(runs_within(res, rec, plan, cal))), len(res)

    return judge


def _sensitivity_rows(
    s: Scenario,
    accuracy_bound: float,
    metric: str,
    kw: dict[str, Any],
    sensitivity: Sequence[float],
) -> tuple[dict[str, Any], ...]:
    """:attr:`Plan.sensitivity`: one row per factor ``k``, the plan made for the bound divided by
    ``k`` (``kw``: :func:`_make_plan`'s keywords)."""
    rows = []
    for k in sensitivity:
        if not (isinstance(k, (int, float)) and math.isfinite(k) and k > 0):
            raise InputError(f"sensitivity factors must be finite numbers > 0, got {k!r}")
        p = _make_plan(s, accuracy_bound / k, metric, **{**kw, "progress": None})
        rec = p.option(p.recommended)
        rows.append(
            {
                "factor": float(k),
                "accuracy_bound": accuracy_bound / k,
                "recommended": p.recommended,
                "strategy": rec.strategy,
                "interval_h": rec.interval_s / HOUR,
                "full_interval_h": rec.full_interval_s / HOUR,
                "overhead": rec.overhead.mean,
                "overhead_ci": [rec.overhead.lo, rec.overhead.hi],
                "options": [
                    {
                        "label": o.label,
                        "interval_h": o.interval_s / HOUR,
                        "full_interval_h": o.full_interval_s / HOUR,
                        "overhead": o.overhead.mean,
                        "meets_bound": o.meets_bound,
                        "pls_bound": o.pls_bound,
                    }
                    for o in p.options
                    if math.isfinite(o.pls_bound)
                ],
            }
        )
    return tuple(rows)


def _make_plan(
    s: Scenario,
    accuracy_bound: float | None,
    metric: str = "auc",
    *,
    calibration: AccuracyModel | None = None,
    replications: int | None = None,
    search_replications: int | None = None,
    strategies: Sequence[str] = PLAN_DEFAULT,
    confidence: float | None = 0.9,
    objective: str = "mean",
    max_checkpoint_age_h: float | None = None,
    allow_extrapolation: bool = False,
    allow_no_full_checkpoint: bool = False,
    progress: Callable[[int], None] | None = None,
    precision: float | None = DEFAULT_PRECISION,
    model_rows: int | None = None,
    loss_scale: float | None = None,
    checkpoint_modes: Sequence[str] | None = None,
    max_extra_memory: float | None = None,
) -> Plan:
    """:func:`make_plan` for one accuracy bound (no sensitivity rows)."""
    modes = _modes(s, checkpoint_modes)
    _check_memory(max_extra_memory)
    dense = s.cluster.embedding_servers == 0
    bound = _checked_bound(
        s, accuracy_bound, metric, confidence, objective, max_checkpoint_age_h, precision
    )
    acc, scale = _scaled_accuracy(s, calibration, metric, model_rows, loss_scale)
    n, ns = _replication_counts(s, replications, search_replications, confidence)
    c = costs_of(s)
    rates = _rates_to_plan(s)
    notes = _plan_notes(s, acc, scale, metric, rates)
    feasibility.check_numbers(s, c)  # no cost or time the arithmetic below cannot hold
    feasibility.check(s, "rollback", c)  # the full-recovery baseline must be computable
    ctx = _Context(
        s,
        bound,
        metric,
        acc,
        confidence,
        n,
        ns,
        c,
        rates,
        progress or _no_progress,
        allow_extrapolation,
        notes,
        precision,
        max_extra_memory=None if max_extra_memory is None else float(max_extra_memory),
    )

    age = max_checkpoint_age_h * HOUR if max_checkpoint_age_h is not None else math.inf
    partial_planned = not dense and any(registry.get(n).planning.bounds_pls for n in strategies)
    # the full-checkpoint interval concerns partial-recovery options only: noted where one is planned
    T_F = _full_interval(
        s, rates, c, age, allow_no_full_checkpoint, notes if partial_planned else []
    )
    modes_ = _plan_modes(ctx, modes)
    options = _full_recovery_options(modes_, age)
    best_full = min(options, key=lambda o: o.overhead.mean)
    options += _strategy_options(modes_, strategies, T_F, best_full, age)
    options, rec, tied, message = recommend(
        options,
        ctx.bound,
        metric,
        objective,
        allow_extrapolation,
        ctx.q,
        no_partial="the model has no embedding shards: no option loses updates" if dense else None,
    )
    if max_checkpoint_age_h is not None:
        notes.append(
            f"every option keeps full checkpoints at most {max_checkpoint_age_h:g} h of progress apart "
            "(the maximum checkpoint age asked for)"
        )
    notes.extend(_promise_notes(ctx.acc, rec, ctx.q))
    return _plan_record(
        ctx, strategies, options, rec, best_full, message, tied, objective, T_F, scale
    )


def _scatter_warning(acc: PlanAccuracy, rec: Option) -> list[str]:
    """A warning where most of the recommended option's runs lose a little, no more than the
    calibration's runs whose scatter its single-run model underestimates (:attr:`PlanAccuracy.
    scatter`: the smallest quarter of PLS, flagged at 5%): their median PLS is above 0 (at 0 most
    runs lose nothing, and no scatter) and at most that quarter's largest. There the per-run
    promise may be optimistic."""
    from cprsim.calibrate.accuracy import scatter_underestimated

    chk = acc.scatter.get(rec.strategy) if math.isfinite(rec.pls_bound) else None
    if not chk or not scatter_underestimated(chk):
        return []
    p50 = rec.pls.p50 if rec.pls.p50 is not None else rec.pls.mean
    if not 0.0 < p50 <= chk["pls_max"]:
        return []
    return [
        f"WARNING: {rec.label}'s runs lose little (PLS P50 {p50:.3g}), where the calibration's "
        f"{rec.strategy} runs (PLS <= {chk['pls_max']:.3g}) scatter {chk['ratio']:.3g}x its "
        f"single-run model ({chk['above']:.0f} of {chk['n']:.0f} above their variance, P = "
        f"{chk['p']:.2g} were it right): the per-run promise may be optimistic there; "
        "`cprsim calibrate --validate` checks it on fresh training runs (docs/calibration.md)"
    ]


def _held_out_warning(acc: PlanAccuracy, q: float | None) -> list[str]:
    """Where the per-run promise at ``q`` is not what the calibration's held-out seeds support:
    with quantiles from the held-out residuals (``acc.fit.residuals``), a PLS bin with too few runs
    to place the ``q``-quantile (its largest residual stands in); with the Student-t scatter, the
    promise failing on the held-out seeds (:meth:`PlanAccuracy.held_out`: a one-sided binomial
    test at 5%, over all runs with PLS > 0 or over the smallest quarter of PLS)."""
    if q is None:
        return []
    res = acc.fit.residuals if acc.fit is not None else None
    if res is not None:
        if not res.unresolved(q):
            return []
        return [
            f"WARNING: the calibration's held-out runs ({', '.join(map(str, res.counts()))} per "
            f"PLS bin) are too few to place a {q:g}-quantile: the largest measured stands in, and "
            f"the per-run promise at confidence {q:g} may be optimistic; calibrate with more seeds "
            "(docs/calibration.md)"
        ]
    out = []
    check = acc.held_out(q)
    for key, what in (("all", "runs"), ("small", "runs with the smallest quarter of PLS")):
        r = check.get(key)
        if r is not None and r["p"] < 0.05:
            out.append(
                f"WARNING: on the calibration's held-out seeds only {r['share']:.3f} of its {what} "
                f"({r['within']:.0f} of {r['n']:.0f}) lost at most their predicted {q:g}-quantile "
                f"(P = {r['p']:.2g} were the promise exact): the per-run promise at confidence "
                f"{q:g} is optimistic for this calibration; `cprsim calibrate --show` gives the "
                "check at other confidences, `cprsim calibrate --validate` checks a plan on fresh "
                "training runs (docs/calibration.md)"
            )
    return out


def _promise_notes(acc: PlanAccuracy, rec: Option, q: float | None) -> list[str]:
    """The plan's warnings and notes on its accuracy model: the scatter at small PLS, the
    per-run promise on held-out seeds, a quantile that falls as PLS grows."""
    dip = _dip_note(acc, q) if q is not None else []
    return _scatter_warning(acc, rec) + _held_out_warning(acc, q) + dip


def _dip_note(acc: PlanAccuracy, q: float) -> list[str]:
    """A note where a strategy's single-run ``q``-quantile under the law as fitted falls as PLS
    grows (:meth:`AccuracyFit.quantile_dip`): the plan's law holds it at its running maximum
    there (:func:`cprsim.calibrate.accuracy.single_run_quantile`), more conservative than the
    fit."""
    fit = acc.fit
    if fit is None or fit.residuals is None:
        return []
    dips = [(st, d) for st in fit.ranges if (d := fit.quantile_dip(st, q)) is not None]
    if not dips:
        return []
    where = "; ".join(
        f"{st} by up to {100 * f:.3g}% (from PLS {a:.3g} to {b:.3g})" for st, (f, a, b) in dips
    )
    return [
        f"as fitted, a single run's {q:g}-quantile of the {acc.metric} loss falls as PLS grows "
        f"for {where}, where the held-out residuals' PLS bins disagree; the plan holds it at its "
        "largest below, so a run never loses less for losing more updates (docs/calibration.md, "
        "a single run's law)"
    ]


def _plan_record(
    ctx: _Context,
    strategies: Sequence[str],
    options: Sequence[Option],
    rec: Option,
    best_full: Option,
    message: str,
    tied: tuple[str, ...],
    objective: str,
    T_F: float,
    scale: dict[str, Any],
) -> Plan:
    """The :class:`Plan` of the ranked options and their recommendation."""
    s, acc = ctx.s, ctx.acc
    pls_bound = acc.pls_bound(ctx.bound, VANILLA, ctx.q) if VANILLA in strategies else math.nan
    if s.cluster.embedding_servers == 0:
        pls_bound = math.nan
    return Plan(
        s.name,
        ctx.metric,
        ctx.bound,
        pls_bound,
        acc.calibrated,
        dict(acc.provenance),
        ctx.rates.total * HOUR,
        tuple(options),
        rec.label,
        best_full.overhead.mean - rec.overhead.mean,
        message,
        ctx.n,
        s.seed,
        tuple(ctx.notes),
        ctx.q,
        objective,
        ctx.ns,
        T_F,
        acc.description,
        s.failures.start,
        tied,
        ctx.precision,
        scale=scale,
        max_extra_memory=ctx.max_extra_memory,
    )


def _scaled_accuracy(
    s: Scenario,
    calibration: AccuracyModel | None,
    metric: str,
    model_rows: int | None,
    loss_scale: float | None,
) -> tuple[PlanAccuracy, dict[str, Any]]:
    """(accuracy, scale): the plan's accuracy model (default: the scenario's calibration) with
    its loss per unit PLS scaled to the user's model, and the scale's record."""
    if calibration is None:
        from cprsim.calibrate.calibration import calibration_for

        calibration = calibration_for(s)
    acc = plan_accuracy(calibration, metric)
    scale = _scale(s, calibration, metric, model_rows, loss_scale)
    return dataclasses.replace(acc, scale=scale["factor"]), scale


def _rates_to_plan(s: Scenario) -> Rates:
    """The scenario's failure rates, refused where it has no failures (nothing to plan)."""
    rates = failure_rates(s)
    if rates.total <= 0:
        raise InputError(
            f"{s.name}: the scenario has no failures: nothing to plan (every interval only costs saves)"
        )
    return rates


def _checked_bound(
    s: Scenario,
    accuracy_bound: float | None,
    metric: str,
    confidence: float | None,
    objective: str,
    max_checkpoint_age_h: float | None,
    precision: float | None,
) -> float:
    """The accuracy bound to plan for, after checking the plan's inputs (NaN: a dense model)."""
    dense = s.cluster.embedding_servers == 0
    if accuracy_bound is None and not dense:
        raise InputError(
            f"{s.name}: an accuracy bound is needed: the model has embedding shards, and partial "
            "recovery loses updates (e.g. 0.001; only a dense model plans without one)"
        )
    _check_inputs(accuracy_bound, metric, confidence, objective, max_checkpoint_age_h)
    if accuracy_bound is None:
        accuracy_bound = math.nan  # a dense model: no option loses updates
    if precision is not None and not (
        isinstance(precision, (int, float)) and math.isfinite(precision) and 0 < precision < 1
    ):
        raise InputError(
            f"the precision must be a number in (0, 1) (e.g. 0.1), or none, got {precision!r}"
        )
    return accuracy_bound


def _replication_counts(
    s: Scenario, replications: int | None, search_replications: int | None, confidence: float | None
) -> tuple[int, int]:
    """(n, ns): the fresh replications that confirm and those the search uses, enough to prove
    the per-run promise."""
    n = replications or s.replications
    ns = search_replications or max(200, n // 2)
    if confidence is not None:
        need = min_replications(confidence)
        if n < need or ns < need:
            raise InputError(
                f"proving P(PLS <= bound) >= {confidence:g} takes at least {need} replications "
                f"(got {min(n, ns)}); even a perfect record of fewer cannot prove it"
            )
    return n, ns


def _plan_notes(
    s: Scenario, acc: PlanAccuracy, scale: dict[str, Any], metric: str, rates: Rates
) -> list[str]:
    """The plan's opening notes: its accuracy model's (where an option can lose updates) and the
    failures'."""
    # the accuracy model concerns only options that lose updates: a model without embedding
    # shards has none (only the notes that concern the options considered)
    dense = s.cluster.embedding_servers == 0
    notes = [] if dense else _accuracy_notes(acc, metric) + _matched_notes(s, acc)
    if not dense and acc.calibrated:
        notes += _scale_notes(scale, metric, acc.provenance)
    return notes + _failure_notes(s, rates)


@dataclass
class _Modes:
    """The checkpoint modes a plan compares: the baseline's (full recovery's usual options and
    every other strategy, with its saves), the other flat modes, and the tiers if asked for."""

    base_mode: str
    base: _Context
    others: list[tuple[str, _Context]]
    tiered: _Context | None


def _in_mode(ctx: _Context, m: str) -> _Context:
    """``ctx`` with the scenario's checkpoints in mode ``m`` (its own runs: they differ)."""
    if m == ctx.s.checkpoint.mode:
        return ctx
    from cprsim.planner.tiered import with_mode

    return dataclasses.replace(ctx, s=with_mode(ctx.s, m), runs={})


def _plan_modes(ctx: _Context, modes: Sequence[str]) -> _Modes:
    """The contexts of the checkpoint modes compared, noting how they are compared."""
    s = ctx.s
    flat = [m for m in modes if m != "tiered"]
    base_mode = s.checkpoint.mode if s.checkpoint.mode in flat else flat[0]
    base = _in_mode(ctx, base_mode)
    tiered = _in_mode(ctx, "tiered") if "tiered" in modes else None
    if tiered is not None:
        ctx.notes.append(
            'tiered checkpoints: "full, tiered" restores from peers\' memory or storage'
            + ("" if s.checkpoint.mode == "tiered" else " (the default [checkpoint.tiers])")
            + f"; the other options are the same job with {base_mode} saves to storage"
            + (" (single tier)" if len(flat) == 1 else "")
        )
    others = [m for m in flat if m != base_mode]
    if others:
        ctx.notes.append(
            f"checkpoint modes compared: {', '.join(modes)}; options labelled with a mode use it, "
            f"the others {base_mode} saves"
        )
    return _Modes(base_mode, base, [(m, _in_mode(ctx, m)) for m in others], tiered)


def _of_mode(os_: Sequence[Option], m: str, label: bool = False) -> list[Option]:
    """The options recorded as of checkpoint mode ``m`` (``label``: named with it besides)."""
    return [
        dataclasses.replace(o, checkpoint_mode=m, label=f"{o.label}, {m}" if label else o.label)
        for o in os_
    ]


def _full_recovery_options(modes: _Modes, age: float) -> list[Option]:
    """Full recovery's options under each checkpoint mode compared."""
    from cprsim.planner.tiered import tiered_option

    options = _of_mode(_full_options(modes.base, age), modes.base_mode)
    for m, ctx in modes.others:
        options += _of_mode(_full_options(ctx, age), m, label=True)
    if modes.tiered is not None:
        options += _of_mode(
            [tiered_option(modes.tiered, age, _paired_lower, _confirm, DEFAULT_PRECISION)],
            "tiered",
        )
    return options


def _strategy_options(
    modes: _Modes, strategies: Sequence[str], T_F: float, best_full: Option, age: float
) -> list[Option]:
    """Each strategy's option (its planning part's search), with the baseline's saves and, where
    it supports them, on the tiers besides; notes the strategies that cannot be planned."""
    ctx = modes.base
    s = ctx.s
    dense = s.cluster.embedding_servers == 0
    shardless = (
        [
            registry.get(n).plan_label or n
            for n in strategies
            if registry.get(n).needs_embedding_servers
        ]
        if dense
        else []
    )
    if shardless:  # one note for them all: they recover embedding shards, and the model has none
        ctx.notes.append(
            f"{', '.join(shardless)}: not planned: they recover embedding shards, and the model "
            "has none (partial recovery does not apply to a dense model)"
        )
    options: list[Option] = []
    for name in strategies:
        cls = registry.get(name)
        if cls.needs_embedding_servers and dense:
            continue
        if cls.needs_throughput and s.job.samples_per_s is None:
            ctx.notes.append(
                f"{cls.plan_label or name} skipped: it counts samples, give job.samples_per_s"
            )
            continue
        # the strategy's planning part picks its kind's search (cprsim.sim.planning_parts)
        o = cls.planning.search(_SEARCHES, ctx, T_F, best_full, min(age, s.duration_s))
        if modes.tiered is not None and cls.supports_tiers:  # besides: the same on the tiers
            t = cls.planning.search_tiered(_SEARCHES, modes.tiered, T_F, best_full)
            if t is not None:
                options += _of_mode([t], "tiered")
        if o is not None:
            options += _of_mode([o], modes.base_mode)
    return options


# -- inputs and notes ---------------------------------------------------------------------------------
def _no_progress(k: int = 1) -> None:
    """The progress callback when none is given."""


def _modes(s: Scenario, modes: Sequence[str] | None) -> tuple[str, ...]:
    """The checkpoint modes a plan compares (``checkpoint_modes``), validated; default: the
    scenario's own (a tiered scenario: blocking and tiered)."""
    from cprsim.errors import ParameterError
    from cprsim.planner.tiered import MODES

    if modes is None:
        return ("blocking", "tiered") if s.checkpoint.mode == "tiered" else (s.checkpoint.mode,)
    if isinstance(modes, str):
        modes = [m.strip() for m in modes.split(",")]
    out = tuple(dict.fromkeys(modes))
    bad = [m for m in out if m not in MODES]
    if bad or not out:
        raise ParameterError(
            "checkpoint_modes",
            f"unknown {', '.join(map(repr, bad))} (choose from {', '.join(MODES)})"
            if bad
            else "empty (choose from " + ", ".join(MODES) + ")",
        )
    if not any(m != "tiered" for m in out):
        raise ParameterError(
            "checkpoint_modes",
            "include blocking or two-phase: the baseline the tiered options are compared with",
        )
    return out


def _check_inputs(
    bound: float | None, metric: str, q: float | None, objective: str, age: float | None
) -> None:
    if bound is not None and not (
        isinstance(bound, (int, float)) and math.isfinite(bound) and bound > 0
    ):
        raise InputError(f"the accuracy bound must be a finite number > 0, got {bound!r}")
    if metric not in ("auc", "logloss"):
        raise InputError(f"the metric must be auc or logloss, got {metric!r}")
    if bound is not None and bound >= 0.5:
        raise InputError(
            f"an accuracy bound of {bound} is not a meaningful {metric} loss (expected e.g. 0.001)"
        )
    if q is not None and not (isinstance(q, (int, float)) and 0.5 <= q < 1):
        raise InputError(f"the confidence must be a probability in [0.5, 1), or 'mean', got {q!r}")
    if objective not in ("mean", "p90"):
        raise InputError(f"the objective must be mean or p90, got {objective!r}")
    if age is not None and not (math.isfinite(age) and age > 0):
        raise InputError(
            f"the maximum checkpoint age must be a finite number of hours > 0, got {age!r}"
        )


def _check_memory(limit: float | None) -> None:
    """``max_extra_memory``: None, or a finite fraction >= 0 of the embedding tables."""
    if limit is not None and not (
        isinstance(limit, (int, float))
        and not isinstance(limit, bool)
        and math.isfinite(limit)
        and limit >= 0
    ):
        raise InputError(
            "the maximum extra memory must be a finite fraction >= 0 of the embedding tables "
            f"(e.g. 0.5), or none, got {limit!r}"
        )


def _within_memory(
    ctx: _Context, cls: type[registry.Strategy], variants: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The variants whose extra memory (:func:`cprsim.registry.extra_memory`) is within the
    plan's ``max_extra_memory``; a note names those left out and what each needs. A variant the
    scenario refuses is kept: its refusal is noted where it is tried."""
    if ctx.max_extra_memory is None:
        return list(variants)
    keep, over = [], []
    for v in variants:
        try:
            x = extra_memory(cls, ctx.s, v)
        except ValueError:
            keep.append(v)
            continue
        if x > ctx.max_extra_memory * (1 + 1e-12):
            over.append(f"{_fmt_params(v)}: {100 * x:.3g}%" if v else f"{100 * x:.3g}%")
        else:
            keep.append(v)
    if over:
        ctx.notes.append(
            f"{cls.plan_label or cls.name} ({'; '.join(over)} extra memory): not planned, above "
            f"the {100 * ctx.max_extra_memory:.3g}% of the embedding tables allowed "
            "(max_extra_memory)"
        )
    return keep


def _scenario_rows(s: Scenario) -> int | None:
    """The scenario's embedding rows (``access`` and ``cluster.embedding_gb``), None without
    embeddings or when the scenario does not give them."""
    if s.cluster.embedding_servers == 0 or s.cluster.embedding_gb <= 0:
        return None
    from cprsim.access import layout

    try:
        return int(layout(s).rows)
    except (InputError, ValueError, OverflowError):
        return None


def _scale(
    s: Scenario,
    calibration: Any,
    metric: str,
    model_rows: int | None,
    loss_scale: float | None,
) -> dict[str, Any]:
    """The plan's loss-per-PLS factor (:func:`cprsim.planner.accuracy.ladder_scale`), with where the
    rows came from."""
    from cprsim.planner.accuracy import ladder_scale

    if model_rows is not None and not (
        isinstance(model_rows, numbers.Integral)
        and not isinstance(model_rows, bool)
        and model_rows >= 1
    ):
        raise InputError(
            f"the model's embedding rows must be a whole number >= 1, got {model_rows!r}"
        )
    if loss_scale is not None and not (
        isinstance(loss_scale, (int, float))
        and not isinstance(loss_scale, bool)
        and math.isfinite(loss_scale)
        and loss_scale > 0
    ):
        raise InputError(
            f"the loss scale must be a finite number > 0 (a multiple of the calibrated loss per "
            f"unit PLS), got {loss_scale!r}"
        )
    if s.cluster.embedding_servers == 0:  # a dense model: no partial recovery, no factor
        return {
            "factor": 1.0,
            "basis": "reference",
            "rows": None,
            "measured_rows": [None, None],
            "outside": "",
            "rungs": [],
            "rows_from": "none: no embedding servers",
        }
    rows = int(model_rows) if model_rows is not None else _scenario_rows(s)
    out = ladder_scale(getattr(calibration, "raw", {}) or {}, metric, rows, loss_scale)
    out["rows_from"] = (
        "given" if model_rows is not None else "scenario" if rows is not None else "unknown"
    )
    return out


def _scale_notes(scale: dict[str, Any], metric: str, prov: dict[str, Any]) -> list[str]:
    """What the calibration stands for, the factor the plan assumes and why, and whether the
    user's model lies outside what was measured: said plainly."""
    k, basis, rows = scale["factor"], scale["basis"], scale["rows"]
    lo, hi = scale["measured_rows"]
    by_name = {r["name"]: r for r in scale["rungs"]}
    notes = [f"the calibration stands for: {prov.get('model', '?')}; data: {prov.get('data', '?')}"]
    if basis == "user":
        why = "given by the user"
    elif basis == "reference":
        why = "the calibration as measured" + (
            ""
            if len(by_name) > 1
            else "; it has no scale ladder: only its own model was measured, check that its loss "
            "per unit PLS holds for yours before trusting a long partial-recovery interval"
        )
    else:
        r = by_name[basis]
        what = (
            f"real data (rung {basis}, {r['rows']:,} rows)"
            if r["kind"] == "data"
            else f"a model of {r['rows']:,} rows (rung {basis}), "
            + ("no larger than yours" if rows is not None else "your rows being unknown")
        )
        why = (
            f"the largest loss per unit PLS measured relative to the calibration: {what}; ratio "
            f"{r['ratio']:.3g}, range [{r['ratio_lo']:.3g}, {r['ratio_hi']:.3g}], a point "
            "estimate from 3 seeds"
        )
    ladder = "; ".join(
        f"{r['name']} ({r['kind']}, {r['rows']:,} rows) {r['ratio']:.3g}x" for r in scale["rungs"]
    )
    notes.append(
        f"loss per unit PLS assumed: {k:.3g}x the calibration's ({why})"
        + (f"; measured ladder ({metric}): {ladder}" if len(by_name) > 1 else "")
    )
    where = "the scenario's" if scale.get("rows_from") == "scenario" else "given"
    if lo is None:
        notes.append(
            "the calibration does not record the size of the model it measured (recalibrate with "
            "this version to match your model's rows to a scale ladder)"
        )
    elif rows is None:
        notes.append(
            "WARNING: the model's embedding rows are unknown (give --model-rows): every rung of "
            "the ladder was taken to be no larger than your model"
        )
    elif scale["outside"] == "above" and hi:
        notes.append(
            f"WARNING: your model ({rows:,} embedding rows, {where}) is {rows / hi:.3g}x larger than "
            f"the largest model measured ({hi:,} rows): its loss per unit PLS was NOT measured and may "
            f"be higher than the {k:.3g}x assumed; see the sensitivity table (--sensitivity), or "
            "calibrate your own model (docs/howto-calibrate-your-model.md)"
        )
    elif scale["outside"] == "below" and lo:
        notes.append(
            f"your model ({rows:,} embedding rows, {where}) is smaller than every model measured "
            f"(from {lo:,} rows): the factor is the reference's, not measured at your size"
        )
    return notes


def _matched_notes(s: Scenario, acc: PlanAccuracy) -> list[str]:
    """Which failure schedules the calibration was measured on, against this scenario's: a matched
    calibration (``cprsim calibrate --scenario``) of this very scenario, of another one, or the
    generic schedules (loss per unit PLS moves with how updates are lost)."""
    if not acc.calibrated or s.cluster.embedding_servers == 0:
        return []
    from cprsim.calibrate.calibration import describe, scenario_digest

    m = acc.provenance.get("matched")
    if isinstance(m, dict):
        out = [f"accuracy {describe(m)}"]
        if m.get("scenario_digest") != scenario_digest(s):
            out.append(
                f"WARNING: the calibration was made on the schedules of scenario "
                f"{m.get('scenario')!r}, and {s.name!r} differs from it (its cluster, failures, "
                f"costs or job): its loss per unit PLS may not carry; a calibration on the "
                f"schedules of scenario {s.name!r} "
                "measures this one's (docs/calibration.md, Matched calibration)"
            )
        return out
    return [
        "the calibration's failure schedules are generic (single shards of "
        f"{acc.provenance.get('embedding_servers', '?')} failing, its own MFU/SSU settings: "
        f"{acc.provenance.get('mfu_ssu', '?')}), not this scenario's: the loss per unit PLS moves "
        f"with how updates are lost; a calibration on the schedules of scenario {s.name!r} measures it "
        "(docs/calibration.md, Matched calibration)"
    ]


def _calibrated_variants(
    acc: PlanAccuracy, name: str, variants: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], str]:
    """The variants of strategy ``name`` a matched calibration measured (its ``top_fraction`` and
    ``sample_rate``: a strategy parameter is a covariate, not extrapolated), and a note when
    some were left out; every variant when the calibration records none."""
    m = acc.provenance.get("matched") if acc.calibrated else None
    params = (m or {}).get("strategy_params", {}).get(name) if isinstance(m, dict) else None
    if not isinstance(params, dict) or not params:
        return variants, ""
    keep = [
        v
        for v in variants
        if all(
            k not in v or math.isclose(float(v[k]), float(params[k]))
            for k in ("top_fraction", "sample_rate")
            if k in params
        )
    ]
    if len(keep) == len(variants):
        return variants, ""
    return keep, (
        f"{name}: only the variant the calibration measured ({_fmt_params(params)}) is planned; "
        f"{len(variants) - len(keep)} other(s) left out (their loss per unit PLS was not measured)"
    )


#: the start of the note that warns of a calibration's unstable model choice (a plan checked with
#: ``check_stability`` adds its own verdict to it: :func:`_with_stability`)
_UNSTABLE = "WARNING: the {metric} model's choice is not stable"


def _accuracy_notes(acc: PlanAccuracy, metric: str) -> list[str]:
    notes: list[str] = []
    if not acc.calibrated:
        notes.append(
            "accuracy figures rest on an UNCALIBRATED placeholder model (run `cprsim calibrate`)"
        )
        return notes
    notes.append(f"accuracy model: {acc.description}")
    st = acc.stability
    if st and not st.get("stable", True):
        parts = []
        for key, what in (
            ("leave_one_seed_out", "seed"),
            ("leave_one_run_out", "run"),
        ):
            r = st.get(key)
            if not isinstance(r, dict):
                continue
            other = ", ".join(f"{k} {v}" for k, v in (r.get("other_choices") or {}).items())
            parts.append(
                f"refitted without one {what}, {r.get('kept')} of {r.get('refits')} refits keep "
                f"it"
                + (f" ({other})" if other else "")
                + f" and the PLS bounds move up to {r.get('max_pls_bound_ratio', math.nan):.3g}x"
            )
        seeds = acc.provenance.get("seeds")
        n_seeds = len(seeds) if isinstance(seeds, list) else 0
        notes.append(
            _UNSTABLE.format(metric=metric)
            + " ("
            + "; ".join(parts)
            + "; more than one interval grid step, 1.19x): whether that moves this plan is what "
            "`--check-stability` checks (the plan made again without each seed); more seeds"
            + ("" if n_seeds >= 8 else " (at least 8)")
            + " narrow it, and `cprsim calibrate --validate` checks the promise on fresh runs"
        )
    weak = [f"{st} [{f.lo:.2g}, {f.hi:.2g}]" for st, f in acc.slopes.items() if f.lo <= 0]
    if weak:
        preset = acc.provenance.get("preset", "?")
        bigger = {"quick": "standard", "standard": "paper"}.get(preset)
        where = (
            " (at PLS 0.1: the curvature model's grows with PLS)"
            if acc.model == "curvature"
            else ""
        )
        notes.append(
            f"the calibrated {metric} loss per unit PLS{where} is not significantly above zero for "
            f"{', '.join(sorted(set(weak)))} (95% CIs; preset {preset}): the plan uses the upper ends"
            + (f"; a calibration with preset {bigger} measures more precisely" if bigger else "")
        )
    return notes


def _failure_notes(s: Scenario, rates: Rates) -> list[str]:
    notes = [
        f"{key} from {text}" if not key.startswith("unused.") else text
        for key, text in s.sources.items()
    ]
    if not rates.exponential:
        notes.append(
            "failures are not exponential: analytic figures are first-order guides; "
            "intervals are searched and every figure confirmed by simulation"
        )
    renewal = [
        x for x in (s.failures.trainer, s.failures.embedding, s.failures.job) if x is not None
    ]
    renewal += [d.failure for d in s.failures.domains]
    if any(x.family != "exponential" for x in renewal):
        notes.append(
            f'failures.start = "{s.failures.start}": '
            + (
                "nodes start in steady state, so failures come at the long-run rate the analytic figures use"
                if s.failures.start == "stationary"
                else "every node starts a fresh lifetime, so early failures come faster or slower than the long-run rate"
            )
        )
    return notes


def _full_interval(
    s: Scenario, rates: Rates, c: Costs, age: float, allow_none: bool, notes: list[str]
) -> float:
    """T_F: the full-checkpoint interval every partial option keeps."""
    W = s.duration_s
    if rates.job > 0:
        T = analytic.daly(c.save_s, 1.0 / rates.job)
        why = f"Daly's interval against job-level interruptions (one every {dur_text(1.0 / rates.job)})"
    else:
        T, why = math.inf, ""
    if age < T:
        T, why = age, "the maximum checkpoint age asked for"
    if T >= W:
        if allow_none:
            T, why = W, "no full checkpoint needed (allowed: no job-level interruption is modelled)"
        else:
            T = W / 2.0
            why = (
                "W/2: the scenario models no job-level interruption ([failures.job]) and no maximum checkpoint "
                "age was given, so one consistent checkpoint is kept by the job's middle"
            )
    notes.append(
        f"partial-recovery options keep a full checkpoint at least every {dur_text(T)} of progress: {why}"
    )
    return T


# -- options -------------------------------------------------------------------------------------------
def _confirm(
    ctx: _Context,
    label: str,
    cls: type[registry.Strategy],
    tau: float,
    params: dict[str, Any],
    a_over: float,
    e_pls: float,
    bound: float,
    note: str,
    steps: Sequence[float] = (),
    params_at: Callable[[float], dict[str, Any]] | None = None,
    cap: float | None = None,
) -> Option:
    """Simulate on the confirmation block; step down ``steps`` (descending) while the bound fails.
    ``bound``: the PLS bound shown; ``cap``: the PLS no run may exceed (the extrapolation limit;
    default ``bound``); each run's loss is checked against the accuracy bound besides."""
    score = _score(ctx, cls.name, bound if cap is None else cap)
    #: the option promises a PLS bound (its planning part says): judged, stepped, its loss reported
    pls_bound = cls.planning.bounds_pls
    v, res, tau, params, stepped = _confirmed_runs(ctx, cls, tau, params, steps, params_at, score)
    est = {
        k: estimate([getattr(r, k) for r in res])
        for k in ("overhead", "ckpt_overhead", "pls", "ettr")
    }
    pls = est["pls"]
    strat = cls.name
    loss, loss_lo, loss_hi = ctx.acc.mean_loss(res, strat) if pls_bound else (0.0, 0.0, 0.0)
    if pls_bound:
        # the loss bounded: the mean's upper end, or the q-quantile of single training runs' losses
        # (each run's predictive draw: scatter of training plus the model's uncertainty)
        tail = (
            loss_hi
            if ctx.q is None
            else float(np.quantile(ctx.acc.run_draws(res, strat, ctx.s.seed), ctx.q))
        )
    else:
        tail = 0.0
    extrap = _extrapolation_warning(ctx, strat, res, pls.mean) if pls_bound else ""
    note += _confirmation_note(ctx, stepped, len(res), pls_bound)
    full_int = cls.planning.full_interval(params, tau)
    o = Option(
        label,
        strat,
        tau,
        params,
        a_over,
        e_pls,
        est["overhead"],
        est["ckpt_overhead"],
        pls,
        loss,
        v.passed if pls_bound else True,
        note,
        bound if pls_bound else math.inf,
        min(full_int, ctx.s.duration_s),
        est["ettr"],
        v.within,
        v.within_lo,
        (loss_lo, loss_hi),
        tail,
        cls.planning.oracle,
        extrap,
        False,
        stepped,
        cls.planning.rank,
        quantile_ci([r.overhead for r in res], 0.9),
        extra_memory=extra_memory(cls, ctx.s, params),
    )
    if pls_bound:
        o = replace(o, pls_cap=bound if cap is None else cap)
    return o


def _confirmed_runs(
    ctx: _Context,
    cls: type[registry.Strategy],
    tau: float,
    params: dict[str, Any],
    steps: Sequence[float],
    params_at: Callable[[float], dict[str, Any]] | None,
    score: Callable[[Sequence[Any]], np.ndarray],
) -> tuple[Any, list[Any], float, dict[str, Any], int]:
    """(verdict, runs, interval, parameters, steps taken): the confirmation block's runs of the
    option, stepping its interval down ``steps`` while a PLS promise fails."""
    stepped = 0
    pls_bound = cls.planning.bounds_pls
    while True:
        if ctx.precision is None:
            res = simulate(ctx.s, tau, cls.name, params, ctx.n, "confirm", ctx.tick)
            v = judge(score(res), 1.0, ctx.q)
        elif pls_bound:  # the n-run verdict, curtailed: exact
            v, res = curtailed(
                ctx.runs_of(tau, cls.name, params, "confirm"),
                ctx.n,
                ctx.q,
                score,
                complete_pass=True,
            )
        else:  # nothing to prove per run: the mean overhead to the precision asked
            res = _precise(ctx, ctx.runs_of(tau, cls.name, params, "confirm"), ctx.n)
            v = judge(score(res), 1.0, ctx.q)
        if v.passed or not pls_bound or stepped >= len(steps):
            break
        tau = steps[stepped]
        params = params_at(tau) if params_at is not None else params
        stepped += 1
    return v, res, tau, params, stepped


def _extrapolation_warning(ctx: _Context, strat: str, res: Sequence[Any], mean_pls: float) -> str:
    """Where the confirmed runs go beyond what the calibration measured: the PLS the promise is
    about past its PLS range, and the covariates past theirs ("" where none)."""
    # the PLS the promise is about: the mean, or the confidence-quantile of single runs
    bounded = mean_pls if ctx.q is None else float(np.quantile([r.pls for r in res], ctx.q))
    extrap = ""
    rng = ctx.acc.measured_range(strat)
    stat_name = "mean PLS" if ctx.q is None else f"P{100 * ctx.q:g} PLS"
    if rng is not None and bounded > rng:
        how = "beyond twice" if bounded > 2 * rng else "beyond"
        extrap = (
            f"{stat_name} {bounded:.3g} is {how} the PLS range the calibration measured for {strat} "
            f"(up to {rng:.3g})"
        )
    return "; ".join(x for x in (extrap, *_covariate_warnings(ctx, res, strat)) if x)


def _confirmation_note(ctx: _Context, stepped: int, runs: int, pls_bound: bool) -> str:
    """What the option's note adds about its confirmation: the grid steps it took down, and where
    fewer than the n fresh replications settled it, why."""
    note = ""
    if stepped:
        note += (
            f"; the confirmation stepped the interval down {stepped} grid step(s) "
            "(the search's choice failed on fresh replications)"
        )
    if ctx.precision is not None and runs < ctx.n:
        if pls_bound:  # only a failure is cut short (a pass completes its n runs)
            note += (
                f"; the verdict of {ctx.n} fresh replications was settled after {runs} "
                "(curtailment: the rest could not change it)"
            )
        else:
            note += (
                f"; {runs} fresh replications (adaptive: the 95% CI of the mean overhead within "
                f"{100 * ctx.precision:g}% of it)"
            )
    return note


#: what the covariates a plan range-checks mean, for its warnings
_COVARIATE_WORDS = {
    "age": "restored-state age (fraction of the run)",
    "position": "failure position (fraction of training done)",
}


def _covariate_warnings(ctx: _Context, res: Sequence[Any], strategy: str) -> list[str]:
    """The covariates of the runs that lose updates beyond the range the calibration measured
    (:meth:`PlanAccuracy.covariate_checks`): the plan's quantile (or mean) of each, against the
    measured maximum (and minimum, for position); "beyond twice" keeps the option from being
    recommended unless extrapolation is allowed, as for PLS."""
    out: list[str] = []
    lossy = [r for r in res if r.pls > 0]
    if not lossy:
        return out
    for name, (lo, hi) in ctx.acc.covariate_checks(strategy).items():
        x = np.array([getattr(r, f"pls_{name}", 0.0) for r in lossy], dtype=float)
        stat = float(np.mean(x)) if ctx.q is None else float(np.quantile(x, ctx.q))
        label = "mean" if ctx.q is None else f"P{100 * ctx.q:g}"
        words = _COVARIATE_WORDS.get(name, name)
        if stat > hi:
            how = "beyond twice" if stat > 2 * hi else "beyond"
            out.append(
                f"{label} {words} {stat:.3g} is {how} the range the calibration measured for "
                f"{strategy} (up to {hi:.3g}): its loss per unit PLS is not known there"
            )
        elif name == "position":
            low = float(np.quantile(x, 1 - ctx.q)) if ctx.q is not None else stat
            if low < lo:
                out.append(
                    f"{words} {low:.3g} (P{100 * (1 - (ctx.q or 0.5)):g}) is below the range the "
                    f"calibration measured for {strategy} (from {lo:.3g})"
                )
    return out


def runs_within(
    results: Sequence[Any],
    option: Option,
    plan: Plan,
    calibration: Any = None,
) -> np.ndarray:
    """Which of ``results`` (replications of ``option``'s strategy, interval and parameters, e.g.
    of a block the plan never saw) keep ``plan``'s promise, judged exactly as the planner judges
    its confirmation runs: a per-run promise draws each run's training loss from the predictive
    distribution (its ``("training", replication)`` stream of the plan's seed) and compares it
    with the accuracy bound; a promise on the mean compares the upper end of the mean's 95% CI;
    and no run may exceed the option's PLS cap. ``calibration``: the plan's (default: the one the
    plan was made with, by its fingerprint: the file cprsim ships matched to the plan's scenario,
    else the shipped one). Options that lose no update: every run is within."""
    from cprsim.calibrate.calibration import load_calibration, matched_path

    if not math.isfinite(option.pls_bound):
        return np.ones(len(results), dtype=bool)
    if calibration is None and (path := matched_path(plan.scenario)) is not None:
        matched = load_calibration(path)
        fp = (plan.calibration or {}).get("fingerprint")
        calibration = matched if fp and matched.provenance.get("fingerprint") == fp else None
    cal = calibration if hasattr(calibration, "raw") else load_calibration(calibration)
    acc = dataclasses.replace(
        plan_accuracy(cal, plan.metric), scale=float((plan.scale or {}).get("factor", 1.0))
    )
    pls = np.array([r.pls for r in results], dtype=float)
    cap = option.pls_cap
    over_cap = pls / cap if cap > 0 else np.where(pls > 0, math.inf, 0.0)
    if plan.confidence is not None:
        loss = acc.run_draws(results, option.strategy, plan.seed)
    else:
        hi = acc.run_losses(results, option.strategy)[1]
        loss = hi - float(np.mean(hi)) + acc.mean_loss(results, option.strategy)[2]
    return np.maximum(loss / plan.accuracy_bound, over_cap) <= 1.0


def _score(ctx: _Context, strategy: str, pls_cap: float) -> Callable[[Sequence[Any]], np.ndarray]:
    """Runs -> each run's accuracy loss over the accuracy bound, or its PLS over the PLS cap when
    that is larger: a run passes when its score is <= 1. A per-run promise scores the run's
    training loss drawn from the predictive distribution (:meth:`PlanAccuracy.run_draws`); a
    promise on the mean scores the upper end of the mean's 95% CI."""

    def score(res: Sequence[Any]) -> np.ndarray:
        pls = np.array([r.pls for r in res], dtype=float)
        over_cap = pls / pls_cap if pls_cap > 0 else np.where(pls > 0, math.inf, 0.0)
        if not math.isfinite(ctx.bound):  # no bound (a dense model): no option loses updates
            return over_cap
        if ctx.q is not None:
            loss = ctx.acc.run_draws(res, strategy, ctx.s.seed)
        else:  # the promise is on the mean: shift the runs so that their mean is the mean's upper end
            hi = ctx.acc.run_losses(res, strategy)[1]
            loss = hi - float(np.mean(hi)) + ctx.acc.mean_loss(res, strategy)[2]
        return np.maximum(loss / ctx.bound, over_cap)

    return score


def _precise(ctx: _Context, runs: Runs, cap: int) -> list[Any]:
    """The first replications of ``runs`` that give the mean overhead to ``ctx.precision``
    (:class:`Precision`: looks after ``CONFIRM_MIN`` and every 10 more, at most ``cap``)."""
    rule = Precision(float(ctx.precision), cap, min(cap, CONFIRM_MIN))  # type: ignore[arg-type]
    for look in rule.looks():
        if look >= cap or rule.met(runs.values(look)):
            return runs.upto(look)
    return runs.upto(cap)  # pragma: no cover - the looks end at cap


def _paired_lower(ctx: _Context, a: Runs, b: Runs, cap: int) -> bool:
    """Is ``b``'s mean overhead significantly below ``a``'s? Paired on common random numbers
    (replication i of both sees the same failures), in batches of 10 from 20 until the 95% CI of
    the difference excludes 0, is within the precision of the mean overhead (a tie: no), or
    ``cap`` replications."""
    n = min(cap, 20)
    while True:
        x = a.values(n)
        d = b.values(n) - x
        if n < 2:
            return False
        m = float(d.mean())
        h = _t_quantile(n - 1, 0.95) * float(d.std(ddof=1)) / math.sqrt(n)
        if abs(m) > h:
            return m < 0.0
        if n >= cap or h <= float(ctx.precision) * abs(float(x.mean())):  # type: ignore[arg-type]
            return False
        n = min(cap, n + 10)


def _descent(
    ctx: _Context,
    strategy: str,
    params: dict[str, Any],
    lattice: Callable[[int], float],
    j0: int,
    cap: int,
    j_min: int | None = None,
    max_steps: int = 12,
) -> tuple[float, int]:
    """From ``lattice(j0)`` (the analytic optimum), walk the lattice while a neighbour's mean
    overhead is significantly lower (paired comparisons, :func:`_paired_lower`); stop where none
    is: the interval and the number of intervals simulated."""

    def runs(j: int) -> Runs:
        return ctx.runs_of(lattice(j), strategy, params, "search")

    seen = {lattice(j0)}

    def lower(j: int, k: int) -> bool:
        if (j_min is not None and k < j_min) or lattice(k) == lattice(j):
            return False
        seen.add(lattice(k))
        return _paired_lower(ctx, runs(j), runs(k), cap)

    j = j0
    for d in (-1, 1):
        if lower(j, j + d):
            j += d
            for _ in range(max_steps):
                if not lower(j, j + d):
                    break
                j += d
            break
    return lattice(j), len(seen)


def _full_options(ctx: _Context, age: float) -> list[Option]:
    s, c, rates = ctx.s, ctx.c, ctx.rates
    W = s.duration_s
    cap = min(W, age)
    lam = rates.total
    M = 1.0 / lam
    t_young = min(cap, analytic.young(c.save_s, M))
    t_daly = min(cap, analytic.daly(c.save_s, M))
    R = s.reschedule.dist.mean() + c.load_s
    job = analytic.Job(work_s=W, save_s=c.save_s)
    failures = analytic.Failures(rate=lam, recovery_s=R)
    ng = max(20, ctx.ns // 4)
    full = registry.get(FULL)
    means: dict[float, float] = {}

    def sim_mean(t: float) -> float:
        if t not in means:
            res = simulate(s, t, FULL, {}, ng, progress=ctx.tick)
            means[t] = float(np.mean([r.overhead for r in res]))
        return means[t]

    lo_limit = max(1.0, c.save_s / 20.0)
    if (
        ctx.precision is not None
    ):  # a local search from Daly's interval on the same lattice (x 8^(1/8))

        def lattice(j: int) -> float:
            return float(min(cap, max(lo_limit, t_daly * 8.0 ** (j / 8.0))))

        t_sim, k = _descent(ctx, FULL, {}, lattice, 0, ng)
        how = (
            f"local search from Daly's interval over a x{8**0.125:.3g} grid ({k} intervals): no neighbour "
            "significantly cheaper (paired comparisons on common random numbers)"
        )
    else:
        grid = sorted(
            {float(min(cap, max(lo_limit, x))) for x in t_daly * np.geomspace(0.35, 2.8, 9)}
        )
        for _ in range(4):  # the optimum at the grid's lower edge: extend the grid downwards
            vals = [sim_mean(t) for t in grid]
            i = int(np.argmin(vals))
            if i > 0 or grid[0] <= lo_limit * (1 + 1e-9):
                break
            grid = sorted(
                {float(max(lo_limit, x)) for x in grid[0] * np.geomspace(0.2, 0.8, 4)} | set(grid)
            )
        t_sim = grid[int(np.argmin([sim_mean(t) for t in grid]))]
        how = f"grid of {len(grid)} intervals around Daly's, common random numbers"
    out = []
    for label, t, note in (
        ("full (Young)", t_young, ""),
        ("full (Daly)", t_daly, ""),
        ("full (simulated optimum)", t_sim, how),
    ):
        out.append(
            _confirm(
                ctx,
                label,
                full,
                t,
                {},
                _safe(partial(analytic.full_overhead, job, t, failures)),
                0.0,
                math.inf,
                note,
            )
        )
    return out[:2] + [_optimum_not_worse(out[2], out[:2])]


def _optimum_not_worse(opt: Option, others: Sequence[Option]) -> Option:
    """The simulated optimum as reported: never worse on the confirmation runs than a candidate it
    was compared with (Young's, Daly's: all confirmed on the same replications). When the search's
    interval confirms worse than the best of them, the optimum is flat within the search's
    resolution: the better candidate's interval and confirmed figures are reported under the
    optimum's label, and the note says what the search had found."""
    best = min(others, key=lambda o: o.overhead.mean)
    if not (opt.overhead.mean > best.overhead.mean):
        return opt
    return dataclasses.replace(
        best,
        label=opt.label,
        note=(
            f"the search's optimum ({dur_text(opt.interval_s)}: {opt.note}) confirmed at "
            f"{100 * opt.overhead.mean:.3g}% ±{100 * opt.overhead.half_width:.2g}, above "
            f"{best.label}'s {100 * best.overhead.mean:.3g}% on the same replications: the optimum "
            f"is flat within the search's resolution, so the better interval is reported"
        ),
    )


def _safe(f: Callable[[], float]) -> float:
    try:
        return float(f())
    except (OverflowError, ValueError, ZeroDivisionError):
        return math.inf


def _pls_option(
    ctx: _Context, cls: type[registry.Strategy], T_F: float, best_full: Option
) -> Option | None:
    """A partial-recovery strategy's option: the analytic pick of its variant and interval, the
    simulated search of the grid below ``T_F`` for the largest interval meeting the PLS bound,
    then its confirmation on fresh replications (None, with a note, where none can)."""
    label = cls.plan_label or cls.name
    limits = _pls_limits(ctx, cls, label)
    if limits is None:
        return None
    bound, cap = limits
    cands = grid_below(T_F, max(60.0, 2.0 * ctx.c.latency_s))
    pick = _analytic_pick(ctx, cls, label, cands, T_F, bound, best_full)
    if pick is None:
        return None
    _, variant, tau_a = pick

    def params_at(t: float) -> dict[str, Any]:
        return cls.planning.with_full_interval(variant, t, T_F)

    runs_of = (
        (lambda t: ctx.runs_of(t, cls.name, params_at(t), "search"))
        if ctx.precision is not None
        else None
    )
    q_search = None if ctx.q is None else search_share(ctx.q, ctx.n, ctx.ns)
    search = PlsSearch(
        ctx.s,
        cls.name,
        params_at,
        1.0,
        q_search,
        ctx.ns,
        ctx.tick,
        score=_score(ctx, cls.name, cap),
        runs_of=runs_of,
    )
    tau = search.run(cands, tau_a)
    if tau is None:
        ctx.notes.append(
            f"{label}: no interval of {dur_text(cands[0])} or more keeps PLS <= {bound:.3g} "
            + ("on the mean" if ctx.q is None else f"in {100 * ctx.q:g}% of runs")
        )
        return None
    i = cands.index(tau)
    steps = list(reversed(cands[:i]))  # down the grid until fresh runs pass (or it ends)
    s, c, rates = ctx.s, ctx.c, ctx.rates
    return _confirm(
        ctx,
        label,
        cls,
        tau,
        params_at(tau),
        _safe(lambda: cls.planning.expected_overhead(s, params_at(tau), tau, rates, c)),
        _safe(lambda: cls.planning.expected_pls(s, params_at(tau), tau, rates)),
        bound,
        _pls_search_note(ctx, cls, q_search, tau, params_at(tau)),
        steps,
        params_at,
        cap=cap,
    )


def _pls_limits(
    ctx: _Context, cls: type[registry.Strategy], label: str
) -> tuple[float, float] | None:
    """(bound, cap): the PLS bound a strategy is planned to, and the PLS no run may exceed (the
    extrapolation limit: twice the range the calibration measured, unless allowed beyond); None,
    with a note, where the accuracy model allows no lost samples."""
    bound = ctx.acc.pls_bound(ctx.bound, cls.name, ctx.q)
    if not (bound > 0):
        ctx.notes.append(f"{label}: the accuracy model allows no lost samples at this bound")
        return None
    rng = ctx.acc.measured_range(cls.name)
    cap = math.inf  # no run beyond it: the extrapolation limit (each run's loss is checked besides)
    if rng is not None and math.isfinite(rng) and bound > 2 * rng:
        if ctx.allow_extrapolation:
            ctx.notes.append(
                f"{label}: planned to PLS {bound:.3g}, beyond twice the PLS range the calibration "
                f"measured for {cls.name} (up to {rng:.3g}): allowed by allow_extrapolation"
            )
        else:
            ctx.notes.append(
                f"{label}: the accuracy bound would allow PLS {bound:.3g}, but the calibration measured "
                f"{cls.name} only up to PLS {rng:.3g}; the plan stays within twice that range "
                f"(PLS <= {2 * rng:.3g}); allow_extrapolation plans to the bound"
            )
            bound = cap = 2 * rng
    return bound, cap


def _analytic_tau(
    ctx: _Context,
    cls: type[registry.Strategy],
    cands: Sequence[float],
    T_F: float,
    bound: float,
    params: dict[str, Any],
) -> float:
    """Largest candidate whose first-order E[PLS] meets the bound (binary search on the grid)."""
    s, rates = ctx.s, ctx.rates
    a, b = 0, len(cands) - 1
    if (
        cls.planning.expected_pls(
            s, cls.planning.with_full_interval(params, cands[0], T_F), cands[0], rates
        )
        > bound
    ):
        return 0.0
    while a < b:
        m = (a + b + 1) // 2
        t = cands[m]
        if (
            cls.planning.expected_pls(s, cls.planning.with_full_interval(params, t, T_F), t, rates)
            <= bound
        ):
            a = m
        else:
            b = m - 1
    return cands[a]


def _analytic_pick(
    ctx: _Context,
    cls: type[registry.Strategy],
    label: str,
    cands: Sequence[float],
    T_F: float,
    bound: float,
    best_full: Option,
) -> tuple[float, dict[str, Any], float] | None:
    """(overhead, variant, interval): the strategy's variant with the least first-order overhead
    at its largest interval meeting the bound; None, with a note, where no variant can or the
    cheapest costs too much to be worth simulating."""
    s = ctx.s
    scored = []
    variants, why = _calibrated_variants(ctx.acc, cls.name, cls.planning.variants(s))
    if why:
        ctx.notes.append(why)
    variants = _within_memory(ctx, cls, variants)
    for v in variants:
        tau = _analytic_tau(ctx, cls, cands, T_F, bound, v)
        if tau <= 0:
            continue
        p = cls.planning.with_full_interval(v, tau, T_F)
        try:
            s.with_updates({"strategy": {"name": cls.name, **p}})
        except InputError as e:
            ctx.notes.append(f"{label} {_fmt_params(p)}: {_refusal(e)}")
            continue
        scored.append(
            (_safe(partial(cls.planning.expected_overhead, s, p, tau, ctx.rates, ctx.c)), v, tau)
        )
    if not scored:
        ctx.notes.append(
            f"{label} cannot keep PLS <= {bound:.3g} at any interval of {dur_text(cands[0])} or more"
        )
        return None
    a_over, variant, tau_a = min(scored, key=lambda x: x[0])
    if a_over > 2 * best_full.overhead.mean + 0.01:
        ctx.notes.append(
            f"{label} would have to checkpoint every {dur_text(tau_a)} to keep PLS <= {bound:.3g}, costing "
            f"about {100 * a_over:.3g}% (analytic): not simulated"
        )
        return None
    return a_over, variant, tau_a


def _pls_search_note(
    ctx: _Context,
    cls: type[registry.Strategy],
    q_search: float | None,
    tau: float,
    params: dict[str, Any],
) -> str:
    """The option's note: what the search's interval meets, on how many replications, and the
    strategy's own note at that interval."""
    crit = (
        "mean loss"
        if ctx.q is None or q_search is None
        else f"loss in {100 * ctx.q:g}% of runs (95% lower bound"
        + (
            ""
            if q_search <= ctx.q
            else f"; and at least {min_successes(ctx.ns, q_search)} of {ctx.ns} within: were that "
            f"share the true one, {ctx.n} fresh runs would confirm it at least half the time"
        )
        + ")"
    )
    note = (
        f"largest grid interval whose {crit} meets the bound on {ctx.ns} search replications"
        + (" (curtailed)" if ctx.precision is not None else "")
        + f"; confirmed on {ctx.n} fresh ones"
    )
    extra = _safe_note(
        lambda: cls.planning.note(
            ctx.s.with_updates(
                {"checkpoint.interval_h": tau / HOUR, "strategy": {"name": cls.name, **params}}
            ),
            ctx.c,
        )
    )
    if extra:
        note += f"; {extra}"
    if cls.planning.oracle:
        note += "; ORACLE: knows the future, a reference, not a deployable strategy"
    return note


class _Searches:
    """The planner's searches, one per kind of planning part: a part's ``search`` picks its own
    (:class:`cprsim.sim.planning_parts.Searches`)."""

    def rollback_option(self, ctx: Any, cls: type[registry.Strategy], cap: float) -> Any:
        return _rollback_option(ctx, cls, cap)

    def pls_option(self, ctx: Any, cls: type[registry.Strategy], T_F: float, best_full: Any) -> Any:
        return _pls_option(ctx, cls, T_F, best_full)

    def tiered_pls_option(
        self, ctx: Any, cls: type[registry.Strategy], T_F: float, best_full: Any
    ) -> Any:
        from cprsim.planner.tiered import tiered_pls_option

        return tiered_pls_option(ctx, cls, T_F, best_full, _pls_option)


_SEARCHES = _Searches()


def _rollback_option(ctx: _Context, cls: type[registry.Strategy], cap: float) -> Option | None:
    s, c, rates = ctx.s, ctx.c, ctx.rates
    ng = max(20, ctx.ns // 4)
    t_daly = min(cap, analytic.daly(c.save_s, 1.0 / rates.total))
    part = cls.planning
    assert isinstance(part, RollbackPlanning), "the rollback search plans a RollbackPlanning part"
    lo_f, hi_f = part.interval_range
    #: (runs, params, interval) with a precision, else (mean overhead, params, interval)
    best: tuple[Any, dict[str, Any], float] | None = None
    for params in _within_memory(ctx, cls, cls.planning.variants(s)):
        try:
            s.with_updates({"strategy": {"name": cls.name, **params}})
        except InputError as e:  # e.g. k + m larger than the cluster
            ctx.notes.append(f"{cls.plan_label or cls.name} {_fmt_params(params)}: {_refusal(e)}")
            continue
        if (
            ctx.precision is not None
        ):  # a local search on the same lattice from the point nearest Daly's
            ratio = (hi_f / lo_f) ** 0.25

            def lattice(k: int, ratio: float = ratio) -> float:
                return float(min(cap, max(1.0, t_daly * lo_f * ratio**k)))

            k0 = min(4, max(0, round(math.log(1.0 / lo_f) / math.log(ratio))))
            t, _ = _descent(ctx, cls.name, params, lattice, k0, ng, j_min=0)
            runs = ctx.runs_of(t, cls.name, params, "search")
            if best is None:
                best = (runs, params, t)
            else:
                m = min(len(runs), len(best[0]))
                if float(runs.values(m).mean()) < float(best[0].values(m).mean()):
                    best = (runs, params, t)
            continue
        grid_t = sorted(
            {float(min(cap, max(1.0, x))) for x in t_daly * np.geomspace(lo_f, hi_f, 5)}
        )
        means = []
        for t in grid_t:
            res = simulate(s, t, cls.name, params, ng, progress=ctx.tick)
            means.append(float(np.mean([r.overhead for r in res])))
        # the optimum at the grid's top edge: go on doubling while the overhead still falls
        while int(np.argmin(means)) == len(grid_t) - 1 and grid_t[-1] < cap and len(grid_t) < 12:
            grid_t.append(float(min(cap, 2.0 * grid_t[-1])))
            res = simulate(s, grid_t[-1], cls.name, params, ng, progress=ctx.tick)
            means.append(float(np.mean([r.overhead for r in res])))
        i = int(np.argmin(means))
        if best is None or means[i] < best[0]:
            best = (means[i], params, grid_t[i])
    if best is None:
        return None
    _, params, t = best
    label = f"{cls.plan_label or cls.name} ({_fmt_params(params)})"
    extra = cls.planning.note(
        s.with_updates(
            {
                "checkpoint.interval_h": min(t, s.duration_s) / HOUR,
                "strategy": {"name": cls.name, **params},
            }
        ),
        c,
    )
    note = "simulated optimum over intervals and variants" + (f"; {extra}" if extra else "")
    return _confirm(ctx, label, cls, t, params, math.nan, 0.0, math.inf, note)


def _safe_note(f) -> str:
    try:
        return f()
    except InputError:
        return ""


def _refusal(e: InputError) -> str:
    """Why the scenario refused a strategy's parameters: the key and what is wrong."""
    if isinstance(e, ParameterError):
        return ": ".join(x for x in (e.key, e.detail) if x)
    return str(e)


def _fmt_params(p: dict[str, Any]) -> str:
    return ", ".join(
        f"{k}={v:g}" if isinstance(v, (int, float)) else f"{k}={v}" for k, v in p.items()
    )
