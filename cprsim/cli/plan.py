"""``cprsim plan``: the CPR planner, on a scenario or on a quick operator's description."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from cprsim import scenario as sc
from cprsim.cli.common import (
    DURATION,
    console,
    flag,
    load_scenario,
    model_option,
    set_option,
)
from cprsim.cli.progress import Progress, outputs_at_end, writing
from cprsim.io import dumps_json
from cprsim.runfiles import write_plan
from cprsim.scenario import HOUR
from cprsim.usecases import check_plannable, prepare_plan

if TYPE_CHECKING:  # pragma: no cover - imported where used (`cprsim --help` imports neither)
    from rich.table import Table

    from cprsim.planner.records import Plan


class Confidence(click.ParamType):
    """A probability in [0.5, 1) that a single run meets the bound, or ``mean``."""

    name = "q|mean"

    def convert(self, value, param, ctx):
        if value is None or isinstance(value, float):
            return value
        if str(value).strip().lower() == "mean":
            return None
        try:
            q = float(value)
        except ValueError:
            self.fail(f"{value!r} is not a probability like 0.9, nor 'mean'", param, ctx)
        if not (0.5 <= q < 1):
            self.fail(f"{value!r} must be in [0.5, 1) (or 'mean')", param, ctx)
        return q


class PlanPrecision(click.ParamType):
    """A relative precision in (0, 1), or ``off``."""

    name = "rel|off"

    def convert(self, value, param, ctx):
        if value is None or isinstance(value, float):
            return value
        if str(value).strip().lower() in ("off", "none", "exhaustive"):
            return None
        try:
            x = float(value)
        except ValueError:
            self.fail(f"{value!r} is not a relative precision like 0.1, nor 'off'", param, ctx)
        if not (math.isfinite(x) and 0 < x < 1):
            self.fail(f"{value!r} must be in (0, 1) (or 'off')", param, ctx)
        return x


def _accuracy_bound(ctx, param, value):
    if value is not None and not (math.isfinite(value) and 0 < value < 0.5):
        raise click.BadParameter(
            f"{value!r} must be a finite loss in (0, 0.5), e.g. 0.001", ctx, param
        )
    return value


def _extra_memory(ctx, param, value):
    if value is not None and not (math.isfinite(value) and value >= 0):
        raise click.BadParameter(
            f"{value!r} must be a finite fraction >= 0 of the embedding tables, e.g. 0.5",
            ctx,
            param,
        )
    return value


#: the quick form's options, by the scenario key each sets (as error messages name the key)
QUICK_KEYS = {
    "costs.save_s = ": "--save-s ",
    "costs.load_s = ": "--load-s ",
    "costs.shard_load_s = ": "--shard-load-s ",
    "reschedule.mean_s = ": "--reschedule-s ",
    "job.duration_h": "--duration-h",
}


def _quick_options(message: str) -> str:
    """An error about the quick form's scenario with its keys named as the options that set them."""
    for key, option in QUICK_KEYS.items():
        message = message.replace(key, option)
    return message


