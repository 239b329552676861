"""Held-out validation of a plan's accuracy promise on real DLRM runs (``cprsim calibrate --validate``).

A plan (``cprsim plan ... --out plan.json``) promises, for its recommended option, "P(a single
training run's accuracy loss <= B) >= q" (``accuracy_bound`` B, ``confidence`` q). The promise rests
on an accuracy model fitted on calibration runs (seeds 0, 1, 2 of the shipped file). This module
checks it on runs neither the planner nor the calibration ever saw:

* **Failures the plan never saw.** Validation run ``i`` simulates replication
  ``REPLICATION_BLOCKS["validate"] + i`` (2^41 + i: never reached by a plan's search or
  confirmation) of the plan's scenario with the recommended strategy, interval and parameters
  applied exactly as the planner applied them (:class:`cprsim.planner.search.Runs`), recording its
  events.
* **The same schedule on the DLRM** (:func:`map_events`): progress ``p`` seconds of a job of ``W``
  seconds is iteration ``round(p / W x n_iters)`` (at most ``n_iters - 1``); a ``restore`` of node
  ``i`` is a failure of shard ``i - trainers``; a ``save_end`` is a save, full or partial as the
  strategy's save counter makes it (every ``full_every``-th save is full, and a rollback to the last
  full save restarts the count, as :class:`cprsim.sim.prioritized.MFU` does; vanilla CPR: every
  save is full); a ``rollback`` (job-level interruption, or no trainer left with the dense part)
  re-executes from the last full save, so the saves and failures after it are dropped (their lost
  updates are re-executed: the simulator's ledger forgets them too). The strategy's own partial
  saves (MFU's exact counts, SSU's sub-sample, lookahead's next window) are emulated by
  :class:`cprsim.calibrate.emulation.Emulator` with the plan's ``top_fraction`` and
  ``sample_rate``, on ``embedding_servers`` shards.
* **Training seeds the calibration never used**: run ``i`` trains seed :data:`FRESH_SEED` ``+ i``
  (its own synthetic training samples and initialisation; the calibration's seeds are 0-7 in every
  preset) twice, on the same data, initialisation and batch order: a baseline without failures
  and the failed run. Its loss is baseline AUC minus failed AUC (``auc``), or the failed run's
  log-loss rise (``logloss``).
* **What the model predicted for that run**: the plan's accuracy model (the shipped calibration,
  :func:`cprsim.planner.accuracy.plan_accuracy`) at the simulated run's PLS, failure position and
  restored-state age (what the planner scored): its mean and its predictive ``q``-quantile
  (:meth:`~cprsim.calibrate.accuracy.Fitted.predictive_quantile`); the same at the emulated
  (measured) PLS, position and age beside them.

**The verdict** (:func:`binomial_report`): ``k`` of ``n`` runs within the bound; the share with its
two-sided 95% Clopper-Pearson interval; the one-sided exact binomial test of H0 "P(within) >= q":
p = P(X <= k | n, q), H0 rejected when p < 0.05. Beside it, the mean and P50/P90/P99 of the
measured losses, and the same figures of the model's predictive distribution over the same runs
(a mixture of each run's single-run law as the planner draws it, :func:`mixture_quantiles`).

**Files** (in the output folder): ``validation.json`` (the configuration and its fingerprint,
written first with ``finished: false``; at the end the summary too), ``validation.csv`` (one row
per validation run, :data:`CSV_HEADER`; while running, a journal appended one whole line per
finished run, then rewritten sorted). ``resume`` finishes a killed validation of the same
configuration (same plan file bytes, preset, data, threads and versions): finished runs are kept.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import math
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cprsim.calibrate import runner as R
from cprsim.calibrate.accuracy import RunLaws
from cprsim.calibrate.emulation import Action, Setting, emulated
from cprsim.errors import InputError, ParameterError
from cprsim.io import (
    atomic_write_json,
    atomic_write_text,
    csv_text,
    read_input_bytes,
    read_input_json,
    short,
)
from cprsim.names import FAIL, SAVE_FULL, SAVE_PARTIAL
from cprsim.scenario import HOUR, Scenario
from cprsim.sim.records import Event, ReplicationResult
from cprsim.streams import REPLICATION_BLOCKS
from cprsim.version import __version__

#: validation run ``i`` trains seed ``FRESH_SEED + i``: far from every preset's calibration seeds
#: (0-4), so no validation run shares a seed (training samples, initialisation) with a calibration
FRESH_SEED = 10_000
#: the two-sided confidence of the share's Clopper-Pearson interval
CI_LEVEL = 0.95
#: the binomial test rejects "P(within) >= q" when P(X <= k | n, q) is below this
ALPHA = 0.05
#: the quantiles of the losses reported (measured and predicted)
QUANTILES = (0.5, 0.9, 0.99)

CSV_HEADER = (
    "run",
    "replication",
    "seed",
    "sim_pls",
    "sim_position",
    "sim_age",
    "failures",
    "full_saves",
    "partial_saves",
    "emu_pls",
    "emu_position",
    "emu_age",
    "baseline_auc",
    "baseline_logloss",
    "auc",
    "logloss",
    "loss",
    "within",
    "pred_mean",
    "pred_q",
    "pred_mean_emu",
    "pred_q_emu",
)

#: ``progress(n, what, resumed=False)``: as :data:`cprsim.calibrate.pipeline.Progress`
Progress = Callable[..., None]


def _noop(n: int = 1, what: str = "", resumed: bool = False) -> None:
    """The progress callback when none is given."""


# -- the plan ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Target:
    """What a validation checks: the plan's recommended option on its scenario.

    ``scenario``: the plan's scenario with the option's strategy, parameters and interval applied
    (as the planner simulated it); ``interval_s`` and ``full_interval_s``: seconds of progress
    between saves and between full saves; ``bound``: the accuracy bound (AUC points or log-loss);
    ``confidence``: the promised P(a run's loss <= bound); ``full_every``: every how many saves
    one is full (1: every save)."""

    plan_path: str
    plan_digest: str  #: SHA-256 of the plan file's bytes
    scenario: Scenario
    label: str
    strategy: str
    params: dict[str, Any]
    interval_s: float
    full_interval_s: float
    full_every: int
    metric: str
    bound: float
    confidence: float
    seed: int
    calibration_fingerprint: str | None = None
    top_fraction: float = 1.0  #: share of the rows a partial save writes (the strategy's default)
    sample_rate: float = 1.0  #: SSU: share of the samples counted (the strategy's default)
    #: the loss per unit PLS the plan assumed, as a multiple of the calibration's (``plan.scale``):
    #: on the calibration's own DLRM its promise is a loss <= ``bound`` = the plan's bound / factor
    factor: float = 1.0

    def describe(self) -> str:
        """One line: the option, its strategy, intervals (h) and parameters, and the scenario."""
        ps = ", ".join(f"{k}={v}" for k, v in sorted(self.params.items()))
        full = (
            f", a full save every {self.full_interval_s / HOUR:.3g} h"
            if self.full_every > 1
            else ""
        )
        return (
            f"{self.label} ({self.strategy}: saves every {self.interval_s / HOUR:.3g} h{full}"
            f"{'; ' + ps if ps else ''}) on {self.scenario.name}"
        )


def read_plan(path: str | Path) -> dict[str, Any]:
    """The JSON of ``cprsim plan --out`` at ``path`` (a one-line :class:`InputError` otherwise)."""
    p = Path(path)
    d = read_input_json(p, "plan file")
    if not isinstance(d, dict) or not isinstance(d.get("options"), list) or "recommended" not in d:
        raise InputError(
            f"{short(p)}: not a plan (expected the JSON of a plan written by `cprsim plan`, with "
            "'recommended' and 'options')"
        )
    return d


def _plan_scenario(name: Any, where: str, plan_dir: Path, given: Scenario | None) -> Scenario:
    """The plan's scenario: ``given`` (checked to be the plan's), a built-in name, or a file named
    after it beside the plan or in the working folder."""
    from cprsim import scenario as sc

    if not isinstance(name, str) or not name:
        raise InputError(f"{where}: scenario: expected a scenario name, got {name!r}")
    if given is not None:
        if given.name != name:
            raise ParameterError(
                "scenario",
                f"is scenario {given.name!r}, but the plan is of scenario {name!r}",
                where,
            )
        return given
    if name in ("quick-form", "quick"):  # "quick": plans of before 2026-11-27
        raise InputError(
            f"{where}: the plan was made from `cprsim plan`'s quick options, which leave no "
            "scenario file to simulate: plan a scenario file (e.g. `cprsim show` one), then "
            "validate that plan"
        )
    if name in sc.builtin_names():
        return sc.load(name)
    tried = []
    for cand in (plan_dir / f"{name}.toml", plan_dir / name, Path(f"{name}.toml"), Path(name)):
        if cand.is_file():
            s = sc.load(str(cand))
            if s.name == name:
                return s
        tried.append(str(cand))
    raise ParameterError(
        "scenario",
        f"the plan's scenario {name!r} is not built in and no file of that name was found "
        f"({', '.join(tried)}): give its file",
        where,
    )


def _recommended(plan: dict[str, Any], where: str) -> tuple[Any, dict[str, Any], str]:
    """The plan's recommended option: its label, its table and its strategy, which must be one
    the DLRM emulator runs."""
    from cprsim import registry

    label = plan.get("recommended")
    opt = next(
        (o for o in plan["options"] if isinstance(o, dict) and o.get("label") == label), None
    )
    if opt is None:
        raise InputError(f"{where}: the recommended option {label!r} is not among its options")
    strategy = opt.get("strategy")
    if strategy not in (runs := emulated()):
        why = (
            "loses no update, so its accuracy is the baseline's: nothing to validate"
            if strategy is not None and not registry.get(strategy).planning.bounds_pls
            else f"is not one the DLRM emulator runs ({', '.join(runs)})"
        )
        raise InputError(f"{where}: the recommended option {label!r} ({strategy}) {why}")
    return label, opt, strategy


def target_of(plan: dict[str, Any], path: str | Path, scenario: Scenario | None = None) -> Target:
    """The recommended option of ``plan`` (read from ``path``) as a :class:`Target`; ``scenario``:
    the plan's scenario when it is neither built in nor a file named after it."""
    from cprsim import registry
    from cprsim.planner.search import Runs

    where = short(path)
    label, opt, strategy = _recommended(plan, where)
    conf = plan.get("confidence")
    if not isinstance(conf, (int, float)) or isinstance(conf, bool):
        raise InputError(
            f"{where}: the plan promises only the mean loss (confidence = mean): there is no "
            "per-run promise to validate"
        )
    metric = plan.get("metric")
    if metric not in ("auc", "logloss"):
        raise InputError(f"{where}: metric: expected auc or logloss, got {metric!r}")
    bound, tau = plan.get("accuracy_bound"), opt.get("interval_s")
    params = opt.get("params") or {}
    if not isinstance(bound, (int, float)) or not isinstance(tau, (int, float)) or tau <= 0:
        raise InputError(f"{where}: the plan has no accuracy bound or no interval of {label!r}")
    scale = plan.get("scale") or {}
    factor = scale.get("factor", 1.0) if isinstance(scale, dict) else None
    if (
        not isinstance(factor, (int, float))
        or isinstance(factor, bool)
        or not math.isfinite(factor)
        or factor <= 0
    ):
        raise InputError(f"{where}: scale.factor: expected a finite number > 0, got {factor!r}")
    base = _plan_scenario(plan.get("scenario"), where, Path(path).parent, scenario)
    if base.seed != plan.get("seed"):
        raise InputError(
            f"{where}: the plan was made with seed {plan.get('seed')}, scenario {base.name!r} "
            f"has seed {base.seed} now: it changed since the plan"
        )
    mode = opt.get("checkpoint_mode") or base.checkpoint.mode  # plans before 2026-11-27: none
    if mode != "blocking":
        raise InputError(
            f"{where}: checkpoint.mode {mode!r}: only blocking checkpoints map to the DLRM run's "
            "saves"
        )
    if base.checkpoint.mode != "blocking":  # e.g. a tiered scenario's option on blocking saves
        from cprsim.planner.tiered import with_mode

        base = with_mode(base, "blocking")
    s = Runs(base, float(tau), strategy, dict(params), "validate").s
    cls = registry.get(strategy)
    prm = cls.Params(**s.strategy.params)  # the parameters the simulator ran, defaults included
    K = int(getattr(prm, "full_every", 1))
    full_iv = opt.get("full_interval_s")
    cal = plan.get("calibration") or {}
    return Target(
        str(path),
        hashlib.sha256(read_input_bytes(path, "plan file")).hexdigest(),
        s,
        str(label),
        strategy,
        dict(params),
        float(tau),
        float(full_iv) if isinstance(full_iv, (int, float)) else float(tau) * K,
        K,
        metric,
        float(bound) / float(factor),  # the promise on the calibration's own DLRM
        float(conf),
        int(base.seed),
        cal.get("fingerprint") if isinstance(cal, dict) else None,
        float(getattr(prm, "top_fraction", 1.0)),
        float(getattr(prm, "sample_rate", 1.0)),
        float(factor),
    )


