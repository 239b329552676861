"""The accuracy side of a plan: PLS (and when and how old the loss) -> accuracy loss, honestly.

* **The model the calibration supports.** ``calibration.toml``'s ``[model.<metric>]`` names the
  accuracy model chosen on held-out seeds (:mod:`cprsim.calibrate.accuracy`): ``loss = PLS x b0``
  or a richer one where the loss per unit PLS also grows with the failure's position in training
  and the restored state's age. The planner evaluates it on each simulated run's own PLS,
  position and age. Files without ``[model]`` get it fitted from their points at load time (PLS
  only: ``slope``).
* **One pooled set of coefficients unless the data say otherwise**: an F-test of "one for all
  strategies" against "one per strategy" (``p < 0.05``: per strategy). The plan says which.
* **Per run, on the predictive distribution.** The promise "P(a run's loss <= bound) >= q" is
  about single training runs, which scatter around the mean loss far more than the mean is
  uncertain. Each simulated run therefore gets one draw of its training run's loss from the
  predictive distribution at its own PLS, position and age (the mean, plus its scale, the residual
  variance and the coefficients' uncertainty, :meth:`~cprsim.calibrate.accuracy.Coef.predictive`,
  times a residual drawn from the calibration's own runs on seeds held out of the fit, in the
  run's PLS bin: :class:`~cprsim.calibrate.accuracy.HeldOutResiduals`, conformal-style; Student-t
  where the calibration has too few seeds or runs), from its own random stream (``("training",
  replication)``: common random numbers across intervals and strategies); the share of runs
  whose draw is within the bound estimates that probability without bias, and the planner proves
  it with the same Clopper-Pearson bound as for PLS. A promise on the mean
  (``confidence="mean"``) uses the upper end of the mean's 95% CI instead.
* **Within the measured range.** The model is only known on the PLS range the calibration
  measured for that strategy (``[0, max measured PLS]``): beyond it the plan warns, and beyond
  twice it the planner does not go unless asked (``allow_extrapolation``).

Accuracy models without points (a placeholder, or a test model) keep their own slopes and have no
range: the plan then says it cannot check the range.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from cprsim.calibrate.accuracy import AccuracyFit, Data, design, select, with_held_out_residuals
from cprsim.calibrate.accuracy import measured_points as _points
from cprsim.names import VANILLA
from cprsim.quantiles import t_ppf
from cprsim.streams import stream


class AccuracyModel(Protocol):
    """What the planner asks of an accuracy model without calibration points (e.g.
    :class:`cprsim.calibrate.calibration.Calibration`): the loss at a PLS and the largest PLS within
    a bound."""

    # read-only: a frozen dataclass (cprsim.calibrate.calibration.Calibration) satisfies it
    @property
    def calibrated(self) -> bool:
        """False for a placeholder (not measured)."""
        ...

    @property
    def provenance(self) -> dict[str, Any]:
        """Where the model comes from (the calibration's ``[provenance]``)."""
        ...

    def accuracy_loss(self, pls: float, metric: str = "auc", strategy: str = VANILLA) -> float:
        """Expected accuracy loss (AUC drop, or log-loss rise) at this PLS."""
        ...

    def max_pls(self, bound: float, metric: str = "auc", strategy: str = VANILLA) -> float:
        """The largest PLS whose expected loss stays within ``bound``."""
        ...


@dataclass(frozen=True)
class SlopeFit:
    """Loss per unit PLS: the slope, its 95% CI (``lo``, ``hi``) and the runs ``n`` it rests on."""

    slope: float
    lo: float
    hi: float
    n: int


def fit_through_origin(x: np.ndarray, y: np.ndarray) -> tuple[SlopeFit, float]:
    """Least squares ``y = b x``, its 95% Student-t CI, and the residual sum of squares."""
    sxx = float(np.dot(x, x))
    b = float(np.dot(x, y) / sxx) if sxx > 0 else 0.0
    rss = float(np.sum((y - b * x) ** 2))
    n = x.size
    if n < 2 or sxx <= 0:
        return SlopeFit(b, -math.inf, math.inf, n), rss
    se = math.sqrt(rss / (n - 1) / sxx)

    h = float(t_ppf(0.975, n - 1)) * se
    return SlopeFit(b, b - h, b + h, n), rss


@dataclass(frozen=True)
class PlanAccuracy:
    """The accuracy model as the planner uses it, for one metric."""

    metric: str
    calibrated: bool
    provenance: dict[str, Any]
    #: strategy -> loss per unit PLS at the reference covariates (mid-training, fresh state; PLS 0.1
    #: for the curvature model, whose loss per unit PLS grows with PLS)
    slopes: dict[str, SlopeFit]
    ranges: dict[str, float]  #: strategy -> the largest PLS the calibration measured for it
    pooled: bool | None  #: None: no points to test
    p_value: float | None
    description: str
    fallback: Any = field(default=None, repr=False)  #: a model without points: asked directly
    fit: AccuracyFit | None = field(default=None, repr=False)
    model: str = "slope"  #: the chosen model's name ('external' for a model without points)
    #: the calibration's leave-one-run/seed-out check of the choice (``[model.<metric>.stability]``)
    stability: dict[str, Any] = field(default_factory=dict)
    #: the loss per unit PLS the plan assumes, as a multiple of the calibration's (mean and scatter
    #: alike): the scale ladder's choice for the user's model (:func:`ladder_scale`); 1 as measured
    scale: float = 1.0
    #: strategy -> how its runs with the smallest PLS scatter against the single-run model
    #: (:func:`cprsim.calibrate.accuracy.scatter_check`); empty without points
    scatter: dict[str, dict[str, float]] = field(default_factory=dict)
    #: the calibration's runs (None without points): :meth:`held_out` checks the promise on them
    points: Any = field(default=None, repr=False)

    def held_out(self, q: float) -> dict[str, dict[str, float]]:
        """The Student-t per-run promise at ``q`` on the calibration's held-out seeds
        (:func:`cprsim.calibrate.accuracy.held_out_coverage`: ``"all"`` runs with PLS > 0 and the
        ``"small"``est quarter of PLS), where the plan uses it: empty when the plan's quantiles
        come from the held-out residuals themselves (``fit.residuals``; ``calibrate --show``
        checks those, nested), without points, or with fewer than 3 seeds."""
        from cprsim.calibrate.accuracy import CANDIDATES, held_out_coverage

        d = self.points
        if (
            d is None
            or self.fit is None
            or self.fit.residuals is not None
            or self.model not in CANDIDATES
            or len(set(d.seed.tolist())) < 3
        ):
            return {}
        cov = held_out_coverage(d, self.model, (q,), residuals=False)
        return {k: rows[0] for k, rows in cov.items() if rows and rows[0]["n"] > 0}

    def _fit(self, strategy: str) -> SlopeFit | None:
        return self.slopes.get(strategy, self.slopes.get(VANILLA))

    def slope_hi(self, strategy: str) -> float:
        """The upper end of the 95% CI of the loss per unit PLS for ``strategy`` (vanilla CPR's when
        it has none); a model without points: its loss at PLS 1."""
        f = self._fit(strategy)
        if f is not None:
            return self.scale * f.hi
        return self.scale * self.fallback.accuracy_loss(1.0, self.metric, strategy)

    def pls_bound(self, bound: float, strategy: str, q: float | None = 0.9) -> float:
        """The largest PLS whose loss stays within ``bound`` at the reference covariates (a failure
        mid-training restoring a fresh state; the search then checks each run at its own): a
        single run's predictive ``q``-quantile, or (``q`` None) the upper 95% end of the mean
        (the loss scaled by :attr:`scale`: the bound divided by it)."""
        if self.fit is not None:
            if self.fit.name == "slope" and q is None:
                s = self.scale * self.fit.slope_at(strategy, pls=1.0)[2]
                return math.inf if s <= 0 else bound / s
            return self.fit.max_pls(bound / self.scale, strategy, q=q)
        if self._fit(strategy) is None:
            return float(self.fallback.max_pls(bound / self.scale, self.metric, strategy))
        s = self.slope_hi(strategy)
        return math.inf if s <= 0 else bound / s

    def loss(
        self, pls: float, strategy: str, position: float = 0.5, age: float = 0.0
    ) -> tuple[float, float, float]:
        """Expected loss at this PLS (and covariates) and its 95% range (never negative)."""
        k = self.scale
        if self.fit is not None:
            m, lo, hi = self.fit.predict(strategy, pls, position, age)
            return (
                max(0.0, k * float(m[0])),
                max(0.0, k * float(lo[0])),
                max(0.0, k * float(hi[0])),
            )
        f = self._fit(strategy)
        if f is None:
            v = max(0.0, k * float(self.fallback.accuracy_loss(pls, self.metric, strategy)))
            return v, v, v
        return max(0.0, k * f.slope * pls), max(0.0, k * f.lo * pls), max(0.0, k * f.hi * pls)

    def run_losses(self, results: Sequence[Any], strategy: str) -> tuple[np.ndarray, np.ndarray]:
        """Each run's expected loss and the upper end of its 95% CI, at the run's own PLS,
        failure position and restored-state age (``pls``, ``pls_position``, ``pls_age``)."""
        pls, pos, age = _covariates(results)
        k = self.scale
        if self.fit is not None:
            m, _, hi = self.fit.predict(strategy, pls, pos, age)
            return np.maximum(k * m, 0.0), np.maximum(k * hi, 0.0)
        f = self._fit(strategy)
        if f is None:
            v = np.array(
                [
                    max(0.0, k * float(self.fallback.accuracy_loss(x, self.metric, strategy)))
                    for x in pls
                ]
            )
            return v, v
        return np.maximum(k * f.slope * pls, 0.0), np.maximum(k * f.hi * pls, 0.0)

    def run_draws(self, results: Sequence[Any], strategy: str, seed: int) -> np.ndarray:
        """One draw of each run's training loss from its predictive distribution (module doc), from
        the stream ``("training", replication)`` of ``seed``: the same replication gets the same
        quantile whatever the interval or strategy. A model without points: its own loss."""
        if self.fit is None:
            return self.run_losses(results, strategy)[1]
        pls, pos, age = _covariates(results)
        u = np.array(
            [
                stream(seed, int(getattr(r, "replication", i)), "training").random()
                for i, r in enumerate(results)
            ]
        )
        return self.scale * self.fit.draw(strategy, u, pls, pos, age)

    def mean_loss(self, results: Sequence[Any], strategy: str) -> tuple[float, float, float]:
        """The runs' mean expected loss and its 95% range (the model is linear in its columns, so
        this is the prediction at the runs' mean column)."""
        if not results:
            return 0.0, 0.0, 0.0
        if self.fit is None:
            return self.loss(float(np.mean([r.pls for r in results])), strategy)
        x = design(self.fit.terms, *_covariates(results)).mean(axis=0)
        m, lo, hi = self.fit.coef_for(strategy).predict(x[None, :])
        k = self.scale
        return max(0.0, k * float(m[0])), max(0.0, k * float(lo[0])), max(0.0, k * float(hi[0]))

    def covariate_checks(self, strategy: str) -> dict[str, tuple[float, float]]:
        """The covariates a plan range-checks for ``strategy``, with the range the calibration
        measured: the restored state's ``age`` always (a shard restored from an old state loses
        more per unit PLS than the calibration saw), and ``position`` when the model uses it.
        Empty for a model without measured ranges."""
        if self.fit is None:
            return {}
        r = self.fit.ranges.get(strategy, self.fit.ranges.get(VANILLA))
        if not r:
            return {}
        names = ["age"] + (["position"] if "position" in self.fit.terms else [])
        return {k: (float(r[k][0]), float(r[k][1])) for k in names if k in r}

    def measured_range(self, strategy: str) -> float | None:
        """The largest PLS the calibration measured for ``strategy`` (else for vanilla CPR); None
        for a model without points."""
        if not self.ranges:
            return None
        return self.ranges.get(strategy, self.ranges.get(VANILLA))


def _covariates(results: Sequence[Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The runs' PLS, failure position and restored-state age (mid-training and fresh when a
    result does not carry them)."""
    pls = np.array([r.pls for r in results], dtype=float)
    pos = np.array([getattr(r, "pls_position", 0.5) for r in results], dtype=float)
    age = np.array([getattr(r, "pls_age", 0.0) for r in results], dtype=float)
    return pls, pos, age


def plan_accuracy(model: Any, metric: str) -> PlanAccuracy:
    """The calibration's chosen model for ``metric`` (``[model.<metric>]``, or fitted from its
    points), with its pooling test and the measured PLS ranges; a model without points as it is."""
    raw = getattr(model, "raw", {}) or {}
    prov = dict(getattr(model, "provenance", {}))
    calibrated = bool(getattr(model, "calibrated", False))
    fit: AccuracyFit | None = (getattr(model, "models", None) or {}).get(metric)
    pts = _points(raw, metric)
    if fit is None:
        if not pts:
            return PlanAccuracy(
                metric,
                calibrated,
                prov,
                {},
                {},
                None,
                None,
                "the accuracy model's own slopes (no calibration points to pool or to bound "
                "the PLS range)",
                fallback=model,
                model="external",
            )
        fit = AccuracyFit.from_selection(select(Data.from_points(pts, metric), metric))
    slopes = {}
    for st in fit.ranges or (VANILLA,):
        m, lo, hi = fit.slope_at(st)
        slopes[st] = SlopeFit(m, lo, hi, fit.coef_for(st).n)
    ranges = {st: r["pls"][1] for st, r in fit.ranges.items()}
    k = len(fit.ranges)
    table = (raw.get("model") or {}).get(metric) if isinstance(raw, dict) else None
    stab = table.get("stability") if isinstance(table, dict) else None
    scatter: dict[str, dict[str, float]] = {}
    d = None
    if pts:
        from cprsim.calibrate.accuracy import scatter_check

        d = Data.from_points(pts, metric)
        fit = with_held_out_residuals(fit, d)
        for st in fit.ranges:
            chk = scatter_check(fit.coef_for(st), fit.terms, d.take(d.strategy == st))
            if chk is not None:
                scatter[st] = chk
    return PlanAccuracy(
        metric,
        calibrated,
        prov,
        slopes,
        ranges,
        fit.pooled if k >= 2 else False,
        fit.f_p_value,
        fit.description,
        fit=fit,
        model=fit.name,
        stability=dict(stab) if isinstance(stab, dict) else {},
        scatter=scatter,
        points=d,
    )


def ladder_scale(
    raw: Any, metric: str, rows: int | None = None, override: float | None = None
) -> dict[str, Any]:
    """The loss per unit PLS a plan assumes for the user's model, as a multiple (``factor``) of the
    calibration's, from the calibration's scale ladder (``[scale]``: :func:`cprsim.calibrate.pipeline.
    scale_table`) and the user's embedding ``rows``.

    Each rung is one of three kinds, by what it changes against the reference: ``size`` (synthetic
    data, the reference's training samples, other table rows), ``data`` (real data) and ``length``
    (synthetic, other training samples). The factor is the largest of 1, the ratios of the size
    rungs no larger than the user's model (all of them when ``rows`` is unknown: a larger model is
    taken to lose at least what a smaller one lost, so the factor never falls as the rows grow),
    and the ratios of the data rungs (users train on real data; the scenario cannot say which).
    Length rungs are reported, not applied: a production job is far longer than any calibration
    run, and the direction is not known. The ratios are point estimates (3 seeds a rung): their
    ranges are kept beside them, and ``--sensitivity`` shows larger factors. ``override``: the
    user's own factor. ``outside``: the user's model is larger (``above``) or smaller (``below``)
    than every model measured. Returns ``factor``, ``basis`` (the rung, or ``user``/``reference``),
    ``rows``, ``measured_rows`` ``[min, max]``, ``outside`` and ``rungs`` (each with its ``kind``,
    rows, ratio and range)."""
    rungs = _ladder_rungs(raw, metric)
    measured = [r["rows"] for r in rungs]
    lo_rows, hi_rows = (min(measured), max(measured)) if measured else (None, None)
    outside = ""
    if rows is not None and hi_rows is not None and lo_rows is not None:
        outside = "above" if rows > hi_rows else "below" if rows < lo_rows else ""
    factor, basis = _ladder_factor(rungs, rows, override)
    return {
        "factor": factor,
        "basis": basis,
        "rows": rows,
        "measured_rows": [lo_rows, hi_rows],
        "outside": outside,
        "rungs": rungs,
    }


def _ladder_rungs(raw: Any, metric: str) -> list[dict[str, Any]]:
    """The scale ladder's rungs with a finite ratio for ``metric`` (each with its kind, rows,
    ratio and range); without a ladder, the reference alone where the provenance gives its rows."""
    table = raw.get("scale") if isinstance(raw, dict) else None
    prov = raw.get("provenance", {}) if isinstance(raw, dict) else {}
    rungs: list[dict[str, Any]] = []
    if isinstance(table, dict):
        ref = table.get("reference", {})
        ref_samples = ref.get("train_samples") if isinstance(ref, dict) else None
        ref_rows = ref.get("embedding_rows") if isinstance(ref, dict) else None
        for name, r in table.items():
            if not isinstance(r, dict) or "embedding_rows" not in r:
                continue
            ratio = 1.0 if name == "reference" else r.get(f"{metric}_ratio")
            if not isinstance(ratio, (int, float)) or not math.isfinite(ratio):
                continue
            rungs.append(
                {
                    "name": name,
                    "kind": _rung_kind(name, r, ref_samples, ref_rows),
                    "rows": int(r["embedding_rows"]),
                    "real_data": bool(r.get("real_data", False)),
                    "data": str(r.get("data", "")),
                    "ratio": float(ratio),
                    "ratio_lo": float(r.get(f"{metric}_ratio_lo", ratio)),
                    "ratio_hi": float(r.get(f"{metric}_ratio_hi", ratio)),
                }
            )
    elif isinstance(prov, dict) and isinstance(prov.get("embedding_rows"), int):
        rungs.append(
            {
                "name": "reference",
                "kind": "reference",
                "rows": int(prov["embedding_rows"]),
                "real_data": False,
                "data": str(prov.get("data", "")),
                "ratio": 1.0,
                "ratio_lo": 1.0,
                "ratio_hi": 1.0,
            }
        )
    return rungs


def _rung_kind(name: str, r: dict[str, Any], ref_samples: Any, ref_rows: Any) -> str:
    """A rung's kind, by what it changes against the reference: ``data`` (real data), ``length``
    (other training samples, the same rows) or ``size`` (anything else); or ``reference``."""
    if name == "reference":
        return "reference"
    if r.get("real_data", False):
        return "data"
    if r.get("train_samples", ref_samples) != ref_samples and (r.get("embedding_rows") == ref_rows):
        return "length"
    return "size"


def _ladder_factor(
    rungs: list[dict[str, Any]], rows: int | None, override: float | None
) -> tuple[float, str]:
    """(factor, basis): the user's own factor, else the largest of 1, the size rungs' ratios no
    larger than the user's model and the data rungs' ratios (see :func:`ladder_scale`)."""
    if override is not None:
        return float(override), "user"
    eligible = [
        r
        for r in rungs
        if (r["kind"] == "size" and (rows is None or r["rows"] <= rows)) or r["kind"] == "data"
    ]
    best = max(eligible, key=lambda r: r["ratio"], default=None)
    if best is None or best["ratio"] <= 1.0:
        return 1.0, "reference"
    return best["ratio"], best["name"]
