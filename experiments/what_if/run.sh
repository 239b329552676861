#!/usr/bin/env bash
# Regenerate the what-if figures and tables into out/ and splice the tables into README.md (about
# a minute on 2 cores). QUICK=1: the same steps on tiny sizes (seconds; README untouched);
# OUT=DIR: outputs there; JOBS=N: sweep processes (default 2). See ../common.sh.
. "$(dirname "$0")/../common.sh"
SWEEP=$(quick_sweep sweep.toml replications=3 checkpoint.interval_h=0.35,0.7,4.0)
rm -rf "$OUT/sweep"
"${CPRSIM[@]}" sweep "$SWEEP" --out "$OUT/sweep" --jobs "$JOBS"
for mtbf in 10.0 5.0; do
  for bw in 10.0 5.0; do
    tag="mtbf${mtbf%.0}h_write${bw%.0}gbps"
    w=(--where "failures.domains.0.failure.mtbf_h=$mtbf" --where "storage.write_gbps=$bw")
    "${CPRSIM[@]}" plot overhead "$OUT/sweep" "${w[@]}" --out "$OUT/overhead_${tag}.png"
    "${CPRSIM[@]}" plot pls "$OUT/sweep" "${w[@]}" --out "$OUT/pls_${tag}.png"
  done
done
"${CPRSIM[@]}" plot breakdown "$OUT/sweep" --where checkpoint.interval_h=0.7 --out "$OUT/breakdown_0.7h.png"
# the same with fixed 4-server hosts as failure domains (ECRM stripes placed across hosts)
SWEEP=$(quick_sweep sweep-hosts.toml replications=3 checkpoint.interval_h=0.7,2.0)
rm -rf "$OUT/sweep-hosts"
"${CPRSIM[@]}" sweep "$SWEEP" --out "$OUT/sweep-hosts" --jobs "$JOBS"
for mtbf in 50.0 25.0; do
  w=(--where "failures.domains.0.failure.mtbf_h=$mtbf" --where "storage.write_gbps=10.0")
  "${CPRSIM[@]}" plot overhead "$OUT/sweep-hosts" "${w[@]}" --out "$OUT/hosts_overhead_mtbf${mtbf%.0}h_write10gbps.png"
done
# the write bandwidth from 2.5 to 40 GB/s: each strategy's best overhead against it (the frontier)
SWEEP=$(quick_sweep sweep-bandwidth.toml replications=3 storage.write_gbps=5.0,20.0 checkpoint.interval_h=0.7,2.0)
rm -rf "$OUT/sweep-bandwidth"
"${CPRSIM[@]}" sweep "$SWEEP" --out "$OUT/sweep-bandwidth" --jobs "$JOBS"
"${CPRSIM[@]}" plot frontier "$OUT/sweep-bandwidth" --x storage.write_gbps --out "$OUT/frontier_write_gbps.png"
"$PY" table.py --out "$OUT"
finish
