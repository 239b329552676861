"""``cprsim fit``: read a failure log, fit lifetime families with censoring, write a model file."""

from __future__ import annotations

import datetime as _dt
import hashlib
import math
from pathlib import Path

import click
import numpy as np

from cprsim import __version__
from cprsim.cli.common import console
from cprsim.errors import InputError
from cprsim.failures.fit import Fit, FitReport, cluster_mtbf, fit_all
from cprsim.failures.traces import INTERARRIVALS, READERS, check_filters, read_trace
from cprsim.io import atomic_write_json, atomic_write_text, dumps_json, dumps_toml, short


def _filters(items: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for it in items:
        k, sep, v = it.partition("=")
        if not sep or not k.strip():
            raise click.BadParameter(f"{it!r}: expected key=value", param_hint="--filter")
        out[k.strip().lower()] = v.strip()
    return out


def _params(f: Fit, unit: str) -> dict[str, float | str]:
    """The scenario keys of a fitted distribution (failures: hours; reschedule: seconds)."""
    scale = f.scale_ if unit == "h" else f.scale_ * 3600.0
    d: dict[str, float | str] = {"family": f.family, f"scale_{unit}": scale}
    if f.family == "lognormal":
        d["sigma"] = f.shape_
    elif f.family != "exponential":
        d["shape"] = f.shape_
    return d


def _ranking(title: str, rep: FitReport):
    """The families ranked by AIC, with their intervals and goodness of fit."""
    from rich.table import Table

    tab = Table(title=title)
    for c in (
        "family",
        "scale (h) [95% CI]",
        "shape [95% CI]",
        "mean (h)",
        "log L",
        "AIC",
        "ΔAIC",
        "BIC",
        "KM dist",
        "p (bootstrap)",
    ):
        tab.add_column(c, justify="left" if c == "family" else "right")
    best = rep.fits[0].AIC_
    for f in rep.fits:
        shape = (
            "-"
            if f.family == "exponential"
            else f"{f.shape_:.3g} [{f.shape_ci_[0]:.3g}, {f.shape_ci_[1]:.3g}]"
        )
        tab.add_row(
            f.family,
            f"{f.scale_:.4g} [{f.scale_ci_[0]:.4g}, {f.scale_ci_[1]:.4g}]",
            shape,
            f"{f.mean_:.4g}",
            f"{f.log_likelihood_:.1f}",
            f"{f.AIC_:.1f}",
            f"{f.AIC_ - best:.1f}",
            f"{f.BIC_:.1f}",
            "-" if math.isnan(f.ks_) else f"{f.ks_:.3f}",
            "-" if math.isnan(f.p_value_) else f"{f.p_value_:.3f}",
        )
    return tab


@click.command("fit")
@click.argument("trace", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(READERS),
    default="csv",
    show_default=True,
    help="Trace format.",
)
@click.option(
    "--filter",
    "filters",
    multiple=True,
    metavar="COLUMN=VALUE",
    help="Keep what matches, on any column of the format (case-insensitive; an unknown column lists "
    "them): csv node/node_type/cause; lanl system, nodenum, purpose, ..., cause; titan batch, cage, "
    "location, ..., cause=dbe|otb; philly id/num_gpus/min_gpus; infinitehbd node/level/class/desc. "
    "cause, level, class, desc and node_type match substrings.",
)
@click.option(
    "--node-count",
    type=click.IntRange(min=1),
    help="InfiniteHBD: nodes in the cluster (default 400).",
)
@click.option("--node-type", help="Fit only this node type of the trace.")
@click.option(
    "--interarrival",
    type=click.Choice(INTERARRIVALS),
    default="repair-to-failure",
    show_default=True,
    help="Lifetimes to fit: up-times from a repair (or the window start) to the next failure, or the "
    "times between consecutive failure starts of a node (the published LANL analysis).",
)
@click.option(
    "--as",
    "as_type",
    type=click.Choice(["embedding", "trainer", "both", "job"]),
    default="both",
    show_default=True,
    help="Which scenario failure process the model file describes; `job`: job-level interruptions "
    "([failures.job]) from the selected causes of --cluster-size nodes (Poisson superposition).",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write a failure-model TOML here (with --bad-nodes: a [lifecycle.health] table).",
)
@click.option(
    "--plot",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the fit figure (PNG/SVG/PDF).",
)
@click.option(
    "--report",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the fits and the Kaplan-Meier curve as JSON (for `cprsim plot fit`); with --bad-nodes, "
    "the --json document.",
)
@click.option(
    "--cluster-size",
    type=click.IntRange(min=1),
    help="Report this many fresh nodes' mean time to the first failure (95% CI) "
    "and their long-run MTBF (node mean / N).",
)
@click.option(
    "--bad-nodes",
    is_flag=True,
    help="Instead of the lifetime families: estimate a population of bad nodes, a two-rate Poisson mixture "
    "over each node's failure count in its observation window (bad fraction, rate multiplier, "
    "each node's probability of being bad, a test of 'no bad nodes'); --out writes "
    "[lifecycle.health].",
)
@click.option(
    "--nodes",
    type=click.IntRange(min=1),
    help="With --bad-nodes: the cluster's node count, when the log lists only failing nodes; the nodes "
    "not in the log enter with 0 failures over the log's span.",
)
@click.option(
    "--bootstrap",
    type=click.IntRange(min=0),
    default=None,
    help="Parametric-bootstrap draws for the goodness-of-fit p-value (default 49; 0 for very large traces); "
    "with --bad-nodes, for the intervals and the test (default 200).",
)
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the ranking (with --bad-nodes, the mixture) as JSON.",
)
def command(
    trace: Path,
    fmt: str,
    filters: tuple[str, ...],
    node_count: int | None,
    node_type: str | None,
    interarrival: str,
    as_type: str,
    out: Path | None,
    plot: Path | None,
    cluster_size: int | None,
    bad_nodes: bool,
    nodes: int | None,
    bootstrap: int | None,
    seed: int,
    as_json: bool,
    report: Path | None,
) -> None:
    """Fit exponential, Weibull, gamma, lognormal and log-logistic to a failure log, with censoring."""
    if bad_nodes or nodes is not None:
        _check_bad_nodes_options(bad_nodes, plot, cluster_size)
        flt = check_filters(fmt, _filters(filters))
        return _bad_nodes(
            trace,
            fmt,
            flt,
            node_count,
            node_type,
            nodes,
            200 if bootstrap is None else bootstrap,
            seed,
            out,
            as_json,
            report,
        )
    if as_type == "job" and out is not None and cluster_size is None:
        raise click.BadParameter(
            "job-level interruptions come from every node of the job: give --cluster-size",
            param_hint="--as job",
        )
    flt = _filters(filters)
    check_filters(fmt, flt)
    tr = read_trace(trace, fmt, flt, node_count)
    t, obs = tr.intervals(interarrival, node_type)
    if t.size == 0:
        raise InputError(
            f"{trace}: no lifetimes{' of node type ' + node_type if node_type else ''} after the filters"
        )
    B = bootstrap if bootstrap is not None else (49 if t.size <= 5000 else 0)
    rep = fit_all(t, obs, bootstrap=B, seed=seed, what=str(trace))
    rt, robs = tr.repairs(node_type)
    RB = bootstrap if bootstrap is not None else (49 if rt.size <= 5000 else 0)
    rrep = (
        fit_all(rt, robs, bootstrap=RB, seed=seed, what=f"{trace} (repairs)")
        if robs.any()
        else None
    )
    cl = cluster_mtbf(rep.best, cluster_size, seed=seed) if cluster_size else None

    doc = {
        "trace": str(trace),
        "format": fmt,
        "filters": [f"{k}={v}" for k, v in flt.items()],
        "unit": "h",
        "interarrival": interarrival,
        "counts": tr.counts,
        **rep.as_dict(),
        "repairs": None if rrep is None else rrep.as_dict(),
        "cluster": None
        if cl is None
        else {
            "nodes": cluster_size,
            "first_failure_h": cl[0],
            "ci95": [cl[1], cl[2]],
            "method": cl[3],
            "renewal_mtbf_h": rep.best.mean_ / cluster_size,
        },
    }
    if report is not None:
        atomic_write_json(report, doc)
    if as_json:
        click.echo(dumps_json(doc), nl=False)
    else:
        con = console()
        what = f"{trace.name} ({fmt}{', ' + ', '.join(f'{k}={v}' for k, v in flt.items()) if flt else ''})"
        life = "lifetimes" if interarrival == "repair-to-failure" else "failure-to-failure times"
        con.print(
            _ranking(
                f"{what}: {rep.n} {life}, {rep.events} failures, {rep.censored} censored "
                f"({100 * rep.censored / rep.n:.0f}%)",
                rep,
            )
        )
        if B == 0:
            con.print("goodness of fit: bootstrap skipped (--bootstrap N to compute p-values)")
        never = tr.counts.get("never_failed_nodes")
        if never is not None:
            con.print(
                f"nodes: {len(tr.nodes)}, of which {never} never failed (censored over their whole window)"
            )
        if tr.counts.get("never_failed_unknown"):
            con.print(
                f"left out: {tr.counts['never_failed_unknown']} never-failed nodes whose filtered column the "
                "log does not give (it varies within their system)"
            )
        if tr.counts.get("systems_without_node_count"):
            con.print(
                f"no node count in the log for system(s) {', '.join(tr.counts['systems_without_node_count'])}: "
                "their nodes that never failed are missing"
            )
        if rrep is not None:
            rb = rrep.best
            con.print(
                _ranking(
                    f"repairs: {rrep.n} ({rrep.events} ended, {rrep.censored} censored), best {rb.family} "
                    f"mean {rb.mean_:.3g} h",
                    rrep,
                )
            )
            if RB == 0:
                con.print(
                    "repairs' goodness of fit: bootstrap skipped (--bootstrap N to compute p-values)"
                )
        if cl is not None:
            con.print(
                f"cluster of {cluster_size} fresh nodes ({rep.best.family}): mean time to the first failure "
                f"{cl[0]:.4g} h, 95% CI [{cl[1]:.4g}, {cl[2]:.4g}] ({cl[3]}); long-run MTBF of the cluster "
                f"(renewal, mean / N) {rep.best.mean_ / cluster_size:.4g} h"
            )
    if out is not None:
        data = trace.read_bytes()
        prov = {
            "source": str(trace.resolve()),
            "format": fmt,
            "sha256": hashlib.sha256(data).hexdigest(),
            "filters": [f"{k}={v}" for k, v in flt.items()],
            "node_type": node_type or "all",
            "interarrival": interarrival,
            "n": rep.n,
            "failures": rep.events,
            "censored": rep.censored,
            "family_ranking": [f.family for f in rep.fits],
            "fitted": _dt.date.today().isoformat(),
            "cprsim_version": __version__,
        }
        if node_count is not None:
            prov["node_count"] = node_count
        if tr.counts.get("never_failed_nodes") is not None:
            prov["never_failed_nodes"] = tr.counts["never_failed_nodes"]
        if rrep is not None:
            prov["repair_family_ranking"] = [f.family for f in rrep.fits]
        header = [
            f"failure model fitted by `cprsim fit` ({rep.best.family}, best by AIC); use it from a scenario",
            f"with  [failures] model = {short(out.name, 80)!r}",
        ]
        doc: dict = {"provenance": prov, "failures": {}}
        if as_type == "job":
            # N independent renewal processes superpose to about a Poisson process of rate N / mean
            # (Palm-Khintchine): the job is interrupted whenever any of its nodes has such a fault
            header += [
                "[failures.job]: job-level interruptions: any of the cluster's nodes with one of the selected "
                f"causes; {cluster_size} nodes x 1 / {rep.best.mean_:.6g} h, a Poisson superposition "
                "(Palm-Khintchine)"
            ]
            doc["failures"]["job"] = {
                "family": "exponential",
                "mtbf_h": rep.best.mean_ / cluster_size,
            }
        else:
            types = ("trainer", "embedding") if as_type == "both" else (as_type,)
            for ty in types:
                doc["failures"][ty] = _params(rep.best, "h")
        if rrep is not None:
            doc["reschedule"] = _params(rrep.best, "s")
        atomic_write_text(out, dumps_toml(doc, "\n".join(header)))
    if plot is not None:
        from cprsim.plots import figure_format, save_figure
        from cprsim.plots.fit import plot_fit

        figure_format(plot)
        save_figure(plot_fit(rep, title=f"{trace.name} ({fmt})"), plot)


