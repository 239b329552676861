"""The calibration file the planner reads: accuracy loss as a linear function of PLS (torch-free).

``calibration.toml`` (written by ``cprsim calibrate``; a default ships as
``cprsim/data/calibration.toml``)::

    [provenance]            calibrated, preset, cprsim_version, torch_version, model, data, seeds, ...
                            (no clock readings, so that it is reproducible: since the parallel,
                            resumable calibrate, date and run times are in run.json beside it;
                            older files carry date, train_s, run_s here)
    [fit.<strategy>]        auc_slope, auc_slope_lo, auc_slope_hi, auc_r2,
                            logloss_slope, logloss_slope_lo, logloss_slope_hi, logloss_r2, n_points
    [points.<strategy>]     pls, position, age, d_auc, d_logloss, seed, budget (arrays, one per run)
    [model.<metric>]        the accuracy model the planner uses (cprsim.calibrate.accuracy): chosen,
                            formula, pooled, the held-out errors, the F-test p-values, coef.<'*' or
                            strategy> = {b, cov, dof, rss, n}
    [model.range.<strategy>] pls, position, age: [min, max] measured
    [costs]                 measured torch.save/torch.load of one shard (bytes, seconds, GB/s)
    [end_to_end]            measured vs simulated overhead of a real run with checkpoints and failures
                            ([costs] and [end_to_end] are clock measurements: they vary run to run)

``[fit]``: ``loss = slope x PLS`` per strategy (AUC loss is baseline minus failed AUC; log-loss
increase), fitted through the origin: the simple summary. ``[model]``: what the planner uses (the
slope model or a richer one with the failure's position and the restored state's age, chosen on
held-out seeds: :mod:`cprsim.calibrate.accuracy`). A strategy without its own fit uses
``partial``'s (vanilla CPR).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cprsim.errors import InputError
from cprsim.io import dumps_toml, read_toml, short
from cprsim.names import VANILLA

if TYPE_CHECKING:
    from cprsim.scenario import Scenario

METRICS = ("auc", "logloss")

#: used only when no calibration file exists: the feasibility numbers of issue 5
#: (ΔAUC ≈ 0.004 at PLS ≈ 0.26), NOT a measurement of this package
PLACEHOLDER_SLOPES = {"auc": 0.015, "logloss": 0.03}


@dataclass(frozen=True)
class Calibration:
    """The accuracy model the planner reads (:func:`load_calibration`): per strategy and
    metric, the slope of accuracy loss against PLS (``slopes``; ``upper``: the upper end of its 95%
    CI), ``calibrated`` (False: a placeholder, not measured), ``provenance``, and ``raw`` (the
    calibration.toml document: ``[fit]``, ``[points]``, ``[model]``). ``accuracy_loss(pls)`` and
    ``max_pls(bound)`` use the slopes; the planner uses the richer model (:func:`pls_bound`)."""

    slopes: dict[str, dict[str, float]]  #: strategy -> metric -> slope (loss per unit PLS)
    calibrated: bool
    provenance: dict[str, Any] = field(default_factory=dict)
    upper: dict[str, dict[str, float]] = field(default_factory=dict)  #: 95% CI upper slope
    raw: dict[str, Any] = field(default_factory=dict)
    #: metric -> the accuracy model the calibration chose (``[model.<metric>]``); empty for files
    #: written before it (the planner then fits one from ``[points]``)
    models: dict[str, Any] = field(default_factory=dict)

    def _slope(self, metric: str, strategy: str, conservative: bool) -> float:
        if metric not in METRICS:
            raise InputError(f"metric must be one of {METRICS}, got {metric!r}")
        table = self.upper if conservative and self.upper else self.slopes
        st = strategy if strategy in table else VANILLA
        if st not in table:
            raise InputError(f"calibration has no fit for {strategy!r} nor {VANILLA!r}")
        return table[st][metric]

    def accuracy_loss(
        self, pls: float, metric: str = "auc", strategy: str = VANILLA, conservative: bool = False
    ) -> float:
        """Expected accuracy loss (AUC drop, or log-loss rise) at this PLS."""
        if pls < 0:
            raise InputError(f"pls must be >= 0, got {pls}")
        return max(0.0, self._slope(metric, strategy, conservative)) * pls

    def max_pls(
        self,
        bound: float,
        metric: str = "auc",
        strategy: str = VANILLA,
        conservative: bool = False,
    ) -> float:
        """The largest PLS whose expected loss stays within ``bound`` (inf if loss does not grow)."""
        if bound < 0:
            raise InputError(f"accuracy bound must be >= 0, got {bound}")
        s = self._slope(metric, strategy, conservative)
        return math.inf if s <= 0 else bound / s


def placeholder() -> Calibration:
    """The labelled stand-in used when no calibration file exists: :data:`PLACEHOLDER_SLOPES` for
    vanilla CPR, ``calibrated`` False."""
    sl = {VANILLA: dict(PLACEHOLDER_SLOPES)}
    return Calibration(
        sl,
        False,
        {
            "calibrated": False,
            "source": "placeholder: no calibration file; "
            "slopes from issue 5's feasibility note, not measured by cprsim",
        },
    )


def default_path() -> Path | None:
    """The packaged ``cprsim/data/calibration.toml``, or None if the package ships none."""
    p = resources.files("cprsim") / "data" / "calibration.toml"
    return Path(str(p)) if p.is_file() else None


def matched_path(name: str) -> Path | None:
    """The packaged calibration matched to scenario ``name``
    (``cprsim/data/calibrations/NAME.toml``, written by ``cprsim calibrate --scenario NAME``), or
    None."""
    p = resources.files("cprsim") / "data" / "calibrations" / f"{name}.toml"
    return Path(str(p)) if p.is_file() else None


def calibration_for(s: Any) -> Calibration:
    """The calibration a plan of scenario ``s`` uses by default: the packaged one matched to it
    (:func:`matched_path`; only while ``s`` shapes its failure schedules exactly as the scenario
    it was made on: same :func:`scenario_digest`), else the shipped
    generic one (:func:`load_calibration`; a matched file without a scale ladder takes the
    shipped file's ``[scale]``)."""
    path = matched_path(s.name)
    if path is None:
        return load_calibration()
    cal = load_calibration(path)
    if (cal.provenance.get("matched") or {}).get("scenario_digest") != scenario_digest(s):
        return load_calibration()
    return cal


def _inherit_scale(cal: Calibration) -> Calibration:
    """A matched calibration (``provenance.matched``) without a scale ladder takes the shipped
    file's ``[scale]`` (its rungs' ratios to its own reference, assumed to carry; noted there), so
    a plan assumes the same loss per unit PLS for the user's model whether the matched file is the
    packaged one or given with ``--calibration``."""
    shipped = default_path()
    if "scale" in cal.raw or not cal.provenance.get("matched") or shipped is None:
        return cal
    table = dict(read_toml(shipped, "calibration file").get("scale", {}))
    if table:
        table["note"] = (
            "the shipped generic calibration's scale ladder (its rungs' ratios to its own "
            "reference, assumed to carry to this matched calibration): "
            + str(table.get("note", ""))
        )
        cal.raw["scale"] = table
    return cal


def load_calibration(path: str | Path | None = None) -> Calibration:
    """Read a calibration file (default: the packaged one; none: a labelled placeholder); a
    malformed one is a one-line :class:`~cprsim.errors.InputError` naming the file and the key
    (:func:`from_doc`)."""
    if path is None:
        path = default_path()
        if path is None:
            return placeholder()
    p = Path(path)
    return from_doc(read_toml(p, "calibration file"), p)


def from_doc(raw: dict[str, Any], p: str | Path = "calibration") -> Calibration:
    """A calibration document (a calibration.toml's tables) as a :class:`Calibration`, checked
    as :func:`load_calibration` checks a file (errors name ``p``): every key the code reads, once
    (:func:`cprsim.calibrate.schema.check_document`), and the accuracy model it implies (a mean
    loss that is positive and grows with PLS over the measured range)."""
    from cprsim.calibrate.accuracy import AccuracyFit
    from cprsim.calibrate.schema import check_document

    p = short(p)  # a file name on one line
    check_document(raw, p)
    prov, fits = raw["provenance"], raw["fit"]
    slopes: dict[str, dict[str, float]] = {}
    upper: dict[str, dict[str, float]] = {}
    for st, f in fits.items():
        slopes[st] = {m: float(f[f"{m}_slope"]) for m in METRICS}
        upper[st] = {m: float(f[f"{m}_slope_hi"]) for m in METRICS}
    models = {}
    table = raw.get("model") or {}
    ranges = table.get("range", {})
    for m in METRICS:
        if m in table:
            models[m] = AccuracyFit.from_table(table[m], m, ranges, f"{p}: model.{m}")
        else:
            _check_points_fit(raw, m, p)
    cal = Calibration(slopes, bool(prov.get("calibrated", True)), dict(prov), upper, raw, models)
    return _inherit_scale(cal)


def _check_points_fit(raw: dict[str, Any], metric: str, p: str | Path) -> None:
    """A file without ``[model.<metric>]`` gets its model fitted from its points when it is
    planned (:func:`cprsim.planner.accuracy.plan_accuracy`): the same fit, refused here when it is not
    a model of lost updates (a mean loss that is negative or falls with PLS)."""
    from cprsim.calibrate.accuracy import AccuracyFit, Data, measured_points, select

    pts = measured_points(raw, metric)
    if not pts:
        return
    sel = select(Data.from_points(pts, metric), metric)
    why = AccuracyFit.from_selection(sel).inadmissible(sel.ranges)
    if why:
        raise InputError(
            f"{p}: points: the {metric} model fitted from them is not a model of lost updates "
            f"({why}); expected a loss that is positive and grows with PLS: recalibrate"
        )


# -- writing (used by the calibrate command) --------------------------------------------------------
def to_toml(doc: dict[str, Any], header: str = "") -> str:
    """The calibration file's TOML (see :func:`cprsim.io.dumps_toml`), ``header`` as comments."""
    return dumps_toml(doc, header)


def refit(path: Any) -> dict[str, Any]:
    """Rewrite the ``[model]`` table of the calibration file ``path`` from its ``[points]`` with
    today's model selection (:func:`cprsim.calibrate.accuracy.model_table`: admissible fits only,
    the residual-variance model of single runs), atomically; no training. Returns the document.
    A file without points raises :class:`~cprsim.errors.InputError`."""
    from pathlib import Path

    from cprsim.calibrate.accuracy import model_table
    from cprsim.errors import InputError
    from cprsim.io import atomic_write_text

    path = Path(path)
    doc = read_toml(path, "calibration file")
    points = doc.get("points")
    if not isinstance(points, dict) or not points:
        raise InputError(f"{path}: [points]: expected the calibration's measured runs to refit")
    try:
        doc["model"] = model_table(points, check_stability=True)
    except (KeyError, TypeError, ValueError) as e:
        raise InputError(f"{path}: [points]: cannot be refitted ({e})") from None
    atomic_write_text(
        path,
        to_toml(
            doc,
            "cprsim calibration: accuracy loss vs PLS on a PyTorch DLRM (written by `cprsim "
            "calibrate`; [model] refitted by `cprsim calibrate --refit`)",
        ),
    )
    return doc


# -- what a matched calibration stands for (``provenance.matched``: cprsim.calibrate.matched) ----
#: scenario keys that do not shape its failure schedules
_UNUSED = ("name", "description", "replications", "strategy", "sources")


def scenario_digest(s: Scenario) -> str:
    """SHA-256 of the scenario's validated content that shapes its failure schedules: everything
    except its name, description, replication count, strategy, checkpoint interval and the record
    of where keys came from (``sources``); the failure clocks only when they are not the
    defaults (so files written before them keep their digest)."""
    from cprsim.scenario import FailureClock

    d = s.model_dump(mode="json")
    for k in _UNUSED:
        d.pop(k, None)
    if isinstance(d.get("checkpoint"), dict):
        d["checkpoint"].pop("interval_h", None)
    fail = d.get("failures")
    if isinstance(fail, dict) and fail.get("clock") == FailureClock().model_dump(mode="json"):
        fail.pop("clock")  # the default clocks: the digest of files written before they existed
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()


def describe(info: dict[str, Any]) -> str:
    """One line for a plan's notes: what the matched calibration stands for."""
    ps = "; ".join(
        f"{st} " + ", ".join(f"{k} {v:g}" for k, v in sorted(v.items()))
        for st, v in sorted(info.get("strategy_params", {}).items())
    )
    iv = ", ".join(f"{x:.3g}" for x in info.get("intervals_h", []))
    return (
        f"calibrated on the failure schedules of scenario {info.get('scenario')!r} "
        f"({info.get('embedding_servers')} servers; intervals {iv} h; a full save every "
        f"{info.get('full_interval_h', math.nan):.3g} h{'; ' + ps if ps else ''})"
    )
