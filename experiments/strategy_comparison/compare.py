"""Every strategy on the same failures, from 16 to 1,024 embedding servers, node MTBF 1x-10x worse.

For each cluster size and failure rate the planner ranks every strategy (full recovery,
CPR-vanilla, CPR-MFU, CPR-SSU, lookahead, ECRM, Check-N-Run) for an AUC-loss bound, each at its
own best interval, confirmed by simulation with common random numbers (one seed: every strategy
sees the same failure times). The cluster grows the way production ones do: each embedding
server holds a 22 GB shard (x2 Adagrad state), storage bandwidth grows with the servers
(0.6 GB/s written and 1.2 GB/s read per server), throughput grows with them.

Node failures: per node, exponential, with the MTBF of InfiniteHBD's hardware faults
(traces/README.md: 298 hardware faults over 400 nodes x 348 days, i.e. about 11,200 h per node),
then 3x and 10x worse.

Writes out/comparison.csv, out/comparison.md, out/overhead.png, out/pls.png, out/memory_recovery.png
and the README's table, out/tables/comparison.md (``experiments/update_readmes.py`` splices it in).
Usage: python compare.py [--servers 16,64,256,1024] [--worse 1,3,10] [--replications 60] [--jobs 2]
[--search-replications N]   (``--jobs``: settings planned in parallel processes; each setting's
numbers are the same either way; ``--search-replications``: the planner's search, default
max(40, --replications); run.sh passes --replications 40, the published figures')
"""

from __future__ import annotations

import argparse
import io
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from cprsim import scenario as sc
from cprsim.io import atomic_write_bytes, atomic_write_csv, atomic_write_text
from cprsim.planner import ALL_STRATEGIES, make_plan
from cprsim.scenario import HOUR

NODE_MTBF_H = 400 * 348 * 24 / 298  # InfiniteHBD hardware faults, per node (see the docstring)
ROW_BYTES = 64 * 4 * 2  # a 64-dim fp32 row with its Adagrad state
COUNTER_BYTES = 4


def scenario(n_e: int, worse: float, reps: int) -> sc.Scenario:
    """The setting with ``n_e`` embedding servers and nodes ``worse`` times less reliable (see the docstring)."""
    raw = {
        "name": f"compare-{n_e}-x{worse:g}",
        "seed": 2024,
        "replications": reps,
        "cluster": {
            "trainers": max(4, n_e),
            "embedding_servers": n_e,
            "embedding_gb": 22.0 * n_e,
            "dense_gb": 0.5,
        },
        "job": {"duration_h": 50.0, "samples_per_s": 200_000.0 * n_e / 18},
        "storage": {
            "write_gbps": 0.6 * n_e,
            "read_gbps": 1.2 * n_e,
            "latency_s": 5.0,
            "node_gbps": 3.125,
        },
        "reschedule": {"family": "constant", "mean_s": 300.0},
        "failures": {
            "trainer": {"family": "exponential", "mtbf_h": NODE_MTBF_H / worse},
            "embedding": {"family": "exponential", "mtbf_h": NODE_MTBF_H / worse},
        },
        "checkpoint": {"interval_h": 1.0},
    }
    return sc.validate(raw, "strategy_comparison")


def memory_overhead(o) -> float:
    """An option's extra memory, as a fraction of the embedding state."""
    if o.strategy == "ecrm":
        return o.params["m"] / o.params["k"]
    if o.strategy in ("mfu", "ssu"):
        return COUNTER_BYTES / ROW_BYTES
    return 0.0


class _Serial:
    """``--jobs 1``: the pool's interface, in this process."""

    def __enter__(self) -> _Serial:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    map = staticmethod(map)


def plan_setting(
    setting: tuple[int, float, int, float, int | None],
) -> tuple[list[dict], list[str], str]:
    """Plan every strategy for one (servers, MTBF divisor, replications, accuracy bound, search
    replications) setting: its table rows, notes, message."""
    n_e, w, reps, max_loss, search = setting
    s = scenario(n_e, w, reps)
    plan = make_plan(
        s,
        max_loss,
        strategies=ALL_STRATEGIES,
        replications=reps,
        search_replications=search or max(40, reps),
    )
    full = min((o for o in plan.options if o.strategy == "full"), key=lambda o: o.overhead.mean)
    rows = []
    for o in plan.options:
        if o.strategy == "full" and o is not full:
            continue
        rows.append(
            {
                "servers": n_e,
                "mtbf_worse": w,
                "option": o.label,
                "strategy": o.strategy,
                "interval_h": o.interval_s / HOUR,
                "overhead": o.overhead.mean,
                "overhead_lo": o.overhead.lo,
                "overhead_hi": o.overhead.hi,
                "pls": o.pls.mean,
                "memory": memory_overhead(o),
                "recommended": o.label == plan.recommended,
            }
        )
    return rows, list(plan.notes), f"{n_e:5d} servers, MTBF /{w:g}: {plan.message}"


