"""The README's interval table from the sweep: total overhead (mean, P90 of single runs) and, for
CPR, PLS (mean, P90) of each strategy at each interval of ``out/sweep/summary.csv``.

Writes ``out/tables/intervals.md`` (``experiments/update_readmes.py`` splices it into README.md).
Usage: python tables.py [--out out]   (run.sh runs it after the sweep)
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

from cprsim.io import atomic_write_text

LABEL = {"full": "full", "partial": "CPR-vanilla", "mfu": "CPR-MFU", "ssu": "CPR-SSU"}


def intervals(summary: Path) -> str:
    """The table: one row per interval, one column per strategy (in LABEL's order)."""
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
            c = f"{100 * float(r['overhead_mean']):.1f}% (P90 {100 * float(r['overhead_p90']):.1f}%)"
            if s != "full":
                c += f", PLS {float(r['pls_mean']):.3f} (P90 {float(r['pls_p90']):.3f})"
            cells.append(c)
        lines.append(f"| {t:g} h | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    """Read the sweep's summary under --out, write the table there."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(__file__).with_name("out"))
    a = ap.parse_args()
    text = intervals(a.out / "sweep" / "summary.csv")
    atomic_write_text(a.out / "tables" / "intervals.md", text)
    print(text)


if __name__ == "__main__":
    main()
