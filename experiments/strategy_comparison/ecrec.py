"""ECRM/ECRec (erasure-coded embedding servers) against checkpointing every 30 and 60 min, in a
setting that mirrors ECRec's evaluation as far as its public material states it.

What the public material says (README.md, "Against ECRec's published figures", gives the sources):
5 parameter servers (AWS r5n.24xlarge, 100 Gbps) and 15 GPU workers (p3.2xlarge), batch 2,048,
Criteo Terabyte; one embedding of 197,767,405 rows ("Criteo"), 2x/4x/8x the rows ("Criteo-2S/4S/8S")
and 2x the rows at 2x the width ("Criteo-2S-2D"), width 32 ("e.g. 64 rather than 32"); plain SGD
(no optimizer state); k = 2 or 4 data servers per parity (PARITY_N = k + 1, so m = 1); checkpoints
every 30 or 60 min (Ckpt-30, Ckpt-60); normal-mode runs of 2 h; recovery runs of 15 min, one
parameter server killed, 60 min more.

What is assumed here (each an input of the scenario, stated in the README next to the numbers):
throughput 132,710 samples/s (15 workers x 2,048 x 62,208 steps per 4 h, the step budget of the
training script); checkpoints written by each server to its own EBS io2 volume (3,000 IOPS: about
0.75 GB/s each, 3.75 GB/s for 5 servers, read as fast), 5 s latency; a killed server back after a
constant 60 s; node bandwidth 12.5 GB/s; parity update bytes 26 lookups x width x 4 B per sample
(cprsim's default); training at 0.9 of its speed during a rebuild (cprsim's default, taken from
ECRec's 7-13%: an input, not a prediction); dense part 10 MB.

Three measurements, every strategy on the same failure times (common random numbers):

A. failure-free overhead, 24 h of training: Ckpt-30/60 = full checkpoints every 30/60 min; ECRM =
   parity updates only (no checkpoint: interval = the job). Reduction = 1 - ECRM / Ckpt.
B. one embedding server killed at a uniformly random time of a 2 h job (``[[failures.injected]]``),
   ``--replications`` runs. Per run, paired:
   * full recovery time = rescheduling + checkpoint load + re-executed work (from the failure until
     training is back where it was); ECRM recovery time = from the failure until the server is
     rebuilt from parity (rescheduling + k x shard / node bandwidth), training going on meanwhile;
   * time lost to the failure = wall(with it) - wall(without it), for each strategy;
   * total overhead with the failure, and its reduction 1 - ECRM / Ckpt.
B'. ECRec's recovery protocol: a server killed at 15 min of a 75 min run (deterministic), and its
   recovery-time ratio against the assumed 60 s to replace the server (10, 60, 100, 300 s).
A'. Criteo-8S: the failure-free reduction against the checkpoint write bandwidth and throughput.
C. throughput during recovery: ``rebuild_throughput`` (an input).

Writes out/ecrec.csv (one row per replication and configuration), out/ecrec.md (the tables),
out/tables/ecrec.md (the same tables for README.md: headings two levels down, no title) and
out/ecrec/ (each configuration's effective scenario). About 15 s on 2 shared cores.
Usage: python ecrec.py [--replications 1000] [--models Criteo,Criteo-8S] [--out DIR]
"""

from __future__ import annotations

import argparse
import copy
from dataclasses import dataclass
from pathlib import Path

from cprsim import __version__
from cprsim import scenario as sc
from cprsim.costs import costs_of
from cprsim.io import atomic_write_csv, atomic_write_text
from cprsim.sim import strategies
from cprsim.sim.engine import simulate_one
from cprsim.sim.replicate import Estimate, estimate

HOUR = 3600.0
BASE_ROWS = 197_767_405  # EMB_DIMENSION of ECRec's criteo_training.py
#: model -> (row multiple, width): EXP_CONFIGS.md's Criteo, Criteo-2S, Criteo-2S-2D, Criteo-4S, Criteo-8S
MODELS = {
    "Criteo": (1, 32),
    "Criteo-2S": (2, 32),
    "Criteo-2S-2D": (2, 64),
    "Criteo-4S": (4, 32),
    "Criteo-8S": (8, 32),
}
SAMPLES_PER_S = 15 * 2048 * 62_208 / (4 * HOUR)  # 15 workers x batch x the script's steps per 4 h
CKPT_INTERVALS_H = (0.5, 1.0)  # Ckpt-30, Ckpt-60
ECRM_K = (2, 4)  # ECRM-k2, ECRM-k4 (m = 1)
RESCHEDULE_S = 60.0
REBUILD_THROUGHPUT = 0.9
STEADY_H = 24.0  # measurement A: long enough for the steady-state overhead
RECOVERY_H = 2.0  # measurement B: the paper's normal-mode run length


