"""Tables (out/tables.md) and figures (out/*.png) of README.md, from the sweeps' out/*/summary.csv
and results.csv(.gz), out/feasibility/summary.csv, out/simulate-*/summary.json and
out/plan-llm-16k-gpus.json. Each section's tables also go to out/tables/SECTION.md (headings one
level down), which ``experiments/update_readmes.py`` splices into README.md.

Usage: python analyze.py [--out out]   (after the sweeps; run.sh does it all)

Conventions: overhead = (wall - W) / W with W the failure-free time (dlrm-spares 50 h,
llm-16k-gpus 336 h); ETTR = W / wall; "badput" = wall - W, split by cause as in cprsim's
summary.json (detection, waiting for a machine, replacement = rescheduling - detection - waiting,
load, re-execution, save stalls, degraded progress). Means with 95% CIs (Student t over
replications), P50/P90/P99 of single replications.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import numpy as np
from matplotlib.colors import LogNorm, Normalize
from matplotlib.figure import Figure

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"  #: the folder read and written (--out)
W_DLRM = 50 * 3600.0
W_LLM = 336 * 3600.0

#: badput causes: (label, colour, function of a summary row -> mean seconds); colours as cprsim's plots
CAUSES = [
    ("save stalls", "#4c72b0", lambda r: r["save_s_mean"]),
    ("load", "#55a868", lambda r: r["load_s_mean"]),
    ("re-execution", "#c44e52", lambda r: r["lost_s_mean"]),
    ("detection", "#937860", lambda r: r["detection_s_mean"]),
    ("waiting for a machine", "#da8bc3", lambda r: r["wait_s_mean"]),
    (
        "replacement (swap-in / host selection)",
        "#8172b2",
        lambda r: r["reschedule_s_mean"] - r["detection_s_mean"] - r["wait_s_mean"],
    ),
    ("degraded progress (persist slowdown)", "#ccb974", lambda r: r["degraded_s_mean"]),
]


# -- loading ---------------------------------------------------------------------------------------
def _num(v: str):
    try:
        return float(v)
    except ValueError:
        return v


def summary(name: str) -> list[dict]:
    """A sweep's summary.csv under OUT, numbers as floats."""
    with (OUT / name / "summary.csv").open() as f:
        return [{k: _num(v) for k, v in r.items()} for r in csv.DictReader(f)]


def results(name: str) -> list[dict]:
    """A sweep's results.csv (or .csv.gz) under OUT, numbers as floats."""
    p = OUT / name / "results.csv"
    with p.open() if p.exists() else gzip.open(p.with_suffix(".csv.gz"), "rt") as f:
        return [{k: _num(v) for k, v in r.items()} for r in csv.DictReader(f)]


def feasibility() -> list[dict]:
    """feasibility.py's summary.csv under OUT, numbers as floats."""
    with (OUT / "feasibility" / "summary.csv").open() as f:
        return [{k: _num(v) for k, v in r.items()} for r in csv.DictReader(f)]


def pick(rows: list[dict], **kw) -> dict | None:
    """The row whose columns (dots written as __) equal the given values."""
    for r in rows:
        if all(r.get(k.replace("__", ".")) == v for k, v in kw.items()):
            return r
    return None


def attach_tail(name: str, rows: list[dict], keys: list[str], w: float) -> None:
    """Add to each summary row the share of its replications whose wall time exceeds 2 W and 10 W."""
    per: dict[tuple, list[float]] = {}
    for r in results(name):
        per.setdefault(tuple(r[k] for k in keys), []).append(r["wall_s"])
    for r in rows:
        wall = np.array(per[tuple(r[k] for k in keys)])
        r["gt2W"] = float(np.mean(wall > 2 * w))
        r["gt10W"] = float(np.mean(wall > 10 * w))
        r["wall_max_h"] = float(wall.max() / 3600)


# -- formatting ------------------------------------------------------------------------------------
def pct(x: float, d: int = 1) -> str:
    """A fraction as a percentage ("-" for none, "∞" for inf, thousands separated)."""
    if isinstance(x, str) or x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if math.isinf(x):
        return "∞"
    return f"{100 * x:.{d}f}%" if abs(100 * x) < 1000 else f"{100 * x:,.0f}%"


def ovh_cell(r: dict, p99: bool = True) -> str:
    """A summary row's overhead: mean [95% CI]; P50, P90 (and P99)."""
    s = (
        f"{pct(r['overhead_mean'])} [{pct(r['overhead_lo'])}, {pct(r['overhead_hi'])}]; "
        f"P50 {pct(r['overhead_p50'])}, P90 {pct(r['overhead_p90'])}"
    )
    return s + (f", P99 {pct(r['overhead_p99'])}" if p99 else "")


def badput_share(r: dict, key: str, w: float) -> float:
    """A badput component's share of the mean badput (wall - W)."""
    bad = r["overhead_mean"] * w
    return r[key] / bad if bad > 0 else 0.0


def table(lines: list[str], header: list[str], rows: list[list[str]]) -> None:
    """Append a markdown table (and a blank line) to ``lines``."""
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "---|" * len(header))
    for row in rows:
        lines.append("| " + " | ".join(row) + " |")
    lines.append("")


def save(fig: Figure, name: str) -> None:
    """Save a figure under OUT."""
    fig.savefig(OUT / name, dpi=100)
    print(f"wrote out/{name}")


