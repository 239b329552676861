#!/usr/bin/env bash
# Regenerate the CPR headline (table + figure) and the interval trade-off sweep into out/
# (a few minutes on 2 cores). Extra arguments go to reproduce.py.
set -euo pipefail
cd "$(dirname "$0")"
PY="${PYTHON:-../../.venv/bin/python}"
CPRSIM=("$PY" -m cprsim)
"$PY" reproduce.py "$@"
rm -rf out/sweep
"${CPRSIM[@]}" sweep sweep.toml --out out/sweep --jobs "${JOBS:-2}"
"${CPRSIM[@]}" plot overhead out/sweep --out out/overhead_vs_interval.png
"${CPRSIM[@]}" plot overhead out/sweep --metric ckpt_overhead --out out/ckpt_overhead_vs_interval.png
"${CPRSIM[@]}" plot pls out/sweep --out out/pls_vs_interval.png
"${CPRSIM[@]}" plot breakdown out/sweep --where checkpoint.interval_h=0.7 --out out/breakdown_0.7h.png
