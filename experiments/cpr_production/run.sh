#!/usr/bin/env bash
# Regenerate the CPR headline (tables + figure) and the interval trade-off sweep into out/, then
# splice the tables into README.md (a few minutes on 2 cores). Extra arguments go to reproduce.py.
# QUICK=1: the same steps on tiny sizes (seconds; README untouched); OUT=DIR: outputs there;
# JOBS=N: sweep processes (default 2). See ../common.sh.
. "$(dirname "$0")/../common.sh"
if quick; then
  "$PY" reproduce.py --out "$OUT" --replications 30 --search-replications 30 --validate 30 --stability 30 "$@"
else
  "$PY" reproduce.py --out "$OUT" "$@"
fi
SWEEP=$(quick_sweep sweep.toml replications=4 checkpoint.interval_h=0.25,0.7,2.0 plan.replications=30)
rm -rf "$OUT/sweep"
"${CPRSIM[@]}" sweep "$SWEEP" --out "$OUT/sweep" --jobs "$JOBS"
"$PY" tables.py --out "$OUT"
# CPR-MFU/SSU against the paper's 0.53-0.68%: which inputs move the overhead (a few minutes, one process)
if quick; then
  "$PY" mfu_gap.py --out "$OUT" --replications 8 --max-replications 8 --plan-replications 30 --search-replications 30
else
  "$PY" mfu_gap.py --out "$OUT"
fi
"${CPRSIM[@]}" plot overhead "$OUT/sweep" --out "$OUT/overhead_vs_interval.png"
"${CPRSIM[@]}" plot overhead "$OUT/sweep" --metric ckpt_overhead --out "$OUT/ckpt_overhead_vs_interval.png"
"${CPRSIM[@]}" plot pls "$OUT/sweep" --out "$OUT/pls_vs_interval.png"
"${CPRSIM[@]}" plot breakdown "$OUT/sweep" --where checkpoint.interval_h=0.7 --out "$OUT/breakdown_0.7h.png"
finish
