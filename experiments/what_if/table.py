"""The README's tables from out/sweep*/summary.csv: for each setting and strategy, the grid
interval with the least mean total overhead (95% CI, P90 of single runs; PLS for CPR).

Writes out/tables/random.md (sweep.toml: 4 random servers per failure), out/tables/hosts.md
(sweep-hosts.toml: fixed 4-server hosts), out/tables/bandwidth.md (sweep-bandwidth.toml: each
strategy's best against the write bandwidth) and out/tables/at_0.7h.md (every strategy at the paper's
0.7 h, both sweeps); ``experiments/update_readmes.py`` splices them into README.md. Usage: python table.py [--out out]   (run.sh runs it after the sweeps)
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

from cprsim.io import atomic_write_text

HERE = Path(__file__).resolve().parent
LABEL = {"full": "full recovery", "partial": "CPR-vanilla (PLS)", "ecrm": "ECRM (4 + 1)"}
HOSTS_LABEL = {**LABEL, "ecrm": "ECRM (4 + 1, across hosts)"}


def table(out: Path, sweep: str, mtbf_unit: str, label: dict[str, str]) -> str:
    """The best interval of each (MTBF, write bandwidth, strategy) of one sweep, as a table."""
    path = out / sweep / "summary.csv"
    with path.open() as f:
        rows = list(csv.DictReader(f))
    best: dict[tuple, dict] = {}
    for r in rows:
        key = (
            float(r["failures.domains.0.failure.mtbf_h"]),
            float(r["storage.write_gbps"]),
            r["strategy"],
        )
        if key not in best or float(r["overhead_mean"]) < float(best[key]["overhead_mean"]):
            best[key] = r
    settings = sorted({k[:2] for k in best}, key=lambda x: (-x[0], -x[1]))
    strategies = [s for s in ("full", "partial", "ecrm") if any(k[2] == s for k in best)]
    lines = [
        "| failures | writes | " + " | ".join(label[s] for s in strategies) + " |",
        "|---|---|" + "---|" * len(strategies),
    ]
    for mtbf, bw in settings:
        cells = []
        for s in strategies:
            r = best[(mtbf, bw, s)]

            def pct(k: str, r: dict = r) -> float:
                return 100 * float(r[k])

            c = (
                f"{pct('overhead_mean'):.1f}% [{pct('overhead_lo'):.1f}, {pct('overhead_hi'):.1f}] at "
                f"{float(r['checkpoint.interval_h']):g} h (P90 {pct('overhead_p90'):.1f}%)"
            )
            if s == "partial":
                c += f", PLS {float(r['pls_mean']):.3f}"
            cells.append(c)
        lines.append(f"| {mtbf_unit}MTBF {mtbf:g} h | {bw:g} GB/s | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def at_interval(out: Path, tau: float) -> str:
    """Every setting of both sweeps at one interval: each strategy's mean total overhead [95% CI]
    (and PLS for CPR)."""
    lines = ["| failures | writes | " + " | ".join(LABEL.values()) + " |", "|---|---|---|---|---|"]
    for sweep, unit in (("sweep", "random 4 servers, "), ("sweep-hosts", "fixed hosts, host ")):
        with (out / sweep / "summary.csv").open() as f:
            rows = [r for r in csv.DictReader(f) if float(r["checkpoint.interval_h"]) == tau]
        cell = {
            (
                float(r["failures.domains.0.failure.mtbf_h"]),
                float(r["storage.write_gbps"]),
                r["strategy"],
            ): r
            for r in rows
        }
        for mtbf, bw in sorted({k[:2] for k in cell}, key=lambda x: (-x[0], -x[1])):
            cells = []
            for s in LABEL:
                r = cell.get((mtbf, bw, s))
                if r is None:
                    cells.append("-")
                    continue
                c = (
                    f"{100 * float(r['overhead_mean']):.1f}% [{100 * float(r['overhead_lo']):.1f}, "
                    f"{100 * float(r['overhead_hi']):.1f}]"
                )
                if s == "partial":
                    c += f", PLS {float(r['pls_mean']):.3f}"
                cells.append(c)
            lines.append(f"| {unit}MTBF {mtbf:g} h | {bw:g} GB/s | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def bandwidth(out: Path) -> str:
    """sweep-bandwidth.toml's frontier: for each write bandwidth and strategy, the grid interval
    with the least mean total overhead (95% CI; P90 of single runs; PLS for CPR), and what CPR-MFU
    saves against full recovery there (the numbers behind frontier_write_gbps.png)."""
    with (out / "sweep-bandwidth" / "summary.csv").open() as f:
        rows = list(csv.DictReader(f))
    best: dict[tuple[float, str], dict] = {}
    for r in rows:
        key = (float(r["storage.write_gbps"]), r["strategy"])
        if key not in best or float(r["overhead_mean"]) < float(best[key]["overhead_mean"]):
            best[key] = r
    label = {"full": "full recovery", "partial": "CPR-vanilla", "mfu": "CPR-MFU"}
    strategies = [s for s in label if any(k[1] == s for k in best)]
    lines = [
        "| writes | " + " | ".join(label[s] for s in strategies) + " | MFU saves |",
        "|---|" + "---|" * (len(strategies) + 1),
    ]
    for bw in sorted({k[0] for k in best}):
        cells = []
        for s in strategies:
            r = best.get((bw, s))
            if r is None:
                cells.append("-")
                continue
            c = (
                f"{100 * float(r['overhead_mean']):.1f}% [{100 * float(r['overhead_lo']):.1f}, "
                f"{100 * float(r['overhead_hi']):.1f}] at {float(r['checkpoint.interval_h']):g} h "
                f"(P90 {100 * float(r['overhead_p90']):.1f}%)"
            )
            if s != "full":
                c += f", PLS {float(r['pls_mean']):.3f}"
            cells.append(c)
        full, mfu = best.get((bw, "full")), best.get((bw, "mfu"))
        saves = (
            f"{100 * (float(full['overhead_mean']) - float(mfu['overhead_mean'])):.1f} points"
            if full and mfu
            else "-"
        )
        lines.append(f"| {bw:g} GB/s | " + " | ".join(cells) + f" | {saves} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    """Write (and print) both tables from the sweeps under --out."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=HERE / "out")
    a = ap.parse_args()
    for sweep, name, unit, label in (
        ("sweep", "random", "", LABEL),
        ("sweep-hosts", "hosts", "host ", HOSTS_LABEL),
    ):
        text = table(a.out, sweep, unit, label)
        atomic_write_text(a.out / "tables" / f"{name}.md", text)
        print(f"{sweep}:\n\n{text}")
    text = bandwidth(a.out)
    atomic_write_text(a.out / "tables" / "bandwidth.md", text)
    print(f"sweep-bandwidth:\n\n{text}")
    text = at_interval(a.out, 0.7)
    atomic_write_text(a.out / "tables" / "at_0.7h.md", text)
    print(f"at 0.7 h:\n\n{text}")


if __name__ == "__main__":
    main()