# -- the schedule ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Schedule:
    """A simulated replication's saves and failures as iterations of an ``n_iters``-iteration DLRM
    run: ``actions`` (iteration -> the emulator's actions there, in the simulator's order),
    and how many failures (shard restores), full and partial saves it holds."""

    actions: dict[int, tuple[Action, ...]]
    failures: int
    full_saves: int
    partial_saves: int


def map_events(
    events: Sequence[Event], W: float, n_iters: int, trainers: int, full_every: int = 1
) -> Schedule:
    """A replication's event log (progress in seconds of a ``W``-second job) as a DLRM schedule:
    module docstring (``restore`` -> failure of shard ``node - trainers``; ``save_end`` -> a full
    save every ``full_every``-th, else a partial one; ``rollback`` -> back to the last full save)."""
    K = max(1, int(full_every))
    kept: list[tuple[float, Action]] = []  # (progress s, action), the simulator's order
    saves, last_full = 0, 0.0
    for e in events:
        if e.kind == "save_end":
            saves += 1
            full = saves % K == 0
            kept.append((e.value, (SAVE_FULL if full else SAVE_PARTIAL, -1)))
            if full:
                last_full = e.value
        elif e.kind == "restore":
            kept.append((e.value, (FAIL, e.node - trainers)))
        elif e.kind == "rollback":  # re-executed from the last full save: what came after is undone
            kept = [(p, a) for p, a in kept if p <= last_full]
            saves -= saves % K
    acts: dict[int, list[Action]] = {}
    for p, a in kept:
        k = min(n_iters - 1, max(0, int(round(p / W * n_iters))))
        acts.setdefault(k, []).append(a)
    kinds = [a[0] for _, a in kept]
    return Schedule(
        {k: tuple(v) for k, v in sorted(acts.items())},
        kinds.count(FAIL),
        kinds.count(SAVE_FULL),
        kinds.count(SAVE_PARTIAL),
    )