@click.command("plan")
@click.argument("scenario", metavar="[NAME|FILE]", required=False)
@click.option(
    "--max-accuracy-loss",
    type=float,
    default=None,
    callback=_accuracy_bound,
    help="The accuracy loss you accept, e.g. 0.001 (AUC points or log-loss). Required unless the "
    "model is dense (cluster.embedding_servers = 0: no option loses updates).",
)
@click.option("--metric", type=click.Choice(["auc", "logloss"]), default="auc", show_default=True)
@set_option
@model_option
@click.option(
    "--confidence",
    type=Confidence(),
    default="0.9",
    show_default=True,
    help="The bound holds per run: P(a run's PLS <= bound) >= q, proven by a 95% Clopper-Pearson "
    "lower bound on fresh replications; `mean` bounds only the mean PLS.",
)
@click.option(
    "--objective",
    type=click.Choice(["mean", "p90"]),
    default="mean",
    show_default=True,
    help="Rank options by mean or by P90 total overhead.",
)
@click.option(
    "--max-checkpoint-age",
    type=DURATION,
    metavar="DURATION",
    help="No row older than this: every option keeps full checkpoints at most this far apart (e.g. 6h).",
)
@click.option(
    "--allow-extrapolation",
    is_flag=True,
    help="Plan to the accuracy bound even beyond twice the PLS range the calibration measured.",
)
@click.option(
    "--allow-no-full-checkpoint",
    is_flag=True,
    help="Without job-level interruptions or an age cap, allow plans that take no full checkpoint.",
)
@click.option(
    "--replications",
    "-n",
    type=click.IntRange(min=2),
    help="Fresh replications confirming each option (default: the scenario's; with --precision, the most).",
)
@click.option(
    "--search-replications",
    type=click.IntRange(min=2),
    help="Replications the interval search uses (default max(200, n/2)); never those that confirm.",
)
@click.option(
    "--precision",
    type=PlanPrecision(),
    default="0.1",
    show_default=True,
    help="Adaptive replication: interval grids and options that lose no update stop once the 95% CI of "
    "the mean overhead is within this share of it; per-run promises stop when the rest of the n "
    "fresh replications cannot change the verdict (curtailment: the same proof); `off` runs every "
    "evaluation on all its replications.",
)
@click.option(
    "--strategies",
    default="partial,mfu,ssu",
    show_default=True,
    help="Strategies to rank besides full recovery (comma-separated, or `all`: "
    "partial, mfu, ssu, lookahead, ecrm, checknrun and those installed plugins register, "
    "entry-point group cprsim.strategies).",
)
@click.option(
    "--max-extra-memory",
    type=float,
    default=None,
    callback=_extra_memory,
    metavar="FRACTION",
    help="The most memory an option may add to the embedding tables, a fraction of them (e.g. 0.5: "
    "50%; ECRM's parity takes m/k): variants that need more are not planned, so that the options "
    "compared fit the same hardware; the table's `extra mem` column shows each option's "
    "[default: no limit].",
)
@click.option(
    "--calibration",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="calibration.toml from `cprsim calibrate` (default: the one shipped).",
)
@click.option(
    "--check-stability",
    is_flag=True,
    help="Make the plan again with the calibration's accuracy model refitted without each of its "
    "seeds (one more plan per seed): does one seed change the recommendation, or move its interval "
    "by more than one grid step (x1.19)? And would each refit still confirm this plan's promise on "
    "its confirmation runs? A line below the table; JSON: `stability`.",
)
@click.option(
    "--checkpoint-modes",
    "checkpoint_modes",
    default=None,
    metavar="MODE,MODE,...",
    help="Compare full recovery under these checkpoint modes (blocking, two-phase, tiered; at "
    "least one of the first two), whatever the scenario's own [default: its own; a tiered "
    "scenario: blocking,tiered]. Options of a mode other than the baseline's carry its name; "
    "tiered uses the scenario's [checkpoint.tiers], else the defaults.",
)
@click.option(
    "--sensitivity",
    "sensitivity",
    default="none",
    show_default=True,
    metavar="K,K,...|none",
    help="Also plan as if your model lost K times the accuracy per unit PLS the plan assumes (the "
    "calibration's, times the scale factor the plan reports; e.g. 2,4,10: your model may lose "
    "more): a table of the recommendation per factor (one more plan each).",
)
@click.option(
    "--model-rows",
    type=click.IntRange(min=1),
    default=None,
    help="Your model's embedding rows (default: the scenario's, from access and "
    "cluster.embedding_gb): matched to the calibration's scale ladder for the loss per unit PLS.",
)
@click.option(
    "--loss-scale",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Your model's loss per unit PLS as a multiple of the calibration's (e.g. measured with "
    "docs/howto-calibrate-your-model.md) [default: the scale ladder's choice for your rows].",
)
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the plan as JSON here.",
)
@click.option(
    "--embedding-servers", type=click.IntRange(min=1), help="Quick form: embedding servers."
)
@click.option(
    "--trainers",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Quick form: trainers.",
)
@click.option(
    "--node-mtbf-h",
    type=click.FloatRange(min=0, min_open=True),
    help="Quick form: MTBF of one node (h).",
)
@click.option(
    "--save-s",
    type=click.FloatRange(min=0, min_open=True),
    help="Quick form: blocking checkpoint save (s).",
)
@click.option(
    "--load-s",
    type=click.FloatRange(min=0, min_open=True),
    help="Quick form: full checkpoint load (s).",
)
@click.option(
    "--shard-load-s",
    type=click.FloatRange(min=0, min_open=True),
    help="Quick form: one shard's load (s); default load-s / embedding servers.",
)
@click.option(
    "--reschedule-s",
    type=click.FloatRange(min=0, min_open=True),
    default=300.0,
    show_default=True,
    help="Quick form: rescheduling a failed node (s).",
)
@click.option(
    "--duration-h",
    type=click.FloatRange(min=0, min_open=True),
    default=50.0,
    show_default=True,
    help="Quick form: failure-free training time (h).",
)
@click.option(
    "--samples-per-s",
    type=click.FloatRange(min=0, min_open=True),
    help="Quick form: throughput (needed for MFU/SSU).",
)
@click.option(
    "--job-mtbf-h",
    type=click.FloatRange(min=0, min_open=True),
    help="Quick form: mean time between job-level interruptions (crash, NaN, outage, preemption; h).",
)
@click.option(
    "--seed", type=click.IntRange(min=0), default=1, show_default=True, help="Quick form: seed."
)
def command(  # long: its 35 click parameters; the body is ~50 lines of scenario, run, output
    scenario: str | None,
    max_accuracy_loss: float | None,
    metric: str,
    overrides: tuple[str, ...],
    model: str | None,
    confidence: float | None,
    objective: str,
    max_checkpoint_age: float | None,
    allow_extrapolation: bool,
    allow_no_full_checkpoint: bool,
    replications: int | None,
    search_replications: int | None,
    precision: float | None,
    strategies: str,
    max_extra_memory: float | None,
    calibration: Path | None,
    check_stability: bool,
    checkpoint_modes: str | None,
    sensitivity: str,
    model_rows: int | None,
    loss_scale: float | None,
    as_json: bool,
    out: Path | None,
    embedding_servers: int | None,
    trainers: int,
    node_mtbf_h: float | None,
    save_s: float | None,
    load_s: float | None,
    shard_load_s: float | None,
    reschedule_s: float,
    duration_h: float,
    samples_per_s: float | None,
    job_mtbf_h: float | None,
    seed: int,
) -> None:
    """Pick the checkpoint intervals and recovery strategy for an accuracy bound.

    Compares full recovery (Young, Daly, simulated optimum) with CPR partial recovery
    (vanilla, MFU, SSU; more with --strategies). The bound is a promise per run
    (--confidence), searched on one set of replications and proven on fresh ones; every partial
    option keeps full checkpoints (against job-level interruptions, [failures.job]). The table
    shows means with 95% CIs, P90s and ETTR.
    Without a scenario, give the quick options: --embedding-servers, --node-mtbf-h, --save-s,
    --load-s (and optionally --trainers, --reschedule-s, --duration-h, --samples-per-s, --job-mtbf-h).
    """
    from cprsim.planner.quick import plan_strategies
    from cprsim.sim import strategies as registry

    registry.ensure_loaded()  # a broken plugin: its own one-line error, before the scenario's checks
    quick: dict[str, Any] = {
        "embedding_servers": embedding_servers,
        "node_mtbf_h": node_mtbf_h,
        "save_s": save_s,
        "load_s": load_s,
        "trainers": trainers,
        "reschedule_s": reschedule_s,
        "shard_load_s": shard_load_s,
        "duration_h": duration_h,
        "samples_per_s": samples_per_s,
        "job_mtbf_h": job_mtbf_h,
        "replications": replications or 100,
        "seed": seed,
    }
    s = _plannable_scenario(scenario, overrides, model, quick, max_accuracy_loss)
    planning = prepare_plan(s, calibration)
    strats = plan_strategies(strategies)
    factors = _factors(sensitivity)
    outputs_at_end()
    from cprsim.planner import estimated_replications

    # the planner reports each replication as it completes; how many it runs is known only roughly
    total = estimated_replications(
        s, strats, replications, search_replications, checkpoint_modes, precision
    )
    with Progress(total, f"planning {s.name}", "replications", estimated=True) as advance:
        plan = planning.run(
            max_accuracy_loss,
            metric,
            strategies=strats,
            progress=advance,
            replications=replications,
            search_replications=search_replications,
            confidence=confidence,
            objective=objective,
            max_checkpoint_age_h=max_checkpoint_age,
            allow_extrapolation=allow_extrapolation,
            allow_no_full_checkpoint=allow_no_full_checkpoint,
            precision=precision,
            sensitivity=factors,
            model_rows=model_rows,
            loss_scale=loss_scale,
            checkpoint_modes=checkpoint_modes,
            check_stability=check_stability,
            max_extra_memory=max_extra_memory,
        )
    if out is not None:
        with writing():
            write_plan(out, plan)
    if as_json:
        click.echo(dumps_json(plan.as_dict()), nl=False)
        return
    _print_plan(plan)


