"""Points `cprsim sweep` cannot run: the ones where some replication never finishes.

A sweep stops at the first replication that raises (the fleet ran out of machines under the
retirement policy, or the job stopped after too many failure events; cprsim's one-line error
names the point's settings and the replication), and with it every other point of the sweep. This
script runs such points replication by replication through cprsim's Python API
(``cprsim.sim.engine.simulate_one``, the same code and seeds as `cprsim sweep`: replication r of a
point is the sweep's replication r) and counts the outcomes:

* ``finished``: the job completed (its wall time and overhead are kept);
* ``exhausted``: retirement left fewer machines than node slots (``FleetExhausted``);
* ``runaway``: more than ``--max-failure-events`` failure events (default 5,000; cprsim's own cap
  is 200,000, ``cprsim.sim.engine.MAX_FAILURE_EVENTS``, lowered here only to save time: the
  50 h job has ~5 failures when it goes well, and a replication stopped at 5,000 has run for
  thousands of hours; its wall time at the stop is kept as a lower bound).

Per point: the counts, the share of replications whose wall time exceeds 2 W and 10 W (W = 50 h,
the failure-free time; a runaway counts by its wall time at the stop), and the P50/P90/P99 of the
overhead over the replications that did not run out of machines, a runaway counting as infinite
(so a percentile is "inf" when more than its share of replications ran away). The mean overhead is
given only when every replication finished; the mean number of machines retired per finished
replication.

The points (group ``retirement``; ``--only`` selects a group): dlrm-spares as built in
(retirement on: 3 failures in 24 h) on the pools grid (standbys 0, 1, 2, 4, 8 x spares 0, 2, 4, 8,
16) and on the bad-machine grid (bad_fraction 0 ... 0.2 x spares 8, 16, 32), 200 replications
each. (Without retirement every point of the experiment's grids finishes since bad machines fail
20x as often rather than 20x the hazard: those points are in the sweeps, pools.toml and
escalation.toml.)

Writes out/feasibility/summary.csv (one row per point) and out/feasibility/not_finished.csv (one
row per replication that did not finish, with cprsim's message).

Usage: python feasibility.py [--jobs 2] [--only GROUP] [--replications N] [--out out]   (--only rewrites
the summary with that group alone; --replications replaces each point's 200, for quick mode)
"""

from __future__ import annotations

import argparse
import csv
import itertools
import math
import multiprocessing as mp
import re
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
HOUR = 3600.0
W_H = 50.0  #: dlrm-spares' failure-free time
WALL = re.compile(r"([0-9.e+]+) h of wall time")
#: the scenario name and replication before cprsim's message and the advice after it
SHORT = re.compile(
    r"^([\w.-]+(, replication \d+)?: )+|: (failures come faster|add lifecycle).*$|,?( at | \(|of )?[0-9.e+]+ h of wall time\)?"
)


def points() -> list[tuple[str, str, dict, int]]:
    """(group, scenario, overrides, replications)."""
    out: list[tuple[str, str, dict, int]] = []
    for sb, sp in itertools.product([0, 1, 2, 4, 8], [0, 2, 4, 8, 16]):
        out.append(
            ("retirement", "dlrm-spares", {"lifecycle.standbys": sb, "lifecycle.spares": sp}, 200)
        )
    for bf, sp in itertools.product([0.0, 0.025, 0.05, 0.1, 0.2], [8, 16, 32]):
        out.append(
            (
                "retirement",
                "dlrm-spares",
                {"lifecycle.health.bad_fraction": bf, "lifecycle.spares": sp},
                200,
            )
        )
    return out


_CACHE: dict = {}


def run_one(task: tuple[int, str, tuple, int, int]) -> tuple[int, int, str, float, float, str, int]:
    """(point, rep, outcome, wall_h, overhead, message, machines retired) of replication ``rep`` of a point."""
    from cprsim import scenario as sc
    from cprsim.errors import InputError
    from cprsim.sim import engine

    i, scen, items, rep, cap = task
    engine.MAX_FAILURE_EVENTS = cap
    key = (scen, items)
    if key not in _CACHE:
        _CACHE[key] = sc.load(scen, dict(items))
    try:
        res, _ = engine.simulate_one(_CACHE[key], rep)
    except InputError as e:
        msg = str(e)
        outcome = (
            "exhausted"
            if "fewer machines than node slots" in msg or "ran out of machines" in msg
            else "runaway"
        )
        m = WALL.search(msg)  # the wall time at which it stopped
        return i, rep, outcome, float(m.group(1)) if m else math.nan, math.inf, msg, -1
    return i, rep, "finished", res.wall_s / HOUR, res.overhead, "", res.machines_retired