def simulate_schedule(
    t: Target, n_iters: int, i: int
) -> tuple[Schedule, ReplicationResult, Setting]:
    """Validation run ``i``: replication ``REPLICATION_BLOCKS["validate"] + i`` of the target's
    scenario (events recorded), its :class:`Schedule` on ``n_iters`` iterations, and the emulator
    :class:`Setting` of the target's strategy on it."""
    from cprsim.sim.engine import simulate_one

    s = t.scenario
    res, events = simulate_one(s, REPLICATION_BLOCKS["validate"] + i, record=True)
    sch = map_events(events, s.duration_s, n_iters, s.cluster.trainers, t.full_every)
    st = Setting(
        t.strategy,
        f"{t.strategy}@validate",
        sch.actions,
        top_fraction=t.top_fraction,
        sample_rate=t.sample_rate,
        interval=max(1, int(round(t.interval_s / s.duration_s * n_iters))),
    )
    return sch, res, st


# -- the statistics ----------------------------------------------------------------------------------
def clopper_pearson(k: int, n: int, level: float = CI_LEVEL) -> tuple[float, float]:
    """The two-sided ``level`` Clopper-Pearson interval of a binomial share ``k / n`` (fractions)."""
    from cprsim.quantiles import beta_ppf

    a = 1.0 - level
    lo = 0.0 if k <= 0 else beta_ppf(a / 2, k, n - k + 1)
    hi = 1.0 if k >= n else beta_ppf(1 - a / 2, k + 1, n - k)
    return float(lo), float(hi)


