"""``cprsim plot KIND RESULTS``: figures from result files (never re-runs a simulation)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

#: kind -> (what RESULTS is, default file name)
KINDS = {
    "overhead": "a sweep's --out folder (or its results.csv): overhead vs interval per strategy, "
    "CI or P50-P90 bands (--band), the planner's choices (plan.json, or --plan) marked",
    "breakdown": "a sweep's --out folder or a `cprsim simulate --out` folder: stacked overhead components "
    "(with a node lifecycle, rescheduling split into detection, waiting for a machine, swap-in)",
    "pls": "a sweep's --out folder: PLS vs interval per strategy, CI or P50-P90 bands (--band), "
    "with the PLS bound",
    "frontier": "a sweep's --out folder: per strategy, the best mean overhead over the swept "
    "intervals (95% CI) against a swept key (--x), and the interval that achieves it",
    "fit": "a `cprsim fit --report` JSON file: Kaplan-Meier vs the fitted families",
    "calibration": "a `cprsim calibrate --out` folder or its calibration.toml: accuracy loss vs PLS",
    "timeline": "a `cprsim simulate --out` folder (events.csv, config.toml): Gantt of replication 0",
}


@click.command("plot")
@click.argument("kind", type=click.Choice(list(KINDS)))
@click.argument("results", type=click.Path(path_type=Path))
@click.option(
    "--out",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Image file (.png, .svg or .pdf). Default: RESULTS' folder/KIND.png.",
)
@click.option(
    "--metric",
    type=click.Choice(["overhead", "ckpt_overhead", "auc", "logloss"]),
    help="overhead, frontier: overhead or ckpt_overhead (default overhead); calibration: auc or "
    "logloss (default auc).",
)
@click.option(
    "--where",
    "conditions",  # SweepResults.where's parameter
    multiple=True,
    metavar="KEY=VALUE",
    help="Keep only the sweep points with this grid value (repeatable); the title names the slice.",
)
@click.option(
    "--x",
    "x",
    metavar="KEY",
    help="frontier: the grid key on the x axis (default: the one key the sweep varies besides "
    "checkpoint.interval_h); overhead, pls: a grid key to plot against instead of the interval.",
)
@click.option(
    "--plan",
    "plan_file",
    type=click.Path(path_type=Path),
    help="overhead: a `cprsim plan --out` JSON whose options are marked (default: the sweep's "
    "plan.json).",
)
@click.option(
    "--pls-bound",
    type=click.FloatRange(min=0, min_open=True),
    help="pls: draw this PLS bound (default: the plan's).",
)
@click.option(
    "--band",
    type=click.Choice(["ci", "p90"]),
    help="overhead, pls, frontier: the band around each mean: ci = 95% CI of the mean (default), "
    "p90 = P50 to P90 of single replications (from results.csv).",
)
def command(
    kind: str,
    results: Path,
    out: Path | None,
    metric: str | None,
    conditions: tuple[str, ...],
    x: str | None,
    plan_file: Path | None,
    pls_bound: float | None,
    band: str | None,
) -> None:
    """Draw a figure of KIND from RESULTS.

    \b
    overhead     sweep folder -> overhead vs interval, CI or P50-P90 bands, planner's choice marked
    breakdown    sweep or simulate folder -> stacked bars: save, load, re-executed, rescheduling
                 (detection, waiting for a machine, swap-in with a node lifecycle), degraded
    pls          sweep folder -> PLS vs interval with the bound, CI or P50-P90 bands
    frontier     sweep folder -> best overhead over the intervals (95% CI) and the interval
                 achieving it, per strategy, against a swept key (--x KEY)
    fit          `cprsim fit --report` JSON -> survival: Kaplan-Meier vs fitted families
    calibration  `cprsim calibrate --out` folder -> accuracy loss vs PLS, per strategy
    timeline     `cprsim simulate --out` folder -> Gantt of one replication
    """
    from cprsim.plots import save_figure

    target = _target(kind, results, out, plan_file)
    _check_applies(kind, metric, band, x)
    plan = _read_plan(plan_file)
    if kind in ("overhead", "breakdown", "pls", "frontier"):
        fig = _sweep_figure(kind, results, conditions, x, metric, plan, pls_bound, band)
    elif kind == "fit":
        fig = _fit_figure(results)
    elif kind == "calibration":
        from cprsim.plots.calibration import plot_calibration, read_calibration

        fig = plot_calibration(read_calibration(results), metric or "auc")
    else:
        fig = _timeline_figure(results)
    save_figure(fig, target)
    click.echo(f"wrote {target}")


def _target(kind: str, results: Path, out: Path | None, plan_file: Path | None) -> Path:
    """The figure's path (--out, or KIND.png beside RESULTS), once RESULTS is there and readable."""
    from cprsim.errors import InputError
    from cprsim.io import check_input_file, short
    from cprsim.plots import figure_format

    if plan_file is not None and kind != "overhead":
        raise click.BadParameter(
            f"does not apply to {kind} (only to overhead)", param_hint="--plan"
        )
    if not results.exists():
        raise InputError(f"{short(results)}: no such file or folder")
    if kind == "fit" or not results.is_dir():  # a file: regular, within the cap of its kind
        if kind == "calibration":
            check_input_file(results, "calibration file", "config")
        else:
            check_input_file(results, "fit report" if kind == "fit" else "results file")
    folder = results if results.is_dir() else results.parent
    target = out if out is not None else folder / f"{kind}.png"
    figure_format(target)
    return target


