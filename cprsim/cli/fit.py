"""``cprsim fit``: read a failure log, fit lifetime families with censoring, write a model file.

The fits and the files are :mod:`cprsim.failures.modelfile`'s; this module parses the options and
prints the tables."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from cprsim.cli.common import console
from cprsim.cli.progress import Progress, outputs_at_end, writing
from cprsim.failures.fit import FitReport
from cprsim.failures.modelfile import (
    ESTIMATE_ROWS,
    LIKELY_BAD,
    MAPPING_NOTE,
    SELECT_P,
    BadNodesFit,
    LogFit,
    bad_node_estimates,
    ci_method,
    fit_bad_nodes,
    fit_failure_log,
    likely_bad_nodes,
    ranked_nodes,
    report_dict,
    test_method,
    write_bad_nodes_model,
    write_fitted_model,
    write_report,
)
from cprsim.failures.traces import INTERARRIVALS, READERS
from cprsim.io import dumps_json, short

if TYPE_CHECKING:  # pragma: no cover
    from cprsim.failures.mixture import BadNodeReport


def _filters(items: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for it in items:
        k, sep, v = it.partition("=")
        if not sep or not k.strip():
            raise click.BadParameter(f"{it!r}: expected key=value", param_hint="--filter")
        out[k.strip().lower()] = v.strip()
    return out


def _ranking(title: str, rep: FitReport):
    """The families ranked by AIC, with their intervals and goodness of fit."""
    from rich import box
    from rich.table import Table

    # log L and BIC are in --report's JSON; AIC and ΔAIC rank the families
    tab = Table(
        title=title, box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True
    )
    for c in (
        "family",
        "scale (h) [95% CI]",
        "shape [95% CI]",
        "mean (h)",
        "AIC",
        "ΔAIC",
        "KM dist",
        "p (boot.)",
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
            f"{f.AIC_:.1f}",
            f"{f.AIC_ - best:.1f}",
            "-" if math.isnan(f.ks_) else f"{f.ks_:.3f}",
            "-" if math.isnan(f.p_value_) else f"{f.p_value_:.3f}",
        )
    return tab


@click.command("fit")
@click.argument("trace", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--format",
    "format",  # the library's parameter
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
    format: str,
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
        _bad_nodes(
            trace,
            format,
            filters,
            node_count,
            node_type,
            nodes,
            bootstrap,
            seed,
            as_json,
            out,
            report,
        )
        return
    if as_type == "job" and out is not None and cluster_size is None:
        raise click.BadParameter(
            "job-level interruptions come from every node of the job: give --cluster-size",
            param_hint="--as job",
        )
    outputs_at_end()
    with Progress(None, f"fitting {trace.name}", "bootstrap draws") as bar:
        fit = fit_failure_log(
            trace,
            format,
            _filters(filters),
            node_count=node_count,
            node_type=node_type,
            interarrival=interarrival,
            cluster_size=cluster_size,
            bootstrap=bootstrap,
            seed=seed,
            progress=bar.update,
        )
    _emit(
        fit, report, as_json, _print_fit, out, lambda path: write_fitted_model(path, fit, as_type)
    )
    if plot is not None:
        _write_plot(fit, plot, f"{trace.name} ({format})")


def _write_plot(fit: LogFit, plot: Path, title: str) -> None:
    """--plot: the lifetimes' Kaplan-Meier curve against the fitted families."""
    from cprsim.plots import figure_format, save_figure
    from cprsim.plots.fit import plot_fit

    figure_format(plot)
    fig = plot_fit(fit.lifetimes, title=title)
    with writing():
        save_figure(fig, plot)


def _print_fit(fit: LogFit) -> None:
    """The ranking tables of the lifetimes and the repairs, and what the log says about its nodes."""
    con = console()
    rep, rrep, tr, flt = fit.lifetimes, fit.repairs, fit.log, fit.filters
    what = f"{fit.trace.name} ({fit.format}{', ' + ', '.join(f'{k}={v}' for k, v in flt.items()) if flt else ''})"
    life = "lifetimes" if fit.interarrival == "repair-to-failure" else "failure-to-failure times"
    con.print(
        _ranking(
            f"{what}: {rep.n} {life}, {rep.events} failures, {rep.censored} censored "
            f"({100 * rep.censored / rep.n:.0f}%)",
            rep,
        )
    )
    _print_tails(rep, "lifetimes")
    if fit.bootstrap == 0:
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
        _print_tails(rrep, "repairs")
        if fit.repair_bootstrap == 0:
            con.print(
                "repairs' goodness of fit: bootstrap skipped (--bootstrap N to compute p-values)"
            )
    cl, nodes = fit.cluster, fit.cluster_size
    if cl is not None and nodes is not None:
        con.print(
            f"cluster of {nodes} fresh nodes ({rep.best.family}): mean time to the first failure "
            f"{cl[0]:.4g} h, 95% CI [{cl[1]:.4g}, {cl[2]:.4g}] ({cl[3]}); long-run MTBF of the cluster "
            f"(renewal, mean / N) {rep.best.mean_ / nodes:.4g} h"
        )