# -- --bad-nodes: a two-rate Poisson mixture over per-node failure counts ------------------------------
def _check_bad_nodes_options(bad_nodes: bool, plot: Path | None, cluster_size: int | None) -> None:
    if not bad_nodes:
        raise click.UsageError(
            "--nodes applies with --bad-nodes only (InfiniteHBD's node count is --node-count)"
        )
    for name, value in (("--plot", plot), ("--cluster-size", cluster_size)):
        if value is not None:
            raise click.UsageError(f"{name} does not apply with --bad-nodes")


def _bad_nodes(
    trace: Path,
    fmt: str,
    flt: dict[str, str],
    node_count: int | None,
    node_type: str | None,
    nodes: int | None,
    bootstrap: int,
    seed: int,
    out: Path | None,
    as_json: bool,
    report: Path | None,
) -> None:
    """``cprsim fit --bad-nodes``: fit, print (a table or JSON), and write the JSON report and model file."""
    from cprsim.failures.mixture import analyse, node_counts

    tr = read_trace(trace, fmt, flt, node_count)
    counts = node_counts(tr, short(trace), nodes=nodes, node_type=node_type)
    rep = analyse(counts, bootstrap=bootstrap, seed=seed)
    doc = _bad_nodes_doc(trace, fmt, flt, node_type, rep)
    if report is not None:
        atomic_write_json(report, doc)
    if as_json:
        click.echo(dumps_json(doc), nl=False)
    else:
        _print_bad_nodes(trace, rep)
    if out is not None:
        atomic_write_text(out, _bad_nodes_toml(trace, fmt, flt, node_type, rep))