def binomial_report(k: int, n: int, q: float, alpha: float = ALPHA) -> dict[str, Any]:
    """``k`` of ``n`` runs within the bound against the promise P(within) >= ``q``: the share, its
    two-sided 95% Clopper-Pearson interval (``ci95``), the one-sided exact binomial p-value
    P(X <= k | n, q) of H0 "P(within) >= q" and whether H0 is rejected at ``alpha``."""
    from scipy import special

    if not (0 <= k <= n and n > 0):
        raise InputError(f"need 0 <= k <= n and n > 0, got k={k}, n={n}")
    p = float(special.bdtr(k, n, q))
    lo, hi = clopper_pearson(k, n)
    reject = p < alpha
    return {
        "n": n,
        "within": k,
        "share": k / n,
        "ci95": [lo, hi],
        "promised": q,
        "p_value": p,
        "alpha": alpha,
        "rejected": reject,
        "verdict": (
            f"rejected: {k} of {n} within is unlikely if P(within) >= {q:g} (p = {p:.3g} < {alpha:g})"
            if reject
            else f"not rejected: {k} of {n} within is consistent with P(within) >= {q:g} "
            f"(p = {p:.3g})"
        ),
    }


def own_quantile_check(loss: np.ndarray, pred_q: np.ndarray, q: float) -> dict[str, Any]:
    """How many runs lost more than their own predictive ``q``-quantile (``pred_q``, loss units):
    if each run's predictive were right, a Binomial(n, 1 - q) count; ``p_value`` = P(X >= that)
    (small: the per-run predictive is too narrow or its mean too low)."""
    from scipy import special

    loss, pred_q = np.asarray(loss, float), np.asarray(pred_q, float)
    n, m = int(loss.size), int(np.sum(loss > pred_q))
    p = 1.0 if m == 0 else float(special.bdtrc(m - 1, n, 1.0 - q))
    return {"q": q, "n": n, "runs": m, "expected": n * (1.0 - q), "p_value": p}


def mixture_cdf(laws: Any, x: float) -> float:
    """P(loss <= ``x``) under the equal mixture of the runs' predictive distributions ``laws``
    (:class:`~cprsim.calibrate.accuracy.RunLaws`: the planner's monotone law of a single run at
    each run's PLS, position and age): the chance that a run drawn at random among them loses at
    most ``x`` (a fraction)."""
    v = laws.cdf(x)
    return float(np.mean(v)) if v.size else math.nan


def mixture_quantiles(laws: Any, probs: Sequence[float]) -> list[float]:
    """Quantiles ``probs`` of the mixture of :func:`mixture_cdf` (loss units; bisection to
    machine precision; ``inf`` without a scatter estimate, or beyond the held-out residuals'
    resolution)."""
    if laws.cdf(0.0).size == 0:
        return [math.nan] * len(probs)
    lo0, hi0 = laws.bracket()
    if not (math.isfinite(lo0) and math.isfinite(hi0)):
        return [math.inf] * len(probs)
    lo0, hi0 = lo0 - 1e-12, hi0 + 1e-12
    out = []
    for pr in probs:
        lo, hi = lo0, hi0
        if mixture_cdf(laws, hi) < pr:
            out.append(math.inf)
            continue
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            if mid in (lo, hi):
                break
            if mixture_cdf(laws, mid) < pr:
                lo = mid
            else:
                hi = mid
        out.append(hi)
    return out


