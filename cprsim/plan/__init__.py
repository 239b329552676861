"""The CPR planner: is partial recovery worth it, and at which checkpoint interval?

Given a scenario and an accuracy bound (AUC or log-loss loss the user accepts):

1. the bound becomes a PLS bound through the accuracy model (the calibration file, measured on a
   real DLRM by ``cprsim calibrate``; a placeholder is labelled as such in every report), taken
   at the upper end of its slope's 95% CI so that the bound also covers the calibration's noise;
2. **full recovery**: Young's and Daly's intervals from the cluster's failure-event rate, and the
   simulated optimum over a grid around Daly's (common random numbers: every grid point sees the
   same failures);
3. **CPR-vanilla** (partial recovery): the largest interval whose expected PLS meets the bound,
   first from the analytic form, then refined by simulation (the largest grid interval whose
   simulated mean PLS meets it; this matters for non-exponential failures);
4. **CPR-MFU / CPR-SSU**: the same, over a small grid of saved fraction ``r`` and full-save period
   ``K``, keeping the combination with the least analytic overhead;
5. every option is confirmed by simulation (overhead and PLS with 95% CIs, same seed), and the
   cheapest option that meets the bound is recommended, with its saving over the best full
   recovery — or "partial recovery does not pay here", with the reason.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Protocol, Sequence

import numpy as np

from cprsim import analytic
from cprsim.costs import costs_of
from cprsim.errors import InputError
from cprsim.scenario import HOUR, Scenario
from cprsim.sim.prioritized import coverage_of
from cprsim.sim.replicate import Estimate, run_replications, summarize


class AccuracyModel(Protocol):
    calibrated: bool
    provenance: dict

    def accuracy_loss(self, pls: float, metric: str = "auc", strategy: str = "partial") -> float: ...

    def max_pls(self, bound: float, metric: str = "auc", strategy: str = "partial") -> float: ...


@dataclass(frozen=True)
class Option:
    label: str
    strategy: str
    interval_s: float
    params: dict[str, Any]
    analytic_overhead: float
    expected_pls: float
    overhead: Estimate
    ckpt_overhead: Estimate
    pls: Estimate
    accuracy_loss: float
    meets_bound: bool  #: mean simulated PLS <= pls_bound (the strategy's own bound)
    note: str = ""
    pls_bound: float = math.inf  #: this strategy's PLS bound (its own calibration slope); inf for full

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("overhead", "ckpt_overhead", "pls"):
            e = getattr(self, k)
            d[k] = {"mean": e.mean, "ci95": [e.lo, e.hi]}
        d["interval_h"] = self.interval_s / HOUR
        return d


@dataclass(frozen=True)
class Plan:
    scenario: str
    metric: str
    accuracy_bound: float
    pls_bound: float
    calibrated: bool
    calibration: dict
    failure_rate_per_h: float
    options: tuple[Option, ...]
    recommended: str
    saving: float  #: best full recovery's overhead minus the recommended option's (fraction of W)
    message: str
    replications: int
    seed: int
    notes: tuple[str, ...] = field(default_factory=tuple)

    def option(self, label: str) -> Option:
        return next(o for o in self.options if o.label == label)

    def as_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in asdict(self).items() if k != "options"}
        d["options"] = [o.as_dict() for o in self.options]
        d["notes"] = list(self.notes)
        return _finite(d)


def _finite(x: Any) -> Any:
    """JSON has no inf/nan: an unbounded PLS or a missing analytic figure becomes null."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    return x


# ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Rates:
    total: float  #: failure events that interrupt the job, per second
    embedding: float  #: events that take down embedding servers, per second
    k: float  #: embedding servers per such event (mean)
    exponential: bool


