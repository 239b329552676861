"""``cprsim simulate``: replications of one scenario, a table, and files."""

from __future__ import annotations

from pathlib import Path

import click

from cprsim.cli.common import (
    DURATION,
    console,
    load_scenario,
    max_events_option,
    model_option,
    scenario_argument,
    set_option,
)
from cprsim.cli.progress import Progress, outputs_at_end, writing
from cprsim.io import dumps_json
from cprsim.report import summary_table
from cprsim.runfiles import write_run, write_timeline
from cprsim.sim.replicate import METRICS
from cprsim.usecases import prepare_simulation

__all__ = ["command"]


def _strategy_names() -> list[str]:
    """The built-in strategies, for the help: it imports no plugin (whatever is installed, the help
    and docs/cli.md stay the same); a plugin's name is checked when the command runs."""
    from cprsim.sim import strategies

    return strategies.builtin_names()


@click.command("simulate")
@scenario_argument
@click.option(
    "--strategy",
    help=f"Recovery strategy: {', '.join(_strategy_names())}, or one an installed plugin "
    "registers (entry-point group cprsim.strategies) (parameters: the scenario's "
    "[strategy] table; see docs/concepts.md).",
)
@click.option(
    "--interval", type=DURATION, help="Checkpoint interval: 90s, 30m, 1.5h (bare number: hours)."
)
@click.option(
    "--replications",
    "-n",
    type=click.IntRange(min=1),
    help="Number of replications (default: the scenario's); with --precision, the most.",
)
@click.option(
    "--precision",
    type=click.FloatRange(min=0, min_open=True),
    metavar="REL",
    help="Adaptive replication: stop once the 95% CI half-width of the mean --precision-metric is "
    "within REL of the mean (0.02: 2%), checked after --min-replications and every 10 more, in "
    "replication order (same seed, same count); -n caps it.",
)
@click.option(
    "--min-replications",
    type=click.IntRange(min=2),
    default=20,
    show_default=True,
    help="With --precision: replications before the first check.",
)
@click.option(
    "--precision-metric",
    type=click.Choice(list(METRICS)),
    default="overhead",
    show_default=True,
    help="With --precision: the metric whose mean must reach it.",
)
@click.option("--seed", type=click.IntRange(min=0), help="Root seed of every random stream.")
@set_option
@model_option
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    help="Write config.toml, summary.json, replications.csv, events.csv here.",
)
@click.option(
    "--timeline",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write replication 0 as a Chrome/Perfetto trace JSON.",
)
@click.option(
    "--json", "as_json", is_flag=True, help="Print the summary as JSON instead of a table."
)
@click.option(
    "--force",
    is_flag=True,
    help="Simulate even a regime the analytic check calls hopeless (each replication still stops "
    "after 200,000 failure events, or past 1000x the job's work in wall time). Costs that are "
    "not finite or beyond any simulated time are refused all the same.",
)
@max_events_option
def command(
    scenario: str,
    strategy: str | None,
    interval: float | None,
    replications: int | None,
    precision: float | None,
    min_replications: int,
    precision_metric: str,
    seed: int | None,
    overrides: tuple[str, ...],
    model: str | None,
    out: Path | None,
    timeline: Path | None,
    as_json: bool,
    force: bool,
    max_events: float,
) -> None:
    """Simulate a scenario (built-in NAME or TOML FILE) and report the overhead breakdown.

    With --precision, replications are added until the mean is known to that relative precision
    (at least --min-replications, at most -n); the number run is itself reproducible.
    """
    ctx = click.get_current_context()
    if precision is None:
        for name in ("min_replications", "precision_metric"):
            if ctx.get_parameter_source(name) is not click.core.ParameterSource.DEFAULT:
                raise click.UsageError(f"--{name.replace('_', '-')} needs --precision")
    from cprsim.sim import strategies as registry

    registry.ensure_loaded()  # a broken plugin: its own one-line error, before the scenario's checks
    s = load_scenario(
        scenario,
        overrides,
        {
            "strategy": ("strategy.name", strategy),
            "interval": ("checkpoint.interval_h", interval),
            "replications": ("replications", replications),
            "seed": ("seed", seed),
        },
        model,
    )
    simulation = prepare_simulation(
        s,
        precision=precision,
        min_replications=min_replications,
        precision_metric=precision_metric,
        max_events=max_events,
        force=force,
        warn=lambda message: click.echo(f"warning: {message}", err=True),
    )
    rule = simulation.rule
    outputs_at_end()
    unit = "replications" if rule is None else "replications (at most)"
    with Progress(s.replications, f"simulating {s.name}", unit) as advance:
        done = simulation.run(record=out is not None or timeline is not None, progress=advance)
    results, events, summary = done.results, done.events, done.summary()
    with writing():
        if out is not None:
            write_run(out, s, results, events, summary)
        if timeline is not None:
            write_timeline(timeline, s, events)
    if as_json:
        click.echo(dumps_json(summary), nl=False)
        return
    con = console()
    con.print(summary_table(s, results, summary=summary))
    if rule is not None:
        a = summary["adaptive"]
        con.print(
            f"{len(results)} replications ({rule.describe()}): "
            + ("precision reached" if a["reached"] else "stopped at the cap before reaching it")
        )