def _stats(x: Sequence[float] | np.ndarray) -> dict[str, float]:
    """The mean and the :data:`QUANTILES` of ``x`` (its units; NaN when empty)."""
    a = np.asarray(x, float)
    out = {"mean": float(a.mean()) if a.size else math.nan}
    for q in QUANTILES:
        out[f"p{100 * q:g}"] = float(np.quantile(a, q)) if a.size else math.nan
    return out


# -- the runs ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Pair:
    """One validation run's training: the baseline and the failed run's results (one seed),
    and the wall and CPU seconds of both (the worker's; data generation included)."""

    run: int
    baseline: R.RunResult
    failed: R.RunResult
    wall_s: float
    cpu_s: float


def train_pair(p: R.Preset, run: int, seed: int, setting: Setting) -> Pair:
    """Train seed ``seed`` twice here: without failures and with ``setting``'s schedule (same
    data, initialisation and batch order; the data generated once), then free the seed's data."""
    b, wb, cb = R.run_one(p, R.Run(seed, 0, 0.0))
    f, wf, cf = R.run_one(p, R.Run(seed, 1, 0.0, setting))
    R._PREP.clear()  # a validation seed is never trained again
    return Pair(run, b, f, wb + wf, cb + cf)


def execute_pairs(
    p: R.Preset, tasks: Sequence[tuple[int, int, Setting]], jobs: int = 1, threads: int = 1
) -> Iterator[Pair]:
    """:func:`train_pair` of each ``(run, seed, setting)``; yields each :class:`Pair` as it
    completes. As :func:`cprsim.calibrate.runner.execute`: ``jobs == 1`` here (``threads`` torch
    threads, restored after), else ``jobs`` worker processes of ``threads`` threads; stopping the
    iteration cancels the tasks not started and ends the workers."""
    import torch

    if not tasks:
        return
    if jobs <= 1 or len(tasks) == 1:
        old = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            for run, seed, st in tasks:
                yield train_pair(p, run, seed, st)
        finally:
            torch.set_num_threads(old)
            R._PREP.clear()
        return
    ex = ProcessPoolExecutor(
        max_workers=min(jobs, len(tasks)),
        mp_context=R._context(),
        initializer=R._init_worker,
        initargs=(threads,),
    )
    clean = False
    try:
        pending = {ex.submit(train_pair, p, run, seed, st) for run, seed, st in tasks}
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for f in sorted(done, key=lambda f: f.result().run):
                yield f.result()
        clean = True
    finally:
        if clean:
            ex.shutdown(wait=True)
        else:  # stop the runs under way too (the executor would wait for them)
            procs = list((getattr(ex, "_processes", None) or {}).values())
            ex.shutdown(wait=False, cancel_futures=True)
            for proc in procs:
                proc.terminate()
            for proc in procs:
                proc.join(5)


@dataclass
class _Run:
    """A validation run's simulated side (computed in the parent, before training)."""

    i: int
    rep: int
    seed: int
    sim: ReplicationResult
    schedule: Schedule
    setting: Setting
    pred: tuple[float, float] = field(default=(math.nan, math.nan))  #: mean, q-quantile (sim)


def _model(metric: str, s: Scenario) -> Any:
    """The accuracy model for ``metric`` of the calibration a plan of ``s`` uses by default
    (:func:`cprsim.calibrate.calibration.calibration_for`: one matched to ``s``, else the shipped
    one) and its fingerprint."""
    from cprsim.calibrate.calibration import calibration_for
    from cprsim.planner.accuracy import plan_accuracy

    cal = calibration_for(s)
    return plan_accuracy(cal, metric), cal.provenance.get("fingerprint")


def _predict(
    acc: Any, strategy: str, q: float, pls: Any, pos: Any, age: Any
) -> tuple[np.ndarray, np.ndarray]:
    """(mean, q-quantile) of single runs' losses at these covariates (arrays)."""
    pls = np.atleast_1d(np.asarray(pls, float))
    if acc.fit is None:  # a model without points: its own loss, no scatter
        v = np.array([acc.loss(float(x), strategy)[0] for x in pls])
        return v, v
    m, _, _ = acc.fit.predictive(strategy, pls, pos, age)
    return m, acc.fit.predictive_quantile(strategy, q, pls, pos, age)