def _pct(x: np.ndarray, p: float) -> str:
    """The P-th percentile, an actual value (``inf`` for a runaway), or "" for no values."""
    return f"{np.percentile(x, p, method='higher'):.6g}" if len(x) else ""


def main() -> None:
    """Run every replication of the points, count the outcomes, write the two CSV files."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", choices=["retirement"])
    ap.add_argument("--max-failure-events", type=int, default=5_000)
    ap.add_argument(
        "--replications", type=int, help="replications per point (default: each point's own, 200)"
    )
    ap.add_argument("--out", type=Path, default=HERE / "out")
    a = ap.parse_args()
    pts = [p for p in points() if a.only is None or p[0] == a.only]
    if a.replications:
        pts = [(g, scen, ov, a.replications) for g, scen, ov, _ in pts]
    tasks = [
        (i, scen, tuple(sorted(ov.items())), r, a.max_failure_events)
        for i, (_, scen, ov, n) in enumerate(pts)
        for r in range(n)
    ]
    tasks.sort(key=lambda t: (t[3], t[0]))  # spread each point's slow replications over the workers
    results: dict[int, list] = {i: [] for i in range(len(pts))}
    with mp.get_context("fork").Pool(a.jobs) as pool:
        for row in pool.imap_unordered(run_one, tasks, chunksize=4):
            results[row[0]].append(row)
    outdir = a.out / "feasibility"
    outdir.mkdir(parents=True, exist_ok=True)
    keys = [
        "lifecycle.standbys",
        "lifecycle.spares",
        "lifecycle.repair.escalate_p",
        "lifecycle.health.bad_fraction",
    ]
    with (
        (outdir / "summary.csv").open("w", newline="") as f,
        (outdir / "not_finished.csv").open("w", newline="") as g,
    ):
        w = csv.writer(f)
        w.writerow(
            [
                "group",
                "scenario",
                *keys,
                "replications",
                "finished",
                "exhausted",
                "runaway",
                "first_not_finished",
                "share_wall_gt_2W",
                "share_wall_gt_10W",
                "wall_h_max_finished",
                "overhead_mean",
                "overhead_p50",
                "overhead_p90",
                "overhead_p99",
                "retired_mean_finished",
            ]
        )
        wg = csv.writer(g)
        wg.writerow(
            ["group", "scenario", *keys, "replication", "outcome", "wall_h_at_stop", "message"]
        )
        for i, (group, scen, ov, n) in enumerate(pts):
            rows = sorted(results[i], key=lambda r: r[1])
            fin = [r for r in rows if r[2] == "finished"]
            alive = [r for r in rows if r[2] != "exhausted"]  # finished or ran away
            wall = np.array([r[3] for r in alive])
            ovh = np.array([r[4] for r in alive])  # a runaway's is inf
            bad = [r for r in rows if r[2] != "finished"]
            q = _pct
            share = lambda k, wall=wall: f"{np.mean(wall > k * W_H):.4g}" if len(wall) else ""
            wfin = [r[3] for r in fin]
            name = Path(scen).stem
            vals = [ov.get(k, "") for k in keys]
            w.writerow(
                [
                    group,
                    name,
                    *vals,
                    n,
                    len(fin),
                    sum(r[2] == "exhausted" for r in rows),
                    sum(r[2] == "runaway" for r in rows),
                    bad[0][1] if bad else "",
                    share(2),
                    share(10),
                    f"{max(wfin):.6g}" if wfin else "",
                    f"{ovh.mean():.6g}" if fin and len(fin) == n else "",
                    q(ovh, 50),
                    q(ovh, 90),
                    q(ovh, 99),
                    f"{np.mean([r[6] for r in fin]):.4g}" if fin else "",
                ]
            )
            for r in bad:
                wg.writerow([group, name, *vals, r[1], r[2], f"{r[3]:.6g}", SHORT.sub("", r[5])])
            print(
                f"{group:20s} {name:22s} {ov}: {len(fin)}/{n} finished, "
                f"{sum(r[2] == 'exhausted' for r in rows)} exhausted, {sum(r[2] == 'runaway' for r in rows)} runaway",
                flush=True,
            )


if __name__ == "__main__":
    main()
