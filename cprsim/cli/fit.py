"""``cprsim fit``: read a failure log, fit lifetime families with censoring, write a model file."""

from __future__ import annotations

import datetime as _dt
import hashlib
import math
from pathlib import Path

import click

from cprsim.cli.common import console

from cprsim import __version__
from cprsim.errors import InputError
from cprsim.failures.fit import FIT_FAMILIES, Fit, FitReport, cluster_mtbf, fit_all
from cprsim.failures.traces import INTERARRIVALS, READERS, check_filters, read_trace
from cprsim.io import atomic_write_json, atomic_write_text, dumps_json, short


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


def _toml_table(name: str, d: dict) -> str:
    from cprsim.io import toml_scalar

    lines = [f"[{name}]"] + [f"{k} = {toml_scalar(v)}" for k, v in d.items()]
    return "\n".join(lines) + "\n"


def _ranking(title: str, rep: FitReport):  # noqa: ANN202 - a rich Table
    """The families ranked by AIC, with their intervals and goodness of fit."""
    from rich.table import Table

    tab = Table(title=title)
    for c in ("family", "scale (h) [95% CI]", "shape [95% CI]", "mean (h)", "log L", "AIC", "ΔAIC", "BIC",
              "KM dist", "p (bootstrap)"):
        tab.add_column(c, justify="left" if c == "family" else "right")
    best = rep.fits[0].AIC_
    for f in rep.fits:
        shape = "-" if f.family == "exponential" else f"{f.shape_:.3g} [{f.shape_ci_[0]:.3g}, {f.shape_ci_[1]:.3g}]"
        tab.add_row(f.family, f"{f.scale_:.4g} [{f.scale_ci_[0]:.4g}, {f.scale_ci_[1]:.4g}]", shape,
                    f"{f.mean_:.4g}", f"{f.log_likelihood_:.1f}", f"{f.AIC_:.1f}", f"{f.AIC_ - best:.1f}",
                    f"{f.BIC_:.1f}", "-" if math.isnan(f.ks_) else f"{f.ks_:.3f}",
                    "-" if math.isnan(f.p_value_) else f"{f.p_value_:.3f}")
    return tab


@click.command("fit")
@click.argument("trace", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(READERS), default="csv", show_default=True, help="Trace format.")
@click.option("--filter", "filters", multiple=True, metavar="COLUMN=VALUE",
              help="Keep what matches, on any column of the format (case-insensitive; an unknown column lists "
                   "them): csv node/node_type/cause; lanl system, nodenum, purpose, ..., cause; titan batch, cage, "
                   "location, ..., cause=dbe|otb; philly id/num_gpus/min_gpus; infinitehbd node/level/class/desc. "
                   "cause, level, class, desc and node_type match substrings.")
@click.option("--node-count", type=click.IntRange(min=1), help="InfiniteHBD: nodes in the cluster (default 400).")
@click.option("--node-type", help="Fit only this node type of the trace.")
@click.option("--interarrival", type=click.Choice(INTERARRIVALS), default="repair-to-failure", show_default=True,
              help="Lifetimes to fit: up-times from a repair (or the window start) to the next failure, or the "
                   "times between consecutive failure starts of a node (the published LANL analysis).")
@click.option("--as", "as_type", type=click.Choice(["embedding", "trainer", "both", "job"]), default="both",
              show_default=True,
              help="Which scenario failure process the model file describes; `job`: job-level interruptions "
                   "([failures.job]) from the selected causes of --cluster-size nodes (Poisson superposition).")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="Write a failure-model TOML here.")