def _predicted(acc: Any, t: Target, pls: Any, pos: Any, age: Any) -> dict[str, float]:
    """The model's predictive distribution over runs at these covariates (the mixture of their
    single-run laws, :func:`mixture_quantiles`): mean, :data:`QUANTILES` and the share within
    the bound."""
    m = _predict(acc, t.strategy, t.confidence, pls, pos, age)[0]
    if acc.fit is None:  # a model without points: its own loss, no scatter
        laws = RunLaws.points(m)
    else:
        laws = acc.fit.run_laws(t.strategy, pls, pos, age)
    pq = mixture_quantiles(laws, QUANTILES)
    out = {"mean": float(np.mean(m))} | {f"p{100 * q:g}": v for q, v in zip(QUANTILES, pq)}
    out["share_within"] = mixture_cdf(laws, t.bound)
    return out


def _row(r: _Run, pair: Pair, t: Target, acc: Any) -> list[Any]:
    b, f = pair.baseline, pair.failed
    loss = (b.auc - f.auc) if t.metric == "auc" else (f.logloss - b.logloss)
    m, qq = _predict(acc, t.strategy, t.confidence, f.pls, f.position, f.age)
    return [
        r.i,
        r.rep,
        r.seed,
        r.sim.pls,
        r.sim.pls_position,
        r.sim.pls_age,
        r.schedule.failures,
        r.schedule.full_saves,
        r.schedule.partial_saves,
        f.pls,
        f.position,
        f.age,
        b.auc,
        b.logloss,
        f.auc,
        f.logloss,
        float(loss),
        int(loss <= t.bound),
        r.pred[0],
        r.pred[1],
        float(m[0]),
        float(qq[0]),
    ]


def read_rows(path: Path, runs: dict[int, _Run]) -> list[list[Any]]:
    """The finished runs of a validation journal (``validation.csv``) that belong to ``runs``
    (same run, replication and seed); a torn last line (no newline) is dropped."""
    data = read_input_bytes(path, "validation journal")
    text = data[: data.rfind(b"\n") + 1].decode("utf-8", errors="replace")
    lines = text.split("\n")[:-1]
    if not lines:
        return []
    if lines[0] != ",".join(CSV_HEADER):
        raise InputError(f"{short(path)}: line 1: not a validation table")
    out, seen = [], set()
    for n, line in enumerate(lines[1:], start=2):
        row = next(csv.reader([line]), [])
        try:
            vals: list[Any] = [int(row[0]), int(row[1]), int(row[2])]
            vals += [float(x) for x in row[3:6]] + [int(x) for x in row[6:9]]
            vals += [float(x) for x in row[9:17]] + [int(row[17])]
            vals += [float(x) for x in row[18:22]]
        except (ValueError, IndexError):
            raise InputError(f"{short(path)}: line {n}: not a validation row") from None
        r = runs.get(vals[0])
        if r is None or (vals[1], vals[2]) != (r.rep, r.seed) or vals[0] in seen:
            continue  # a run beyond --runs, or already read
        seen.add(vals[0])
        out.append(vals)
    return out


def _read_doc(path: Path) -> dict[str, Any] | None:
    """A validation.json as a dict (None: absent or not a JSON object)."""
    if not path.exists():
        return None
    try:
        d = read_input_json(path, "validation document")
    except InputError:
        return None
    return d if isinstance(d, dict) else None


def _append(path: Path, text: str) -> None:
    from cprsim.calibrate.journal import append_line

    append_line(path, text)


# -- the use case ------------------------------------------------------------------------------------
def configuration(t: Target, p: R.Preset, threads: int) -> dict[str, Any]:
    """Everything a validation run's numbers depend on (the fingerprint's input; not the number
    of runs: more runs extend a validation)."""
    import torch

    preset = R.preset_dict(p)
    for k in ("runtime", "data", "seeds", "budgets", "strategies"):
        preset.pop(k, None)
    config: dict[str, Any] = {
        "plan_sha256": t.plan_digest,
        "scenario": t.scenario.name,
        "option": t.label,
        "preset": preset,
        "fresh_seed": FRESH_SEED,
        "first_replication": REPLICATION_BLOCKS["validate"],
        "threads_per_run": threads,
        "cprsim_version": __version__,
        "torch_version": torch.__version__,
    }
    if p.data is not None:
        config["data"] = p.data.fingerprint()
    return config


def _validation_runs(t: Target, acc: Any, n_iters: int, runs: int) -> dict[int, _Run]:
    """The ``runs`` validation runs by index: each one's simulated failure schedule and its
    predicted loss (mean and the plan's quantile) under the accuracy model ``acc``."""
    vruns: dict[int, _Run] = {}
    for i in range(runs):
        sch, res, st = simulate_schedule(t, n_iters, i)
        m, qq = _predict(acc, t.strategy, t.confidence, res.pls, res.pls_position, res.pls_age)
        vruns[i] = _Run(
            i,
            REPLICATION_BLOCKS["validate"] + i,
            FRESH_SEED + i,
            res,
            sch,
            st,
            (float(m[0]), float(qq[0])),
        )
    return vruns


