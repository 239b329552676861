"""``cprsim scenarios`` and ``cprsim show``."""

from __future__ import annotations

import click

from cprsim import scenario as sc
from cprsim.cli.common import load_scenario, model_option, scenario_argument, set_option


@click.command("scenarios")
def scenarios_cmd() -> None:
    """List the built-in scenarios (`cprsim show NAME` prints one in full)."""
    import textwrap

    for name in sc.builtin_names():
        text = textwrap.fill(
            sc.describe_builtin(name),
            width=100,
            initial_indent=f"{name:<24} ",
            subsequent_indent=" " * 25,
        )
        click.echo(text)


@click.command("show")
@scenario_argument
@set_option
@model_option
@click.option("--json", "as_json", is_flag=True, help="JSON instead of TOML.")
def show_cmd(scenario: str, overrides: tuple[str, ...], model: str | None, as_json: bool) -> None:
    """Print the effective config of a scenario (defaults included) and its derived costs."""
    s = load_scenario(scenario, overrides, model=model)
    from cprsim.runfiles import preflight
    from cprsim.sim import strategies as registry

    registry.ensure_loaded()
    # what `cprsim simulate` would refuse (a cost no simulation reaches, a job that cannot
    # progress), refused here too: the costs below would be infinite or meaningless
    preflight(s, None, warn=lambda message: None)  # the event budget is simulate's option
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
    from cprsim.access_report import scenario_access_lines

    for line in scenario_access_lines(s):
        click.echo(f"# {line}")


commands = [scenarios_cmd, show_cmd]
