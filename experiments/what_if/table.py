"""Print the README's tables from out/sweep*/summary.csv: for each setting and strategy, the grid
interval with the least mean total overhead (95% CI, P90 of single runs; PLS for CPR).

Usage: python table.py   (after ./run.sh)
"""

from __future__ import annotations

import csv
from pathlib import Path

HERE = Path(__file__).resolve().parent
LABEL = {"full": "full recovery", "partial": "CPR-vanilla (PLS)", "ecrm": "ECRM (4 + 1)"}


def table(sweep: str, mtbf_unit: str) -> None:
    path = HERE / "out" / sweep / "summary.csv"
    rows = list(csv.DictReader(path.open()))
    best: dict[tuple, dict] = {}
    for r in rows:
        key = (float(r["failures.domains.0.failure.mtbf_h"]), float(r["storage.write_gbps"]), r["strategy"])
        if key not in best or float(r["overhead_mean"]) < float(best[key]["overhead_mean"]):
            best[key] = r
    settings = sorted({k[:2] for k in best}, key=lambda x: (-x[0], -x[1]))
    strategies = [s for s in ("full", "partial", "ecrm") if any(k[2] == s for k in best)]
    print(f"\n{sweep}:\n")
    print("| failures | writes | " + " | ".join(LABEL[s] for s in strategies) + " |")
    print("|---|---|" + "---|" * len(strategies))
    for mtbf, bw in settings:
        cells = []
        for s in strategies:
            r = best[(mtbf, bw, s)]
            pct = lambda k: 100 * float(r[k])  # noqa: E731
            c = (f"{pct('overhead_mean'):.1f}% [{pct('overhead_lo'):.1f}, {pct('overhead_hi'):.1f}] at "
                 f"{float(r['checkpoint.interval_h']):g} h (P90 {pct('overhead_p90'):.1f}%)")
            if s == "partial":
                c += f", PLS {float(r['pls_mean']):.3f}"
            cells.append(c)
        print(f"| {mtbf_unit} MTBF {mtbf:g} h | {bw:g} GB/s | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    table("sweep", "")
    table("sweep-hosts", "host")