def _resumed_rows(
    out: Path, doc_path: Path, journal: Path, vruns: dict[int, _Run], fp: str, resume: bool
) -> list[list[Any]]:
    """The journal's rows to resume from (none for a fresh start); refuses an unfinished
    validation in ``out`` without ``resume``, and one of another configuration with it."""
    rows: list[list[Any]] = []
    old = _read_doc(doc_path) if journal.exists() else None
    if not resume and old is not None and old.get("finished") is False:
        k = max(0, read_input_bytes(journal, "validation journal").count(b"\n") - 1)
        if k:
            raise ParameterError(
                "out",
                f"holds an unfinished validation ({k} runs in {journal.name}); pass `resume` "
                "to finish it, or choose another folder",
                short(out),
                also=("resume",),
            )
    if resume and journal.exists():
        if old is None or old.get("fingerprint") != fp:
            raise ParameterError(
                "resume",
                "holds a validation of another configuration (the plan file, preset, data, "
                "threads or versions differ): choose another `out`",
                short(out),
                also=("out",),
            )
        rows = read_rows(journal, vruns)
        atomic_write_text(journal, csv_text(CSV_HEADER, rows))
    return rows


def validate(
    t: Target,
    p: R.Preset,
    out: Path,
    runs: int = 40,
    progress: Progress = _noop,
    jobs: int = 1,
    threads: int = 1,
    resume: bool = False,
) -> dict[str, Any]:
    """Validate ``t`` with ``runs`` validation runs of preset ``p`` (its sample counts, batch,
    model and data; its shards become the scenario's embedding servers) into ``out``:
    ``validation.json`` and ``validation.csv`` (module docstring). Returns the JSON document."""
    from cprsim.calibrate.journal import fingerprint
    from cprsim.calibrate.journal import utc_now as _now

    if runs < 1 or jobs < 1 or threads < 1:
        raise InputError(f"runs, jobs and threads must be >= 1, got {runs}, {jobs}, {threads}")
    t0 = time.perf_counter()
    started = _now()
    p = dataclasses.replace(p, n_shards=t.scenario.cluster.embedding_servers)
    n_iters = R.n_iters_of(p)
    acc, cal_fp = _model(t.metric, t.scenario)
    notes = []
    if t.calibration_fingerprint and cal_fp and t.calibration_fingerprint != cal_fp:
        notes.append(
            f"the plan was made with another calibration (fingerprint "
            f"{t.calibration_fingerprint[:12]}...); the predictions are the default one's "
            f"({str(cal_fp)[:12]}...)"
        )
    vruns = _validation_runs(t, acc, n_iters, runs)
    config = configuration(t, p, threads)
    fp = fingerprint(config)
    doc_path, journal = out / "validation.json", out / "validation.csv"
    rows = _resumed_rows(out, doc_path, journal, vruns, fp, resume)
    head = {
        "what": "cprsim calibrate --validate",
        "fingerprint": fp,
        "finished": False,
        "config": config,
    }
    if not rows:
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_json(doc_path, head)
        atomic_write_text(journal, csv_text(CSV_HEADER, []))
    else:
        progress(len(rows), f"{len(rows)} of {runs} runs already in {journal}", resumed=True)
    have = {r[0] for r in rows}
    tasks = [(r.i, r.seed, r.setting) for r in vruns.values() if r.i not in have]
    secs: list[list[float]] = []
    for pair in execute_pairs(p, tasks, jobs, threads):
        row = _row(vruns[pair.run], pair, t, acc)
        _append(journal, csv_text(None, [row]))
        rows.append(row)
        secs.append([pair.run, pair.wall_s, pair.cpu_s])
        progress(
            1,
            f"run {pair.run} (seed {pair.baseline.seed}): loss {row[16]:.3g} ({pair.wall_s:.1f} s)",
        )
    rows.sort(key=lambda r: r[0])
    atomic_write_text(journal, csv_text(CSV_HEADER, rows))
    doc = dict(head, finished=True)
    doc.update(summarize(t, p, rows, acc, notes))
    doc["started"], doc["finished_at"] = started, _now()
    doc["wall_s"] = time.perf_counter() - t0
    doc["jobs"], doc["threads_per_job"] = jobs, threads
    doc["run_seconds"] = sorted(secs)
    doc["run_seconds_note"] = (
        "each run this invocation trained: [run, wall s, CPU s] of its baseline and failed run "
        "together (data generation included); machine- and load-dependent"
    )
    atomic_write_json(doc_path, doc)
    return doc


