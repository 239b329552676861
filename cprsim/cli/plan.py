"""``cprsim plan``: the CPR planner, on a scenario or on a quick operator's description."""

from __future__ import annotations

import math

from pathlib import Path
from typing import Any

import click

from cprsim.cli.common import console

from cprsim import scenario as sc
from cprsim.cli.common import load_scenario, progress_bar, set_option
from cprsim.io import atomic_write_json, dumps_json
from cprsim.scenario import HOUR


def quick_scenario(embedding_servers: int, trainers: int, node_mtbf_h: float, save_s: float, load_s: float,
                   reschedule_s: float, shard_load_s: float | None, duration_h: float,
                   samples_per_s: float | None, replications: int, seed: int) -> sc.Scenario:
    """A scenario from the handful of numbers an operator knows (per-node exponential failures)."""
    raw: dict[str, Any] = {
        "name": "quick",
        "description": "built from cprsim plan's quick options",
        "seed": seed,
        "replications": replications,
        "cluster": {"trainers": trainers, "embedding_servers": embedding_servers},
        "job": {"duration_h": duration_h},
        "reschedule": {"family": "constant", "mean_s": reschedule_s},
        "failures": {"trainer": {"family": "exponential", "mtbf_h": node_mtbf_h},
                     "embedding": {"family": "exponential", "mtbf_h": node_mtbf_h}},
        "costs": {"save_s": save_s, "load_s": load_s,
                  "shard_load_s": shard_load_s if shard_load_s is not None else max(load_s / embedding_servers, 1e-3)},
        "checkpoint": {"interval_h": min(1.0, duration_h)},
    }
    if samples_per_s is not None:
        raw["job"]["samples_per_s"] = samples_per_s
    return sc.validate(raw, "cprsim plan (quick options)")


@click.command("plan")
@click.argument("scenario", metavar="[NAME|FILE]", required=False)
@click.option("--max-accuracy-loss", type=float, required=True,
              help="The accuracy loss you accept, e.g. 0.001 (AUC points or log-loss).")
@click.option("--metric", type=click.Choice(["auc", "logloss"]), default="auc", show_default=True)
@set_option
@click.option("--replications", "-n", type=click.IntRange(min=2), help="Replications confirming each option.")
@click.option("--strategies", default="partial,mfu,ssu", show_default=True,
              help="Strategies to rank besides full recovery (comma-separated, or `all`: "
                   "partial, mfu, ssu, lookahead, ecrm, checknrun).")
@click.option("--calibration", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="calibration.toml from `cprsim calibrate` (default: the one shipped).")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="Also write the plan as JSON here.")
@click.option("--embedding-servers", type=click.IntRange(min=1), help="Quick form: embedding servers.")
@click.option("--trainers", type=click.IntRange(min=1), default=1, show_default=True, help="Quick form: trainers.")
@click.option("--node-mtbf-h", type=click.FloatRange(min=0, min_open=True), help="Quick form: MTBF of one node (h).")
@click.option("--save-s", type=click.FloatRange(min=0, min_open=True), help="Quick form: blocking checkpoint save (s).")
@click.option("--load-s", type=click.FloatRange(min=0, min_open=True), help="Quick form: full checkpoint load (s).")
@click.option("--shard-load-s", type=click.FloatRange(min=0, min_open=True),
              help="Quick form: one shard's load (s); default load-s / embedding servers.")
@click.option("--reschedule-s", type=click.FloatRange(min=0, min_open=True), default=300.0, show_default=True,
              help="Quick form: rescheduling a failed node (s).")
@click.option("--duration-h", type=click.FloatRange(min=0, min_open=True), default=50.0, show_default=True,
              help="Quick form: failure-free training time (h).")
@click.option("--samples-per-s", type=click.FloatRange(min=0, min_open=True),
              help="Quick form: throughput (needed for MFU/SSU).")