def _plannable_scenario(
    scenario: str | None,
    overrides: tuple[str, ...],
    model: str | None,
    quick: dict[str, Any],
    max_accuracy_loss: float | None,
) -> sc.Scenario:
    """The scenario to plan (named, a file, or the quick options'), refused when no plan can use it."""
    from cprsim.errors import InputError
    from cprsim.planner.quick import MissingParameters
    from cprsim.planner.quick import quick_scenario as build_quick

    if scenario is None:
        try:
            s = build_quick(**quick)
        except MissingParameters as e:
            raise click.UsageError(
                "give a scenario, or the quick options "
                f"(missing: {', '.join(flag(n) for n in e.names)})"
            ) from None
        if model is not None:
            s = sc.with_model(s, model)
        if overrides:
            s = s.with_updates(sc.parse_set(overrides), param="overrides")
    else:
        s = load_scenario(scenario, overrides, model=model)
    try:  # a cost or a time no arithmetic downstream survives, a hopeless regime: refused now
        check_plannable(s)
    except InputError as e:
        if scenario is None:  # the quick form: its options set these keys
            raise InputError(_quick_options(str(e))) from None
        raise
    if max_accuracy_loss is None and s.cluster.embedding_servers > 0:
        raise click.UsageError(
            "Missing option '--max-accuracy-loss': the model has embedding shards, and partial "
            "recovery loses updates (e.g. --max-accuracy-loss 0.001; only a dense model, "
            "cluster.embedding_servers = 0, plans without it)"
        )
    return s


