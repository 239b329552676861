"""Benchmark: the end-to-end check of the simulator's cost model, at a chosen scale, repeated.

Runs :func:`cprsim.calibrate.costs.end_to_end` (what ``cprsim calibrate`` writes as
``[end_to_end]``, there with fewer repetitions) on seed ``--seed``'s data of ``--preset``: plain
and checkpointed trainings in counterbalanced pairs, real ``torch.save`` + fsync of every shard
every ``interval`` iterations (by default the power rule's: a predicted overhead of
``--target-overhead``) and the preset's failures reloading their shard from disk. Prints each
repetition, each arm's mean / P50 / P90 / min / max, the plain arm's run-to-run CV, the paired
differences measured - simulated overhead with their 95% CI (Student t), the tolerance and the
verdict, and the load average before and after (the machine may be shared: rerun if it was busy).
Usage: python benchmarks/end_to_end.py [--preset quick] [--repeats 10] [--threads-per-job 1]
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as `cprsim calibrate` (before torch loads)

from cprsim.calibrate import costs as C
from cprsim.calibrate import runner as R


def _pct(x: float) -> str:
    return f"{100 * x:+7.2f}%"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", choices=sorted(R.PRESETS), default="quick")
    ap.add_argument("--repeats", type=int, default=10, help="pairs (plain + checkpointed runs)")
    ap.add_argument("--threads-per-job", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--interval",
        type=int,
        default=None,
        help="iterations between saves (default: the power rule's)",
    )
    ap.add_argument("--target-overhead", type=float, default=C.TARGET_OVERHEAD)
    a = ap.parse_args()
    p = R.PRESETS[a.preset]
    t = time.perf_counter()
    prep = R.prepared(p, a.seed)
    n = prep.n_iters
    print(
        f"preset {a.preset}: {n} iterations of {p.batch} samples, {p.n_shards} shards, "
        f"{p.failures_per_run} failures, seed {a.seed}; {a.repeats} pairs; {a.threads_per_job} torch "
        f"thread(s); {os.cpu_count()} cores; data {time.perf_counter() - t:.1f} s"
    )
    fails = R.failure_schedule(n, p.n_shards, p.failures_per_run, a.seed)
    e = C.end_to_end(
        prep,
        p,
        a.seed,
        a.interval,
        fails,
        repeats=a.repeats,
        threads=a.threads_per_job,
        target_overhead=a.target_overhead,
    )
    print(
        f"interval {e['interval_iterations']} iterations ({e['interval_rule']}): {e['checkpoints']} "
        f"checkpoints and {e['failures']} shard reloads per checkpointed run; load average before "
        f"{e['load_average_before']:.2f}"
    )
    print(
        f"{'rep':>3} {'order':>5} {'plain s':>8} {'ckpt s':>8} {'save s':>8} {'load s':>8} "
        f"{'measured':>9} {'simulated':>9} {'meas-sim':>9}"
    )
    for i in range(e["repeats"]):
        print(
            f"{i:3d} {'PC' if i % 2 == 0 else 'CP':>5} {e['plain_wall_s']['values'][i]:8.3f} "
            f"{e['checkpointed_wall_s']['values'][i]:8.3f} {e['costs']['save_s'][i]:8.4f} "
            f"{e['costs']['shard_load_s'][i]:8.4f} {_pct(e['measured']['values'][i]):>9} "
            f"{_pct(e['simulated']['values'][i]):>9} {_pct(e['paired_difference']['values'][i]):>9}"
        )
    print(f"{'':22}{'mean':>9} {'P50':>9} {'P90':>9} {'min':>9} {'max':>9}")
    for key, label, fmt in (
        ("plain_wall_s", "plain wall s", "{:9.3f}"),
        ("checkpointed_wall_s", "checkpointed wall s", "{:9.3f}"),
        ("measured", "measured overhead", None),
        ("simulated", "simulated overhead", None),
        ("paired_difference", "measured - simulated", None),
    ):
        s = e[key]
        cells = [
            fmt.format(s[k]) if fmt else f"{_pct(s[k]):>9}"
            for k in ("mean", "p50", "p90", "min", "max")
        ]
        print(f"{label:<22}" + " ".join(cells))
    print(
        f"plain run-to-run CV {100 * e['plain_cv']:.2f}%; "
        f"simulated overhead / CV = {e['overhead_to_cv']:.1f}"
    )
    print(
        f"measured - simulated: {_pct(e['difference'])}, 95% CI [{_pct(e['difference_lo'])}, "
        f"{_pct(e['difference_hi'])}] (Student t, {e['repeats'] - 1} df, t = {e['t_quantile']:.3f}); "
        f"tolerance +-{100 * e['tolerance']:.2f} points ({e['tolerance_rel']:.0%} of the simulated overhead)"
    )
    print(f"verdict: {e['verdict']}")
    print(
        f"check {e['duration_s']:.1f} s (pilot excluded); "
        f"load average after: {e['load_average_after']:.2f}"
    )


if __name__ == "__main__":
    main()
