"""Benchmark: start-up of ``cprsim --help`` against ``python -c pass``, measured in the same run.

Each command is started ``--runs`` times, alternately (whole processes, wall clock, median):

* ``python -c pass``: the interpreter alone (the floor);
* ``cprsim --help``: the command line as a user starts it (``python -m cprsim --help``);
* every subcommand module imported: what ``cprsim --help`` cost when the group imported all of
  them at start-up (before issue 15: pydantic, numpy, scipy.stats), for comparison.

Also printed: ``python -X importtime -c "import cprsim.cli"``'s cumulative time for ``cprsim.cli``
(issue 15's target: <= 0.4 s, from ~1.1 s), the heavy modules it did or did not import, and a
check that the summaries ``cprsim --help`` lists without importing the modules
(``cprsim.cli._COMMANDS``) match the commands' own help.

Usage: python benchmarks/startup.py [--runs 7]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

EAGER = (
    "import click; from cprsim.cli import main; ctx = click.Context(main, info_name='cprsim'); "
    "[main.get_command(ctx, n) for n in main.list_commands(ctx)]; main(['--help'])"
)
HEAVY = (
    "scipy.stats",
    "scipy",
    "numpy",
    "pydantic",
    "rich",
    "matplotlib",
    "simpy",
    "cprsim.scenario",
)


def wall(cmd: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def import_times() -> dict[str, int]:
    """Cumulative import time (us) of every module ``import cprsim.cli`` imports."""
    err = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import cprsim.cli"],
        check=True,
        capture_output=True,
        text=True,
    ).stderr
    out = {}
    for line in err.splitlines():
        if line.startswith("import time:") and "|" in line:
            _, cum, name = (x.strip() for x in line.removeprefix("import time:").split("|"))
            if cum.isdigit():
                out[name] = int(cum)
    return out


def summaries_match() -> list[str]:
    """The commands whose summary in ``_COMMANDS`` differs from their own help (empty: all match)."""
    import click

    from cprsim.cli import _COMMANDS, main

    ctx = click.Context(main, info_name="cprsim")
    bad = []
    for name, (_, summary) in _COMMANDS.items():
        cmd = main.get_command(ctx, name)
        own = cmd.get_short_help_str(limit=10_000) if cmd is not None else None
        if own != click.Command(name, help=summary).get_short_help_str(limit=10_000):
            bad.append(name)
    return bad


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=7)
    a = ap.parse_args()
    py = sys.executable
    cmds = {
        "python -c pass": [py, "-c", "pass"],
        "cprsim --help": [py, "-m", "cprsim", "--help"],
        "every subcommand module imported": [py, "-c", EAGER],
    }
    for c in cmds.values():  # warm-up: the file cache
        wall(c)
    times: dict[str, list[float]] = {k: [] for k in cmds}
    for _ in range(a.runs):
        for k, c in cmds.items():
            times[k].append(wall(c))
    med = {k: statistics.median(v) for k, v in times.items()}
    base = med["python -c pass"]
    print(f"start-up, whole process, median of {a.runs} alternating runs")
    print(f"{'command':36s} {'seconds':>8s} {'minus python -c pass':>21s}")
    for k, v in med.items():
        print(f"{k:36s} {v:8.3f} {v - base:21.3f}")
    imp = import_times()
    print(
        f"import cprsim.cli (python -X importtime, cumulative): {imp.get('cprsim.cli', 0) / 1e6:.3f} s "
        "(target <= 0.4 s)"
    )
    print("  heavy modules imported: " + (", ".join(m for m in HEAVY if m in imp) or "none"))
    bad = summaries_match()
    print(
        "cprsim --help summaries match the commands' own help: "
        + ("yes" if not bad else f"NO: {', '.join(bad)}")
    )


if __name__ == "__main__":
    main()