def _print_plan(plan: Plan) -> None:
    """The plan as text: its table, recommendation, accuracy scale, stability, notes, sensitivity."""
    from rich.markup import escape

    con = console()
    table, dropped = plan_table(plan, con.width)
    con.print(table)
    if dropped:
        con.print(
            f"left out to fit {con.width} columns: {escape(', '.join(dropped))} "
            "(--json has them all)"
        )
    con.print(f"[bold]Recommendation:[/bold] {escape(plan.message)}")
    assumed = scale_line(plan)
    if assumed:
        con.print(f"[bold]Accuracy:[/bold] {escape(assumed)}")
    if plan.stability:
        con.print(f"[bold]Stability:[/bold] {escape(stability_line(plan.stability))}")
    for n in plan.notes:
        con.print(f"[yellow]note:[/yellow] {escape(_with_options(n))}")
    for o in plan.options:
        if o.extrapolation:
            con.print(f"[yellow]warning:[/yellow] {escape(o.label)}: {escape(o.extrapolation)}")
    if plan.sensitivity:
        con.print(sensitivity_table(plan))


def stability_line(st: dict[str, Any]) -> str:
    """``plan.stability`` in one line: how many seed-out refits keep the recommendation (recommend
    it, or have it tied), how far its interval moves, what that does to the overhead, the verdict,
    and the refits that move it."""
    n = len(st.get("refits", []))
    lo, hi = st.get("overhead_range", [math.nan, math.nan])
    rec = st.get("recommended")
    moves = ", ".join(
        f"without seed {r['seed_left_out']}: {r['recommended']} every {r['interval_h']:.3g} h"
        + (
            ""
            if r["recommended"] == rec
            else f", {rec} "
            + (
                f"every {r['option_interval_h']:.3g} h"
                if r.get("option_interval_h") is not None
                else "not plannable"
            )
            + (" (tied)" if r.get("keeps") else "")
        )
        for r in st.get("refits", [])
        if r["recommended"] != rec or r.get("steps") is None or abs(r["steps"]) > 1
    )
    steps = st.get("max_steps")
    return (
        f"planned again with the accuracy model refitted without each of the calibration's {n} "
        f"seeds: {st.get('kept')} of {n} keep {rec} ({st.get('same')} recommend it, the others "
        "have it tied within the 95% CIs), its interval moves "
        + (f"up to {steps} grid step(s) (x1.19 each)" if steps is not None else "out of reach")
        + f", the refits' mean overhead {100 * lo:.3g}-{100 * hi:.3g}% (this plan's "
        f"{100 * st.get('overhead', math.nan):.3g}%): "
        + ("stable" if st.get("stable") else "NOT stable (one seed moves the plan)")
        + (f" ({moves})" if moves else "")
        + _promise_text(st.get("promise"), n, rec)
    )