# -- dlrm-spares -----------------------------------------------------------------------------------
SB = [0, 1, 2, 4, 8]
SP = [0, 2, 4, 8, 16]


def pools(md: list[str]) -> None:
    """Warm standbys x spares: the tables (with retirement on, from feasibility.py) and pools.png."""
    keys = ["lifecycle.standbys", "lifecycle.spares"]
    rows = summary("pools")
    attach_tail("pools", rows, keys, W_DLRM)
    ret = [
        f
        for f in feasibility()
        if f["group"] == "retirement" and f["lifecycle.health.bad_fraction"] == ""
    ]

    def cell(sb: int, sp: int) -> dict:
        return pick(rows, lifecycle__standbys=sb, lifecycle__spares=sp)

    n = _n(rows)
    md.append(
        f"### Warm standbys x spares (dlrm-spares without retirement, {n} replications a point)\n"
    )
    md.append("Total overhead: mean [95% CI]; P50, P90, P99 of single runs.\n")
    hdr = ["standbys \\ spares"] + [str(s) for s in SP]
    body = []
    for sb in SB:
        body.append([str(sb)] + [ovh_cell(cell(sb, sp)) for sp in SP])
    table(md, hdr, body)
    md.append(
        "Share of badput spent waiting for a machine (mean wait / mean badput), and the share of "
        "replications that take more than twice the failure-free time (wall > 2 W = 100 h):\n"
    )
    body = []
    for sb in SB:
        row = [str(sb)]
        for sp in SP:
            r = cell(sb, sp)
            row.append(
                f"{pct(badput_share(r, 'wait_s_mean', W_DLRM))}; > 2 W: {pct(r['gt2W'])} "
                f"(longest {r['wall_max_h']:,.0f} h)"
            )
        body.append(row)
    table(md, hdr, body)
    md.append(
        "Retirement on (dlrm-spares as built in: 3 failures in 24 h retire a machine; feasibility.py, "
        f"{int(ret[0]['replications'])} replications): replications in which the fleet runs out of machines (`cprsim` stops the "
        "replication, and a sweep, with a one-line error); when none does, the mean overhead with "
        "retirement on vs off, and the machines retired per job (mean):\n"
    )
    body = []
    for sb in SB:
        row = [str(sb)]
        for sp in SP:
            f = pick(ret, lifecycle__standbys=sb, lifecycle__spares=sp)
            r = cell(sb, sp)
            if f["exhausted"] > 0:
                row.append(f"**{int(f['exhausted'])}/{int(f['replications'])} exhausted**")
            else:
                row.append(
                    f"0 exhausted; {pct(f['overhead_mean'])} (off: {pct(r['overhead_mean'])}); "
                    f"{f['retired_mean_finished']:.2f} retired"
                )
        body.append(row)
    table(md, hdr, body)

    # figure: 3 heat maps
    fig = Figure(figsize=(15, 5.2), layout="constrained")
    axs = fig.subplots(1, 3)
    mean = np.full((len(SB), len(SP)), np.nan)
    wait = np.full_like(mean, np.nan)
    exh = np.full_like(mean, np.nan)
    for i, sb in enumerate(SB):
        for j, sp in enumerate(SP):
            r = cell(sb, sp)
            mean[i, j] = 100 * r["overhead_mean"]
            wait[i, j] = 100 * badput_share(r, "wait_s_mean", W_DLRM)
            f = pick(ret, lifecycle__standbys=sb, lifecycle__spares=sp)
            exh[i, j] = 100 * f["exhausted"] / f["replications"]
    finite = mean[np.isfinite(mean)]
    panels = [
        (
            axs[0],
            mean,
            LogNorm(vmin=max(1.0, finite.min()), vmax=finite.max()),
            "viridis_r",
            "total overhead, mean (% of W; colour)\ntext: mean, P90, P99 of single runs",
        ),
        (axs[1], wait, Normalize(0, 100), "magma_r", "share of badput waiting for a machine (%)"),
        (
            axs[2],
            exh,
            Normalize(0, 100),
            "Reds",
            "retirement on: replications whose fleet\nruns out of machines (%)",
        ),
    ]
    for k, (ax, data, norm, cmap, title) in enumerate(panels):
        im = ax.imshow(
            np.ma.masked_invalid(data), norm=norm, cmap=cmap, origin="lower", aspect="auto"
        )
        ax.set_facecolor("#dddddd")
        fig.colorbar(im, ax=ax, shrink=0.85)
        ax.set_xticks(range(len(SP)), [str(s) for s in SP])
        ax.set_yticks(range(len(SB)), [str(s) for s in SB])
        ax.set_xlabel("spares (select ~10 min)")
        ax.set_ylabel("warm standbys (swap 2 min)")
        ax.set_title(title, fontsize=10)
        for i, sb in enumerate(SB):
            for j, sp in enumerate(SP):
                r = cell(sb, sp)
                if k == 2:
                    txt = f"{data[i, j]:.0f}%"
                elif k == 0:
                    txt = (
                        f"{_g(data[i, j])}%\nP90 {_g(100 * r['overhead_p90'])}%\n"
                        f"P99 {_g(100 * r['overhead_p99'])}%"
                    )
                else:
                    txt = f"{data[i, j]:.0f}%"
                val = data[i, j]
                dark = np.isfinite(val) and norm(val) > 0.55
                ax.text(
                    j,
                    i,
                    txt,
                    ha="center",
                    va="center",
                    fontsize=7.5,
                    color="white" if dark else "black",
                )
    fig.suptitle(
        "dlrm-spares: warm standbys x spares (no retirement in the first two panels; "
        f"{n} replications a point)",
        fontsize=11,
    )
    save(fig, "pools.png")


