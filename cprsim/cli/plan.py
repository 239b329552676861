"""``cprsim plan``: the CPR planner, on a scenario or on a quick operator's description."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import click

from cprsim import scenario as sc
from cprsim.cli.common import DURATION, console, load_scenario, progress_bar, set_option
from cprsim.io import atomic_write_json, dumps_json
from cprsim.scenario import HOUR


def quick_scenario(
    embedding_servers: int,
    trainers: int,
    node_mtbf_h: float,
    save_s: float,
    load_s: float,
    reschedule_s: float,
    shard_load_s: float | None,
    duration_h: float,
    samples_per_s: float | None,
    replications: int,
    seed: int,
    job_mtbf_h: float | None = None,
) -> sc.Scenario:
    """A scenario from the handful of numbers an operator knows (per-node exponential failures)."""
    raw: dict[str, Any] = {
        "name": "quick",
        "description": "built from cprsim plan's quick options",
        "seed": seed,
        "replications": replications,
        "cluster": {"trainers": trainers, "embedding_servers": embedding_servers},
        "job": {"duration_h": duration_h},
        "reschedule": {"family": "constant", "mean_s": reschedule_s},
        "failures": {
            "trainer": {"family": "exponential", "mtbf_h": node_mtbf_h},
            "embedding": {"family": "exponential", "mtbf_h": node_mtbf_h},
        },
        "costs": {
            "save_s": save_s,
            "load_s": load_s,
            "shard_load_s": shard_load_s
            if shard_load_s is not None
            else max(load_s / embedding_servers, 1e-3),
        },
        "checkpoint": {"interval_h": min(1.0, duration_h)},
    }
    if samples_per_s is not None:
        raw["job"]["samples_per_s"] = samples_per_s
    if job_mtbf_h is not None:
        raw["failures"]["job"] = {"family": "exponential", "mtbf_h": job_mtbf_h}
    return sc.validate(raw, "cprsim plan (quick options)")


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


@click.command("plan")
@click.argument("scenario", metavar="[NAME|FILE]", required=False)
@click.option(
    "--max-accuracy-loss",
    type=float,
    required=True,
    callback=_accuracy_bound,
    help="The accuracy loss you accept, e.g. 0.001 (AUC points or log-loss).",
)
@click.option("--metric", type=click.Choice(["auc", "logloss"]), default="auc", show_default=True)
@set_option
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
    "--calibration",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="calibration.toml from `cprsim calibrate` (default: the one shipped).",
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
def command(
    scenario: str | None,
    max_accuracy_loss: float,
    metric: str,
    sets: tuple[str, ...],
    confidence: float | None,
    objective: str,
    max_checkpoint_age: float | None,
    allow_extrapolation: bool,
    allow_no_full_checkpoint: bool,
    replications: int | None,
    search_replications: int | None,
    precision: float | None,
    strategies: str,
    calibration: Path | None,
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
    from cprsim.plan import make_plan
    from cprsim.sim import strategies as registry

    registry.ensure_loaded()  # a broken plugin: its own one-line error, before the scenario's checks
    if scenario is None:
        missing = [
            n
            for n, v in (
                ("--embedding-servers", embedding_servers),
                ("--node-mtbf-h", node_mtbf_h),
                ("--save-s", save_s),
                ("--load-s", load_s),
            )
            if v is None
        ]
        if missing:
            raise click.UsageError(
                f"give a scenario, or the quick options (missing: {', '.join(missing)})"
            )
        s = quick_scenario(
            embedding_servers,
            trainers,
            node_mtbf_h,
            save_s,
            load_s,
            reschedule_s,  # type: ignore[arg-type]
            shard_load_s,
            duration_h,
            samples_per_s,
            replications or 100,
            seed,
            job_mtbf_h,
        )
        if sets:
            s = s.with_updates(sc.parse_set(sets))
    else:
        s = load_scenario(scenario, sets)
    cal = None
    if calibration is not None:
        from cprsim.calibrate.calibration import load_calibration

        cal = load_calibration(calibration)
    from cprsim.plan import ALL_STRATEGIES  # the registry's, plugins included (loads them)

    strats = (
        list(ALL_STRATEGIES)
        if strategies.strip() == "all"
        else [x.strip() for x in strategies.split(",") if x.strip()]
    )
    unknown = [x for x in strats if x not in ALL_STRATEGIES]
    if unknown:
        raise click.BadParameter(
            f"unknown {', '.join(unknown)} (choose from {', '.join(ALL_STRATEGIES)}, or all)",
            param_hint="--strategies",
        )
    with progress_bar(40, f"planning {s.name}") as advance:
        plan = make_plan(
            s,
            max_accuracy_loss,
            metric,
            calibration=cal,
            replications=replications,
            search_replications=search_replications,
            strategies=strats,
            confidence=confidence,
            objective=objective,
            max_checkpoint_age_h=max_checkpoint_age,
            allow_extrapolation=allow_extrapolation,
            allow_no_full_checkpoint=allow_no_full_checkpoint,
            progress=advance,
            precision=precision,
        )
    d = plan.as_dict()
    if out is not None:
        atomic_write_json(out, d)
    if as_json:
        click.echo(dumps_json(d), nl=False)
        return
    from rich.markup import escape

    con = console()
    con.print(plan_table(plan))
    con.print(f"[bold]Recommendation:[/bold] {escape(plan.message)}")
    for n in plan.notes:
        con.print(f"[yellow]note:[/yellow] {escape(n)}")
    for o in plan.options:
        if o.extrapolation:
            con.print(f"[yellow]warning:[/yellow] {escape(o.label)}: {escape(o.extrapolation)}")


def plan_table(plan):
    """The plan's options as a rich table: intervals, overhead (mean, CI, P90), ETTR, PLS, accuracy."""
    from rich.markup import escape
    from rich.table import Table

    m = plan.metric
    promise = "on the mean" if plan.confidence is None else f"in {100 * plan.confidence:g}% of runs"
    title = (
        f"{plan.scenario}: {m} loss <= {plan.accuracy_bound:g}, {promise}; "
        f"{plan.failure_rate_per_h:.3g} failure events/h (start: {plan.failure_start}); "
        f"search {plan.search_replications} / confirm {plan.replications} fresh replications"
        + (f" (adaptive, precision {plan.precision:g})" if plan.precision is not None else "")
        + f", seed {plan.seed}"
    )
    t = Table(
        title=escape(title),
        caption="* recommended, = tied with it within the 95% CIs; (!) PLS beyond the "
        "calibrated range; P90: of single runs; runs within: share of fresh runs whose loss (upper 95% end) <= the bound "
        "(its 95% lower bound)",
    )
    cols = (
        "option",
        "saves",
        "full saves",
        "overhead ±95% CI",
        "P90",
        "ckpt-rel.",
        "ETTR",
        "PLS mean / P90",
        "PLS bound",
        "runs within (lo)",
        f"{m} loss",
        "meets",
    )
    for col in cols:
        t.add_column(col, justify="left" if col == "option" else "right")
    for o in plan.options:
        mark = " *" if o.label == plan.recommended else (" =" if o.tied else "")
        if o.oracle:
            mark += " (oracle)"
        label = o.label.replace("full (simulated optimum)", "full (sim. optimum)")
        pls_part = o.pls_bound < float("inf")
        t.add_row(
            escape(label + mark),
            f"{o.interval_s / HOUR:.3g} h",
            f"{o.full_interval_s / HOUR:.3g} h",
            f"{100 * o.overhead.mean:.2f}% ±{100 * o.overhead.half_width:.2f}",
            f"{100 * o.overhead.p90:.2f}%",
            f"{100 * o.ckpt_overhead.mean:.2f}%",
            f"{o.ettr.mean:.4f}" if o.ettr is not None else "-",
            f"{o.pls.mean:.3f} / {o.pls.p90:.3f}" if pls_part else "0",
            f"{o.pls_bound:.4g}" if pls_part else "-",
            f"{100 * o.within:.1f}% ({100 * o.within_lo:.1f}%)" if pls_part else "-",
            f"{o.accuracy_loss:.2g}" if pls_part else "0",
            ("yes" if o.meets_bound else "NO") + (" (!)" if o.extrapolation else ""),
        )
    return t