def raw_scenario(
    model: str,
    duration_h: float,
    failure: bool,
    *,
    write_gbps: float = 3.75,
    reschedule_s: float = RESCHEDULE_S,
    samples_per_s: float = SAMPLES_PER_S,
) -> dict:
    """The raw scenario of one model: ECRec's cluster, one injected server failure or none."""
    mult, dim = MODELS[model]
    raw: dict = {
        "name": f"ecrec-{model.lower()}",
        "seed": 2021,
        "replications": 1,
        "cluster": {
            "trainers": 15,
            "embedding_servers": 5,
            "embedding_gb": BASE_ROWS * mult * dim * 4 / 1e9,
            "dense_gb": 0.01,
            "optimizer_multiplier": 1.0,
        },
        "job": {"duration_h": duration_h, "samples_per_s": samples_per_s},
        "storage": {
            "write_gbps": write_gbps,
            "read_gbps": write_gbps,
            "latency_s": 5.0,
            "node_gbps": 12.5,
        },
        "reschedule": {"family": "constant", "mean_s": reschedule_s},
        "failures": {
            "injected": [{"count": 1, "nodes": 1, "node_type": "embedding"}] if failure else []
        },
        "checkpoint": {"interval_h": 1.0},
        "access": {"dim": dim},
    }
    return raw


def configured(raw: dict, config: str) -> sc.Scenario:
    """``ckpt-30``/``ckpt-60``: full checkpoints every 30/60 min; ``ecrm-k2``/``ecrm-k4``: parity,
    no checkpoint (the interval is the whole job, so none is taken)."""
    r = copy.deepcopy(raw)
    if config.startswith("ckpt-"):
        r["checkpoint"]["interval_h"] = int(config[5:]) / 60.0
        r["strategy"] = {"name": "full"}
    else:
        r["checkpoint"]["interval_h"] = r["job"]["duration_h"]
        r["strategy"] = {
            "name": "ecrm",
            "k": int(config[6:]),
            "m": 1,
            "rebuild_throughput": REBUILD_THROUGHPUT,
        }
    return sc.validate(r, f"ecrec.py {r['name']} {config}")


CONFIGS = [f"ckpt-{int(60 * t)}" for t in CKPT_INTERVALS_H] + [f"ecrm-k{k}" for k in ECRM_K]


def ecrm_facts(s: sc.Scenario) -> dict[str, float]:
    """Parity slowdown x, rebuild seconds and memory of an ``ecrm`` scenario (cprsim's own forms)."""
    return strategies.get("ecrm").describe(s, costs_of(s))


@dataclass(frozen=True)
class Rep:
    """One replication's figures (seconds; overhead a fraction of W)."""

    wall_s: float
    overhead: float
    recovery_s: float  #: full: reschedule + load + re-executed; ECRM: failure -> end of the rebuild
    lost_wall_s: float  #: wall(with the failure) - wall(without it)
    resume_s: float  #: until training runs again: full: reschedule + load; ECRM: 0 (it never stops)


def failure_free_overhead(s: sc.Scenario) -> float:
    """Overhead of one failure-free run (deterministic)."""
    res, _ = simulate_one(s, 0)
    return res.overhead


def one_rep(s: sc.Scenario, rep: int, base_wall: float, schedule: list | None = None) -> Rep:
    """One replication with one embedding-server failure (injected by the scenario, or at a
    given time by ``schedule``), against ``base_wall``, the same configuration without it."""
    res, ev = simulate_one(s, rep, record=True, schedule=schedule)
    if s.strategy.name == "ecrm":
        t_fail = next(e.time_s for e in ev if e.kind == "fail")
        rebuilt = max((e.value for e in ev if e.kind == "rebuild_start"), default=t_fail)
        rec, resume = rebuilt - t_fail, res.reschedule_s + res.load_s
    else:
        rec, resume = res.reschedule_s + res.load_s + res.lost_s, res.reschedule_s + res.load_s
    return Rep(res.wall_s, res.overhead, rec, res.wall_s - base_wall, resume)