#: the rows of the estimate table: (label, the report's key, the interval's key)
_BAD_ROWS = (
    ("bad fraction π", "bad_fraction", "pi"),
    ("bad multiplier k", "bad_multiplier", "k"),
    ("good rate λ (per h)", "good_rate_per_h", "lam"),
    ("share of failures from bad nodes", "bad_share", "bad_share"),
)
_LIKELY = 0.5  #: a node is listed as likely bad from this posterior probability


def _estimates(rep) -> dict[str, float]:
    m = rep.estimate
    return {
        "bad_fraction": m.pi,
        "bad_multiplier": m.k,
        "good_rate_per_h": m.lam,
        "bad_share": m.bad_share,
        "expected_bad_nodes": m.pi * rep.n_nodes,
    }


#: the model file keeps the mixture only when the test rejects "no bad nodes" at this level
_SELECT_P = 0.05


def _health(rep) -> tuple[dict[str, float], str | None]:
    """What ``--out`` writes to ``[lifecycle.health]``, and why it is "no bad nodes" when it is."""
    if rep.not_identified:
        return {"bad_fraction": 0.0, "bad_multiplier": 1.0}, f"not identified: {rep.not_identified}"
    if rep.bootstrap > 0 and rep.p_value >= _SELECT_P:
        return (
            {"bad_fraction": 0.0, "bad_multiplier": 1.0},
            f"the test does not reject 'no bad nodes' at {_SELECT_P:g} (p = {rep.p_value:.3g})",
        )
    return {"bad_fraction": rep.estimate.pi, "bad_multiplier": rep.estimate.k}, None


