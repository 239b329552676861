"""Write a quick-mode copy of a sweep file: fewer replications, a smaller grid (``QUICK=1 run.sh``).

The copy keeps the file's comments, strategies and ``[set]``; it replaces ``replications`` and the
grid lines named on the command line, and makes a relative ``scenario`` path absolute (the copy
lives elsewhere), or points it into ``--scenario-dir``. Every replaced value must exist in the file
(a typo fails here, not in the sweep).

Usage: python quick_sweep.py SWEEP.toml DEST.toml [--scenario-dir DIR] [replications=N]
[KEY=V1,V2,...] [set.KEY=V] [plan.KEY=V]   (KEY: a grid key of the file, as written there, e.g.
checkpoint.interval_h; set.KEY: a scenario key fixed for every point, added to [set], e.g.
set.job.duration_h=48; plan.KEY: a key added to the file's [plan] table, e.g. plan.replications=30)
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from pathlib import Path


def rewrite(text: str, src: Path, settings: list[str], scenario_dir: Path | None) -> str:
    """The sweep file ``text`` (read from ``src``) with the ``KEY=VALUES`` settings applied."""
    for item in settings:
        doc = tomllib.loads(text)  # as rewritten so far
        key, sep, values = item.partition("=")
        if not sep or not values:
            raise SystemExit(f"quick_sweep.py: expected KEY=VALUES, got {item!r}")
        if key == "replications":
            text, n = re.subn(
                r"(?m)^replications[ \t]*=[ \t]*\d+[ \t]*$", f"replications = {int(values)}", text
            )
        elif key.startswith("set."):  # a fixed override added to the [set] table
            sub = key.removeprefix("set.")
            if sub in doc.get("set", {}) or sub in doc.get("grid", {}):
                raise SystemExit(
                    f"quick_sweep.py: {src}: {sub!r} is in its [set] or [grid] already"
                )
            line = f"{_toml(sub)} = {_toml(tomllib.loads(f'v = {values}')['v'])}"
            if "set" in doc:
                text, n = re.subn(r"(?m)^\[set\][ \t]*$", f"[set]\n{line}", text)
            else:
                text, n = text.rstrip("\n") + f"\n\n[set]\n{line}\n", 1
        elif key.startswith("plan."):  # a key added to the [plan] table
            sub = key.removeprefix("plan.")
            if "plan" not in doc or sub in doc["plan"]:
                raise SystemExit(
                    f"quick_sweep.py: {src}: no [plan] table, or it sets {sub!r} already"
                )
            new = tomllib.loads(f"v = {values}")["v"]
            text, n = re.subn(r"(?m)^\[plan\][ \t]*$", f"[plan]\n{sub} = {_toml(new)}", text)
        else:
            if key not in doc.get("grid", {}):
                raise SystemExit(f"quick_sweep.py: {src}: no grid key {key!r}")
            new = tomllib.loads(f"v = [{values}]")["v"]  # TOML values: 0.7, 16, "fixed"
            line = f'"{key}" = [' + ", ".join(_toml(v) for v in new) + "]"
            text, n = re.subn(rf'(?m)^"{re.escape(key)}"[ \t]*=[ \t]*\[.*\][ \t]*$', line, text)
        if n != 1:
            raise SystemExit(f"quick_sweep.py: {src}: cannot replace {key!r} (found {n} lines)")
    scen = tomllib.loads(text)["scenario"]
    if scen.endswith(".toml") and not Path(scen).is_absolute():
        where = scenario_dir / Path(scen).name if scenario_dir else src.resolve().parent / scen
        text, n = re.subn(
            r'(?m)^scenario[ \t]*=[ \t]*".*"[ \t]*$', f"scenario = {_toml(str(where))}", text
        )
        if n != 1:
            raise SystemExit(f"quick_sweep.py: {src}: cannot replace the scenario line")
    tomllib.loads(text)  # still TOML
    return f"# QUICK-mode copy of {src} (quick_sweep.py {' '.join(settings)})\n" + text


def _toml(v: object) -> str:
    """A scalar as TOML (strings quoted, numbers as Python writes them)."""
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, bool):
        return "true" if v else "false"
    return repr(v)


def main(argv: list[str] | None = None) -> None:
    """Read the sweep file, apply the settings, write the copy (creating its folder)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src", type=Path)
    ap.add_argument("dest", type=Path)
    ap.add_argument("settings", nargs="*", metavar="KEY=VALUES")
    ap.add_argument("--scenario-dir", type=Path)
    a = ap.parse_intermixed_args(argv)
    text = rewrite(a.src.read_text(), a.src, a.settings, a.scenario_dir)
    a.dest.parent.mkdir(parents=True, exist_ok=True)
    a.dest.write_text(text)
    print(f"quick_sweep.py: wrote {a.dest}", file=sys.stderr)


if __name__ == "__main__":
    main()