def recovery_reps(s_fail: sc.Scenario, s_free: sc.Scenario, n: int) -> list[Rep]:
    """Replications 0..n-1 with one injected embedding-server failure, paired with the same
    configuration without it (deterministic: one run)."""
    base, _ = simulate_one(s_free, 0)
    return [one_rep(s_fail, i, base.wall_s) for i in range(n)]


def paper_protocol(model: str, config: str, reschedule_s: float = RESCHEDULE_S) -> Rep:
    """ECRec's recovery runs: 15 min of training, one parameter server killed, 60 min more. The
    run starts from a checkpoint (else Ckpt-30/60 could not recover a failure at 15 min), so full
    recovery re-executes the 15 min; deterministic."""
    s = configured(raw_scenario(model, 1.25, False, reschedule_s=reschedule_s), config)
    base, _ = simulate_one(s, 0)
    return one_rep(s, 0, base.wall_s, schedule=[(900.0, (s.cluster.trainers,), (reschedule_s,))])


RHO_SWEEP_S = (10.0, 60.0, 100.0, 300.0)


def protocol_ratio_vs_rho(model: str) -> list[tuple[float, float]]:
    """ECRec's protocol: recovery-time ratio Ckpt-30 vs ECRM-k4 against the replacement time."""
    return [
        (
            r,
            paper_protocol(model, "ckpt-30", r).recovery_s
            / paper_protocol(model, "ecrm-k4", r).recovery_s,
        )
        for r in RHO_SWEEP_S
    ]


def sensitivity(model: str = "Criteo-8S") -> list[tuple[float, float, float, float]]:
    """Failure-free reduction (ECRM-k4 vs Ckpt-30, Ckpt-60) against the two assumptions it rests
    on: the checkpoint write bandwidth and the throughput (which sets the parity traffic)."""
    out = []
    for w in (1.25, 3.75, 12.5):
        for f in (0.5, 1.0, 2.0):
            ov = {
                c: failure_free_overhead(
                    configured(
                        raw_scenario(
                            model, STEADY_H, False, write_gbps=w, samples_per_s=f * SAMPLES_PER_S
                        ),
                        c,
                    )
                )
                for c in ("ckpt-30", "ckpt-60", "ecrm-k4")
            }
            out.append((w, f, 1 - ov["ecrm-k4"] / ov["ckpt-30"], 1 - ov["ecrm-k4"] / ov["ckpt-60"]))
    return out


def ratio_estimate(num: list[float], den: list[float]) -> Estimate:
    """The estimate of the per-replication ratios num / den."""
    return estimate([a / b for a, b in zip(num, den)])


def fmt(e: Estimate, scale: float = 1.0, digits: int = 1, unit: str = "") -> str:
    """An estimate as "mean [lo, hi], P50 x, P90 y"."""
    f = f"{{:.{digits}f}}"
    return (
        f"{f.format(scale * e.mean)}{unit} [{f.format(scale * e.lo)}, {f.format(scale * e.hi)}], "
        f"P50 {f.format(scale * e.p50)}, P90 {f.format(scale * e.p90)}"
    )