def _ci_method(rep) -> str:
    return (
        f"{100 * rep.level:g}% parametric-bootstrap percentiles ({rep.bootstrap} refits of counts drawn from the "
        f"fitted mixture, seed {rep.seed})"
    )


def _test_method(rep) -> str:
    return f"parametric bootstrap, {rep.bootstrap} draws from the one-rate fit, seed {rep.seed}"


#: why the test is a bootstrap (in the report and the model file)
_TEST_NOTE = "the likelihood ratio is not chi-square here: pi = 0 lies on the boundary and k is then undefined"


def _node_rows(rep, limit: int | None = None) -> list[dict]:
    """The nodes most likely bad: every node with P(bad) >= 0.5, and at least the top 10 (``limit``: at most)."""
    c, order = rep.counts, rep.ranked()
    keep = max(10, int(np.sum(rep.posterior >= _LIKELY)))
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


def _bad_nodes_doc(trace: Path, fmt: str, flt: dict[str, str], node_type: str | None, rep) -> dict:
    c = rep.counts
    boot = rep.bootstrap > 0
    return {
        "trace": str(trace),
        "format": fmt,
        "filters": [f"{k}={v}" for k, v in flt.items()],
        "node_type": node_type or "all",
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
        "estimate": _estimates(rep),
        "optimum": {
            "bad_fraction": rep.raw.pi,
            "bad_multiplier": rep.raw.k,
            "good_rate_per_h": rep.raw.lam,
        },
        "log_likelihood": rep.loglik,
        "ci": (
            {
                "level": rep.level,
                "method": _ci_method(rep),
                "draws": rep.bootstrap,
                "seed": rep.seed,
                **{key: list(rep.ci[ck]) for _, key, ck in _BAD_ROWS},
            }
            if rep.ci
            else None
        ),
        "one_rate": {"rate_per_h": rep.rate_one, "log_likelihood": rep.loglik_one},
        "test_no_bad_nodes": {
            "lr": rep.lr,
            "p_value": rep.p_value if boot else None,
            "method": f"{_test_method(rep)}; {_TEST_NOTE}" if boot else None,
        },
        "health": {**_health(rep)[0], "no_bad_nodes_because": _health(rep)[1]},
        "likely_bad_nodes": int(np.sum(rep.posterior >= _LIKELY)),
        "ranked_nodes": _node_rows(rep),
    }