def _promise_text(pr: dict[str, Any] | None, n: int, rec: Any) -> str:
    """The stability line's last clause: the plan's own option as each refit judges it."""
    if not pr:
        return ""
    lo, hi = pr["within_range"]
    return (
        f"; {rec} as planned here, judged with each refit's accuracy model on its "
        f"{pr['runs']} confirmation runs: {lo}-{hi} within, {pr['kept']} of {n} refits "
        f"confirm its promise (95% lower bound >= {pr['confidence']:g}; lowest "
        f"{100 * pr['lo_min']:.1f}%)"
    )


def scale_line(plan: Plan) -> str:
    """One line beside the recommendation: the loss per unit PLS the accuracy figures assume, and
    whether the user's model lies outside what the calibration measured ('' when the plan has no
    partial-recovery accuracy figures)."""
    sc = plan.scale or {}
    if not sc or not plan.calibrated or not any(math.isfinite(o.pls_bound) for o in plan.options):
        return ""
    k, rows = sc.get("factor", 1.0), sc.get("rows")
    lo, hi = sc.get("measured_rows", [None, None])
    basis = sc.get("basis", "reference")
    what = {"user": "given", "reference": "as calibrated"}.get(basis, f"rung {basis}")
    text = f"figures assume {k:.3g}x the calibrated loss per unit PLS ({what})"
    if rows is None:
        return text + "; your model's rows are unknown (--model-rows)"
    if hi is None or lo is None:
        return text + f"; your model: {rows:,} rows (the calibration does not record its own size)"
    if sc.get("outside") == "above" and hi:
        return (
            text + f"; your model ({rows:,} rows) is {rows / hi:.3g}x larger than any measured "
            f"({hi:,} rows): OUTSIDE what was measured (notes, --sensitivity)"
        )
    if sc.get("outside") == "below" and lo:
        return text + f"; your model ({rows:,} rows) is smaller than any measured ({lo:,} rows)"
    return text + f"; your model: {rows:,} rows, within the measured {lo:,} to {hi:,}"


def _factors(text: str) -> tuple[float, ...]:
    """``--sensitivity``: ``none`` or comma-separated factors > 0."""
    if text.strip().lower() in ("", "none", "off"):
        return ()
    out = []
    for part in text.split(","):
        try:
            k = float(part)
        except ValueError:
            k = math.nan
        if not (math.isfinite(k) and k > 0):
            raise click.BadParameter(
                f"expected comma-separated factors > 0 (e.g. 2,4,10) or none, got {part.strip()!r}",
                param_hint="'--sensitivity'",
            )
        out.append(k)
    return tuple(out)


def sensitivity_table(plan: Plan) -> Any:
    """The plan's sensitivity rows as a rich table: per factor the bound it amounts to, the
    recommendation with its intervals and overhead, and each partial-recovery option's intervals."""
    from rich.table import Table

    labels = [o.label for o in plan.options if math.isfinite(o.pls_bound)]
    k0 = float((plan.scale or {}).get("factor", 1.0))
    assumed = "the calibrated" if k0 == 1.0 else f"the assumed ({k0:.3g}x the calibrated)"
    t = Table(
        title=f"if your model lost k x {assumed} {plan.metric} per unit PLS "
        f"(= the bound / k with the plan's model)"
    )
    for h in ("k", "bound", "recommended", "overhead", *labels):
        t.add_column(h, justify="left" if h == "recommended" else "right")
    base = {
        "factor": 1.0,
        "accuracy_bound": plan.accuracy_bound,
        "recommended": plan.recommended,
        "overhead": plan.option(plan.recommended).overhead.mean,
        "options": [
            {
                "label": o.label,
                "interval_h": o.interval_s / HOUR,
                "full_interval_h": o.full_interval_s / HOUR,
                "meets_bound": o.meets_bound,
            }
            for o in plan.options
            if math.isfinite(o.pls_bound)
        ],
    }
    for r in (base, *plan.sensitivity):
        by = {o["label"]: o for o in r["options"]}

        def cell(label: str, by: dict[str, Any] = by) -> str:
            o = by.get(label)
            if o is None:
                return "-"
            iv = f"{o['interval_h']:.3g}"
            if o["full_interval_h"] > o["interval_h"] * (1 + 1e-9):
                iv += f"/{o['full_interval_h']:.3g}"
            return iv + " h" + ("" if o["meets_bound"] else " NO")

        t.add_row(
            f"{r['factor']:g}",
            f"{r['accuracy_bound']:.3g}",
            r["recommended"],
            f"{100 * r['overhead']:.2f}%",
            *(cell(lab) for lab in labels),
        )
    t.caption = "intervals: saves/full saves; NO: does not meet the bound on fresh replications"
    return t


