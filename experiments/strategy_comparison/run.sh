#!/usr/bin/env bash
# Regenerate the strategy comparison (tables + figures), the 1,024-server interval sweep and the
# comparison with ECRec's published figures into out/, then splice the tables into README.md
# (about 7 min on 2 cores). Extra arguments go to compare.py (after run.sh's --replications 40,
# the published setting: a later --replications wins). QUICK=1: the same steps on tiny sizes
# (seconds; README untouched); OUT=DIR: outputs there; JOBS=N: processes (default 2). See
# ../common.sh.
. "$(dirname "$0")/../common.sh"
if quick; then
  "$PY" compare.py --out "$OUT" --jobs "$JOBS" --servers 16,64 --worse 1,10 --replications 30 \
    --search-replications 30 "$@"
else
  "$PY" compare.py --out "$OUT" --jobs "$JOBS" --replications 40 "$@"
fi
SWEEP=$(quick_sweep sweep.toml replications=2 checkpoint.interval_h=0.6,1.2)
rm -rf "$OUT/sweep"
"${CPRSIM[@]}" sweep "$SWEEP" --out "$OUT/sweep" --jobs "$JOBS"
"$PY" tables.py --out "$OUT"
"${CPRSIM[@]}" plot overhead "$OUT/sweep" --out "$OUT/sweep_overhead_vs_interval.png"
"${CPRSIM[@]}" plot pls "$OUT/sweep" --out "$OUT/sweep_pls_vs_interval.png"
"${CPRSIM[@]}" plot breakdown "$OUT/sweep" --where checkpoint.interval_h=1.2 --out "$OUT/sweep_breakdown_1.2h.png"
if quick; then
  "$PY" ecrec.py --out "$OUT" --replications 5 --models Criteo
else
  "$PY" ecrec.py --out "$OUT"
fi
finish