def failure_rates(s: Scenario) -> Rates:
    """Long-run failure-event rates of the scenario's failure processes (renewal rate = 1/mean)."""
    f, c = s.failures, s.cluster
    tot = emb = emb_nodes = 0.0
    expo = True
    if f.trainer is not None:
        tot += c.trainers / f.trainer.dist.mean()
        expo &= f.trainer.family == "exponential"
    if f.embedding is not None:
        r = c.embedding_servers / f.embedding.dist.mean()
        tot += r
        emb += r
        emb_nodes += r
        expo &= f.embedding.family == "exponential"
    for d in f.domains:
        r = 1.0 / d.failure.dist.mean()
        tot += r
        expo &= d.failure.family == "exponential"
        if d.node_type == "embedding":
            emb += r
            emb_nodes += r * d.nodes
    for inj in f.injected:
        r = inj.count / s.duration_s
        tot += r
        if inj.node_type == "embedding":
            emb += r
            emb_nodes += r * inj.nodes
    if f.replay:
        expo = False
        res, _ = run_replications(s.with_updates({"strategy.name": "partial"}), 20)
        wall = sum(r.wall_s for r in res)
        tot = sum(r.failure_events for r in res) / wall
        emb = tot
        emb_nodes = sum(r.failures_embedding for r in res) / wall
    k = emb_nodes / emb if emb > 0 else 1.0
    return Rates(tot, emb, k, expo)


def _sim(s: Scenario, tau: float, strategy: str, params: dict[str, Any], n: int) -> dict[str, Estimate]:
    upd = {"checkpoint.interval_h": min(tau, s.duration_s) / HOUR, "strategy": {"name": strategy, **params}}
    res, _ = run_replications(s.with_updates(upd), n)
    return summarize(res)


def _grid(center: float, lo: float, hi: float, points: int, W: float, floor: float) -> list[float]:
    g = center * np.geomspace(lo, hi, points)
    return sorted({float(min(W, max(floor, x))) for x in g})