#: the planner's settings its notes name (``allow_extrapolation``, ``max_extra_memory``) that are
#: this command's options
_NOTED_OPTIONS = ("allow_extrapolation", "max_extra_memory")


def _with_options(note: str) -> str:
    """A note of the planner with the settings it names shown as this command's options."""
    for name in _NOTED_OPTIONS:
        note = re.sub(rf"(?<![\w.`]){name}(?![\w`])", flag(name), note)
    return note


#: the table's columns: (key, header, narrow header, drop rank (0: always kept), about lost updates);
#: too narrow a terminal drops rank 1 first, then 2, ...; ``{m}``: the accuracy metric
_COLUMNS = (
    ("option", "option", "option", 0, False),
    ("saves", "saves", "saves", 0, False),
    ("full", "full saves", "full\nsaves", 5, False),
    ("overhead", "overhead ±95% CI", "overhead\n±95% CI", 0, False),
    ("p90", "P90", "P90", 0, False),
    ("extra_mem", "extra mem", "extra\nmem", 0, False),
    ("ckpt", "ckpt-rel.", "ckpt-\nrel.", 1, False),
    ("ettr", "ETTR", "ETTR", 3, False),
    ("pls", "PLS mean / P90", "PLS mean\n/ P90", 4, True),
    ("pls_bound", "PLS bound", "PLS\nbound", 2, True),
    ("within", "runs within (lo)", "runs within\n(lo)", 6, True),
    ("loss", "{m} loss", "{m}\nloss", 7, True),
    ("meets", "meets", "meets", 0, False),
)
#: an option's label wraps (at spaces) down to this many characters before columns are dropped
_OPTION_MIN = 16


def _cells(plan: Plan) -> list[dict[str, str]]:
    """Each option's cells by column key (plain text: the label is escaped when the row is added)."""
    rows = []
    for o in plan.options:
        mark = " *" if o.label == plan.recommended else (" =" if o.tied else "")
        if o.oracle:
            mark += " (oracle)"
        pls_part = o.pls_bound < float("inf")
        rows.append(
            {
                "option": o.label.replace("full (simulated optimum)", "full (sim. optimum)") + mark,
                "saves": f"{o.interval_s / HOUR:.3g} h",
                "full": f"{o.full_interval_s / HOUR:.3g} h",
                "overhead": f"{100 * o.overhead.mean:.2f}% ±{100 * o.overhead.half_width:.2f}",
                "p90": f"{100 * o.overhead.p90:.2f}%",
                "extra_mem": f"{100 * o.extra_memory:.3g}%" if o.extra_memory > 0 else "0",
                "ckpt": f"{100 * o.ckpt_overhead.mean:.2f}%",
                "ettr": f"{o.ettr.mean:.4f}" if o.ettr is not None else "-",
                "pls": f"{o.pls.mean:.3f} / {o.pls.p90:.3f}" if pls_part else "0",
                "pls_bound": f"{o.pls_bound:.4g}" if pls_part else "-",
                "within": f"{100 * o.within:.1f}% ({100 * o.within_lo:.1f}%)" if pls_part else "-",
                "loss": (
                    (
                        f"{o.accuracy_loss:.2g}"
                        if plan.confidence is None
                        else f"{o.accuracy_loss:.2g}/{o.accuracy_loss_tail:.2g}"
                    )
                    if pls_part
                    else "0"
                ),
                "meets": ("yes" if o.meets_bound else "NO") + (" (!)" if o.extrapolation else ""),
            }
        )
    return rows