def _print_tails(rep: FitReport, what: str) -> None:
    """The heavy-tailed fits (infinite mean or variance, a mean many times the exponential's), the
    best fit when its mean is mostly beyond the data, and the fit --out writes when it is not the
    best."""
    from rich.markup import escape

    con = console()
    rows = []
    for f in rep.fits:
        tc = rep.tail(f)
        best = f is rep.best
        if tc.notes and (tc.heavy or best):
            rows.append(f"  {f.family}{' (best)' if best else ''}: {'; '.join(tc.notes)}")
    if rows:
        con.print(
            escape(
                f"{what}: heavy tails and extrapolated means (exponential mean "
                f"{rep.exponential_mean:.4g} h; longest in the log {rep.t_max:.4g} h):"
            )
        )
        for r in rows:
            con.print(escape(r))
        if rep.tail(rep.best).heavy:
            con.print(
                f"{what}: the best fit's mean rests on its tail beyond the log: weigh the "
                "lighter-tailed fits, and prefer quantiles to the mean"
            )
    model, why = rep.model_fit()
    if why:
        con.print(escape(f"{what}: --out writes {model.family}: {why}"))


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
    format: str,
    filters: tuple[str, ...],
    node_count: int | None,
    node_type: str | None,
    nodes: int | None,
    bootstrap: int | None,
    seed: int,
    as_json: bool,
    out: Path | None,
    report: Path | None,
) -> None:
    """--bad-nodes: fit the mixture with progress, then print it and write --report and --out."""
    outputs_at_end()
    with Progress(None, f"fitting bad nodes of {trace.name}", "bootstrap draws") as bar:
        bad = fit_bad_nodes(
            trace,
            format,
            _filters(filters),
            node_count=node_count,
            node_type=node_type,
            nodes=nodes,
            bootstrap=200 if bootstrap is None else bootstrap,
            seed=seed,
            progress=bar.update,
        )
    _emit(
        bad, report, as_json, _print_bad_nodes, out, lambda path: write_bad_nodes_model(path, bad)
    )


def _emit(
    fit: Any,
    report: Path | None,
    as_json: bool,
    show: Callable[[Any], None],
    out: Path | None,
    write_model: Callable[[Path], object],
) -> None:
    """A fit's outputs, in order: --report, then the JSON or the table, then the --out model."""
    if report is not None:
        with writing():
            write_report(report, fit)
    if as_json:
        click.echo(dumps_json(report_dict(fit)), nl=False)
    else:
        show(fit)
    if out is not None:
        with writing():
            write_model(out)


def _print_bad_nodes(fit: BadNodesFit) -> None:
    from rich.markup import escape

    con = console()
    rep = fit.report
    c = rep.counts
    unseen = (
        f", {c.unseen} of them not in the log (0 failures over {c.span_h:.6g} h)"
        if c.unseen
        else ""
    )
    con.print(
        f"{escape(short(fit.trace.name, 80))}: {rep.n_nodes} nodes{unseen}, {int(c.failures.sum())} failures in "
        f"{c.exposure_h.sum():.6g} node-hours; one rate: {rep.rate_one:.4g} per h"
    )
    if c.dropped:
        con.print(f"left out: {c.dropped} nodes with an empty observation window")
    if rep.not_identified:
        con.print(f"bad nodes not identified: {rep.not_identified}")
    else:
        con.print(_bad_table(rep))
        con.print(
            f"intervals: {ci_method(rep)}" if rep.ci else "intervals: not computed (--bootstrap 0)"
        )
    if rep.bootstrap > 0:
        con.print(
            f"test of no bad nodes: likelihood ratio {rep.lr:.4g}, p = {rep.p_value:.3g} ({test_method(rep)})"
        )
        if rep.p_value >= SELECT_P and not rep.not_identified:
            con.print(
                f"the test does not reject 'no bad nodes' at {SELECT_P:g}: the estimates above are no evidence "
                "of bad nodes (--out writes bad_fraction 0)"
            )
    else:
        con.print(
            f"test of no bad nodes: likelihood ratio {rep.lr:.4g}, p not computed (--bootstrap 0)"
        )
    con.print(escape(f"{MAPPING_NOTE} (--out writes them)"))
    likely = likely_bad_nodes(rep)
    more = " (--json lists them all)" if likely > 10 else ""
    top = min(10, rep.n_nodes)
    con.print(
        f"the {top} nodes with the most failures (no P(bad): not identified):"
        if rep.not_identified
        else f"nodes most likely bad: {likely} with P(bad) ≥ {LIKELY_BAD}{more}; the top {top}:"
    )
    con.print(_nodes_table(rep))


def _bad_table(rep: BadNodeReport):
    from rich.table import Table

    est = bad_node_estimates(rep)
    tab = Table(title=f"bad nodes: two-rate Poisson mixture, {rep.n_nodes} nodes")
    for col in ("quantity", "estimate", f"{100 * rep.level:g}% CI"):
        tab.add_column(col, justify="left" if col == "quantity" else "right")
    for label, key, ck in ESTIMATE_ROWS:
        ci = f"[{rep.ci[ck][0]:.4g}, {rep.ci[ck][1]:.4g}]" if rep.ci else "-"
        tab.add_row(label, f"{est[key]:.4g}", ci)
    tab.add_row("bad nodes expected (π × nodes)", f"{est['expected_bad_nodes']:.4g}", "-")
    return tab


def _nodes_table(rep: BadNodeReport):
    from rich.markup import escape
    from rich.table import Table

    tab = Table()
    for col in ("node", "failures", "exposure (h)", "failures per 1000 h", "P(bad)"):
        tab.add_column(col, justify="left" if col == "node" else "right")
    for r in ranked_nodes(rep, limit=10):
        tab.add_row(
            escape(short(r["node"], 40)),
            str(r["failures"]),
            f"{r['exposure_h']:.6g}",
            f"{1000 * r['failures'] / r['exposure_h']:.3g}",
            "-" if r["p_bad"] is None else f"{r['p_bad']:.3f}",
        )
    return tab