def _check_applies(kind: str, metric: str | None, band: str | None, x: str | None) -> None:
    """Refuse --metric, --band and --x where KIND has no use for them."""
    if metric is not None:
        ok = (
            ("overhead", "ckpt_overhead")
            if kind in ("overhead", "frontier")
            else ("auc", "logloss")
            if kind == "calibration"
            else ()
        )
        if metric not in ok:
            raise click.BadParameter(f"{metric!r} does not apply to {kind}", param_hint="--metric")
    if band is not None and kind not in ("overhead", "pls", "frontier"):
        raise click.BadParameter(
            f"{band!r} does not apply to {kind} (only to overhead, pls and frontier)",
            param_hint="--band",
        )
    # checked before --plan's file is read: --plan goes with overhead only, where --x applies, so no
    # command meets both errors
    if x is not None and kind not in ("overhead", "pls", "frontier"):
        raise click.BadParameter(
            f"{x!r} does not apply to {kind} (only to overhead, pls and frontier)",
            param_hint="--x",
        )


def _read_plan(plan_file: Path | None) -> dict | None:
    """The --plan file's JSON object (read before the results: a bad plan file fails at once)."""
    from cprsim.errors import InputError
    from cprsim.io import read_input_json, short

    if plan_file is None:
        return None
    plan = read_input_json(plan_file, "plan file")
    if not isinstance(plan, dict):
        raise InputError(f"{short(plan_file)}: expected a `cprsim plan --out` JSON object")
    return plan


def _sweep_figure(
    kind: str,
    results: Path,
    conditions: tuple[str, ...],
    x: str | None,
    metric: str | None,
    plan: dict | None,
    pls_bound: float | None,
    band: str | None,
) -> Any:
    """overhead, breakdown, pls or frontier of a sweep's results, sliced by --where."""
    from cprsim import scenario as sc
    from cprsim.errors import InputError
    from cprsim.plots import sweep as P
    from cprsim.sweep.results import load_results

    res = load_results(results)
    where = sc.parse_set(conditions, "conditions") if conditions else {}
    if where:
        res = res.where(where)
    if x is not None and x in where:
        raise InputError(
            f"--x {x}: fixed to one value by --where {x}={P.value_text(where[x])}; "
            "expected a grid key the slice leaves free"
        )
    if x is not None and kind != "frontier" and P.is_interval(x):
        x = None  # the interval axis, as without --x
    if kind == "frontier":
        from cprsim.plots.frontier import plot_frontier

        return plot_frontier(res, x, metric or "overhead", band=band or "ci", where=where)
    if kind == "overhead":
        if plan is not None and x is not None:
            raise click.BadParameter(
                "marks the plan's intervals on the interval axis; not with --x",
                param_hint="--plan",
            )
        return P.plot_overhead(res, metric or "overhead", plan, band=band or "ci", x=x, where=where)
    if kind == "pls":
        return P.plot_pls(res, pls_bound, band=band or "ci", x=x, where=where)
    if len(res.points) > P.MAX_BARS:
        raise InputError(
            f"{res.source}: {len(res.points)} points are too many bars (at most "
            f"{P.MAX_BARS}); select some with --where"
        )
    return P.plot_breakdown(res, where=where)


def _fit_figure(results: Path) -> Any:
    """Survival of a `cprsim fit --report` JSON: Kaplan-Meier against the fitted families."""
    from cprsim.errors import InputError
    from cprsim.failures.fit import FitReport
    from cprsim.io import read_input_json, short
    from cprsim.plots.fit import plot_fit

    doc = read_input_json(results, "fit report")
    if not isinstance(doc, dict):
        raise InputError(
            f"{short(results)}: not a JSON fit report (write one with `cprsim fit --report`)"
        )
    rep = FitReport.from_dict(doc, str(results))
    return plot_fit(
        rep,
        title=f"{Path(doc.get('trace', results.name)).name} ({doc.get('format', '?')})",
        unit=doc.get("unit", "h"),
    )


def _timeline_figure(results: Path) -> Any:
    """Gantt of replication 0 of a `cprsim simulate --out` folder."""
    from cprsim import scenario as sc
    from cprsim.errors import InputError
    from cprsim.plots.gantt import plot_timeline, read_events

    if not results.is_dir():
        raise InputError(f"{results}: expected a `cprsim simulate --out` folder")
    s = sc.load(str(results / "config.toml"))
    return plot_timeline(
        read_events(results / "events.csv"),
        s.cluster.trainers,
        f"{s.name}: {s.strategy.name}, τ = {s.checkpoint.interval_h:g} h, replication 0",
    )