def main() -> None:
    """Plan every setting, write the tables and figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--servers", default="16,64,256,1024")
    ap.add_argument("--worse", default="1,3,10")
    ap.add_argument("--replications", type=int, default=60)
    ap.add_argument("--max-accuracy-loss", type=float, default=0.001)
    ap.add_argument("--out", type=Path, default=Path(__file__).with_name("out"))
    ap.add_argument("--jobs", type=int, default=1, help="settings planned in parallel processes")
    ap.add_argument(
        "--search-replications", type=int, help="the planner's search (default max(40, -n))"
    )
    a = ap.parse_args()
    servers = [int(x) for x in a.servers.split(",")]
    worse = [float(x) for x in a.worse.split(",")]
    settings = [
        (n_e, w, a.replications, a.max_accuracy_loss, a.search_replications)
        for w in worse
        for n_e in servers
    ]
    rows, notes = [], set()
    with ProcessPoolExecutor(max_workers=a.jobs) if a.jobs > 1 else _Serial() as pool:
        for setting_rows, setting_notes, message in pool.map(plan_setting, settings):  # in order
            rows += setting_rows
            notes.update(setting_notes)
            print(message, flush=True)
    cols = list(rows[0])
    atomic_write_csv(a.out / "comparison.csv", cols, ([r[c] for c in cols] for r in rows))
    table = [
        "| servers | MTBF | option | interval (h) | overhead [95% CI] | PLS | extra memory |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        star = " **(recommended)**" if r["recommended"] else ""
        table.append(
            f"| {r['servers']} | /{r['mtbf_worse']:g} | {r['option']}{star} | {r['interval_h']:.3g} | "
            f"{100 * r['overhead']:.2f}% [{100 * r['overhead_lo']:.2f}, {100 * r['overhead_hi']:.2f}] | "
            f"{r['pls']:.4f} | {100 * r['memory']:.1f}% |"
        )
    atomic_write_text(a.out / "tables" / "comparison.md", "\n".join(table) + "\n")
    md = [
        f"# Strategy comparison (AUC loss <= {a.max_accuracy_loss:g}, {a.replications} replications)",
        "",
    ]
    md += table + [""] + [f"Note: {n}" for n in sorted(notes)]
    atomic_write_text(a.out / "comparison.md", "\n".join(md) + "\n")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    strategies = list(dict.fromkeys(r["strategy"] for r in rows))
    colors = dict(zip(["full", *ALL_STRATEGIES], plt.get_cmap("tab10").colors))
    for metric, ylabel, fname in (
        ("overhead", "overhead (% of failure-free time)", "overhead.png"),
        ("pls", "PLS (portion of lost samples)", "pls.png"),
    ):
        fig, axes = plt.subplots(
            1, len(worse), figsize=(5 * len(worse), 4), sharey=True, squeeze=False
        )
        for ax, w in zip(axes[0], worse):
            for st in strategies:
                pts = [r for r in rows if r["mtbf_worse"] == w and r["strategy"] == st]
                scale = 100 if metric == "overhead" else 1
                ax.plot(
                    [p["servers"] for p in pts],
                    [scale * p[metric] for p in pts],
                    "o-",
                    color=colors[st],
                    label=pts[0]["option"].split(" (")[0] if pts else st,
                )
            ax.set_xscale("log", base=2)
            ax.set_xlabel("embedding servers")
            ax.set_title(f"node MTBF {NODE_MTBF_H / w:,.0f} h")
        axes[0][0].set_ylabel(ylabel)
        axes[0][0].legend(fontsize=7)
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=110)
        plt.close(fig)
        atomic_write_bytes(a.out / fname, buf.getvalue())
    fig, ax = plt.subplots(figsize=(6, 4))
    last = [r for r in rows if r["servers"] == max(servers) and r["mtbf_worse"] == max(worse)]
    ax.bar(
        [r["option"].split(" (")[0] for r in last],
        [100 * r["memory"] for r in last],
        color=[colors[r["strategy"]] for r in last],
    )
    ax.set_ylabel("extra memory (% of embedding state)")
    ax.set_title("memory cost of each strategy")
    ax.tick_params(axis="x", rotation=30)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    atomic_write_bytes(a.out / "memory_recovery.png", buf.getvalue())


if __name__ == "__main__":
    main()