def escalation(md: list[str]) -> None:
    """Repair escalation x spares: the table and escalation.png."""
    keys = ["lifecycle.spares", "lifecycle.repair.escalate_p"]
    rows = summary("escalation")
    attach_tail("escalation", rows, keys, W_DLRM)
    ps = [0.0, 0.1, 0.25, 0.5, 0.75]
    sps = [0, 2, 4, 8, 16]
    md.append(
        f"### Repair escalation x spares (2 warm standbys, no retirement, {_n(rows)} replications)\n"
    )
    md.append(
        "Total overhead: mean [95% CI]; P50, P90, P99; then the share of runs longer than 2 W.\n"
    )
    hdr = ["escalate_p"] + [f"{s} spares" for s in sps]
    body = []
    for p in ps:
        row = [f"{p:g}"]
        for sp in sps:
            r = pick(rows, lifecycle__spares=sp, lifecycle__repair__escalate_p=p)
            row.append(ovh_cell(r) + f"; > 2 W: {pct(r['gt2W'])}")
        body.append(row)
    table(md, hdr, body)

    fig = Figure(figsize=(11, 4.8), layout="constrained")
    ax, ax2 = fig.subplots(1, 2)
    cols = {0: "#000000", 2: "#d62728", 4: "#ff7f0e", 8: "#2ca02c", 16: "#1f77b4"}
    for sp in sps:
        rr = [pick(rows, lifecycle__spares=sp, lifecycle__repair__escalate_p=p) for p in ps]
        p50 = [r["overhead_p50"] for r in rr]
        p90 = [r["overhead_p90"] for r in rr]
        mean = [r["overhead_mean"] for r in rr]
        g2 = [r["gt2W"] for r in rr]
        c = cols[sp]
        lab = f"{sp} spares"
        ax.plot(ps, 100 * np.array(p50, float), "-o", color=c, label=f"{lab}: P50")
        ax.plot(ps, 100 * np.array(p90, float), "--", color=c, alpha=0.7)
        ax.plot(ps, 100 * np.array(mean, float), "x", color=c, ms=8)
        ax2.plot(ps, 100 * np.array(g2, float), "-o", color=c, label=lab)
    ax.plot([], [], "k--", alpha=0.7, label="P90 (dashed)")
    ax.plot([], [], "kx", label="mean (x)")
    ax.set_yscale("log")
    ax.set_xlabel("probability that a repair escalates to manual (~2 days)")
    ax.set_ylabel("total overhead (% of W), log scale")
    ax.set_title("overhead: P50, P90 and mean (2 warm standbys)", fontsize=10)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7)
    ax2.set_xlabel("probability that a repair escalates to manual (~2 days)")
    ax2.set_ylabel("replications with wall time > 2 W (%)")
    ax2.set_title("the tail: runs that take more than twice the failure-free time", fontsize=10)
    ax2.grid(alpha=0.3)
    ax2.legend(fontsize=7)
    fig.suptitle("dlrm-spares (no retirement): repair escalation x spares", fontsize=11)
    save(fig, "escalation.png")


