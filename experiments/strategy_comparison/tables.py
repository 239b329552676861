"""The README's interval-sweep table from out/sweep/summary.csv: total overhead of each strategy
at each interval, mean (P90 of single runs), and CPR-vanilla's mean PLS.

Writes out/tables/sweep.md (``experiments/update_readmes.py`` splices it into README.md).
Usage: python tables.py [--out out]   (run.sh runs it after the sweep)
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

from cprsim.io import atomic_write_text

LABEL = {"full": "full", "partial": "CPR-vanilla (PLS)", "ecrm": "ECRM", "checknrun": "Check-N-Run"}


def pct(x: float) -> str:
    """A fraction as a percentage with about three significant figures (1,234%, 12.3%, 1.23%)."""
    v = 100 * x
    if abs(v) >= 100:
        return f"{v:,.0f}%"
    return f"{v:.1f}%" if abs(v) >= 10 else f"{v:.2f}%"


def sweep_table(summary: Path) -> str:
    """One row per interval, one column per strategy: mean (P90), and PLS for CPR-vanilla."""
    with summary.open() as f:
        rows = list(csv.DictReader(f))
    cell = {(float(r["checkpoint.interval_h"]), r["strategy"]): r for r in rows}
    taus = sorted({t for t, _ in cell})
    strategies = [s for s in LABEL if any(k[1] == s for k in cell)]
    lines = [
        "| interval | " + " | ".join(LABEL[s] for s in strategies) + " |",
        "|---|" + "---|" * len(strategies),
    ]
    for t in taus:
        cells = []
        for s in strategies:
            r = cell[(t, s)]
            c = f"{pct(float(r['overhead_mean']))} ({pct(float(r['overhead_p90']))})"
            if s == "partial":
                c += f", {float(r['pls_mean']):.4f}"
            cells.append(c)
        lines.append(f"| {t:g} h | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    """Read the sweep's summary under --out, write the table there."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(__file__).with_name("out"))
    a = ap.parse_args()
    text = sweep_table(a.out / "sweep" / "summary.csv")
    atomic_write_text(a.out / "tables" / "sweep.md", text)
    print(text)


if __name__ == "__main__":
    main()