def _print_bad_nodes(trace: Path, rep) -> None:
    from rich.markup import escape

    con = console()
    c = rep.counts
    unseen = (
        f", {c.unseen} of them not in the log (0 failures over {c.span_h:.6g} h)"
        if c.unseen
        else ""
    )
    con.print(
        f"{escape(short(trace.name, 80))}: {rep.n_nodes} nodes{unseen}, {int(c.failures.sum())} failures in "
        f"{c.exposure_h.sum():.6g} node-hours; one rate: {rep.rate_one:.4g} per h"
    )
    if c.dropped:
        con.print(f"left out: {c.dropped} nodes with an empty observation window")
    if rep.not_identified:
        con.print(f"bad nodes not identified: {rep.not_identified}")
    else:
        con.print(_bad_table(rep))
        con.print(
            f"intervals: {_ci_method(rep)}" if rep.ci else "intervals: not computed (--bootstrap 0)"
        )
    if rep.bootstrap > 0:
        con.print(
            f"test of no bad nodes: likelihood ratio {rep.lr:.4g}, p = {rep.p_value:.3g} ({_test_method(rep)})"
        )
        if rep.p_value >= _SELECT_P and not rep.not_identified:
            con.print(
                f"the test does not reject 'no bad nodes' at {_SELECT_P:g}: the estimates above are no evidence "
                "of bad nodes (--out writes bad_fraction 0)"
            )
    else:
        con.print(
            f"test of no bad nodes: likelihood ratio {rep.lr:.4g}, p not computed (--bootstrap 0)"
        )
    likely = int(np.sum(rep.posterior >= _LIKELY))
    more = " (--json lists them all)" if likely > 10 else ""
    top = min(10, rep.n_nodes)
    con.print(
        f"the {top} nodes with the most failures (no P(bad): not identified):"
        if rep.not_identified
        else f"nodes most likely bad: {likely} with P(bad) ≥ {_LIKELY}{more}; the top {top}:"
    )
    con.print(_nodes_table(rep))