def make_plan(
    s: Scenario,
    accuracy_bound: float,
    metric: str = "auc",
    *,
    calibration: AccuracyModel | None = None,
    replications: int | None = None,
    grid_replications: int | None = None,
    strategies: Sequence[str] = ("partial", "mfu", "ssu"),
    top_fractions: Sequence[float] = (0.01, 0.05, 0.1, 0.2),
    full_every: Sequence[int] = (4, 8, 16),
    sample_rate: float = 0.01,
    progress: Callable[[int], None] | None = None,
) -> Plan:
    if not (isinstance(accuracy_bound, (int, float)) and math.isfinite(accuracy_bound) and accuracy_bound > 0):
        raise InputError(f"--max-accuracy-loss must be a finite number > 0, got {accuracy_bound!r}")
    if metric not in ("auc", "logloss"):
        raise InputError(f"--metric must be auc or logloss, got {metric!r}")
    if accuracy_bound >= 0.5:
        raise InputError(f"--max-accuracy-loss {accuracy_bound} is not a meaningful {metric} loss (expected e.g. 0.001)")
    if calibration is None:
        from cprsim.calibrate.calibration import load_calibration

        calibration = load_calibration()
    calibration = _Conservative(calibration)
    n = replications or s.replications
    ng = grid_replications or max(20, n // 4)  # grids locate; the chosen options are confirmed with n
    tick = progress or (lambda k=1: None)
    W = s.duration_s
    c = costs_of(s)
    rates = failure_rates(s)
    lam = rates.total
    resched = s.reschedule.dist.mean()
    notes: list[str] = []
    if not calibration.calibrated:
        notes.append("accuracy figures rest on an UNCALIBRATED placeholder model (run `cprsim calibrate`)")
    else:
        fits = getattr(calibration, "raw", {}).get("fit", {})
        weak = [f"{st} [{f.get(metric + '_slope_lo', 0):.2g}, {f.get(metric + '_slope_hi', 0):.2g}]"
                for st, f in fits.items() if isinstance(f, dict) and f.get(f"{metric}_slope_lo", 1.0) <= 0]
        if weak:
            preset = calibration.provenance.get("preset", "?")
            bigger = {"quick": "standard", "standard": "paper"}.get(preset)
            notes.append(f"the calibrated {metric} loss per unit PLS is not significantly above zero for "
                         f"{', '.join(weak)} (95% CIs; preset {preset}): the plan uses the upper ends, and "
                         f"the PLS bound is uncertain"
                         + (f"; `cprsim calibrate --preset {bigger}` measures more precisely" if bigger else ""))
        notes.append("the accuracy model was measured by `cprsim calibrate` on a small DLRM "
                     f"({calibration.provenance.get('preset', '?')} preset): check that its loss per unit PLS "
                     "holds for your model before trusting a long partial-recovery interval")
    if not rates.exponential:
        notes.append("failures are not exponential: analytic figures are first-order guides; "
                     "intervals are refined and every figure confirmed by simulation")
        renewal = [x for x in (s.failures.trainer, s.failures.embedding) if x is not None]
        renewal += [d.failure for d in s.failures.domains]
        if s.failures.start == "fresh" and any(x.family != "exponential" for x in renewal):
            notes.append("the simulation starts every node with a fresh lifetime (failures.start = \"fresh\"), "
                         "so early failures come faster or slower than the long-run rate the analytic figures "
                         "use; failures.start = \"stationary\" starts the cluster in steady state")
    options: list[Option] = []
    floor = max(60.0, 2 * c.save_s)
    counting = ("mfu", "ssu", "checknrun", "ecrm")
    if s.job.samples_per_s is None and any(x in counting for x in strategies):
        strategies = [x for x in strategies if x not in counting]
        notes.append("MFU/SSU/Check-N-Run/ECRM skipped: they count samples, give job.samples_per_s")
    no_pls = [x for x in strategies if x in ("ecrm", "checknrun")]
    strategies = [x for x in strategies if x not in no_pls]

    def confirm(label: str, strategy: str, tau: float, params: dict[str, Any], a_over: float,
                e_pls: float, pls_bound: float, note: str = "") -> Option:
        est = _sim(s, tau, strategy, params, n)
        tick(1)
        pls = est["pls"]
        loss = calibration.accuracy_loss(pls.mean, metric, strategy) if pls.mean > 0 else 0.0
        meets = strategy == "full" or pls.mean <= pls_bound * (1 + 1e-9)
        return Option(label, strategy, tau, params, a_over, e_pls, est["overhead"], est["ckpt_overhead"],
                      pls, loss, meets, note, math.inf if strategy == "full" else pls_bound)

    # -- full recovery --------------------------------------------------------------------------
    R_full = resched + c.load_s
    if lam <= 0:
        raise InputError(f"{s.name}: the scenario has no failures: nothing to plan (every interval only costs saves)")
    M = 1.0 / lam
    t_young = min(W, analytic.young(c.save_s, M))
    t_daly = min(W, analytic.daly(c.save_s, M))
    grid = _grid(t_daly, 0.35, 2.8, 9, W, floor)
    sims = []
    for t in grid:
        sims.append(_sim(s, t, "full", {}, ng)["overhead"].mean)
        tick(1)
    t_sim = grid[int(np.argmin(sims))]
    for label, t in (("full (Young)", t_young), ("full (Daly)", t_daly), ("full (simulated optimum)", t_sim)):
        options.append(confirm(label, "full", t, {}, analytic.full_overhead(W, t, c.save_s, lam, R_full), 0.0, 0.0,
                               "grid of 9 intervals around Daly's, common random numbers" if "simulated" in label else ""))
    best_full = min(options, key=lambda o: o.overhead.mean)

    # -- partial recovery ------------------------------------------------------------------------
    k = rates.k
    n_e = s.cluster.embedding_servers
    lam_e = rates.embedding
    R_part = resched + c.shard_load_s(max(1, round(k)))
    pls_bounds = {}
    rejected: dict[str, str] = {}
    for strat in strategies:
        pls_bound = float(calibration.max_pls(accuracy_bound, metric, strat))
        pls_bounds[strat] = pls_bound
        if not (pls_bound > 0):
            notes.append(f"{strat}: the accuracy model allows no lost samples at this bound")
            continue
        if strat == "partial":
            cands = [({}, _vanilla_tau(pls_bound, W, c.save_s, lam_e, k, n_e))]
        else:
            rate = {"mfu": 1.0, "ssu": sample_rate, "lookahead": math.inf}[strat]
            cands = []
            for r in top_fractions:
                for K in full_every:
                    tau = _prioritized_tau(s, pls_bound, lam_e, k, n_e, r, K, rate)
                    params: dict[str, Any] = {"top_fraction": r, "full_every": K}
                    if strat == "ssu":
                        params["sample_rate"] = sample_rate
                    cands.append((params, tau))
        scored = []
        for params, tau in cands:
            if tau <= 0:
                continue
            tau = min(tau, W)
            scored.append((_analytic_partial(s, strat, params, tau, lam, R_part, c), params, tau))
        label = LABELS.get(strat, strat)
        if not scored:
            rejected[label] = f"{label} cannot keep PLS <= {pls_bound:.3g} at any interval"
            notes.append(rejected[label])
            continue
        a_over, params, tau_a = min(scored, key=lambda x: x[0])
        if tau_a < floor or a_over > 2 * best_full.overhead.mean + 0.01:
            # not simulated: checkpointing this often is hopeless (or shorter than a save)
            rejected[label] = (f"{label} would have to checkpoint every {tau_a:.3g} s to keep PLS <= "
                               f"{pls_bound:.3g}, costing about {100 * a_over:.3g}% (analytic)")
            notes.append(rejected[label] + ": not simulated")
            continue
        # refine by simulation: the largest interval on a grid around the analytic one whose mean PLS meets the bound
        tau_ok, note = tau_a, "analytic interval"
        for t in sorted(_grid(tau_a, 0.75, 1.3, 4, W, 1.0), reverse=True):
            pls_mean = _sim(s, t, strat, params, ng)["pls"].mean
            tick(1)
            if pls_mean <= pls_bound:
                tau_ok, note = t, "largest grid interval whose simulated mean PLS meets the bound"
                break
        e_pls = _expected_pls(s, strat, params, tau_ok, lam_e, k, n_e)
        options.append(confirm(label, strat, tau_ok, params, _analytic_partial(s, strat, params, tau_ok, lam, R_part, c),
                               e_pls, pls_bound, note))

    # strategies that lose no updates (ECRM falls back to a checkpoint on stripe loss; Check-N-Run
    # is full recovery): the simulated optimum over a grid of intervals, for a few variants
    for strat in no_pls:
        variants = ([{"k": 4, "m": 1}, {"k": 4, "m": 2}, {"k": 2, "m": 2}] if strat == "ecrm"
                    else [{"bits": 32, "full_every": 8}, {"bits": 8, "full_every": 8}])
        hi = 12.0 if strat == "ecrm" else 3.0
        best_opt = None
        for params in variants:
            try:
                s.with_updates({"strategy": {"name": strat, **params}})
            except InputError as e:  # e.g. k + m larger than the cluster
                notes.append(f"{strat} {params}: {e}")
                continue
            grid_t = _grid(t_daly, 0.5, hi, 5, W, floor)
            means = []
            for t in grid_t:
                means.append(_sim(s, t, strat, params, ng)["overhead"].mean)
                tick(1)
            i = int(np.argmin(means))
            if best_opt is None or means[i] < best_opt[0]:
                best_opt = (means[i], params, grid_t[i])
        if best_opt is not None:
            _, params, t = best_opt
            label = f"{LABELS[strat]} ({_fmt_params(params)})"
            options.append(confirm(label, strat, t, params, math.nan, 0.0, 0.0,
                                   "simulated optimum over intervals and variants" +
                                   ("; quantization's accuracy cost is not modelled" if strat == "checknrun" else "")))

    ok = [o for o in options if o.meets_bound]
    best = min(ok, key=lambda o: o.overhead.mean)
    saving = best_full.overhead.mean - best.overhead.mean
    if best.strategy == "full":
        partial_opts = [o for o in options if o.strategy != "full"]
        if partial_opts:
            p = min(partial_opts, key=lambda o: o.overhead.mean)
            why = (f"to keep the {metric} loss under {accuracy_bound:g} (PLS <= {pls_bounds.get(p.strategy, 0):.3g}), "
                   f"{p.label} must checkpoint every {p.interval_s / HOUR:.3g} h, costing "
                   f"{100 * p.overhead.mean:.2f}% vs {100 * best_full.overhead.mean:.2f}% for {best_full.label}")
        elif rejected:
            why = "; ".join(rejected.values()) + f", vs {100 * best_full.overhead.mean:.2f}% for {best_full.label}"
        else:
            why = "no partial-recovery interval meets the bound"
        message = f"partial recovery does not pay here: {why}; use {best.label} every {best.interval_s / HOUR:.3g} h"
    else:
        rel = saving / best_full.overhead.mean if best_full.overhead.mean > 0 else 0.0
        every = (f"every {best.interval_s / HOUR:.3g} h" if best.interval_s < W
                 else "with no checkpoint before the job ends (the failures lose fewer updates than the bound)")
        message = (f"use {best.label} {every}"
                   + (f" ({_fmt_params(best.params)})" if best.params else "")
                   + f": overhead {100 * best.overhead.mean:.2f}% vs {100 * best_full.overhead.mean:.2f}% for "
                   f"{best_full.label}, a saving of {100 * saving:.2f} points ({100 * rel:.0f}% of it), at PLS "
                   f"{best.pls.mean:.4f} (expected {metric} loss {best.accuracy_loss:.2g} <= {accuracy_bound:g})")
    return Plan(s.name, metric, accuracy_bound, pls_bounds.get("partial", math.nan), calibration.calibrated,
                dict(calibration.provenance), lam * HOUR, tuple(options), best.label, saving, message, n, s.seed,
                tuple(notes))


LABELS = {"partial": "CPR-vanilla", "mfu": "CPR-MFU", "ssu": "CPR-SSU", "lookahead": "Lookahead",
          "ecrm": "ECRM", "checknrun": "Check-N-Run"}
ALL_STRATEGIES = ("partial", "mfu", "ssu", "lookahead", "ecrm", "checknrun")


class _Conservative:
    """The accuracy model at the upper end of its slope's 95% CI, where the calibration has one.

    A bound promised to a user must hold for the calibration's uncertainty too: a noisy fit
    (even a negative point slope) must not turn into an unbounded PLS.
    """

    def __init__(self, model: AccuracyModel) -> None:
        self.model = model
        self.calibrated = model.calibrated
        self.provenance = model.provenance
        self.raw = getattr(model, "raw", {})

    def _call(self, name: str, *args: Any) -> float:
        fn = getattr(self.model, name)
        try:
            return fn(*args, conservative=True)
        except TypeError:  # a model without confidence intervals
            return fn(*args)

    def accuracy_loss(self, pls: float, metric: str = "auc", strategy: str = "partial") -> float:
        return self._call("accuracy_loss", pls, metric, strategy)

    def max_pls(self, bound: float, metric: str = "auc", strategy: str = "partial") -> float:
        return self._call("max_pls", bound, metric, strategy)


def _fmt_params(p: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v:g}" for k, v in p.items())


def _vanilla_tau(bound: float, W: float, delta: float, lam_e: float, k: float, n_e: int) -> float:
    return analytic.interval_for_pls(bound, W, delta, lam_e, k, n_e)


def _prioritized_tau(s: Scenario, bound: float, lam_e: float, k: float, n_e: int, r: float, K: int,
                     rate: float) -> float:
    """Largest tau with first-order E[PLS] <= bound; the coverage depends on tau (counts per interval)."""
    W = s.duration_s
    cov = coverage_of(s, min(W, 3600.0), r, rate)
    tau = W
    for _ in range(3):  # fixed point: coverage grows slowly with tau
        per = analytic.expected_pls_prioritized(W, 1.0, lam_e, k, n_e, cov, K)
        tau = min(W, bound / per) if per > 0 else W
        cov = coverage_of(s, tau, r, rate)
    return tau


def _expected_pls(s: Scenario, strat: str, params: dict[str, Any], tau: float, lam_e: float, k: float,
                  n_e: int) -> float:
    if strat == "partial":
        return analytic.expected_pls(s.duration_s, tau, costs_of(s).save_s, lam_e, k, n_e)
    rate = math.inf if strat == "lookahead" else params.get("sample_rate", 1.0)
    cov = coverage_of(s, tau, params["top_fraction"], rate)
    return analytic.expected_pls_prioritized(s.duration_s, tau, lam_e, k, n_e, cov, params["full_every"])


def _analytic_partial(s: Scenario, strat: str, params: dict[str, Any], tau: float, lam: float, R: float,
                      c) -> float:  # noqa: ANN001
    W = s.duration_s
    if strat == "partial":
        return analytic.partial_overhead(W, tau, c.save_s, lam, R)
    from cprsim.sim.prioritized import MFUParams

    counter = 0.0 if strat == "lookahead" else \
        MFUParams.model_fields["counter_overhead"].default * params.get("sample_rate", 1.0)
    return analytic.prioritized_overhead(W, tau, c.save_s, c.save_fraction_s(params["top_fraction"]),
                                         params["full_every"], lam, R, counter)
