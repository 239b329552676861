"""Failure models fitted from a failure log, as documents and files: what ``cprsim fit`` computes
and writes, callable from Python.

Two analyses of a log (:func:`cprsim.failures.traces.read_trace` reads it):

* lifetimes (:func:`fit_failure_log`): exponential, Weibull, gamma, lognormal and log-logistic
  fitted with censoring and ranked by AIC, the repair times likewise, optionally a cluster's time
  to its first failure. :func:`report_dict` is the JSON of ``cprsim fit --report``;
  :func:`fitted_model_toml` / :func:`write_fitted_model` the failure-model file a scenario reads
  (``[failures] model = "FILE"``), with its provenance;
* bad nodes (:func:`fit_bad_nodes`): a two-rate Poisson mixture over each node's failure count in
  its observation window. :func:`report_dict` is its JSON; :func:`bad_nodes_toml` /
  :func:`write_bad_nodes_model` the ``[lifecycle.health]`` file.

Units: lifetimes, scales, means and windows in hours (``*_h``), rates per hour, repair-time
parameters in the model file in seconds (``*_s``). Files are written atomically.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import os
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from cprsim.errors import InputError
from cprsim.failures.fit import FIT_FAMILIES, Fit, FitReport, cluster_mtbf, fit_all
from cprsim.failures.traces import Trace, check_filters, read_trace
from cprsim.io import atomic_write_json, atomic_write_text, dumps_toml, short
from cprsim.version import __version__

if TYPE_CHECKING:  # pragma: no cover
    from cprsim.failures.mixture import BadNodeReport

#: which scenario failure process a fitted model file describes (``job``: [failures.job])
MODEL_TYPES = ("embedding", "trainer", "both", "job")


# -- lifetimes -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LogFit:
    """The lifetime fits of one failure log (:func:`fit_failure_log`).

    ``trace``, ``format``, ``filters``, ``node_type``, ``node_count``, ``interarrival``: what was
    read and how; ``log``: the log read; ``lifetimes``: the fits of the lifetimes (hours) ranked by
    AIC; ``repairs``: those of the repair times (None when the log has no repair that ended);
    ``bootstrap`` / ``repair_bootstrap``: the goodness-of-fit draws each used (0: p-values not
    computed); ``cluster``: with ``cluster_size``, the mean time to the first failure of that many
    fresh nodes (hours), its 95% CI and the method.
    """

    trace: Path
    format: str
    filters: dict[str, str]
    node_type: str | None
    node_count: int | None
    interarrival: str
    log: Trace
    lifetimes: FitReport
    repairs: FitReport | None
    bootstrap: int
    repair_bootstrap: int
    cluster_size: int | None = None
    cluster: tuple[float, float, float, str] | None = None


def _default_bootstrap(bootstrap: int | None, n: int) -> int:
    return bootstrap if bootstrap is not None else (49 if n <= 5000 else 0)


def _tally(progress: Callable[[int, int], None] | None, total: int) -> Callable[[int], None] | None:
    """An advance-by-``n`` callback that tells ``progress(done, total)``."""
    if progress is None:
        return None
    done = [0]
    progress(0, total)

    def tally(n: int = 1) -> None:
        done[0] += n
        progress(done[0], total)

    return tally


def fit_failure_log(
    trace: str | os.PathLike[str],
    format: str = "csv",
    filters: dict[str, str] | None = None,
    *,
    node_count: int | None = None,
    node_type: str | None = None,
    interarrival: str = "repair-to-failure",
    cluster_size: int | None = None,
    bootstrap: int | None = None,
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
) -> LogFit:
    """Read the failure log ``trace`` and fit its lifetimes and repair times (``cprsim fit``).

    ``format``: ``csv``, ``lanl``, ``titan``, ``philly`` or ``infinitehbd``; ``filters``:
    ``{column: value}`` kept (keys lower case; an unknown column raises InputError listing them);
    ``node_count``: InfiniteHBD's node count; ``node_type``: fit only this node type;
    ``interarrival``: ``"repair-to-failure"`` (up-times) or ``"failure-to-failure"``;
    ``cluster_size``: also the mean time to the first failure of this many fresh nodes (hours);
    ``bootstrap``: parametric-bootstrap draws for the goodness-of-fit p-values (default 49, or 0
    above 5,000 lifetimes); ``seed``: their seed; ``progress(done, total)``: called as the
    bootstrap draws (most of the time a fit takes) are done. No lifetime after the filters raises
    InputError.
    """
    if cluster_size is not None and cluster_size < 1:
        raise InputError(f"cluster_size must be >= 1, got {cluster_size}")
    path = Path(trace)
    flt = dict(filters or {})
    check_filters(format, flt)
    log = read_trace(path, format, flt, node_count)
    t, obs = log.intervals(interarrival, node_type)
    if t.size == 0:
        raise InputError(
            f"{path}: no lifetimes{' of node type ' + node_type if node_type else ''} after the filters"
        )
    b = _default_bootstrap(bootstrap, t.size)
    rt, robs = log.repairs(node_type)
    rb = _default_bootstrap(bootstrap, rt.size)
    total = len(FIT_FAMILIES) * (b + (rb if robs.any() else 0))
    tally = _tally(progress, total)
    rep = fit_all(t, obs, bootstrap=b, seed=seed, what=str(path), progress=tally)
    rrep = (
        fit_all(rt, robs, bootstrap=rb, seed=seed, what=f"{path} (repairs)", progress=tally)
        if robs.any()
        else None
    )
    cl = cluster_mtbf(rep.best, cluster_size, seed=seed) if cluster_size else None
    return LogFit(
        path,
        format,
        flt,
        node_type,
        node_count,
        interarrival,
        log,
        rep,
        rrep,
        b,
        rb,
        cluster_size,
        cl,
    )


def scenario_params(fit: Fit, unit: str = "h") -> dict[str, float | str]:
    """The scenario keys of a fitted distribution: ``family``, ``scale_<unit>`` and ``shape`` (or
    ``sigma`` for a lognormal; neither for an exponential). ``unit``: ``"h"`` (failures: the fit's
    hours) or ``"s"`` (repair times: the scale converted to seconds)."""
    if unit not in ("h", "s"):
        raise InputError(f"unit must be 'h' or 's', got {unit!r}")
    scale = fit.scale_ if unit == "h" else fit.scale_ * 3600.0
    d: dict[str, float | str] = {"family": fit.family, f"scale_{unit}": scale}
    if fit.family == "lognormal":
        d["sigma"] = fit.shape_
    elif fit.family != "exponential":
        d["shape"] = fit.shape_
    return d


def log_fit_dict(fit: LogFit) -> dict[str, Any]:
    """The JSON of ``cprsim fit --report`` (and ``--json``): the log, the filters, the unit
    (``h``), the counts, the ranked fits (``FitReport.as_dict()``), the repairs' and the cluster's
    figures (hours)."""
    rep, cl = fit.lifetimes, fit.cluster
    cluster: dict[str, Any] | None = None
    if cl is not None and fit.cluster_size is not None:
        cluster = {
            "nodes": fit.cluster_size,
            "first_failure_h": cl[0],
            "ci95": [cl[1], cl[2]],
            "method": cl[3],
            "renewal_mtbf_h": rep.best.mean_ / fit.cluster_size,
        }
    return {
        "trace": str(fit.trace),
        "format": fit.format,
        "filters": [f"{k}={v}" for k, v in fit.filters.items()],
        "unit": "h",
        "interarrival": fit.interarrival,
        "counts": fit.log.counts,
        **rep.as_dict(),
        "repairs": None if fit.repairs is None else fit.repairs.as_dict(),
        "cluster": cluster,
    }


def fitted_model_toml(
    fit: LogFit,
    file_name: str,
    as_type: str = "both",
    *,
    cluster_size: int | None = None,
    fitted_on: _dt.date | None = None,
) -> str:
    """The failure-model file of ``fit``: a comment header, ``[provenance]`` (the log's path and
    sha256, the filters, counts, the family ranking, the date, cprsim's version), the best family's
    scenario keys (hours) under ``[failures.<as_type>]`` (``both``: trainer and embedding) and,
    when the log has repairs, their fit (seconds) under ``[lifecycle.repair.auto]``: the machines'
    repair, which a scenario uses only with a ``[lifecycle]`` (not its ``[reschedule]``).

    The best family is the best by AIC with a finite mean (``FitReport.model_fit``): when the
    best by AIC has none, the file gets the next and says why (``model_family``, ``model_note``
    in ``[provenance]``, and its header); the header also gives the written fit's tail notes
    (``FitReport.tail``) when it has any.

    ``file_name``: the name a scenario will use for it (in the header's ``[failures] model = ...``
    line); ``as_type``: one of :data:`MODEL_TYPES`; ``job`` writes ``[failures.job]``: job-level
    interruptions from any of ``cluster_size`` nodes (default: the fit's), a Poisson superposition
    with MTBF = the best family's mean / ``cluster_size`` (hours); ``fitted_on``: the date written
    (default today).
    """
    if as_type not in MODEL_TYPES:
        raise InputError(f"as_type must be one of {', '.join(MODEL_TYPES)}, got {as_type!r}")
    nodes = cluster_size if cluster_size is not None else fit.cluster_size
    if as_type == "job" and nodes is None:
        raise InputError(
            "as_type 'job' needs cluster_size: job-level interruptions come from every node of the job"
        )
    rep, rrep = fit.lifetimes, fit.repairs
    model, why = rep.model_fit()
    rmodel = rrep.model_fit()[0] if rrep is not None else None
    prov = _provenance(fit, fitted_on)
    chosen = f"{model.family}, best by AIC" if why is None else f"{model.family}: see model_note"
    header = [
        f"failure model fitted by `cprsim fit` ({chosen}); use it from a scenario",
        f"with  [failures] model = {short(file_name, 80)!r}",
    ]
    tail = rep.tail(model)
    if why:
        header += [f"not {rep.best.family}, the best by AIC: it has an infinite mean"]
    if tail.notes:
        header += [f"{model.family}'s tail: " + "; ".join(tail.notes)]
    failures: dict[str, Any] = {}
    doc: dict[str, Any] = {"provenance": prov, "failures": failures}
    if as_type == "job" and nodes is not None:
        # N independent renewal processes superpose to about a Poisson process of rate N / mean
        # (Palm-Khintchine): the job is interrupted whenever any of its nodes has such a fault
        header += [
            "[failures.job]: job-level interruptions: any of the cluster's nodes with one of the selected "
            f"causes; {nodes} nodes x 1 / {model.mean_:.6g} h, a Poisson superposition "
            "(Palm-Khintchine)"
        ]
        failures["job"] = {"family": "exponential", "mtbf_h": model.mean_ / nodes}
    else:
        for ty in ("trainer", "embedding") if as_type == "both" else (as_type,):
            failures[ty] = scenario_params(model, "h")
    if rrep is not None and rmodel is not None:
        # the machines' repair times: a lifecycle's repair pipeline, not the job's rescheduling
        doc["lifecycle"] = {"repair": {"auto": scenario_params(rmodel, "s")}}
        header += [
            "[lifecycle.repair.auto]: the log's repair times, for a scenario with a [lifecycle]",
            "(a failed machine's repair); without one a failed node is back after the scenario's",
            "own [reschedule], and this fit is not used",
        ]
    return dumps_toml(doc, "\n".join(header))


def _provenance(fit: LogFit, fitted_on: _dt.date | None) -> dict[str, Any]:
    """The ``[provenance]`` table of ``fit``'s model file: the log, its filters and counts, the
    family rankings and, where the written family is not the best by AIC, which and why."""
    rep, rrep, log = fit.lifetimes, fit.repairs, fit.log
    model, why = rep.model_fit()
    prov: dict[str, Any] = {
        "source": str(fit.trace.resolve()),
        "format": fit.format,
        "sha256": hashlib.sha256(fit.trace.read_bytes()).hexdigest(),
        "filters": [f"{k}={v}" for k, v in fit.filters.items()],
        "node_type": fit.node_type or "all",
        "interarrival": fit.interarrival,
        "n": rep.n,
        "failures": rep.events,
        "censored": rep.censored,
        "family_ranking": [f.family for f in rep.fits],
        "fitted": (fitted_on or _dt.date.today()).isoformat(),
        "cprsim_version": __version__,
    }
    if fit.node_count is not None:
        prov["node_count"] = fit.node_count
    if log.counts.get("never_failed_nodes") is not None:
        prov["never_failed_nodes"] = log.counts["never_failed_nodes"]
    if why:
        prov["model_family"] = model.family
        prov["model_note"] = why
    rmodel, rwhy = rrep.model_fit() if rrep is not None else (None, None)
    if rrep is not None:
        prov["repair_family_ranking"] = [f.family for f in rrep.fits]
        if rwhy and rmodel is not None:
            prov["repair_model_family"] = rmodel.family
            prov["repair_model_note"] = rwhy
    return prov


def write_fitted_model(
    path: str | os.PathLike[str],
    fit: LogFit,
    as_type: str = "both",
    *,
    cluster_size: int | None = None,
    fitted_on: _dt.date | None = None,
) -> Path:
    """Write :func:`fitted_model_toml` (named after ``path``'s file name) to ``path``, atomically.
    Returns the path."""
    p = Path(path)
    text = fitted_model_toml(fit, p.name, as_type, cluster_size=cluster_size, fitted_on=fitted_on)
    return atomic_write_text(p, text)


# -- bad nodes: a two-rate Poisson mixture over per-node failure counts -----------------------------
@dataclass(frozen=True)
class BadNodesFit:
    """The bad-node analysis of one failure log (:func:`fit_bad_nodes`): what was read and how
    (``filters`` by their column keys), and ``report`` (:class:`cprsim.failures.mixture.BadNodeReport`:
    the mixture's estimate, rates per hour, each node's P(bad), bootstrap intervals and test)."""

    trace: Path
    format: str
    filters: dict[str, str]
    node_type: str | None
    report: BadNodeReport


#: the largest node count ``fit_bad_nodes`` takes (``nodes``): its per-node work is Python-level
#: (10^8 took about an hour); 10^6 is the largest cluster cprsim plans for
MAX_NODES = 1_000_000


def fit_bad_nodes(
    trace: str | os.PathLike[str],
    format: str = "csv",
    filters: dict[str, str] | None = None,
    *,
    node_count: int | None = None,
    node_type: str | None = None,
    nodes: int | None = None,
    bootstrap: int = 200,
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
) -> BadNodesFit:
    """Estimate a population of bad nodes in the failure log ``trace`` (``cprsim fit --bad-nodes``):
    a two-rate Poisson mixture over each node's failure count in its observation window.

    ``format``, ``filters``, ``node_count``, ``node_type``: as :func:`fit_failure_log`;
    ``nodes``: the cluster's node count when the log lists only failing nodes (the others enter
    with 0 failures over the log's span); ``bootstrap``: parametric draws for the intervals and the
    test of "no bad nodes" (0: neither); ``seed``: their seed; ``progress(done, total)``: called
    as the bootstrap draws are done.
    """
    from cprsim.errors import ParameterError
    from cprsim.failures.mixture import analyse, node_counts

    if nodes is not None and not (1 <= nodes <= MAX_NODES):
        raise ParameterError(
            "nodes",
            f"a cluster of 1 to {MAX_NODES:,} nodes, got {nodes:,} (each node is a count the "
            "mixture fits)",
        )
    path = Path(trace)
    flt = check_filters(format, dict(filters or {}))
    log = read_trace(path, format, flt, node_count)
    counts = node_counts(log, short(path), nodes=nodes, node_type=node_type)
    tally = _tally(progress, 2 * max(0, bootstrap))
    return BadNodesFit(
        path,
        format,
        flt,
        node_type,
        analyse(counts, bootstrap=bootstrap, seed=seed, progress=tally),
    )


#: the estimates of the mixture: (label, the report's key, the interval's key)
ESTIMATE_ROWS = (
    ("bad fraction π", "bad_fraction", "pi"),
    ("bad multiplier k", "bad_multiplier", "k"),
    ("good rate λ (per h)", "good_rate_per_h", "lam"),
    ("share of failures from bad nodes", "bad_share", "bad_share"),
)
#: a node is counted as likely bad from this posterior probability
LIKELY_BAD = 0.5
#: the model file keeps the mixture only when the test rejects "no bad nodes" at this level
SELECT_P = 0.05
#: why the test is a bootstrap (in the report and the model file)
TEST_NOTE = "the likelihood ratio is not chi-square here: pi = 0 lies on the boundary and k is then undefined"


def bad_node_estimates(rep: BadNodeReport) -> dict[str, float]:
    """The mixture's estimates: bad fraction π, bad multiplier k, good rate λ (per hour), the
    share of failures from bad nodes, and the expected number of bad nodes (π x nodes)."""
    m = rep.estimate
    return {
        "bad_fraction": m.pi,
        "bad_multiplier": m.k,
        "good_rate_per_h": m.lam,
        "bad_share": m.bad_share,
        "expected_bad_nodes": m.pi * rep.n_nodes,
    }


def likely_bad_nodes(rep: BadNodeReport) -> int:
    """How many nodes have P(bad) >= :data:`LIKELY_BAD`."""
    return int(np.sum(rep.posterior >= LIKELY_BAD))


def health(rep: BadNodeReport) -> tuple[dict[str, float], str | None]:
    """The ``[lifecycle.health]`` table the model file gets, and why it is "no bad nodes" (bad
    fraction 0, multiplier 1) when it is: not identified, or the test does not reject "no bad
    nodes" at :data:`SELECT_P`; None when the mixture is kept."""
    if rep.not_identified:
        return {"bad_fraction": 0.0, "bad_multiplier": 1.0}, f"not identified: {rep.not_identified}"
    if rep.bootstrap > 0 and rep.p_value >= SELECT_P:
        return (
            {"bad_fraction": 0.0, "bad_multiplier": 1.0},
            f"the test does not reject 'no bad nodes' at {SELECT_P:g} (p = {rep.p_value:.3g})",
        )
    return {"bad_fraction": rep.estimate.pi, "bad_multiplier": rep.estimate.k}, None


def ci_method(rep: BadNodeReport) -> str:
    """How the intervals were computed, in words."""
    return (
        f"{100 * rep.level:g}% parametric-bootstrap percentiles ({rep.bootstrap} refits of counts drawn from the "
        f"fitted mixture, seed {rep.seed})"
    )


def test_method(rep: BadNodeReport) -> str:
    """How the test of "no bad nodes" was computed, in words."""
    return f"parametric bootstrap, {rep.bootstrap} draws from the one-rate fit, seed {rep.seed}"


def ranked_nodes(rep: BadNodeReport, limit: int | None = None) -> list[dict[str, Any]]:
    """The nodes most likely bad, most likely first: every node with P(bad) >= :data:`LIKELY_BAD`
    and at least the top 10 (``limit``: at most this many). Each: ``node``, ``failures``,
    ``exposure_h`` (hours observed) and ``p_bad`` (None when the mixture is not identified)."""
    c, order = rep.counts, rep.ranked()
    keep = max(10, likely_bad_nodes(rep))
    rows = []
    for i in order[: keep if limit is None else min(keep, limit)]:
        rows.append(
            {
                "node": c.nodes[i],
                "failures": int(c.failures[i]),
                "exposure_h": float(c.exposure_h[i]),
                "p_bad": None if rep.not_identified else float(rep.posterior[i]),
            }
        )
    return rows


def bad_nodes_dict(fit: BadNodesFit) -> dict[str, Any]:
    """The JSON of ``cprsim fit --bad-nodes --json`` (and its ``--report``): the log, the counts,
    the estimates with their intervals, the one-rate model, the test, the health table and the
    ranked nodes (rates per hour, windows in hours)."""
    rep = fit.report
    c = rep.counts
    boot = rep.bootstrap > 0
    table, why = health(rep)
    return {
        "trace": str(fit.trace),
        "format": fit.format,
        "filters": [f"{k}={v}" for k, v in fit.filters.items()],
        "node_type": fit.node_type or "all",
        "unit": "h",
        "model": "two-rate Poisson mixture over per-node failure counts",
        "nodes": rep.n_nodes,
        "unseen_nodes": c.unseen,
        "span_h": c.span_h,
        "dropped_empty_window": c.dropped,
        "failures": int(c.failures.sum()),
        "node_hours": float(c.exposure_h.sum()),
        "identified": rep.not_identified is None,
        "not_identified": rep.not_identified,
        "estimate": bad_node_estimates(rep),
        "lifecycle_keys": dict(LIFECYCLE_KEYS),
        "optimum": {
            "bad_fraction": rep.raw.pi,
            "bad_multiplier": rep.raw.k,
            "good_rate_per_h": rep.raw.lam,
        },
        "log_likelihood": rep.loglik,
        "ci": (
            {
                "level": rep.level,
                "method": ci_method(rep),
                "draws": rep.bootstrap,
                "seed": rep.seed,
                **{key: list(rep.ci[ck]) for _, key, ck in ESTIMATE_ROWS},
            }
            if rep.ci
            else None
        ),
        "one_rate": {"rate_per_h": rep.rate_one, "log_likelihood": rep.loglik_one},
        "test_no_bad_nodes": {
            "lr": rep.lr,
            "p_value": rep.p_value if boot else None,
            "method": f"{test_method(rep)}; {TEST_NOTE}" if boot else None,
        },
        "health": {**table, "no_bad_nodes_because": why},
        "likely_bad_nodes": likely_bad_nodes(rep),
        "ranked_nodes": ranked_nodes(rep),
    }


#: how ``cprsim fit --bad-nodes`` maps onto the lifecycle's keys (printed, in the JSON and in the
#: model file): what it estimates, and what per-node counts cannot tell
LIFECYCLE_KEYS = {
    "lifecycle.health.bad_fraction": "estimated: the share of nodes in the high-rate group",
    "lifecycle.health.bad_multiplier": "estimated: the high rate over the low one",
    "lifecycle.repair.cure_auto_p": (
        "not estimated (0): one count per node cannot tell a bad node its repairs cured from a "
        "good one; the mixture assumes a node keeps its rate over the log, so with cures the two "
        "estimates describe the log's average (a bad node's rate while bad is then higher)"
    ),
    "lifecycle.repair.cure_manual_p": "not estimated (0): as cure_auto_p",
    "lifecycle.repair.false_success_p": (
        "not estimated (0): a quick recurrence after a repair shows as a node's extra failures"
    ),
}
MAPPING_NOTE = (
    "maps onto [lifecycle.health] bad_fraction and bad_multiplier; the cure probabilities "
    "([lifecycle.repair] cure_auto_p, cure_manual_p) are not estimated by per-node counts "
    "(0: a node keeps its rate over the log; with cures, the estimates are the log's average)"
)


def bad_nodes_toml(fit: BadNodesFit, *, fitted_on: _dt.date | None = None) -> str:
    """The bad-node model file: a comment block of provenance (the log and its sha256, counts, the
    estimates with their intervals, the test, the date), then ``[lifecycle.health]``
    (``bad_fraction``, ``bad_multiplier``; "no bad nodes" when :func:`health` says so).
    ``fitted_on``: the date written (default today)."""
    rep = fit.report
    est, c = bad_node_estimates(rep), rep.counts
    sha = hashlib.sha256(fit.trace.read_bytes()).hexdigest()[:16]
    filters = ", ".join(f"{k}={v}" for k, v in fit.filters.items()) or "none"
    lines = [
        "bad-node population fitted by `cprsim fit --bad-nodes` (two-rate Poisson mixture over per-node",
        "failure counts, maximum likelihood)",
        f"source: {short(fit.trace.resolve(), 300)} ({fit.format}), sha256 {sha}",
        f"filters: {short(filters, 200)}; node type: {short(fit.node_type or 'all', 60)}",
        f"nodes: {rep.n_nodes} ({c.unseen} not in the log, from --nodes); failures: {int(c.failures.sum())}; "
        f"node-hours: {c.exposure_h.sum():.6g}",
    ]
    table, why = health(rep)
    if why:
        lines += [f"written as no bad nodes (bad_fraction 0, bad_multiplier 1): {why}"]
        lines += ["the maximum-likelihood mixture:"] if not rep.not_identified else []
    for _, key, ck in ESTIMATE_ROWS[:3]:
        ci = (
            f", {100 * rep.level:g}% CI [{rep.ci[ck][0]:.6g}, {rep.ci[ck][1]:.6g}]"
            if rep.ci
            else ""
        )
        lines.append(f"{key} = {est[key]:.6g}{ci}")
    lines.append(f"intervals: {ci_method(rep)}" if rep.ci else "intervals: not computed")
    p = (
        f"p = {rep.p_value:.3g} ({test_method(rep)};\n{TEST_NOTE})"
        if rep.bootstrap > 0
        else "p not computed"
    )
    lines += [
        *f"test of no bad nodes: likelihood ratio {rep.lr:.6g}, {p}".split("\n"),
        *textwrap.wrap(MAPPING_NOTE, 96),
        f"fitted {(fitted_on or _dt.date.today()).isoformat()}, cprsim {__version__}",
    ]
    return dumps_toml({"lifecycle": {"health": table}}, "\n".join(lines))


def write_bad_nodes_model(
    path: str | os.PathLike[str], fit: BadNodesFit, *, fitted_on: _dt.date | None = None
) -> Path:
    """Write :func:`bad_nodes_toml` to ``path``, atomically. Returns the path."""
    return atomic_write_text(path, bad_nodes_toml(fit, fitted_on=fitted_on))


# -- either analysis ----------------------------------------------------------------------------------
def report_dict(fit: LogFit | BadNodesFit) -> dict[str, Any]:
    """The JSON document of either analysis (:func:`log_fit_dict` or :func:`bad_nodes_dict`)."""
    return bad_nodes_dict(fit) if isinstance(fit, BadNodesFit) else log_fit_dict(fit)


def write_report(path: str | os.PathLike[str], fit: LogFit | BadNodesFit) -> Path:
    """Write :func:`report_dict` as JSON to ``path`` (``cprsim fit --report``; ``cprsim plot fit``
    draws a lifetime report), atomically. Returns the path."""
    return atomic_write_json(path, report_dict(fit))
