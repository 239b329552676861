"""``cprsim calibrate``: measure accuracy loss against PLS on a real PyTorch DLRM."""

from __future__ import annotations

from pathlib import Path

import click

from cprsim.cli.common import load_scenario, progress_bar


@click.command("calibrate")
@click.option("--preset", type=click.Choice(["quick", "standard", "paper"]), default="quick",
              show_default=True, help="Size of the experiment (quick ~1 min, standard ~15 min, paper ~2.3 h on 2 cores; docs/calibration.md).")
@click.option("--from-sim", "from_sim", metavar="NAME|FILE",
              help="Take the failure schedule from simulating this scenario with partial recovery.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("out/calibrate"),
              show_default=True, help="Write calibration.toml, points.csv and the plot here.")
@click.option("--no-costs", is_flag=True, help="Skip the save/load timing and the end-to-end check.")
def command(preset: str, from_sim: str | None, out: Path, no_costs: bool) -> None:
    """Train a DLRM with injected partial-recovery failures; fit accuracy loss against PLS."""
    try:
        import torch  # noqa: F401
    except ImportError:
        raise click.ClickException("calibrate needs torch: pip install 'cprsim[dlrm]'") from None
    from cprsim.calibrate.pipeline import calibrate
    from cprsim.calibrate.runner import PRESETS, n_steps

    p = PRESETS[preset]
    scen = load_scenario(from_sim, ()) if from_sim else None
    total = n_steps(p) + (0 if no_costs else 1)
    with progress_bar(total, f"calibrating ({preset})") as advance:
        doc = calibrate(p, out, advance, scen, measure_costs=not no_costs)
    for st, f in doc["fit"].items():
        click.echo(f"{st:10s} AUC loss = {f['auc_slope']:.4g} x PLS "
                   f"[{f['auc_slope_lo']:.3g}, {f['auc_slope_hi']:.3g}] R²={f['auc_r2']:.2f}; "
                   f"log-loss +{f['logloss_slope']:.4g} x PLS; mean PLS {f['mean_pls']:.4f}")
    click.echo(f"wrote {out / 'calibration.toml'}")