def run(models: list[str], n: int, out: Path) -> dict:
    """Measurements A, B, B' and A' for ``models`` (``n`` replications); writes ecrec.csv and ecrec/."""
    rows: list[list] = []
    result: dict = {"A": {}, "B": {}, "P": {}, "R": {}, "facts": {}}
    for model in models:
        steady = {c: configured(raw_scenario(model, STEADY_H, False), c) for c in CONFIGS}
        fail = {c: configured(raw_scenario(model, RECOVERY_H, True), c) for c in CONFIGS}
        free = {c: configured(raw_scenario(model, RECOVERY_H, False), c) for c in CONFIGS}
        for c in CONFIGS:
            atomic_write_text(
                out / "ecrec" / f"{model}-{c}.toml",
                f"# ecrec.py (cprsim {__version__}): measurement B, seed {fail[c].seed}\n"
                + sc.to_toml(sc.effective_dict(fail[c])),
            )
        c0 = costs_of(fail["ckpt-30"])
        result["facts"][model] = {
            "save_s": c0.save_s,
            "load_s": c0.load_s,
            "gb": c0.embedding_bytes / 1e9,
            **{f"k{k}": ecrm_facts(fail[f"ecrm-k{k}"]) for k in ECRM_K},
        }
        a = {c: failure_free_overhead(steady[c]) for c in CONFIGS}
        result["A"][model] = a
        reps = {c: recovery_reps(fail[c], free[c], n) for c in CONFIGS}
        b: dict = {}
        for ck in CONFIGS[:2]:
            for ec in CONFIGS[2:]:
                f, e = reps[ck], reps[ec]
                b[(ck, ec)] = {
                    "recovery_ratio": ratio_estimate(
                        [x.recovery_s for x in f], [y.recovery_s for y in e]
                    ),
                    "lost_ratio": ratio_estimate(
                        [x.lost_wall_s for x in f], [y.lost_wall_s for y in e]
                    ),
                    "reduction": estimate(
                        [1 - y.overhead / x.overhead for x, y in zip(f, e)], non_negative=False
                    ),
                    "resume_ratio": ratio_estimate(
                        [x.resume_s for x in f], [y.recovery_s for y in e]
                    ),
                }
        for c in CONFIGS:
            b[c] = {
                "recovery_s": estimate([x.recovery_s for x in reps[c]]),
                "lost_wall_s": estimate([x.lost_wall_s for x in reps[c]]),
                "overhead": estimate([x.overhead for x in reps[c]]),
            }
            rows += [
                [model, c, i, x.wall_s, x.overhead, x.recovery_s, x.lost_wall_s]
                for i, x in enumerate(reps[c])
            ]
        result["B"][model] = b
        result["P"][model] = {c: paper_protocol(model, c) for c in CONFIGS}
        result["R"][model] = protocol_ratio_vs_rho(model)
        print(f"{model}: done", flush=True)
    result["S"] = sensitivity()
    atomic_write_csv(
        out / "ecrec.csv",
        ["model", "config", "replication", "wall_s", "overhead", "recovery_s", "lost_wall_s"],
        rows,
    )
    return result