@click.option("--plot", type=click.Path(dir_okay=False, path_type=Path), help="Write the fit figure (PNG/SVG/PDF).")
@click.option("--report", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the fits and the Kaplan-Meier curve as JSON (for `cprsim plot fit`).")
@click.option("--cluster-size", type=click.IntRange(min=1), help="Report this many fresh nodes' mean time to the first failure (95% CI) "
                   "and their long-run MTBF (node mean / N).")
@click.option("--bootstrap", type=click.IntRange(min=0), default=None,
              help="Parametric-bootstrap draws for the goodness-of-fit p-value (default 49; 0 for very large traces).")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the ranking as JSON.")
def command(trace: Path, fmt: str, filters: tuple[str, ...], node_count: int | None, node_type: str | None,
            interarrival: str, as_type: str, out: Path | None, plot: Path | None, cluster_size: int | None,
            bootstrap: int | None, seed: int, as_json: bool, report: Path | None) -> None:
    """Fit exponential, Weibull, gamma, lognormal and log-logistic to a failure log, with censoring."""
    if as_type == "job" and out is not None and cluster_size is None:
        raise click.BadParameter("job-level interruptions come from every node of the job: give --cluster-size",
                                 param_hint="--as job")
    flt = _filters(filters)
    check_filters(fmt, flt)
    tr = read_trace(trace, fmt, flt, node_count)
    t, obs = tr.intervals(interarrival, node_type)
    if t.size == 0:
        raise InputError(f"{trace}: no lifetimes{' of node type ' + node_type if node_type else ''} after the filters")
    B = bootstrap if bootstrap is not None else (49 if t.size <= 5000 else 0)
    rep = fit_all(t, obs, bootstrap=B, seed=seed, what=str(trace))
    rt, robs = tr.repairs(node_type)
    RB = bootstrap if bootstrap is not None else (49 if rt.size <= 5000 else 0)
    rrep = fit_all(rt, robs, bootstrap=RB, seed=seed, what=f"{trace} (repairs)") if robs.any() else None
    cl = cluster_mtbf(rep.best, cluster_size, seed=seed) if cluster_size else None

    doc = {"trace": str(trace), "format": fmt, "filters": [f"{k}={v}" for k, v in flt.items()], "unit": "h",
           "interarrival": interarrival, "counts": tr.counts, **rep.as_dict(),
           "repairs": None if rrep is None else rrep.as_dict(),
           "cluster": None if cl is None else {
               "nodes": cluster_size, "first_failure_h": cl[0], "ci95": [cl[1], cl[2]], "method": cl[3],
               "renewal_mtbf_h": rep.best.mean_ / cluster_size}}
    if report is not None:
        atomic_write_json(report, doc)
    if as_json:
        click.echo(dumps_json(doc), nl=False)
    else:
        con = console()
        what = f"{trace.name} ({fmt}{', ' + ', '.join(f'{k}={v}' for k, v in flt.items()) if flt else ''})"
        life = "lifetimes" if interarrival == "repair-to-failure" else "failure-to-failure times"
        con.print(_ranking(f"{what}: {rep.n} {life}, {rep.events} failures, {rep.censored} censored "
                           f"({100 * rep.censored / rep.n:.0f}%)", rep))
        if B == 0:
            con.print("goodness of fit: bootstrap skipped (--bootstrap N to compute p-values)")
        never = tr.counts.get("never_failed_nodes")
        if never is not None:
            con.print(f"nodes: {len(tr.nodes)}, of which {never} never failed (censored over their whole window)")
        if tr.counts.get("never_failed_unknown"):
            con.print(f"left out: {tr.counts['never_failed_unknown']} never-failed nodes whose filtered column the "
                      "log does not give (it varies within their system)")
        if tr.counts.get("systems_without_node_count"):
            con.print(f"no node count in the log for system(s) {', '.join(tr.counts['systems_without_node_count'])}: "
                      "their nodes that never failed are missing")
        if rrep is not None:
            rb = rrep.best
            con.print(_ranking(f"repairs: {rrep.n} ({rrep.events} ended, {rrep.censored} censored), best {rb.family} "
                               f"mean {rb.mean_:.3g} h", rrep))
            if RB == 0:
                con.print("repairs' goodness of fit: bootstrap skipped (--bootstrap N to compute p-values)")
        if cl is not None:
            con.print(f"cluster of {cluster_size} fresh nodes ({rep.best.family}): mean time to the first failure "
                      f"{cl[0]:.4g} h, 95% CI [{cl[1]:.4g}, {cl[2]:.4g}] ({cl[3]}); long-run MTBF of the cluster "
                      f"(renewal, mean / N) {rep.best.mean_ / cluster_size:.4g} h")
    if out is not None:
        data = trace.read_bytes()
        prov = {"source": str(trace.resolve()), "format": fmt, "sha256": hashlib.sha256(data).hexdigest(),
                "filters": [f"{k}={v}" for k, v in flt.items()], "node_type": node_type or "all",
                "interarrival": interarrival, "n": rep.n, "failures": rep.events, "censored": rep.censored,
                "family_ranking": [f.family for f in rep.fits],
                "fitted": _dt.date.today().isoformat(), "cprsim_version": __version__}
        if node_count is not None:
            prov["node_count"] = node_count
        if tr.counts.get("never_failed_nodes") is not None:
            prov["never_failed_nodes"] = tr.counts["never_failed_nodes"]
        if rrep is not None:
            prov["repair_family_ranking"] = [f.family for f in rrep.fits]
        text = f"# failure model fitted by `cprsim fit` ({rep.best.family}, best by AIC); use it from a scenario\n" \
               f"# with  [failures] model = {short(out.name, 80)!r}\n\n" + _toml_table("provenance", prov)
        if as_type == "job":
            # N independent renewal processes superpose to about a Poisson process of rate N / mean
            # (Palm-Khintchine): the job is interrupted whenever any of its nodes has such a fault
            text += ("\n# job-level interruptions: any of the cluster's nodes with one of the selected causes;\n"
                     f"# {cluster_size} nodes x 1 / {rep.best.mean_:.6g} h, a Poisson superposition (Palm-Khintchine)\n")
            text += _toml_table("failures.job", {"family": "exponential", "mtbf_h": rep.best.mean_ / cluster_size})
        else:
            types = ("trainer", "embedding") if as_type == "both" else (as_type,)
            for ty in types:
                text += "\n" + _toml_table(f"failures.{ty}", _params(rep.best, "h"))
        if rrep is not None:
            text += "\n" + _toml_table("reschedule", _params(rrep.best, "s"))
        atomic_write_text(out, text)
    if plot is not None:
        from cprsim.plots import figure_format, save_figure
        from cprsim.plots.fit import plot_fit

        figure_format(plot)
        save_figure(plot_fit(rep, title=f"{trace.name} ({fmt})"), plot)
