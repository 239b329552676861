#!/usr/bin/env bash
# Regenerate the what-if figures into out/ (about a minute on 2 cores). JOBS=N for N processes.
set -euo pipefail
cd "$(dirname "$0")"
PY="${PYTHON:-../../.venv/bin/python}"
CPRSIM=("$PY" -m cprsim)
rm -rf out/sweep
"${CPRSIM[@]}" sweep sweep.toml --out out/sweep --jobs "${JOBS:-2}"
for mtbf in 10.0 5.0; do
  for bw in 10.0 5.0; do
    tag="mtbf${mtbf%.0}h_write${bw%.0}gbps"
    w=(--where "failures.domains.0.failure.mtbf_h=$mtbf" --where "storage.write_gbps=$bw")
    "${CPRSIM[@]}" plot overhead out/sweep "${w[@]}" --out "out/overhead_${tag}.png"
    "${CPRSIM[@]}" plot pls out/sweep "${w[@]}" --out "out/pls_${tag}.png"
  done
done
"${CPRSIM[@]}" plot breakdown out/sweep --where checkpoint.interval_h=0.7 --out out/breakdown_0.7h.png
# the same with fixed 4-server hosts as failure domains (ECRM stripes placed across hosts)
rm -rf out/sweep-hosts
"${CPRSIM[@]}" sweep sweep-hosts.toml --out out/sweep-hosts --jobs "${JOBS:-2}"
for mtbf in 50.0 25.0; do
  w=(--where "failures.domains.0.failure.mtbf_h=$mtbf" --where "storage.write_gbps=10.0")
  "${CPRSIM[@]}" plot overhead out/sweep-hosts "${w[@]}" --out "out/hosts_overhead_mtbf${mtbf%.0}h_write10gbps.png"
done