def detection(md: list[str]) -> None:
    """Detection latency x checkpoint interval: the tables (paired differences too) and detection.png."""
    rows = summary("detection")
    dets = sorted({r["lifecycle.detection.mean_s"] for r in rows})
    taus = sorted({r["interval_h"] for r in rows})
    md.append(
        f"### Detection latency x checkpoint interval (dlrm-spares as built in, {_n(rows)} replications)\n"
    )
    md.append(
        "Mean total overhead per interval (the best in bold); the best interval's mean [95% CI], "
        "P50/P90/P99; and what detection itself costs (mean detection time / W, and its P90) at the "
        "best interval. Common random numbers: every point sees the same failures.\n"
    )
    hdr = (
        ["detection (mean)"] + [f"τ = {t:g} h" for t in taus] + ["best: overhead", "detection cost"]
    )
    body = []
    for d in dets:
        rr = [pick(rows, lifecycle__detection__mean_s=d, interval_h=t) for t in taus]
        best = min(rr, key=lambda r: r["overhead_mean"])
        cells = [
            (f"**{pct(r['overhead_mean'])}**" if r is best else pct(r["overhead_mean"])) for r in rr
        ]
        body.append(
            [_dur(d)]
            + cells
            + [
                f"τ = {best['interval_h']:g} h: " + ovh_cell(best),
                (
                    f"{pct(best['detection_s_mean'] / W_DLRM, 2)} (P90 "
                    f"{pct(best['detection_s_p90'] / W_DLRM, 2)})"
                ),
            ]
        )
    table(md, hdr, body)
    # paired comparisons (common random numbers: replication r of every point sees the same failures)
    per: dict[tuple, dict[int, float]] = {}
    for r in results("detection"):
        per.setdefault((r["lifecycle.detection.mean_s"], r["interval_h"]), {})[
            int(r["replication"])
        ] = r["overhead"]

    def diff(a: tuple, b: tuple) -> str:
        reps = sorted(per[a])
        x = np.array([per[a][i] - per[b][i] for i in reps])
        h = 1.96 * x.std(ddof=1) / math.sqrt(len(x))  # n = 200: the t quantile is 1.97
        return f"{100 * x.mean():+.2f} [{100 * (x.mean() - h):+.2f}, {100 * (x.mean() + h):+.2f}]"

    md.append(
        f"Paired differences (percentage points of W, mean [95% CI] over the {_n(rows)} common replications): "
        "each latency's overhead at 0.5 h and at 1 h minus that at 0.7 h, and the cost of detection "
        "against 10 s at 0.7 h:\n"
    )
    body = []
    for d in dets:
        body.append(
            [
                _dur(d),
                diff((d, 0.5), (d, 0.7)),
                diff((d, 1.0), (d, 0.7)),
                diff((d, 0.7), (dets[0], 0.7)) if d != dets[0] else "0",
            ]
        )
    table(
        md,
        ["detection (mean)", "0.5 h − 0.7 h", "1 h − 0.7 h", f"vs {_dur(dets[0])}, at 0.7 h"],
        body,
    )

    fig = Figure(figsize=(11.5, 4.8), layout="constrained")
    ax, ax2 = fig.subplots(1, 2)
    cmap = matplotlib.colormaps["plasma"]
    for k, d in enumerate(dets):
        rr = [pick(rows, lifecycle__detection__mean_s=d, interval_h=t) for t in taus]
        c = cmap(k / max(1, len(dets) - 1) * 0.85)
        m = 100 * np.array([r["overhead_mean"] for r in rr])
        ax.fill_between(
            taus,
            [100 * r["overhead_lo"] for r in rr],
            [100 * r["overhead_hi"] for r in rr],
            color=c,
            alpha=0.15,
        )
        ax.plot(taus, m, "-o", color=c, ms=3, label=f"detection {_dur(d)}")
        b = int(np.argmin(m))
        ax.plot([taus[b]], [m[b]], "*", color=c, ms=14, mec="black")
    ax.set_xscale("log")
    _xticks(ax, taus)
    ax.set_xlabel("checkpoint interval τ (h)")
    ax.set_ylabel("total overhead (% of W): mean, 95% CI band")
    ax.set_title("overhead vs interval; ★ = best interval on the grid", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    best = [
        min(
            (pick(rows, lifecycle__detection__mean_s=d, interval_h=t) for t in taus),
            key=lambda r: r["overhead_mean"],
        )
        for d in dets
    ]
    ax2.plot(
        dets, [100 * r["detection_s_mean"] / W_DLRM for r in best], "-o", label="detection: mean"
    )
    ax2.plot(
        dets, [100 * r["detection_s_p90"] / W_DLRM for r in best], "--o", label="detection: P90"
    )
    ax2.plot(
        dets[1:],
        [100 * (r["overhead_mean"] - best[0]["overhead_mean"]) for r in best[1:]],
        "-s",
        label=f"extra total overhead vs {_dur(dets[0])} (mean)",
    )
    ax2.set_xscale("log")
    ax2.set_yscale("log")
    _xticks(ax2, dets, [_dur(d) for d in dets])
    ax2.set_xlabel("mean detection latency")
    ax2.set_ylabel("% of W")
    ax2.set_title("what detection costs (at each latency's best interval)", fontsize=10)
    ax2.grid(alpha=0.3, which="both")
    ax2.legend(fontsize=8)
    fig.suptitle(
        "dlrm-spares: failure detection latency (gamma, shape 4) x checkpoint interval", fontsize=11
    )
    save(fig, "detection.png")


def _xticks(ax, ticks, labels=None) -> None:
    """Major ticks at these values only, no minor tick labels (log axes)."""
    from matplotlib.ticker import NullFormatter, NullLocator

    ax.set_xticks(ticks, labels if labels is not None else [f"{t:g}" for t in ticks])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_minor_formatter(NullFormatter())


def _g(v: float) -> str:
    return f"{v:,.0f}" if v >= 1000 else f"{v:.3g}"


def _dur(s: float) -> str:
    return f"{s:g} s" if s < 60 else f"{s / 60:g} min"


def health(md: list[str]) -> None:
    """Bad machines x spares, retirement off and on: the table and health.png."""
    keys = ["lifecycle.health.bad_fraction", "lifecycle.spares"]
    rows = summary("health")
    attach_tail("health", rows, keys, W_DLRM)
    ret = [
        f
        for f in feasibility()
        if f["group"] == "retirement" and f["lifecycle.health.bad_fraction"] != ""
    ]
    bfs = sorted({r["lifecycle.health.bad_fraction"] for r in rows})
    sps = sorted({r["lifecycle.spares"] for r in rows})
    md.append(f"### Bad machines (2 warm standbys, {_n(rows)} replications)\n")
    md.append(
        "Without retirement (sweep): total overhead mean [95% CI], P50/P90/P99; node failures per job "
        "(mean) and those of bad machines. With retirement (dlrm-spares' 3 failures in 24 h; "
        "feasibility.py): replications whose fleet runs out of machines, with 8, 16 and 32 spares, and "
        "the mean overhead with retirement on (where none runs out) and the machines retired per job (mean).\n"
    )
    hdr = (
        ["bad fraction"]
        + [f"{s:g} spares, no retirement" for s in sps]
        + ["retirement on: exhausted (8 / 16 / 32 spares); mean overhead"]
    )
    body = []
    for bf in bfs:
        row = [f"{bf:g}"]
        for sp in sps:
            r = pick(rows, lifecycle__health__bad_fraction=bf, lifecycle__spares=sp)
            nf = r["failures_trainer_mean"] + r["failures_embedding_mean"]
            row.append(ovh_cell(r) + f"; failures {nf:.1f} (bad {r['failures_bad_mean']:.1f})")
        ex = [
            pick(ret, lifecycle__health__bad_fraction=bf, lifecycle__spares=sp)
            for sp in (8, 16, 32)
        ]
        row.append(
            " / ".join(f"{int(f['exhausted'])}" for f in ex)
            + f" of {int(ex[0]['replications'])}; "
            + " / ".join(pct(f["overhead_mean"]) for f in ex)
            + "; retired "
            + " / ".join(f"{f['retired_mean_finished']:.2f}" for f in ex)
        )
        body.append(row)
    table(md, hdr, body)

    fig = Figure(figsize=(11, 4.6), layout="constrained")
    ax, ax2 = fig.subplots(1, 2)
    for sp, c in zip(sps, ["#d62728", "#2ca02c", "#1f77b4"]):
        rr = [pick(rows, lifecycle__health__bad_fraction=bf, lifecycle__spares=sp) for bf in bfs]
        m = 100 * np.array([r["overhead_mean"] for r in rr])
        ax.errorbar(
            bfs,
            m,
            yerr=[
                m - 100 * np.array([r["overhead_lo"] for r in rr]),
                100 * np.array([r["overhead_hi"] for r in rr]) - m,
            ],
            fmt="-o",
            color=c,
            capsize=3,
            label=f"{sp:g} spares: mean, 95% CI",
        )
        ax.plot(
            bfs, [100 * r["overhead_p90"] for r in rr], "--", color=c, label=f"{sp:g} spares: P90"
        )
        ax2.plot(
            bfs,
            [r["failures_trainer_mean"] + r["failures_embedding_mean"] for r in rr],
            "-o",
            color=c,
            label=f"{sp:g} spares: all node failures",
        )
        ax2.plot(
            bfs,
            [r["failures_bad_mean"] for r in rr],
            ":s",
            color=c,
            label=f"{sp:g} spares: of bad machines",
        )
    ax.set_xlabel("share of bad machines (failing 20x as often)")
    ax.set_ylabel("total overhead (% of W)")
    ax.set_title("overhead (no retirement)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax2.set_xlabel("share of bad machines (failing 20x as often)")
    ax2.set_ylabel("node failures per job (mean)")
    ax2.set_title("failures per 50 h job", fontsize=10)
    ax2.grid(alpha=0.3)
    ax2.legend(fontsize=8)
    fig.suptitle(
        "dlrm-spares: bad machines (20x as often: a bad machine's lifetimes are a good one's / 20, "
        "a fresh one averages 30 h)",
        fontsize=11,
    )
    save(fig, "health.png")


# -- llm-16k-gpus ----------------------------------------------------------------------------------
def llm(md: list[str]) -> None:
    """llm-16k-gpus: the plan, blocking, tiered and standbys tables and llm_ettr.png."""
    blk = summary("llm-blocking")
    tie = summary("llm-tiered")
    sby = summary("llm-standbys")
    plan = json.loads((OUT / "plan-llm-16k-gpus.json").read_text())
    ns = sorted({o["overhead"]["n"] for o in plan["options"]})
    md.append(
        f"### llm-16k-gpus: the planner (`cprsim plan`, {'-'.join(str(n) for n in ns)} replications per option)\n"
    )
    body = []
    for o in plan["options"]:
        e, t = o["overhead"], o["ettr"]
        body.append(
            [
                o["label"],
                f"{o['interval_h']:.3g} h",
                f"{o['full_interval_h']:.3g} h",
                f"{pct(e['mean'], 2)} [{pct(e['ci95'][0], 2)}, {pct(e['ci95'][1], 2)}]",
                f"{pct(e['p50'], 2)} / {pct(e['p90'], 2)} / {pct(e['p99'], 2)}",
                f"{t['mean']:.4f} [{t['ci95'][0]:.4f}, {t['ci95'][1]:.4f}]",
                str(e["n"]),
            ]
        )
    table(
        md,
        [
            "option",
            "interval (tiered: snapshot)",
            "full / persisted every",
            "overhead mean [95% CI]",
            "P50 / P90 / P99",
            "ETTR mean [95% CI]",
            "replications",
        ],
        body,
    )

    md.append(f"### llm-16k-gpus, blocking checkpoints to storage ({_n(blk)} replications)\n")
    taus = sorted({r["interval_h"] for r in blk})
    body = []
    for t in taus:
        row = [f"{t:g} h"]
        for sb in (16, 0):
            r = pick(blk, lifecycle__standbys=sb, interval_h=t)
            row.append(
                ovh_cell(r, p99=False) + f"; ETTR {r['ettr_mean']:.4f} (P50 {r['ettr_p50']:.4f})"
            )
        body.append(row)
    table(md, ["interval", "16 warm standbys (swap 3 min)", "no standbys (spares: ~20 min)"], body)

    md.append(
        "### llm-16k-gpus, tiered checkpoints: snapshot interval x persist_every x peer_stride "
        f"(16 standbys, {_n(tie)} replications)\n"
    )
    md.append(
        "Mean ETTR (the best of each stride in bold), then mean total overhead with P90, and the mean "
        "number of restores from storage (a node and its peer lost together) per job.\n"
    )
    ti = sorted({r["interval_h"] for r in tie})
    allbest = {}
    for st in (1, 16):
        rr = [r for r in tie if r["checkpoint.tiers.peer_stride"] == st]
        allbest[st] = max(rr, key=lambda r: r["ettr_mean"])
    body = []
    for st in (1, 16):
        for pe in (1, 4, 16, 64):
            row = [str(st), str(pe)]
            for t in ti:
                r = pick(
                    tie,
                    checkpoint__tiers__peer_stride=st,
                    checkpoint__tiers__persist_every=pe,
                    interval_h=t,
                )
                e = f"{r['ettr_mean']:.4f}"
                if r is allbest[st]:
                    e = f"**{e}**"
                row.append(
                    f"{e}; {pct(r['overhead_mean'])} (P90 {pct(r['overhead_p90'])}); "
                    f"storage {r['storage_restores_mean']:.1f}"
                )
            body.append(row)
    table(md, ["peer_stride", "persist_every"] + [f"snapshot every {t:g} h" for t in ti], body)

    md.append(
        f"### llm-16k-gpus, tiered (persist every 8, peer_stride 1): standbys ({_n(sby)} replications)\n"
    )
    body = []
    for t in sorted({r["interval_h"] for r in sby}):
        row = [f"{t:g} h"]
        for sb in (16, 0):
            r = pick(sby, lifecycle__standbys=sb, interval_h=t)
            row.append(
                ovh_cell(r, p99=False) + f"; ETTR {r['ettr_mean']:.4f}; replacement "
                f"{(r['reschedule_s_mean'] - r['detection_s_mean'] - r['wait_s_mean']) / 3600:.1f} h/job"
            )
        body.append(row)
    table(md, ["snapshot interval", "16 warm standbys", "no standbys"], body)

    # figure: ETTR vs interval
    fig = Figure(figsize=(12, 5.6), layout="constrained")
    axs = fig.subplots(1, 2, sharey=True)
    cols = {1: "#d62728", 4: "#2ca02c", 16: "#1f77b4", 64: "#9467bd"}
    for ax, st in zip(axs, (1, 16)):
        for sb, ls in ((16, "-"), (0, ":")):
            rr = [pick(blk, lifecycle__standbys=sb, interval_h=t) for t in taus]
            ax.errorbar(
                taus,
                [r["ettr_mean"] for r in rr],
                yerr=[
                    [r["ettr_mean"] - r["ettr_lo"] for r in rr],
                    [r["ettr_hi"] - r["ettr_mean"] for r in rr],
                ],
                fmt=ls + "o",
                color="black",
                ms=3,
                capsize=2,
                label=f"blocking, {sb} standbys",
            )
        for pe in (1, 4, 16, 64):
            rr = [
                pick(
                    tie,
                    checkpoint__tiers__peer_stride=st,
                    checkpoint__tiers__persist_every=pe,
                    interval_h=t,
                )
                for t in ti
            ]
            ax.errorbar(
                ti,
                [r["ettr_mean"] for r in rr],
                yerr=[
                    [r["ettr_mean"] - r["ettr_lo"] for r in rr],
                    [r["ettr_hi"] - r["ettr_mean"] for r in rr],
                ],
                fmt="-o",
                color=cols[pe],
                ms=3,
                capsize=2,
                label=f"tiered, persist every {pe}",
            )
        if st == 1:  # the scenario's own stride: the standbys sweep and the planner's choices
            rr = [
                pick(sby, lifecycle__standbys=0, interval_h=t)
                for t in sorted({r["interval_h"] for r in sby})
            ]
            ax.plot(
                [r["interval_h"] for r in rr],
                [r["ettr_mean"] for r in rr],
                ":s",
                color="grey",
                label="tiered (persist every 8), 0 standbys",
            )
            for o in plan["options"]:
                if o["label"] in ("full, tiered", "full (simulated optimum)"):
                    ax.plot(
                        [o["interval_h"]],
                        [o["ettr"]["mean"]],
                        "*",
                        ms=14,
                        mfc="gold",
                        mec="black",
                        label="cprsim plan's choices (tiered: persist every 8)"
                        if o["label"] == "full, tiered"
                        else None,
                    )
        ax.set_xscale("log")
        _xticks(ax, [0.02, 0.04, 0.08, 0.16, 0.25, 0.4, 0.6])
        ax.set_xlabel("checkpoint interval (tiered: snapshot interval), h")
        ax.set_title(
            f"peer_stride = {st}: "
            + (
                "peer in the same rack (a rack failure → storage)"
                if st == 1
                else "peer in the next rack"
            ),
            fontsize=10,
        )
        ax.grid(alpha=0.3, which="both")
    axs[0].set_ylabel("ETTR (useful / wall): mean, 95% CI")
    h, lab = axs[0].get_legend_handles_labels()
    fig.legend(h, lab, loc="outside lower center", ncols=4, fontsize=8)
    fig.suptitle(
        f"llm-16k-gpus (2,048 nodes, 336 h): blocking vs tiered checkpoints; {_n(tie)} replications a point",
        fontsize=11,
    )
    save(fig, "llm_ettr.png")


# -- badput breakdowns -----------------------------------------------------------------------------
def breakdown(md: list[str]) -> None:
    """Badput by cause for chosen settings of both scenarios: the tables and badput_*.png."""
    det, poo, esc, hea = (
        summary("detection"),
        summary("pools"),
        summary("escalation"),
        summary("health"),
    )
    dlrm = [
        (
            "dlrm-spares\nas built in\n(2 standbys,\n8 spares, 30 s\ndetection, τ 0.7 h)",
            pick(det, lifecycle__detection__mean_s=30.0, interval_h=0.7),
        ),
        ("detection\n10 min", pick(det, lifecycle__detection__mean_s=600.0, interval_h=0.7)),
        ("detection\n30 min", pick(det, lifecycle__detection__mean_s=1800.0, interval_h=0.7)),
        ("0 standbys\n16 spares", pick(poo, lifecycle__standbys=0, lifecycle__spares=16)),
        ("0 standbys\n8 spares", pick(poo, lifecycle__standbys=0, lifecycle__spares=8)),
        ("2 standbys\n0 spares", pick(poo, lifecycle__standbys=2, lifecycle__spares=0)),
        ("8 standbys\n16 spares", pick(poo, lifecycle__standbys=8, lifecycle__spares=16)),
        (
            "2 standbys\n8 spares\nescalate 0.75",
            pick(esc, lifecycle__spares=8, lifecycle__repair__escalate_p=0.75),
        ),
        (
            "no bad\nmachines\n(16 spares)",
            pick(hea, lifecycle__health__bad_fraction=0.0, lifecycle__spares=16),
        ),
        (
            "10% bad\nmachines\n(16 spares)",
            pick(hea, lifecycle__health__bad_fraction=0.1, lifecycle__spares=16),
        ),
    ]
    blk, tie, sby = summary("llm-blocking"), summary("llm-tiered"), summary("llm-standbys")
    llm_ = [
        ("blocking, τ 0.2 h\n16 standbys", pick(blk, lifecycle__standbys=16, interval_h=0.2)),
        ("blocking, τ 0.2 h\n0 standbys", pick(blk, lifecycle__standbys=0, interval_h=0.2)),
        (
            "tiered 0.04 h\npersist 8, stride 1\n(built-in tiers)",
            pick(sby, lifecycle__standbys=16, interval_h=0.04),
        ),
        (
            "tiered 0.04 h\npersist 8, stride 1\n0 standbys",
            pick(sby, lifecycle__standbys=0, interval_h=0.04),
        ),
        (
            "tiered 0.04 h\npersist 4, stride 1",
            pick(
                tie,
                checkpoint__tiers__peer_stride=1,
                checkpoint__tiers__persist_every=4,
                interval_h=0.04,
            ),
        ),
        (
            "tiered 0.02 h\npersist 1, stride 1",
            pick(
                tie,
                checkpoint__tiers__peer_stride=1,
                checkpoint__tiers__persist_every=1,
                interval_h=0.02,
            ),
        ),
        (
            "tiered 0.08 h\npersist 64, stride 1",
            pick(
                tie,
                checkpoint__tiers__peer_stride=1,
                checkpoint__tiers__persist_every=64,
                interval_h=0.08,
            ),
        ),
        (
            "tiered 0.04 h\npersist 64, stride 16",
            pick(
                tie,
                checkpoint__tiers__peer_stride=16,
                checkpoint__tiers__persist_every=64,
                interval_h=0.04,
            ),
        ),
    ]
    for name, bars, w, title in (
        (
            "badput_dlrm.png",
            dlrm,
            W_DLRM,
            f"dlrm-spares (50 h job): badput by cause, mean of {_n(det)} replications",
        ),
        (
            "badput_llm.png",
            llm_,
            W_LLM,
            f"llm-16k-gpus (336 h job): badput by cause, mean of {_n(tie)} replications",
        ),
    ):
        md.append(f"### Badput by cause: {title.split(':')[0]} (% of W, means)\n")
        table(
            md,
            ["setting"] + [c[0] for c in CAUSES] + ["total [95% CI]", "P90 total"],
            [
                [lab.replace("\n", " ")]
                + [pct(f(r) / w, 2) for _, _, f in CAUSES]
                + [
                    f"{pct(r['overhead_mean'], 2)} [{pct(r['overhead_lo'], 2)}, {pct(r['overhead_hi'], 2)}]",
                    pct(r["overhead_p90"], 2),
                ]
                for lab, r in bars
            ],
        )
        fig = Figure(figsize=(max(8, 1.25 * len(bars) + 3), 5.4), layout="constrained")
        ax = fig.subplots()
        x = np.arange(len(bars))
        bottom = np.zeros(len(bars))
        for lab, c, f in CAUSES:
            h = np.array([100 * f(r) / w for _, r in bars])
            ax.bar(x, h, 0.7, bottom=bottom, color=c, label=lab)
            bottom += h
        tot = np.array([100 * r["overhead_mean"] for _, r in bars])
        ax.errorbar(
            x,
            tot,
            yerr=[
                tot - [100 * r["overhead_lo"] for _, r in bars],
                np.array([100 * r["overhead_hi"] for _, r in bars]) - tot,
            ],
            fmt="none",
            ecolor="black",
            capsize=3,
            label="total, 95% CI",
        )
        ax.plot(
            x,
            [100 * r["overhead_p90"] for _, r in bars],
            "v",
            color="black",
            ms=6,
            label="total, P90 of runs",
        )
        ax.set_xticks(x, [lab for lab, _ in bars], fontsize=7.5)
        ax.set_ylabel("badput (% of failure-free time W)")
        ax.set_title(title, fontsize=11)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=7.5, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        save(fig, name)


def _n(rows: list[dict]) -> str:
    """The replications per point of a sweep's summary rows ("a-b" when they differ)."""
    ns = sorted({int(r["n"]) for r in rows})
    return str(ns[0]) if len(ns) == 1 else f"{ns[0]}-{ns[-1]}"


def baselines(md: list[str]) -> None:
    """The two built-in scenarios as they are (``cprsim simulate``): overhead, ETTR, badput by cause."""
    md.append("### Baselines: the built-in scenarios as they are (`cprsim simulate`)\n")
    md.append(
        "Total overhead mean [95% CI] and P50 / P90 / P99 of single runs; ETTR; badput by cause "
        "(% of W, means); node failures per job (of bad machines); machines retired per job; restores "
        "from peers' memory and from storage per job.\n"
    )
    cause_names = None
    body = []
    for name in ("simulate-dlrm-spares", "simulate-llm-16k-gpus"):
        d = json.loads((OUT / name / "summary.json").read_text())
        m, w = d["metrics"], d["failure_free_s"]
        o = m["overhead"]
        cause_names = cause_names or list(d["badput"])
        body.append(
            [
                f"{d['scenario']} (τ {d['interval_h']:g} h, {d['replications']} replications)",
                f"{pct(o['mean'], 2)} [{pct(o['ci95'][0], 2)}, {pct(o['ci95'][1], 2)}]",
                f"{pct(o['p50'], 2)} / {pct(o['p90'], 2)} / {pct(o['p99'], 2)}",
                f"{m['ettr']['mean']:.3f}",
            ]
            + [pct(d["badput"][c]["mean_s"] / w, 2) for c in cause_names]
            + [
                f"{m['failures_trainer']['mean'] + m['failures_embedding']['mean']:.2f} "
                f"({m['failures_bad']['mean']:.2f})",
                f"{m['machines_retired']['mean']:.2f}",
                f"{m['memory_restores']['mean']:.1f} / {m['storage_restores']['mean']:.1f}",
            ]
        )
    table(
        md,
        ["scenario", "overhead", "P50 / P90 / P99", "ETTR"]
        + list(cause_names or [])
        + ["node failures (bad)", "retired", "restores: memory / storage"],
        body,
    )


def cures(md: list[str]) -> None:
    """Bad machines x the automatic repair's cure probability (retirement off): the table."""
    keys = ["lifecycle.health.bad_fraction", "lifecycle.repair.cure_auto_p"]
    rows = summary("cures")
    attach_tail("cures", rows, keys, W_DLRM)
    bfs = sorted({r["lifecycle.health.bad_fraction"] for r in rows})
    cps = sorted({r["lifecycle.repair.cure_auto_p"] for r in rows})
    md.append(f"### Repairs that cure (8 spares, 2 warm standbys, {_n(rows)} replications)\n")
    md.append(
        "Total overhead mean [95% CI], P50/P90/P99, ETTR; node failures per job (mean), those of "
        "bad machines, and the bad machines a repair cured per job (mean). A cure probability of 0 "
        "is the model before issue 26 (a bad machine stays bad).\n"
    )
    hdr = ["cure probability (automatic repair)"] + [f"bad fraction {bf:g}" for bf in bfs]
    body = []
    for cp in cps:
        row = [f"{cp:g}"]
        for bf in bfs:
            r = pick(rows, lifecycle__health__bad_fraction=bf, lifecycle__repair__cure_auto_p=cp)
            nf = r["failures_trainer_mean"] + r["failures_embedding_mean"]
            row.append(
                ovh_cell(r)
                + f"; ETTR {r['ettr_mean']:.3f}; failures {nf:.1f} (bad {r['failures_bad_mean']:.1f}, "
                f"cured {r['machines_cured_mean']:.2f})"
            )
        body.append(row)
    table(md, hdr, body)


SECTIONS = {
    "baselines": baselines,
    "pools": pools,
    "escalation": escalation,
    "detection": detection,
    "health": health,
    "cures": cures,
    "llm": llm,
    "breakdown": breakdown,
}


def main() -> None:
    """Every table and figure from the outputs under --out."""
    global OUT
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=OUT)
    OUT = ap.parse_args().out
    md = [
        "<!-- generated by analyze.py from the sweeps in out/; numbers as measured by run.sh -->",
        "",
    ]
    (OUT / "tables").mkdir(parents=True, exist_ok=True)
    for name, section in SECTIONS.items():
        part: list[str] = []
        section(part)
        md += part
        readme = ["#" + ln if ln.startswith("### ") else ln for ln in part]
        _write(OUT / "tables" / f"{name}.md", "\n".join(readme).strip() + "\n")
    _write(OUT / "tables.md", "\n".join(md))
    print(f"wrote {OUT / 'tables.md'} and {OUT / 'tables'}/*.md")


def _write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (a temporary file, then a rename)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


if __name__ == "__main__":
    main()