def report(res: dict, models: list[str], n: int) -> str:
    """The tables of ecrec.md from :func:`run`'s result."""
    md = [
        f"# ECRM/ECRec vs checkpointing in cprsim (ecrec.py, cprsim {__version__}, {n} replications)",
        "",
        "## Costs of the setting",
        "",
        "| model | embedding GB | save (s) | full load (s) | parity slowdown | rebuild k=2 / k=4 (s) |",
        "|---|---|---|---|---|---|",
    ]
    for m in models:
        f = res["facts"][m]
        md.append(
            f"| {m} | {f['gb']:.1f} | {f['save_s']:.1f} | {f['load_s']:.1f} | "
            f"{100 * f['k4']['parity_slowdown']:.2f}% | "
            f"{f['k2']['rebuild_s']:.1f} / {f['k4']['rebuild_s']:.1f} |"
        )
    md += [
        "",
        f"## A. Failure-free overhead ({STEADY_H:g} h of training; deterministic)",
        "",
        "| model | Ckpt-30 | Ckpt-60 | ECRM-k2 | ECRM-k4 | reduction vs Ckpt-30 | reduction vs Ckpt-60 |",
        "|---|---|---|---|---|---|---|",
    ]
    for m in models:
        a = res["A"][m]
        red = [1 - a["ecrm-k4"] / a[c] for c in CONFIGS[:2]]
        md.append(
            f"| {m} | {100 * a['ckpt-30']:.2f}% | {100 * a['ckpt-60']:.2f}% | {100 * a['ecrm-k2']:.2f}% | "
            f"{100 * a['ecrm-k4']:.2f}% | {100 * red[0]:.0f}% | {100 * red[1]:.0f}% |"
        )
    md += [
        "",
        f"## B. One embedding server killed at a random time of a {RECOVERY_H:g} h job "
        "(mean [95% CI], P50, P90 over replications)",
        "",
        "| model | config | recovery time (s) | time lost to the failure (s) | total overhead (%) |",
        "|---|---|---|---|---|",
    ]
    for m in models:
        for c in CONFIGS:
            b = res["B"][m][c]
            md.append(
                f"| {m} | {c} | {fmt(b['recovery_s'], digits=0)} | {fmt(b['lost_wall_s'], digits=0)} | "
                f"{fmt(b['overhead'], 100, 2)} |"
            )
    md += [
        "",
        "Paired ratios (per replication, same failure time):",
        "",
        "| model | checkpointing vs ECRM | recovery-time ratio | time-lost ratio | overhead reduction (%) |",
        "|---|---|---|---|---|",
    ]
    for m in models:
        for (ck, ec), v in ((k, v) for k, v in res["B"][m].items() if isinstance(k, tuple)):
            md.append(
                f"| {m} | {ck} vs {ec} | {fmt(v['recovery_ratio'])} | {fmt(v['lost_ratio'], digits=0)} | "
                f"{fmt(v['reduction'], 100, 0)} |"
            )
    md += [
        "",
        "Without the re-executed work (full recovery: rescheduling + load, until training runs again) "
        "against ECRM's rebuild:",
        "",
        "| model | Ckpt-30 vs ECRM-k2 | Ckpt-30 vs ECRM-k4 |",
        "|---|---|---|",
    ]
    for m in models:
        b = res["B"][m]
        md.append(
            f"| {m} | {b[('ckpt-30', 'ecrm-k2')]['resume_ratio'].mean:.2f}x | "
            f"{b[('ckpt-30', 'ecrm-k4')]['resume_ratio'].mean:.2f}x |"
        )
    md += [
        "",
        "## B'. ECRec's recovery protocol: a server killed 15 min into a 75 min run (deterministic)",
        "",
        "| model | recovery time Ckpt-30 / Ckpt-60 / ECRM-k2 / ECRM-k4 (s) | ratio Ckpt-30 vs ECRM-k2 / k4 | "
        "time lost Ckpt-30 / ECRM-k4 (s) |",
        "|---|---|---|---|",
    ]
    for m in models:
        p = res["P"][m]
        md.append(
            f"| {m} | {' / '.join(f'{p[c].recovery_s:.0f}' for c in CONFIGS)} | "
            f"{p['ckpt-30'].recovery_s / p['ecrm-k2'].recovery_s:.1f}x / "
            f"{p['ckpt-30'].recovery_s / p['ecrm-k4'].recovery_s:.1f}x | "
            f"{p['ckpt-30'].lost_wall_s:.0f} / {p['ecrm-k4'].lost_wall_s:.1f} |"
        )
    md += [
        "",
        "The same ratio (Ckpt-30 vs ECRM-k4) against the time to replace the killed server "
        f"(assumed {RESCHEDULE_S:g} s above):",
        "",
        "| model | " + " | ".join(f"{r:g} s" for r in RHO_SWEEP_S) + " |",
        "|---|" + "---|" * len(RHO_SWEEP_S),
    ]
    for m in models:
        md.append(f"| {m} | " + " | ".join(f"{v:.1f}x" for _, v in res["R"][m]) + " |")
    md += [
        "",
        "## A'. Criteo-8S, failure-free reduction (ECRM-k4 vs Ckpt-30 / Ckpt-60) against the assumptions",
        "",
        "| checkpoint write GB/s (5 servers) | throughput x 0.5 | x 1 | x 2 |",
        "|---|---|---|---|",
    ]
    for w in sorted({r[0] for r in res["S"]}):
        cells = [f"{100 * r[2]:.0f}% / {100 * r[3]:.0f}%" for r in res["S"] if r[0] == w]
        md.append(f"| {w:g} | " + " | ".join(cells) + " |")
    md += [
        "",
        f"## C. Throughput during a rebuild: {100 * REBUILD_THROUGHPUT:.0f}% of ECRM's steady rate "
        f"(an input: strategy.rebuild_throughput, from ECRec's 7-13% drop)",
        "",
    ]
    return "\n".join(md) + "\n"


def main() -> None:
    """Run the measurements, write ecrec.md (and the README's copy), print it."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replications", type=int, default=1000)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--out", type=Path, default=Path(__file__).with_name("out"))
    a = ap.parse_args()
    models = [m.strip() for m in a.models.split(",")]
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        raise SystemExit(f"unknown model(s) {', '.join(unknown)}; choose from {', '.join(MODELS)}")
    res = run(models, a.replications, a.out)
    text = report(res, models, a.replications)
    atomic_write_text(a.out / "ecrec.md", text)
    atomic_write_text(a.out / "tables" / "ecrec.md", for_readme(text))
    print(text)


def for_readme(text: str) -> str:
    """The report as a README section's body: the title dropped, each heading two levels down."""
    lines = [ln for ln in text.splitlines() if not ln.startswith("# ")]
    lines = ["##" + ln if ln.startswith("## ") else ln for ln in lines]
    return "\n".join(lines).strip() + "\n"


if __name__ == "__main__":
    main()