def _layout(
    plan: Plan, rows: list[dict[str, str]], width: int
) -> tuple[list[tuple[str, str]], list[str]]:
    """The columns that fit ``width`` characters, as (key, header), and the headers of those left
    out for width. Without an option that loses updates, the PLS and accuracy-loss columns are
    not shown (all 0), nor without a bound (a dense model) the "meets" column, nor "extra mem"
    when no option takes memory beyond the embedding tables. Otherwise, in
    order, until the table fits: the full headers; narrow ones (on two lines); option labels
    wrapped; columns dropped by rank. Never dropped: option, saves, overhead, P90, extra mem, meets."""
    from rich.cells import cell_len

    loses = any(o.pls_bound < float("inf") for o in plan.options)
    bounded = math.isfinite(plan.accuracy_bound)  # a dense model's plan has no bound to meet
    cols = [c for c in _COLUMNS if (loses or not c[4]) and (bounded or c[0] != "meets")]
    if not any(o.extra_memory > 0 for o in plan.options):  # every option runs on the same memory
        cols = [c for c in cols if c[0] != "extra_mem"]

    def need(keep: list[tuple[str, str, str, int, bool]], narrow: bool, option_min: bool) -> int:
        total = 3 * len(keep) + 1  # a border and a blank either side of each column
        for key, head, short, _, _ in keep:
            text = (short if narrow else head).format(m=plan.metric)
            w = max([cell_len(r[key]) for r in rows] + [cell_len(x) for x in text.split("\n")])
            if key == "option" and option_min:
                longest = max((cell_len(word) for r in rows for word in r[key].split()), default=0)
                w = min(w, max(longest, _OPTION_MIN))
            total += w
        return total

    narrow = option_min = False
    for narrow, option_min in ((False, False), (True, False), (True, True)):
        if need(cols, narrow, option_min) <= width:
            break
    dropped: list[str] = []
    for rank in range(1, max(c[3] for c in cols) + 1):
        if need(cols, narrow, option_min) <= width:
            break
        gone = [c for c in cols if c[3] == rank]
        dropped += [c[1].format(m=plan.metric) for c in gone]
        cols = [c for c in cols if c[3] != rank]
    return [(c[0], (c[2] if narrow else c[1]).format(m=plan.metric)) for c in cols], dropped


def plan_table(plan: Plan, width: int = 160) -> tuple[Table, list[str]]:
    """The plan's options as a rich table that fits ``width`` characters when it can: intervals,
    overhead (mean, CI, P90), ETTR, PLS, accuracy. Returns the table and the headers of the
    columns left out for width (``--json`` has them all)."""
    from rich.markup import escape
    from rich.table import Table

    rows = _cells(plan)
    cols, dropped = _layout(plan, rows, width)
    keys = [k for k, _ in cols]
    promise = "on the mean" if plan.confidence is None else f"in {100 * plan.confidence:g}% of runs"
    bound = (
        f"{plan.metric} loss <= {plan.accuracy_bound:g}, {promise}"
        if math.isfinite(plan.accuracy_bound)
        else "a dense model: no option loses updates"
    )
    title = (
        f"{plan.scenario}: {bound}; "
        f"{plan.failure_rate_per_h:.3g} failure events/h (start: {plan.failure_start}); "
        f"search {plan.search_replications} / confirm {plan.replications} fresh replications"
        + (f" (adaptive, precision {plan.precision:g})" if plan.precision is not None else "")
        + f", seed {plan.seed}"
    )
    loses = any(o.pls_bound < float("inf") for o in plan.options)
    caption = ["* recommended, = tied with it within the 95% CIs"]
    caption += (
        ["(!) beyond the calibrated range (PLS or a covariate: warnings below)"] if loses else []
    )
    caption += ["P90: of single runs"]
    if "extra_mem" in keys:
        caption += ["extra mem: memory beyond the embedding tables, a share of them (ECRM: parity)"]
    if "within" in keys:
        caption += [
            "runs within: share of fresh runs whose loss <= the bound (its 95% lower bound); "
            + (
                "a run's loss: the upper end of the mean's 95% CI at its PLS"
                if plan.confidence is None
                else "a run's loss: one draw from the predictive distribution of a single "
                "training run (its scatter and the model's uncertainty) at its PLS"
            )
        ]
    if "loss" in keys and loses:
        caption += [
            f"{plan.metric} loss: the mean"
            + (
                ""
                if plan.confidence is None
                else f"/the P{100 * plan.confidence:g} of a single run's loss (predictive)"
            )
        ]
    if not loses:
        caption += ["no option loses updates (no PLS or accuracy-loss columns)"]
    t = Table(title=escape(title), caption="; ".join(caption))
    for key, header in cols:
        if key == "option":
            t.add_column(header, justify="left")
        else:
            t.add_column(header, justify="right", no_wrap=True)
    for r in rows:
        t.add_row(*(escape(r[k]) if k == "option" else r[k] for k in keys))
    return t, dropped