def _bad_table(rep):
    from rich.table import Table

    est = _estimates(rep)
    tab = Table(title=f"bad nodes: two-rate Poisson mixture, {rep.n_nodes} nodes")
    for col in ("quantity", "estimate", f"{100 * rep.level:g}% CI"):
        tab.add_column(col, justify="left" if col == "quantity" else "right")
    for label, key, ck in _BAD_ROWS:
        ci = f"[{rep.ci[ck][0]:.4g}, {rep.ci[ck][1]:.4g}]" if rep.ci else "-"
        tab.add_row(label, f"{est[key]:.4g}", ci)
    tab.add_row("bad nodes expected (π × nodes)", f"{est['expected_bad_nodes']:.4g}", "-")
    return tab


def _nodes_table(rep):
    from rich.markup import escape
    from rich.table import Table

    tab = Table()
    for col in ("node", "failures", "exposure (h)", "failures per 1000 h", "P(bad)"):
        tab.add_column(col, justify="left" if col == "node" else "right")
    for r in _node_rows(rep, limit=10):
        tab.add_row(
            escape(short(r["node"], 40)),
            str(r["failures"]),
            f"{r['exposure_h']:.6g}",
            f"{1000 * r['failures'] / r['exposure_h']:.3g}",
            "-" if r["p_bad"] is None else f"{r['p_bad']:.3f}",
        )
    return tab


def _bad_nodes_toml(trace: Path, fmt: str, flt: dict[str, str], node_type: str | None, rep) -> str:
    """The model file: a comment block of provenance, then ``[lifecycle.health]``."""
    est, c = _estimates(rep), rep.counts
    sha = hashlib.sha256(trace.read_bytes()).hexdigest()[:16]
    lines = [
        "bad-node population fitted by `cprsim fit --bad-nodes` (two-rate Poisson mixture over per-node",
        "failure counts, maximum likelihood)",
        f"source: {short(trace.resolve(), 300)} ({fmt}), sha256 {sha}",
        f"filters: {short(', '.join(f'{k}={v}' for k, v in flt.items()) or 'none', 200)}; "
        f"node type: {short(node_type or 'all', 60)}",
        f"nodes: {rep.n_nodes} ({c.unseen} not in the log, from --nodes); failures: {int(c.failures.sum())}; "
        f"node-hours: {c.exposure_h.sum():.6g}",
    ]
    health, why = _health(rep)
    if why:
        lines += [f"written as no bad nodes (bad_fraction 0, bad_multiplier 1): {why}"]
        lines += ["the maximum-likelihood mixture:"] if not rep.not_identified else []
    for _, key, ck in _BAD_ROWS[:3]:
        ci = (
            f", {100 * rep.level:g}% CI [{rep.ci[ck][0]:.6g}, {rep.ci[ck][1]:.6g}]"
            if rep.ci
            else ""
        )
        lines.append(f"{key} = {est[key]:.6g}{ci}")
    lines.append(f"intervals: {_ci_method(rep)}" if rep.ci else "intervals: not computed")
    p = (
        f"p = {rep.p_value:.3g} ({_test_method(rep)};\n{_TEST_NOTE})"
        if rep.bootstrap > 0
        else "p not computed"
    )
    lines += [
        *f"test of no bad nodes: likelihood ratio {rep.lr:.6g}, {p}".split("\n"),
        f"fitted {_dt.date.today().isoformat()}, cprsim {__version__}",
    ]
    return dumps_toml({"lifecycle": {"health": health}}, "\n".join(lines))
