"""``cprsim scenarios`` and ``cprsim show``."""

from __future__ import annotations

import click

from cprsim import scenario as sc
from cprsim.cli.common import load_scenario, scenario_argument, set_option


@click.command("scenarios")
def scenarios_cmd() -> None:
    """List the built-in scenarios."""
    for name in sc.builtin_names():
        click.echo(f"{name:<24} {sc.describe_builtin(name)}")


@click.command("show")
@scenario_argument
@set_option
@click.option("--json", "as_json", is_flag=True, help="JSON instead of TOML.")
def show_cmd(scenario: str, sets: tuple[str, ...], as_json: bool) -> None:
    """Print the effective config of a scenario (defaults included) and its derived costs."""
    s = load_scenario(scenario, sets)
    d = sc.effective_dict(s)
    if as_json:
        from cprsim.io import dumps_json

        click.echo(dumps_json(d), nl=False)
        return
    from cprsim.costs import costs_of

    c = costs_of(s)
    click.echo(sc.to_toml(d), nl=False)
    click.echo(
        f"\n# derived: save {c.save_s:.1f} s, full load {c.load_s:.1f} s, shard load {c.shard_load_s():.1f} s,"
        f" snapshot {c.snapshot_s:.2f} s, checkpoint {c.bytes_total / 1e9:.1f} GB"
    )
    for line in access_lines(s):
        click.echo(f"# {line}")


def access_lines(s) -> list[str]:
    """What the access model derives from the scenario: rows, skew, rows touched per interval."""
    from cprsim import access

    if s.cluster.embedding_gb <= 0 or s.cluster.embedding_servers == 0:
        return ["embedding rows: none (no embedding tables: a dense model)"]
    lay, model = access.layout(s), access.of(s)
    how = (
        "rows from embedding_gb / (dim x bytes_per_param)"
        if lay.derived == "rows"
        else "dim from embedding_gb / (rows x bytes_per_param)"
    )
    out = [
        f"embedding rows: {lay.rows:,} in {len(lay.tables)} tables x {lay.dim:.4g} dims x "
        f"{lay.bytes_per_param:g} B = {lay.rows * lay.row_bytes / 1e9:.4g} GB ({how})",
        f"access skew: Zipf alpha {model.alpha:.4f}; the top 1% of rows take {100 * model.coverage(0.01):.1f}% of "
        "accesses",
    ]
    if s.job.samples_per_s is None:
        out.append("rows touched per checkpoint interval: unknown (give job.samples_per_s)")
    else:
        n = s.interval_s * s.job.samples_per_s
        out.append(
            f"rows touched per checkpoint interval ({s.checkpoint.interval_h:g} h = {n:.3g} samples): "
            f"{100 * float(model.touched(n)):.3g}%; MFU's top 1%/5% protect "
            f"{100 * model.in_sample_coverage(0.01, n):.4g}%/{100 * model.in_sample_coverage(0.05, n):.4g}% "
            "of the interval's updates"
        )
    return out


commands = [scenarios_cmd, show_cmd]