def summarize(
    t: Target, p: R.Preset, rows: Sequence[Sequence[Any]], acc: Any, notes: Sequence[str] = ()
) -> dict[str, Any]:
    """The verdict and the comparison of measured and predicted losses of the validation ``rows``
    (:data:`CSV_HEADER` order): plain data for ``validation.json``."""
    col = {k: i for i, k in enumerate(CSV_HEADER)}

    def c(name: str) -> np.ndarray:
        return np.array([r[col[name]] for r in rows], dtype=float)

    n, k = len(rows), int(c("within").sum())
    report = binomial_report(k, n, t.confidence)
    pred, pred_e = (
        _predicted(acc, t, c(f"{w}_pls"), c(f"{w}_position"), c(f"{w}_age")) for w in ("sim", "emu")
    )
    seeds = [int(r[col["seed"]]) for r in rows]
    return {
        "plan": {
            "path": t.plan_path,
            "scenario": t.scenario.name,
            "seed": t.seed,
            "recommended": t.label,
            "strategy": t.strategy,
            "params": t.params,
            "interval_s": t.interval_s,
            "full_interval_s": t.full_interval_s,
            "full_every": t.full_every,
            "top_fraction": t.top_fraction,
            "sample_rate": t.sample_rate,
            "metric": t.metric,
            "accuracy_bound": t.bound,
            "plan_accuracy_bound": t.bound * t.factor,
            "scale_factor": t.factor,
            "scale_note": (
                "the plan assumed the user's model loses scale_factor times the calibration's "
                "loss per unit PLS; on the calibration's own DLRM its promise is a loss <= "
                "accuracy_bound = plan_accuracy_bound / scale_factor"
            ),
            "confidence": t.confidence,
            "description": t.describe(),
        },
        "preset": p.name,
        "iterations": R.n_iters_of(p),
        "train_samples": p.train_samples,
        "test_samples": p.test_samples,
        "embedding_servers": p.n_shards,
        "seeds": seeds,
        "seeds_note": f"run i trains seed {FRESH_SEED} + i (the calibrations' seeds are 0-7)",
        "replications": [int(r[col["replication"]]) for r in rows],
        "replications_note": "run i simulates replication 2^41 + i (the validate block)",
        "result": report,
        "over_own_quantile": own_quantile_check(c("loss"), c("pred_q"), t.confidence),
        "loss": {
            "measured": _stats(c("loss")),
            "predicted": pred,
            "predicted_at_emulated_pls": pred_e,
            "note": (
                f"{t.metric} loss of a single run: measured (baseline minus failed run) and the "
                "plan's accuracy model (the equal mixture of each run's predictive distribution, "
                "at the simulated PLS, position and age, as the planner scored it; and at the "
                "emulated ones)"
            ),
        },
        "pls": {
            "simulated": _stats(c("sim_pls")),
            "emulated": _stats(c("emu_pls")),
        },
        "notes": list(notes),
    }


def summary_lines(doc: dict[str, Any]) -> list[str]:
    """A short table of a validation document (:func:`validate`'s) for the terminal."""
    pl, res, loss = doc["plan"], doc["result"], doc["loss"]
    meas, pred, pe = loss["measured"], loss["predicted"], loss["predicted_at_emulated_pls"]
    lo, hi = res["ci95"]
    out = [
        f"validated {pl['description']}",
        f"  {res['n']} runs of preset {doc['preset']} ({doc['iterations']} iterations, "
        f"{doc['embedding_servers']} shards), seeds {FRESH_SEED}+i, replications 2^41+i",
        f"  runs with {pl['metric']} loss <= {pl['accuracy_bound']:g}"
        + (
            f" (the plan's bound {pl['plan_accuracy_bound']:g} over the {pl['scale_factor']:.3g}x "
            "loss per unit PLS it assumed)"
            if pl.get("scale_factor", 1.0) != 1.0
            else ""
        )
        + f": {res['within']} of "
        f"{res['n']} ({100 * res['share']:.1f}%, 95% CI {100 * lo:.1f}%-{100 * hi:.1f}%); "
        f"promised >= {100 * res['promised']:g}%",
        f"  binomial test of P(within) >= {res['promised']:g}: p = {res['p_value']:.3g}, "
        f"{'REJECTED' if res['rejected'] else 'not rejected'} at {res['alpha']:g}",
        f"  {'':14s}{'measured':>11s}{'model':>11s}{'model@emu':>11s}",
    ]
    for key, name in (("mean", "mean"), ("p50", "P50"), ("p90", "P90"), ("p99", "P99")):
        out.append(f"  {name:14s}{meas[key]:11.3g}{pred[key]:11.3g}{pe[key]:11.3g}")
    out.append(
        f"  {'share within':14s}{100 * res['share']:10.1f}%{100 * pred['share_within']:10.1f}%"
        f"{100 * pe['share_within']:10.1f}%"
    )
    oq = doc.get("over_own_quantile")
    if oq:
        out.append(
            f"  runs above their own predictive P{100 * oq['q']:g}: {oq['runs']} of {oq['n']} "
            f"(expected {oq['expected']:.3g}; P(X >= {oq['runs']}) = {oq['p_value']:.3g})"
        )
    ps = doc["pls"]
    out.append(
        f"  PLS mean / P90: simulated {ps['simulated']['mean']:.3g} / {ps['simulated']['p90']:.3g}, "
        f"emulated {ps['emulated']['mean']:.3g} / {ps['emulated']['p90']:.3g}"
    )
    out += [f"  note: {n}" for n in doc.get("notes", [])]
    return out
