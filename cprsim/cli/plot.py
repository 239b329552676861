"""``cprsim plot KIND RESULTS``: figures from result files (never re-runs a simulation)."""

from __future__ import annotations

from pathlib import Path

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
    from cprsim.errors import InputError
    from cprsim.io import check_input_file, read_input_json, short
    from cprsim.plots import figure_format, save_figure

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
    plan = None
    if plan_file is not None:  # read before the results: a bad plan file fails at once
        plan = read_input_json(plan_file, "plan file")
        if not isinstance(plan, dict):
            raise InputError(f"{short(plan_file)}: expected a `cprsim plan --out` JSON object")
    if x is not None and kind not in ("overhead", "pls", "frontier"):
        raise click.BadParameter(
            f"{x!r} does not apply to {kind} (only to overhead, pls and frontier)",
            param_hint="--x",
        )
    if kind in ("overhead", "breakdown", "pls", "frontier"):
        from cprsim import scenario as sc
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

            fig = plot_frontier(res, x, metric or "overhead", band=band or "ci", where=where)
        elif kind == "overhead":
            if plan_file is not None and x is not None:
                raise click.BadParameter(
                    "marks the plan's intervals on the interval axis; not with --x",
                    param_hint="--plan",
                )
            fig = P.plot_overhead(
                res, metric or "overhead", plan, band=band or "ci", x=x, where=where
            )
        elif kind == "pls":
            fig = P.plot_pls(res, pls_bound, band=band or "ci", x=x, where=where)
        else:
            if len(res.points) > P.MAX_BARS:
                raise InputError(
                    f"{res.source}: {len(res.points)} points are too many bars (at most "
                    f"{P.MAX_BARS}); select some with --where"
                )
            fig = P.plot_breakdown(res, where=where)
    elif kind == "fit":
        from cprsim.failures.fit import FitReport
        from cprsim.plots.fit import plot_fit

        doc = read_input_json(results, "fit report")
        if not isinstance(doc, dict):
            raise InputError(
                f"{short(results)}: not a JSON fit report (write one with `cprsim fit --report`)"
            )
        rep = FitReport.from_dict(doc, str(results))
        fig = plot_fit(
            rep,
            title=f"{Path(doc.get('trace', results.name)).name} ({doc.get('format', '?')})",
            unit=doc.get("unit", "h"),
        )
    elif kind == "calibration":
        from cprsim.plots.calibration import plot_calibration, read_calibration

        fig = plot_calibration(read_calibration(results), metric or "auc")
    else:
        from cprsim import scenario as sc
        from cprsim.plots.gantt import plot_timeline, read_events

        if not results.is_dir():
            raise InputError(f"{results}: expected a `cprsim simulate --out` folder")
        s = sc.load(str(results / "config.toml"))
        fig = plot_timeline(
            read_events(results / "events.csv"),
            s.cluster.trainers,
            f"{s.name}: {s.strategy.name}, τ = {s.checkpoint.interval_h:g} h, replication 0",
        )
    save_figure(fig, target)
    click.echo(f"wrote {target}")
