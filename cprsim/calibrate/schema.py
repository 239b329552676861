"""The calibration file's schema: every key the code reads, checked once when the file is loaded.

:func:`check_document` walks a calibration document (``calibration.toml``'s tables, as
:func:`cprsim.calibrate.calibration.from_doc` gets them) before anything reads it, and refuses a
malformed one with a one-line :class:`~cprsim.errors.InputError` that names the file, the key (a
dotted path such as ``model.auc.coef.mfu.b``, ``[i]`` for an item of an array) and what was
expected. The rules are what the readers assume (the planner, ``cprsim calibrate --show``, the
stability check, the scale ladder):

* ``[provenance]``: a table; ``calibrated`` true or false; ``preset``, ``model``, ``data``,
  ``mfu_ssu``, ``fingerprint`` text; ``seeds`` whole numbers >= 0; ``embedding_rows`` a whole
  number >= 0, ``embedding_servers`` >= 1; ``[provenance.matched]``: its scenario and digest
  text, its intervals finite and > 0, ``strategy_params`` finite numbers (``top_fraction`` and
  ``sample_rate`` in (0, 1]).
* ``[fit.<strategy>]`` (at least one): ``<metric>_slope`` finite, ``<metric>_slope_lo <= slope <=
  <metric>_slope_hi`` (the CI's ends may be infinite: a fit of one run); ``r2`` at most 1 (or
  nan: no spread), ``n_points`` >= 1. Where the planner falls back on these slopes (no
  ``[model.<metric>]`` and no points), slope and upper end > 0.
* ``[points.<strategy>]``: ``pls``, ``d_auc`` and ``d_logloss`` arrays (``seed``, ``position``,
  ``age`` optional), one value per run and at least one run; every array of the strategy the same length; all finite; ``pls``,
  ``position`` and ``age`` in [0, 1] (fractions of the run); ``seed`` whole numbers >= 0;
  ``budget`` > 0.
* ``[model.<metric>]``: ``chosen`` a candidate; ``coef`` with ``'*'`` or vanilla CPR's fit, each
  ``b`` the model's number of finite coefficients, ``n`` a whole number >= 1 and ``dof = n - len(b)``
  >= 0 (least squares), ``rss`` finite >= 0, ``cov`` a square array, finite, symmetric and
  positive semi-definite when ``dof > 0`` (``+inf`` allowed without residual degrees of freedom),
  ``resid_var`` two finite numbers >= 0, not both 0; the held-out errors >= 0, the F-test
  p-values in [0, 1] (nan: no test), the stability check's counts whole (``kept <= refits``) and
  its ratio >= 1. The mean loss it implies must be positive and grow with PLS over the measured
  range (:meth:`cprsim.calibrate.accuracy.Fitted.inadmissible`, checked by
  :meth:`cprsim.calibrate.accuracy.AccuracyFit.from_table`).
* ``[model.range.<strategy>]``: ``pls``, ``position`` and ``age`` each ``[min, max]``, finite,
  ``min <= max``, within [0, 1].
* ``[scale]``: a ``reference`` and rungs, whole ``embedding_rows`` and ``train_samples`` >= 1;
  each rung's ``<metric>_ratio`` finite and > 0, ``<metric>_ratio_lo`` finite and >= 0,
  ``<metric>_ratio_hi`` > 0 (may be inf: a reference CI reaching 0), ``lo <= ratio <= hi``.
* ``[costs]``: every number finite and >= 0.

Keys the code never reads are not checked (the end-to-end check, comments of provenance).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from cprsim.errors import InputError
from cprsim.names import VANILLA

METRICS = ("auc", "logloss")

_MISSING: Any = object()
_PLAIN = re.compile(r"[A-Za-z0-9_*+\-]+")


def _key(path: str, name: object) -> str:
    """``path.name`` (a name with other characters quoted, as TOML would)."""
    s = str(name)
    part = s if _PLAIN.fullmatch(s) else '"' + s.encode("unicode_escape").decode("ascii") + '"'
    return f"{path}.{part}" if path else part


class _Said(str):
    """A description shown as it is (not as a value's repr)."""


def _show(v: object) -> str:
    """A value for a message: its repr, on one line, shortened."""
    r = str(v) if isinstance(v, _Said) else repr(v).replace("\n", "\\n")
    return r if len(r) <= 60 else r[:57] + "..."


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def _num(v: object) -> bool:
    """A TOML number a float holds (an integer of 400 digits is not)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    return isinstance(v, float) or -1e308 < v < 1e308


def _whole(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _finite(x: float) -> bool:
    return math.isfinite(x)


def _nonneg(x: float) -> bool:
    return math.isfinite(x) and x >= 0


def _unit(x: float) -> bool:
    return 0.0 <= x <= 1.0


def _fraction(x: float) -> bool:
    return 0.0 <= x <= 1.0


def _at_least(lo: float) -> Callable[[float], bool]:
    return lambda x: x >= lo


def _at_most(hi: float) -> Callable[[float], bool]:
    return lambda x: x <= hi


def _finite_from(lo: float, hi: float) -> Callable[[float], bool]:
    return lambda x: math.isfinite(x) and lo <= x <= hi


class _Walker:
    """The checks, each naming the file and the key."""

    def __init__(self, where: str) -> None:
        self.where = where

    def error(self, key: str, want: str, got: Any = _MISSING) -> InputError:
        shown = "nothing (the key is missing)" if got is _MISSING else _show(got)
        return InputError(f"{self.where}: {key}: expected {want}, got {shown}")

    # -- scalars ------------------------------------------------------------------------------
    def table(self, v: Any, key: str, want: str = "a table") -> dict[str, Any]:
        if not isinstance(v, dict):
            raise self.error(key, want, v)
        return v

    def number(
        self, v: Any, key: str, want: str = "a finite number", ok: Callable[[float], bool] = _finite
    ) -> float:
        if not _num(v) or not ok(float(v)):
            raise self.error(key, want, v)
        return float(v)

    def whole(self, v: Any, key: str, lo: int = 0) -> int:
        if not _whole(v) or v < lo:
            raise self.error(key, f"a whole number >= {lo}", v)
        return int(v)

    def text(self, v: Any, key: str) -> str:
        if not isinstance(v, str):
            raise self.error(key, "text (a quoted string)", v)
        return v

    def flag(self, v: Any, key: str) -> bool:
        if not isinstance(v, bool):
            raise self.error(key, "true or false", v)
        return v

    def optional(self, t: Mapping[str, Any], name: str, path: str, check: Callable, *a: Any) -> Any:
        """``check(t[name], key, *a)`` when ``t`` has ``name``."""
        return check(t[name], _key(path, name), *a) if name in t else None

    # -- arrays -------------------------------------------------------------------------------
    def numbers(
        self,
        v: Any,
        key: str,
        want: str = "a finite number",
        ok: Callable[[float], bool] = _finite,
        length: int | None = None,
        whole: bool = False,
        like: str = "pls",
    ) -> list[float]:
        """An array of numbers (each checked as :meth:`number`, or :meth:`whole` >= 0), of
        ``length`` values when given (as many as the array ``like``)."""
        if not isinstance(v, list):
            each = "a whole number >= 0" if whole else want
            raise self.error(key, f"an array ({each} each)", v)
        if length is not None and len(v) != length:
            raise self.error(key, f"{length} values (one per run, as {like})", _Said(len(v)))
        if whole:
            return [self.whole(x, f"{key}[{i}]") for i, x in enumerate(v)]
        return [self.number(x, f"{key}[{i}]", want, ok) for i, x in enumerate(v)]

    def span(self, v: Any, key: str, fraction: bool) -> tuple[float, float]:
        """``[min, max]``: two finite numbers, ``min <= max`` (within [0, 1] for a fraction)."""
        want = (
            "[min, max], finite numbers" + (" within [0, 1]" if fraction else "") + ", min <= max"
        )
        if not (
            isinstance(v, list)
            and len(v) == 2
            and all(_num(x) and math.isfinite(x) for x in v)
            and v[0] <= v[1]
            and (not fraction or (v[0] >= 0 and v[1] <= 1))
        ):
            raise self.error(key, want, v)
        return float(v[0]), float(v[1])


def check_document(raw: Any, where: str) -> None:
    """Refuse a malformed calibration document (module doc) with a one-line
    :class:`~cprsim.errors.InputError` naming ``where`` (the file) and the key."""
    w = _Walker(where)
    if not isinstance(raw, dict):
        raise w.error("the document", "TOML tables", raw)
    prov = raw.get("provenance", _MISSING)
    _provenance(w, w.table(prov, "provenance", "a table ([provenance])"))
    fits = raw.get("fit", _MISSING)
    if not isinstance(fits, dict) or not fits:
        raise w.error("fit", "a table of [fit.<strategy>] tables, at least one", fits)
    points = raw.get("points")
    if points is not None:
        _points(w, w.table(points, "points", "a table of [points.<strategy>] tables"))
    model = raw.get("model")
    if model is not None:
        model = w.table(model, "model", "a table ([model.auc], [model.logloss], [model.range])")
        _model(w, model)
    # without [model.<metric>] the planner fits a model to the strategies with two runs or more,
    # and without those it reads the [fit] slopes themselves
    fitted = isinstance(points, dict) and any(len(t["pls"]) >= 2 for t in points.values())
    fallback = {m for m in METRICS if not (isinstance(model, dict) and m in model) and not fitted}
    _fit(w, fits, fallback)
    if "scale" in raw:
        _scale(w, raw["scale"])
    if "costs" in raw:
        _costs(w, w.table(raw["costs"], "costs"), "costs")


def _provenance(w: _Walker, prov: dict[str, Any]) -> None:
    w.optional(prov, "calibrated", "provenance", w.flag)
    for k in ("preset", "model", "data", "mfu_ssu", "fingerprint"):
        w.optional(prov, k, "provenance", w.text)
    if "seeds" in prov:
        w.numbers(prov["seeds"], "provenance.seeds", whole=True)
    w.optional(prov, "embedding_rows", "provenance", w.whole, 0)
    w.optional(prov, "embedding_servers", "provenance", w.whole, 1)
    if "matched" not in prov:
        return
    m = w.table(prov["matched"], "provenance.matched")
    path = "provenance.matched"
    for k in ("scenario", "scenario_digest"):
        w.optional(m, k, path, w.text)
    w.optional(m, "embedding_servers", path, w.whole, 1)
    positive = ("a finite number > 0", lambda x: math.isfinite(x) and x > 0)
    for k in ("young_interval_h", "full_interval_h"):
        w.optional(m, k, path, w.number, *positive)
    if "intervals_h" in m:
        w.numbers(m["intervals_h"], f"{path}.intervals_h", *positive)
    if "strategy_params" in m:
        params = w.table(m["strategy_params"], f"{path}.strategy_params")
        for st, t in params.items():
            sp = _key(f"{path}.strategy_params", st)
            for k, v in w.table(t, sp).items():
                if k in ("top_fraction", "sample_rate"):
                    w.number(v, _key(sp, k), "a fraction in (0, 1]", lambda x: 0 < x <= 1)
                else:
                    w.number(v, _key(sp, k))


def _fit(w: _Walker, fits: dict[str, Any], fallback: set[str]) -> None:
    """``[fit.<strategy>]``; for the metrics in ``fallback`` the planner reads these slopes."""
    for st, f in fits.items():
        path = _key("fit", st)
        f = w.table(f, path)
        for m in METRICS:
            slope = w.number(f.get(f"{m}_slope", _MISSING), f"{path}.{m}_slope")
            hi = w.number(
                f.get(f"{m}_slope_hi", _MISSING),
                f"{path}.{m}_slope_hi",
                f"a number >= {m}_slope ({slope!r}; inf: a fit of one run)",
                _at_least(slope),
            )
            w.optional(
                f,
                f"{m}_slope_lo",
                path,
                w.number,
                f"a number <= {m}_slope ({slope!r}; -inf: a fit of one run)",
                _at_most(slope),
            )
            w.optional(
                f,
                f"{m}_r2",
                path,
                w.number,
                "a number <= 1 (or nan: runs without spread)",
                lambda x: math.isnan(x) or x <= 1,
            )
            if m in fallback and not (slope > 0 and hi > 0):
                raise w.error(
                    f"{path}.{m}_slope",
                    "a loss per unit PLS > 0 with an upper end > 0 (the planner uses these "
                    f"slopes: the file has no [model.{m}] and no [points])",
                    slope if slope <= 0 else hi,
                )
            w.optional(f, f"mean_d_{m}", path, w.number)
        w.optional(f, "n_points", path, w.whole, 1)
        w.optional(f, "mean_pls", path, w.number, "a fraction in [0, 1]", _fraction)


#: the arrays of ``[points.<strategy>]`` and their values: (what, predicate)
_POINT_ARRAYS: dict[str, tuple[str, Callable[[float], bool]]] = {
    "pls": ("a fraction in [0, 1]", _fraction),
    "position": ("a fraction of the run in [0, 1]", _fraction),
    "age": ("a fraction of the run in [0, 1]", _fraction),
    "d_auc": ("a finite number", _finite),
    "d_logloss": ("a finite number", _finite),
    "budget": ("a finite number > 0", lambda x: math.isfinite(x) and x > 0),
}
#: ``seed`` is optional: files written before it read as one seed (0), as
#: :meth:`cprsim.calibrate.accuracy.Data.from_points` reads them
_POINTS_REQUIRED = ("pls", "d_auc", "d_logloss")


def _points(w: _Walker, points: dict[str, Any]) -> None:
    for st, p in points.items():
        path = _key("points", st)
        p = w.table(p, path)
        for k in _POINTS_REQUIRED:
            if k not in p:
                raise w.error(_key(path, k), "an array of one value per run")
        pls = p["pls"]
        if not isinstance(pls, list) or not pls:
            raise w.error(f"{path}.pls", "an array of the runs' PLS (at least one run)", pls)
        n, like = len(pls), f"{path}.pls"
        for k, v in p.items():
            key = _key(path, k)
            if k == "seed":
                w.numbers(v, key, length=n, whole=True, like=like)
            elif k in _POINT_ARRAYS:
                w.numbers(v, key, *_POINT_ARRAYS[k], length=n, like=like)
            elif not isinstance(v, list) or len(v) != n:
                # the stability check slices every array of the strategy by run
                raise w.error(key, f"an array of {n} values (one per run, as {like})", v)


def _model(w: _Walker, model: dict[str, Any]) -> None:
    from cprsim.calibrate.accuracy import CANDIDATES

    if "range" in model:
        ranges = w.table(model["range"], "model.range", "a table of strategies")
        for st, r in ranges.items():
            path = _key("model.range", st)
            r = w.table(r, path, "a table of [min, max] pairs")
            for k, v in r.items():
                w.span(v, _key(path, k), k in ("pls", "position", "age"))
            for k in ("pls", "position", "age"):  # the admissibility check reads all three
                if k not in r:
                    raise w.error(_key(path, k), "[min, max] of the runs' values")
    for m in METRICS:
        if m not in model:
            continue
        path = f"model.{m}"
        t = w.table(model[m], path)
        name = t.get("chosen", _MISSING)
        if not isinstance(name, str) or name not in CANDIDATES:
            raise w.error(f"{path}.chosen", f"one of {', '.join(CANDIDATES)}", name)
        p = 1 + len(CANDIDATES[name])
        coefs = t.get("coef", _MISSING)
        if not isinstance(coefs, dict) or not coefs:
            raise w.error(f"{path}.coef", "a table of fits ('*' or one per strategy)", coefs)
        for k, c in coefs.items():
            _coef(w, c, _key(f"{path}.coef", k), name, p)
        if "*" not in coefs and VANILLA not in coefs:
            raise w.error(
                f"{path}.coef",
                f"'*' (pooled) or {VANILLA!r} among the fits",
                sorted(coefs),
            )
        w.optional(t, "pooled", path, w.flag)
        if "pooling_weight" in t:
            pw = t["pooling_weight"]
            w.number(pw, f"{path}.pooling_weight", "a weight in [0, 1]", _unit)
            if ("*" in coefs) != (pw == 1):
                raise w.error(
                    f"{path}.pooling_weight", "1 exactly when the fit is pooled (coef '*')", pw
                )
        for k in ("formula", "selection", "cv_best"):
            w.optional(t, k, path, w.text)
        w.optional(t, "runs", path, w.whole, 1)
        if "terms" in t and not (
            isinstance(t["terms"], list) and all(isinstance(x, str) for x in t["terms"])
        ):
            raise w.error(f"{path}.terms", "an array of text", t["terms"])
        if "cv_mse" in t:
            for k, v in w.table(t["cv_mse"], f"{path}.cv_mse").items():
                w.number(v, _key(f"{path}.cv_mse", k), "a number >= 0", lambda x: x >= 0)
        if "pooling_f_test_p" in t:
            for k, v in w.table(t["pooling_f_test_p"], f"{path}.pooling_f_test_p").items():
                w.number(
                    v,
                    _key(f"{path}.pooling_f_test_p", k),
                    "a p-value in [0, 1] (nan: no test)",
                    lambda x: math.isnan(x) or 0 <= x <= 1,
                )
        if "pooling_weights" in t:
            for k, v in w.table(t["pooling_weights"], f"{path}.pooling_weights").items():
                w.number(v, _key(f"{path}.pooling_weights", k), "a weight in [0, 1]", _unit)
        if "inadmissible" in t:
            for k, v in w.table(t["inadmissible"], f"{path}.inadmissible").items():
                w.text(v, _key(f"{path}.inadmissible", k))
        if "stability" in t:
            _stability(w, w.table(t["stability"], f"{path}.stability"), f"{path}.stability")


def _coef(w: _Walker, c: Any, path: str, name: str, p: int) -> None:
    """One ``coef`` table of a model with ``p`` coefficients."""
    c = w.table(c, path, "a table with b, cov, dof, rss and n")
    b = c.get("b", _MISSING)
    if not isinstance(b, list) or len(b) != p:
        raise w.error(f"{path}.b", f"an array of {_count(p, 'coefficient')} (model '{name}')", b)
    w.numbers(b, f"{path}.b")
    n = w.whole(c.get("n", _MISSING), f"{path}.n", 1)
    if "own_terms" in c:  # the strategy's own fit frees only these terms (the rest fixed at 0)
        from cprsim.calibrate.accuracy import CANDIDATES

        ot, terms = c["own_terms"], CANDIDATES[name]
        if not (
            isinstance(ot, list)
            and all(isinstance(x, str) and x in terms for x in ot)
            and len(set(ot)) == len(ot)
        ):
            raise w.error(
                f"{path}.own_terms", f"a list of distinct terms of model '{name}' {list(terms)}", ot
            )
    free = 1 + len(c["own_terms"]) if "own_terms" in c else p
    dof = c.get("dof", _MISSING)
    if not _whole(dof) or dof != n - free:
        raise w.error(
            f"{path}.dof",
            f"n - {free} = {n - free} (the residual degrees of freedom of {_count(n, 'run')} and "
            f"{_count(free, 'free coefficient')}), a whole number >= 0",
            dof,
        )
    w.number(c.get("rss", _MISSING), f"{path}.rss", "a finite number >= 0", _nonneg)
    cov = c.get("cov", _MISSING)
    want = f"a {p}x{p} array of numbers"
    if not (
        isinstance(cov, list)
        and len(cov) == p
        and all(isinstance(r, list) and len(r) == p and all(_num(x) for x in r) for r in cov)
    ):
        raise w.error(f"{path}.cov", want, cov)
    a = np.asarray(cov, dtype=float)
    if dof > 0:
        if not np.all(np.isfinite(a)):
            raise w.error(f"{path}.cov", f"finite numbers (dof = {dof} > 0)", cov)
        scale = float(np.max(np.abs(a))) if a.size else 0.0
        if np.any(np.abs(a - a.T) > 1e-8 * scale):
            raise w.error(f"{path}.cov", "a symmetric array (a covariance)", cov)
        if scale > 0 and float(np.min(np.linalg.eigvalsh(a))) < -1e-9 * scale:
            raise w.error(f"{path}.cov", "a positive semi-definite array (a covariance)", cov)
    elif np.any(np.isnan(a)) or np.any(a == -math.inf):
        raise w.error(f"{path}.cov", "numbers or inf (dof = 0: no residual degree of freedom)", cov)
    if "resid_var" in c:
        rv = c["resid_var"]
        if not (
            isinstance(rv, list)
            and len(rv) == 2
            and all(_num(x) and math.isfinite(x) and x >= 0 for x in rv)
            and rv[0] + rv[1] > 0
        ):
            raise w.error(
                f"{path}.resid_var",
                "[v0, v1], finite numbers >= 0 and not both 0 (a single run's variance v0 PLS + "
                "v1 PLS^2)",
                rv,
            )


def _stability(w: _Walker, t: dict[str, Any], path: str) -> None:
    w.optional(t, "stable", path, w.flag)
    w.optional(t, "pooled", path, w.flag)
    w.optional(t, "chosen", path, w.text)
    if "pooling_weight" in t:
        w.number(t["pooling_weight"], f"{path}.pooling_weight", "a weight in [0, 1]", _unit)
    for k in ("leave_one_seed_out", "leave_one_run_out"):
        if k not in t:
            continue
        sub = f"{path}.{k}"
        r = w.table(t[k], sub)
        refits = w.whole(r.get("refits", _MISSING), f"{sub}.refits")
        kept = r.get("kept", _MISSING)
        if not _whole(kept) or not 0 <= kept <= refits:
            raise w.error(f"{sub}.kept", f"a whole number from 0 to refits ({refits})", kept)
        w.number(
            r.get("max_pls_bound_ratio", _MISSING),
            f"{sub}.max_pls_bound_ratio",
            "a number >= 1 (inf allowed)",
            lambda x: x >= 1,
        )
        if "other_choices" in r:
            for name, v in w.table(r["other_choices"], f"{sub}.other_choices").items():
                w.whole(v, _key(f"{sub}.other_choices", name))
        if "pooling_weight_range" in r:
            wr = r["pooling_weight_range"]
            if not (
                isinstance(wr, list)
                and len(wr) in (0, 2)
                and all(_num(x) and _unit(x) for x in wr)
                and (not wr or wr[0] <= wr[1])
            ):
                raise w.error(
                    f"{sub}.pooling_weight_range", "[min, max] weights in [0, 1], or []", wr
                )


def _scale(w: _Walker, table: Any) -> None:
    """``[scale]`` (:func:`cprsim.calibrate.pipeline.scale_table`)."""
    if not isinstance(table, dict):
        raise w.error("scale", "a table with a [scale.reference] table", table)
    w.table(table.get("reference", _MISSING), "scale.reference", "a table (the reference rung)")
    for name, r in table.items():
        if name == "note":
            w.text(r, "scale.note")
            continue
        path = _key("scale", name)
        r = w.table(r, path)
        w.whole(r.get("embedding_rows", _MISSING), f"{path}.embedding_rows", 1)
        w.optional(r, "train_samples", path, w.whole, 1)
        w.optional(r, "real_data", path, w.flag)
        for k in ("data", "preset"):
            w.optional(r, k, path, w.text)
        if "seeds" in r:
            w.numbers(r["seeds"], f"{path}.seeds", whole=True)
        w.optional(r, "n_points", path, w.whole, 1)
        for m in METRICS:
            w.optional(r, f"{m}_slope", path, w.number)
            w.optional(r, f"{m}_slope_lo", path, w.number, "a number", lambda x: x < math.inf)
            w.optional(r, f"{m}_slope_hi", path, w.number, "a number", lambda x: x > -math.inf)
        if name == "reference":
            continue
        for m in METRICS:
            ratio = w.number(
                r.get(f"{m}_ratio", _MISSING),
                f"{path}.{m}_ratio",
                "a finite number > 0",
                lambda x: math.isfinite(x) and x > 0,
            )
            w.number(
                r.get(f"{m}_ratio_lo", _MISSING),
                f"{path}.{m}_ratio_lo",
                f"a finite number from 0 to {m}_ratio ({ratio!r})",
                _finite_from(0.0, ratio),
            )
            w.number(
                r.get(f"{m}_ratio_hi", _MISSING),
                f"{path}.{m}_ratio_hi",
                f"a number >= {m}_ratio ({ratio!r}; inf allowed)",
                _at_least(ratio),
            )


def _costs(w: _Walker, t: dict[str, Any], path: str) -> None:
    """``[costs]``: measured sizes and times: every number finite and >= 0."""
    for k, v in t.items():
        key = _key(path, k)
        if isinstance(v, dict):
            _costs(w, v, key)
        elif isinstance(v, list):
            w.numbers(v, key, "a finite number >= 0", _nonneg)
        elif _num(v):
            w.number(v, key, "a finite number >= 0", _nonneg)