@click.option("--seed", type=click.IntRange(min=0), default=1, show_default=True, help="Quick form: seed.")
def command(scenario: str | None, max_accuracy_loss: float, metric: str, sets: tuple[str, ...],
            replications: int | None, strategies: str, calibration: Path | None, as_json: bool, out: Path | None,
            embedding_servers: int | None, trainers: int, node_mtbf_h: float | None, save_s: float | None,
            load_s: float | None, shard_load_s: float | None, reschedule_s: float, duration_h: float,
            samples_per_s: float | None, seed: int) -> None:
    """Pick the checkpoint interval and recovery strategy for an accuracy bound.

    Compares full recovery (Young, Daly, simulated optimum) with CPR partial recovery
    (vanilla, MFU, SSU), each confirmed by simulation with 95% CIs.
    Without a scenario, give the quick options: --embedding-servers, --node-mtbf-h, --save-s,
    --load-s (and optionally --trainers, --reschedule-s, --duration-h, --samples-per-s).
    """
    from cprsim.plan import make_plan

    if scenario is None:
        missing = [n for n, v in (("--embedding-servers", embedding_servers), ("--node-mtbf-h", node_mtbf_h),
                                  ("--save-s", save_s), ("--load-s", load_s)) if v is None]
        if missing:
            raise click.UsageError(f"give a scenario, or the quick options (missing: {', '.join(missing)})")
        s = quick_scenario(embedding_servers, trainers, node_mtbf_h, save_s, load_s, reschedule_s,  # type: ignore[arg-type]
                           shard_load_s, duration_h, samples_per_s, replications or 100, seed)
        if sets:
            s = s.with_updates(sc.parse_set(sets))
    else:
        s = load_scenario(scenario, sets)
    cal = None
    if calibration is not None:
        from cprsim.calibrate.calibration import load_calibration

        cal = load_calibration(calibration)
    from cprsim.plan import ALL_STRATEGIES

    strats = list(ALL_STRATEGIES) if strategies.strip() == "all" else \
        [x.strip() for x in strategies.split(",") if x.strip()]
    unknown = [x for x in strats if x not in ALL_STRATEGIES]
    if unknown:
        raise click.BadParameter(f"unknown {', '.join(unknown)} (choose from {', '.join(ALL_STRATEGIES)}, or all)",
                                 param_hint="--strategies")
    with progress_bar(30, f"planning {s.name}") as advance:
        plan = make_plan(s, max_accuracy_loss, metric, calibration=cal, replications=replications,
                         strategies=strats, progress=advance)
    d = plan.as_dict()
    if out is not None:
        atomic_write_json(out, d)
    if as_json:
        click.echo(dumps_json(d), nl=False)
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"{s.name}: {metric} loss <= {max_accuracy_loss:g} -> PLS <= {plan.pls_bound:.4g}; "
              f"{plan.failure_rate_per_h:.3g} failures/h; {plan.replications} replications, seed {plan.seed}")
    for col in ("option", "interval", "overhead (95% CI)", "ckpt-related", "PLS (95% CI)", "PLS bound",
                f"{metric} loss", "meets"):
        t.add_column(col, justify="left" if col == "option" else "right")
    for o in plan.options:
        star = " *" if o.label == plan.recommended else ""
        t.add_row(o.label + star, f"{o.interval_s / HOUR:.3g} h",
                  f"{100 * o.overhead.mean:.2f}% [{100 * o.overhead.lo:.2f}, {100 * o.overhead.hi:.2f}]",
                  f"{100 * o.ckpt_overhead.mean:.2f}%",
                  f"{o.pls.mean:.4f} [{o.pls.lo:.4f}, {o.pls.hi:.4f}]",
                  "-" if math.isinf(o.pls_bound) else f"{o.pls_bound:.4g}", f"{o.accuracy_loss:.2g}",
                  "yes" if o.meets_bound else "NO")
    con = console()
    con.print(t)
    con.print(f"[bold]Recommendation:[/bold] {plan.message}")
    for n in plan.notes:
        con.print(f"[yellow]note:[/yellow] {n}")
